"""The upper-bound panel: every registered upper bound (`accounting.registry.BOUNDS`) for one
setting, as a loop over the registry, with the attack value (`accounting.attack`) and the
interval they bracket (`accounting.interval`). ::

    panel(base, law, delta, curve_deltas=None) -> Panel
        .base       `BaseInfo`: eps_B of one run, mu, mu_gdp (DP-SGD: the tighter accountant)
        .upper      `BoundValues` {key: eps or None}: upper bounds on the tuning run's epsilon
                    for ANY score (generic_rdp, profile); the reduced game's keys are None here
                    for every pair ([XWW24]'s monotone-score assumption, `registry.ASSUMPTION`)
        .monotone_score  {key: eps or None}: the reduced game's values where the pair's
                    reduction is exact (proven under the monotone-score assumption only)
        .reduced_game  {key: eps or None}: the reduced game's values of a pair whose reduction is
                    not exact (DP-SGD with tau < 1: heuristic, monotone score assumed too)
        .labels     {key: "rigorous" | "monotone_score" | "heuristic"} for this pair;
                    .sources {key: theorem}
        .attack     `AttackInfo`: the attack value, a valid lower bound for any score, and how
                    it was found; .attack_value the `attack.AttackValue` itself
        .interval   `interval.Interval`: [attack value, tightest rigorous bound], for any score;
                    with assume="monotone_score", [XWW24]'s interval under that assumption
        .notes, .seconds
        .curves     with curve_deltas, `Curves`: {"delta": [...], key: [...] per bound}
        .reduced_game_curves, .monotone_score_curves   the same for those values
    panel_curves(base, law, deltas) -> panel(...).curves
    upper_bounds(base, law, delta)  -> panel(...).upper
    base_info(base, delta)          -> the .base dict

`base` is any mechanism pair of `auditsel.mechanisms` or `auditsel.events`, or a dp_accounting
DpEvent (`events.as_pair`); what a bound needs from it, it asks the pair
(docs/explanation/architecture.md). Keys, rigour and citations: `accounting.registry`. Where the
attack does not apply (`attack.attack_applies`), `.attack` says why with epsilon None and the
interval's lower end is 0 ("eps >= 0").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypedDict, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike

from auditsel.accounting.attack import AttackValue, attack_applies
from auditsel.accounting.interval import (
    Interval,
    Tightest,
    allowed_rigours,
    attack_source,
    check_assume,
    finite_or_none,
    interval_attack,
    interval_from,
    tightest_of,
)
from auditsel.accounting.profile import BaseProfile, base_profile
from auditsel.accounting.registry import BOUND_KEYS, BOUNDS, MONOTONE_SCORE_KEYS, Rigour
from auditsel.events import as_pair
from auditsel.executor import in_background
from auditsel.mechanisms import DpsgdBase
from auditsel.numerics import check_deltas
from auditsel.roles import AccountedPair, MechanismPair
from auditsel.rounds import RoundsLaw

#: {bound key: eps or None}: `Panel.upper`, `.monotone_score`, `.reduced_game` (keys of
#: `registry.BOUND_KEYS`; a section holds the keys whose values belong to it)
BoundValues = dict[str, float | None]
#: {"delta": [delta, ...], bound key: [eps or None at each delta]}: `Panel.curves` and its kin
Curves = dict[str, list[float | None]]


class _BaseInfo(TypedDict):
    epsilon: float | None
    mu: float | None
    mu_gdp: float | None


class BaseInfo(_BaseInfo, total=False):
    """`Panel.base`: eps_B of one run at delta (None where infinite), `mu` of the reduced game
    and `mu_gdp` where they exist; a base with a choice of accountants (DP-SGD) adds
    `accountant`, the one whose eps_B is the tighter."""

    accountant: str


class _AttackInfo(TypedDict):
    epsilon: float | None
    source: str | None
    method: str | None
    strategy: str | None
    direction: str | None
    label_step: float | None
    slack: float | None
    score: str | None


class AttackInfo(_AttackInfo, total=False):
    """`Panel.attack`: the attack value at delta (`epsilon`, None where the attack does not
    apply, `source` then saying why) and how it was found (`accounting.attack.AttackValue`:
    method, strategy, direction, label_step, slack; `score` the score it found, in words);
    with curve deltas, `curve`: its eps at each of them."""

    curve: list[float | None]


#: key -> {"rigour": the default rigour (a pair whose reduction is exact), "citation": the result
#: it implements} (from the registry)
BOUND_LABELS = {b.key: {"rigour": b.rigour_default, "citation": b.citation} for b in BOUNDS}

#: the keys of `Panel.attack` (all None, `source` saying why, where the attack does not apply)
_ATTACK_KEYS = tuple(_AttackInfo.__annotations__)

#: why a reduced-game value leaves `upper` (result.json notes)
_REDUCED_NOTE = (
    "exact, improved_rdp and improved_rdp_gdp use mu = tau sqrt(N)/sigma ([XWW24] eq. 19) or "
    "mu_GDP, a large-N approximation when tau < 1: heuristic, not bounds; their values are "
    "under reduced_game (a comparison with the paper; a monotone score assumed too), not under "
    "upper"
)

#: why the reduced game's values leave `upper` where the reduction is exact (result.json notes)
_MONOTONE_NOTE = (
    "exact, improved_rdp and improved_rdp_gdp are the reduced game's values ([XWW24] Figure 5): "
    "they hold only under [XWW24]'s monotone-score assumption and sit under monotone_score, "
    "not under upper; the tuning run's epsilon for any score lies in the interval"
)


def bound_labels(base: MechanismPair) -> dict[str, Rigour]:
    """Per-key rigour for this pair ('rigorous', 'monotone_score' or 'heuristic')."""
    base = as_pair(base)
    return {b.key: b.rigour(base) for b in BOUNDS}


BASE_ACCOUNTANTS = ("rdp", "pld")  # a DP-SGD base's eps_B: the smaller of the two
_T = TypeVar("_T")


def base_info(base: MechanismPair, delta: float) -> BaseInfo:
    """eps_B of one run at delta, mu (reduced game) and mu_GDP where they exist.

    For a base with a choice of accountants (DpsgdBase: RDP and the pessimistic PLD, both upper
    bounds on one run's epsilon) eps_B is the tightest of them, and `accountant` names it."""
    base = as_pair(base)
    info = BaseInfo(epsilon=finite_or_none(base.epsilon(delta)), mu=base.mu, mu_gdp=base.mu_gdp)
    if isinstance(base, DpsgdBase):
        by = {a: float(base.epsilon(delta, accountant=a)) for a in BASE_ACCOUNTANTS}
        best = min(by, key=by.__getitem__)
        info["epsilon"] = finite_or_none(by[best])
        info["accountant"] = best
    return info


@dataclass(frozen=True)
class Panel:
    """Every registered bound, the attack value and the interval for one setting (module
    docstring). Read it by attribute."""

    delta: float
    base: BaseInfo
    upper: BoundValues
    reduced_game: BoundValues
    labels: dict[str, Rigour]
    sources: dict[str, str | None]
    attack: AttackInfo
    interval: Interval
    notes: tuple[str, ...] = ()
    seconds: dict[str, float] = field(default_factory=dict)
    curves: Curves | None = None
    reduced_game_curves: Curves | None = None
    attack_value: AttackValue | None = field(default=None, repr=False, compare=False)
    monotone_score: BoundValues = field(default_factory=dict)
    monotone_score_curves: Curves | None = None

    def value(self, key: str) -> float | None:
        """The registered computation's value, whatever its label (see `labels[key]`)."""
        for section in (self.upper, self.monotone_score, self.reduced_game):
            if section.get(key) is not None:
                return section[key]
        return None

    def to_dict(self) -> dict[str, Any]:
        """The panel as a dict of its sections (the curves only with curve deltas)."""
        out: dict[str, object] = {
            "base": self.base,
            "upper": self.upper,
            "monotone_score": self.monotone_score,
            "reduced_game": self.reduced_game,
            "labels": self.labels,
            "sources": self.sources,
            "notes": list(self.notes),
            "seconds": self.seconds,
            "attack": self.attack,
            "interval": self.interval.to_dict(),
        }
        if self.curves is not None:
            out["curves"] = self.curves
            out["reduced_game_curves"] = self.reduced_game_curves
            out["monotone_score_curves"] = self.monotone_score_curves
        return out


def _attack_info(hit: AttackValue | None, no_attack: str | None, extra: list[float]) -> AttackInfo:
    """The panel's `.attack` dict (_ATTACK_KEYS, and "curve" with curve deltas)."""
    if hit is None:
        info = cast(AttackInfo, {**dict.fromkeys(_ATTACK_KEYS), "source": no_attack})
    else:
        score = hit.score.describe() if hit.method == "score_search" and hit.score else None
        if hit.method == "coin_search" and hit.coin_score is not None:
            score = hit.coin_score.describe()
        info = AttackInfo(
            epsilon=finite_or_none(hit.epsilons[0]),
            source=attack_source(hit),
            method=hit.method,
            strategy=hit.strategy,
            direction=hit.direction,
            label_step=hit.label_step,
            slack=hit.slack,
            score=score,
        )
    if extra:
        info["curve"] = (
            [None] * len(extra) if hit is None else [finite_or_none(e) for e in hit.epsilons[1:]]
        )
    return info


def _bound_values(
    base: AccountedPair,
    law: RoundsLaw,
    delta: float,
    deltas: np.ndarray,
    extra: list[float],
    prof: BaseProfile,
    seconds: dict[str, float],
) -> tuple[BoundValues, dict[str, str | None], Curves, list[str]]:
    """({key: value at delta}, {key: theorem}, {key: curve at extra}, notes) of every bound,
    the seconds of each in `seconds`."""
    values: BoundValues = {}
    sources: dict[str, str | None] = {}
    curves: Curves = {"delta": list(extra)}
    notes: list[str] = []
    for b in BOUNDS:
        if not b.supports(base, law):
            values[b.key], sources[b.key], curves[b.key] = None, None, [None] * len(extra)
            continue
        out = _timed(seconds, b.key, partial(b.curve, base, law, deltas, prof))
        curves[b.key] = [
            None if b.not_applicable(base, law, d) else finite_or_none(v)
            for d, v in zip(extra, out[1:])
        ]
        why = b.not_applicable(base, law, delta)
        if why:
            values[b.key], sources[b.key] = None, None
            notes.append(why)
            continue
        values[b.key] = float(out[0])
        sources[b.key] = b.source(base, law, delta)
    return values, sources, curves, notes


def panel(
    base: MechanismPair,
    law: RoundsLaw,
    delta: float,
    *,
    curve_deltas: ArrayLike | None = None,
    assume: str | None = None,
) -> Panel:
    """All bounds for one setting, with base info, per-pair labels, sources, the attack value,
    the interval and timings; with `curve_deltas`, also each bound's (and the attack's) eps at
    those deltas, from the same single computation per bound as the value at `delta`.
    `assume="monotone_score"`: `.interval` is [XWW24]'s under that assumption (labelled)."""
    base = as_pair(base)
    delta = float(check_deltas(delta)[0])
    assume = check_assume(assume)
    extra = [] if curve_deltas is None else check_deltas(curve_deltas, "curve_deltas").tolist()
    deltas = np.array([delta] + extra)
    seconds: dict[str, float] = {}
    timed = partial(_timed, seconds)
    no_attack = attack_applies(base)
    pending = None
    if no_attack is None:  # numpy/FFT work that frees the GIL: in a thread beside the bounds
        pending = in_background(
            lambda: timed("attack", lambda: interval_attack(base, law, deltas, assume))
        )
    info = timed("base", lambda: base_info(base, delta))
    prof = timed("base_profile", lambda: base_profile(base))
    labels = bound_labels(base)
    values, sources, curves, notes = _bound_values(base, law, delta, deltas, extra, prof, seconds)
    # the reduced game's values leave `upper` for every pair: under the monotone-score
    # assumption where the reduction is exact, heuristic (eq. 19) where it is not
    monotone = set(MONOTONE_SCORE_KEYS) if base.reduction_is_exact else set()
    moved = {b.key for b in BOUNDS if labels[b.key] == "heuristic" and not base.reduction_is_exact}
    notes += _notes(base, values, moved, monotone)
    upper = {k: (None if k in moved | monotone else values[k]) for k in BOUND_KEYS}
    hit: AttackValue | None = None if pending is None else pending.result()
    lower = (
        (0.0, f"eps >= 0 ({no_attack})") if hit is None else (hit.epsilons[0], attack_source(hit))
    )
    best = _upper_end(values, sources, labels, moved, assume)
    interval = interval_from([lower], [best.end], assume, setting=(base, law, delta))
    split = None if curve_deltas is None else _split_curves(curves, extra, moved, monotone)
    bound_curves, reduced_curves, monotone_curves = split or (None, None, None)
    return Panel(
        delta=delta,
        base=info,
        upper=upper,
        reduced_game={k: values[k] for k in BOUND_KEYS if k in moved},
        labels=labels,
        sources=sources,
        attack=_attack_info(hit, no_attack, extra),
        interval=interval,
        notes=tuple(notes),
        seconds=seconds,
        curves=bound_curves,
        reduced_game_curves=reduced_curves,
        attack_value=hit,
        monotone_score={k: values[k] for k in BOUND_KEYS if k in monotone},
        monotone_score_curves=monotone_curves,
    )


def _timed(seconds: dict[str, float], key: str, fn: Callable[[], _T]) -> _T:
    """fn(), its wall seconds written to seconds[key] (also when it raises)."""
    t = time.perf_counter()
    try:
        return fn()
    finally:
        seconds[key] = time.perf_counter() - t


def _upper_end(
    values: Mapping[str, float | None],
    sources: Mapping[str, str | None],
    labels: Mapping[str, str],
    moved: set[str],
    assume: str | None,
) -> Tightest:
    """The tightest value among the bounds `assume` allows: the same upper end as
    tuning_interval and calibrate."""
    rigours = allowed_rigours(assume)
    return tightest_of(
        {
            k: (values[k], sources[k])
            for k in BOUND_KEYS
            if labels[k] in rigours and values[k] is not None and k not in moved
        }
    )


def _notes(
    base: MechanismPair, values: dict[str, float | None], moved: set[str], monotone: set[str]
) -> list[str]:
    """The panel's notes on its values; infinite values become None in `values` (vacuous)."""
    notes = []
    if base.reduced() is None:
        notes.append(
            "exact and improved_rdp: no reduced game for this base (a dp_accounting event): "
            "the generic and profile bounds come from dp_accounting's RDP and PLD accountants"
        )
    if moved:
        notes.append(_REDUCED_NOTE)
    if monotone and any(values[k] is not None for k in monotone):
        notes.append(_MONOTONE_NOTE)
    for k in BOUND_KEYS:
        v = values[k]
        if v is not None and not math.isfinite(v):
            notes.append(f"{k}: the bound is vacuous (infinite) for this setting")
        values[k] = finite_or_none(v)
    return notes


def _split_curves(
    curves: dict[str, Any], extra: list[float], moved: set[str], monotone: set[str]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The bounds' curves (None for the reduced game's and the monotone-score values), the
    reduced game's (heuristic here) and the monotone-score ones, each with its deltas."""
    bound_curves: dict[str, Any] = {"delta": extra}
    for k in BOUND_KEYS:
        bound_curves[k] = [None] * len(extra) if k in moved | monotone else curves[k]
    reduced = {"delta": extra, **{k: curves[k] for k in BOUND_KEYS if k in moved}}
    mono = {"delta": extra, **{k: curves[k] for k in BOUND_KEYS if k in monotone}}
    return bound_curves, reduced, mono


def panel_curves(base: MechanismPair, law: RoundsLaw, deltas: ArrayLike) -> Curves:
    """{"delta": deltas, key: eps of each bound at each delta}: one curve computation per bound
    (None where the bound does not apply or is vacuous)."""
    ds: list[float] = check_deltas(deltas, "deltas").tolist()
    curves = panel(base, law, ds[0], curve_deltas=ds).curves
    assert curves is not None
    return curves


def upper_bounds(base: MechanismPair, law: RoundsLaw, delta: float) -> BoundValues:
    """The five keys of result.json `upper` (None where not applicable, vacuous, or the reduced
    game's: see `Panel.monotone_score` and `Panel.reduced_game`)."""
    return panel(base, law, delta).upper
