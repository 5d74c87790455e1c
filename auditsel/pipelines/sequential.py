"""Stop an audit as soon as the claim is refuted: looks at a geometric schedule, alpha spent.

Contract. `audit_until_refuted(tune, score, *, games, looks, claimed_epsilon, confidence, ...)`
audits the same sequence of games (game g's numbers depend on (seed, g) only:
`auditsel.pipelines.pipeline`) at `looks` sample sizes ::

    n_j = ceil(games / 2^(looks - j)) rounded up to a multiple of the chunk size, j = 1..looks
    (the last look: all `games`),

each look an ordinary audit of the first n_j games at confidence 1 - (1 - confidence) / looks,
and stops at the first look whose eps_L exceeds the claim. Validity (Bonferroni over the
looks, alpha spending with equal shares): if the claim is true, each look refutes it with
probability at most (1 - confidence) / looks, so the probability that any look does is at most
1 - confidence, however the looks depend on one another: the verdict "refuted" holds at
`confidence`, as one audit's does. Without a refutation the last look's eps_L stands (valid at
its own, corrected, confidence: a little below a single audit's of all games: the price of
looking early). Several canaries (a tuple, or "both") are audited at every look as
`audit_pipeline` audits them, each at confidence 1 - (1 - confidence) / (looks m): the union
bound over the looks and the m canaries. The games of a look are kept (checkpoints: `checkpoint_dir`, out_dir's, or a
temporary folder) and reused by the next, so stopping at look j costs n_j games, not more.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from auditsel.errors import integer, number
from auditsel.experiments.report import text_table
from auditsel.files import atomic_write_text
from auditsel.pipelines.default_canaries import resolve_canary
from auditsel.pipelines.game import CHUNK_SIZE, ScoreFn, TuneFn
from auditsel.pipelines.pipeline import PipelineAudit, _audit_pipeline
from auditsel.pipelines.pipeline_result import LookEntry, PipelineResult, SequentialEntry

__all__ = ["LOOKS", "audit_until_refuted", "look_schedule", "looks_text"]

LOOKS = 4


def look_schedule(games: int, looks: int, chunk_size: int = CHUNK_SIZE) -> list[int]:
    """The looks' sample sizes: games / 2^(looks - j), j = 1..looks, rounded up to whole chunks
    (the last: `games`), without repeats."""
    games, looks = integer(games, "games", 4), integer(looks, "looks", 1, 64)
    sizes: list[int] = []
    for j in range(1, looks + 1):
        n = games if j == looks else math.ceil(games / 2 ** (looks - j) / chunk_size) * chunk_size
        n = max(min(n, games), 4)
        if not sizes or n > sizes[-1]:
            sizes.append(n)
    return sizes


def audit_until_refuted(
    tune: TuneFn,
    score: ScoreFn | None = None,
    *,
    games: int,
    claimed_epsilon: float,
    looks: int = LOOKS,
    confidence: float = 0.95,
    checkpoint_dir: str | Path | None = None,
    out_dir: str | Path | None = None,
    **options: Any,
) -> PipelineAudit:
    """`audit_pipeline` at the looks of `look_schedule(games, looks)`, each at confidence
    1 - (1 - confidence) / looks, stopping at the first that refutes `claimed_epsilon` (module
    docstring). Returns the last look's audit, with `sequential` in its result.json: the
    looks, each look's eps_L, the look that stopped. `out_dir` receives the last look's
    report; the other options are `audit_pipeline`'s, each by its own keyword (data, canary,
    delta, seed, rule, jobs, base, rounds, ...: the fields of its options objects)."""
    claimed_epsilon = number(claimed_epsilon, "claimed_epsilon", 0)
    confidence = number(confidence, "confidence", 0.5, 1, hi_open=True)
    chunk_size = options.get("chunk_size", CHUNK_SIZE)
    schedule = look_schedule(games, looks, chunk_size)
    level = 1 - (1 - confidence) / len(schedule)
    if "canary" in options:  # "both" resolved once: every look audits the same canaries
        options["canary"] = resolve_canary(options["canary"], tune, options.get("data"))
    temporary = None
    if checkpoint_dir is None and out_dir is None:
        temporary = tempfile.TemporaryDirectory(prefix="auditsel-looks-")
        checkpoint_dir = temporary.name
    if checkpoint_dir is None:
        checkpoint_dir = Path(out_dir) / "checkpoints"  # type: ignore[arg-type]
    try:
        seen: list[LookEntry] = []
        for j, n in enumerate(schedule):
            last = j == len(schedule) - 1
            audit = _audit_pipeline(
                tune,
                score,
                games=n,
                claimed_epsilon=claimed_epsilon,
                confidence=level,
                checkpoint_dir=checkpoint_dir,
                **options,
            )
            seen.append(LookEntry(games=n, eps=audit.eps, refuted=bool(audit.refuted)))
            if audit.refuted or last:
                break
        if out_dir is not None:  # the report of the look that stood, written once
            audit = _audit_pipeline(
                tune,
                score,
                games=int(seen[-1]["games"]),
                claimed_epsilon=claimed_epsilon,
                confidence=level,
                checkpoint_dir=checkpoint_dir,
                out_dir=out_dir,
                **options,
            )
    finally:
        if temporary is not None:
            temporary.cleanup()
    result = audit.result.copy()
    result["sequential"] = SequentialEntry(
        looks=schedule,
        confidence=confidence,
        confidence_each=level,
        seen=seen,
        stopped_at=seen[-1]["games"],
        stopped_early=seen[-1]["games"] < schedule[-1],
    )
    if out_dir is not None:  # result.json and report.md say how the audit stopped
        folder = Path(out_dir)
        atomic_write_text(
            folder / "result.json", json.dumps(result, indent=2, allow_nan=False) + "\n"
        )
        report = folder / "report.md"  # several canaries: their reports are in subfolders
        head = report.read_text() if report.exists() else text_table(dict(result))
        atomic_write_text(report, head + "\n" + looks_text(result) + "\n")
    return replace(audit, confidence=confidence, result=result)


def looks_text(result: PipelineResult) -> str:
    """One line: the looks, each one's confidence, where the audit stopped and its verdict."""
    seq = result["sequential"]
    claim = result.get("claim")
    refuted = None if claim is None else claim["refuted"]
    return (
        f"early stop: looks at {', '.join(f'{n:,}' for n in seq['looks'])} games, each at "
        f"confidence {seq['confidence_each']:.4g} (Bonferroni over the looks); stopped at "
        f"{seq['stopped_at']:,} games ({'refuted' if refuted else 'not refuted'} at "
        f"{seq['confidence']:.0%})"
    )
