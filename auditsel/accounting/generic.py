"""Generic RDP bounds for private selection (Papernot & Steinke 2022, [PS22], "PS22").

Base Q with RDP curve r(alpha) (symmetric: it bounds both D_alpha(Q||Q') and D_alpha(Q'||Q));
K ~ xi with pgf G, m = E[K]. The tuned mechanism A (best of K runs) is (alpha, r_A(alpha))-RDP with:

* TNB(eta, nu), [PS22] Theorem 2 (every eta > -1)::

      r_A(alpha) = r(alpha) + (1+eta) min_{alpha_hat >= 1} [ (1 - 1/alpha_hat) r(alpha_hat)
                   + log(1/nu)/alpha_hat ] + log(m)/(alpha - 1);

  alpha_hat does not interact with alpha, so the min is taken once over the same order grid plus
  alpha_hat = 1 (where the bracket is log(1/nu)).

* Poisson(m), [PS22] Theorem 6 sharpened (below): with eps_hat = log(alpha/(alpha-1)), ::

      r_A(alpha) = 1/(alpha-1) log( 1 + m exp((alpha-1) m delta_hat) (exp((alpha-1) r(alpha)) - 1) ),

  delta_hat = delta_Q(eps_hat), the smaller of the base's privacy profile (exact Gaussian, exact
  finite, dp_accounting's PLD for DP-SGD) and the value implied by the RDP curve itself (the
  choice of dp_accounting's RepeatAndSelectDpEvent; `poisson_rdp(..., delta_hat=None)` uses only
  the latter). It is never above Theorem 6's  r(alpha) + m delta_hat + log(m)/(alpha-1)  when
  m >= 1, is >= 0, and holds for every m > 0 (Theorem 6 as stated goes negative for m < 1).

* Any other law, [PS22] Lemma 7::

      r_A(alpha) = r(alpha) + 1/(alpha-1) sup log( G'(q)^alpha G'(q')^(1-alpha) ),

  the sup over the probabilities (q, q') of one post-processing of (Q, Q'). We bound it two ways
  and keep the smaller:

  (a) over the exact post-processing region of the base's privacy profile (the same region as the
      Theorem 4.1 recipe in `profile.py`, cell-by-cell rigorous);

  (b) for finite laws, by joint convexity of (x, y) -> x^alpha y^(1-alpha) and
      q^alpha q'^(1-alpha) <= exp((alpha-1) D_alpha(Bern q || Bern q')) <= exp((alpha-1) r(alpha)):
      G'(q)^alpha G'(q')^(1-alpha) <= G'(exp((alpha-1) r(alpha)))  -- for a point mass k this is
      PS22's k r(alpha) + log(k)/(alpha-1) (Appendix, "Point Mass").

  For a law with P[K = 0] = G(0) > 0 the fixed output adds G(0) to the Renyi sum (below)::

      r_A(alpha) = 1/(alpha-1) log( exp((alpha-1)(r(alpha) + term)) + G(0) ).

* Pure DP, [PS22] Corollary 3: Q eps-DP => A is ((2+eta) eps)-DP for TNB (eta = 1: Liu & Talwar);
  TNB with nu = 1 is K = 1, where A = Q is eps-DP.

Laws with mass at K = 0 (the proofs). [PS22] prove Lemma 7 assuming P[K = 0] = 0 "essentially
without loss of generality"; it is not: with Q = Q' (r = 0) the lemma gives log(G'(1))/(alpha-1),
negative when E[K] < 1, for a divergence that is 0. Let Y be finite (the general case by finite
partitions, as in [PS22]) and write S = sum_y A(y)^alpha A'(y)^(1-alpha), so that
exp((alpha-1) D_alpha(A || A')) = S + G(0): the fixed output has mass G(0) on both sides. For
y in Y, A(y) = G(Q(<=y)) - G(Q(<y)) (the K = 0 terms cancel), so the proof of Lemma 7 bounds S
verbatim, by exp((alpha-1)(D_alpha(Q || Q') + term)); adding G(0) gives the form above.
For Poisson(m) we bound S more tightly. Couple the two uniform variables of Lemma 7's proof and
parametrise by u in [0, 1], the Q-mass above the point, with L(u) = dQ'/dQ there and a'(u) the
Q'-mass above it. Then, after the lemma's Jensen step, with G'(z) = m exp(m (z - 1)), ::

      S <= m int_0^1 L(u)^(1-alpha) exp(phi(u)) du,   phi(u) = m ((alpha-1) a'(u) - alpha u).

The event "above the point" is a post-processing, so a'(u) <= e^eps_hat u + delta_hat, hence
phi <= B := (alpha-1) m delta_hat, and phi(0) = 0, phi(1) = -m. With C = int L^(1-alpha) du =
exp((alpha-1) D_alpha(Q || Q')) and the tangent bound L^(1-alpha) >= alpha - (alpha-1) L =
-phi_ac'(u)/m (phi_ac: the absolutely continuous part of phi), since 1 - e^(phi-B) >= 0, ::

      int L^(1-alpha) (1 - e^(phi-B)) du >= -(1/m) int phi_ac' h(phi) du,   h(s) = 1 - e^(s-B),
      = (1/m) (H(phi(0)) - H(phi(1)) + sum of the jumps of H(phi)),   H(s) = s - e^(s-B),

and the jumps (Q'-mass where Q has none) only raise phi, where H is non-decreasing (s <= B). So
m int L^(1-alpha) e^phi du <= m e^B C - (m e^B + e^-m - 1), and S + G(0) = S + e^-m <=
1 + m e^B (C - 1): the form above, with C <= exp((alpha-1) r(alpha)). It is >= 0 since C >= 1,
and 1 + m e^B (C - 1) <= m e^B C exactly when m e^B >= 1, so it also proves Theorem 6 (K = 0
included) for m >= 1.

Monotonicity of RDP in alpha is applied to every output curve (r_A(alpha_i) <- min over
alpha_j >= alpha_i), as dp_accounting does. Conversion to (eps, delta): `rdp.rdp_to_epsilon` over
the orders given (the panel uses `rdp.ORDERS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import overload

import numpy as np
from numpy.typing import ArrayLike

from auditsel.accounting.profile import BaseProfile, region_sup
from auditsel.accounting.rdp import monotone_envelope, rdp_to_delta, rdp_to_epsilon
from auditsel.numerics import FloatArray
from auditsel.rounds import Binomial, FinitePmf, Poisson, RoundsLaw, TruncatedNegativeBinomial


def tnb_rdp(
    orders: ArrayLike, rdp: ArrayLike, eta: float, nu: float, mean: float | None = None
) -> FloatArray:
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


def poisson_rdp(
    orders: ArrayLike,
    rdp: ArrayLike,
    mean: float,
    delta_hat: Callable[[FloatArray], ArrayLike] | None = None,
) -> FloatArray:
    """[PS22] Theorem 6 sharpened (the module docstring), valid for every mean > 0.

    delta_hat(eps_hat) is the smaller of `delta_hat` (a privacy profile, asked once for the
    eps_hat of every order together: a PLD query is vectorised) and the delta implied by the
    RDP curve itself (`rdp_to_delta`, dp_accounting's choice); with delta_hat=None only the
    latter."""
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    out = np.full(orders.shape, np.inf)
    use = np.nonzero((orders > 1) & np.isfinite(rdp))[0]
    if not len(use):
        return out
    a = orders[use]
    eps_hat = np.log1p(1 / (a - 1))
    d = rdp_to_delta(orders, rdp, eps_hat)
    if delta_hat is not None:
        d = np.minimum(d, np.asarray(delta_hat(eps_hat), dtype=float).reshape(-1))
    x = (a - 1) * np.maximum(rdp[use], 0.0)  # (alpha-1) r >= 0: C = e^x >= 1
    with np.errstate(divide="ignore"):
        log_c_minus_1 = np.where(x > 0, x + np.log(-np.expm1(-np.maximum(x, 1e-300))), -np.inf)
    out[use] = np.logaddexp(0.0, math.log(mean) + (a - 1) * mean * d + log_c_minus_1) / (a - 1)
    return monotone_envelope(orders, out)


def _with_atom(orders: FloatArray, rdp_a: FloatArray, p_zero: float) -> FloatArray:
    """1/(alpha-1) log(exp((alpha-1) r_A) + G(0)): the fixed output of K = 0 counted."""
    if p_zero <= 0:
        return rdp_a
    with np.errstate(invalid="ignore"):
        out = np.logaddexp((orders - 1) * rdp_a, math.log(p_zero)) / (orders - 1)
    return np.where(np.isfinite(rdp_a), out, rdp_a)


def _bernoulli_term(law: RoundsLaw, orders: FloatArray, rdp: FloatArray) -> FloatArray:
    """(b) of the module docstring: log G'(exp((alpha-1) r(alpha))) / (alpha-1), finite laws."""
    if not isinstance(law, (FinitePmf, Binomial)):
        return np.full(np.shape(orders), np.inf)
    log_z = (orders - 1) * rdp
    # z = e^((alpha-1) r) may overflow: the laws read log z where z > 1 (never a clipped z,
    # which made the term saturate at high orders and fall below the truth)
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.exp(log_z)
        val = law.log_pgf_derivative(z, 1.0 - z, log_z=log_z)
    return np.asarray(val, dtype=float) / (orders - 1)


def lemma7_rdp(
    orders: ArrayLike, rdp: ArrayLike, law: RoundsLaw, profile: BaseProfile | None = None
) -> FloatArray:
    """[PS22] Lemma 7 with the sup bounded over the profile's region and/or by (b), and the
    fixed output of K = 0 counted (the module docstring)."""
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
    return monotone_envelope(orders, _with_atom(orders, out, law.p_zero))


def generic_rdp_curve(
    orders: ArrayLike, rdp: ArrayLike, law: RoundsLaw, profile: BaseProfile | None = None
) -> FloatArray:
    """The PS22 RDP curve of A for this law: Theorem 2 (TNB), Theorem 6 (Poisson), Lemma 7."""
    if isinstance(law, TruncatedNegativeBinomial):
        return tnb_rdp(orders, rdp, law.eta, law.nu, law.mean)
    if isinstance(law, Poisson):
        delta_hat = None if profile is None else profile.delta
        return poisson_rdp(orders, rdp, law.mean, delta_hat)
    return lemma7_rdp(orders, rdp, law, profile)


@overload
def generic_epsilon(
    orders: ArrayLike,
    rdp: ArrayLike,
    law: RoundsLaw,
    delta: float,
    profile: BaseProfile | None = None,
) -> float: ...
@overload
def generic_epsilon(
    orders: ArrayLike,
    rdp: ArrayLike,
    law: RoundsLaw,
    delta: np.ndarray | Sequence[float],
    profile: BaseProfile | None = None,
) -> FloatArray: ...
def generic_epsilon(
    orders: ArrayLike,
    rdp: ArrayLike,
    law: RoundsLaw,
    delta: ArrayLike,
    profile: BaseProfile | None = None,
) -> FloatArray | float:
    """PS22 bound converted to (eps, delta) (Canonne-Kamath-Steinke over `orders`): a float for
    one delta, an array for an array of deltas (the RDP curve of A is computed once)."""
    return rdp_to_epsilon(orders, generic_rdp_curve(orders, rdp, law, profile), delta)


def pure_dp_generic_epsilon(eps: float, law: RoundsLaw) -> float:
    """[PS22] Corollary 3: (2 + eta) eps for TNB (eps itself for nu = 1, where K = 1); inf for
    laws it does not cover."""
    if isinstance(law, TruncatedNegativeBinomial):
        return eps if law.nu == 1 else (2 + law.eta) * eps
    return math.inf
