"""The upper-bound panel: every upper bound on eps of the tuned mechanism, for one setting.

    upper_bounds(base, law, delta) -> {"generic_rdp", "profile", "improved_rdp",
                                       "improved_rdp_gdp", "exact"}     (None where not applicable)
    base_info(base, delta)         -> {"epsilon": eps_B, "mu": mu or None, "mu_gdp": ... or None}
    panel(base, law, delta)        -> {"base": base_info, "upper": upper_bounds,
                                       "labels": per-key rigour for this base, "sources": ...,
                                       "notes": [...], "seconds": {...}}

`base` is a `GaussianBase` (the reduced game), a `FiniteOutputBase`, or an
`accounting.base.DpsgdBase` (one DP-SGD run; its exact/improved values are those of the reduced
game with mu = tau sqrt(N)/sigma, [XWW24] eq. 19, heuristic when tau < 1).

Keys (result.json `upper`, docs/architecture.md), with the result each one implements:

* generic_rdp       Papernot & Steinke 2022 [PS22]: Theorem 2 (TNB), Theorem 6 (Poisson),
                    Lemma 7 (other laws), Corollary 3 when delta = 0 (pure-DP base); base RDP curve:
                    exact (Gaussian, finite) or dp_accounting (DP-SGD); Canonne-Kamath-Steinke
                    conversion over `rdp.ORDERS` (DP-SGD: `base.RDP_ORDERS`).
* profile           Koskela, Redberg, Wang 2024 [KRW24]: Theorem 5.2 (TNB), Theorem 5.7
                    (binomial), Corollary 5.8 (Poisson), Theorem 4.1 recipe (other laws); base
                    profile exact (Gaussian, finite) or dp_accounting's pessimistic PLD (DP-SGD).
* improved_rdp      [XWW24] Algorithm 3 with mu (eps_UO); finite base: the same recipe on the
                    exact winner laws.
* improved_rdp_gdp  [XWW24] Algorithm 3 with mu_GDP (eps_UG, [XWW24] Appendix A.4); DP-SGD only.
* exact             exact eps of the released winner ([XWW24] Theorem 2 / eq. 7 and the reduced
                    game of Figure 5; `accounting.exact`).

Rigour: a value labelled "rigorous" is a proven upper bound for the stated base (numerical
quadrature and grids aside, all of which err on the safe side except the Renyi integrals of
Algorithm 3 and the root finding of the exact curve, accurate far beyond the digits reported).
"heuristic" marks values that rest on the eq. 19 reduction with tau < 1 or on the GDP central
limit approximation.
"""
from __future__ import annotations

import math
import time

import numpy as np

from auditsel.accounting.base import RDP_ORDERS, DpsgdBase
from auditsel.accounting.exact import exact_epsilon
from auditsel.accounting.generic import generic_epsilon, pure_dp_generic_epsilon
from auditsel.accounting.improved import finite_improved_epsilon, improved_epsilon
from auditsel.accounting.profile import base_profile, profile_epsilon
from auditsel.accounting.rdp import ORDERS, finite_rdp, gaussian_rdp
from auditsel.mechanisms import FiniteOutputBase, GaussianBase
from auditsel.rounds import RoundsLaw, TruncatedNegativeBinomial
from auditsel.selection import FiniteWinner, GaussianWinner
from auditsel.errors import ConfigError

__all__ = ["BOUND_KEYS", "BOUND_LABELS", "upper_bounds", "base_info", "bound_labels", "panel"]

BOUND_KEYS = ("generic_rdp", "profile", "improved_rdp", "improved_rdp_gdp", "exact")

BOUND_LABELS = {
    "generic_rdp": {
        "rigour": "rigorous",
        "citation": "Papernot & Steinke 2022 [PS22] Thm 2 (TNB), Thm 6 (Poisson), Lemma 7 "
                    "(other laws), Cor 3 (pure DP); Canonne-Kamath-Steinke 2020 conversion",
    },
    "profile": {
        "rigour": "rigorous",
        "citation": "Koskela, Redberg & Wang 2024 [KRW24] Thm 5.2 (TNB), Thm 5.7 (binomial), "
                    "Cor 5.8 (Poisson), Thm 4.1 recipe (other laws)",
    },
    "improved_rdp": {
        "rigour": "rigorous",
        "citation": "Xiang, Wang & Wang 2024 [XWW24] Algorithm 3 with mu of eq. 19 (eps_UO); "
                    "heuristic for DP-SGD with tau < 1",
    },
    "improved_rdp_gdp": {
        "rigour": "heuristic",
        "citation": "[XWW24] Algorithm 3 with mu_GDP of Appendix A.4 (eps_UG; Dong et al. CLT)",
    },
    "exact": {
        "rigour": "rigorous",
        "citation": "[XWW24] Theorem 2 / eq. 7 and the reduced game (Figure 5): exact privacy "
                    "curve of the winner; heuristic for DP-SGD with tau < 1",
    },
}


def bound_labels(base) -> dict:
    """Per-key rigour for this base ('rigorous' or 'heuristic')."""
    labels = {k: v["rigour"] for k, v in BOUND_LABELS.items()}
    if isinstance(base, DpsgdBase) and not base.mu_is_exact:
        labels["improved_rdp"] = "heuristic"
        labels["exact"] = "heuristic"
    return labels


def _finite_or_none(x):
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def base_info(base, delta: float) -> dict:
    """eps_B of one run at delta, mu (reduced game) and mu_GDP where they exist."""
    if isinstance(base, GaussianBase):
        return {"epsilon": _finite_or_none(base.epsilon(delta)), "mu": base.mu, "mu_gdp": None}
    if isinstance(base, DpsgdBase):
        eps = base.epsilon(delta) if delta > 0 else math.inf
        return {"epsilon": _finite_or_none(eps), "mu": base.mu, "mu_gdp": base.mu_gdp}
    if isinstance(base, FiniteOutputBase):
        return {"epsilon": _finite_or_none(_finite_base_epsilon(base, delta)), "mu": None,
                "mu_gdp": None}
    raise TypeError(f"unsupported base {type(base).__name__}")


def _finite_base_epsilon(base: FiniteOutputBase, delta: float) -> float:
    p, q = base.law(0), base.law(1)
    if delta <= 0:
        both = (p > 0) & (q > 0)
        if np.any((p > 0) != (q > 0)):
            return math.inf
        return float(np.max(np.abs(np.log(p[both]) - np.log(q[both]))))
    return float(base_profile(base).epsilon(delta))


def _base_rdp(base):
    if isinstance(base, GaussianBase):
        return ORDERS, gaussian_rdp(base.mu, ORDERS)
    if isinstance(base, FiniteOutputBase):
        return ORDERS, finite_rdp(base.law(0), base.law(1), ORDERS)
    orders = np.asarray(RDP_ORDERS, dtype=float)
    return orders, base.rdp_curve(orders)


def panel(base, law: RoundsLaw, delta: float) -> dict:
    """All bounds for one setting, with base info, per-base labels, sources and timings."""
    if not (0 <= delta < 1):
        raise ConfigError("delta", f"must be in [0, 1), got {delta!r}")
    notes: list[str] = []
    seconds: dict[str, float] = {}
    upper: dict[str, float | None] = {k: None for k in BOUND_KEYS}
    sources: dict[str, str | None] = {k: None for k in BOUND_KEYS}

    def timed(key, fn):
        t = time.perf_counter()
        try:
            return fn()
        finally:
            seconds[key] = time.perf_counter() - t

    info = timed("base", lambda: base_info(base, delta))
    prof = timed("base_profile", lambda: base_profile(base))

    # generic (PS22)
    if delta == 0:
        if isinstance(base, FiniteOutputBase) and isinstance(law, TruncatedNegativeBinomial):
            eps0 = _finite_base_epsilon(base, 0.0)
            upper["generic_rdp"] = timed("generic_rdp", lambda: pure_dp_generic_epsilon(eps0, law))
            sources["generic_rdp"] = "[PS22] Corollary 3"
        else:
            notes.append("generic_rdp: delta = 0 needs a pure-DP base and a TNB law (Cor. 3)")
    else:
        orders, rdp = _base_rdp(base)
        upper["generic_rdp"] = timed("generic_rdp",
                                     lambda: generic_epsilon(orders, rdp, law, delta, prof))
        sources["generic_rdp"] = _generic_source(law)

    # privacy profile (Koskela et al.)
    if delta > 0:
        upper["profile"] = timed("profile", lambda: profile_epsilon(base, law, delta, prof))
        sources["profile"] = _profile_source(law)
    else:
        notes.append("profile: needs delta > 0")

    # improved ([XWW24] Algorithm 3) and exact
    if isinstance(base, FiniteOutputBase):
        if delta > 0:
            upper["improved_rdp"] = timed("improved_rdp",
                                          lambda: finite_improved_epsilon(base, law, delta))
            sources["improved_rdp"] = "[XWW24] Algorithm 3 recipe on the exact finite winner"
        upper["exact"] = timed("exact", lambda: exact_epsilon(FiniteWinner(base, law), delta))
        sources["exact"] = "[XWW24] eq. 7 (finite winner)"
    else:
        mu = base.mu
        if delta > 0:
            upper["improved_rdp"] = timed("improved_rdp", lambda: improved_epsilon(mu, law, delta))
            sources["improved_rdp"] = "[XWW24] Algorithm 3 (mu)"
            if isinstance(base, DpsgdBase):
                upper["improved_rdp_gdp"] = timed(
                    "improved_rdp_gdp", lambda: improved_epsilon(base.mu_gdp, law, delta))
                sources["improved_rdp_gdp"] = "[XWW24] Algorithm 3 (mu_GDP)"
        upper["exact"] = timed("exact", lambda: exact_epsilon(
            GaussianWinner(GaussianBase(mu), law), delta))
        sources["exact"] = "reduced game ([XWW24] Figure 5), exact privacy curve"
        if isinstance(base, DpsgdBase) and not base.mu_is_exact:
            notes.append("improved_rdp and exact use mu = tau sqrt(N)/sigma ([XWW24] eq. 19), "
                         "a large-N approximation when tau < 1: heuristic")

    for k in BOUND_KEYS:
        v = upper[k]
        if v is not None and not math.isfinite(v):
            notes.append(f"{k}: the bound is vacuous (infinite) for this setting")
        upper[k] = _finite_or_none(v)
    return {"base": info, "upper": upper, "labels": bound_labels(base), "sources": sources,
            "notes": notes, "seconds": seconds}


def upper_bounds(base, law: RoundsLaw, delta: float) -> dict:
    """The five bounds of result.json `upper` (None where not applicable or vacuous)."""
    return panel(base, law, delta)["upper"]


def _generic_source(law) -> str:
    from auditsel.rounds import Poisson

    if isinstance(law, TruncatedNegativeBinomial):
        return "[PS22] Theorem 2"
    if isinstance(law, Poisson):
        return "[PS22] Theorem 6"
    return "[PS22] Lemma 7"


def _profile_source(law) -> str:
    from auditsel.rounds import Binomial, Poisson

    if isinstance(law, TruncatedNegativeBinomial):
        return "[KRW24] Theorem 5.2"
    if isinstance(law, Poisson):
        return "[KRW24] Corollary 5.8"
    if isinstance(law, Binomial):
        return "[KRW24] Theorem 5.7 (Theorem 4.1 recipe if infeasible)"
    return "[KRW24] Theorem 4.1 recipe"
