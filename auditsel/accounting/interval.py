"""The honest interval: where the tuning run's epsilon lies, with both ends guaranteed.

Contract. For a mechanism pair, a law of K and delta in [0, 1), the epsilon eps_T(delta) of the
tuning run ([XWW24] Algorithm 2; `accounting.attack`) satisfies

    lower <= eps_T(delta) <= upper,

    lower = max(the attack value, a valid eps_L of a game when one is given),
    upper = min over the registered bounds that are rigorous for the pair (`accounting.bounds`),

and `width = upper - lower`. The lower end holds with certainty when it is the attack value
(`accounting.attack`: a post-processing of the true pair, round-off charged) and at the game's
stated confidence when it is eps_L; the upper end holds by the bounds' theorems. A heuristic
(the reduced game of [XWW24] eq. 19 for DP-SGD with tau < 1, the Gaussian-DP central limit) is
never an end: it is neither a lower bound nor an upper bound.

What a user reports: `upper` (the tightest proven epsilon); `width` says how much a better proof
could still gain at most, and 0 means the bound is exact. `tuning_epsilon(pair, law, delta)`
returns exactly that: a `TuningEpsilon` with `epsilon` = the interval's upper end, the bound and
theorem it comes from, and the interval itself.

One implementation of the upper end. `rigorous_values` is the registry loop (a bound counts
where it supports the pair and law, is labelled rigorous for the pair and applies at delta);
`tightest_of` takes the smallest finite value (the registry's order breaks ties). The panel's
interval, `tuning_interval`, `tightest_bound` and `accounting.calibrate` all read the upper end
through them, so a bound that is rigorous for the interval is rigorous for calibration too. Where
the pair's reduction is exact, the exact curve is rigorous and is the truth: the smallest value
is then the exact one (other bounds are above it up to round-off).

Event bases. `pair` may be a dp_accounting DpEvent (`events.as_pair`). Where the event is a
known pair (Gaussian compositions, DP-SGD, N Poisson-sampled Laplace steps), everything above
applies; for any other event (`EventBase`) there is no attack value (`attack.attack_applies`
says why) and the lower end is 0 ("eps >= 0") unless a valid eps_L is given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from auditsel.accounting.attack import attack, attack_applies
from auditsel.accounting.profile import BaseProfile, base_profile
from auditsel.accounting.registry import BOUNDS
from auditsel.errors import ConfigError
from auditsel.events import as_pair
from auditsel.numerics import check_deltas
from auditsel.rounds import RoundsLaw

__all__ = [
    "Interval",
    "TuningEpsilon",
    "tuning_epsilon",
    "Tightest",
    "tuning_interval",
    "tightest_bound",
    "tightest_of",
    "rigorous_values",
    "attack_source",
    "interval_from",
]


@dataclass(frozen=True)
class Interval:
    """[lower, upper] holding the tuning run's epsilon (module docstring); `upper` is inf and
    `upper_source` None when no rigorous bound applies; `width` = upper - lower."""

    lower: float
    lower_source: str
    upper: float
    upper_source: str | None
    width: float

    def contains(self, eps: float, tol: float = 0.0) -> bool:
        return self.lower - tol <= eps <= self.upper + tol

    def to_dict(self) -> dict:
        """result.json's `interval` (non-finite numbers as null)."""
        fin = lambda x: float(x) if math.isfinite(x) else None
        return {
            "lower": fin(self.lower),
            "lower_source": self.lower_source,
            "upper": fin(self.upper),
            "upper_source": self.upper_source,
            "width": fin(self.width),
        }


def interval_from(
    lowers: Iterable[tuple[float | None, str]], uppers: Iterable[tuple[float | None, str]]
) -> Interval:
    """The interval from candidate ends, each (value, source): the largest lower value and the
    smallest upper one (None and nan are skipped; no lower value gives 0, "eps >= 0")."""
    low = [(float(v), s) for v, s in lowers if v is not None and not math.isnan(v)]
    up = [(float(v), s) for v, s in uppers if v is not None and not math.isnan(v)]
    lower, lower_source = max(low, key=lambda t: t[0], default=(0.0, "eps >= 0"))
    lower = max(lower, 0.0)
    upper, upper_source = _smallest(up)
    width = upper - lower if math.isfinite(upper) else math.inf
    return Interval(lower, lower_source, upper, upper_source, width)


def _smallest(values: Iterable[tuple[float, str | None]]) -> tuple[float, str | None]:
    """The smallest finite value with its name, the first of equal ones; (inf, None) if none."""
    finite = [t for t in values if math.isfinite(t[0])]
    return min(finite, key=lambda t: t[0], default=(math.inf, None))


@dataclass(frozen=True)
class Tightest:
    """The tightest rigorous bound for one setting: its value (inf where none applies), registry
    key and theorem; `name` as the interval's `upper_source` writes it."""

    epsilon: float
    key: str | None
    source: str | None

    @property
    def name(self) -> str | None:
        return None if self.key is None else _upper_name(self.key, self.source)


def rigorous_values(
    pair, law: RoundsLaw, delta: float, *, profile: BaseProfile | None = None
) -> dict[str, tuple[float, str | None]]:
    """{key: (eps at delta, theorem)} of every registered bound that supports the pair and law,
    is rigorous for the pair and applies at delta (module docstring); one base profile serves
    them all (`profile`, when the caller has it)."""
    pair = as_pair(pair)
    d = float(check_deltas(delta)[0])
    usable = [
        b
        for b in BOUNDS
        if b.supports(pair, law)
        and b.rigour(pair) == "rigorous"
        and not b.not_applicable(pair, law, d)
    ]
    if profile is None and any(b.key in ("profile", "generic_rdp") for b in usable):
        profile = base_profile(pair)
    return {
        b.key: (float(b.curve(pair, law, [d], profile)[0]), b.source(pair, law, d)) for b in usable
    }


def tightest_of(values: Mapping[str, tuple[float | None, str | None]]) -> Tightest:
    """The smallest finite value of {key: (eps, theorem)} (None and nan skipped)."""
    named = [(float(v), k) for k, (v, _) in values.items() if v is not None and not math.isnan(v)]
    eps, key = _smallest(named)
    return Tightest(eps, key, None if key is None else values[key][1])


def tightest_bound(pair, law: RoundsLaw, delta: float) -> Tightest:
    """The tightest rigorous bound (the interval's upper end, module docstring); inf (key None)
    where no rigorous bound applies or all are vacuous."""
    return tightest_of(rigorous_values(pair, law, delta))


def attack_source(value) -> str:
    """One line saying which attack an `attack.AttackValue` is."""
    if value.method == "exact":
        return (
            "attack: exact winner curve of the pair (the monotone score: the largest output wins)"
        )
    if value.method == "score_search":
        return (
            f"attack: worst score found ({value.shape}: the score's lower sets are "
            f"{'intervals' if value.shape == 'extremes' else 'complements of intervals'} of the "
            f"privacy-loss label), {value.direction}, {value.resolution} merged label buckets"
        )
    return (
        f"attack: release the run with the {value.strategy} label, {value.direction} "
        f"(worst-case pair, label step {value.label_step:g})"
    )


def tuning_interval(
    pair,
    law: RoundsLaw,
    delta: float,
    *,
    eps_l: float | None = None,
    eps_l_source: str = "valid eps_L of a game",
    upper: Mapping[str, float | None] | None = None,
    sources: Mapping[str, str | None] | None = None,
) -> Interval:
    """The interval for one setting (module docstring). `pair`: a mechanism pair or a
    dp_accounting DpEvent; `eps_l`: a valid lower bound from a game (its confidence is the
    caller's to state in `eps_l_source`); `upper` / `sources`: the registry's values and
    theorems when already computed (`accounting.panel`; only the keys rigorous for the pair
    count), else computed here (`rigorous_values`)."""
    pair = as_pair(pair)
    d = float(check_deltas(delta)[0])
    why = attack_applies(pair)
    if why is None:
        value = attack(pair, law, d)
        lowers: list[tuple[float | None, str]] = [(value.epsilon, attack_source(value))]
    else:
        lowers = [(0.0, f"eps >= 0 ({why})")]
    lowers.append((eps_l, eps_l_source))
    values: Mapping[str, tuple[float | None, str | None]]
    if upper is None:
        values = rigorous_values(pair, law, d)
    else:
        rigorous = {b.key for b in BOUNDS if b.rigour(pair) == "rigorous"}
        values = {k: (v, (sources or {}).get(k)) for k, v in upper.items() if k in rigorous}
    best = tightest_of(values)
    return interval_from(lowers, [(best.epsilon, best.name or "")])


def _upper_name(key: str, source: str | None) -> str:
    return f"{key} ({source})" if source else key


@dataclass(frozen=True)
class TuningEpsilon:
    """The epsilon to report for a tuning run (`tuning_epsilon`): `epsilon` is the tightest
    rigorous bound at `delta` (inf where none applies), `bound` its registry key and `source`
    its theorem; `interval` is [attack value (or 0), `epsilon`], the tuning run's epsilon lying
    in it (its `width`: how much a better proof could gain at most)."""

    epsilon: float
    bound: str | None
    source: str | None
    delta: float
    interval: Interval

    def __str__(self) -> str:
        iv = self.interval
        if self.bound is None:
            return f"eps = inf at delta = {self.delta:g}: no rigorous bound applies"
        return (
            f"eps <= {self.epsilon:.4f} at delta = {self.delta:g} ({self.bound}: {self.source}); "
            f"the tuning run's eps is in [{iv.lower:.4f}, {iv.upper:.4f}]"
        )

    def to_dict(self) -> dict:
        """JSON-ready (non-finite numbers as null; `interval` as result.json writes it)."""
        return {
            "epsilon": float(self.epsilon) if math.isfinite(self.epsilon) else None,
            "bound": self.bound,
            "source": self.source,
            "delta": self.delta,
            "interval": self.interval.to_dict(),
        }


def tuning_epsilon(pair, law: RoundsLaw, delta: float) -> TuningEpsilon:
    """The epsilon to report for a tuning run: K ~ `law` runs of the base `pair`, the best one
    released ([XWW24] Algorithm 2). Returns the tightest rigorous bound at `delta` with the bound
    and theorem it comes from and the interval [attack value, that bound] (module docstring).

    `pair`: a mechanism pair (`GaussianBase`, `FiniteOutputBase`, `DpsgdBase`, `LaplaceBase`,
    `EventBase`) or a dp_accounting DpEvent (`events.as_pair`); `law`: a law of K
    (`auditsel.Poisson(10)`, `auditsel.TruncatedNegativeBinomial(eta, nu)`, ...); `delta` in
    [0, 1) (0: the pure-DP value where the base is pure DP, else inf). Heuristics (the reduced
    game of a DP-SGD base with sample rate below 1) are never the answer."""
    pair = as_pair(pair, "pair")
    if not isinstance(law, RoundsLaw):
        raise ConfigError("law", f"must be a law of K (auditsel.Poisson(10), ...), got {law!r}")
    d = float(check_deltas(delta)[0])
    values = rigorous_values(pair, law, d)
    best = tightest_of(values)
    interval = tuning_interval(
        pair,
        law,
        d,
        upper={k: v for k, (v, _) in values.items()},
        sources={k: s for k, (_, s) in values.items()},
    )
    return TuningEpsilon(best.epsilon, best.key, best.source, d, interval)
