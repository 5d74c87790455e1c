"""Mechanism pairs: one base run M on a pair of neighbouring data sets X, X', as frozen data.

Every pair is plain, validated data (a `ConfigError` names a bad parameter) with the methods of
`auditsel.roles.AccountedPair` (docs/explanation/architecture.md, "Pairs"); its privacy
profile delta(eps) and its RDP curve max{D_a(P||Q), D_a(Q||P)} are the max over both directions.

The pairs:

* GaussianBase(mu): one draw from N(0, 1) on X and N(mu, 1) on X' (a sensitivity-1 output
  with unit Gaussian noise; one DP-SGD run after the reduction of [XWW24] Sec. 5, eq. 18-19:
  mu = tau sqrt(N) / sigma). Its privacy profile (Balle & Wang 2018; [KRW24] "Base profiles")
  is, for every real eps, the same in both directions::

      delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)          (`gaussian_delta`)

  and its RDP curve alpha mu^2 / 2 (Mironov 2017, Prop. 7). `GaussianBase.from_epsilon(eps_B,
  delta)` calibrates mu so that delta(eps_B) = delta.

* FiniteOutputBase(p, q): outputs 0..m-1 listed from the lowest to the highest score, with
  probabilities p on X and q on X' ([XWW24] Example 1); its profile is the finite hockey-stick
  divergence sum_y [p(y) - e^eps q(y)]_+ (max over both directions).

* DpsgdBase(noise_multiplier, steps, sample_rate, accountant): one DP-SGD run, N
  Poisson-subsampled Gaussian steps under add/remove neighbours (sensitivity 1 after clipping),
  i.e. dp_accounting's SelfComposedDpEvent(PoissonSampledDpEvent(tau, GaussianDpEvent(sigma)), N).
  Everything dp_accounting computes is taken from it (imported lazily, on first use):
  eps_B by `RdpAccountant` (orders `RDP_ORDERS`) or `PLDAccountant`; the RDP curve
  (Mironov-Talwar-Zhang 2019); the profile from the pessimistic connect-the-dots PLD (an upper
  bound on the true profile for every tau). mu = tau sqrt(N)/sigma ([XWW24] eq. 19: exact for
  tau = 1, a large-N approximation otherwise); mu_gdp the central-limit value of [DRS22]
  Cor. 5.4 via [XWW24] Appendix A.4 (always heuristic). `from_epsilon` calibrates sigma with
  dp_accounting's `calibrate_dp_mechanism`.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr, ndtr, ndtri

from auditsel.errors import ConfigError, choice, integer, number, shown
from auditsel.numerics import FloatArray, bisect, check_deltas, logsumexp

if TYPE_CHECKING:
    from dp_accounting import DpEvent
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution


class Neighbouring(enum.Enum):
    """The neighbouring relation a pair's (eps, delta) statements are about."""

    SHIFT = "X' = X plus the canary, which shifts the released Gaussian's mean by mu"
    GIVEN_LAWS = "the two output laws p (on X) and q (on X') as given, both directions"
    ADD_REMOVE = "add/remove one example (both directions)"


# --- Gaussian -------------------------------------------------------------------------------


def gaussian_delta(mu: float, eps: ArrayLike) -> FloatArray:
    """Hockey-stick divergence H_{e^eps}(N(0,1) || N(mu,1)) in log space (exact, any real eps)."""
    eps = np.asarray(eps, dtype=float)
    if mu <= 0:
        return cast("FloatArray", np.maximum(-np.expm1(eps), 0.0))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = np.exp(gaussian_log_delta(mu, eps))
    return np.maximum(out, 0.0)


def gaussian_log_delta(mu: float, eps: ArrayLike) -> FloatArray:
    """log of `gaussian_delta` for mu > 0, accurate where delta underflows (log_ndtr): down to
    delta = 1e-300 and far below (-inf where delta is exactly 0)."""
    eps = np.asarray(eps, dtype=float)
    log_a = log_ndtr(mu / 2 - eps / mu)
    log_b = eps + log_ndtr(-mu / 2 - eps / mu)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return cast("FloatArray", log_a + np.log(-np.expm1(np.minimum(log_b - log_a, 0.0))))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest eps >= 0 with gaussian_delta(mu, eps) <= delta: inf at delta = 0 (a Gaussian is
    never pure DP), a ConfigError outside [0, 1). Found on log delta, so every delta > 0 that a
    float holds is answered to full precision."""
    delta = float(check_deltas(delta)[0])
    if delta == 0:
        return math.inf
    if mu <= 0 or gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    log_delta = math.log(delta)
    at: Callable[[float], float] = lambda e: float(gaussian_log_delta(mu, e))
    hi = max(1.0, mu * mu)
    while at(hi) > log_delta:
        hi *= 2
    return bisect(lambda e: at(e) - log_delta, 0.0, hi, xtol=1e-12, rtol=1e-12)


def gaussian_mu(epsilon: float, delta: float) -> float:
    """The mu with gaussian_delta(mu, epsilon) = delta (eps_B -> mu calibration)."""
    epsilon = number(epsilon, "epsilon", 0)
    delta = number(delta, "delta", 0, 1, lo_open=True, hi_open=True)
    lo, hi = 1e-12, 1.0
    while gaussian_delta(hi, epsilon) < delta:
        hi *= 2
    f: Callable[[float], float] = lambda m: (
        math.log(max(float(gaussian_delta(m, epsilon)), 1e-320)) - math.log(delta)
    )
    if delta < 1e-300:  # subnormal deltas (5e-324 is in range): log delta without underflow
        f = lambda m: float(gaussian_log_delta(m, epsilon)) - math.log(delta)
    return bisect(f, lo, hi, xtol=1e-14, rtol=1e-13)


@dataclass(frozen=True)
class GaussianBase:
    """N(0,1) on X, N(mu,1) on X' ([XWW24] Figure 5)."""

    mu: float
    neighbouring: ClassVar[Neighbouring] = Neighbouring.SHIFT
    rdp_orders: ClassVar[None] = None
    profile_is_exact: ClassVar[bool] = True
    reduction_is_exact: ClassVar[bool] = True
    mu_gdp: ClassVar[None] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", number(self.mu, "mu", 0, math.inf, lo_open=True))

    @classmethod
    def from_epsilon(cls, epsilon: float, delta: float) -> GaussianBase:
        return cls(gaussian_mu(epsilon, delta))

    def delta(self, eps: ArrayLike) -> FloatArray:
        return gaussian_delta(self.mu, eps)

    def profile_epsilon(self, delta: float) -> float:
        return gaussian_epsilon(self.mu, delta)

    epsilon = profile_epsilon

    @property
    def pure_epsilon(self) -> float:
        return math.inf

    def rdp(self, orders: ArrayLike) -> FloatArray:
        """alpha mu^2 / 2: RDP of N(0,1) vs N(mu,1), exact and symmetric."""
        return np.asarray(orders, dtype=float) * self.mu * self.mu / 2.0

    def profile_grid(self) -> FloatArray:
        hi = gaussian_epsilon(self.mu, 1e-300) if self.mu < 30 else self.mu * self.mu
        return np.linspace(0.0, hi, 4001)

    def region(self, w: FloatArray, q: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The most powerful test {x <= t} with P(x <= t) = q under N(0,1) has q' = Phi(t - mu):
        (largest w' = 1 - q', smallest q') for each (w, q = 1 - w)."""
        with np.errstate(divide="ignore"):
            t_from_w = -ndtri(w)  # accurate when w is small
            t_from_q = ndtri(q)  # accurate when q is small
        t = np.where(w < 0.5, t_from_w, t_from_q)
        return ndtr(self.mu - t), ndtr(t - self.mu)

    def reduced(self) -> GaussianBase:
        return self

    def shift(self, member: ArrayLike) -> FloatArray:
        """Mean of the draw: 0 on X (member = 0), mu on X' (member = 1)."""
        return np.asarray(member, dtype=float) * self.mu

    def describe(self) -> dict[str, Any]:
        return {"kind": "gaussian", "mu": self.mu}


# --- finite outputs -------------------------------------------------------------------------


def hockey_stick_finite(p: ArrayLike, q: ArrayLike, eps: ArrayLike) -> FloatArray:
    """sum_y [p(y) - e^eps q(y)]_+ for each eps (vectorised over eps)."""
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    eps = np.asarray(eps, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        terms = p - np.exp(eps)[..., None] * q
    # where q = 0 the term is p whatever eps: e^eps overflows to inf above eps ~ 709.8 and
    # inf * 0 = nan would drop it (a disjoint-support pair then looked (710, 0)-DP, not inf)
    terms = np.where(q > 0, terms, p)
    return cast("FloatArray", np.sum(np.where(terms > 0, terms, 0.0), axis=-1))


def _renyi_finite(p: FloatArray, q: FloatArray, orders: ArrayLike) -> FloatArray:
    a = np.asarray(orders, dtype=float)[..., None]
    if np.any((p > 0) & (q == 0)):
        return np.full(np.shape(orders), np.inf)
    keep = p > 0
    lp, lq = np.log(p[keep]), np.log(q[keep])
    return logsumexp(a * lp + (1 - a) * lq) / (a[..., 0] - 1)


@dataclass(frozen=True)
class FiniteOutputBase:
    """Outputs 0..m-1 in increasing score order; p on X, q on X'."""

    p: tuple[float, ...]
    q: tuple[float, ...]
    neighbouring: ClassVar[Neighbouring] = Neighbouring.GIVEN_LAWS
    rdp_orders: ClassVar[None] = None
    profile_is_exact: ClassVar[bool] = True
    reduction_is_exact: ClassVar[bool] = True
    region: ClassVar[None] = None
    mu: ClassVar[None] = None
    mu_gdp: ClassVar[None] = None

    def __post_init__(self) -> None:
        p = np.asarray(self.p, dtype=float)
        q = np.asarray(self.q, dtype=float)
        for name, v in (("p", p), ("q", q)):
            if v.ndim != 1 or len(v) < 2:
                raise ConfigError(name, "must be a list of at least 2 probabilities")
            if not np.all(np.isfinite(v)) or np.any(v < 0):
                raise ConfigError(name, "probabilities must be finite and >= 0")
            if abs(v.sum() - 1) > 1e-9:
                raise ConfigError(
                    name, f"probabilities must sum to 1 (within 1e-9), got {shown(v.sum())}"
                )
        if len(p) != len(q):
            raise ConfigError("q", f"must have the same length as p ({len(p)}), got {len(q)}")
        object.__setattr__(self, "p", tuple((p / p.sum()).tolist()))
        object.__setattr__(self, "q", tuple((q / q.sum()).tolist()))

    def law(self, member: int) -> FloatArray:
        return np.asarray(self.q if member else self.p, dtype=float)

    def delta(self, eps: ArrayLike) -> FloatArray:
        """max over directions of sum_y [P(y) - e^eps Q(y)]_+."""
        p, q = self.law(0), self.law(1)
        return np.maximum(hockey_stick_finite(p, q, eps), hockey_stick_finite(q, p, eps))

    def _llr(self) -> FloatArray:
        """|log p(y)/q(y)| on the common support."""
        p, q = self.law(0), self.law(1)
        both = (p > 0) & (q > 0)
        llr: FloatArray = np.abs(np.log(p[both]) - np.log(q[both]))
        return llr

    def _top(self) -> float:
        llr = self._llr()
        return float(np.max(llr)) if llr.size else 1.0

    def profile_epsilon(self, delta: float) -> float:
        """inf{e >= 0 : delta(e) <= d} by bisection (the profile is non-increasing); the pure
        eps at delta = 0."""
        delta = float(check_deltas(delta)[0])
        if delta == 0:
            return self.pure_epsilon
        hi = self._top() * 1.01 + 1.0
        at: Callable[[float], float] = lambda e: float(self.delta(np.array([e]))[0])
        if at(0.0) <= delta:
            return 0.0
        if at(hi) > delta:
            return math.inf
        lo = 0.0
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            if at(mid) <= delta:
                hi = mid
            else:
                lo = mid
        return hi

    @property
    def pure_epsilon(self) -> float:
        """max `|log p(y)/q(y)|` (inf when the supports differ)."""
        p, q = self.law(0), self.law(1)
        return math.inf if np.any((p > 0) != (q > 0)) else float(np.max(self._llr()))

    epsilon = profile_epsilon

    def rdp(self, orders: ArrayLike) -> FloatArray:
        p, q = self.law(0), self.law(1)
        return np.maximum(_renyi_finite(p, q, orders), _renyi_finite(q, p, orders))

    def profile_grid(self) -> FloatArray:
        grid = np.linspace(0, self._top() * 1.01 + 1e-9, 2001)
        return np.unique(np.concatenate([grid, self._llr(), [0.0]]))

    def reduced(self) -> FiniteOutputBase:
        return self

    def describe(self) -> dict[str, Any]:
        return {"kind": "discrete", "p": list(self.p), "q": list(self.q)}

    @classmethod
    def example1(cls, b: float = 1e-3, d: float = 1e2, eps: float = 1.0) -> FiniteOutputBase:
        """[XWW24] Example 1: an (eps, 0)-DP base on {A, B, C} where selection is worst."""
        e = math.exp(eps)
        return cls((1 - b * e - d * b, b * e, d * b), (1 - b - d * b * e, b, d * b * e))


# --- DP-SGD ---------------------------------------------------------------------------------

#: RDP orders for eps_B and the DP-SGD RDP curve: dp_accounting's default orders
#: (1.1..10.9 step 0.1, 11..63, 128, 256, 512, 1024) refined between 64 and 1024.
RDP_ORDERS = tuple(
    sorted(
        {1 + x / 10.0 for x in range(1, 100)}
        | set(range(11, 64))
        | {128, 256, 512, 1024, 64.0, 80.0, 96.0, 112.0, 160.0, 192.0, 320.0, 384.0, 768.0}
    )
)

#: value_discretization_interval of the pessimistic PLD (dp_accounting connect-the-dots).
PLD_DISCRETIZATION = 1e-3

_ACCOUNTANTS = ("rdp", "pld")


class _StepsBase(Protocol):
    """A base made of `steps` noisy steps at `sample_rate` (DpsgdBase, events.LaplaceBase)."""

    @property
    def noise_multiplier(self) -> float: ...
    @property
    def steps(self) -> int: ...
    @property
    def sample_rate(self) -> float: ...
    @property
    def accountant(self) -> str: ...


#: The ranges of a base of noisy steps (DpsgdBase, LaplaceBase; a config's base section) that
#: compute: dp_accounting's PLD composes a run by self-composition, whose support grows with
#: the steps (10^7 takes minutes and over a GB); a noise multiplier below 0.1 leaves float64
#: (e^(1/sigma^2)), a sample rate below 1e-9 underflows the sampled mechanisms' densities.
STEPS_MAX = 10**7
NOISE_MIN, NOISE_MAX = 0.1, 1e6
SAMPLE_RATE_MIN = 1e-9


def check_steps(base: _StepsBase) -> None:
    """Check (in place, on a frozen dataclass) the fields of a base made of `steps` noisy steps at
    `sample_rate`: noise_multiplier in [NOISE_MIN, NOISE_MAX], steps in [1, STEPS_MAX],
    sample_rate in [SAMPLE_RATE_MIN, 1], accountant one of "rdp", "pld" (ConfigError naming
    the field otherwise: the ranges that compute, see STEPS_MAX)."""
    object.__setattr__(
        base,
        "noise_multiplier",
        number(base.noise_multiplier, "noise_multiplier", NOISE_MIN, NOISE_MAX),
    )
    object.__setattr__(base, "steps", integer(base.steps, "steps", 1, STEPS_MAX))
    object.__setattr__(
        base, "sample_rate", number(base.sample_rate, "sample_rate", SAMPLE_RATE_MIN, 1)
    )
    choice(base.accountant, "accountant", _ACCOUNTANTS)


def steps_fields(base: _StepsBase) -> dict[str, Any]:
    """The fields `check_steps` checks, as `describe()` writes them."""
    names = ("noise_multiplier", "steps", "sample_rate", "accountant")
    return {name: getattr(base, name) for name in names}


@contextlib.contextmanager
def quiet_absl() -> Iterator[None]:
    """Silence dp_accounting's per-order convergence warnings (orders it drops are +inf)."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def gdp_mu_dpsgd(noise_multiplier: float, steps: int, sample_rate: float) -> float:
    """mu_GDP of [XWW24] Appendix A.4 ([DRS22] central limit theorem for DP-SGD)."""
    s = float(noise_multiplier)
    c = sample_rate * math.sqrt(steps)
    if 1.0 / s**2 > 700.0:  # e^(1/s^2) overflows: the limit is infinite
        return math.inf
    inner = math.exp(1.0 / s**2) * ndtr(1.5 / s) + 3.0 * ndtr(-0.5 / s) - 2.0
    return math.sqrt(2.0) * c * math.sqrt(max(inner, 0.0))


@dataclass(frozen=True)
class DpsgdBase:
    """One DP-SGD run: N Poisson-subsampled Gaussian steps ([XWW24] eq. 1)."""

    noise_multiplier: float
    steps: int
    sample_rate: float = 1.0
    accountant: str = "rdp"
    neighbouring: ClassVar[Neighbouring] = Neighbouring.ADD_REMOVE
    rdp_orders: ClassVar[tuple[float, ...]] = RDP_ORDERS
    profile_is_exact: ClassVar[bool] = False  # pessimistic PLD: an upper bound
    region: ClassVar[None] = None

    def __post_init__(self) -> None:
        check_steps(self)

    # --- dp_accounting -------------------------------------------------------------------
    @property
    def event(self) -> DpEvent:
        return _event(self.noise_multiplier, self.steps, self.sample_rate)

    def epsilon(self, delta: float, accountant: str | None = None) -> float:
        """eps_B of one run at delta, with this base's accountant (or the one given); inf at
        delta = 0 (a Gaussian step is never pure DP)."""
        delta = float(check_deltas(delta)[0])
        if delta == 0:
            return math.inf
        accountant = accountant or self.accountant
        if accountant == "rdp":
            import dp_accounting as dpa  # deferred: dp_accounting is heavy

            # RdpAccountant(RDP_ORDERS).compose(self.event).get_epsilon(delta), its RDP curve
            # cached (`rdp` composes the same event on the same float orders)
            orders = np.asarray(RDP_ORDERS, dtype=float)
            rdp = self.rdp(orders)
            with quiet_absl():
                return float(dpa.rdp.compute_epsilon(orders, rdp, delta)[0])
        return float(self.pld().get_epsilon_for_delta(delta))

    def rdp(self, orders: ArrayLike) -> FloatArray:
        """RDP of one run at each order (dp_accounting, Poisson-subsampled Gaussian)."""
        orders = np.asarray(orders, dtype=float)
        return _rdp_curve(
            self.noise_multiplier, self.steps, self.sample_rate, tuple(orders.tolist())
        )

    def pld(self) -> PrivacyLossDistribution:
        """Pessimistic (connect-the-dots) PLD of one run, add/remove (dp_accounting)."""
        return dpsgd_pld(self.noise_multiplier, self.steps, self.sample_rate)

    def delta(self, eps: ArrayLike) -> FloatArray | float:
        """delta(eps) of one run from the pessimistic PLD (max over add/remove), vectorised."""
        return self._delta(eps, fine=False)

    def _delta(self, eps: ArrayLike, fine: bool) -> FloatArray | float:
        e = np.asarray(eps, dtype=float)
        flat = np.atleast_1d(e).ravel()
        args = (self.noise_multiplier, self.steps, self.sample_rate)
        out = _pld_delta(*args, flat)
        step = profile_step(*args) if fine else PLD_DISCRETIZATION
        if step != PLD_DISCRETIZATION:
            out = np.minimum(out, _pld_delta(*args, flat, step))
        return out.reshape(e.shape) if e.ndim else float(out[0])

    def profile_epsilon(self, delta: float) -> float:
        delta = float(check_deltas(delta)[0])
        return math.inf if delta == 0 else float(self.pld().get_epsilon_for_delta(delta))

    def profile_delta(self, eps: ArrayLike) -> FloatArray | float:
        """delta(eps) for the privacy profile the bounds read: the smaller of `delta` and the
        same pessimistic PLD on the finer grid `profile_step` picks (both upper bounds)."""
        return self._delta(eps, fine=True)

    def profile_epsilon_fine(self, delta: float) -> float:
        """eps(delta) of `profile_delta`: the smaller of both PLDs' (each an upper bound)."""
        delta = float(check_deltas(delta)[0])
        if delta == 0:
            return math.inf
        args = (self.noise_multiplier, self.steps, self.sample_rate)
        coarse = float(self.pld().get_epsilon_for_delta(delta))
        step = profile_step(*args)
        if step == PLD_DISCRETIZATION:
            return coarse
        return min(coarse, float(dpsgd_pld(*args, step).get_epsilon_for_delta(delta)))

    @property
    def pure_epsilon(self) -> float:
        return math.inf

    def profile_grid(self, delta_for_grid: float = 1e-12) -> FloatArray:
        delta_for_grid = float(check_deltas(delta_for_grid, "delta_for_grid")[0])
        if delta_for_grid == 0:
            raise ConfigError("delta_for_grid", "must be in (0, 1): the grid ends where delta is")
        hi = float(self.pld().get_epsilon_for_delta(delta_for_grid))
        return np.linspace(0.0, max(hi, 1e-3) * 1.5, 1501)

    # --- one-number summaries -------------------------------------------------------------
    @property
    def mu(self) -> float:
        """tau sqrt(N) / sigma ([XWW24] eq. 19)."""
        return self.sample_rate * math.sqrt(self.steps) / self.noise_multiplier

    @property
    def reduction_is_exact(self) -> bool:
        """eq. 19 is exact only for full-batch training (tau = 1)."""
        return self.sample_rate == 1.0

    @property
    def mu_gdp(self) -> float:
        """Central-limit GDP parameter ([XWW24] Appendix A.4)."""
        return gdp_mu_dpsgd(self.noise_multiplier, self.steps, self.sample_rate)

    def reduced(self) -> GaussianBase:
        """N(0,1) vs N(mu,1) with mu = tau sqrt(N)/sigma ([XWW24] eq. 19; heuristic when tau < 1)."""
        return GaussianBase(self.mu)

    @classmethod
    def from_epsilon(
        cls,
        epsilon: float,
        delta: float,
        steps: int,
        sample_rate: float = 1.0,
        accountant: str = "rdp",
    ) -> DpsgdBase:
        """The base whose one run is (epsilon, delta)-DP under `accountant` (sigma calibrated)."""
        epsilon = number(epsilon, "epsilon", 0, math.inf, lo_open=True)
        delta = number(delta, "delta", 0, 1, lo_open=True, hi_open=True)
        probe = cls(1.0, steps, sample_rate, accountant)  # validates the other fields
        sigma = _calibrate(float(epsilon), float(delta), probe.steps, probe.sample_rate, accountant)
        return cls(sigma, probe.steps, probe.sample_rate, accountant)

    def describe(self) -> dict[str, Any]:
        return {"kind": "dpsgd", **steps_fields(self)}


@lru_cache(maxsize=256)
def _rdp_curve(sigma: float, steps: int, tau: float, orders: tuple[float, ...]) -> FloatArray:
    import dp_accounting as dpa  # deferred: dp_accounting is heavy

    acc = dpa.rdp.RdpAccountant(list(orders))
    with quiet_absl():
        acc.compose(_event(sigma, steps, tau))
    return np.array(acc.rdp, dtype=float)  # public since dp-accounting 0.6


@lru_cache(maxsize=64)
def dpsgd_pld(
    sigma: float, steps: int, tau: float, step: float = PLD_DISCRETIZATION
) -> PrivacyLossDistribution:
    """dp_accounting's pessimistic connect-the-dots PLD of DP-SGD (noise multiplier `sigma`,
    `steps` Poisson-subsampled steps at rate `tau`, grid `step`); tau >= 1 is the one Gaussian
    of noise sigma / sqrt(steps). Cached (64 entries): callers must not mutate it."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib  # deferred: heavy

    grid = {
        "value_discretization_interval": step,
        "use_connect_dots": True,
        "pessimistic_estimate": True,
    }
    if tau >= 1:
        # N full-batch Gaussian steps are exactly one Gaussian with noise sigma / sqrt(N)
        return pld_lib.from_gaussian_mechanism(sigma / math.sqrt(steps), **grid)
    return pld_lib.from_gaussian_mechanism(sigma, sampling_prob=tau, **grid).self_compose(steps)


#: the finer PLD grids `profile_step` may pick for a DP-SGD base's privacy profile
_PROFILE_STEPS = (1e-4, 3e-4)
#: ... while the composed PLD keeps at most this many points (its cost grows with them)
PROFILE_POINTS = 60_000


def profile_step(sigma: float, steps: int, tau: float) -> float:
    """The PLD grid of a DP-SGD base's privacy profile (`DpsgdBase.profile_delta`): the finest of
    `_PROFILE_STEPS` at which the composed PLD keeps at most `PROFILE_POINTS` points (predicted
    from the `PLD_DISCRETIZATION` one's), else `PLD_DISCRETIZATION`: at low sample rates one
    step's loss is comparable to 1e-3 and the discretisation binds; there the PLD is small."""
    size = max(len(losses) for losses, _, _ in dense_pmfs(dpsgd_pld(sigma, steps, tau)))
    for step in _PROFILE_STEPS:
        if size * PLD_DISCRETIZATION / step <= PROFILE_POINTS:
            return step
    return PLD_DISCRETIZATION


@lru_cache(maxsize=64)
def pld_tails(
    sigma: float, steps: int, tau: float, step: float = PLD_DISCRETIZATION
) -> tuple[tuple[FloatArray, FloatArray, FloatArray, float], ...]:
    """Per direction (remove, add): the losses of the dense PMF of `dpsgd_pld` and the running sums
    dp_accounting's vectorised hockey stick accumulates from the top loss down,
    upper_k = inf_mass + sum of the top k probs, lower_k = sum of the top k probs e^-loss."""
    out = []
    for losses, probs, infinity_mass in dense_pmfs(dpsgd_pld(sigma, steps, tau, step)):
        upper = np.cumsum(np.concatenate([[infinity_mass], probs[::-1]]))
        lower = np.cumsum(np.concatenate([[0.0], probs[::-1] * np.exp(-losses[::-1])]))
        out.append((losses, upper, lower, infinity_mass))
    return tuple(out)


def dense_pmfs(pld: PrivacyLossDistribution) -> list[tuple[FloatArray, FloatArray, float]]:
    """(losses, probabilities, infinity mass) of each direction of a dp_accounting PLD (remove;
    add when the PLD is not symmetric).

    dp_accounting (0.6) has no public getter for the PMF of a PLD (its public queries loop over
    the whole PMF in Python), so this is the one place that reads its private attributes
    (`_pmf_remove`, `_pmf_add`, `_symmetric` of the PLD, `_probs`, `_lower_loss`,
    `_discretization`, `_infinity_mass` of its dense PMF). pyproject bounds dp-accounting to the
    versions the tests cover; a version that renames them fails here with a RuntimeError, and
    tests/test_dependencies.py pins the meaning against dp_accounting's public query."""
    try:
        pmfs = [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]
        out = []
        for pmf in pmfs:
            dense = pmf.to_dense_pmf()  # public
            probs = np.asarray(dense._probs, dtype=float)
            losses = (np.arange(len(probs)) + dense._lower_loss) * dense._discretization
            out.append((losses, probs, float(dense._infinity_mass)))
    except AttributeError as err:
        raise RuntimeError(
            f"dp_accounting's PLD no longer has the private attribute auditsel reads ({err}); "
            f"install dp-accounting within the range auditsel declares (pyproject.toml) or "
            f"update auditsel.mechanisms.dense_pmfs"
        ) from err
    return out


def _pld_delta(
    sigma: float, steps: int, tau: float, eps: FloatArray, step: float = PLD_DISCRETIZATION
) -> FloatArray:
    """delta(eps) of the pessimistic PLD, max over add/remove: the sum of dp_accounting's
    `get_delta_for_epsilon` (the same running sums, in the same order), with a binary search
    per eps instead of a Python loop over the whole PMF."""
    eps = np.asarray(eps, dtype=float)
    best = np.zeros(eps.shape)
    for losses, upper, lower, inf_mass in pld_tails(sigma, steps, tau, step):
        k = len(losses) - np.searchsorted(losses, eps, side="right")  # losses above eps
        with np.errstate(over="ignore", invalid="ignore"):
            d = upper[k] - np.exp(eps) * lower[k]
        d = np.where(np.isposinf(eps), inf_mass, d)
        best = np.maximum(best, d)
    return best


def _event(sigma: float, steps: int, tau: float) -> DpEvent:
    import dp_accounting as dpa  # deferred: dp_accounting is heavy

    step = dpa.GaussianDpEvent(sigma)
    if tau < 1:
        step = dpa.PoissonSampledDpEvent(tau, step)
    return dpa.SelfComposedDpEvent(step, steps)


@lru_cache(maxsize=512)
def _calibrate(epsilon: float, delta: float, steps: int, tau: float, accountant: str) -> float:
    """sigma with eps_B(delta) = epsilon. RDP first (cheap for any sigma); the PLD accountant is
    tighter, so its sigma lies below the RDP one: search it in [sigma_rdp / 2^k, sigma_rdp],
    never building a PLD for a tiny sigma (its support would not fit in memory)."""
    import dp_accounting as dpa  # deferred: dp_accounting is heavy
    from dp_accounting import mechanism_calibration as calibration

    make: Callable[[], Any] = lambda: dpa.rdp.RdpAccountant(RDP_ORDERS)
    bracket: Any = calibration.LowerEndpointAndGuess(1e-3, 1.0)
    if accountant != "rdp":
        sigma_rdp = _calibrate(epsilon, delta, steps, tau, "rdp")  # the same search, cached
        make = lambda: dpa.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
        pld_eps: Callable[[float], float] = lambda s: (
            make().compose(_event(s, steps, tau)).get_epsilon(delta)
        )
        lo = sigma_rdp / 2
        while pld_eps(lo) <= epsilon and lo > sigma_rdp / 16:
            lo /= 2
        bracket = calibration.ExplicitBracketInterval(lo, sigma_rdp)
    with quiet_absl():  # dp_accounting's RDP warnings (its PLD logs none to absl)
        return float(
            calibration.calibrate_dp_mechanism(
                make, lambda s: _event(s, steps, tau), epsilon, delta, bracket, tol=1e-6
            )
        )
