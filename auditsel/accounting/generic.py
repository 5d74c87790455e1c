"""Generic RDP bounds for private selection (Papernot & Steinke 2022, [PS22], "PS22").

Base Q with RDP curve r(alpha) (symmetric: it bounds both D_alpha(Q||Q') and D_alpha(Q'||Q));
K ~ xi with pgf G, m = E[K]. The tuned mechanism A (best of K runs) is (alpha, r_A(alpha))-RDP with:

* TNB(eta, nu), [PS22] Theorem 2 (every eta > -1):
      r_A(alpha) = r(alpha) + (1+eta) min_{alpha_hat >= 1} [ (1 - 1/alpha_hat) r(alpha_hat)
                   + log(1/nu)/alpha_hat ] + log(m)/(alpha - 1);
  alpha_hat does not interact with alpha, so the min is taken once over the same order grid plus
  alpha_hat = 1 (where the bracket is log(1/nu)).
* Poisson(m), [PS22] Theorem 6: with eps_hat = log(alpha/(alpha-1)) (so e^eps_hat = 1 + 1/(alpha-1)),
      r_A(alpha) = r(alpha) + m delta_hat + log(m)/(alpha - 1),  delta_hat = delta_Q(eps_hat).
  delta_hat comes from the base's privacy profile when the panel has one (exact Gaussian, exact
  finite, dp_accounting PLD for DP-SGD) and otherwise from the RDP curve itself (the choice of
  dp_accounting's RepeatAndSelectDpEvent); `poisson_rdp(..., delta_hat=None)` reproduces the latter.
* Any other law, [PS22] Lemma 7:
      r_A(alpha) = r(alpha) + 1/(alpha-1) sup log( G'(q)^alpha G'(q')^(1-alpha) ),
  the sup over the probabilities (q, q') of one post-processing of (Q, Q'). We bound it two ways
  and keep the smaller:
  (a) over the exact post-processing region of the base's privacy profile (the same region as the
      Theorem 4.1 recipe in `profile.py`, cell-by-cell rigorous);
  (b) for finite laws, by joint convexity of (x, y) -> x^alpha y^(1-alpha) and
      q^alpha q'^(1-alpha) <= exp((alpha-1) D_alpha(Bern q || Bern q')) <= exp((alpha-1) r(alpha)):
      G'(q)^alpha G'(q')^(1-alpha) <= G'(exp((alpha-1) r(alpha)))  -- for a point mass k this is
      PS22's k r(alpha) + log(k)/(alpha-1) (Appendix, "Point Mass").
* Pure DP, [PS22] Corollary 3: Q eps-DP => A is ((2+eta) eps)-DP for TNB (eta = 1: Liu & Talwar).

Monotonicity of RDP in alpha is applied to every output curve (r_A(alpha_i) <- min over
alpha_j >= alpha_i), as dp_accounting does. Conversion to (eps, delta): `rdp.rdp_to_epsilon` over
the orders given (the panel uses `rdp.ORDERS`).
"""

from __future__ import annotations

import math

import numpy as np

from auditsel.accounting.profile import region_sup
from auditsel.accounting.rdp import monotone_envelope, rdp_to_delta, rdp_to_epsilon
from auditsel.rounds import Binomial, FinitePmf, Poisson, RoundsLaw, TruncatedNegativeBinomial

__all__ = [
    "tnb_rdp",
    "poisson_rdp",
    "lemma7_rdp",
    "generic_rdp_curve",
    "generic_epsilon",
    "pure_dp_generic_epsilon",
]


def tnb_rdp(orders, rdp, eta: float, nu: float, mean: float | None = None) -> np.ndarray:
    """[PS22] Theorem 2 on the grid `orders` (alpha_hat optimised over the same grid and 1)."""
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    if mean is None:
        mean = TruncatedNegativeBinomial(eta, nu).mean
    log_inv_nu = -math.log(nu)
    with np.errstate(invalid="ignore"):
        bracket = (1 - 1 / orders) * rdp + log_inv_nu / orders
    bracket = np.where(np.isfinite(bracket), bracket, np.inf)
    c = (1 + eta) * min(float(np.min(bracket)), log_inv_nu)
    with np.errstate(divide="ignore"):
        out = np.where(orders > 1, rdp + c + math.log(mean) / (orders - 1), np.inf)
    return monotone_envelope(orders, out)


def poisson_rdp(orders, rdp, mean: float, delta_hat=None) -> np.ndarray:
    """[PS22] Theorem 6; delta_hat(eps) from a profile, or from the RDP curve when None.

    The profile is asked once, for the eps_hat of every order together (a PLD query is
    vectorised: one call instead of one per order)."""
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    out = np.full(orders.shape, np.inf)
    use = np.nonzero((orders > 1) & np.isfinite(rdp))[0]
    eps_hat = np.array([math.log1p(1 / (orders[i] - 1)) for i in use])
    if delta_hat is None:
        d = np.array([rdp_to_delta(orders, rdp, e) for e in eps_hat], dtype=float)
    else:
        d = np.asarray(delta_hat(eps_hat), dtype=float).reshape(-1) if len(use) else np.empty(0)
    for i, di in zip(use, d):
        out[i] = rdp[i] + mean * float(di) + math.log(mean) / (orders[i] - 1)
    return monotone_envelope(orders, out)


def _bernoulli_term(law: RoundsLaw, orders, rdp) -> np.ndarray:
    """(b) of the module docstring: log G'(exp((alpha-1) r(alpha))) / (alpha-1), finite laws."""
    if not isinstance(law, (FinitePmf, Binomial)):
        return np.full(np.shape(orders), np.inf)
    log_z = (orders - 1) * rdp
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.exp(np.minimum(log_z, 700.0))
        val = law.log_pgf_derivative(z, 1.0 - z, log_z=log_z)
    return np.asarray(val, dtype=float) / (orders - 1)


def lemma7_rdp(orders, rdp, law: RoundsLaw, profile=None) -> np.ndarray:
    """[PS22] Lemma 7 with the sup bounded over the profile's region and/or by (b)."""
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    term = _bernoulli_term(law, orders, rdp)
    if profile is not None:
        # rigorous at any resolution; refined until the RDP value is within 1e-3 (alpha >= 2)
        sup = region_sup(
            profile,
            law,
            a=orders,
            b=orders - 1,
            tol=1e-3 * np.maximum(orders - 1, 1.0),
            max_rounds=6,
        )
        term = np.minimum(term, sup / (orders - 1))
    out = np.where(orders > 1, rdp + term, np.inf)
    return monotone_envelope(orders, out)


def generic_rdp_curve(orders, rdp, law: RoundsLaw, profile=None) -> np.ndarray:
    """The PS22 RDP curve of A for this law: Theorem 2 (TNB), Theorem 6 (Poisson), Lemma 7."""
    if isinstance(law, TruncatedNegativeBinomial):
        return tnb_rdp(orders, rdp, law.eta, law.nu, law.mean)
    if isinstance(law, Poisson):
        delta_hat = None if profile is None else profile.delta
        return poisson_rdp(orders, rdp, law.mean, delta_hat)
    return lemma7_rdp(orders, rdp, law, profile)


def generic_epsilon(orders, rdp, law: RoundsLaw, delta, profile=None):
    """PS22 bound converted to (eps, delta) (Canonne-Kamath-Steinke over `orders`): a float for
    one delta, an array for an array of deltas (the RDP curve of A is computed once)."""
    return rdp_to_epsilon(orders, generic_rdp_curve(orders, rdp, law, profile), delta)


def pure_dp_generic_epsilon(eps: float, law: RoundsLaw) -> float:
    """[PS22] Corollary 3: (2 + eta) eps for TNB; inf for laws it does not cover."""
    if isinstance(law, TruncatedNegativeBinomial):
        return (2 + law.eta) * eps
    return math.inf
