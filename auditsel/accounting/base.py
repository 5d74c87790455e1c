"""The base algorithm M as one DP-SGD training run, accounted with dp_accounting.

`DpsgdBase(noise_multiplier=sigma, steps=N, sample_rate=tau, accountant='rdp'|'pld')` is plain,
validated data. One run of M is the self-composition of N Poisson-subsampled Gaussian steps
(add/remove neighbours, sensitivity 1 after clipping), i.e. the dp_accounting event

    SelfComposedDpEvent(PoissonSampledDpEvent(tau, GaussianDpEvent(sigma)), N).

Everything that dp_accounting already computes is taken from it, not re-implemented:

* `epsilon(delta)`  eps_B of one run: `RdpAccountant` (orders `RDP_ORDERS`, the conversion of
  Canonne-Kamath-Steinke 2020 built into dp_accounting) or `PLDAccountant` (connect-the-dots,
  pessimistic, `PLD_DISCRETIZATION`);
* `rdp_curve(orders)`  the RDP curve of one run at the given orders (Mironov-Talwar-Zhang 2019,
  as implemented in dp_accounting); symmetric under add/remove, so it also bounds the reverse
  divergence used in [PS22] Theorem 2;
* `profile(eps)`  delta(eps) from dp_accounting's pessimistic (connect-the-dots) PLD, the max over
  the add and remove directions: a rigorous upper bound on the true privacy profile for every tau.

The one-number summaries of [XWW24] Sec. 5.1 and Appendix A.4:

* `mu` = tau sqrt(N) / sigma                                   ([XWW24] eq. 19)
  exact when tau = 1 (the N full-batch steps are N Gaussian mechanisms, whose composition is
  mu-GDP); for tau < 1 a large-N approximation (`mu_is_exact` is False: label it heuristic).
* `mu_gdp` = sqrt(2) c sqrt(e^(1/sigma^2) Phi(1.5/sigma) + 3 Phi(-0.5/sigma) - 2),  c = tau sqrt(N)
  ([DRS22] Cor. 5.4 via [XWW24] Appendix A.4, "Corollary 7"): the central-limit
  value, always heuristic (asymptotic in N with tau sqrt(N) fixed).

`DpsgdBase.from_epsilon(eps_B, delta, steps, sample_rate, accountant)` calibrates sigma with
dp_accounting's `mechanism_calibration.calibrate_dp_mechanism` so that one run is
(eps_B, delta)-DP under the chosen accountant.
"""
from __future__ import annotations

import contextlib
import logging
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import ndtr

import dp_accounting as dpa
from dp_accounting import mechanism_calibration
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from auditsel.errors import choice, integer, number

__all__ = ["DpsgdBase", "RDP_ORDERS", "PLD_DISCRETIZATION", "gdp_mu_dpsgd"]

#: RDP orders used for eps_B and for the DP-SGD base RDP curve: dp_accounting's default orders
#: (1.1..10.9 step 0.1, 11..63, 128, 256, 512, 1024) refined between 64 and 1024.
RDP_ORDERS = tuple(sorted(set(
    list(rdp_lib.DEFAULT_RDP_ORDERS)
    + [64.0, 80.0, 96.0, 112.0, 160.0, 192.0, 320.0, 384.0, 768.0]
)))

#: value_discretization_interval of the pessimistic PLD (dp_accounting connect-the-dots).
PLD_DISCRETIZATION = 1e-3

_ACCOUNTANTS = ("rdp", "pld")


@contextlib.contextmanager
def quiet_absl():
    """Silence dp_accounting's per-order convergence warnings (orders it drops are +inf)."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def gdp_mu_dpsgd(noise_multiplier: float, steps: int, sample_rate: float) -> float:
    """mu_GDP of [XWW24] Appendix A.4 (Dong et al. central limit theorem for DP-SGD)."""
    s = float(noise_multiplier)
    c = sample_rate * math.sqrt(steps)
    inner = math.exp(1.0 / s**2) * ndtr(1.5 / s) + 3.0 * ndtr(-0.5 / s) - 2.0
    return math.sqrt(2.0) * c * math.sqrt(max(inner, 0.0))


@dataclass(frozen=True)
class DpsgdBase:
    """One DP-SGD run: N Poisson-subsampled Gaussian steps ([XWW24] eq. 1)."""

    noise_multiplier: float
    steps: int
    sample_rate: float = 1.0
    accountant: str = "rdp"

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier",
                           number(self.noise_multiplier, "noise_multiplier", 0, math.inf, lo_open=True))
        object.__setattr__(self, "steps", integer(self.steps, "steps", 1))
        object.__setattr__(self, "sample_rate", number(self.sample_rate, "sample_rate", 0, 1, lo_open=True))
        choice(self.accountant, "accountant", _ACCOUNTANTS)

    # --- dp_accounting -------------------------------------------------------------------
    @property
    def event(self) -> "dpa.DpEvent":
        return _event(self.noise_multiplier, self.steps, self.sample_rate)

    def epsilon(self, delta: float, accountant: str | None = None) -> float:
        """eps_B of one run at delta, with this base's accountant (or the one given)."""
        accountant = accountant or self.accountant
        if accountant == "rdp":
            with quiet_absl():
                return float(dpa.rdp.RdpAccountant(RDP_ORDERS).compose(self.event)
                             .get_epsilon(delta))
        return float(self.pld().get_epsilon_for_delta(delta))

    def rdp_curve(self, orders) -> np.ndarray:
        """RDP of one run at each order (dp_accounting, Poisson-subsampled Gaussian)."""
        orders = np.asarray(orders, dtype=float)
        return _rdp_curve(self.noise_multiplier, self.steps, self.sample_rate,
                          tuple(orders.tolist()))

    def pld(self):
        """Pessimistic (connect-the-dots) PLD of one run, add/remove (dp_accounting)."""
        return _pld(self.noise_multiplier, self.steps, self.sample_rate)

    def profile(self, eps):
        """delta(eps) of one run from the pessimistic PLD (max over add/remove), vectorised."""
        eps_arr = np.atleast_1d(np.asarray(eps, dtype=float))
        out = np.asarray(self.pld().get_delta_for_epsilon(eps_arr), dtype=float)
        return out if np.ndim(eps) else float(out[0])

    # --- one-number summaries -------------------------------------------------------------
    @property
    def mu(self) -> float:
        """tau sqrt(N) / sigma ([XWW24] eq. 19)."""
        return self.sample_rate * math.sqrt(self.steps) / self.noise_multiplier

    @property
    def mu_is_exact(self) -> bool:
        """eq. 19 is exact only for full-batch training (tau = 1)."""
        return self.sample_rate == 1.0

    @property
    def mu_gdp(self) -> float:
        """Central-limit GDP parameter ([XWW24] Appendix A.4)."""
        return gdp_mu_dpsgd(self.noise_multiplier, self.steps, self.sample_rate)

    @classmethod
    def from_epsilon(cls, epsilon: float, delta: float, steps: int, sample_rate: float = 1.0,
                     accountant: str = "rdp") -> "DpsgdBase":
        """The base whose one run is (epsilon, delta)-DP under `accountant` (sigma calibrated)."""
        epsilon = number(epsilon, "epsilon", 0, math.inf, lo_open=True)
        delta = number(delta, "delta", 0, 1, lo_open=True, hi_open=True)
        probe = cls(1.0, steps, sample_rate, accountant)  # validates the other fields
        sigma = _calibrate(float(epsilon), float(delta), probe.steps, probe.sample_rate, accountant)
        return cls(sigma, probe.steps, probe.sample_rate, accountant)

    def describe(self) -> dict:
        return {"kind": "dpsgd", "noise_multiplier": self.noise_multiplier, "steps": self.steps,
                "sample_rate": self.sample_rate, "accountant": self.accountant}


@lru_cache(maxsize=256)
def _rdp_curve(sigma: float, steps: int, tau: float, orders: tuple) -> np.ndarray:
    acc = dpa.rdp.RdpAccountant(list(orders))
    base = DpsgdBase(sigma, steps, tau)
    with quiet_absl():
        acc.compose(base.event)
    # dp_accounting keeps the composed curve in `_rdp`; there is no public getter.
    return np.array(acc._rdp, dtype=float)  # noqa: SLF001


@lru_cache(maxsize=64)
def _pld(sigma: float, steps: int, tau: float):
    if tau >= 1:
        # N full-batch Gaussian steps are exactly one Gaussian with noise sigma / sqrt(N)
        return pld_lib.from_gaussian_mechanism(
            sigma / math.sqrt(steps), value_discretization_interval=PLD_DISCRETIZATION,
            use_connect_dots=True, pessimistic_estimate=True)
    single = pld_lib.from_gaussian_mechanism(
        sigma, sampling_prob=tau, value_discretization_interval=PLD_DISCRETIZATION,
        use_connect_dots=True, pessimistic_estimate=True)
    return single.self_compose(steps)


def _event(sigma: float, steps: int, tau: float):
    step = dpa.GaussianDpEvent(sigma) if tau >= 1 else \
        dpa.PoissonSampledDpEvent(tau, dpa.GaussianDpEvent(sigma))
    return dpa.SelfComposedDpEvent(step, steps)


@lru_cache(maxsize=512)
def _calibrate(epsilon: float, delta: float, steps: int, tau: float, accountant: str) -> float:
    """sigma with eps_B(delta) = epsilon. RDP first (cheap for any sigma); the PLD accountant is
    tighter, so its sigma lies below the RDP one: search it in [sigma_rdp / 2^k, sigma_rdp],
    never building a PLD for a tiny sigma (its support would not fit in memory)."""
    make_rdp = lambda: dpa.rdp.RdpAccountant(RDP_ORDERS)
    with quiet_absl():
        sigma_rdp = float(mechanism_calibration.calibrate_dp_mechanism(
            make_rdp, lambda s: _event(s, steps, tau), epsilon, delta,
            mechanism_calibration.LowerEndpointAndGuess(1e-3, 1.0), tol=1e-6))
    if accountant == "rdp":
        return sigma_rdp
    make_pld = lambda: dpa.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    pld_eps = lambda s: make_pld().compose(_event(s, steps, tau)).get_epsilon(delta)
    lo = sigma_rdp / 2
    while pld_eps(lo) <= epsilon and lo > sigma_rdp / 16:
        lo /= 2
    return float(mechanism_calibration.calibrate_dp_mechanism(
        make_pld, lambda s: _event(s, steps, tau), epsilon, delta,
        mechanism_calibration.ExplicitBracketInterval(lo, sigma_rdp), tol=1e-6))
