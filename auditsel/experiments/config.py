"""Config (YAML) -> spec: frozen data, validated once, before any work starts.

Every error is an `auditsel.errors.ConfigError` naming the field's dotted path (a domain
object's own parameter gets its section's path here, `base.mu`: docs/explanation/architecture.md,
"Errors"). Unknown keys are errors. YAML is read with safe_load only (no object construction).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeAlias

import numpy as np

from attacks.dpsgd_game import DpsgdGameSpec
from attacks.names import CANARY_NAMES, DPSGD_PROXIES, INPUT_CANARIES, MODEL_NAMES, THREAT_NAMES
from attacks.proxies import PROXIES
from auditsel.auditing.rules import THRESHOLD_RULES, ThresholdRule, threshold_rule
from auditsel.errors import LIMITS, ConfigError, shown
from auditsel.errors import choice as _choice
from auditsel.errors import integer as _integer
from auditsel.errors import mapping as _mapping
from auditsel.errors import number as _number
from auditsel.events import LaplaceBase
from auditsel.mechanisms import (
    NOISE_MAX,
    NOISE_MIN,
    SAMPLE_RATE_MIN,
    STEPS_MAX,
    DpsgdBase,
    FiniteOutputBase,
    GaussianBase,
)
from auditsel.rounds import RoundsLaw, law_from_dict
from auditsel.selection import (
    BucketScore,
    FarthestScore,
    MonotoneScore,
    TuningScore,
    tuning_score_from_spec,
)

GAME_KINDS = ("reduced", "discrete", "dpsgd", "dpsgd_worst_case")
DPSGD_DATASETS = ("digits", "breast_cancer", "mnist", "fashion_mnist", "cifar10", "svhn")
LOCAL_DATASETS = ("mnist", "fashion_mnist", "cifar10", "svhn")


def default_config_path() -> Path:
    """The embedded default experiment (configs/quickstart.yaml, shipped in the package)."""
    return Path(__file__).parents[1] / "configs" / "quickstart.yaml"


#: the mechanism pairs a config's `base` section describes
ConfigBase: TypeAlias = GaussianBase | FiniteOutputBase | DpsgdBase | LaplaceBase


@dataclass(frozen=True)
class GameSpec:
    kind: str = "reduced"
    trials: int = 1_000_000
    seed: int = 0
    confidence: float = 0.95
    threshold: str = "split"
    proxy: str = "sample"
    split_fraction: float = 0.5
    thresholds: int = 100  # bonferroni grid size
    chunk_size: int = 1 << 18
    #: auto (stream above STREAM_ABOVE trials) | true | false
    stream: bool | Literal["auto"] = "auto"
    dpsgd: DpsgdGameSpec | None = None
    #: one-run audits instead of games (auditsel.experiments.one_run_experiment)
    one_run: OneRunSpec | None = None
    #: estimator panel: auto (in-memory runs up to PANEL_ABOVE trials) | true | false
    panel: bool | Literal["auto"] = "auto"
    #: how the tuner ranks its runs: "monotone" (today's game), "worst" (the attack's score for
    #: the setting, `games.played_score.resolve_score`) or a FarthestScore
    score: TuningScore | Literal["monotone", "worst"] = "monotone"

    def rule(self, grid: Sequence[float] | np.ndarray | None = None) -> ThresholdRule:
        """The threshold rule of `threshold` with this game's options (`grid`: a bonferroni
        grid fixed in advance; the split's seed is the game's seed)."""
        return threshold_rule(
            self.threshold,
            split_fraction=self.split_fraction,
            grid_size=self.thresholds,
            grid=grid,
            seed=self.seed,
        )


@dataclass(frozen=True)
class OneRunSpec:
    """`game.one_run`: m canaries in one tuning run, audited `repeats` times ([SNJ23], [MMC24])."""

    canaries: int = 1000
    repeats: int = 1
    family: str = "tuning"  # [MMC24]'s hypothesised family: tuning (exact per canary) | gdp


@dataclass(frozen=True)
class ExperimentSpec:
    name: str
    delta: float
    base: ConfigBase
    rounds: RoundsLaw
    game: GameSpec | None
    base_config: dict[str, Any] = field(default_factory=dict)  # as written, for the report

    def with_game(self, **changes: Any) -> ExperimentSpec:
        """The spec with game fields changed; `trials` and `seed` are range-checked as in the
        config (a ConfigError naming game.trials / game.seed)."""
        if self.game is None:
            raise ConfigError("game", "this config has no game section; add one to run trials")
        for key in ("trials", "seed"):
            if key in changes:
                changes[key] = _integer(changes[key], f"game.{key}", *LIMITS[f"game.{key}"])
        if "score" in changes:  # the adversary reads the new score's statistic
            changes["score"] = _parse_score(changes["score"], self.game.kind, self.game.one_run)
            changes.setdefault("proxy", "score" if self.game.kind != "dpsgd" else self.game.proxy)
        return replace(self, game=replace(self.game, **changes))


# --- field checkers (auditsel.errors) -------------------------------------------------------


def _no_unknown(section: Mapping[str, Any], name: str, allowed: Collection[str]) -> None:
    for key in section:
        if key not in allowed:
            prefix = f"{name}." if name else ""
            raise ConfigError(
                f"{prefix}{key}", f"unknown key; allowed: {', '.join(sorted(allowed))}"
            )


def _field(
    section: Mapping[str, Any],
    spec: object,
    path: str,
    check: Callable[..., Any],
    *args: Any,
    **kw: Any,
) -> Any:
    """`check` of the section's value of `path`'s last key (default: the spec's field)."""
    key = path.rsplit(".", 1)[-1]
    return check(section.get(key, getattr(spec, key)), path, *args, **kw)


# --- sections ------------------------------------------------------------------------------


BASE_KINDS = ("gaussian", "discrete", "dpsgd", "laplace")


def parse_base(raw: object, delta: float) -> ConfigBase:
    """The mechanism pair of a config's `base` section (a mapping: kind gaussian, discrete,
    dpsgd or laplace, as in a config file); a ConfigError names the field."""
    base = _mapping(raw, "base")
    kind = _choice(base.get("kind"), "base.kind", BASE_KINDS)
    if kind in ("dpsgd", "laplace"):
        return _parse_steps_base(base, delta, kind)
    if kind == "gaussian":
        _no_unknown(base, "base", {"kind", "mu", "epsilon"})
        if ("mu" in base) == ("epsilon" in base):
            raise ConfigError(
                "base.mu", "give exactly one of base.mu (in (0, inf)) or base.epsilon (eps_B)"
            )
        if "mu" in base:
            return GaussianBase(_number(base["mu"], "base.mu", 0, 1e3, lo_open=True))
        eps = _number(base["epsilon"], "base.epsilon", 0, 100, lo_open=True)
        if delta <= 0:
            raise ConfigError(
                "delta", "must be in (0, 1) to calibrate base.epsilon to a Gaussian mu"
            )
        return GaussianBase.from_epsilon(eps, delta)
    _no_unknown(base, "base", {"kind", "p", "q"})
    for key in ("p", "q"):
        if not isinstance(base.get(key), list):
            raise ConfigError(
                f"base.{key}", "must be a list of output probabilities, lowest score first"
            )
        for i, v in enumerate(base[key]):
            _number(v, f"base.{key}[{i}]", 0, 1)
    try:
        return FiniteOutputBase(tuple(base["p"]), tuple(base["q"]))
    except ConfigError as err:
        raise err.within("base") from None


def _parse_steps_base(base: Mapping[str, Any], delta: float, kind: str) -> DpsgdBase | LaplaceBase:
    """dpsgd: one DP-SGD run ([XWW24] eq. 1), sigma given or calibrated to eps_B at delta;
    laplace: N (Poisson-subsampled) Laplace steps (`auditsel.events.LaplaceBase`), b given or
    calibrated to a pure eps of one run."""
    _no_unknown(
        base, "base", {"kind", "noise_multiplier", "epsilon", "steps", "sample_rate", "accountant"}
    )
    dpsgd = kind == "dpsgd"
    if ("noise_multiplier" in base) == ("epsilon" in base):
        raise ConfigError(
            "base.noise_multiplier",
            "give exactly one of base.noise_multiplier "
            + (
                "(sigma, in (0, inf)) or base.epsilon (eps_B of one run at delta)"
                if dpsgd
                else "(b, in (0, inf)) or base.epsilon (the pure eps of one run, in (0, 100])"
            ),
        )
    if dpsgd and "steps" not in base:
        raise ConfigError(
            "base.steps", "required for kind dpsgd: the number of DP-SGD steps N (integer >= 1)"
        )
    steps = _integer(base.get("steps", 1), "base.steps", 1, STEPS_MAX)
    rate = _number(base.get("sample_rate", 1.0), "base.sample_rate", SAMPLE_RATE_MIN, 1)
    accountants = ("rdp", "pld") if dpsgd else ("pld", "rdp")
    accountant = _choice(base.get("accountant", accountants[0]), "base.accountant", accountants)
    cls = DpsgdBase if dpsgd else LaplaceBase
    try:
        if "noise_multiplier" in base:
            b = _number(base["noise_multiplier"], "base.noise_multiplier", NOISE_MIN, NOISE_MAX)
            return cls(b, steps, rate, accountant)
        eps = _number(base["epsilon"], "base.epsilon", 0, 100, lo_open=True)
        if dpsgd and delta <= 0:
            raise ConfigError(
                "delta", "must be in (0, 1) to calibrate base.epsilon to a noise multiplier"
            )
        try:
            if dpsgd:
                return DpsgdBase.from_epsilon(eps, delta, steps, rate, accountant)
            return LaplaceBase.from_epsilon(eps, steps, rate, accountant)
        except ConfigError as err:
            if err.field != "noise_multiplier":
                raise
            least = cls(NOISE_MIN, steps, rate, accountant)
            most = least.epsilon(delta) if isinstance(least, DpsgdBase) else least.pure_epsilon
            raise ConfigError(
                "base.epsilon",
                f"calibrates to a noise multiplier below {NOISE_MIN:g}, where the bounds leave "
                f"float64: at most {most:.4g} for these steps and sample rate, got {eps:g}",
            ) from None
    except ConfigError as err:
        raise (err if err.field.startswith(("base.", "delta")) else err.within("base")) from None


DPSGD_DEFAULT_CHUNK = 64


def _parse_dpsgd_game(game: Mapping[str, Any]) -> DpsgdGameSpec:
    d = DpsgdGameSpec()
    dataset = _field(game, d, "game.dataset", _choice, DPSGD_DATASETS)
    data_dir = game.get("data_dir", d.data_dir)
    if dataset in LOCAL_DATASETS:
        if not isinstance(data_dir, str) or not data_dir:
            raise ConfigError(
                "game.data_dir",
                f"required for dataset {dataset}: a local folder holding its "
                f"files (nothing is downloaded)",
            )
        if not Path(data_dir).is_dir():
            raise ConfigError(
                "game.data_dir",
                f"{data_dir} not found; download {dataset} there and pass that folder",
            )
    elif data_dir is not None and not isinstance(data_dir, str):
        raise ConfigError("game.data_dir", f"must be a folder path, got {data_dir!r}")
    hidden = game.get("hidden", list(d.hidden))
    if not isinstance(hidden, list) or not hidden:
        raise ConfigError("game.hidden", "must be a non-empty list of layer widths")
    rates = game.get("learning_rates", list(d.learning_rates))
    if not isinstance(rates, list) or not rates:
        raise ConfigError(
            "game.learning_rates", "must be a non-empty list of learning rates in (0, inf)"
        )

    def optional_size(key: str) -> int | None:
        value = game.get(key, getattr(d, key))
        return None if value is None else _integer(value, f"game.{key}", 1, 10**8)

    return DpsgdGameSpec(
        threat=_field(game, d, "game.threat", _choice, THREAT_NAMES),
        canary=_field(game, d, "game.canary", _choice, CANARY_NAMES),
        input_canary=_field(game, d, "game.input_canary", _choice, INPUT_CANARIES),
        dataset=dataset,
        data_dir=data_dir,
        model=_field(game, d, "game.model", _choice, MODEL_NAMES),
        hidden=tuple(_integer(h, f"game.hidden[{i}]", 1, 1 << 16) for i, h in enumerate(hidden)),
        train_size=optional_size("train_size"),
        validation_size=optional_size("validation_size"),
        learning_rates=tuple(
            _number(v, f"game.learning_rates[{i}]", 0, 1e6, lo_open=True)
            for i, v in enumerate(rates)
        ),
        clip=_field(game, d, "game.clip", _number, 0, 1e9, lo_open=True),
        device=_field(game, d, "game.device", _choice, (None, "cpu", "cuda")),
        max_batch_runs=_field(game, d, "game.max_batch_runs", _integer, 1, 1 << 16),
    )


def _game_kind(game: Mapping[str, Any], base: ConfigBase) -> str:
    """The game's kind, checked: a known kind, only its fields, and a base it can play."""
    kind = str(_choice(game.get("kind", "reduced"), "game.kind", GAME_KINDS))
    allowed = set(GameSpec.__dataclass_fields__) - {"dpsgd"}
    if kind == "dpsgd":
        allowed |= set(DpsgdGameSpec.__dataclass_fields__)
    _no_unknown(game, "game", allowed)
    expected_base, need = {
        "reduced": ((GaussianBase, DpsgdBase), "gaussian or dpsgd"),
        "discrete": ((FiniteOutputBase,), "discrete"),
        "dpsgd": ((DpsgdBase,), "dpsgd"),
        "dpsgd_worst_case": ((DpsgdBase,), "dpsgd"),
    }[kind]
    if not isinstance(base, expected_base):
        raise ConfigError("game.kind", f"{kind} needs base.kind: {need}")
    return kind


def _parse_game(raw: object, base: ConfigBase) -> GameSpec:
    game = _mapping(raw, "game")
    kind = _game_kind(game, base)
    proxies = {"dpsgd": DPSGD_PROXIES, "dpsgd_worst_case": ("sample", "score")}.get(kind, PROXIES)
    d = GameSpec()
    score = _parse_score(game.get("score"), kind, game.get("one_run"))
    default_proxy = {
        "dpsgd": proxies[0],
        "dpsgd_worst_case": "sample" if score == "monotone" else "score",
    }.get(kind, d.proxy if score == "monotone" else "score")
    return GameSpec(
        kind=kind,
        trials=_field(game, d, "game.trials", _integer, *LIMITS["game.trials"]),
        seed=_field(game, d, "game.seed", _integer, *LIMITS["game.seed"]),
        confidence=_field(game, d, "game.confidence", _number, 0.5, 1, hi_open=True),
        threshold=_field(game, d, "game.threshold", _choice, THRESHOLD_RULES),
        proxy=_choice(game.get("proxy", default_proxy), "game.proxy", proxies),
        split_fraction=_field(
            game, d, "game.split_fraction", _number, 0, 1, lo_open=True, hi_open=True
        ),
        thresholds=_field(game, d, "game.thresholds", _integer, *LIMITS["game.thresholds"]),
        chunk_size=_integer(
            game.get("chunk_size", DPSGD_DEFAULT_CHUNK if kind == "dpsgd" else d.chunk_size),
            "game.chunk_size",
            1,
            1 << 24,
        ),
        stream=_field(game, d, "game.stream", _choice, ("auto", True, False)),
        dpsgd=_parse_dpsgd_game(game) if kind == "dpsgd" else None,
        one_run=None
        if game.get("one_run") is None
        else _parse_one_run(game["one_run"], kind, base),
        panel=_field(game, d, "game.panel", _choice, ("auto", True, False)),
        score=score,
    )


def _parse_score(
    raw: object, kind: str, one_run: object = None
) -> TuningScore | Literal["monotone", "worst"]:
    """`game.score`: monotone (default) | worst | {kind: farthest, center: C} (or, from Python,
    a `selection` score object); the reduced game plays all three, the worst-case DP-SGD game
    monotone and worst (over the run's label), the others and one-run audits monotone only."""
    score: MonotoneScore | FarthestScore | BucketScore | Literal["worst"]
    if isinstance(raw, (MonotoneScore, FarthestScore, BucketScore)):  # the Python API's form
        score = raw
        if isinstance(raw, MonotoneScore) and raw.direction == "largest":
            return "monotone"
    else:
        score = tuning_score_from_spec(raw)
    if score == MonotoneScore():
        return "monotone"
    if kind in ("discrete", "dpsgd"):
        raise ConfigError(
            "game.score", f"game.kind {kind} plays the monotone score only (reduced: any score)"
        )
    if kind == "dpsgd_worst_case" and isinstance(score, FarthestScore):
        raise ConfigError(
            "game.score",
            "game.kind dpsgd_worst_case plays monotone or worst (a farthest score needs "
            "game.kind: reduced)",
        )
    if one_run is not None:
        raise ConfigError(
            "game.score", "one-run audits (game.one_run) play the monotone score only"
        )
    return score


def _parse_one_run(raw: object, kind: str, base: ConfigBase) -> OneRunSpec:
    one = _mapping(raw, "game.one_run")
    _no_unknown(one, "game.one_run", set(OneRunSpec.__dataclass_fields__))
    if kind == "discrete":
        raise ConfigError(
            "game.one_run", "needs game.kind reduced or dpsgd (canaries on coordinates)"
        )
    if kind == "dpsgd" and getattr(base, "sample_rate", 1.0) != 1.0:
        raise ConfigError(
            "game.one_run",
            "needs base.sample_rate: 1 (full batches; a shared Poisson "
            "mask would couple the canaries)",
        )
    d = OneRunSpec()
    return OneRunSpec(
        canaries=_field(one, d, "game.one_run.canaries", _integer, 2, 10**6),
        repeats=_field(one, d, "game.one_run.repeats", _integer, 1, 10**4),
        family=_field(one, d, "game.one_run.family", _choice, ("tuning", "gdp")),
    )


def parse_config(raw: object) -> ExperimentSpec:
    top = _mapping(raw, "config")
    if "sweep" in top:
        raise ConfigError(
            "sweep",
            "a sweep config is expanded by auditsel.experiments.sweep, not parsed as one experiment",
        )
    _no_unknown(top, "", {"name", "delta", "base", "rounds", "game", "sweep"})
    for key in ("name", "delta", "base", "rounds"):
        if key not in top:
            raise ConfigError(key, "required key is missing")
    name = top["name"]
    valid = isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9._-]{1,100}", name)
    if not valid or set(name) == {"."}:
        raise ConfigError(
            "name",
            "must be 1 to 100 letters, digits, '-', '_' or '.' (not only dots: it names the "
            f"output folder results/NAME), got {shown(name)}",
        )
    delta = _number(top["delta"], "delta", 0, 1, hi_open=True)
    base = parse_base(top["base"], delta)
    rounds = law_from_dict(_mapping(top["rounds"], "rounds"), path="rounds")
    game = _parse_game(top["game"], base) if top.get("game") is not None else None
    return ExperimentSpec(
        name=name, delta=delta, base=base, rounds=rounds, game=game, base_config=dict(top["base"])
    )


def load_config(path: str | Path) -> ExperimentSpec:
    """The experiment of a YAML config file (`parse_config` of its content)."""
    # deferred: PyYAML, only when a file is read (`import auditsel` loads none)
    from auditsel.files.safe_yaml import read_yaml

    return parse_config(read_yaml(path))
