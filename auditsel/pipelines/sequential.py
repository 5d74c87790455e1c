"""Stop an audit as soon as the claim is refuted: looks at a geometric schedule, alpha spent.

Contract. `audit_until_refuted(pipeline, *, games, delta, claimed_epsilon, looks, statistics,
execution, report)` audits the same sequence of games (game g's numbers depend on (seed, g) only:
`auditsel.pipelines.pipeline`) at `looks` sample sizes ::

    n_j = ceil(games / 2^(looks - j)) rounded up to a multiple of the chunk size, j = 1..looks
    (the last look: all `games`),

each look an ordinary audit of the first n_j games at confidence 1 - (1 - confidence) / looks,
and stops at the first look whose eps_L exceeds the claim. Validity (Bonferroni over the looks):
if the claim is true, each look refutes it with probability at most (1 - confidence) / looks,
so any look does with probability at most 1 - confidence, however the looks depend on one
another. Without a refutation the last look's eps_L stands, at its corrected confidence (the
price of looking early). Several canaries are audited at every look as `audit_pipeline` audits
them (each at 1 - (1 - confidence) / (looks m)). The games of a look are kept (checkpoints) and
reused by the next, so stopping at look j costs n_j games.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from auditsel.errors import integer, number, percent
from auditsel.files import OutputFolder, atomic_write_text
from auditsel.pipelines.audit_options import (
    AuditOptions,
    ExecutionOptions,
    ReportOptions,
    given_options,
)
from auditsel.pipelines.default_canaries import resolve_canary
from auditsel.pipelines.game import CHUNK_SIZE, LOCAL_CPU
from auditsel.pipelines.pipeline import (
    Pipeline,
    PipelineAudit,
    _audit_pipeline,
    _claimed,
    _Request,
    pipeline_parts,
)
from auditsel.pipelines.pipeline_result import LookEntry, PipelineResult, SequentialEntry
from auditsel.results.report import text_table

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


@dataclass(frozen=True, kw_only=True)
class LookOptions:
    """The looks of `audit_until_refuted`: `count` looks (`look_schedule`), and `on_look(entry,
    j, confidence_each)` called as each look j (from 1) finishes (None: nothing)."""

    count: int = LOOKS
    on_look: Callable[[LookEntry, int, float], object] | None = None


def audit_until_refuted(
    pipeline: Pipeline,
    *,
    games: int,
    delta: float,
    claimed_epsilon: float,
    looks: int | LookOptions = LOOKS,
    statistics: AuditOptions | None = None,
    execution: ExecutionOptions | None = None,
    report: ReportOptions | None = None,
) -> PipelineAudit:
    """`audit_pipeline` at the looks of `look_schedule(games, looks)`, stopping at the first
    that refutes `claimed_epsilon` (module docstring). Returns the last look's audit, with
    `sequential` in its result.json (the looks, their eps_L, where it stopped) and the whole
    sequence's CPU and wall seconds. `report.out_dir` is claimed for the whole sequence and
    gets the last look's report. `looks`: their number, or a `LookOptions`. The options are
    `audit_pipeline`'s (`statistics.confidence`: the whole sequence's; the looks' checkpoints
    go to `execution.checkpoint_dir`, else out_dir/checkpoints, else a temporary folder)."""
    look = looks if isinstance(looks, LookOptions) else LookOptions(count=looks)
    st = given_options(AuditOptions, statistics, "statistics")
    ex = given_options(ExecutionOptions, execution, "execution")
    rep = given_options(ReportOptions, report, "report")
    parts = pipeline_parts(pipeline)
    claimed_epsilon = number(claimed_epsilon, "claimed_epsilon", 0)
    confidence = number(st.confidence, "confidence", 0.5, 1, hi_open=True)
    chunk_size = CHUNK_SIZE if ex.chunk_size is None else ex.chunk_size
    schedule = look_schedule(games, look.count, chunk_size)
    level = 1 - (1 - confidence) / len(schedule)
    # "both" resolved once: every look audits the same canaries
    parts["canary"] = resolve_canary(parts["canary"], parts["tune"], parts["data"])
    request = _Request(
        **parts,
        games=games,
        delta=delta,
        claimed_epsilon=claimed_epsilon,
        statistics=replace(st, confidence=level),
        execution=ex,
        report=replace(rep, out_dir=None),
        save_every_chunk=True,
    )
    clocks = (time.perf_counter(), time.process_time(), LOCAL_CPU.seconds)
    with _folders(ex.checkpoint_dir, rep.out_dir) as (checkpoints, folder):
        request = replace(request, execution=replace(ex, checkpoint_dir=checkpoints))
        audit, game_cpu, seen = _looks(request, schedule, look.on_look)
        if folder is not None:  # the report of the look that stood, written once
            last = replace(request, games=int(seen[-1]["games"]), folder=folder)
            audit, game_cpu = _timed(replace(last, execution=replace(last.execution, fresh=False)))
        result = _sequential_result(audit, schedule, (confidence, level), seen)
        if folder is not None:  # result.json and report.md say how the audit stopped
            _write_stop(folder.path, result)
    wall = time.perf_counter() - clocks[0]
    # this process's CPU over every look, less the games it played, plus every game's CPU
    # (recorded in the chunks, which the last call read back: `audit.game_cpu`)
    own = (time.process_time() - clocks[1]) - (LOCAL_CPU.seconds - clocks[2])
    cpu = own + game_cpu
    return replace(audit, confidence=confidence, result=result, cpu_seconds=cpu, wall_seconds=wall)


def _sequential_result(
    audit: PipelineAudit, schedule: list[int], levels: tuple[float, float], seen: list[LookEntry]
) -> PipelineResult:
    """The last look's result.json with `sequential`, the verdict at the sequence's level."""
    confidence, level = levels
    result = audit.result.copy()
    if "claim" in result:  # the verdict holds at `confidence` (each look: at `level`)
        result["claim"] = {**result["claim"], "confidence": confidence}
    result["sequential"] = SequentialEntry(
        looks=schedule,
        confidence=confidence,
        confidence_each=level,
        seen=seen,
        stopped_at=seen[-1]["games"],
        stopped_early=seen[-1]["games"] < schedule[-1],
    )
    return result


@contextmanager
def _folders(
    checkpoint_dir: str | Path | None, out_dir: str | Path | None
) -> Iterator[tuple[Path, OutputFolder | None]]:
    """(the looks' checkpoint folder, the claimed out_dir or None): `checkpoint_dir`, else
    out_dir/checkpoints, else a temporary folder (removed after, by this process only)."""
    with _claimed(out_dir) as folder:
        if checkpoint_dir is not None:
            yield Path(checkpoint_dir), folder
        elif folder is not None:
            yield folder.path / "checkpoints", folder
        else:
            pid = os.getpid()
            temporary = tempfile.mkdtemp(prefix="auditsel-looks-")
            try:
                yield Path(temporary), None
            finally:
                if os.getpid() == pid:  # never in a child the user's code forked
                    shutil.rmtree(temporary, ignore_errors=True)


def _looks(
    request: _Request,
    schedule: list[int],
    on_look: Callable[[LookEntry, int, float], object] | None,
) -> tuple[PipelineAudit, float, list[LookEntry]]:
    """The looks until one refutes the claim: (the last look's audit, the CPU seconds of its
    games, each look's entry); only the first look starts over if `fresh`."""
    seen: list[LookEntry] = []
    level = request.statistics.confidence
    for j, n in enumerate(schedule):
        audit, game_cpu = _timed(replace(request, games=n))
        request = replace(request, execution=replace(request.execution, fresh=False))
        seen.append(LookEntry(games=n, eps=audit.eps, refuted=bool(audit.refuted)))
        if on_look is not None:
            on_look(seen[-1], j + 1, level)
        if audit.refuted:
            break
    return audit, game_cpu, seen


def _timed(request: _Request) -> tuple[PipelineAudit, float]:
    """One look's `_audit_pipeline` and the CPU seconds of all its games (resumed ones too)."""
    cpu, local = time.process_time(), LOCAL_CPU.seconds
    audit = _audit_pipeline(request)
    own = (time.process_time() - cpu) - (LOCAL_CPU.seconds - local)
    return audit, max(audit.cpu_seconds - own, 0.0)


def _write_stop(folder: Path, result: PipelineResult) -> None:
    """result.json and report.md of an early-stopped audit: how it stopped."""
    atomic_write_text(folder / "result.json", json.dumps(result, indent=2, allow_nan=False) + "\n")
    report = folder / "report.md"
    head = report.read_text() if report.exists() else text_table(dict(result))
    atomic_write_text(report, head + "\n" + looks_text(result) + "\n")


def looks_text(result: PipelineResult) -> str:
    """One line: the looks, each one's confidence, where the audit stopped and its verdict."""
    seq = result["sequential"]
    claim = result.get("claim")
    refuted = None if claim is None else claim["refuted"]
    return (
        f"early stop: looks at {', '.join(f'{n:,}' for n in seq['looks'])} games, each at "
        f"confidence {seq['confidence_each']:.4g} (Bonferroni over the looks); stopped at "
        f"{seq['stopped_at']:,} games ({'refuted' if refuted else 'not refuted'} at "
        f"{percent(seq['confidence'])})"
    )
