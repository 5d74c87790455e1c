"""The improved bound of [XWW24] (Algorithm 3): exact Renyi divergence of the reduced game.

After the reduction of [XWW24] Sec. 5, one DP-SGD run is one draw from N(0,1) (on X) or N(mu,1)
(on X'), and tuning releases the best of K ~ xi draws. The winner's densities (Algorithm 3,
lines 3-4; `selection.GaussianWinner`) are ::

    N_xi(x)  = E_k[ k F(x)^(k-1) f(x) ]      = G'(F(x)) f(x),
    N'_xi(x) = E_k[ k F(x-mu)^(k-1) f(x-mu) ] = G'(F(x-mu)) f(x-mu),

plus, for laws with P[K=0] > 0, a fixed output of mass G(0) on both sides. Line 5::

    gamma(alpha) = max{ D_alpha(N_xi || N'_xi), D_alpha(N'_xi || N_xi) },
    D_alpha(P || Q) = 1/(alpha-1) log( integral p^alpha q^(1-alpha) dx + G(0) ),

computed numerically: log-densities in log space (log_ndtr, the law's log G'), the integral by
the trapezoid rule with step `STEP` over a window around the integrand's mass, for every alpha
of `rdp.GRID` with alpha <= 1 + 20/mu (larger orders never give the minimum of the conversion
at any delta >= 1e-40; leaving orders out only loosens the bound). Conversion ([XWW24]
Appendix A.2, = Canonne et al.)::

    eps = gamma(alpha) + log((alpha-1)/alpha) - (log(delta) + log(alpha))/(alpha-1), minimised over alpha,

first over the grid, then refined continuously (golden section in log(alpha - 1)).

`improved_epsilon(mu, law, delta)` with mu from eq. 19 gives eps_UO, with mu_GDP ([XWW24]
Appendix A.4) eps_UG. Rigour: for a Gaussian base the divergence is that of the true pair
(up to quadrature error, far below the digits reported); for DP-SGD it inherits the status of
mu (exact for tau = 1 via eq. 19, heuristic for tau < 1 and for mu_GDP).

For a finite-output base the same recipe needs no reduction: `finite_improved_epsilon` takes the
exact Renyi divergence of the winner laws A, A' ([XWW24] Theorem 2 / eq. 7) and converts it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from auditsel.accounting.rdp import (
    GRID,
    ORDERS,
    check_deltas,
    finite_rdp,
    rdp_to_epsilon,
    rdp_to_epsilon_continuous,
)
from auditsel.mechanisms import FiniteOutputBase, GaussianBase
from auditsel.numerics import FloatArray
from auditsel.rounds import RoundsLaw
from auditsel.selection import FiniteWinner, GaussianWinner

#: quadrature step of the Renyi integrals
STEP = 0.01
_PAD = 40.0
#: orders whose Renyi integrals are summed in one array operation (bounded memory: about
#: 12,000 grid points each)
ORDER_BLOCK = 32


def _orders_for(mu: float) -> FloatArray:
    return GRID[GRID <= 1.0 + 20.0 / mu]


class _Integrand:
    """Log-densities of the reduced game on one grid covering every order's window."""

    def __init__(self, mu: float, law: RoundsLaw, alpha_max: float) -> None:
        self.mu = mu
        self.winner = GaussianWinner(GaussianBase(mu), law)
        lo = min(0.0, (1.0 - alpha_max) * mu) - _PAD
        hi = max(mu, alpha_max * mu) + _PAD
        self.x = np.arange(lo, hi + STEP, STEP)
        with np.errstate(all="ignore"):
            self.lp = self.winner.log_density(self.x, 0)
            self.lq = self.winner.log_density(self.x, 1)
        self.log_atom = math.log(self.winner.atom) if self.winner.atom > 0 else -math.inf
        self.finite = bool(np.all(np.isfinite(self.lp)) and np.all(np.isfinite(self.lq)))

    def divergence(self, alpha: ArrayLike, direction: int) -> FloatArray:
        """D_alpha(N_xi || N'_xi) (direction 0) or D_alpha(N'_xi || N_xi) (direction 1) at
        every order of `alpha` (any shape), ORDER_BLOCK orders to one array operation."""
        la, lb = (self.lp, self.lq) if direction == 0 else (self.lq, self.lp)
        a_all = np.asarray(alpha, dtype=float)
        flat = a_all.ravel()
        out = np.empty(flat.shape)
        mu, x0, n = self.mu, self.x[0], len(self.x)
        # each order's window: the integrand's mass lies between (1-a) mu and a mu (Gaussian
        # tails), plus the bulk; the points of the grid outside it are left out of its sum
        lo = np.minimum(0.0, (1.0 - flat) * mu) - _PAD
        hi = np.maximum(mu, flat * mu) + _PAD
        start = np.maximum(((lo - x0) / STEP).astype(np.int64), 0)
        stop = np.minimum(((hi - x0) / STEP).astype(np.int64) + 1, n)
        for b in range(0, len(flat), ORDER_BLOCK):
            a = flat[b : b + ORDER_BLOCK, None]
            first, last = (
                int(start[b : b + ORDER_BLOCK].min()),
                int(stop[b : b + ORDER_BLOCK].max()),
            )
            with np.errstate(invalid="ignore"):
                terms = a * la[None, first:last]
                terms += (1.0 - a) * lb[None, first:last]
            for row, (s0, s1) in enumerate(
                zip(start[b : b + ORDER_BLOCK] - first, stop[b : b + ORDER_BLOCK] - first)
            ):  # outside the order's window: left out (exp(-inf) = 0 in the sum below)
                terms[row, :s0] = -np.inf
                terms[row, s1:] = -np.inf
            if not self.finite:  # -inf log-densities: 0 * -inf and inf - inf terms are 0
                np.copyto(terms, -np.inf, where=np.isnan(terms))
            # log of the sum, stable (a row with no finite term sums to 0: log 0 = -inf)
            top = np.max(terms, axis=1, keepdims=True)
            top = np.where(np.isfinite(top), top, 0.0)
            terms -= top
            np.exp(terms, out=terms)
            with np.errstate(divide="ignore"):
                log_int = np.log(np.sum(terms, axis=1)) + top[:, 0] + math.log(STEP)
            out[b : b + ORDER_BLOCK] = np.logaddexp(log_int, self.log_atom) / (a[:, 0] - 1.0)
        return out.reshape(a_all.shape)

    def gamma(self, alpha: ArrayLike) -> FloatArray:
        """gamma(alpha): the larger of the two directions' divergences (any shape of orders)."""
        return np.maximum(self.divergence(alpha, 0), self.divergence(alpha, 1))


def winner_renyi(mu: float, law: RoundsLaw, orders: ArrayLike) -> FloatArray:
    """gamma(alpha) of Algorithm 3 line 5 at each order."""
    orders = np.asarray(orders, dtype=float)
    return _Integrand(mu, law, float(np.max(orders))).gamma(orders)


def improved_epsilon(mu: float, law: RoundsLaw, delta: ArrayLike) -> FloatArray | float:
    """Algorithm 3 converted to (eps, delta): eps_UO (mu of eq. 19) or eps_UG (mu_GDP). A float
    for one delta, an array for an array of deltas (the Renyi curve gamma is computed once on
    the grid; each delta refines its own best order, all deltas' searches evaluated together).
    inf at delta = 0; outside [0, 1) a ConfigError."""
    deltas = check_deltas(delta)
    out = np.full(deltas.shape, math.inf)
    pos = deltas > 0
    orders = _orders_for(mu)  # empty for a huge mu: no order of the grid applies (inf)
    if np.any(pos) and orders.size:
        integ = _Integrand(mu, law, float(np.max(orders)))
        gamma = integ.gamma(orders)
        d = deltas[pos]
        grid_eps = np.asarray(rdp_to_epsilon(orders, gamma, d))
        # continuous refinement around each delta's best grid order (inside the covered range)
        conv = (
            gamma[None, :]
            + np.log1p(-1 / orders)
            - (np.log(d)[:, None] + np.log(orders)) / (orders - 1)
        )
        i = np.argmin(conv, axis=1)
        lo = orders[np.maximum(i - 1, 0)] - 1
        hi = orders[np.minimum(i + 1, len(orders) - 1)] - 1
        grids = 1 + np.geomspace(lo, hi, 9, axis=-1)
        refined = np.asarray(rdp_to_epsilon_continuous(integ.gamma, d, grid=grids))
        out[pos] = np.minimum(grid_eps, refined)
    return out if np.ndim(delta) else float(out[0])


def finite_improved_epsilon(
    base: FiniteOutputBase, law: RoundsLaw, delta: ArrayLike, orders: ArrayLike = ORDERS
) -> FloatArray | float:
    """The exact Renyi divergence of the finite winner laws, converted (Algorithm 3's recipe);
    a float for one delta, an array for an array of deltas."""
    w = FiniteWinner(base, law)
    a, b = np.append(w.pmf(0), w.atom), np.append(w.pmf(1), w.atom)
    return rdp_to_epsilon(orders, finite_rdp(a, b, orders), delta)
