"""The honest interval: where the tuning run's epsilon lies, with both ends guaranteed.

Contract. For a mechanism pair, a law of K and delta in [0, 1), the epsilon eps_T(delta) of the
tuning run ([XWW24] Algorithm 2; `accounting.attack`) satisfies ::

    lower <= eps_T(delta) <= upper,

    lower = max(the attack value, one run's epsilon at delta / (1 - P[K = 0]),
                a valid eps_L of a game when one is given),
    upper = min over the registered bounds that are rigorous for the pair (`accounting.registry`),

and `width = upper - lower`. The tuning run's epsilon is taken over EVERY score function the run
may rank its runs by: the attack value is the worst-score attack, and the reduced game's values
(`exact`, `improved_rdp`, `improved_rdp_gdp`: [XWW24]'s monotone-score assumption,
`registry.ASSUMPTION`) are never an end, nor is a heuristic (eq. 19 with tau < 1, the GDP
limit). For a finite-output base the lower end may be the coin search's value
(`accounting.coin_search`; `lower_source` says so): a lower bound for the base with a released
coin, which has the pair's privacy profile, not for the finite pair alone. The lower end holds
with certainty when it is the attack value and at the game's stated confidence when it is
eps_L; the upper end by the bounds' theorems.

On request, `assume="monotone_score"` (every function here that returns an epsilon takes it)
answers for the reduced game instead: the upper end also reads the values labelled
"monotone_score", the lower end is the attack on a monotone score, and the result carries the
assumption (`Interval.assumption`, printed with it): [XWW24]'s value, NOT the tuning run's for
any score.

What a user reports: `upper` (`tuning_epsilon`); `width` says how much a better proof could still
gain at most (0: the bound is exact). One implementation of the upper end: `rigorous_values`
(the registry loop) and `tightest_of` (the smallest finite value, the registry's order breaking
ties), read by the panel, `tuning_interval`, `tightest_bound` and `accounting.calibrate` alike.

Event bases (`events.as_pair`): where the DpEvent is a known pair everything above applies; for
any other event (`EventBase`) there is no attack value (`attack.attack_applies`) and the lower
end is 0 ("eps >= 0") unless a valid eps_L is given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from numpy.typing import ArrayLike

from auditsel.accounting.attack import AttackValue, attack, attack_applies, with_one_run
from auditsel.accounting.coin_search import COIN_ASSUMPTION
from auditsel.accounting.profile import BaseProfile, base_profile
from auditsel.accounting.registry import ASSUMPTION, ASSUMPTIONS, BOUNDS, MONOTONE_SCORE
from auditsel.errors import ConfigError, choice
from auditsel.events import as_pair
from auditsel.numerics import check_deltas
from auditsel.roles import MechanismPair
from auditsel.rounds import RoundsLaw


class _IntervalRecord(TypedDict):
    lower: float | None
    lower_source: str
    upper: float | None
    upper_source: str | None
    width: float | None


class IntervalRecord(_IntervalRecord, total=False):
    """`Interval.to_dict()`, result.json's `interval`: the ends and their sources (non-finite
    numbers as None); `assumption` (the one line of `registry.ASSUMPTION`) only where the ends
    hold under [XWW24]'s monotone-score assumption."""

    assumption: str


def finite_or_none(x: float | None) -> float | None:
    """`x` as a float; None where it is None or not finite (JSON's null)."""
    return None if x is None or not math.isfinite(x) else float(x)


def check_assume(assume: str | None) -> str | None:
    """None (any score, the default) or "monotone_score"; anything else is a ConfigError
    naming `assume`."""
    return None if assume is None else choice(assume, "assume", ASSUMPTIONS)


def allowed_rigours(assume: str | None) -> tuple[str, ...]:
    """The rigour labels whose values may be the upper end: "rigorous", and "monotone_score"
    too under that assumption."""
    return ("rigorous",) if check_assume(assume) is None else ("rigorous", MONOTONE_SCORE)


def interval_attack(
    pair: MechanismPair, law: RoundsLaw, deltas: ArrayLike, assume: str | None = None
) -> AttackValue:
    """The attack value that is the interval's lower end: the worst-score attack, or one run's
    epsilon with the K = 0 mass charged where larger (any score: `attack.one_run_epsilons`), or
    under `assume="monotone_score"` the attack on a monotone score."""
    if check_assume(assume) is None:
        return with_one_run(attack(pair, law, deltas))
    return attack(pair, law, deltas, scores="monotone")


@dataclass(frozen=True)
class Interval:
    """[lower, upper] holding the tuning run's epsilon (module docstring); `upper` is inf and
    `upper_source` None when no rigorous bound applies; `width` = upper - lower."""

    lower: float
    lower_source: str
    upper: float
    upper_source: str | None
    width: float
    #: None: the interval holds for any score; "monotone_score": only under [XWW24]'s assumption
    assumption: str | None = None

    def contains(self, eps: float, tol: float = 0.0) -> bool:
        return self.lower - tol <= eps <= self.upper + tol

    def to_dict(self) -> IntervalRecord:
        """result.json's `interval` (non-finite numbers as null)."""

        out = IntervalRecord(
            lower=finite_or_none(self.lower),
            lower_source=self.lower_source,
            upper=finite_or_none(self.upper),
            upper_source=self.upper_source,
            width=finite_or_none(self.width),
        )
        if self.assumption is not None:
            out["assumption"] = ASSUMPTION
        return out


def interval_from(
    lowers: Iterable[tuple[float | None, str]],
    uppers: Iterable[tuple[float | None, str | None]],
    assumption: str | None = None,
    *,
    setting: object = None,
) -> Interval:
    """The interval from candidate ends, each (value, source): the largest lower value and the
    smallest upper one (None and nan are skipped; no lower value gives 0, "eps >= 0");
    `assumption`: what the ends assume (None: any score). `setting` (the pair, law and delta,
    or any object naming them) marks ends that are both computed, never sampled: their crossing
    is a bug of auditsel (a bound below the truth or an attack above it) and raises
    `IntervalCrossedError` naming the setting instead of printing a negative width."""
    low = [(float(v), s) for v, s in lowers if v is not None and not math.isnan(v)]
    up = [(float(v), s) for v, s in uppers if v is not None and not math.isnan(v)]
    if any(math.isfinite(v) for v, _ in up):  # an infinite lower end beside a finite rigorous
        low = [t for t in low if math.isfinite(t[0])]  # bound is an overflow, never a value
    lower, lower_source = max(low, key=lambda t: t[0], default=(0.0, "eps >= 0"))
    lower = max(lower, 0.0)
    upper, upper_source = _smallest(up)
    width = upper - lower if math.isfinite(upper) else math.inf
    if setting is not None and lower > upper + 1e-9 * max(1.0, abs(upper)):
        raise IntervalCrossedError(
            f"internal error: the computed interval crosses ({lower_source} {lower!r} above "
            f"{upper_source} {upper!r}) for {setting}; please report it"
        )
    return Interval(lower, lower_source, upper, upper_source, width, check_assume(assumption))


class IntervalCrossedError(RuntimeError):
    """A computed lower end above a rigorous upper end: never a user's error (exit 1)."""


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
        if self.key is None:
            return None
        return f"{self.key} ({self.source})" if self.source else self.key

    @property
    def end(self) -> tuple[float, str]:
        """(value, name) as an upper end of `interval_from`."""
        return self.epsilon, self.name or ""


def rigorous_values(
    pair: MechanismPair,
    law: RoundsLaw,
    delta: float,
    *,
    profile: BaseProfile | None = None,
    assume: str | None = None,
) -> dict[str, tuple[float, str | None]]:
    """{key: (eps at delta, theorem)} of every registered bound that supports the pair and law,
    is rigorous for the pair (for any score; with `assume="monotone_score"` also the reduced
    game's values labelled so) and applies at delta (module docstring); one base profile serves
    them all (`profile`, when the caller has it)."""
    pair = as_pair(pair)
    d = float(check_deltas(delta)[0])
    rigours = allowed_rigours(assume)
    usable = [
        b
        for b in BOUNDS
        if b.supports(pair, law)
        and b.rigour(pair) in rigours
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


def tightest_bound(
    pair: MechanismPair, law: RoundsLaw, delta: float, *, assume: str | None = None
) -> Tightest:
    """The tightest rigorous bound (the interval's upper end, module docstring); inf (key None)
    where no rigorous bound applies or all are vacuous. `assume="monotone_score"`: also the
    reduced game's values (module docstring)."""
    return tightest_of(rigorous_values(pair, law, delta, assume=assume))


def attack_source(value: AttackValue) -> str:
    """One line saying which attack an `attack.AttackValue` is (and the score it plays)."""
    if value.method == "exact":
        return "attack: exact winner curve of the pair under a monotone score (the largest output wins)"
    if value.method == "one_run":
        return (
            "attack: one run's eps at delta / (1 - P[K = 0]) (the tuner's score ignores the runs, "
            "ties broken at random: the release is one run, or the fixed output when K = 0)"
        )
    if value.method == "coin_search":
        return (
            f"attack: worst coin score found (outputs ranked with a coin released with each run; "
            f"test {value.direction}): a lower bound {COIN_ASSUMPTION}"
        )
    if value.method == "split_search":
        shape = value.split_shape or "extremes"
        return (
            f"attack: worst split score found ({shape} over {value.resolution} merged label "
            "buckets, the heavy ones split into equal pieces ranked apart: a cut of the output "
            f"with equal shares under both laws, which exists on this atomless base), "
            f"{value.direction}"
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
    pair: MechanismPair,
    law: RoundsLaw,
    delta: float,
    *,
    eps_l: float | None = None,
    eps_l_source: str = "valid eps_L of a game",
    upper: Mapping[str, float | None] | None = None,
    sources: Mapping[str, str | None] | None = None,
    assume: str | None = None,
) -> Interval:
    """The interval for one setting (module docstring). `pair`: a mechanism pair or a
    dp_accounting DpEvent; `eps_l`: a valid lower bound from a game (its confidence is the
    caller's to state in `eps_l_source`); `upper` / `sources`: the registry's values and
    theorems when already computed (`accounting.panel`; only the keys rigorous for the pair
    count), else computed here (`rigorous_values`); `assume`: None (any score) or
    "monotone_score" ([XWW24]'s reduced game, module docstring)."""
    pair = as_pair(pair)
    d = float(check_deltas(delta)[0])
    rigours = allowed_rigours(assume)
    why = attack_applies(pair)
    if why is None:
        value = interval_attack(pair, law, d, assume)
        lowers: list[tuple[float | None, str]] = [(value.epsilon, attack_source(value))]
    else:
        lowers = [(0.0, f"eps >= 0 ({why})")]
    lowers.append((eps_l, eps_l_source))
    values: Mapping[str, tuple[float | None, str | None]]
    if upper is None:
        values = rigorous_values(pair, law, d, assume=assume)
    else:
        allowed = {b.key for b in BOUNDS if b.rigour(pair) in rigours}
        values = {k: (v, (sources or {}).get(k)) for k, v in upper.items() if k in allowed}
    best = tightest_of(values)
    setting = None if eps_l is not None else (pair, law, d)
    return interval_from(lowers, [best.end], assume, setting=setting)


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
    #: None: for any score; "monotone_score": only under [XWW24]'s assumption (printed)
    assumption: str | None = None

    def __str__(self) -> str:
        iv = self.interval
        if self.bound is None:
            return f"eps = inf at delta = {self.delta:g}: no rigorous bound applies"
        if self.assumption is not None:
            return (
                f"eps <= {self.epsilon:.4f} at delta = {self.delta:g} ({self.bound}: "
                f"{self.source}) under [XWW24]'s monotone-score assumption, in "
                f"[{iv.lower:.4f}, {iv.upper:.4f}] under it; not the tuning run's eps for any score"
            )
        return (
            f"eps <= {self.epsilon:.4f} at delta = {self.delta:g} ({self.bound}: {self.source}); "
            f"the tuning run's eps is in [{iv.lower:.4f}, {iv.upper:.4f}] (any score)"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (non-finite numbers as null; `interval` as result.json writes it;
        `assumption`: the one-line assumption, or None for any score)."""
        return {
            "epsilon": finite_or_none(self.epsilon),
            "bound": self.bound,
            "source": self.source,
            "delta": self.delta,
            "interval": self.interval.to_dict(),
            "assumption": None if self.assumption is None else ASSUMPTION,
        }


def tuning_epsilon(
    pair: MechanismPair, law: RoundsLaw, delta: float, *, assume: str | None = None
) -> TuningEpsilon:
    """The epsilon to report for a tuning run: K ~ `law` runs of the base `pair`, the best one
    released ([XWW24] Algorithm 2).

    The answer holds for any score the tuning run ranks its runs by. Heuristics (the reduced
    game of a DP-SGD base with sample rate below 1, the GDP limit) are never the answer.

    Args:
        pair: a mechanism pair (`GaussianBase`, `FiniteOutputBase`, `DpsgdBase`,
            `LaplaceBase`, `EventBase`) or a dp_accounting DpEvent (`events.as_pair`).
        law: a law of K (`auditsel.Poisson(10)`,
            `auditsel.TruncatedNegativeBinomial(eta, nu)`, ...).
        delta: in [0, 1) (0: the pure-DP value where the base is pure DP, else inf).
        assume: None (any score), or "monotone_score": [XWW24]'s reduced-game value instead,
            labelled with that assumption (module docstring).

    Returns:
        The tightest rigorous bound at `delta`, the bound and theorem it comes from, and the
        interval [attack value, that bound] (module docstring).

    Raises:
        auditsel.errors.ConfigError: `pair` is no mechanism pair, `law` no law of K, `delta`
            outside [0, 1) or `assume` unknown.
    """
    pair = as_pair(pair, "pair")
    if not isinstance(law, RoundsLaw):
        raise ConfigError("law", f"must be a law of K (auditsel.Poisson(10), ...), got {law!r}")
    deltas = check_deltas(delta)
    if len(deltas) != 1:
        raise ConfigError(
            "delta",
            f"must be one number in [0, 1), got {len(deltas)} values: call tuning_epsilon once "
            f"per delta",
        )
    d = float(deltas[0])
    assume = check_assume(assume)
    values = rigorous_values(pair, law, d, assume=assume)
    best = tightest_of(values)
    interval = tuning_interval(
        pair,
        law,
        d,
        upper={k: v for k, (v, _) in values.items()},
        sources={k: s for k, (_, s) in values.items()},
        assume=assume,
    )
    return TuningEpsilon(best.epsilon, best.key, best.source, d, interval, assume)
