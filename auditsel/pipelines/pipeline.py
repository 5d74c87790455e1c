"""Audit the tuning pipeline you actually run: your code plays the game, auditsel judges it.

Contract. `audit_pipeline(Pipeline(tune, score, data=..., canary=...), *, games, delta, ...)`
plays `games` distinguishing games ([XWW24] Algorithm 1) around your own tuning run, each from
its own seeded stream (`auditsel.pipelines.game`), the release dropped once scored. A game's
numbers depend on (seed, g) only: not on the chunk size, the jobs or the backend
(`auditsel.executor`). The scores and coins go to the threshold rules of
`auditsel.auditing.lower` (`eps`: the valid eps_L of `rule` at `confidence`), the estimator
panel of `auditsel.auditing.estimators` and, with `out_dir`, the report of
`auditsel.results.report`. With `claimed_epsilon`, `refuted` is eps_L > claim: a true claim is
refuted with probability at most 1 - confidence. With a mechanism pair and a law of K (`base`,
`rounds`), the tuning bounds of `auditsel.accounting.panel` and the exact curve of the reduced
game stand beside it.

Reproducibility is checked before the games (`auditsel.pipelines.replay_check`); a hazard is
refused, naming it and its fix, unless `ExecutionOptions(accept_nondeterminism=True)` (recorded
in result.json's `pipeline.reproducibility`).

Checkpoints (`checkpoint_dir`, or `out_dir/checkpoints`): finished chunks of games, with a
fingerprint over the code of `tune` and `score` (`auditsel.games.fingerprint.source_digest`),
the user's source files they run from (`auditsel.pipelines.user_code.user_files`), the canary
and the data by content (`auditsel.pipelines.content_digest`), the installed auditsel, the
seed and the chunk size. A rerun with the same fingerprint resumes; one made by other code or
data is refused, naming what changed, and nothing is reused.

The default score. With `score=None` and a release that publishes more than what the canary's
score reads (a mapping with other fields), the score is learned from a pilot of its own before
the games (`auditsel.pipelines.learned_scores`, never on the audit's games, so that eps_L stays
valid); result.json's pipeline.score names it. A release that is the canary's alone keeps the
canary's own score. `score=FieldScores(fields)` (`auditsel.pipelines.release_scores`) scores
every field, each at confidence 1 - (1 - confidence) / fields, `eps` the largest (Bonferroni;
result.json's pipeline.fields lists each). A learned score under the rule named "split" (the
default) is tested at the thresholds its pilot chose (`BonferroniGrid(grid=...)`); a rule given
as an object is kept.

Errors. An exception raised by `tune` or `score` is a `PipelineError` (a ConfigError: the CLI
exits 2) naming the function, where it raised, the game, its seed and coin.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from auditsel.auditing import lower
from auditsel.auditing.estimators import Estimate, estimator_panel, panel_dict
from auditsel.auditing.lower import audit_scores
from auditsel.auditing.rules import THRESHOLD_RULES, BonferroniGrid, ThresholdRule, threshold_rule
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.auditing.streamed_audit import audit_chunks
from auditsel.errors import ConfigError, choice, integer, number, shown
from auditsel.errors import jobs as check_jobs
from auditsel.events import as_pair
from auditsel.executor import execution_backend, fresh_processes, limited_threads
from auditsel.executor import game_threads as default_game_threads
from auditsel.files import OutputFolder, atomic_write_text, claim_folder, read_regular
from auditsel.games.engine import (
    CheckpointError,
    ChunkSource,
    GameRecord,
    delete_checkpoints,
    run_game,
    saving_every_chunk,
)
from auditsel.games.fingerprint import package_digest, source_digest
from auditsel.pipelines.audit_options import (
    AuditOptions,
    ExecutionOptions,
    ReportOptions,
    given_options,
)
from auditsel.pipelines.canaries import Canary, default_score
from auditsel.pipelines.content_digest import content_digest
from auditsel.pipelines.default_canaries import CanaryChoice, resolve_canary
from auditsel.pipelines.game import (
    CHUNK_SIZE,
    LOCAL_CPU,
    DataChanged,
    PipelineGame,
    ScoreFn,
    TuneFn,
    field_columns,
    function_name,
    no_proxy,
    score_label,
)
from auditsel.pipelines.game import (
    PipelineError as PipelineError,
)
from auditsel.pipelines.learned_scores import LEARN_GAMES, Learned, LearnedScore, learn_score
from auditsel.pipelines.pipeline_result import (
    CanaryEntry,
    ClaimEntry,
    FieldsEntry,
    PipelineEntry,
    PipelineResult,
    ReproducibilityEntry,
)
from auditsel.pipelines.release_scores import CANARY_FIELD, FieldScores, probe_fields
from auditsel.pipelines.replay_check import (
    ReplayReport,
    ReproducibilityError,
    check_replay,
    check_unchanged,
)
from auditsel.pipelines.user_code import describe_changes, user_files
from auditsel.results.fields import lower_fields, result_interval, upper_fields, upper_panel
from auditsel.results.heuristics import honesty_fields
from auditsel.results.report import text_table, write_outputs
from auditsel.roles import MechanismPair
from auditsel.rounds import RoundsLaw
from auditsel.selection import winner_law
from auditsel.version import __version__, source_commit

PANEL_ABOVE = 200_000  # panel="auto": the estimator panel up to this many games
STREAM_ABOVE = 1 << 20  # stream="auto": audit chunk by chunk from disk above this many games
PLOT_GAMES = 1 << 18  # the plots of a streamed audit: its first ~260,000 games
SEED_MAX = 2**63
MAX_GAMES = 10**9  # the CLI's --games range
FINGERPRINT_FILE = "pipeline.json"
MAX_FINGERPRINT_BYTES = 1 << 20  # pipeline.json is read at most this far


@dataclass(frozen=True)
class _ScoreColumn:
    """A streamed chunk source read as (score, member) of field `field` of `field_columns`."""

    source: ChunkSource
    field: int = 0

    def __len__(self) -> int:
        return len(self.source)

    @property
    def trials(self) -> int:
        return self.source.trials

    def load(self, index: int) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
        scores, member = self.source.load(index)
        return scores[:, 0 if self.field == 0 else self.field + 1], member


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
    scores: NDArray[np.float64] | None  # one per game, in game order (None when streamed)
    member: NDArray[np.int8] | None  # the coins (1: the canary was in)
    cpu_seconds: float  # CPU seconds of the games (all workers) and of the analysis
    wall_seconds: float
    resumed_games: int  # games read back from checkpoints
    tune: str
    score: str
    fingerprint: str
    files: tuple[Path, ...] = ()
    #: result.json's content, typed (`auditsel.pipelines.pipeline_result`)
    result: PipelineResult = field(default_factory=lambda: PipelineResult(), repr=False)

    def to_dict(self) -> PipelineResult:
        """result.json's content (the `auditsel run` contract, plus `claim` and `pipeline`)."""
        return cast(PipelineResult, json.loads(json.dumps(self.result)))

    def summary(self) -> str:
        """The terminal table of `auditsel run`, with the claim's verdict."""
        return text_table(dict(self.to_dict()))

    __str__ = summary


@dataclass(frozen=True, eq=False)
class Pipeline:
    """A tuning pipeline to audit: `tune(data, seed, canary) -> release`, the attack
    `score(release, canary) -> float` (None: the canary's default), the data and the canary:
    what `audit_pipeline`, `plan_pipeline` and `audit_until_refuted` take first."""

    tune: TuneFn
    score: ScoreFn | None = None
    data: Any = None
    canary: CanaryChoice | None = None

    def audit(
        self,
        *,
        games: int,
        delta: float,
        claimed_epsilon: float | None = None,
        statistics: AuditOptions | None = None,
        execution: ExecutionOptions | None = None,
        report: ReportOptions | None = None,
    ) -> PipelineAudit:
        """`audit_pipeline(self, ...)`."""
        return audit_pipeline(
            self,
            games=games,
            delta=delta,
            claimed_epsilon=claimed_epsilon,
            statistics=statistics,
            execution=execution,
            report=report,
        )


def _check_functions(tune: object, score: object, canary: object) -> None:
    """A ConfigError unless tune, score (or None) and canary are what they must be."""
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


def _check_numbers(
    games: int,
    delta: float,
    claimed_epsilon: float | None,
    confidence: float,
    seed: int,
    rule: ThresholdRule | str,
    n_jobs: int = 1,
) -> None:
    """A ConfigError naming the first of the audit's numbers out of its range."""
    integer(games, "games", 4, MAX_GAMES)
    number(delta, "delta", 0, 1, hi_open=True)
    if claimed_epsilon is not None:
        number(claimed_epsilon, "claimed_epsilon", 0)
    number(confidence, "confidence", 0.5, 1, hi_open=True)
    integer(seed, "seed", 0, SEED_MAX - 1)
    check_jobs(n_jobs)
    if not isinstance(rule, ThresholdRule):
        choice(rule, "rule", THRESHOLD_RULES)


def _auto_or_bool(value: Any, field: str) -> bool | str:
    """True, False or "auto" (the strings "true"/"false" are refused, as the CLI refuses them)."""
    if value is True or value is False or value == "auto" and isinstance(value, str):
        return value
    raise ConfigError(field, f"must be true, false or 'auto', got {shown(value)}")


def _components(
    tune: TuneFn,
    score: ScoreFn,
    data: Any,
    canary: Canary,
    seed: int,
    chunk_size: int,
    fields: tuple[str, ...] = (),
) -> dict[str, Any]:
    """What determines the games' numbers, digested one by one (for the refusal message)."""
    return {
        "tune": source_digest(tune),
        "score": source_digest(score),
        "canary": content_digest(canary, "canary") + source_digest(type(canary)),
        "data": content_digest(data, "data"),
        "modules": user_files(tune, score, canary, data),
        "auditsel": package_digest(),
        "seed": seed,
        "chunk_size": chunk_size,
        **({"fields": list(fields)} if fields else {}),  # keys of older audits unchanged
    }


def _digest(components: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest()[:32]


def _open_checkpoints(directory: Path, components: Mapping[str, Any]) -> str:
    """The fingerprint; refuses a folder whose games were made by other code, data or seed."""
    fingerprint = _digest(components)
    path = directory / FINGERPRINT_FILE
    if path.exists():
        try:  # bounded, and never a FIFO or a device
            found = json.loads(read_regular(path, "checkpoints", MAX_FINGERPRINT_BYTES))
            if not isinstance(found, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as err:
            raise CheckpointError(
                f"{path} is unreadable ({err}); delete {directory} to start over"
            ) from None
        changed = [k for k in components if found.get(k) != components[k]]
        if changed:
            what = ", ".join(
                f"`{k}` (its code changed)"
                if k in ("tune", "score")
                else f"the code it runs ({describe_changes(found.get(k), components[k])})"
                if k == "modules"
                else f"`{k}`"
                for k in changed
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
    execution: ExecutionOptions | None = None,
    *,
    fingerprint: str = "",
    before: Callable[[str | None], Any] | None = None,
) -> tuple[GameRecord, float]:
    """Play the games with the engine; returns the record and the CPU seconds of the games
    played in this process. `execution.stream` True keeps no chunk in memory ("auto" is the
    caller's to resolve); the chunk size is the game's. `before(backend)` runs first, inside
    the backend. This process's BLAS, OpenMP and torch threads are limited meanwhile."""
    ex = execution if execution is not None else ExecutionOptions()
    start = LOCAL_CPU.seconds
    threads = limited_threads(default_game_threads(ex.jobs))
    workers = abs(ex.jobs) if ex.jobs != -1 else 2
    with (
        threads,
        execution_backend(ex.backend, ex.scheduler, workers=workers) as where,
        fresh_processes(where if ex.jobs != 1 else "serial"),  # workers that import user code
    ):
        if before is not None:
            before(where)
        record = run_game(
            game,
            no_proxy,  # unused: the game plays and scores its chunks itself (PipelineGame.play)
            games,
            seed,
            execution=replace(ex, chunk_size=game.chunk_size, backend=where),
            fingerprint=fingerprint,
            in_memory=ex.stream is not True,
        )
    return record, LOCAL_CPU.seconds - start


def audit_pipeline(
    pipeline: Pipeline,
    *,
    games: int,
    delta: float,
    claimed_epsilon: float | None = None,
    statistics: AuditOptions | None = None,
    execution: ExecutionOptions | None = None,
    report: ReportOptions | None = None,
) -> PipelineAudit:
    """Audit your tuning pipeline: play `games` games around its `tune` and bound eps from below.

    Args:
        pipeline: `Pipeline(tune, score, data=..., canary=...)`. `tune(data, seed, canary) ->
            release` runs your whole tuning (draws K, trains, selects) and returns only what
            it publishes; `score(release, canary) -> float` is the attack (higher: the canary
            looks in; None: the canary's score and every other released field); `data` is
            your training set; `canary` an InputCanary or GradientCanary (see
            `auditsel.pipelines.canaries`), or a tuple of them (each plays `games` games,
            Bonferroni; eps is the largest), or "both" (an InputCanary and a GradientCanary
            chosen from the data and a probe run: `auditsel.pipelines.default_canaries`).
        games: the number of games.
        delta: in [0, 1).
        claimed_epsilon: the claim to test (None: no claim).
        statistics: `AuditOptions(confidence, rule, seed)`.
        execution: `ExecutionOptions(jobs, backend, chunk_size, checkpoint_dir, ...,
            accept_nondeterminism)`: where and how the games play (never the numbers).
        report: `ReportOptions(out_dir, name, base, rounds, panel)`: result.json, report.md
            and the plots of `auditsel run` in `out_dir` (the checkpoints under
            out_dir/checkpoints); the tuning bounds of `base` and `rounds` beside eps_L.

    Returns:
        A `PipelineAudit`: eps (the valid eps_L), refuted (eps > claimed_epsilon), the
        estimator panel, the scores and coins, CPU seconds.

    Raises:
        auditsel.errors.ConfigError: bad input, and exceptions raised by your functions
            (`PipelineError`).
        ReproducibilityError: the pipeline does not replay (unless
            `execution.accept_nondeterminism`: it runs, recorded in result.json).
    """
    options: dict[str, Any] = {
        "statistics": given_options(AuditOptions, statistics, "statistics"),
        "execution": given_options(ExecutionOptions, execution, "execution"),
        "report": given_options(ReportOptions, report, "report"),
    }
    parts = pipeline_parts(pipeline)
    return _audit_pipeline(
        _Request(**parts, games=games, delta=delta, claimed_epsilon=claimed_epsilon, **options)
    )


def pipeline_parts(pipeline: object) -> dict[str, Any]:
    """tune, score, data and canary of `pipeline`, a `Pipeline` with a canary; anything else is
    a ConfigError naming `pipeline` (or `canary`, when it has none)."""
    if not isinstance(pipeline, Pipeline):
        raise ConfigError(
            "pipeline",
            f"must be auditsel.Pipeline(tune, score, data=..., canary=...), "
            f"got {type(pipeline).__name__}",
        )
    if pipeline.canary is None:
        raise ConfigError("canary", "required: Pipeline(tune, score, data=..., canary=...)")
    return {name: getattr(pipeline, name) for name in ("tune", "score", "data", "canary")}


@dataclass(frozen=True, kw_only=True)
class _Request:
    """One audit as asked (`audit_until_refuted` makes one per look). `folder`: an out_dir its
    caller claimed, in place of `report.out_dir`; `save_every_chunk`: for the next look."""

    tune: TuneFn
    score: ScoreFn | None
    data: Any
    canary: CanaryChoice
    games: int
    delta: float
    claimed_epsilon: float | None = None
    statistics: AuditOptions = field(default_factory=AuditOptions)
    execution: ExecutionOptions = field(default_factory=ExecutionOptions)
    report: ReportOptions = field(default_factory=ReportOptions)
    save_every_chunk: bool = False
    folder: OutputFolder | None = None

    @property
    def out_dir(self) -> str | Path | OutputFolder | None:
        return self.folder if self.folder is not None else self.report.out_dir


@dataclass(frozen=True)
class _Audit:
    """A one-canary request once checked, with what it settles before its games."""

    request: _Request
    canary: Canary
    seed: int
    chunk_size: int
    panel: bool | str
    stream: bool | str
    base: MechanismPair | None
    fields: tuple[str, ...]
    score_fn: ScoreFn
    rule: ThresholdRule
    label: str

    @property
    def confidence(self) -> float:
        return self.request.statistics.confidence


def _settle(request: _Request, canary: Canary) -> _Audit:
    """A one-canary request checked (a ConfigError naming the first bad option), scored."""
    r, st, ex, rep = request, request.statistics, request.execution, request.report
    _check_functions(r.tune, r.score, canary)
    _check_numbers(r.games, r.delta, r.claimed_epsilon, st.confidence, st.seed, st.rule, ex.jobs)
    panel, stream = _auto_or_bool(rep.panel, "panel"), _auto_or_bool(ex.stream, "stream")
    for flag, value in (("accept_nondeterminism", ex.accept_nondeterminism), ("fresh", ex.fresh)):
        if not isinstance(value, bool):
            raise ConfigError(flag, f"must be true or false, got {shown(value)}")
    chunk_size = integer(CHUNK_SIZE if ex.chunk_size is None else ex.chunk_size, "chunk_size", 1)
    base, seed = _checked_base(rep.base, rep.rounds), integer(st.seed, "seed", 0, SEED_MAX - 1)
    fields, score_fn = scoring(
        r.tune, r.score, r.data, canary, seed=seed, delta=r.delta, jobs=ex.jobs, backend=ex.backend
    )
    rule, label = _rule_and_label(st.rule, seed, r.score, score_fn, canary)
    return _Audit(r, canary, seed, chunk_size, panel, stream, base, fields, score_fn, rule, label)


@dataclass(frozen=True, eq=False)
class _Run:
    """The games as played (`clocks`: wall and CPU at their start; `out` None: no files)."""

    record: GameRecord
    inline_cpu: float
    reproducibility: ReproducibilityEntry
    fingerprint: str
    stream: bool
    clocks: tuple[float, float]
    out: Path | None


def _audit_pipeline(request: _Request) -> PipelineAudit:
    """The audit of a request: options checked, folder claimed, games played and analysed."""
    canary = resolve_canary(request.canary, request.tune, request.data)  # "both": a tuple
    if isinstance(canary, tuple):  # several canaries: each its games, Bonferroni
        return _audit_each_canary(request, canary)
    audit, ex = _settle(request, canary), request.execution
    tune, score_fn, data, chunk_size = request.tune, audit.score_fn, request.data, audit.chunk_size
    with _claimed(request.out_dir) as folder:
        out = None if folder is None else folder.path
        checkpoint_dir = ex.checkpoint_dir
        if checkpoint_dir is None and out is not None:
            checkpoint_dir = out / "checkpoints"
        if ex.fresh and checkpoint_dir is not None:  # the folder is locked, the options checked
            deleted = delete_checkpoints(Path(checkpoint_dir), "fresh")
            if deleted:
                what = f"{len(deleted):,} checkpoint files of {Path(checkpoint_dir)}"
                print(f"auditsel: --fresh: deleted {what}", file=sys.stderr)
        stream = _streamed(audit.stream, request.games, checkpoint_dir)
        clocks = (time.perf_counter(), time.process_time())
        components = _components(tune, score_fn, data, canary, audit.seed, chunk_size, audit.fields)
        digests: tuple[str, ...] = ()
        if not ex.accept_nondeterminism:
            digests = (components["data"], content_digest(canary, "canary"))
        game = PipelineGame(tune, score_fn, data, canary, chunk_size, audit.fields, digests)
        fingerprint = _digest(components)
        if checkpoint_dir is not None:
            fingerprint = _open_checkpoints(Path(checkpoint_dir), components)
        played = _play_checked(game, audit, checkpoint_dir, fingerprint, stream)
        return _analyse(audit, _Run(*played, fingerprint, stream, clocks, out))


def _rule_and_label(
    rule: ThresholdRule | str, seed: int, score: ScoreFn | None, score_fn: ScoreFn, canary: Canary
) -> tuple[ThresholdRule, str]:
    """The audit's rule (a learned score's grid for "split", module docstring; a name gets the
    audit's seed) and its score's name."""
    label = score_fn.words if isinstance(score_fn, LearnedScore) else score_label(score, canary)
    if isinstance(score_fn, LearnedScore) and rule == "split" and score_fn.grid:
        return BonferroniGrid(grid=score_fn.grid), label
    return (threshold_rule(rule, seed=seed) if isinstance(rule, str) else rule), label


def _checked_base(base: Any, rounds: Any) -> MechanismPair | None:
    """The base as a mechanism pair, given with a law of K, or None (else a ConfigError)."""
    if (base is None) != (rounds is None):
        raise ConfigError("rounds", "give base and rounds together (or neither)")
    if base is None:
        return None
    if not isinstance(rounds, RoundsLaw):
        raise ConfigError(
            "rounds", f"must be a law of K (auditsel.Poisson(3), ...), got {shown(rounds)}"
        )
    return as_pair(base, "base")


def _claimed(out_dir: str | Path | OutputFolder | None) -> Any:
    """The output folder as a context: claimed here, or None or a caller's `OutputFolder`."""
    if out_dir is None or isinstance(out_dir, OutputFolder):
        return nullcontext(out_dir)
    return claim_folder(out_dir, field="out_dir")


def _streamed(stream: bool | str, games: int, checkpoint_dir: str | Path | None) -> bool:
    """Whether the audit streams its chunks from disk ("auto": above STREAM_ABOVE games)."""
    if stream == "auto":  # bounded memory for large audits, where there is a folder for it
        stream = games > STREAM_ABOVE and checkpoint_dir is not None
    if stream and checkpoint_dir is None:
        raise ConfigError("stream", "a streamed audit needs checkpoint_dir (or out_dir)")
    return bool(stream)


def _play_checked(
    game: PipelineGame,
    audit: _Audit,
    checkpoint_dir: str | Path | None,
    fingerprint: str,
    stream: bool,
) -> tuple[GameRecord, float, ReproducibilityEntry]:
    """`play_games` between the replay check (on the audit's backend) and the unchanged-data
    check: (record, CPU seconds in this process, pipeline.reproducibility)."""
    ex = audit.request.execution
    accept = ex.accept_nondeterminism
    replay: list[ReplayReport] = []

    def on_backend(where: str | None) -> None:  # on the audit's backend
        replay.append(check_replay(game, audit.seed, jobs=ex.jobs, backend=where, accept=accept))

    game_threads = ex.game_threads
    if game_threads is not None:
        game_threads = integer(game_threads, "game_threads", 1)
    rerun = f"delete {checkpoint_dir or 'the checkpoints'} before you rerun"
    try:
        with (
            limited_threads(default_game_threads(ex.jobs, game_threads)),  # play_games's limit
            saving_every_chunk(audit.request.save_every_chunk),  # early stop: the next look
        ):
            record, inline_cpu = play_games(
                game,
                audit.request.games,
                audit.seed,
                replace(ex, checkpoint_dir=checkpoint_dir, stream=stream),
                fingerprint=fingerprint,
                before=on_backend,
            )
    except DataChanged as err:  # in any process, on any backend: as the check below
        hazards = [err.message]
    else:
        hazards = check_unchanged(game, replay[0])
    if hazards and not accept:  # DataChanged: never accepted (the digests are then unchecked)
        raise ReproducibilityError(
            "tune", f"{hazards[0]}; the games of this run saw changing data: {rerun}"
        )
    reproducibility = replay[0].to_dict()
    reproducibility["hazards"] += hazards
    return record, inline_cpu, reproducibility


def _audit_each_canary(request: _Request, canaries: tuple[Canary, ...]) -> PipelineAudit:
    """One audit per canary at confidence 1 - (1 - confidence) / m (Bonferroni), combined;
    each in a subfolder `canary-<i>-<kind>` of out_dir and checkpoint_dir, out_dir also gets
    the combined result.json and report.md."""
    if len(canaries) < 1:
        raise ConfigError("canary", "give a canary, or a tuple of canaries to audit each")
    confidence = number(request.statistics.confidence, "confidence", 0.5, 1, hi_open=True)
    level = 1 - (1 - confidence) / len(canaries)
    statistics = replace(request.statistics, confidence=level)
    with _claimed(request.out_dir) as folder:
        top = {
            "checkpoint_dir": request.execution.checkpoint_dir,
            "out_dir": folder and folder.path,
        }
        audits = []
        for i, canary in enumerate(canaries):
            kind = canary.describe().get("kind", "canary") if isinstance(canary, Canary) else "?"
            sub = {
                k: (None if v is None else Path(v) / f"canary-{i}-{kind}") for k, v in top.items()
            }
            one = replace(
                request,
                canary=canary,
                statistics=statistics,
                execution=replace(request.execution, checkpoint_dir=sub["checkpoint_dir"]),
                report=replace(request.report, out_dir=sub["out_dir"]),
                folder=None,
            )
            audits.append(_audit_pipeline(one))
        combined = _combined(audits, level, confidence, request.claimed_epsilon)
        if folder is not None:  # the combined result.json and report.md, in out_dir itself
            result = dict(combined.result)
            written = write_outputs(folder.path, result, {}, plots=False)
            report = folder.path / "report.md"
            atomic_write_text(report, report.read_text() + "\n" + canaries_text(result) + "\n")
            combined = replace(combined, files=(*written, *combined.files))
    return combined


def _combined(
    audits: list[PipelineAudit], level: float, confidence: float, claim: float | None
) -> PipelineAudit:
    """The audit of the largest eps_L, with every canary's entry and the totals of all."""
    best = max(audits, key=lambda a: a.eps)
    refuted = None if claim is None else any(bool(a.refuted) for a in audits)
    result = best.result.copy()
    result["canaries"] = [
        CanaryEntry(
            canary=a.result["pipeline"]["canary"],
            eps=a.eps,
            refuted=a.refuted,
            confidence=level,
            games=a.games,
        )
        for a in audits
    ]
    if claim is not None:
        result["claim"] = ClaimEntry(epsilon=float(claim), refuted=refuted, confidence=confidence)
    return replace(
        best,
        refuted=refuted,
        confidence=confidence,
        games=sum(a.games for a in audits),
        cpu_seconds=sum(a.cpu_seconds for a in audits),
        wall_seconds=sum(a.wall_seconds for a in audits),
        resumed_games=sum(a.resumed_games for a in audits),
        files=tuple(f for a in audits for f in a.files),
        result=result,
    )


def canaries_text(result: Mapping[str, Any]) -> str:
    """One line per canary of a several-canary audit's result ('' for one canary)."""
    return "\n".join(
        f"canary {i} ({entry['canary']['kind']}): eps_L {entry['eps']:.4f} at "
        f"confidence {entry['confidence']:.4g}, {entry['games']:,} games"
        + ("" if entry["refuted"] is None else f", refuted: {entry['refuted']}")
        for i, entry in enumerate(result.get("canaries", ()))
    )


def scoring(
    tune: TuneFn,
    score: ScoreFn | None,
    data: Any,
    canary: Canary,
    *,
    seed: int = 0,
    delta: float = 0.0,
    jobs: int = 1,
    backend: str | None = None,
) -> tuple[tuple[str, ...], ScoreFn]:
    """(fields, score function) of an audit of seed `seed` (module docstring)."""
    if isinstance(score, FieldScores):  # every field, each at its Bonferroni share
        return score.fields, score
    if score is not None:
        return (), score
    found = learned(tune, data, canary, seed=seed, delta=delta, jobs=jobs, backend=backend)
    return (), default_score if found is None else found.score


def learned(
    tune: TuneFn,
    data: Any,
    canary: Canary,
    seed: int,
    delta: float,
    jobs: int = 1,
    backend: str | None = None,
    games: int = LEARN_GAMES,
) -> Learned | None:
    """The learned default score of an audit of seed `seed` (None: the canary's release)."""
    if probe_fields(tune, data, canary) in ((), (CANARY_FIELD,)):  # tune raising: PipelineError
        return None

    def play(game: PipelineGame, n: int, pilot_seed: int) -> tuple[np.ndarray, np.ndarray]:
        record, _ = play_games(game, n, pilot_seed, ExecutionOptions(jobs=jobs, backend=backend))
        assert record.scores is not None and record.member is not None  # played in memory
        return record.scores, record.member

    return learn_score(tune, data, canary, seed=seed, delta=delta, play=play, games=games)


def _analyse(audit: _Audit, run: _Run) -> PipelineAudit:
    """eps_L, the panel, the bounds and the report from the played games."""
    request = audit.request
    played = _bound_games(run.record, audit, run.stream, plots=run.out is not None)
    names = (function_name(request.tune), audit.label)
    if audit.fields:  # every field at its Bonferroni share; eps_L is the largest (module doc)
        largest = audit.fields[played.best]
        names = (names[0], f"every released field ({len(audit.fields)}; largest: {largest})")
    result, refuted = _result_fields(audit, played.bound, names[1], run.stream, played.artefacts)
    wall = time.perf_counter() - run.clocks[0]
    # this process's CPU (the analysis, and the games it played itself), plus the games played
    # elsewhere: in worker processes, or in earlier runs (resumed from checkpoints)
    cpu = (time.process_time() - run.clocks[1]) + max(played.game_cpu - run.inline_cpu, 0.0)
    result["pipeline"] = _pipeline_entry(audit, run, played, names, cpu)
    result["seconds"] = round(wall, 3)
    files: tuple[Path, ...] = ()
    if run.out is not None:
        files = tuple(write_outputs(run.out, result, played.artefacts))
    claimed_epsilon = request.claimed_epsilon
    return PipelineAudit(
        eps=float(played.bound.eps),
        refuted=refuted,
        claimed_epsilon=None if claimed_epsilon is None else float(claimed_epsilon),
        delta=float(request.delta),
        confidence=float(audit.confidence),
        rule=audit.rule.name,
        games=int(request.games),
        seed=int(audit.seed),
        bound=played.bound,
        estimators=played.estimators,
        scores=played.scores,
        member=played.member,
        cpu_seconds=float(cpu),
        wall_seconds=float(wall),
        resumed_games=result["pipeline"]["resumed_games"],
        tune=names[0],
        score=names[1],
        fingerprint=run.fingerprint,
        files=files,
        result=cast(PipelineResult, result),
    )


def _pipeline_entry(
    audit: _Audit, run: _Run, played: _PlayedBound, names: tuple[str, str], cpu: float
) -> PipelineEntry:
    """result.json's pipeline (`PipelineEntry`)."""
    games = audit.request.games
    entry: PipelineEntry = {
        "tune": names[0],
        "score": names[1],
        "canary": audit.canary.describe(),
        "games": games,
        "chunk_size": audit.chunk_size,
        "resumed_games": min(run.record.resumed_chunks * audit.chunk_size, games),  # whole chunks
        "game_cpu_seconds": round(played.game_cpu, 3),
        "cpu_seconds": round(cpu, 3),
        "fingerprint": run.fingerprint,
    }
    if audit.fields:  # each field's eps_L, their confidence, the largest
        entry["fields"] = FieldsEntry(
            confidence_each=1 - (1 - audit.confidence) / len(played.by_field),
            eps={k: float(b.eps) for k, b in played.by_field.items()},
            best=audit.fields[played.best],
        )
    entry["reproducibility"] = run.reproducibility
    return entry


@dataclass(frozen=True, eq=False)
class _PlayedBound:
    """What the analysis reads off the played games (scores and coins None when streamed)."""

    bound: lower.LowerBound
    by_field: dict[str, lower.LowerBound]
    best: int
    estimators: Mapping[str, Estimate] | None
    scores: np.ndarray | None
    member: np.ndarray | None
    game_cpu: float
    artefacts: dict[str, Any]


def _bound_games(record: GameRecord, audit: _Audit, stream: bool, plots: bool) -> _PlayedBound:
    """eps_L of the played games, streamed or in memory (with the estimator panel): of every
    field at its Bonferroni share, the best field's eps_L the audit's."""
    delta, rule, fields = audit.request.delta, audit.rule, audit.fields
    level = 1 - (1 - audit.confidence) / len(fields) if fields else audit.confidence
    artefacts: dict[str, Any] = {}
    by_field: dict[str, lower.LowerBound] = {}
    if stream:
        chunks = record.chunks
        assert chunks is not None  # a streamed record reads its chunks back from disk
        for j, name in enumerate(fields or ("",)):
            by_field[name] = audit_chunks(
                _ScoreColumn(chunks, j), delta, confidence=level, rule=rule
            )
        best = int(np.argmax([b.eps for b in by_field.values()]))
        game_cpu = float(sum(chunks.load(i)[0][:, 1].sum() for i in range(len(chunks))))
        if plots:  # the plots of a streamed audit show its first games
            head_scores, head_member = chunks.head(PLOT_GAMES)
            artefacts["record"] = GameRecord(head_scores[:, 0], head_member)
        bound = list(by_field.values())[best]
        return _PlayedBound(bound, by_field, best, None, None, None, game_cpu, artefacts)
    assert record.scores is not None and record.member is not None  # played in memory
    member, columns, best = record.member, record.scores, 0
    if fields:
        columns = field_columns(record.scores)
        for j, name in enumerate(fields):
            by_field[name] = audit_scores(columns[:, j], member, delta, confidence=level, rule=rule)
        best = int(np.argmax([b.eps for b in by_field.values()]))
    scores, game_cpu = columns[:, best].copy(), float(record.scores[:, 1].sum())
    ss = SortedScores(scores, member)
    if not fields:
        by_field = {
            "": audit_scores(scores, member, delta, confidence=level, rule=rule, sorted_scores=ss)
        }
    bound, estimators = list(by_field.values())[best], None
    panel, law, confidence = audit.panel, audit.request.report.rounds, audit.confidence
    if panel is True or (panel == "auto" and audit.request.games <= PANEL_ABOVE):
        try:
            estimators = estimator_panel(
                scores, member, delta, confidence, law=law, seed=audit.seed, sorted_scores=ss
            )
            bound = replace(bound, estimators=panel_dict(estimators))
        except ConfigError as err:  # e.g. too few games for the panel's split entries
            bound = replace(bound, estimators={"skipped": f"estimator panel not computed: {err}"})
    artefacts["record"] = GameRecord(scores, member)
    artefacts["by_coin"] = ss.by_coin()
    return _PlayedBound(bound, by_field, best, estimators, scores, member, game_cpu, artefacts)


def _result_fields(
    audit: _Audit, bound: lower.LowerBound, score_name: str, stream: bool, artefacts: dict[str, Any]
) -> tuple[dict[str, Any], bool | None]:
    """result.json but `pipeline` and `seconds` (curves to `artefacts`), and the verdict."""
    request, base, rounds = audit.request, audit.base, audit.request.report.rounds
    delta, claimed_epsilon = request.delta, request.claimed_epsilon
    name = request.report.name or f"pipeline {getattr(request.tune, '__name__', 'tune')}"
    result: dict[str, Any] = {"name": name, "delta": delta}
    if base is not None:
        assert rounds is not None  # given together with base (_settle checks)
        bounds, curve = upper_panel(base, rounds, delta, with_curves=delta > 0)
        result.update(upper_fields(base, rounds, bounds, curve))
        reduced = base.reduced()  # None: no exact winner law (a dp_accounting event)
        artefacts.update(
            curve=curve[:2],
            attack_curve=curve[2],
            winner=None if reduced is None else winner_law(reduced, rounds),
        )
    else:
        result.update(base=None, rounds=None, upper={}, notes=[])
    commit, dirty = source_commit()
    result.update(
        version=__version__, git_commit=commit, git_dirty=dirty, code_digest=package_digest()
    )
    result["lower"] = lower_fields(bound, "pipeline", score_name, audit.seed, stream)
    if base is not None:  # [max(attack value, valid eps_L), the tightest rigorous bound]
        result["interval"] = result_interval(result, bounds)
    refuted = None if claimed_epsilon is None else bool(bound.eps > claimed_epsilon)
    if claimed_epsilon is not None:
        result["claim"] = ClaimEntry(epsilon=float(claimed_epsilon), refuted=refuted)
    result.update(honesty_fields(result))
    return result, refuted
