"""Number-of-runs laws xi: the random number K of base runs in private tuning.

Every law is plain, frozen data with the scipy.stats-like surface the bounds need::

    pmf(k)                 P[K = k]
    pgf(z)                 G(z) = E[z^K]                 ([PS22] Lemma 7, [KRW24] Sec. 2)
    pgf_above_zero(z)      G(z) - G(0) = E[z^K; K >= 1], without the cancellation of the K = 0
                           mass (the lower tails of the winner of a law with mass at 0)
    log_pgf_above_zero(lz) log(G(z) - G(0)) from log z, and
    log_pgf_complement(lw) log(1 - G(1 - w)) from log w: exact in log space, so the winner's
                           tail masses keep their digits far below the smallest double (the
                           exact curve at delta down to 1e-300 and below)
    pgf_complement(w)      1 - G(1 - w), accurate for tiny w (upper tails of the winner)
    pgf_derivative(z)      G'(z) = E[K z^(K-1)]         (G'(1) = E[K])
    log_pgf_derivative     log G'(z), with w = 1 - z (and optionally log z) passed
                           separately so that it stays accurate when z is within 1e-300
                           of 1 or of 0
    mean                   E[K]
    sample(size, rng)      vectorised, seeded draws of K
    pgf_complement_inverse(u)  the w in (0, 1] with 1 - G(1 - w) = u, for u in (0, 1 - G(0)]:
                           the winner's tail from one uniform (`selection.winner_tail`); closed
                           forms for TNB (logarithmic and geometric included), Poisson,
                           binomial and point laws, safeguarded Newton in log space for a pmf

Laws ([XWW24] Sec. 2 and eq. 21, [PS22] Sec. 3, [KRW24] Sec. 5):

* TNB(eta, nu), eta in (-1, inf), nu in (0, 1], support {1, 2, ...} (nu = 1: K = 1, the limit
  nu -> 1 of every formula below, as dp_accounting's gamma in (0, 1])::

      P[K=k] = (1-nu)^k / (nu^-eta - 1) * prod_{l<k} (l+eta)/(l+1)      (eta != 0)
      P[K=k] = (1-nu)^k / (k log(1/nu))                                  (eta == 0, logarithmic)
      G(z)  = ((1-(1-nu) z)^-eta - 1) / (nu^-eta - 1),  G(z) = log(1-(1-nu) z)/log(nu) at eta = 0
      G'(z) = (1-(1-nu) z)^(-eta-1) nu^(eta+1) E[K]
      E[K]  = eta (1-nu) / (nu (1 - nu^eta)),  (1/nu - 1)/log(1/nu) at eta = 0

  eta = 1 is the geometric law P[K=k] = nu (1-nu)^(k-1).

* Poisson(mean): G(z) = exp(mean (z - 1)); K = 0 releases a fixed, data-independent output.

* Binomial(n, p): G(z) = (1 - p + p z)^n (K = 0 as for Poisson).

* TwoPoint(L, s): P[K=1] = s, P[K=L] = 1 - s ([XWW24] eq. 21).

* Point(k): K = k always, G(z) = z^k.

* FinitePmf({k: P[K=k]}): any law on finitely many non-negative integers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammaln

from auditsel.errors import ConfigError, integer, number, require, shown
from auditsel.numerics import FloatArray, IntArray, logsumexp, newton_bracketed

# Parameter ranges where every law stays representable in double precision.
MIN_NU = 1e-15  # TNB: 1 - nu must keep nu's digits
MAX_ETA = 1e6  # TNB: E[K] ~ eta / nu
MAX_K = 2**53  # largest k (pmf key, point k, two_point L, binomial n) exact as a float
MAX_POISSON_MEAN = 1e15  # numpy's Poisson sampler refuses lam above ~9e18


class RoundsLaw:
    """Interface shared by every law of K (see the module docstring)."""

    kind: str = "abstract"

    def log_pmf(self, k: ArrayLike) -> FloatArray:
        raise NotImplementedError

    def pgf(self, z: ArrayLike) -> FloatArray:
        raise NotImplementedError

    def pgf_complement(self, w: ArrayLike) -> FloatArray:
        raise NotImplementedError

    def log_pgf_derivative(
        self, z: ArrayLike, w: ArrayLike | None = None, log_z: ArrayLike | None = None
    ) -> FloatArray:
        raise NotImplementedError

    if TYPE_CHECKING:  # E[K]: a property of each law (a field of Poisson, whose parameter it is)

        @property
        def mean(self) -> float: ...

    def sample(self, size: int, rng: np.random.Generator) -> IntArray:
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        raise NotImplementedError

    def pmf(self, k: ArrayLike) -> FloatArray:
        return np.exp(self.log_pmf(k))

    def pgf_derivative(self, z: ArrayLike, w: ArrayLike | None = None) -> FloatArray:
        return np.exp(self.log_pgf_derivative(z, w))

    def pgf_above_zero(self, z: ArrayLike) -> FloatArray:
        """G(z) - G(0): the laws with mass at K = 0 override it without the cancellation."""
        return self.pgf(z) - self.p_zero

    def log_pgf_above_zero(self, log_z: ArrayLike) -> FloatArray:
        raise NotImplementedError

    def log_pgf_complement(self, log_w: ArrayLike) -> FloatArray:
        raise NotImplementedError

    def pgf_complement_inverse(self, u: ArrayLike) -> FloatArray:
        """w in (0, 1] with 1 - G(1 - w) = u (u in (0, 1 - G(0)]): Newton on
        log(1 - G(1 - w)) minus log u in log w (`numerics.newton_bracketed`) inside the bracket
        [u / E[K], u / (1 - G(0))] (1 - G(1 - w) is concave in w, from 0 with slope E[K], and
        at least (1 - G(0)) w); the laws with a closed form override it."""
        u = np.asarray(u, dtype=float)
        log_u = np.log(u)
        lo = np.minimum(log_u - math.log(self.mean), 0.0)
        hi = np.minimum(log_u - math.log1p(-self.p_zero), 0.0)

        def fun(log_w: FloatArray) -> tuple[FloatArray, FloatArray]:
            w = np.exp(log_w)
            log_c = self.log_pgf_complement(log_w)
            # d log C / d log w = w G'(1 - w) / C
            slope = np.exp(log_w + self.log_pgf_derivative(-np.expm1(log_w), w) - log_c)
            return log_c - log_u, slope

        return np.exp(newton_bracketed(fun, lo, hi, increasing=True))

    @property
    def p_zero(self) -> float:
        """P[K = 0]: the mass released as the fixed, data-independent output."""
        return float(self.pgf(0.0))

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "mean": self.mean, **self.params()}


def _as_w(z: ArrayLike, w: ArrayLike | None) -> tuple[FloatArray, FloatArray]:
    z = np.asarray(z, dtype=float)
    return z, (1.0 - z) if w is None else np.asarray(w, dtype=float)


@dataclass(frozen=True)
class TruncatedNegativeBinomial(RoundsLaw):
    """TNB(eta, nu) of [PS22] Sec. 3 / [XWW24] Sec. 2; eta = 0 logarithmic, 1 geometric."""

    eta: float
    nu: float
    kind: str = field(default="tnb", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "eta", number(self.eta, "eta", -1, MAX_ETA, lo_open=True))
        # Below ~1e-15, 1 - nu rounds to 1 (or loses most digits of nu) and the law degenerates
        # (pgf(1) = log1p(-1)/log(nu) = nan); E[K] is then ~1e13, far beyond any tuning run.
        nu = number(self.nu, "nu", 0, 1, lo_open=True)
        require(nu >= MIN_NU, "nu", f"must be in [{MIN_NU:g}, 1], got {nu}")
        object.__setattr__(self, "nu", nu)

    @property
    def _log_inv_nu(self) -> float:
        return -math.log(self.nu)

    @property
    def _one(self) -> bool:
        """nu = 1: the point mass K = 1."""
        return self.nu == 1

    def log_pmf(self, k: ArrayLike) -> FloatArray:
        if self._one:
            with np.errstate(divide="ignore"):
                return cast("FloatArray", np.log(np.asarray(k, dtype=float) == 1))
        # P[K=k] = (1-nu)^k Gamma(k+eta) / (Gamma(1+eta) k!) / (log(1/nu) r(eta log(1/nu))),
        # with r(x) = expm1(x)/x: one formula for every eta, eta -> 0 included.
        k = np.asarray(k, dtype=float)
        eta, nu = self.eta, self.nu
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (
                k * math.log1p(-nu)
                + gammaln(k + eta)
                - gammaln(1 + eta)
                - gammaln(k + 1)
                - math.log(self._log_inv_nu)
                - _log_expm1_ratio(eta * self._log_inv_nu)
            )
        ok = (k >= 1) & (k == np.floor(k))
        return np.where(ok, out, -np.inf)

    def _b(self, z: FloatArray) -> FloatArray:
        """b = log(1 - (1-nu) z) <= 0: via log1p for small (1-nu) z, else via
        log(nu + (1-nu)(1-z)) so that z near 1 keeps nu's digits (log1p(-(1-nu)) is off by
        ~1e-16/nu: pgf(1) = 1 + 8e-7 at nu = 1e-12)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(
                z < 0.5,
                np.log1p(-(1 - self.nu) * np.minimum(z, 0.5)),
                np.log(self.nu + (1 - self.nu) * (1 - np.maximum(z, 0.5))),
            )

    def pgf(self, z: ArrayLike) -> FloatArray:
        # G(z) = expm1(-eta b) / expm1(eta log(1/nu)), b = `_b(z)`
        z = np.asarray(z, dtype=float)
        if self._one:
            return z
        b, L = self._b(z), self._log_inv_nu
        if self.eta <= 0:
            return cast(
                "FloatArray", (b / -L) * _expm1_ratio(-self.eta * b) / _expm1_ratio(self.eta * L)
            )
        # eta > 0: expm1(eta L) overflows once eta L > 709 (e.g. eta = 50, nu = 1e-9). Rewrite
        # G = e^(-eta (b + L)) (b / -L) r(eta b) / r(-eta L), every factor bounded (b + L >= 0).
        g = np.exp(-self.eta * (b + L)) * (b / -L) * _expm1_ratio(self.eta * b)
        return cast("FloatArray", g / _expm1_ratio(-self.eta * L))

    def pgf_complement(self, w: ArrayLike) -> FloatArray:
        # 1 - (1-nu) z = nu (1 + (1-nu) w / nu); 1 - G = -expm1(-eta l) / -expm1(-eta log(1/nu))
        if self._one:
            return np.asarray(w, dtype=float)
        L = self._log_inv_nu
        lg = np.log1p((1 - self.nu) * np.asarray(w, dtype=float) / self.nu)
        return cast(
            "FloatArray", (lg / L) * _expm1_ratio(-self.eta * lg) / _expm1_ratio(-self.eta * L)
        )

    def pgf_complement_inverse(self, u: ArrayLike) -> FloatArray:
        # 1 - G(1 - w) = expm1(-eta lg) / expm1(-eta L), lg = log1p((1-nu) w / nu), L = log 1/nu
        # (lg = u L at eta = 0), so w = expm1(lg) nu / (1 - nu)
        u = np.asarray(u, dtype=float)
        if self._one:
            return u
        L = self._log_inv_nu
        if self.eta == 0:
            lg = u * L
        else:
            lg = -np.log1p(u * math.expm1(-self.eta * L)) / self.eta
        return np.minimum(np.expm1(lg) * (self.nu / (1 - self.nu)), 1.0)

    def log_pgf_above_zero(self, log_z: ArrayLike) -> FloatArray:
        # no mass at 0: log G(z) = log(-b/L) + log r(-eta b) - log r(eta L), b = log(1-(1-nu) z)
        log_z = np.asarray(log_z, dtype=float)
        if self._one:
            return log_z
        L = self._log_inv_nu
        minus_b = -self._b(np.exp(log_z))
        with np.errstate(divide="ignore", invalid="ignore"):
            log_minus_b = np.where(log_z < -600, math.log1p(-self.nu) + log_z, np.log(minus_b))
        return (
            log_minus_b
            - math.log(L)
            + _log_expm1_ratio_array(self.eta * minus_b)
            - _log_expm1_ratio(self.eta * L)
        )

    def log_pgf_complement(self, log_w: ArrayLike) -> FloatArray:
        # 1 - G = (lg / L) r(-eta lg) / r(-eta L), lg = log1p((1-nu) w / nu)
        log_w = np.asarray(log_w, dtype=float)
        if self._one:
            return log_w
        L = self._log_inv_nu
        log_lg = _log_of_log1p_small(log_w, (1 - self.nu) / self.nu)
        lg = np.exp(log_lg)
        return (
            log_lg
            - math.log(L)
            + _log_expm1_ratio_array(-self.eta * lg)
            - _log_expm1_ratio(-self.eta * L)
        )

    def log_pgf_derivative(
        self, z: ArrayLike, w: ArrayLike | None = None, log_z: ArrayLike | None = None
    ) -> FloatArray:
        z, w = _as_w(z, w)
        eta, nu = self.eta, self.nu
        if self._one:
            return np.zeros(np.broadcast(z, w).shape)
        a = nu + (1 - nu) * w
        return -(eta + 1) * np.log(a) + (eta + 1) * math.log(nu) + math.log(self.mean)

    @property
    def mean(self) -> float:
        # eta (1-nu) / (nu (1 - nu^eta)) = ((1-nu)/nu) / (log(1/nu) r(-eta log(1/nu)))
        if self._one:
            return 1.0
        L = self._log_inv_nu
        return float((1 - self.nu) / self.nu / (L * _expm1_ratio(-self.eta * L)))

    def sample(self, size: int, rng: np.random.Generator) -> IntArray:
        """Exact samplers: logarithmic (eta = 0), geometric (eta = 1), zero-truncated NB(eta, nu)
        by rejection (eta > 0 with acceptance 1 - nu^eta >= 0.05), and otherwise rejection from
        the logarithmic law, whose pmf ratio to TNB is q_k = Gamma(k+eta)/(Gamma(1+eta)Gamma(k))
        (decreasing from 1 for eta < 0; increasing for eta > 0, where it is divided by its value
        at k_hi = 50/nu: beyond k_hi, a tail of mass < e^-50, it is capped at 1)."""
        eta, nu = self.eta, self.nu
        size = int(size)
        if self._one:
            return np.ones(size, dtype=np.int64)
        if eta == 0:
            return rng.logseries(1 - nu, size).astype(np.int64)
        if eta == 1:
            return rng.geometric(nu, size).astype(np.int64)
        acceptance = -math.expm1(eta * math.log(nu))
        if eta > 0 and acceptance >= 0.05:

            def propose_nb(n: int) -> IntArray:
                k = rng.negative_binomial(eta, nu, n)
                return k[k >= 1]

            return _rejection_fill(propose_nb, size, acceptance)

        def log_q(k: IntArray | int) -> FloatArray:
            return cast("FloatArray", gammaln(k + eta) - gammaln(1 + eta) - gammaln(k))

        log_bound = 0.0 if eta < 0 else float(log_q(math.ceil(50 / nu)))

        def propose(n: int) -> IntArray:
            k = rng.logseries(1 - nu, n)
            accept = np.log(rng.random(n)) < log_q(k) - log_bound
            return k[accept]

        return _rejection_fill(propose, size, None)

    def params(self) -> dict[str, Any]:
        return {"eta": self.eta, "nu": self.nu}


def _expm1_ratio(x: ArrayLike) -> Any:
    """expm1(x) / x, equal to 1 at x = 0 and accurate near it. All zeros (eta = 0, the
    logarithmic law, whose pgf terms multiply by this ratio): ones, without the expm1 (the
    same numbers, 1 + x/2 = 1 at x = +-0)."""
    x = np.asarray(x, dtype=float)
    if not x.any():
        return np.ones(x.shape) if x.ndim else 1.0
    small = np.abs(x) < 1e-8
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(small, 1 + x / 2, np.expm1(x) / np.where(small, 1.0, x))
    return out if out.ndim else float(out)


def _log_expm1_ratio(x: float) -> float:
    """log(expm1(x) / x) for a scalar x, without overflow for large x."""
    if x > 50:
        return x + math.log(-math.expm1(-x)) - math.log(x)
    return math.log(_expm1_ratio(x))


def _log_expm1_ratio_array(x: ArrayLike) -> FloatArray:
    """log(expm1(x) / x), vectorised: x/2 near 0, no overflow for large x."""
    x = np.asarray(x, dtype=float)
    if not x.any():  # eta = 0: log 1 = 0 everywhere (the same numbers, without the logs)
        return np.zeros(x.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        big = x + np.log(-np.expm1(-np.maximum(x, 50.0))) - np.log(np.maximum(x, 50.0))
        mid = np.log(np.asarray(_expm1_ratio(np.clip(x, -745.0, 50.0)), dtype=float))
    return cast("FloatArray", np.where(x > 50, big, mid))


def _log1mexp_of_log(t: ArrayLike) -> FloatArray:
    """log(1 - exp(-x)) for x = exp(t) > 0, from t = log x: accurate for x far below the
    smallest double (log x - x/2, the error x^2/24) and for large x (-> 0)."""
    t = np.asarray(t, dtype=float)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        x = np.exp(t)
        return cast("FloatArray", np.where(t < -20, t - x / 2, np.log(-np.expm1(-x))))


def _log_of_log1p_small(log_x: ArrayLike, scale: float = 1.0) -> FloatArray:
    """log|log1p(scale x)| for x = exp(log_x) >= 0 (scale x >= -1), with log|scale| + log_x
    where x underflows."""
    log_x = np.asarray(log_x, dtype=float)
    x = np.exp(np.minimum(log_x, 700.0))
    with np.errstate(divide="ignore"):
        log_abs = np.log(np.abs(np.log1p(scale * x)))
        return np.where(log_x < -600, math.log(abs(scale)) + log_x, log_abs)


def _rejection_fill(
    propose: Callable[[int], IntArray], size: int, acceptance: float | None
) -> IntArray:
    out = np.empty(size, dtype=np.int64)
    filled = 0
    rate = acceptance if acceptance else 0.5
    while filled < size:
        need = size - filled
        batch = propose(int(min(max(64, 1.2 * need / max(rate, 1e-3) + 16), 4 * size + 1024)))
        take = min(len(batch), need)
        out[filled : filled + take] = batch[:take]
        filled += take
    return out


@dataclass(frozen=True)
class Poisson(RoundsLaw):
    """Poisson(mean); K = 0 releases the fixed output ([PS22] Theorem 6)."""

    mean: float
    kind: str = field(default="poisson", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "mean", number(self.mean, "mean", 0, MAX_POISSON_MEAN, lo_open=True)
        )

    def log_pmf(self, k: ArrayLike) -> FloatArray:
        k = np.asarray(k, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = k * math.log(self.mean) - self.mean - gammaln(k + 1)
        return np.where((k >= 0) & (k == np.floor(k)), out, -np.inf)

    def pgf(self, z: ArrayLike) -> FloatArray:
        return np.exp(self.mean * (np.asarray(z, dtype=float) - 1))

    def pgf_above_zero(self, z: ArrayLike) -> FloatArray:
        # e^(m (z-1)) - e^-m = e^(m (z-1)) (1 - e^(-m z)): no overflow for a large mean
        z = np.asarray(z, dtype=float)
        return self.pgf(z) * -np.expm1(-self.mean * z)

    def log_pgf_above_zero(self, log_z: ArrayLike) -> FloatArray:
        log_z = np.asarray(log_z, dtype=float)
        m = self.mean
        return cast("FloatArray", m * np.expm1(log_z) + _log1mexp_of_log(math.log(m) + log_z))

    def log_pgf_complement(self, log_w: ArrayLike) -> FloatArray:
        return _log1mexp_of_log(math.log(self.mean) + np.asarray(log_w, dtype=float))

    def pgf_complement(self, w: ArrayLike) -> FloatArray:
        return -np.expm1(-self.mean * np.asarray(w, dtype=float))

    def pgf_complement_inverse(self, u: ArrayLike) -> FloatArray:
        # 1 - e^(-m w) = u
        return cast(
            "FloatArray", np.minimum(-np.log1p(-np.asarray(u, dtype=float)) / self.mean, 1.0)
        )

    def log_pgf_derivative(
        self, z: ArrayLike, w: ArrayLike | None = None, log_z: ArrayLike | None = None
    ) -> FloatArray:
        z, w = _as_w(z, w)
        return math.log(self.mean) - self.mean * w

    def sample(self, size: int, rng: np.random.Generator) -> IntArray:
        return rng.poisson(self.mean, int(size)).astype(np.int64)

    def params(self) -> dict[str, Any]:
        return {"mean": self.mean}


@dataclass(frozen=True)
class Binomial(RoundsLaw):
    """Binomial(n, p) ([KRW24] Theorem 5.7); K = 0 releases the fixed output."""

    n: int
    p: float
    kind: str = field(default="binomial", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", integer(self.n, "n", 1, MAX_K))
        object.__setattr__(self, "p", number(self.p, "p", 0, 1, lo_open=True))

    def log_pmf(self, k: ArrayLike) -> FloatArray:
        k = np.asarray(k, dtype=float)
        n, p = self.n, self.p
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (
                gammaln(n + 1)
                - gammaln(k + 1)
                - gammaln(n - k + 1)
                + k * np.log(p)
                + np.where(n - k > 0, (n - k) * np.log1p(-p) if p < 1 else -np.inf, 0.0)
            )
        return np.where((k >= 0) & (k <= n) & (k == np.floor(k)), out, -np.inf)

    def pgf(self, z: ArrayLike) -> FloatArray:
        return (1 - self.p + self.p * np.asarray(z, dtype=float)) ** self.n

    def pgf_above_zero(self, z: ArrayLike) -> FloatArray:
        z = np.asarray(z, dtype=float)
        if self.p == 1:
            return self.pgf(z)
        # G(z) (1 - ((1-p)/(1-p+pz))^n): no cancellation, no overflow for a large n
        return cast(
            "FloatArray", self.pgf(z) * -np.expm1(-self.n * np.log1p(self.p / (1 - self.p) * z))
        )

    def log_pgf_above_zero(self, log_z: ArrayLike) -> FloatArray:
        log_z = np.asarray(log_z, dtype=float)
        n, p = self.n, self.p
        if p == 1:
            return n * log_z
        z = np.exp(log_z)
        with np.errstate(divide="ignore"):
            log_g = n * np.log1p(-p * (1 - z))
        return cast(
            "FloatArray",
            log_g + _log1mexp_of_log(math.log(n) + _log_of_log1p_small(log_z, p / (1 - p))),
        )

    def log_pgf_complement(self, log_w: ArrayLike) -> FloatArray:
        # 1 - (1 - p w)^n = 1 - exp(-n (-log1p(-p w)))
        return _log1mexp_of_log(math.log(self.n) + _log_of_log1p_small(log_w, -self.p))

    def pgf_complement(self, w: ArrayLike) -> FloatArray:
        with np.errstate(divide="ignore"):  # p w = 1: log1p(-1) = -inf, and the value is 1
            return cast(
                "FloatArray", -np.expm1(self.n * np.log1p(-self.p * np.asarray(w, dtype=float)))
            )

    def pgf_complement_inverse(self, u: ArrayLike) -> FloatArray:
        # 1 - (1 - p w)^n = u
        with np.errstate(divide="ignore"):
            w = -np.expm1(np.log1p(-np.asarray(u, dtype=float)) / self.n) / self.p
        return cast("FloatArray", np.minimum(w, 1.0))

    def log_pgf_derivative(
        self, z: ArrayLike, w: ArrayLike | None = None, log_z: ArrayLike | None = None
    ) -> FloatArray:
        # log(1 - p w) = log(1 - p + p z): from w where z <= 1 (accurate near z = 1), and in
        # log space from log z where z > 1 (the Lemma-7 term's z = e^((alpha-1) r) overflows)
        z, w = _as_w(z, w)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            inner = np.log1p(-self.p * w)
            if log_z is not None:
                log_z = np.asarray(log_z, dtype=float)
                above = np.logaddexp(
                    math.log1p(-self.p) if self.p < 1 else -np.inf, math.log(self.p) + log_z
                )
                inner = np.where(log_z > 0, above, inner)
            return math.log(self.n * self.p) + (self.n - 1) * inner

    @property
    def mean(self) -> float:
        return self.n * self.p

    def sample(self, size: int, rng: np.random.Generator) -> IntArray:
        return rng.binomial(self.n, self.p, int(size)).astype(np.int64)

    def params(self) -> dict[str, Any]:
        return {"n": self.n, "p": self.p}


@dataclass(frozen=True)
class FinitePmf(RoundsLaw):
    """Any law on finitely many non-negative integers, given as {k: P[K = k]}."""

    table: Mapping[int, float]
    kind: str = field(default="pmf", init=False)
    _ks: np.ndarray = field(init=False, repr=False, compare=False)  # the support, ascending
    _ps: np.ndarray = field(init=False, repr=False, compare=False)  # its probabilities

    def __post_init__(self) -> None:
        if not isinstance(self.table, Mapping) or not self.table:
            raise ConfigError("table", "must be a non-empty table {k: probability}")
        clean: dict[int, float] = {}
        for key, prob in self.table.items():
            try:
                k = int(key)
            except (TypeError, ValueError):
                k = -1
            integral = isinstance(key, (int, np.integer)) and not isinstance(key, bool)
            ok = k >= 0 and (integral or str(key).strip().lstrip("+").isdigit())
            require(ok, "table", f"key {key!r} is not an integer >= 0")
            require(k <= MAX_K, "table", f"key {key!r} is above 2^53 (int64 and float k)")
            prob = number(prob, f"table[{k}]", 0, 1)
            if prob > 0:
                clean[k] = clean.get(k, 0.0) + prob
        total = sum(clean.values())
        require(
            abs(total - 1) <= 1e-9,
            "table",
            f"probabilities must sum to 1 (within 1e-9), got {shown(total)}",
        )
        require(any(k >= 1 for k in clean), "table", "needs some mass on k >= 1")
        ks = np.array(sorted(clean), dtype=np.int64)
        ps = np.array([clean[k] for k in ks.tolist()]) / total
        object.__setattr__(self, "table", dict(zip(ks.tolist(), ps.tolist())))
        object.__setattr__(self, "_ks", ks)
        object.__setattr__(self, "_ps", ps)

    def log_pmf(self, k: ArrayLike) -> FloatArray:
        k = np.asarray(k)
        idx = np.searchsorted(self._ks, k)
        idx_c = np.clip(idx, 0, len(self._ks) - 1)
        hit = self._ks[idx_c] == k
        with np.errstate(divide="ignore"):
            return np.where(hit, np.log(self._ps[idx_c]), -np.inf)

    @staticmethod
    def _log_z(z: FloatArray, w: FloatArray) -> FloatArray:
        """log z, through log1p(-w) near z = 1 so that tiny w = 1 - z is not lost."""
        with np.errstate(divide="ignore"):
            return np.where(w < 0.5, np.log1p(-np.minimum(w, 0.5)), np.log(np.maximum(z, 0)))

    def pgf(self, z: ArrayLike) -> FloatArray:
        z = np.asarray(z, dtype=float)
        return cast("FloatArray", np.sum(self._ps * np.power(z[..., None], self._ks), axis=-1))

    def pgf_above_zero(self, z: ArrayLike) -> FloatArray:
        z = np.asarray(z, dtype=float)
        pos = self._ks > 0
        return cast(
            "FloatArray", np.sum(self._ps[pos] * np.power(z[..., None], self._ks[pos]), axis=-1)
        )

    def log_pgf_above_zero(self, log_z: ArrayLike) -> FloatArray:
        log_z = np.asarray(log_z, dtype=float)
        pos = self._ks > 0
        ks, ps = self._ks[pos], self._ps[pos]
        with np.errstate(invalid="ignore"):
            terms = np.log(ps) + ks * log_z[..., None]
        return cast("FloatArray", logsumexp(np.where(np.isnan(terms), -np.inf, terms)))

    def log_pgf_complement(self, log_w: ArrayLike) -> FloatArray:
        # sum_k p_k (1 - (1-w)^k), each term log1mexp of k (-log1p(-w))
        pos = self._ks > 0
        ks, ps = self._ks[pos], self._ps[pos]
        inner = _log_of_log1p_small(log_w, -1.0)
        terms = np.log(ps) + _log1mexp_of_log(np.log(ks) + inner[..., None])
        return cast("FloatArray", logsumexp(terms))

    def pgf_complement(self, w: ArrayLike) -> FloatArray:
        w = np.asarray(w, dtype=float)
        # 1 - (1-w)^k = -expm1(k log1p(-w))
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = -np.expm1(self._ks * np.log1p(-w)[..., None])
        return cast("FloatArray", np.sum(self._ps * np.where(self._ks > 0, terms, 0.0), axis=-1))

    def log_pgf_derivative(
        self, z: ArrayLike, w: ArrayLike | None = None, log_z: ArrayLike | None = None
    ) -> FloatArray:
        z, w = _as_w(z, w)
        log_z = self._log_z(z, w) if log_z is None else np.asarray(log_z, dtype=float)
        pos = self._ks >= 1
        ks, ps = self._ks[pos], self._ps[pos]
        with np.errstate(invalid="ignore"):
            terms = np.log(ks * ps) + np.where(ks - 1 > 0, (ks - 1) * log_z[..., None], 0.0)
        return cast("FloatArray", logsumexp(terms))

    @property
    def mean(self) -> float:
        return float(np.sum(self._ks * self._ps))

    def sample(self, size: int, rng: np.random.Generator) -> IntArray:
        return rng.choice(self._ks, size=int(size), p=self._ps).astype(np.int64)

    def params(self) -> dict[str, Any]:
        return {"pmf": {int(k): float(p) for k, p in self.table.items()}}


class TwoPoint(FinitePmf):
    """P[K=1] = s, P[K=L] = 1 - s ([XWW24] eq. 21)."""

    L: int
    s: float

    def __init__(self, L: int, s: float) -> None:
        L = integer(L, "L", 1, MAX_K)
        s = number(s, "s", 0, 1)
        object.__setattr__(self, "L", L)
        object.__setattr__(self, "s", s)
        super().__init__({1: 1.0} if L == 1 else {1: s, L: 1 - s})  # L = 1: K = 1 whatever s
        object.__setattr__(self, "kind", "two_point")

    def params(self) -> dict[str, Any]:
        return {"L": self.L, "s": self.s}


class Point(FinitePmf):
    """K = k always (best-of-k with a fixed k)."""

    k: int

    def __init__(self, k: int) -> None:
        k = integer(k, "k", 1, MAX_K)
        object.__setattr__(self, "k", k)
        super().__init__({k: 1.0})
        object.__setattr__(self, "kind", "point")

    def sample(self, size: int, rng: np.random.Generator) -> IntArray:
        return np.full(int(size), self.k, dtype=np.int64)

    def pgf_complement_inverse(self, u: ArrayLike) -> FloatArray:
        return Binomial(self.k, 1.0).pgf_complement_inverse(u)  # 1 - (1 - w)^k = u

    def params(self) -> dict[str, Any]:
        return {"k": self.k}


_LAW_FIELDS: dict[str, tuple[set[str], Callable[[Mapping[str, Any]], RoundsLaw]]] = {
    "tnb": ({"eta", "nu"}, lambda d: TruncatedNegativeBinomial(d["eta"], d["nu"])),
    "geometric": ({"nu"}, lambda d: TruncatedNegativeBinomial(1.0, d["nu"])),
    "logarithmic": ({"nu"}, lambda d: TruncatedNegativeBinomial(0.0, d["nu"])),
    "poisson": ({"mean"}, lambda d: Poisson(d["mean"])),
    "binomial": ({"n", "p"}, lambda d: Binomial(d["n"], d["p"])),
    "two_point": ({"L", "s"}, lambda d: TwoPoint(d["L"], d["s"])),
    "point": ({"k"}, lambda d: Point(d["k"])),
    "pmf": ({"pmf"}, lambda d: FinitePmf(d["pmf"])),
}


def law_from_dict(spec: Mapping[str, Any], *, path: str = "rounds") -> RoundsLaw:
    """Build a law from its config section, e.g. {"kind": "tnb", "eta": 0, "nu": 0.01}; a
    ConfigError names the field under `path` (`rounds.nu: must be in (0, 1), got 1.0`)."""
    try:
        if not isinstance(spec, Mapping):
            raise ConfigError("", "must be a mapping with a 'kind' key")
        kind = spec.get("kind")
        if not isinstance(kind, str) or kind not in _LAW_FIELDS:  # a list/dict kind is unhashable
            raise ConfigError("kind", f"must be one of {', '.join(_LAW_FIELDS)}, got {kind!r}")
        required, build = _LAW_FIELDS[kind]
        given = set(spec) - {"kind"}
        unknown = given - required
        if unknown:
            raise ConfigError(
                f"{sorted(unknown)[0]}",
                f"unknown key for kind {kind}; allowed: {', '.join(sorted(required))}",
            )
        missing = required - given
        if missing:
            raise ConfigError(f"{sorted(missing)[0]}", f"required for kind {kind}")
        try:
            return build(spec)
        except ConfigError as err:  # the Python argument `table` is the config's `pmf`
            if kind == "pmf" and err.field.startswith("table"):
                raise ConfigError("pmf" + err.field[len("table") :], err.message) from None
            raise
    except ConfigError as err:
        raise err.within(path) from None
