"""The upper bounds as a registry: each bound is a small object, the panel is a loop over them.

In the manner of dp_accounting (events are data, accountants are algorithms): the mechanism
pair (`auditsel.mechanisms`) and the law of K (`auditsel.rounds`) are data; a bound is an
algorithm with ::

    supports(pair, law)          whether it applies to this pair and law at all
    curve(pair, law, deltas)     its privacy curve read as eps at each delta, from ONE
                                 computation; inf where vacuous (delta = 0 unless it
                                 certifies pure DP there), nan where it does not apply; a
                                 delta outside [0, 1) is a ConfigError naming `deltas`
    rigour(pair)                 "rigorous", "monotone_score" or "heuristic" for this pair
    source(pair, law, delta)     the theorem used (result.json `upper_sources`)
    citation                     the result it implements, stated once, here

Every citation of the panel lives in this module. The bounds (keys of result.json `upper`):

* generic_rdp: [PS22] Theorem 2 (TNB), Theorem 6 sharpened (Poisson, any mean > 0), Lemma 7
  (other laws), the fixed output of K = 0 counted (proofs in `accounting.generic`), Corollary 3
  when delta = 0 (pure-DP base, TNB law); the base's RDP curve (exact for Gaussian and finite
  pairs, dp_accounting's for DP-SGD and event bases), the Canonne-Kamath-Steinke conversion
  over `rdp.ORDERS` (DP-SGD: the pair's `RDP_ORDERS`), supersets of dp_accounting's orders.
* profile: [KRW24] Theorem 5.2 or the Theorem 4.1 recipe, whichever shift is smaller (TNB),
  Theorem 5.7 (binomial), Corollary 5.8 (Poisson), the Theorem 4.1 recipe (other laws); or,
  where smaller, the layered profile bound (`profile.layered_delta`, proof in
  docs/explanation/bounds.md), read per direction for DP-SGD and finite pairs
  (`TWO_SIDED_PAIRS`, `two_sided` below). Both assume only the base's privacy profile (exact,
  or dp_accounting's pessimistic PLD), for any score.
* improved_rdp: [XWW24] Algorithm 3 with mu (eps_UO) on the pair's reduced Gaussian; for a
  finite pair the same recipe on the exact winner laws.
* improved_rdp_gdp: [XWW24] Algorithm 3 with mu_GDP (eps_UG, Appendix A.4); DP-SGD only.
* exact: the exact eps of the released winner ([XWW24] Theorem 2 / eq. 7 and the reduced game
  of Figure 5; `accounting.exact`) of the pair's reduced pair.

Rigour, for the TUNING RUN (a guarantee must hold for every score function the tuning run may
rank its runs by; docs/findings/any-score.md):

* "rigorous": a proven upper bound for every score (quadrature and grids err on the safe side):
  generic_rdp and profile.
* "monotone_score": a proven value of the reduced game ([XWW24] Figure 5), the tuning run's
  only under [XWW24]'s assumption that the score is a continuous one-to-one, hence monotone,
  function of the reduced draw (Sec. 5.2, Theorem 1, Proposition 3; finite-output base: the
  listed score order): exact and improved_rdp where the pair's reduction is exact. A score that
  is not monotone leaks more, so these are never the tuning run's upper end; `ASSUMPTION` says
  so in one line wherever they are shown.
* "heuristic": values resting on the eq. 19 reduction with tau < 1 or on the GDP central-limit
  approximation (improved_rdp_gdp); they too assume a monotone score.

`MONOTONE_SCORE_KEYS` are the reduced game's keys.

Opt-in bounds (`OPT_IN_BOUNDS`, `opt_in_bound(key)`): rigorous for any score but too slow, or
not tighter, for the default panel; never in result.json unless asked (proofs in
docs/explanation/bounds.md).

* score_dual: the Lagrangian dual of the score-order problem by dynamic programming over
  (P-mass, Q-mass) (`accounting.score_dual`); assumes only the base pair's pmfs (finite pairs)
  or dp_accounting's pessimistic PLD (DP-SGD).
* region_pure: the tuning run's eps at delta = 0 (so at every delta) for a finite pair with
  bounded loss: max over directions of L_max + sup_a log G'(a)/G'(bmin(a)), the direction's own
  Neyman-Pearson floor (`score_dual.region_pure_epsilon`).
* two_sided: the layered profile bound read per direction, each direction's own privacy
  profile and region (`accounting.two_sided`); assumes only the pair's two directional profiles;
  never above the layered bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Final, Literal, cast

import numpy as np
from numpy.typing import ArrayLike

from auditsel.accounting.exact import exact_epsilon
from auditsel.accounting.generic import generic_epsilon, pure_dp_generic_epsilon
from auditsel.accounting.improved import finite_improved_epsilon, improved_epsilon
from auditsel.accounting.profile import (
    BaseProfile,
    base_profile,
    layered_epsilon,
    profile_epsilon,
)
from auditsel.accounting.rdp import ORDERS, pure_dp_rdp
from auditsel.accounting.score_dual import region_pure_epsilon, score_dual_epsilon
from auditsel.accounting.two_sided import two_sided_epsilon
from auditsel.errors import choice
from auditsel.events import as_pair
from auditsel.mechanisms import DpsgdBase, FiniteOutputBase
from auditsel.numerics import FloatArray, check_deltas
from auditsel.roles import AccountedPair, MechanismPair
from auditsel.rounds import RoundsLaw, TruncatedNegativeBinomial
from auditsel.selection import winner_law

#: the one assumption a value may rest on (the keyword `assume=` of `accounting.interval`)
MONOTONE_SCORE: Final = "monotone_score"
ASSUMPTIONS = (MONOTONE_SCORE,)
#: the rigour labels, for the tuning run (module docstring)
RIGOURS = ("rigorous", MONOTONE_SCORE, "heuristic")
Rigour = Literal["rigorous", "monotone_score", "heuristic"]
#: the reduced game's values: they hold only under [XWW24]'s monotone-score assumption
MONOTONE_SCORE_KEYS = ("exact", "improved_rdp", "improved_rdp_gdp")
#: the assumption in one line, printed wherever a value under it is shown
ASSUMPTION = (
    "[XWW24]'s monotone-score assumption: the tuning run ranks its runs by a continuous "
    "one-to-one (hence monotone) function of the reduced Gaussian draw (Sec. 5.2, Thm 1, "
    "Prop. 3); not the tuning run's epsilon for any score (a non-monotone score leaks more)"
)


@dataclass(frozen=True)
class Bound:
    """One upper bound on eps of the tuned mechanism (see the module docstring)."""

    key: str
    citation: str
    heuristic_always: bool = False

    def supports(self, pair: MechanismPair, law: RoundsLaw) -> bool:
        """Whether the bound applies to this pair (or dp_accounting event) and law at all."""
        return as_pair(pair) is not None

    def rigour(self, pair: MechanismPair) -> Rigour:
        """'rigorous', 'monotone_score' or 'heuristic' for this pair (module docstring): the
        reduced game's values are heuristic where the pair's reduction is not exact."""
        if self.assumes_monotone_score:
            pair = as_pair(pair)
            if pair.reduced() is not None and not pair.reduction_is_exact:
                return "heuristic"
        return self.rigour_default

    @property
    def assumes_monotone_score(self) -> bool:
        """Whether the value is the reduced game's (holds only under [XWW24]'s assumption)."""
        return self.key in MONOTONE_SCORE_KEYS

    @property
    def rigour_default(self) -> Rigour:
        """The rigour for a pair whose reduction is exact (Gaussian, finite, DP-SGD with tau = 1)."""
        if self.heuristic_always:
            return "heuristic"
        return MONOTONE_SCORE if self.assumes_monotone_score else "rigorous"

    def source(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> str | None:
        raise NotImplementedError

    def curve(
        self,
        pair: MechanismPair,
        law: RoundsLaw,
        deltas: ArrayLike,
        profile: BaseProfile | None = None,
    ) -> FloatArray:
        """eps at each delta (module docstring): nan everywhere where the bound does not apply
        to the pair, else `values`' (inf where vacuous)."""
        pair = as_pair(pair)
        deltas = check_deltas(deltas, "deltas")
        if not self.supports(pair, law):
            return np.full(deltas.shape, np.nan)
        return self.values(pair, law, deltas, profile)

    def values(
        self, pair: AccountedPair, law: RoundsLaw, deltas: FloatArray, profile: BaseProfile | None
    ) -> FloatArray:
        """eps at each of the checked `deltas` for a pair the bound supports."""
        raise NotImplementedError

    def not_applicable(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> str | None:
        """Why the bound has no value here (a note for result.json), or None."""
        return None

    def epsilon(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> float:
        """eps at one delta (inf where vacuous, nan where it does not apply)."""
        return float(self.curve(pair, law, check_deltas(delta))[0])


def _at_positive(deltas: FloatArray, fn: Callable[[FloatArray], ArrayLike]) -> FloatArray:
    """fn(the deltas > 0) at those deltas, inf at delta = 0 (vacuous there)."""
    out = np.full(deltas.shape, np.inf)
    pos = deltas > 0
    if np.any(pos):
        out[pos] = fn(deltas[pos])
    return out


class GenericRdp(Bound):
    def supports(self, pair: MechanismPair, law: RoundsLaw) -> bool:
        pair = as_pair(pair)
        return getattr(pair, "supports_rdp", True) or math.isfinite(pair.pure_epsilon)

    def source(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> str | None:
        pair = as_pair(pair)
        if delta == 0:
            return "[PS22] Corollary 3" if self._pure_ok(pair, law) else None
        if law.kind == "tnb":
            pure = " (Corollary 3 where smaller)" if self._pure_ok(pair, law) else ""
            return "[PS22] Theorem 2" + pure
        if law.kind == "poisson":
            return "[PS22] Theorem 6, sharpened (K = 0 counted)"
        return "[PS22] Lemma 7" + (" (K = 0 counted)" if law.p_zero > 0 else "")

    @staticmethod
    def _pure_ok(pair: MechanismPair, law: RoundsLaw) -> bool:
        return law.kind == "tnb" and math.isfinite(pair.pure_epsilon)

    def not_applicable(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> str | None:
        pair = as_pair(pair)
        if delta == 0 and not self._pure_ok(pair, law):
            return "generic_rdp: delta = 0 needs a pure-DP base and a TNB law (Cor. 3)"
        return None

    def values(
        self, pair: AccountedPair, law: RoundsLaw, deltas: FloatArray, profile: BaseProfile | None
    ) -> FloatArray:
        """The RDP bound converted at every delta > 0; for a pure-DP base and a TNB law,
        Corollary 3's pure (2 + eta) eps where smaller (pure DP holds at every delta)."""
        out = np.full(deltas.shape, np.inf)
        zero = deltas == 0
        if np.any(~zero):
            orders = np.asarray(pair.rdp_orders or ORDERS, dtype=float)
            if profile is None and not isinstance(law, TruncatedNegativeBinomial):
                profile = base_profile(pair)  # Theorem 6 and Lemma 7 use it; Theorem 2 does not
            rdp = pair.rdp(orders)
            if math.isfinite(pair.pure_epsilon):  # eps-DP: RDP at most randomized response's
                rdp = np.minimum(rdp, pure_dp_rdp(pair.pure_epsilon, orders))
            out[~zero] = generic_epsilon(orders, rdp, law, deltas[~zero], profile)
        if self._pure_ok(pair, law):
            out = np.minimum(out, pure_dp_generic_epsilon(pair.pure_epsilon, law))
        return out


#: the pairs whose `profile` reads the two-sided layered bound (each direction's own profile
#: and region; never above the layered bound) in place of the layered one
TWO_SIDED_PAIRS = (DpsgdBase, FiniteOutputBase)


class ProfileBound(Bound):
    def supports(self, pair: MechanismPair, law: RoundsLaw) -> bool:
        return getattr(as_pair(pair), "supports_pld", True)

    def source(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> str | None:
        pair = as_pair(pair)
        if delta == 0:
            return None
        krw = {
            "tnb": "[KRW24] Theorem 5.2 or Theorem 4.1 recipe (the smaller shift)",
            "poisson": "[KRW24] Corollary 5.8",
            "binomial": "[KRW24] Theorem 5.7 (Theorem 4.1 recipe if infeasible)",
        }.get(law.kind, "[KRW24] Theorem 4.1 recipe")
        layered = "two-sided layered" if isinstance(pair, TWO_SIDED_PAIRS) else "layered"
        return f"{krw} or the {layered} profile bound, the smaller"

    def not_applicable(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> str | None:
        return "profile: needs delta > 0" if delta == 0 else None

    def values(
        self, pair: AccountedPair, law: RoundsLaw, deltas: FloatArray, profile: BaseProfile | None
    ) -> FloatArray:
        def smaller(ds: FloatArray) -> FloatArray:
            prof = profile or base_profile(pair)
            krw = profile_epsilon(pair, law, ds, prof)
            if isinstance(pair, TWO_SIDED_PAIRS):  # each direction's own profile and region
                return np.minimum(krw, two_sided_epsilon(pair, law, ds))
            return np.minimum(krw, layered_epsilon(pair, law, ds, prof, start=krw))

        return _at_positive(deltas, smaller)


@dataclass(frozen=True)
class ImprovedRdp(Bound):
    gdp: bool = False

    def supports(self, pair: MechanismPair, law: RoundsLaw) -> bool:
        pair = as_pair(pair)
        return pair.mu_gdp is not None if self.gdp else pair.reduced() is not None

    def source(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> str | None:
        pair = as_pair(pair)
        if delta == 0 or not self.supports(pair, law):
            return None
        if self.gdp:
            return "[XWW24] Algorithm 3 (mu_GDP)"
        if pair.mu is None:
            return "[XWW24] Algorithm 3 recipe on the exact finite winner"
        return "[XWW24] Algorithm 3 (mu)"

    def values(
        self, pair: AccountedPair, law: RoundsLaw, deltas: FloatArray, profile: BaseProfile | None
    ) -> FloatArray:
        if self.gdp:
            return _at_positive(deltas, partial(improved_epsilon, cast(float, pair.mu_gdp), law))
        if pair.mu is None:  # the finite-output pair (`supports`: a reduced pair exists)
            finite = cast(FiniteOutputBase, pair)
            return _at_positive(deltas, partial(finite_improved_epsilon, finite, law))
        return _at_positive(deltas, partial(improved_epsilon, pair.mu, law))


class ExactBound(Bound):
    def supports(self, pair: MechanismPair, law: RoundsLaw) -> bool:
        return as_pair(pair).reduced() is not None

    def source(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> str | None:
        pair = as_pair(pair)
        if pair.mu is None:
            return "[XWW24] eq. 7 (finite winner)"
        return "reduced game ([XWW24] Figure 5), exact privacy curve"

    def values(
        self, pair: AccountedPair, law: RoundsLaw, deltas: FloatArray, profile: BaseProfile | None
    ) -> FloatArray:
        winner = winner_law(cast(MechanismPair, pair.reduced()), law)  # supports(): not None
        return np.asarray(exact_epsilon(winner, deltas), dtype=float)


#: The registry, in result.json's order of `upper`.
BOUNDS = (
    GenericRdp(
        "generic_rdp",
        "Papernot & Steinke 2022 [PS22] Thm 2 (TNB), Thm 6 sharpened (Poisson), Lemma 7 "
        "(other laws; K = 0 counted), Cor 3 (pure DP); Canonne-Kamath-Steinke 2020 conversion",
    ),
    ProfileBound(
        "profile",
        "Koskela, Redberg & Wang 2024 [KRW24] Thm 5.2 or Thm 4.1 recipe (TNB), Thm 5.7 "
        "(binomial), Cor 5.8 (Poisson), Thm 4.1 recipe (other laws); or the layered profile "
        "bound, read per direction for DP-SGD and finite pairs (docs/explanation/bounds.md), "
        "the smaller",
    ),
    ImprovedRdp(
        "improved_rdp",
        "Xiang, Wang & Wang 2024 [XWW24] Algorithm 3 with mu of eq. 19 (eps_UO); "
        "monotone score assumed; heuristic for DP-SGD with tau < 1",
    ),
    ImprovedRdp(
        "improved_rdp_gdp",
        "[XWW24] Algorithm 3 with mu_GDP of Appendix A.4 (eps_UG; Dong et al. CLT); "
        "monotone score assumed",
        heuristic_always=True,
        gdp=True,
    ),
    ExactBound(
        "exact",
        "[XWW24] Theorem 2 / eq. 7 and the reduced game (Figure 5): exact privacy "
        "curve of the winner under a monotone score; heuristic for DP-SGD with tau < 1",
    ),
)

BOUND_KEYS = tuple(b.key for b in BOUNDS)


def _score_dual_curve(
    pair: AccountedPair, law: RoundsLaw, deltas: FloatArray, profile: BaseProfile | None
) -> FloatArray:
    """eps by bisection on [0, 2 x the default rigorous upper end] (inf where the dual does
    not get below delta there, and at delta = 0)."""
    out = np.full(deltas.shape, np.inf)
    for i, d in enumerate(deltas.tolist()):
        if d <= 0:
            continue
        known = min(
            float(b.curve(pair, law, np.array([d]), profile)[0])
            for b in BOUNDS
            if b.supports(pair, law) and b.rigour(pair) == "rigorous"
        )
        top = 2.0 * known if math.isfinite(known) and known > 0 else 50.0
        out[i] = float(score_dual_epsilon(pair, law, d, hi=top, steps=12)[0])
    return out


#: an opt-in bound's curve: (pair, law, checked deltas, profile or None) -> eps at each delta
CurveFn = Callable[[AccountedPair, RoundsLaw, FloatArray, BaseProfile | None], FloatArray]


@dataclass(frozen=True, kw_only=True)
class OptInBound(Bound):
    """An opt-in bound (module docstring): rigorous for any score, applies to the pairs of
    `supported_types`; `theorem` is its `source`, `epsilon_fn` its curve on supported pairs
    (nan on the others); `pure` says whether it holds at delta = 0 (else it needs delta > 0)."""

    theorem: str
    epsilon_fn: CurveFn
    supported_types: tuple[type, ...] = (FiniteOutputBase, DpsgdBase)
    pure: bool = False

    def supports(self, pair: MechanismPair, law: RoundsLaw) -> bool:
        return isinstance(as_pair(pair), self.supported_types)

    def source(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> str | None:
        if (delta == 0 and not self.pure) or not self.supports(pair, law):
            return None
        return self.theorem

    def not_applicable(self, pair: MechanismPair, law: RoundsLaw, delta: float) -> str | None:
        return f"{self.key}: needs delta > 0" if delta == 0 and not self.pure else None

    def values(
        self, pair: AccountedPair, law: RoundsLaw, deltas: FloatArray, profile: BaseProfile | None
    ) -> FloatArray:
        return self.epsilon_fn(pair, law, deltas, profile)


#: rigorous for any score, but not in the default panel (module docstring)
OPT_IN_BOUNDS = (
    OptInBound(
        key="score_dual",
        citation="Lagrangian dual of the score-order problem, dynamic programming over "
        "(P-mass, Q-mass) (docs/explanation/bounds.md); assumes only the base pair's pmfs or "
        "dp_accounting's pessimistic PLD",
        theorem="Lagrangian dual of the score order (docs/explanation/bounds.md)",
        epsilon_fn=_score_dual_curve,
    ),
    OptInBound(
        key="region_pure",
        citation="pure eps of the tuning run from each direction's Neyman-Pearson floor: "
        "L_max + sup_a log G'(a)/G'(bmin(a)) (docs/explanation/bounds.md); assumes only the "
        "finite pair's pmfs",
        theorem="pure eps from the Neyman-Pearson floor (docs/explanation/bounds.md)",
        # one eps for every delta (it holds at delta = 0); inf for an unbounded loss
        epsilon_fn=lambda pair, law, deltas, _: np.full(
            deltas.shape, region_pure_epsilon(pair, law)
        ),
        supported_types=(FiniteOutputBase,),
        pure=True,
    ),
    OptInBound(
        key="two_sided",
        citation="the layered profile bound per direction: [KRW24] Thm 4.1's region cut by "
        "each direction's own profile, Psi from the direction's own profile "
        "(docs/explanation/bounds.md); assumes only the pair's two directional profiles "
        "(dp_accounting's pessimistic PLD of each direction for DP-SGD)",
        theorem="layered profile bound per direction (docs/explanation/bounds.md)",
        epsilon_fn=lambda pair, law, deltas, _: two_sided_epsilon(pair, law, deltas),
    ),
)


def opt_in_bound(key: str) -> Bound:
    """The opt-in bound with this key (a ConfigError names the allowed keys)."""
    keys = tuple(b.key for b in OPT_IN_BOUNDS)
    return OPT_IN_BOUNDS[keys.index(choice(key, "bound", keys))]


def bound(key: str) -> Bound:
    """The registered bound with this key (a ConfigError names the allowed keys)."""
    return BOUNDS[BOUND_KEYS.index(choice(key, "bound", BOUND_KEYS))]
