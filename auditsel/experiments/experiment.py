"""Config -> spec -> run -> result: the flow behind `auditsel run` (docs/explanation/architecture.md contracts).

run_experiment computes the upper-bound panel (what applies to the base), plays the
distinguishing game if the spec has one (the bounds are computed in a thread meanwhile), derives
the lower bounds and returns the result dict of docs/reference/result-json.md
(a bound that does not apply is null).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from attacks.dpsgd_game import build_protocol, make_scorer
from attacks.proxies import make_proxy
from auditsel.accounting.exact import tradeoff_curve
from auditsel.accounting.panel import Panel
from auditsel.auditing.estimators import PanelOptions, estimator_panel, panel_dict
from auditsel.auditing.lower import LowerBound, audit_scores
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.auditing.streamed_audit import audit_chunks
from auditsel.errors import ConfigError
from auditsel.errors import jobs as check_jobs
from auditsel.executor import ExecutionOptions, in_background
from auditsel.experiments import bounds_cache as kept_bounds
from auditsel.experiments.config import ExperimentSpec, GameSpec, load_config, parse_config
from auditsel.experiments.one_run_experiment import play_one_run
from auditsel.files import claim_folder
from auditsel.games.engine import Checkpoints, GameRecord, default_jobs, run_game
from auditsel.games.fingerprint import code_identity, package_digest
from auditsel.games.played_score import is_monotone_largest, resolve_score, scored_winner
from auditsel.games.worst_case import DpsgdWorstCase
from auditsel.mechanisms import DpsgdBase
from auditsel.numerics import FloatArray
from auditsel.results.fields import (
    UpperCurve,
    computed_upper,
    is_cached,
    lower_fields,
    remember,
    result_interval,
    upper_fields,
    upper_key,
    upper_panel,
)
from auditsel.results.heuristics import honesty_fields
from auditsel.results.report import write_outputs
from auditsel.results.result import RunResult
from auditsel.roles import GameProtocol, MechanismPair, Proxy
from auditsel.rounds import RoundsLaw
from auditsel.selection import (
    BucketScore,
    FiniteWinner,
    GaussianWinner,
    ScoredGaussianWinner,
    TuningScore,
    winner_law,
)
from auditsel.version import __version__, source_commit

STREAM_ABOVE = 1 << 25  # games above this many trials are audited chunk by chunk from disk
PANEL_ABOVE = 200_000  # game.panel: auto computes the estimator panel up to this many trials
PLOT_TRIALS = 1 << 20  # a streamed run's plots use its first ~10^6 trials


def _game(spec: ExperimentSpec) -> GameSpec:
    """The spec's game section (the functions below run only specs that have one)."""
    if spec.game is None:
        raise ConfigError("game", "this config has no game section; add one to run trials")
    return spec.game


def threshold_grid(spec: ExperimentSpec, proxy_name: str) -> np.ndarray:
    """Bonferroni thresholds fixed by the spec alone (public knowledge, no scores seen).

    Gaussian base: `game.thresholds` points evenly spaced between the 1e-6 quantiles of the two
    winner laws (mapped through the proxy); finite base: one threshold between each pair of
    consecutive proxy values.
    """
    # a game's base has a reduced pair (parse_config: Gaussian, finite-output or DP-SGD)
    winner = winner_law(cast(MechanismPair, spec.base.reduced()), spec.rounds)
    values: np.ndarray
    if isinstance(winner, GaussianWinner):
        lo, hi = winner.quantile_range()
        if proxy_name == "sample":
            return np.linspace(lo, hi, _game(spec).thresholds)
        values = winner.log_likelihood_ratio(np.linspace(lo, hi, 4001))
        return np.linspace(values.min(), values.max(), _game(spec).thresholds)
    outputs = np.arange(len(winner.base.p))
    return _midpoints(outputs if proxy_name == "sample" else winner.log_likelihood_ratio(outputs))


def _midpoints(values: np.ndarray) -> np.ndarray:
    """One threshold between each pair of consecutive distinct finite values."""
    values = np.unique(values[np.isfinite(values)])
    return (values[:-1] + values[1:]) / 2 if len(values) > 1 else values


_SCORES: dict[str, TuningScore] = {}


def game_score(spec: ExperimentSpec) -> TuningScore:
    """The score the spec's game plays (`game.score` resolved for the setting by
    `games.played_score.resolve_score`; "worst" runs the attack once per setting, on the pair
    the game plays: the reduced Gaussian pair for the reduced game)."""
    g = _game(spec)
    pair = spec.base.reduced() if g.kind == "reduced" else spec.base
    if pair is None:  # an event base has no reduced game (parse_config refuses the pair)
        raise ConfigError("game.kind", f"{type(spec.base).__name__} has no reduced game")
    if g.score != "worst":
        return resolve_score(g.score, pair, spec.rounds, spec.delta)
    key = repr((pair, spec.rounds, spec.delta))
    if key not in _SCORES:
        _SCORES[key] = resolve_score("worst", pair, spec.rounds, spec.delta)
    return _SCORES[key]


def _score_fields(score: TuningScore, choice: TuningScore | str) -> dict[str, Any]:
    """result.json's `lower.score`: what the tuner's score was (`describe`), as configured
    (`choice`: "worst", "farthest", ...) and as played (the score's fields; infinite guesses as
    the strings "inf", "-inf")."""
    shown: Callable[[float], float | str] = lambda v: (
        v if np.isfinite(v) else ("inf" if v > 0 else "-inf")
    )
    fields: dict[str, Any] = {"kind": type(score).__name__, "describe": score.describe()}
    for name, value in vars(score).items():
        if isinstance(value, tuple):
            value = [shown(float(v)) for v in value]
        fields[name] = value
    kinds = {"FarthestScore": "farthest", "BucketScore": "bucket", "MonotoneScore": "monotone"}
    fields["configured"] = choice if isinstance(choice, str) else kinds[type(choice).__name__]
    return fields


def fingerprint(spec: ExperimentSpec) -> str:
    """What determines the trial scores: base, law, protocol, proxy, seed, chunk size, and the
    tuner's score when it is not today's monotone one."""
    g = _game(spec)
    payload = {
        "base": spec.base_config,
        "mu": getattr(spec.base.reduced(), "mu", None),
        "sigma": getattr(spec.base, "noise_multiplier", None),
        "dpsgd": None if g.dpsgd is None else repr(g.dpsgd),
        "rounds": spec.rounds.describe(),
        "game": g.kind,
        "proxy": g.proxy,
        "seed": g.seed,
        "chunk_size": g.chunk_size,
        "delta": spec.delta if "epsilon" in spec.base_config else None,
    }
    if g.kind in ("reduced", "dpsgd_worst_case") and not is_monotone_largest(game_score(spec)):
        payload["score"] = repr(game_score(spec))
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def code_of(spec: ExperimentSpec) -> dict[str, str]:
    """The code the spec's numbers depend on (`auditsel.games.fingerprint.code_identity`), with
    torch's version for the DP-SGD games (their arithmetic runs in torch)."""
    extra = {}
    if spec.game is not None and spec.game.kind == "dpsgd":
        # deferred: torch (heavy) loads only for DP-SGD games
        import torch

        extra["torch"] = torch.__version__
    return code_identity(**extra)


def _available_memory() -> int | None:
    """Bytes of memory this process may still use (None: unreadable): the smaller of
    /proc/meminfo's `MemAvailable` and cgroup v2's `memory.max` minus `memory.current`."""
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        cap = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
        if cap.isdigit() and used.isdigit():
            limits.append(max(int(cap) - int(used), 0))
    except OSError:
        pass
    return min(limits) if limits else None


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


BYTES_PER_TRIAL = 24  # kept in memory: score and coin, their concatenation, the sorted scores


def _check_memory(spec: ExperimentSpec, protocol: GameProtocol, stream: bool) -> None:
    """A ConfigError naming the field to change, before any work, when a game's memory (a lower
    estimate: an in-memory game's scores, one chunk of a DP-SGD game, its protocol's
    `memory_bytes`) exceeds `_available_memory()`."""
    available = _available_memory()
    if available is None:
        return
    g = _game(spec)
    if not stream and g.trials * BYTES_PER_TRIAL > available:
        raise ConfigError(
            "game.trials",
            f"{g.trials:,} games audited in memory need at least "
            f"{_gib(g.trials * BYTES_PER_TRIAL)}; {_gib(available)} is available: set "
            f"game.stream: true (chunks audited from disk) or lower game.trials",
        )
    estimate = getattr(protocol, "memory_bytes", None)
    if estimate is None:
        return
    need = estimate(min(g.chunk_size, g.trials))
    if need > available:
        d = g.dpsgd
        field = "game.hidden" if d is not None and d.model == "mlp" else "game.chunk_size"
        raise ConfigError(
            field,
            f"a chunk of {min(g.chunk_size, g.trials):,} games trains a model of "
            f"{cast(Any, protocol).model.num_params:,} parameters and needs at least {_gib(need)} of memory; "
            f"{_gib(available)} is available: use smaller layers (game.hidden), fewer runs "
            f"at once (game.max_batch_runs) or smaller chunks (game.chunk_size)",
        )


def _dpsgd_base(spec: ExperimentSpec, kind: str) -> DpsgdBase:
    """The spec's base, which a DP-SGD game reads as one (parse_config pairs them)."""
    if not isinstance(spec.base, DpsgdBase):
        raise ConfigError("base", f"a {kind} game needs a DP-SGD base, got {spec.base!r}")
    return spec.base


def protocol_and_proxy(spec: ExperimentSpec) -> tuple[GameProtocol, Proxy]:
    """The trainer's protocol and the adversary's proxy for the spec's game."""
    g = _game(spec)
    if g.kind == "dpsgd":
        assert g.dpsgd is not None  # parse_config sets it for every DP-SGD game
        base = _dpsgd_base(spec, g.kind)
        return (
            build_protocol(g.dpsgd, base, spec.rounds),
            make_scorer(g.dpsgd, g.proxy, base, spec.rounds),
        )

    if g.kind == "dpsgd_worst_case":
        score = game_score(spec)
        game = DpsgdWorstCase.from_base(
            _dpsgd_base(spec, g.kind), spec.rounds, None if is_monotone_largest(score) else score
        )
        return game, make_proxy(g.proxy, game)
    winner: GaussianWinner | FiniteWinner | ScoredGaussianWinner
    if g.kind == "reduced":
        winner = scored_winner(spec.base, spec.rounds, game_score(spec))
    else:
        winner = winner_law(cast(MechanismPair, spec.base.reduced()), spec.rounds)
    return winner, make_proxy(g.proxy, winner)


def _spec_grid(spec: ExperimentSpec, protocol: GameProtocol) -> np.ndarray | None:
    """The Bonferroni grid fixed by the spec where the score law is public (a scored game's
    statistic, the worst-case game's score range, `threshold_grid`); None for DP-SGD games,
    whose grid is a pilot's, from a seeded split_fraction of each class left out of the bound."""
    g = _game(spec)
    if isinstance(protocol, ScoredGaussianWinner):
        if g.proxy == "score":
            return protocol.statistic_grid(g.thresholds)
        if g.proxy == "likelihood_ratio":
            values = protocol.log_likelihood_ratio(np.linspace(-40.0, 40.0 + protocol.mu, 4001))
            values = values[np.isfinite(values)]
            return np.linspace(values.min(), values.max(), g.thresholds)
    score = getattr(protocol, "score", None)
    if isinstance(score, BucketScore) and g.proxy == "score":
        assert score.guess is not None
        return _midpoints(np.append(np.asarray(score.guess, dtype=float), 0.0))
    if g.kind == "dpsgd_worst_case":
        assert isinstance(protocol, DpsgdWorstCase)
        lo, hi = protocol.score_range()
        return np.linspace(lo, hi, g.thresholds)
    return None if g.kind == "dpsgd" else threshold_grid(spec, g.proxy)


def _play(
    spec: ExperimentSpec,
    out_dir: Path | None,
    jobs: int | None,
    progress: bool,
    backend: str | None,
    prefetch: Callable[[], object] | None,
    checkpoint_after: float | None = None,
) -> tuple[tuple[GameRecord, LowerBound, bool, SortedScores | None], Future[Any] | None]:
    """(record, bound, streamed, the audit's sort: None for a streamed audit) of the played game
    and its estimator panel computed in the background (game.panel; "auto": up to PANEL_ABOVE
    games played in memory), or None. `prefetch` starts before the game plays."""
    if prefetch is not None:
        prefetch()
    g = _game(spec)
    protocol, proxy = protocol_and_proxy(spec)
    stream = g.trials > STREAM_ABOVE if g.stream == "auto" else g.stream
    if stream and out_dir is None:
        raise ConfigError(
            "game.stream", "a streamed audit needs an output directory for its chunks"
        )
    _check_memory(spec, protocol, stream)
    record = run_game(
        protocol,
        proxy,
        g.trials,
        g.seed,
        execution=ExecutionOptions(
            chunk_size=g.chunk_size,
            jobs=default_jobs(protocol, backend) if jobs is None else jobs,
            progress=progress,
            backend=backend,
            checkpoint_after=checkpoint_after,
        ),
        checkpoints=None
        if out_dir is None
        else Checkpoints(out_dir / "checkpoints", fingerprint(spec), g.chunk_size, code_of(spec)),
        in_memory=not stream,
    )
    bound, ss, spec_grid = _audit_record(spec, protocol, record, stream)
    if stream:  # the figures draw the first games
        assert record.chunks is not None
        scores, member = record.chunks.head(PLOT_TRIALS)
        record = GameRecord(scores, member, record.resumed_chunks, record.chunks)
    panel = None
    if not stream and (g.panel is True or (g.panel == "auto" and g.trials <= PANEL_ABOVE)):
        law = spec.rounds if is_monotone_largest(game_score(spec)) else None
        panel = in_background(lambda: _estimators(spec, record, spec_grid, ss, law))
    return (record, bound, stream, ss), panel


def _audit_record(
    spec: ExperimentSpec, protocol: GameProtocol, record: GameRecord, stream: bool
) -> tuple[LowerBound, SortedScores | None, FloatArray | None]:
    """(the lower bound, the one sort of an in-memory game, the spec's threshold grid) of the
    played `record` under the game's rule."""
    g = _game(spec)
    ss = None
    spec_grid = _spec_grid(spec, protocol)
    rule = g.rule(spec_grid if g.threshold == "bonferroni" else None)
    try:
        if stream:
            assert record.chunks is not None  # a streamed record reads its chunks from disk
            bound = audit_chunks(record.chunks, spec.delta, confidence=g.confidence, rule=rule)
        else:
            assert record.scores is not None and record.member is not None  # played in memory
            ss = SortedScores(record.scores, record.member)
            bound = audit_scores(
                record.scores,
                record.member,
                spec.delta,
                confidence=g.confidence,
                rule=rule,
                sorted_scores=ss,
            )
    except ConfigError as err:  # a rule's option that the games cannot satisfy: game.<option>
        fields = {"member": "game.trials", "scores": "game.trials"}  # too few games of a class
        raise ConfigError(fields.get(err.field, f"game.{err.field}"), err.message) from None
    return bound, ss, spec_grid


def _estimators(
    spec: ExperimentSpec,
    record: GameRecord,
    spec_grid: FloatArray | None,
    ss: SortedScores | None,
    law: RoundsLaw | None,
) -> dict[str, Any]:
    """result.json's lower.estimators: the estimator panel of the game's scores (`law`: the
    selection-aware fit's law of K, None where it does not model the game), or why not."""
    g = _game(spec)
    try:
        panel = estimator_panel(
            record.scores,
            record.member,
            spec.delta,
            g.confidence,
            law=law,  # the selection-aware fit models today's monotone game only
            seed=g.seed,
            options=PanelOptions(
                threshold_grid=spec_grid, grid_size=g.thresholds, split_fraction=g.split_fraction
            ),
            sorted_scores=ss,
        )
        return panel_dict(panel)
    except ConfigError as err:  # e.g. too few games for the panel's split entries
        return {"skipped": f"estimator panel not computed: {err}"}


@dataclass(frozen=True)
class ExperimentOutputs:
    """What `run_experiment` computes beside the result, and how; never its numbers.

    `curves`: the privacy curves of the bounds (and result.json's curve sections). `prefetch`
    (the CLI's matplotlib import in a thread) starts once the bounds are under way.
    `defer_panel`: the estimator panel is left in artefacts["estimators"] for
    `report.write_outputs` to put in result["lower"]["estimators"] after the plots.
    `bounds_cache`: a folder keeping a played setting's bounds across runs
    (`auditsel.experiments.bounds_cache`; None: nothing kept). `figure_data`: tradeoff.png's
    exact trade-off curve (`accounting.exact.tradeoff_curve`) is computed beside the game
    (artefacts["exact_tradeoff"])."""

    curves: bool = True
    prefetch: Callable[[], object] | None = None
    defer_panel: bool = False
    bounds_cache: Path | None = None
    figure_data: bool = False


def run_experiment(
    spec: ExperimentSpec,
    out_dir: Path | None = None,
    jobs: int | None = 1,
    progress: bool = True,
    backend: str | None = None,
    checkpoint_after: float | None = None,
    outputs: ExperimentOutputs | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Returns (result, artefacts): result.json content and in-memory data for the report.
    `jobs`: the game's (None: `games.engine.default_jobs`, every core for a game
    played in threads, else 1). `checkpoint_after`: seconds the game plays before its chunks
    are written (`games.engine.run_game`). `outputs`: what is computed beside the result
    (`ExperimentOutputs`; None: its defaults)."""
    out = outputs if outputs is not None else ExperimentOutputs()
    start = time.perf_counter()
    reduced = spec.base.reduced()  # None: no exact winner law (a dp_accounting event base)
    winner = None if reduced is None else winner_law(reduced, spec.rounds)

    def play() -> tuple[Any, Future[Any] | None]:
        return _play(spec, out_dir, jobs, progress, backend, out.prefetch, checkpoint_after)

    played, panel, bounds, curve, exact_tradeoff = _bounds_and_game(spec, play, out, winner)
    commit, dirty = source_commit()
    result = {
        "name": spec.name,
        "delta": spec.delta,
        **upper_fields(spec.base, spec.rounds, bounds, curve, kind=spec.base_config.get("kind")),
        "version": __version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "code_digest": package_digest(),
    }
    artefacts: dict[str, Any] = {"winner": winner, "curve": curve[:2], "attack_curve": curve[2]}
    if exact_tradeoff is not None:
        artefacts["exact_tradeoff"] = exact_tradeoff
    if spec.game is not None and spec.game.one_run is not None:
        result["one_run"] = play_one_run(
            spec, out_dir, fingerprint=fingerprint(spec), code=code_of(spec)
        )
    elif spec.game is not None and played is not None:
        _add_played(spec, played, panel, out.defer_panel, result, artefacts)
    result["interval"] = result_interval(result, bounds)
    result.update(honesty_fields(result))  # heuristic values and the contradicted ones
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result, artefacts


def _bounds_and_game(
    spec: ExperimentSpec,
    play: Callable[[], tuple[Any, Future[Any] | None]],
    out: ExperimentOutputs,
    winner: Any,
) -> tuple[Any, Future[Any] | None, Panel, UpperCurve, Any]:
    """(played, panel, bounds, curve, exact trade-off) of `run_experiment`: the game played by
    `play` (none for a one-run audit), the bounds computed in a thread beside it unless
    remembered."""
    with_curves = out.curves and spec.delta > 0
    key = upper_key(spec.base, spec.rounds, spec.delta, with_curves, winner)
    played = panel = exact_tradeoff = None
    games = spec.game is not None and spec.game.one_run is None
    if games and not is_cached(key):
        # the bounds are computed in a thread beside the game; an error in either surfaces here
        def compute() -> Any:
            return computed_upper(spec.base, spec.rounds, spec.delta, with_curves, winner)

        def beside() -> tuple[Any, Any]:
            kept = kept_bounds.cached(key, compute, None if key is None else out.bounds_cache)
            return kept, None if winner is None or not out.figure_data else tradeoff_curve(winner)

        upper = in_background(beside)
        played, panel = play()
        kept, exact_tradeoff = upper.result()
        bounds, curve = copy.deepcopy(remember(key, kept))
    else:
        if games:
            played, panel = play()
        elif out.prefetch is not None:
            out.prefetch()
        bounds, curve = upper_panel(spec.base, spec.rounds, spec.delta, with_curves, winner)
    return played, panel, bounds, curve, exact_tradeoff


def _add_played(
    spec: ExperimentSpec,
    played: tuple[GameRecord, LowerBound, bool, SortedScores | None],
    panel: Future[Any] | None,
    defer_panel: bool,
    result: dict[str, Any],
    artefacts: dict[str, Any],
) -> None:
    """result["lower"] and the artefacts of a played game (`run_experiment`)."""
    assert spec.game is not None
    record, bound, streamed, ss = played
    if panel is not None and defer_panel:  # filled in by write_outputs (its place kept)
        bound = replace(bound, estimators={})
        artefacts["estimators"] = panel
    elif panel is not None:
        bound = replace(bound, estimators=panel.result())
    result["lower"] = lower_fields(bound, spec.game.kind, spec.game.proxy, spec.game.seed, streamed)
    if spec.game.kind in ("reduced", "dpsgd_worst_case") and spec.game.score != "monotone":
        result["lower"]["score"] = _score_fields(game_score(spec), spec.game.score)
    artefacts["record"] = record
    if ss is not None:
        artefacts["by_coin"] = ss.by_coin()  # the audit's sort serves the plots


def run_config(
    config: str | Path | Mapping[str, Any] | ExperimentSpec,
    out_dir: str | Path | None = None,
    *,
    jobs: int = 1,
    trials: int | None = None,
    seed: int | None = None,
    score: TuningScore | str | None = None,
    progress: bool = False,
    checkpoint_after: float | None = None,
) -> RunResult:
    """Run one experiment from a config (a YAML path, a mapping as in the YAML, or a parsed
    ExperimentSpec) and return its result.

    Args:
        config: a YAML path, a mapping as in the YAML, or an `ExperimentSpec`.
        out_dir: also write result.json, report.md and the plots there (and keep the game's
            checkpoints, so a rerun resumes); None: write nothing.
        jobs: joblib workers for the game (the numbers do not depend on it).
        trials: overrides game.trials (range-checked as in the config).
        seed: overrides game.seed (range-checked as in the config).
        score: overrides game.score: "monotone", "worst" or a `selection` score
            (`MonotoneScore`, `FarthestScore`, `BucketScore`; the adversary then reads its
            statistic, proxy `score`).
        progress: show a progress bar.
        checkpoint_after: with `out_dir`, the seconds the game plays before its finished
            chunks are written (None: 5; 0: from the first chunk).

    Returns:
        A `RunResult`: result.json's sections as attributes, `to_dict()` for the document.

    Raises:
        auditsel.errors.ConfigError: bad input, also an `out_dir` that escapes (the working
            folder or one of its parents) or is in use by another run
            (`auditsel.files.claim_folder`).
    """
    jobs = check_jobs(jobs)  # as the CLI's --jobs: jobs=0 or "2" is a ConfigError
    if isinstance(config, ExperimentSpec):
        spec = config
    else:
        spec = load_config(config) if isinstance(config, (str, Path)) else parse_config(config)
    given = {
        k: v for k, v in {"trials": trials, "seed": seed, "score": score}.items() if v is not None
    }
    spec = spec.with_game(**given) if given else spec
    if out_dir is None:
        return RunResult.from_dict(run_experiment(spec, None, jobs=jobs, progress=progress)[0])
    # the folder is resolved, refused when it escapes, locked, and on failure only what this
    # run created there is removed (auditsel.files)
    with claim_folder(out_dir, field="out_dir") as folder:
        result, artefacts = run_experiment(
            spec,
            folder.path,
            jobs=jobs,
            progress=progress,
            checkpoint_after=checkpoint_after,
            outputs=ExperimentOutputs(figure_data=True),
        )
        write_outputs(folder.path, result, artefacts)
    return RunResult.from_dict(result)
