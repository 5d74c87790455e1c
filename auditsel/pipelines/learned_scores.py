"""Scores learned from a pilot, valid by splitting: the default attack on a release of fields.

Contract. With `score=None` and a release that publishes more than what the canary's own score
reads (a mapping: `{"model": ..., "lr": ..., "clip": ..., "history": [...]}`),
`audit_pipeline` and `plan_pipeline` learn the score from a pilot before the audit
(`learn_score`); the audit then plays its games with that one score, fixed in advance:

1. The family (`statistics(release, canary)`): one number per candidate statistic of
   everything numeric the release holds, fixed by one probe run outside the audit
   (`auditsel.pipelines.release_scores.PROBE_SEED`, the canary out):

   * the canary's own score (`canary.score`), and the same divided by each released scalar and
     by each product of two (e.g. `canary score / (lr x clip)`: a displacement in units the
     release itself states); where the canary reads the release's own noise scale
     (`Canary.noise`), that reading too, raw and divided alike (a guide for the choice, never a
     candidate score);
   * every released number; an array: its sum, and each entry when it has at most `ENTRIES`;
     a list or tuple: its count, and the sum, max and mean of each of its entries' statistics;
     a table of records (a list of mappings, one per trial) also each statistic's sum over the
     root of the count (K runs each shifted by mu in units of its noise: sum / sqrt(K) is
     N(sqrt(K) mu, 1) with the canary and N(0, 1) without, the likelihood ratio's z statistic),
     and for a record that holds a "model" the canary's score of it, raw and divided by the
     record's scalars;
   * a model (a torch module, at any depth): each parameter's sum and, with the initial
     parameters released (`"initial"`), its displacement's norm; its buffers and its
     submodules' numeric attributes as arrays above; for an `InputCanary`, the column of its
     largest feature in every weight matrix taking the data's features (sum, displacement's sum
     and norm, divided as the canary's score is);
   * a model of arrays (a callable with `parameters()`): each parameter as an array;
   * any other released object: its public numeric attributes, as above.

   A statistic that is NaN or missing in a game reads 0 there.

2. The choice: a pilot of `games` games (`LEARN_GAMES` by default) at `learning_seed(seed)`,
   derived from the audit's seed and never it. Where the family holds the noise reading, the
   first half first fixes the units of the canary's score: of its divisions only the one whose
   division of the noise reading varies least in log stays a candidate (`_calibrated`: one
   spread in every game, no tail). On the first half every statistic is ranked in both
   directions by the largest eq. 4 eps of [XWW24] at the Clopper-Pearson limits of its
   threshold tests (ties: the ROC area, then the effect size, Cohen's d, infinite for one
   constant per world, then the family's order); the best is the score, and up to four of its
   thresholds chosen there are its grid (`LearnedScore.grid`: the half's best threshold, and
   its largest score without the canary plus 0, 1/2 and 1 standard deviation), the audit's
   fixed thresholds under the rule named "split". The second half judges it
   (`LearnedScore.judged_eps`: the grid's tests there at their Clopper-Pearson limits,
   simultaneous at 80%) and is what `plan_pipeline` plans on.

Validity. The audit's games never take part in the choice, so the score is fixed before them,
as one written by hand is: eps_L stays valid at its confidence (overfitting the pilot costs
power, never validity). The pilot is cached per process for the same tune and data objects,
canary (by content), seed and pilot size (an early-stopping audit's looks, and a plan followed
by its audit, learn once).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from numpy.typing import NDArray

from auditsel.auditing.clopper_pearson import clopper_pearson_upper
from auditsel.auditing.planning import PilotTests
from auditsel.auditing.threshold_search import epsilon_from_rates
from auditsel.errors import ConfigError
from auditsel.pipelines.canaries import Canary, InputCanary, _to_numpy
from auditsel.pipelines.content_digest import content_digest
from auditsel.pipelines.game import (
    PipelineError,
    PipelineGame,
    TuneFn,
    field_columns,
    function_name,
)
from auditsel.pipelines.release_scores import PROBE_SEED, canary_score

LEARN_GAMES = 200  # the learning pilot: half chooses the score, half judges it
ENTRIES = 64  # an array of at most this many entries is scored entry by entry too
MAX_STATISTICS = 4096  # the family is cut there (in its order)
CHOICE_ALPHA = 0.4  # the Clopper-Pearson level of the ranking (80% one-sided limits)
JUDGE_CONFIDENCE = 0.8  # the held-out half's limits (Bonferroni over the grid's tests)
LEARN_TAG = 36  # mixed into the audit's seed: the learning pilot's own stream
CANARY = "canary score"
NOISE = "canary noise"  # the release's own noise scale, as the canary reads it (a divisor's guide)
INITIAL = "initial"
_CACHE: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_CACHE_SIZE = 16


def learning_seed(seed: int) -> int:
    """The learning pilot's seed for an audit of seed `seed`: derived from it, never it."""
    words = np.random.SeedSequence([int(seed), LEARN_TAG]).generate_state(2, np.uint32)
    return (int(words[0]) << 31) ^ int(words[1])  # < 2^63


# --- the family -------------------------------------------------------------------------------


def _scalar(value: Any) -> float | None:
    """A number or a one-element array or tensor as a float; None otherwise."""
    if isinstance(value, (int, float, np.number)):  # a bool too
        return float(value)
    array = _array(value) if hasattr(value, "shape") and hasattr(value, "dtype") else None
    return float(array.reshape(-1)[0]) if array is not None and array.size == 1 else None


def _array(value: Any) -> NDArray[np.float64] | None:
    """A numeric numpy array or torch tensor as float64; None otherwise."""
    if isinstance(value, np.ndarray) or (hasattr(value, "detach") and hasattr(value, "shape")):
        try:
            array = _to_numpy(value)
        except (TypeError, ValueError):
            return None
        return array if array.dtype.kind in "biuf" else None
    return None


def _is_module(value: Any) -> bool:
    return callable(getattr(value, "named_parameters", None)) and callable(value)


def _put_array(array: NDArray[np.float64], path: str, out: dict[str, float]) -> None:
    out[f"{path}.sum"] = float(array.sum()) if array.size else 0.0
    if 1 < array.size <= ENTRIES:
        for i, v in enumerate(array.reshape(-1)):
            out[f"{path}[{i}]"] = float(v)


def _put_list(
    items: list[Any] | tuple[Any, ...], path: str, out: dict[str, float], canary: Canary | None
) -> None:
    """A list's statistics (module docstring)."""
    out[f"{path}.count"] = float(len(items))
    records = all(isinstance(item, Mapping) for item in items)
    found: dict[str, list[float]] = {}
    for item in items:
        one: dict[str, float] = {}
        if records and canary is not None and "model" in item:
            if (score := canary_score(item, canary)) is not None:  # divided by the scalars
                one[CANARY] = score
                _divided(one, _scalars_of(item))
        _walk(item, "", one, None, None, 1)
        for key, value in one.items():
            found.setdefault(key, []).append(value)
    for key, values in found.items():
        name = f"{path}[*]{'.' + key if key else ''}"
        out[f"{name}.sum"] = float(np.sum(values))
        out[f"{name}.max"] = float(np.max(values))
        out[f"{name}.mean"] = float(np.mean(values))
        if records:  # K shifts of one size: the z statistic, sum / sqrt(K) (module docstring)
            out[f"{name}.sum / sqrt(count)"] = float(np.sum(values)) / math.sqrt(len(items))


def _put_noise(release: Any, canary: Canary, out: dict[str, float]) -> None:
    """out[NOISE] = the canary's reading of the release's noise scale, where it reads one."""
    try:
        noise = canary.noise(release)
    except (ConfigError, TypeError, ValueError, IndexError, KeyError):
        return
    if noise is not None:
        out[NOISE] = float(noise)


def _scalars_of(release: Any) -> dict[str, float]:
    """A mapping's released numbers by key (its initial weights left out); {} for any other."""
    if not isinstance(release, Mapping):
        return {}
    return {
        str(k): v
        for k, item in release.items()
        if k != INITIAL and (v := _scalar(item)) is not None
    }


def _walk(
    value: Any, path: str, out: dict[str, float], initial: Any, canary: Canary | None, depth: int
) -> None:
    """The statistics of one released value (module docstring), named from `path`."""
    if depth > 6 or len(out) >= MAX_STATISTICS or value is None or isinstance(value, str):
        return
    number = _scalar(value)
    if number is not None:
        out[path] = number
        return
    array = _array(value)
    if array is not None:
        _put_array(array, path, out)
    elif _is_module(value):
        _put_module(value, path, out, initial, canary)
    elif callable(getattr(value, "parameters", None)):  # a model of arrays: its parameters
        for i, parameter in enumerate(value.parameters()):
            if (array := _array(parameter)) is not None:
                _put_array(array, f"{path}.parameters[{i}]", out)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not (depth == 0 and key == INITIAL):
                _walk(item, f"{path}.{key}" if path else str(key), out, initial, canary, depth + 1)
    elif isinstance(value, (list, tuple)):
        _put_list(value, path or "release", out, canary)
    elif hasattr(value, "__dict__") and not callable(value):  # a released object's attributes
        for key, item in sorted(vars(value).items()):
            if not key.startswith("_"):
                _walk(item, f"{path}.{key}", out, None, None, depth + 1)


def _initial_of(initial: Any) -> dict[str, NDArray[np.float64]]:
    """The initial parameters by name: a state dict, or a module's named parameters."""
    if _is_module(initial):
        return {n: _to_numpy(p) for n, p in initial.named_parameters()}
    if isinstance(initial, Mapping):
        return {str(k): a for k, v in initial.items() if (a := _array(v)) is not None}
    return {}


def _put_module(
    model: Any, path: str, out: dict[str, float], initial: Any, canary: Canary | None
) -> None:
    """A model's parameters (sum; displacement norm from `initial`), buffers and attributes."""
    start = _initial_of(initial)
    column = _canary_column(canary)
    for name, parameter in model.named_parameters():
        theta = _to_numpy(parameter)
        plain = name.removeprefix("_module.")
        out[f"{path}.{plain}.sum"] = float(theta.sum())
        moved = theta - start[plain] if start.get(plain, np.empty(0)).shape == theta.shape else None
        if moved is not None:
            out[f"{path}.{plain} displacement norm"] = float(np.linalg.norm(moved))
        if column is not None and theta.ndim == 2 and theta.shape[1] == column[1]:
            where = f"{path}.{plain}[:, {column[0]}]"
            out[f"{where}.sum"] = float(theta[:, column[0]].sum())
            if moved is not None:
                out[f"{where} displacement sum"] = float(moved[:, column[0]].sum())
                out[f"{where} displacement norm"] = float(np.linalg.norm(moved[:, column[0]]))
    for name, buffer in model.named_buffers():
        if (array := _array(buffer)) is not None:
            _put_array(array, f"{path}.{name.removeprefix('_module.')}", out)
    for prefix, module in model.named_modules():
        for key, item in sorted(vars(module).items()):
            if key.startswith("_") or key == "training":
                continue
            where = f"{path}.{prefix.removeprefix('_module.')}.{key}" if prefix else f"{path}.{key}"
            if (number := _scalar(item)) is not None:
                out[where] = number
            elif (array := _array(item)) is not None:
                _put_array(array, where, out)


def _canary_column(canary: Canary | None) -> tuple[int, int] | None:
    """(feature j, features d) of an InputCanary: its largest feature (in absolute value)."""
    if not isinstance(canary, InputCanary):
        return None
    x = _to_numpy(canary.x).reshape(-1)
    return int(np.argmax(np.abs(x))), int(x.size)


def _divided(out: dict[str, float], scalars: dict[str, float]) -> None:
    """Each canary statistic divided by each released scalar and each product of two."""
    pairs = list(scalars.items())
    pairs += [(f"({a} x {b})", scalars[a] * scalars[b]) for a, b in combinations(scalars, 2)]
    own = [k for k in out if k in (CANARY, NOISE) or ("]" in k and "displacement" in k)]
    for key in own:
        for name, value in pairs:
            out[f"{key} / {name}"] = out[key] / value if value else 0.0


def statistics(release: Any, canary: Canary) -> dict[str, float]:
    """Every candidate statistic of a release (module docstring), in the family's order; NaN
    read as 0."""
    score = canary_score(release, canary)
    out: dict[str, float] = {} if score is None else {CANARY: score}
    if score is not None:
        _put_noise(release, canary, out)
    initial = release.get(INITIAL) if isinstance(release, Mapping) else None
    _walk(release, "", out, initial, canary, 0)
    _divided(out, _scalars_of(release))
    items = list(out.items())[:MAX_STATISTICS]
    return {k: (0.0 if math.isnan(v) else v) for k, v in items}


@dataclass(frozen=True)
class _Family:
    """score(release, canary) -> the statistics named in `names` (the learning pilot's)."""

    names: tuple[str, ...]

    def __call__(self, release: Any, canary: Canary) -> NDArray[np.float64]:
        found = statistics(release, canary)
        return np.array([found.get(n, 0.0) for n in self.names], dtype=np.float64)


# --- the choice -------------------------------------------------------------------------------


def _rank_eps(scores: NDArray[np.float64], member: NDArray[np.bool_], delta: float) -> float:
    """The largest eq. 4 eps of the tests 'score > t' at their Clopper-Pearson upper limits."""
    s0, s1 = np.sort(scores[~member]), np.sort(scores[member])
    if len(s0) == 0 or len(s1) == 0:
        return 0.0
    t = np.concatenate([[-np.inf], np.unique(scores)])
    fp = len(s0) - np.searchsorted(s0, t, side="right")
    fn = np.searchsorted(s1, t, side="right")
    eps = epsilon_from_rates(
        clopper_pearson_upper(fp, len(s0), CHOICE_ALPHA),
        clopper_pearson_upper(fn, len(s1), CHOICE_ALPHA),
        delta,
    )
    return float(eps.max())


def _effect(scores: NDArray[np.float64], member: NDArray[np.bool_]) -> float:
    """(mean with the canary - mean without) / their pooled standard deviation (Cohen's d):
    +inf where the two worlds' scores are two constants, in order; 0 where a world is empty."""
    s0, s1 = scores[~member], scores[member]
    if len(s0) == 0 or len(s1) == 0:
        return 0.0
    gap = float(s1.mean() - s0.mean())
    pooled = math.sqrt((float(s0.var()) + float(s1.var())) / 2)
    if pooled > 0:
        return gap / pooled
    return math.copysign(math.inf, gap) if gap else 0.0


def _auc(scores: NDArray[np.float64], member: NDArray[np.bool_]) -> float:
    """P(an in game scores above an out game), ties counted half (the Mann-Whitney U / n1 n0)."""
    from scipy.stats import rankdata  # deferred: scipy.stats, only when a score is learned

    n1, n0 = int(member.sum()), int((~member).sum())
    if n1 == 0 or n0 == 0:
        return 0.5
    return float((rankdata(scores)[member].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


@dataclass(frozen=True)
class LearnedScore:
    """The score a learning pilot chose (module docstring): `sign` x the statistic named
    `statistic` of `statistics(release, canary)`. Callable as any score."""

    statistic: str
    sign: int
    pilot_games: int
    learning_seed: int
    candidates: int
    chosen_eps: float  # the statistic's ranking eps on the half that chose it
    judged_eps: float  # the grid's tests on the other half, at their 80% limits
    grid: tuple[float, ...] = ()  # thresholds chosen on the pilot: the audit's fixed grid
    threshold: float | None = None  # the grid's threshold the choosing half ranked best: the
    #                                 test a plan reads on the other half

    def __call__(self, release: Any, canary: Canary) -> float:
        return self.sign * statistics(release, canary).get(self.statistic, 0.0)

    @property
    def words(self) -> str:
        """What the report says of the score: the statistic, its direction, how it was chosen."""
        what = ("" if self.sign > 0 else "minus ") + f"'{self.statistic}'"
        return (
            f"{what} (learned: the best of {self.candidates} candidate statistics of the "
            f"release, both directions, on half of a {self.pilot_games}-game pilot at a seed "
            f"of its own; the other half vouches for eps {self.judged_eps:.3g} at its 80% "
            f"limits)"
        )


@dataclass(frozen=True)
class Learned:
    """A learned score, and the pilot's other half scored by it (what a plan plans on)."""

    score: LearnedScore
    held_scores: NDArray[np.float64]
    held_member: NDArray[np.int8]
    cpu_seconds: float  # of the pilot's games


def _choose(
    table: NDArray[np.float64], member: NDArray[np.int8], delta: float
) -> tuple[int, int, float]:
    """(column, sign, ranking eps) of the best statistic on these games (module docstring)."""
    coins = member.astype(bool)
    best: tuple[float, float, float, int, int] = (-1.0, -1.0, -math.inf, 0, 1)
    for j in range(table.shape[1]):
        column = table[:, j]
        if np.ptp(column) == 0:
            continue
        for sign in (1, -1):
            scores = sign * column
            key = (_rank_eps(scores, coins, delta), _auc(scores, coins), _effect(scores, coins))
            if key > best[:3]:
                best = (*key, j, sign)
    return best[3], best[4], max(best[0], 0.0)


def _calibrated(names: tuple[str, ...], table: NDArray[np.float64]) -> NDArray[np.bool_]:
    """The columns the choice may take (module docstring): with a NOISE reading, no NOISE
    column, and of the canary's score only the division whose NOISE column varies least in log
    (all of them where no NOISE column is positive in every game)."""
    allowed = np.ones(len(names), dtype=bool)
    if NOISE not in names:
        return allowed
    spreads: dict[str, float] = {}
    for i, name in enumerate(names):
        if name == NOISE or name.startswith(NOISE + " / "):
            allowed[i] = False
            column = table[:, i]
            positive = bool(np.all(np.isfinite(column) & (column > 0)))
            spreads[name[len(NOISE) :]] = float(np.log(column).std()) if positive else math.inf
    unit = min(spreads, key=lambda k: spreads[k])  # the first of the least (dict order)
    if not math.isfinite(spreads[unit]):
        return allowed
    for i, name in enumerate(names):
        if name == CANARY or name.startswith(CANARY + " / "):
            allowed[i] = name[len(CANARY) :] == unit
    return allowed


def held_out_tests(
    grid: tuple[float, ...],
    scores: NDArray[np.float64],
    member: NDArray[np.int8],
    source: str,
    threshold: float | None = None,
) -> PilotTests:
    """The tests of a learned score's grid (both directions, as the audit tests them) counted
    on the pilot's held-out half; `threshold` (one of the grid's, "in" iff score > it): the test
    the choosing half ranked best, which a plan reads (`PilotTests.first`)."""
    coins = member.astype(bool)
    s0, s1 = np.sort(scores[~coins]), np.sort(scores[coins])
    t = np.asarray(grid, dtype=np.float64)
    above0 = len(s0) - np.searchsorted(s0, t, side="right")  # coin 0, score > t
    above1 = len(s1) - np.searchsorted(s1, t, side="right")
    return PilotTests(
        np.concatenate([above0, len(s0) - above0]),
        np.concatenate([len(s1) - above1, above1]),
        len(s0),
        len(s1),
        source,
        np.concatenate([t, t]),
        np.repeat([True, False], len(t)),
        int(found[0]) if len(found := np.flatnonzero(t == threshold)) else None,
    )


def _grid(
    scores: NDArray[np.float64], member: NDArray[np.bool_], delta: float
) -> tuple[tuple[float, ...], float | None]:
    """The grid and its best threshold, on the choosing half (module docstring): an audit of
    more games than the pilot certifies most from the tail beyond the pilot's largest."""
    out = scores[~member]
    if len(out) == 0 or not np.any(member):
        return (), None
    values = np.unique(scores)
    eps = [_rank_eps(np.where(scores > t, 1.0, 0.0), member, delta) for t in values]
    top, spread = float(out.max()), float(out.std())
    best = float(values[int(np.argmax(eps))])
    found = {best, top, top + spread / 2, top + spread}
    return tuple(sorted(t for t in found if math.isfinite(t))), best


#: play(game, games, seed) -> (scores, coins) of the games, in game order
PlayFn = Callable[[PipelineGame, int, int], tuple[NDArray[np.float64], NDArray[np.int8]]]


def learn_score(
    tune: TuneFn,
    data: Any,
    canary: Canary,
    *,
    seed: int,
    delta: float,
    play: PlayFn,
    games: int = LEARN_GAMES,
) -> Learned:
    """Learn the score of an audit of seed `seed` from `games` pilot games (module docstring)."""
    what = content_digest(canary, "canary") + type(canary).__qualname__  # "both": new objects
    key = (id(tune), id(data), what, int(seed), int(games), float(delta))
    if key in _CACHE:
        return _CACHE[key][-1]
    pilot_seed = learning_seed(seed)
    bound = canary.for_game(False, np.random.default_rng(PROBE_SEED))
    try:
        release = tune(bound.prepare(data), PROBE_SEED, bound)
    except Exception as err:
        raise PipelineError(
            "tune",
            f"{function_name(tune)} raised {type(err).__name__} in the probe run that fixes the "
            f"candidate statistics of the learned score (seed {PROBE_SEED}, canary out): {err}",
        ) from None
    names = tuple(statistics(release, canary))
    if not names:
        raise ConfigError(
            "score",
            "the release holds no number to score (no canary score, no numeric field): pass "
            "your own score(release, canary)",
        )
    game = PipelineGame(tune, _Family(names), data, canary, fields=names)
    scores, member = play(game, games, pilot_seed)
    table = field_columns(scores) if len(names) > 1 else scores[:, :1]
    half = games // 2
    allowed = _calibrated(names, table[:half])
    j, sign, chosen = _choose(np.where(allowed, table[:half], 0.0), member[:half], delta)
    held = sign * table[half:, j]
    grid, best = _grid(sign * table[:half, j], member[:half].astype(bool), delta)
    curve = held_out_tests(grid, held, member[half:], "pilot").pessimistic(JUDGE_CONFIDENCE)
    judged = float(np.max(epsilon_from_rates(curve.fp, curve.fn, delta), initial=0.0))
    learned = Learned(
        LearnedScore(
            names[j], sign, games, pilot_seed, int(allowed.sum()), chosen, judged, grid, best
        ),
        held,
        member[half:],
        float(scores[:, 1].sum()),
    )
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (tune, data, learned)  # the objects kept: their ids stay theirs
    return learned
