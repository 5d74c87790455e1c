"""Audit the tuning pipeline you actually run: your code plays the game, auditsel judges it.

Contract. `audit_pipeline(tune, score, *, data, canary, games, delta, ...)` plays `games`
distinguishing games ([XWW24] Algorithm 1) around your own tuning run, each from its own
seeded stream (`auditsel.pipelines.game`: the coin, the canary's draws, the seed handed to
`tune`), the release dropped once scored. A game's numbers depend on (seed, g) only: not on the
chunk size, the number of jobs or the backend (joblib's loky processes by default; threads;
a dask cluster).

The scores and coins go to the threshold rules of `auditsel.auditing.lower` (`eps` is the
valid eps_L of `rule` at `confidence`), the estimator panel of `auditsel.auditing.estimators`
(each entry labelled) and, with `out_dir`, the report of `auditsel.experiments.report`
(result.json, report.md, plots). With `claimed_epsilon`, `refuted` is eps_L > claim: a true
claim is refuted with probability at most 1 - confidence. With a mechanism pair and a law of K
(`base`, `rounds`, e.g. from `from_opacus`), the tuning bounds of `auditsel.accounting.panel`
and the exact curve of the reduced game stand beside it.

Checkpoints (`checkpoint_dir`, or `out_dir/checkpoints`): finished chunks of games, with a
fingerprint over the code of `tune` and `score` (`auditsel.games.fingerprint.source_digest`),
the canary, the data (`joblib.hash`), the installed auditsel (`package_digest`), the seed and
the chunk size. A rerun with the same fingerprint resumes; one made by other code or data is
refused, naming what changed, and nothing is reused.

Errors. An exception raised by `tune` or `score` is the user's: `PipelineError` (a ConfigError:
the CLI exits 2) names the function, where it raised, the game, its seed and coin, so that
`tune(data, seed, canary)` can be rerun by hand.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from auditsel.auditing import lower
from auditsel.auditing.estimators import Estimate, estimator_panel, panel_dict
from auditsel.auditing.lower import audit_scores
from auditsel.auditing.rules import THRESHOLD_RULES, ThresholdRule, threshold_rule
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.auditing.streamed_audit import audit_chunks
from auditsel.errors import ConfigError, choice, integer, number
from auditsel.errors import jobs as check_jobs
from auditsel.experiments.experiment import lower_fields, upper_fields, upper_panel
from auditsel.experiments.heuristics import honesty_fields
from auditsel.experiments.report import text_table, write_outputs
from auditsel.files import atomic_write_text, claim_folder
from auditsel.games.backends import execution_backend
from auditsel.games.engine import CheckpointError, GameRecord, run_game
from auditsel.games.fingerprint import package_digest, source_digest
from auditsel.games.worker_pool import game_threads, limited_threads
from auditsel.pipelines.canaries import Canary, default_score
from auditsel.pipelines.game import (
    CHUNK_SIZE,
    LOCAL_CPU,
    PipelineError,
    PipelineGame,
    function_name,
    score_label,
)
from auditsel.selection import winner_law
from auditsel.version import __version__, source_commit

__all__ = [
    "Pipeline",
    "PipelineAudit",
    "PipelineError",
    "audit_pipeline",
    "play_games",
]

PANEL_ABOVE = 200_000  # panel="auto": the estimator panel up to this many games
STREAM_ABOVE = 1 << 20  # stream="auto": audit chunk by chunk from disk above this many games
PLOT_GAMES = 1 << 18  # the plots of a streamed audit: its first ~260,000 games
SEED_MAX = 2**63
FINGERPRINT_FILE = "pipeline.json"


@dataclass(frozen=True)
class _ScoreColumn:
    """A streamed chunk source read as (score, member): column 0 of the pipeline's chunks."""

    source: Any

    def __len__(self) -> int:
        return len(self.source)

    @property
    def trials(self) -> int:
        return self.source.trials

    def load(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        scores, member = self.source.load(index)
        return scores[:, 0], member


@dataclass(frozen=True, eq=False)
class PipelineAudit:
    """The result of `audit_pipeline` (see `to_dict` for result.json)."""

    eps: float  # the valid eps_L: `rule` at `confidence`
    refuted: bool | None  # eps > claimed_epsilon (None without a claim)
    claimed_epsilon: float | None
    delta: float
    confidence: float
    rule: str
    games: int
    seed: int
    bound: lower.LowerBound  # every number of the threshold rule (module-qualified for the docs)
    estimators: Mapping[str, Estimate] | None  # the estimator panel, each entry labelled
    scores: np.ndarray | None  # one per game, in game order (None when streamed)
    member: np.ndarray | None  # the coins (1: the canary was in)
    cpu_seconds: float  # CPU seconds of the games (all workers) and of the analysis
    wall_seconds: float
    resumed_games: int  # games read back from checkpoints
    tune: str
    score: str
    fingerprint: str
    files: tuple[Path, ...] = ()
    result: Mapping = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        """result.json's content (the `auditsel run` contract, plus `claim` and `pipeline`)."""
        return json.loads(json.dumps(self.result))

    def summary(self) -> str:
        """The terminal table of `auditsel run`, with the claim's verdict."""
        return text_table(self.to_dict())

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True, eq=False)
class Pipeline:
    """A tuning pipeline to audit: `tune(data, seed, canary) -> release`, the attack
    `score(release, canary) -> float` (None: the canary's default), the data and the canary."""

    tune: Callable
    score: Callable | None = None
    data: Any = None
    canary: Canary | None = None

    def audit(self, *, games: int, delta: float, **options: Any) -> PipelineAudit:
        """`audit_pipeline` of this pipeline, with `games`, `delta` and the other options."""
        if self.canary is None:
            raise ConfigError("canary", "required: Pipeline(tune, score, data=..., canary=...)")
        return audit_pipeline(
            self.tune,
            self.score,
            data=self.data,
            canary=self.canary,
            games=games,
            delta=delta,
            **options,
        )


def _check(tune, score, canary, games, delta, claimed_epsilon, confidence, seed, rule, n_jobs=1):
    if not callable(tune):
        raise ConfigError("tune", "must be a function tune(data, seed, canary) -> release")
    if score is not None and not callable(score):
        raise ConfigError("score", "must be a function score(release, canary) -> float, or None")
    if not isinstance(canary, Canary):
        raise ConfigError(
            "canary",
            f"must be an auditsel canary (InputCanary, GradientCanary or a subclass of "
            f"auditsel.pipelines.canaries.Canary), got {type(canary).__name__}",
        )
    integer(games, "games", 4)
    number(delta, "delta", 0, 1, hi_open=True)
    if claimed_epsilon is not None:
        number(claimed_epsilon, "claimed_epsilon", 0)
    number(confidence, "confidence", 0.5, 1, hi_open=True)
    integer(seed, "seed", 0, SEED_MAX - 1)
    check_jobs(n_jobs)
    if not isinstance(rule, ThresholdRule):
        choice(rule, "rule", THRESHOLD_RULES)


def _components(tune, score, data, canary, seed: int, chunk_size: int) -> dict:
    """What determines the games' numbers, digested one by one (for the refusal message)."""
    # deferred: joblib (0.14 s) for its hash of the data and the canary
    import joblib

    return {
        "tune": source_digest(tune),
        "score": source_digest(score),
        "canary": joblib.hash(canary) + source_digest(type(canary)),
        "data": joblib.hash(data),
        "auditsel": package_digest(),
        "seed": seed,
        "chunk_size": chunk_size,
    }


def _digest(components: dict) -> str:
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest()[:32]


def _open_checkpoints(directory: Path, components: dict) -> str:
    """The fingerprint; refuses a folder whose games were made by other code, data or seed."""
    fingerprint = _digest(components)
    path = directory / FINGERPRINT_FILE
    if path.exists():
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise CheckpointError(
                f"{path} is unreadable ({err}); delete {directory} to start over"
            ) from None
        changed = [k for k in components if found.get(k) != components[k]]
        if changed:
            what = ", ".join(
                f"`{k}` (its code changed)" if k in ("tune", "score") else f"`{k}`" for k in changed
            )
            raise CheckpointError(
                f"checkpoints in {directory} were made by another pipeline: {what} differs; "
                f"nothing was reused. Delete {directory} or use another folder to recompute"
            )
    else:
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(components, indent=1, sort_keys=True) + "\n")
    return fingerprint


def play_games(
    game: PipelineGame,
    games: int,
    seed: int,
    *,
    jobs: int = 1,
    backend: str | None = None,
    scheduler: str | None = None,
    checkpoint_dir: str | Path | None = None,
    fingerprint: str = "",
    progress: bool = False,
    stream: bool = False,
) -> tuple[GameRecord, float]:
    """Play the games with the engine (chunks, workers, checkpoints); returns the record and
    the CPU seconds of the games played in this process."""
    before = LOCAL_CPU.seconds
    threads = limited_threads(game_threads(jobs))  # BLAS/OpenMP/torch: this process's share
    with (
        threads,
        execution_backend(backend, scheduler, workers=abs(jobs) if jobs != -1 else 2) as where,
    ):
        record = run_game(
            game,
            game.score,  # unused: the game plays its chunks itself (PipelineGame.play)
            games,
            seed,
            chunk_size=game.chunk_size,
            jobs=jobs,
            checkpoint_dir=checkpoint_dir,
            fingerprint=fingerprint,
            progress=progress,
            backend=where,
            in_memory=not stream,
            unit="game",
        )
    return record, LOCAL_CPU.seconds - before


def audit_pipeline(
    tune: Callable,
    score: Callable | None = None,
    *,
    data: Any,
    canary: Canary,
    games: int,
    delta: float,
    claimed_epsilon: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    jobs: int = 1,
    rule: ThresholdRule | str = "split",
    checkpoint_dir: str | Path | None = None,
    out_dir: str | Path | None = None,
    name: str | None = None,
    base: Any = None,
    rounds: Any = None,
    backend: str | None = None,
    scheduler: str | None = None,
    chunk_size: int = CHUNK_SIZE,
    panel: bool | str = "auto",
    stream: bool | str = "auto",
    progress: bool = False,
) -> PipelineAudit:
    """Audit your tuning pipeline: play `games` games around `tune` and bound eps from below.

    tune(data, seed, canary) -> release runs your whole tuning (draws K, trains, selects) and
    returns only what it publishes; score(release, canary) -> float is the attack (higher: the
    canary looks in; None: the canary's default score). `data` is your training set; `canary`
    an InputCanary or GradientCanary (see `auditsel.pipelines.canaries`). Returns a
    PipelineAudit: eps (the valid eps_L at `confidence`), refuted (eps > claimed_epsilon), the
    estimator panel, the scores and coins, CPU seconds. `jobs` > 1 plays chunks of `chunk_size`
    games in worker processes (`backend`: loky by default, threading, or dask with `scheduler`);
    the numbers do not depend on it. `out_dir` writes result.json, report.md and the plots of
    `auditsel run` there (and keeps the checkpoints under out_dir/checkpoints); `base` and
    `rounds` (a mechanism pair and a law of K) add the tuning bounds beside eps_L. Bad input
    and exceptions raised by your functions are ConfigErrors (`PipelineError`).
    """
    _check(tune, score, canary, games, delta, claimed_epsilon, confidence, seed, rule, jobs)
    if isinstance(rule, str):  # the split's seed: the audit's (auditsel.auditing.rules)
        rule = threshold_rule(rule, seed=seed)
    chunk_size = integer(chunk_size, "chunk_size", 1)
    if (base is None) != (rounds is None):
        raise ConfigError("rounds", "give base and rounds together (or neither)")
    score_fn = score if score is not None else default_score
    # an output folder is resolved, refused when it escapes, locked, and on failure only what
    # this audit created there is removed (auditsel.files)
    claim = nullcontext() if out_dir is None else claim_folder(out_dir, field="out_dir")
    with claim as folder:
        out = None if folder is None else folder.path
        if checkpoint_dir is None and out is not None:
            checkpoint_dir = out / "checkpoints"
        if stream == "auto":  # bounded memory for large audits, where there is a folder for it
            stream = games > STREAM_ABOVE and checkpoint_dir is not None
        stream = bool(stream)
        if stream and checkpoint_dir is None:
            raise ConfigError("stream", "a streamed audit needs checkpoint_dir (or out_dir)")
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        components = _components(tune, score_fn, data, canary, seed, chunk_size)
        fingerprint = _digest(components)
        if checkpoint_dir is not None:
            fingerprint = _open_checkpoints(Path(checkpoint_dir), components)
        game = PipelineGame(tune, score_fn, data, canary, chunk_size)
        record, inline_cpu = play_games(
            game,
            games,
            seed,
            jobs=jobs,
            backend=backend,
            scheduler=scheduler,
            checkpoint_dir=checkpoint_dir,
            fingerprint=fingerprint,
            progress=progress,
            stream=stream,
        )
        return _analyse(
            record,
            stream=stream,
            games=games,
            delta=delta,
            claimed_epsilon=claimed_epsilon,
            confidence=confidence,
            seed=seed,
            rule=rule,
            panel=panel,
            base=base,
            rounds=rounds,
            name=name or f"pipeline {getattr(tune, '__name__', 'tune')}",
            names=(function_name(tune), score_label(score, canary)),
            canary=canary,
            fingerprint=fingerprint,
            resumed=min(record.resumed_chunks * chunk_size, games),
            clocks=(start_wall, start_cpu),
            out=out,
            chunk_size=chunk_size,
            inline_cpu=inline_cpu,
        )


def _analyse(
    record: GameRecord,
    *,
    stream,
    games,
    delta,
    claimed_epsilon,
    confidence,
    seed,
    rule,
    panel,
    base,
    rounds,
    name,
    names,
    canary,
    fingerprint,
    resumed,
    clocks,
    out,
    chunk_size,
    inline_cpu,
) -> PipelineAudit:
    """eps_L, the panel, the bounds and the report from the played games."""
    artefacts: dict[str, Any] = {}
    estimators = None
    if stream:
        chunks = record.chunks
        assert chunks is not None  # a streamed record reads its chunks back from disk
        source = _ScoreColumn(chunks)
        bound = audit_chunks(source, delta, confidence=confidence, rule=rule)
        game_cpu = float(sum(chunks.load(i)[0][:, 1].sum() for i in range(len(chunks))))
        if out is not None:  # the plots of a streamed audit show its first games
            head_scores, head_member = chunks.head(PLOT_GAMES)
            artefacts["record"] = GameRecord(head_scores[:, 0], head_member)
        scores = member = None
    else:
        assert record.scores is not None and record.member is not None  # played in memory
        scores, member = record.scores[:, 0].copy(), record.member
        game_cpu = float(record.scores[:, 1].sum())
        ss = SortedScores(scores, member)
        bound = audit_scores(
            scores, member, delta, confidence=confidence, rule=rule, sorted_scores=ss
        )
        if panel is True or (panel == "auto" and games <= PANEL_ABOVE):
            try:
                estimators = estimator_panel(
                    scores, member, delta, confidence, law=rounds, seed=seed, sorted_scores=ss
                )
                bound = replace(bound, estimators=panel_dict(estimators))
            except ConfigError as err:  # e.g. too few games for the panel's split entries
                bound = replace(
                    bound, estimators={"skipped": f"estimator panel not computed: {err}"}
                )
        artefacts["record"] = GameRecord(scores, member)
        artefacts["by_coin"] = ss.by_coin()
    result: dict[str, Any] = {"name": name, "delta": delta}
    if base is not None:
        bounds, curve = upper_panel(base, rounds, delta, with_curves=delta > 0)
        result.update(upper_fields(base, rounds, bounds, curve))
        artefacts.update(
            curve=curve[:2], attack_curve=curve[2], winner=winner_law(base.reduced(), rounds)
        )
    else:
        result.update(base=None, rounds=None, upper={}, notes=[])
    commit, dirty = source_commit()
    result.update(
        version=__version__, git_commit=commit, git_dirty=dirty, code_digest=package_digest()
    )
    result["lower"] = lower_fields(bound, "pipeline", names[1], seed, stream)
    refuted = None if claimed_epsilon is None else bool(bound.eps > claimed_epsilon)
    if claimed_epsilon is not None:
        result["claim"] = {"epsilon": float(claimed_epsilon), "refuted": refuted}
    result.update(honesty_fields(result))
    wall = time.perf_counter() - clocks[0]
    # this process's CPU (the analysis, and the games it played itself), plus the games played
    # elsewhere: in worker processes, or in earlier runs (resumed from checkpoints)
    cpu = (time.process_time() - clocks[1]) + max(game_cpu - inline_cpu, 0.0)
    result["pipeline"] = {
        "tune": names[0],
        "score": names[1],
        "canary": canary.describe(),
        "games": games,
        "chunk_size": chunk_size,
        "resumed_games": resumed,
        "game_cpu_seconds": round(game_cpu, 3),
        "cpu_seconds": round(cpu, 3),
        "fingerprint": fingerprint,
    }
    result["seconds"] = round(wall, 3)
    files: tuple[Path, ...] = ()
    if out is not None:
        files = tuple(write_outputs(out, result, artefacts))
    return PipelineAudit(
        eps=float(bound.eps),
        refuted=refuted,
        claimed_epsilon=None if claimed_epsilon is None else float(claimed_epsilon),
        delta=float(delta),
        confidence=float(confidence),
        rule=rule.name,
        games=int(games),
        seed=int(seed),
        bound=bound,
        estimators=estimators,
        scores=scores,
        member=member,
        cpu_seconds=float(cpu),
        wall_seconds=float(wall),
        resumed_games=resumed,
        tune=names[0],
        score=names[1],
        fingerprint=fingerprint,
        files=files,
        result=result,
    )
