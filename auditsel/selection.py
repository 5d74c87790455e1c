"""The tuning protocol H ([XWW24] Algorithm 2) and the exact law of its released winner.

H draws K ~ xi, runs the base K times and releases the best-scored output; K = 0 (Poisson,
binomial, pmf laws) releases a fixed, data-independent output, which we place at -inf.

Exact winner laws, with G the pgf of xi ([XWW24] Theorem 2 / eq. 7, [PS22] Lemma 7 proof):

* finite-output base with cdf C in score order:  A(y) = G(C(<=y)) - G(C(<y));
* Gaussian base (the reduced game of [XWW24] Figure 5): cdf G(F(x - s)) and density
  G'(F(x - s)) phi(x - s), with s = 0 on X and s = mu on X' (F, phi: standard normal).

Sampling the winner costs O(1) per trial whatever K is: the max of k iid draws with cdf F has
cdf F^k, so it is F^-1(U^(1/k)) with U uniform; we evaluate 1 - U^(1/k) = -expm1(log(U)/k)
so that k up to 10^12 keeps full precision in the upper tail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import log_ndtr, ndtri

from auditsel.mechanisms import FiniteOutputBase, GaussianBase
from auditsel.numerics import bisect
from auditsel.roles import MechanismPair
from auditsel.rounds import RoundsLaw

__all__ = [
    "GaussianWinner",
    "FiniteWinner",
    "max_uniform_complement",
    "winner_law",
    "log_difference",
]

LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


def max_uniform_complement(k: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """1 - max(U_1..U_k) for k iid uniforms, drawn in O(1) each (0 where... k = 0 gives 1)."""
    u = rng.random(len(k))
    with np.errstate(divide="ignore"):
        return -np.expm1(np.log(u) / np.maximum(k, 1)) * (k > 0) + (k == 0)


@dataclass(frozen=True)
class GaussianWinner:
    """Winner of H over the Gaussian base: the reduced tuning game of [XWW24] Sec. 5."""

    #: joblib hint: the release is vectorised numpy, which frees the GIL, so threads run the
    #: chunks in parallel without the start-up of worker processes (`auditsel.games.engine.run_game`)
    parallel_prefer: ClassVar[str] = "threads"

    base: GaussianBase
    law: RoundsLaw

    @property
    def mu(self) -> float:
        return self.base.mu

    @property
    def atom(self) -> float:
        """Mass of the fixed output (K = 0), the same on X and X'."""
        return self.law.p_zero

    def log_density(self, x, member: int):
        """log of G'(F(x - s)) phi(x - s) (continuous part), s = member * mu."""
        t = np.asarray(x, dtype=float) - member * self.mu
        log_z, log_w = log_ndtr(t), log_ndtr(-t)
        return (
            self.law.log_pgf_derivative(np.exp(log_z), np.exp(log_w), log_z=log_z)
            - 0.5 * t * t
            - LOG_SQRT_2PI
        )

    def log_likelihood_ratio(self, x):
        """log p_X'(x) / p_X(x): the Neyman-Pearson statistic (0 at the fixed output)."""
        x = np.asarray(x, dtype=float)
        finite = np.isfinite(x)
        xf = np.where(finite, x, 0.0)
        return np.where(finite, self.log_density(xf, 1) - self.log_density(xf, 0), 0.0)

    def mass(self, a, b, member: int):
        """P[a < winner <= b] on the real line (the fixed output excluded), accurate in the tails."""
        s = member * self.mu
        u = np.asarray(a, dtype=float) - s
        v = np.asarray(b, dtype=float) - s
        law = self.law
        upper = u > 0  # both ends in the upper half: use 1 - G(1 - w) with w = 1 - F
        with np.errstate(invalid="ignore"):
            via_tail = law.pgf_complement(_sf(u)) - law.pgf_complement(_sf(v))
            via_cdf = law.pgf_above_zero(_cdf(v)) - law.pgf_above_zero(_cdf(u))
        return np.maximum(np.where(upper, via_tail, via_cdf), 0.0)

    def log_mass(self, a, b, member: int):
        """log P[a < winner <= b] (the fixed output excluded), from the laws' log-space pgf
        forms: full relative precision for masses far below the smallest double."""
        s = member * self.mu
        u = np.asarray(a, dtype=float) - s
        v = np.asarray(b, dtype=float) - s
        law = self.law
        upper = u > 0  # both ends in the upper half: 1 - G(1 - w), w = 1 - F
        with np.errstate(invalid="ignore"):
            hi = np.where(
                upper, law.log_pgf_complement(log_ndtr(-u)), law.log_pgf_above_zero(log_ndtr(v))
            )
            lo = np.where(
                upper, law.log_pgf_complement(log_ndtr(-v)), law.log_pgf_above_zero(log_ndtr(u))
            )
        return log_difference(hi, lo)

    def cdf(self, x, member: int):
        """P[winner <= x], the fixed output (at -inf) included."""
        return self.law.pgf(_cdf(np.asarray(x, dtype=float) - member * self.mu))

    def release(self, member: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Run H for each coin in `member`: K ~ xi, the max of K draws of N(member * mu, 1)."""
        k = self.law.sample(len(member), rng)
        w = max_uniform_complement(k, rng)
        with np.errstate(divide="ignore"):
            x = -ndtri(w)
        return np.where(k > 0, x + self.base.shift(member), -np.inf)

    def quantile_range(self, tail: float = 1e-6) -> tuple[float, float]:
        """[lo, hi]: the tail-quantile of the winner on X and the (1 - tail)-quantile on X'.

        Data-independent (a function of the spec only), so a threshold grid over it keeps the
        Bonferroni rule valid.
        """
        lower = lambda x: float(self.cdf(x, 0)) - tail
        upper = lambda x: float(self.mass(x, np.inf, 1)) - tail
        a, b = -40.0, self.mu + 40.0
        lo = bisect(lower, a, b) if lower(a) < 0 < lower(b) else a
        hi = bisect(upper, a, b) if upper(a) > 0 > upper(b) else b
        return float(lo), float(hi)


def log_difference(hi, lo):
    """log(e^hi - e^lo), -inf where lo >= hi (vectorised)."""
    hi, lo = np.broadcast_arrays(np.asarray(hi, dtype=float), np.asarray(lo, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = hi + np.log(-np.expm1(np.minimum(lo - hi, 0.0)))
    return np.where((lo < hi) & np.isfinite(hi), out, np.where(np.isposinf(hi), np.inf, -np.inf))


def _cdf(t):
    return np.exp(log_ndtr(t))


def _sf(t):
    return np.exp(log_ndtr(-t))


@dataclass(frozen=True)
class FiniteWinner:
    """Winner of H over a finite-output base ([XWW24] Theorem 2, eq. 7)."""

    #: joblib hint: the release is vectorised numpy, which frees the GIL, so threads run the
    #: chunks in parallel without the start-up of worker processes (`auditsel.games.engine.run_game`)
    parallel_prefer: ClassVar[str] = "threads"

    base: FiniteOutputBase
    law: RoundsLaw

    @property
    def atom(self) -> float:
        return self.law.p_zero

    def pmf(self, member: int) -> np.ndarray:
        """A(y) = G(C(<=y)) - G(C(<y)) for y = 0..m-1 (the K = 0 mass excluded)."""
        probs = self.base.law(member)
        below = np.concatenate([[0.0], np.cumsum(probs)[:-1]])  # C(<y)
        at_or_above = np.cumsum(probs[::-1])[::-1]  # 1 - C(<y)
        above = np.concatenate([at_or_above[1:], [0.0]])  # 1 - C(<=y)
        via_cdf = self.law.pgf_above_zero(below + probs) - self.law.pgf_above_zero(below)
        via_tail = self.law.pgf_complement(at_or_above) - self.law.pgf_complement(above)
        return np.maximum(np.where(below > 0.5, via_tail, via_cdf), 0.0)

    def log_likelihood_ratio(self, y):
        y = np.asarray(y)
        with np.errstate(divide="ignore"):
            llr = np.log(self.pmf(1)) - np.log(self.pmf(0))
        return np.where(y >= 0, llr[np.clip(y, 0, None).astype(int)], 0.0)

    def release(self, member: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Run H for each coin; release the index of the best of K draws (-1 for the fixed output when K = 0)."""
        k = self.law.sample(len(member), rng)
        w = max_uniform_complement(k, rng)  # max of k uniforms is 1 - w
        tails = [np.cumsum(self.base.law(b)[::-1])[::-1] for b in (0, 1)]  # P[out >= y]
        # the max is y where tail(y+1) <= w < tail(y), i.e. the last y with tail(y) > w
        out = np.empty(len(member), dtype=np.int64)
        for b in (0, 1):
            sel = member == b
            t = tails[b][::-1]  # increasing: P[out >= m-1], ..., P[out >= 0] = 1
            out[sel] = len(t) - 1 - np.searchsorted(t, w[sel], side="right")
        return np.where(k > 0, np.clip(out, 0, None), -1)


def winner_law(base: MechanismPair, law: RoundsLaw) -> GaussianWinner | FiniteWinner:
    """The exact law of H's released winner for a base with an exact law."""
    if isinstance(base, GaussianBase):
        return GaussianWinner(base, law)
    if isinstance(base, FiniteOutputBase):
        return FiniteWinner(base, law)
    raise TypeError(f"no exact winner law for base {type(base).__name__}")
