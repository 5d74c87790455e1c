"""Calibration: the noise (or the mean number of runs) at which the tightest rigorous bound on the
tuning run's epsilon equals a target, against dp_accounting's RepeatAndSelectDpEvent.

Contract. For a mechanism pair (or a dp_accounting event, `events.as_pair`), a law of K and delta,
T(x) = min over the registered bounds that are rigorous for the pair of their eps at delta
(`accounting.interval.tightest_bound`: the upper end of the interval, the same set of bounds and
the same code as the panel's and `tuning_interval`'s; bounds that hold for any score the tuning
run ranks its runs by), as a function of one parameter x of the tuning run:

* solve_for="noise": the noise multiplier of the base, the law fixed (`DpsgdBase` and
  `LaplaceBase`: noise_multiplier; `GaussianBase`: 1/mu, a sensitivity-1 Gaussian query's noise;
  any other base through `noise=callable`, x -> pair or DpEvent, as dp_accounting's
  `make_event_from_param`). T decreases in x; the answer is the smallest x with T(x) <= target.

* solve_for="mean": E[K], the base fixed (Poisson: the mean; TNB(eta, nu): nu at fixed eta;
  Binomial(n, p): p at fixed n; Point(k): k, an integer). T increases with E[K]; the answer is the
  largest E[K] with T <= target.

`calibrate` returns x on the private side of the target: T(x) <= target, checked by computing T
at the returned x (the value reported as `epsilon`), and within `rtol` of the crossing (Brent's
method on log T against log x inside a bracket whose ends have been evaluated). The reduced
game's values (`exact`, `improved_rdp`) hold only under [XWW24]'s monotone-score assumption and
count in T only on request, `CalibrationOptions(assume="monotone_score")` (the result then
carries the assumption: `Calibration.assumption`); by default they do not.

The comparison (`baseline_*`): dp_accounting's own calibration for the same budget,
`mechanism_calibration.calibrate_dp_mechanism` with `RdpAccountant()` (its default orders) and
`RepeatAndSelectDpEvent(event(x), mean, shape)`, where dp_accounting covers the law (Poisson and
TNB with eta >= 0, mean >= 1) and the base has an event; `gain` is dp_accounting's noise over
ours (> 1: less noise for the same epsilon) or our mean over dp_accounting's (> 1: more runs).
Its answer also brackets ours: our generic bound is never above dp_accounting's, so
T(x_dpa) <= target.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from auditsel.accounting.interval import Tightest, check_assume, finite_or_none, tightest_bound
from auditsel.accounting.registry import ASSUMPTION
from auditsel.errors import ConfigError, choice, number
from auditsel.events import LaplaceBase, as_pair, is_pair
from auditsel.mechanisms import (
    NOISE_MAX,
    NOISE_MIN,
    DpsgdBase,
    FiniteOutputBase,
    GaussianBase,
    quiet_absl,
)
from auditsel.numerics import bisect, check_deltas
from auditsel.roles import MechanismPair
from auditsel.rounds import (
    MIN_NU,
    Binomial,
    Point,
    Poisson,
    RoundsLaw,
    TruncatedNegativeBinomial,
)

SOLVE_FOR = ("noise", "mean")
#: the bracket search goes at most this factor away from the starting value
_MAX_FACTOR = 2.0**20


@dataclass(frozen=True)
class Calibration:
    """The result of `calibrate` (module docstring)."""

    parameter: str  # "noise_multiplier" or "mean"
    value: float  # the calibrated noise multiplier or E[K]
    epsilon: float  # the tightest rigorous bound at `value` (<= target_epsilon)
    bound: str | None  # its registry key
    source: str | None  # its theorem
    target_epsilon: float
    delta: float
    pair: Any = field(repr=False)  # the calibrated pair
    law: RoundsLaw = field(repr=False)  # the calibrated law
    baseline_value: float | None  # dp_accounting's RepeatAndSelectDpEvent calibration
    baseline_note: str | None  # why there is no baseline value (None when there is one)
    baseline_epsilon: float | None  # our tightest bound at the baseline's value
    gain: float | None  # baseline/ours (noise) or ours/baseline (mean); > 1 favours ours
    evaluations: int  # how many times the bounds were computed
    seconds: float
    baseline_seconds: float | None
    at_range_end: bool = False  # the whole range is private: `value` is the range's end
    assumption: str | None = None  # None: any score; "monotone_score": [XWW24]'s assumption

    def to_dict(self) -> dict[str, Any]:
        return {
            "parameter": self.parameter,
            "value": finite_or_none(self.value),
            "epsilon": finite_or_none(self.epsilon),
            "bound": self.bound,
            "source": self.source,
            "target_epsilon": self.target_epsilon,
            "delta": self.delta,
            "base": self.pair.describe(),
            "rounds": self.law.describe(),
            "baseline": {
                "method": "dp_accounting RdpAccountant, RepeatAndSelectDpEvent",
                "value": finite_or_none(self.baseline_value),
                "note": self.baseline_note,
                "tightest_epsilon_there": finite_or_none(self.baseline_epsilon),
            },
            "gain": finite_or_none(self.gain),
            "at_range_end": self.at_range_end,
            "assumption": None if self.assumption is None else ASSUMPTION,
            "evaluations": self.evaluations,
            "seconds": round(self.seconds, 3),
            "baseline_seconds": None
            if self.baseline_seconds is None
            else round(self.baseline_seconds, 3),
        }


# --- the families: one parameter x -> (pair, law) -------------------------------------------


@dataclass(frozen=True)
class _Family:
    parameter: str
    start: float
    make: Callable[[float], tuple[Any, RoundsLaw]]
    decreasing: bool  # T decreases with x (noise) or increases (mean)
    lo: float  # the parameter's own range
    hi: float
    integer: bool = False
    event: Callable[[float], Any] | None = None  # x -> the base's DpEvent (the baseline)
    law_at: Callable[[float], RoundsLaw] | None = None


def _noise_family(base: object, law: RoundsLaw, noise: Callable[[float], Any] | None) -> _Family:
    if noise is not None:
        if not callable(noise):
            raise ConfigError("noise", "must be a callable: noise multiplier -> pair or DpEvent")
        start = _noise_of(as_pair(base)) if base is not None else 1.0
        make = lambda x: (as_pair(noise(x), "noise"), law)
        return _Family(
            "noise_multiplier", start, make, True, 1e-6, 1e6, event=lambda x: _event_of(noise(x))
        )
    pair = as_pair(base)
    at: Callable[[float], Any]
    if isinstance(pair, DpsgdBase):
        at = lambda x: replace(pair, noise_multiplier=x)
    elif isinstance(pair, LaplaceBase):
        at = lambda x: LaplaceBase(x, pair.steps, pair.sample_rate, pair.accountant)
    elif isinstance(pair, GaussianBase):
        make_g = lambda x: (GaussianBase(1.0 / x), law)
        return _Family(
            "noise_multiplier", 1 / pair.mu, make_g, True, 1e-3, 1e6, event=_gaussian_event
        )
    else:
        kind = "finite-output" if isinstance(pair, FiniteOutputBase) else "event"
        raise ConfigError(
            "base",
            f"a {kind} base has no noise multiplier to calibrate: pass noise=callable "
            "(noise multiplier -> pair or DpEvent), or solve_for='mean'",
        )
    return _Family(
        "noise_multiplier",
        pair.noise_multiplier,
        lambda x: (at(x), law),
        True,
        NOISE_MIN,  # the range a DpsgdBase computes in (auditsel.mechanisms)
        NOISE_MAX,
        event=lambda x: at(x).event,
    )


def _event_of(made: object) -> Any:
    """The DpEvent of what a noise callable made (None for a pair without one)."""
    if not is_pair(made):
        return made
    if isinstance(made, GaussianBase):
        return _gaussian_event(1.0 / made.mu)
    return getattr(made, "event", None)


def _gaussian_event(x: float) -> Any:
    import dp_accounting as dpa  # deferred: dp_accounting is heavy to import

    return dpa.GaussianDpEvent(x)


def _noise_of(pair: MechanismPair) -> float:
    if isinstance(pair, (DpsgdBase, LaplaceBase)):
        return pair.noise_multiplier
    if isinstance(pair, GaussianBase):
        return 1.0 / pair.mu
    return 1.0


def _tnb_nu_for_mean(eta: float, mean: float) -> float:
    """nu of TNB(eta, nu) with the given mean (>= 1): the mean decreases in nu."""
    if mean <= 1.0:
        return 1.0
    f: Callable[[float], float] = lambda log_nu: (
        math.log(TruncatedNegativeBinomial(eta, math.exp(log_nu)).mean) - math.log(mean)
    )
    lo = math.log(MIN_NU)
    if f(lo) < 0:
        raise ConfigError("rounds", f"a TNB with eta = {eta:g} has no mean as large as {mean:g}")
    return math.exp(bisect(f, lo, 0.0, xtol=1e-13, rtol=1e-13))


def _mean_family(base: object, law: RoundsLaw) -> _Family:
    pair = as_pair(base)
    event = getattr(pair, "event", None)
    if isinstance(pair, GaussianBase):
        event = _gaussian_event(1.0 / pair.mu)
    make_event: Callable[[float], Any] | None = None if event is None else (lambda x, e=event: e)
    at: Callable[[float], RoundsLaw]
    start, lo, hi, integer = law.mean, 1.0, 1e12, False
    if isinstance(law, Poisson):
        at, lo = Poisson, 1e-6
    elif isinstance(law, TruncatedNegativeBinomial):
        at = lambda x: TruncatedNegativeBinomial(law.eta, _tnb_nu_for_mean(law.eta, x))
    elif isinstance(law, Binomial):
        at, lo, hi = (lambda x: Binomial(law.n, x / law.n)), 1e-9 * law.n, law.n
    elif isinstance(law, Point):
        at, start, hi, integer = (lambda x: Point(int(round(x)))), float(law.k), 2.0**53, True
    else:
        raise ConfigError(
            "rounds",
            f"solve_for='mean' needs a Poisson, TNB, binomial or point law, got {law.kind}",
        )
    make = lambda x: (pair, at(x))
    return _Family("mean", start, make, False, lo, hi, integer, make_event, at)


# --- the search ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CalibrationOptions:
    """How `calibrate` searches, never what it solves for: `rtol`, the relative tolerance of
    the crossing (in [1e-9, 0.1]); `baseline`, compute dp_accounting's calibration for the same
    budget beside ours; `assume="monotone_score"`, calibrate [XWW24]'s reduced-game value
    (module docstring; None: only bounds that hold for any score). Checked by `calibrate`,
    each failure a ConfigError naming the field."""

    rtol: float = 1e-3
    baseline: bool = True
    assume: str | None = None


def calibrate(
    base: object,
    law: RoundsLaw,
    *,
    target_epsilon: float,
    delta: float,
    solve_for: str = "noise",
    noise: Callable[[float], Any] | None = None,
    options: CalibrationOptions | None = None,
) -> Calibration:
    """The noise multiplier (solve_for="noise") or E[K] (solve_for="mean") at which the tightest
    rigorous bound on the tuning run's epsilon at `delta` equals `target_epsilon`, with
    dp_accounting's RepeatAndSelectDpEvent calibration for the same budget (module docstring).

    `base`: a mechanism pair or a dp_accounting DpEvent (its noise multiplier is the starting
    point); `noise`: a callable x -> pair or DpEvent for bases without a noise multiplier of
    their own. A target no parameter value reaches is a ConfigError naming `target_epsilon`.
    `options`: tolerance, dp_accounting baseline, assumption (`CalibrationOptions`)."""
    start = time.perf_counter()
    opts = _options(options)
    target = number(target_epsilon, "target_epsilon", 0, math.inf, lo_open=True)
    delta = float(check_deltas(delta)[0])
    solve_for = choice(solve_for, "solve_for", SOLVE_FOR)
    rtol = number(opts.rtol, "rtol", 1e-9, 0.1)
    assume = check_assume(opts.assume)
    family = _family(base, law, solve_for, noise, delta)
    cache: dict[float, Tightest] = {}
    tight = functools.partial(_tightest_at, family, delta, assume, cache)
    base_value, base_note, base_seconds = None, _NOT_ASKED, None
    if opts.baseline:
        t0 = time.perf_counter()
        base_value, note = _baseline(family, law, target, delta, rtol)
        base_note, base_seconds = note, time.perf_counter() - t0
    x, at_end = _solve(family, tight, target, rtol, hint=base_value)
    best = tight(x)
    gain = None
    if base_value is not None:
        gain = base_value / x if family.decreasing else x / base_value
    pair, law_x = family.make(x)
    return Calibration(
        parameter=family.parameter,
        value=x,
        epsilon=best.epsilon,
        bound=best.key,
        source=best.source,
        target_epsilon=target,
        delta=delta,
        pair=pair,
        law=law_x,
        baseline_value=base_value,
        baseline_note=base_note,
        baseline_epsilon=None if base_value is None else tight(base_value).epsilon,
        gain=gain,
        evaluations=len(cache),
        seconds=time.perf_counter() - start,
        baseline_seconds=base_seconds,
        at_range_end=at_end,
        assumption=assume,
    )


_NOT_ASKED: str | None = "not asked for"


def _options(options: object) -> CalibrationOptions:
    """`options`, or the defaults for None; anything else (a dict is never read by its field
    names) is a ConfigError naming `options`."""
    if options is None:
        return CalibrationOptions()
    if not isinstance(options, CalibrationOptions):
        raise ConfigError(
            "options", f"must be CalibrationOptions(...) or None, got {type(options).__name__}"
        )
    return options


def _family(
    base: object, law: RoundsLaw, solve_for: str, noise: Callable[[float], Any] | None, delta: float
) -> _Family:
    """The family of (pair, law) calibrate searches; delta 0 only for a pure-DP base."""
    family = _noise_family(base, law, noise) if solve_for == "noise" else _mean_family(base, law)
    if delta == 0 and not math.isfinite(family.make(family.start)[0].pure_epsilon):
        raise ConfigError(
            "delta", "must be in (0, 1) for a base that is not pure DP (it is never (eps, 0)-DP)"
        )
    return family


def _tightest_at(
    family: _Family, delta: float, assume: str | None, cache: dict[float, Tightest], x: float
) -> Tightest:
    """The tightest bound at parameter value x (rounded for an integer family), computed once
    per value (`cache`)."""
    if family.integer:
        x = float(round(x))
    if x not in cache:
        pair, law_x = family.make(x)
        cache[x] = tightest_bound(pair, law_x, delta, assume=assume)
    return cache[x]


def _solve(
    family: _Family,
    tight: Callable[[float], Tightest],
    target: float,
    rtol: float,
    hint: float | None,
) -> tuple[float, bool]:
    """(x, at_range_end): x on the private side of the target, within rtol of the crossing
    (module docstring), or the end of the parameter's range when all of it is private."""
    private: Callable[[float], bool] = lambda x: tight(x).epsilon <= target
    # a feasible end (private) and an infeasible one, moving by factors of 2 (of 4 first)
    x0 = hint if hint is not None else family.start
    x0 = min(max(x0, family.lo), family.hi)
    step = 2.0 if family.decreasing else 0.5  # towards privacy
    feasible = x0
    tries = 0
    while not private(feasible):
        feasible *= step * (2.0 if tries == 0 and hint is None else 1.0)
        tries += 1
        if (
            not family.lo <= feasible <= family.hi
            or feasible > x0 * _MAX_FACTOR
            or (feasible < x0 / _MAX_FACTOR)
        ):
            what = "noise multiplier" if family.decreasing else "E[K]"
            raise ConfigError(
                "target_epsilon",
                f"no {what} in [{family.lo:g}, {family.hi:g}] reaches {target:g} at this delta "
                f"(the tightest rigorous bound stays above it)",
            )
    other = feasible
    while True:
        other = other / step
        if other < family.lo or other > family.hi:
            end = family.lo if family.decreasing else family.hi
            return (end, True) if private(end) else (feasible, False)
        if not private(other):
            break
        feasible = other
    if family.integer:
        lo_i, hi_i = sorted((int(round(feasible)), int(round(other))))
        while hi_i - lo_i > 1:
            mid = (lo_i + hi_i) // 2
            if private(mid) == private(float(lo_i)):
                lo_i = mid
            else:
                hi_i = mid
        return float(lo_i if private(float(lo_i)) else hi_i), False
    g: Callable[[float], float] = lambda u: (
        math.log(max(tight(math.exp(u)).epsilon, 1e-300)) - math.log(target)
    )
    from scipy.optimize import brentq  # deferred: scipy.optimize, a calibration's root only

    u = brentq(g, math.log(feasible), math.log(other), xtol=rtol / 2, rtol=1e-12)
    # the private side: brentq's answer if it is private, else a step of the tolerance
    for cand in (math.exp(u), math.exp(u) * (1 + rtol / 2) ** (1 if family.decreasing else -1)):
        if private(cand):
            return cand, False
    return feasible, False


def _baseline(
    family: _Family, law: RoundsLaw, target: float, delta: float, rtol: float
) -> tuple[float | None, str | None]:
    """(value, None): dp_accounting's calibration of the same parameter for the same budget;
    (None, why) where its RepeatAndSelectDpEvent does not cover the setting or reaches no
    value of the parameter."""
    event_of, law_at = family.event, family.law_at  # law_at: the mean family's laws
    if event_of is None:
        return None, "the base has no dp_accounting event"
    if delta <= 0:
        return None, "dp_accounting's RDP accountant certifies nothing at delta = 0"
    import dp_accounting as dpa  # deferred: dp_accounting is heavy to import
    from dp_accounting import mechanism_calibration as mc  # deferred: as above

    def shape_of(law_x: RoundsLaw) -> float | None:
        if isinstance(law_x, Poisson) and law_x.mean >= 1:
            return math.inf
        if isinstance(law_x, TruncatedNegativeBinomial) and law_x.eta >= 0 and law_x.mean >= 1:
            return law_x.eta
        return None

    if shape_of(law) is None:
        return None, (
            "RepeatAndSelectDpEvent covers Poisson and TNB laws with eta >= 0 and E[K] >= 1 only"
        )

    def make(x: float) -> Any:
        law_x = law if law_at is None else law_at(max(x, 1.0))
        return dpa.dp_event.RepeatAndSelectDpEvent(event_of(x), law_x.mean, shape_of(law_x))

    # little noise (or E[K] = 1): the search walks from this end
    lower = family.lo if family.decreasing else 1.0
    if not family.decreasing:
        at_one = dpa.rdp.RdpAccountant().compose(make(1.0)).get_epsilon(delta)
        if at_one > target:
            return None, f"no E[K] >= 1 reaches the target (eps {at_one:.4g} at E[K] = 1)"
    try:
        with quiet_absl():
            value = mc.calibrate_dp_mechanism(
                lambda: dpa.rdp.RdpAccountant(),
                make,
                target,
                delta,
                mc.LowerEndpointAndGuess(lower, max(family.start, lower * 2)),
                tol=rtol * family.start,
            )
    except (ValueError, mc.NoBracketIntervalFoundError, RuntimeError) as err:
        return None, f"dp_accounting's calibration found no value ({type(err).__name__})"
    return float(value), None
