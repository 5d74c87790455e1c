"""Base mechanisms M with exact output laws on a pair of neighbouring data sets X, X'.

* GaussianBase(mu): one draw from N(0, 1) on X and N(mu, 1) on X'. This is one DP-SGD run
  after the reduction of [XWW24] Sec. 5 (eq. 18-19: mu = tau sqrt(N) / sigma). Its privacy
  profile (Balle & Wang 2018; [KRW24] "Base profiles") is, for every real eps,

      delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu),

  the same in both directions. `GaussianBase.from_epsilon(eps_B, delta)` calibrates mu so that
  delta(eps_B) = delta.
* FiniteOutputBase(p, q): outputs 0..m-1 listed from the lowest to the highest score, with
  probabilities p on X and q on X' ([XWW24] Example 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr

from auditsel.errors import ConfigError, number

__all__ = ["GaussianBase", "FiniteOutputBase", "gaussian_delta", "gaussian_epsilon", "gaussian_mu"]


def gaussian_delta(eps, mu):
    """Hockey-stick divergence H_{e^eps}(N(0,1) || N(mu,1)) in log space (exact, any real eps)."""
    eps = np.asarray(eps, dtype=float)
    if mu <= 0:
        return np.maximum(-np.expm1(eps), 0.0)
    log_a = log_ndtr(mu / 2 - eps / mu)
    log_b = eps + log_ndtr(-mu / 2 - eps / mu)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.exp(log_a) * -np.expm1(np.minimum(log_b - log_a, 0.0))
    return np.maximum(out, 0.0)


def gaussian_epsilon(delta: float, mu: float) -> float:
    """Smallest eps >= 0 with gaussian_delta(eps, mu) <= delta (inf when delta = 0)."""
    if delta <= 0:
        return math.inf
    if mu <= 0 or gaussian_delta(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gaussian_delta(hi, mu) > delta:
        hi *= 2
    f = lambda e: math.log(gaussian_delta(e, mu)) - math.log(delta) if gaussian_delta(e, mu) > 0 else -1e3
    return brentq(f, 0.0, hi, xtol=1e-12, rtol=1e-12)


def gaussian_mu(epsilon: float, delta: float) -> float:
    """The mu with gaussian_delta(epsilon, mu) = delta (eps_B -> mu calibration)."""
    epsilon = number(epsilon, "epsilon", 0)
    delta = number(delta, "delta", 0, 1, lo_open=True, hi_open=True)
    lo, hi = 1e-12, 1.0
    while gaussian_delta(epsilon, hi) < delta:
        hi *= 2
    f = lambda m: math.log(max(gaussian_delta(epsilon, m), 1e-320)) - math.log(delta)
    return brentq(f, lo, hi, xtol=1e-14, rtol=1e-13)


@dataclass(frozen=True)
class GaussianBase:
    """N(0,1) on X, N(mu,1) on X' ([XWW24] Figure 5)."""

    mu: float

    def __post_init__(self):
        object.__setattr__(self, "mu", number(self.mu, "mu", 0, math.inf, lo_open=True))

    @classmethod
    def from_epsilon(cls, epsilon: float, delta: float) -> "GaussianBase":
        return cls(gaussian_mu(epsilon, delta))

    def delta(self, eps):
        return gaussian_delta(eps, self.mu)

    def epsilon(self, delta: float) -> float:
        return gaussian_epsilon(delta, self.mu)

    def shift(self, member) -> np.ndarray:
        """Mean of the draw: 0 on X (member = 0), mu on X' (member = 1)."""
        return np.asarray(member, dtype=float) * self.mu


@dataclass(frozen=True)
class FiniteOutputBase:
    """Outputs 0..m-1 in increasing score order; p on X, q on X'."""

    p: tuple
    q: tuple

    def __post_init__(self):
        p = np.asarray(self.p, dtype=float)
        q = np.asarray(self.q, dtype=float)
        for name, v in (("p", p), ("q", q)):
            if v.ndim != 1 or len(v) < 2:
                raise ConfigError(name, "must be a list of at least 2 probabilities")
            if not np.all(np.isfinite(v)) or np.any(v < 0):
                raise ConfigError(name, "probabilities must be finite and >= 0")
            if abs(v.sum() - 1) > 1e-9:
                raise ConfigError(name, f"probabilities must sum to 1 (within 1e-9), got {v.sum()!r}")
        if len(p) != len(q):
            raise ConfigError("q", f"must have the same length as p ({len(p)}), got {len(q)}")
        object.__setattr__(self, "p", tuple((p / p.sum()).tolist()))
        object.__setattr__(self, "q", tuple((q / q.sum()).tolist()))

    def law(self, member: int) -> np.ndarray:
        return np.asarray(self.q if member else self.p, dtype=float)

    def delta(self, eps):
        """max over directions of sum_y [P(y) - e^eps Q(y)]_+."""
        from auditsel.accounting.exact import hockey_stick_finite

        p, q = self.law(0), self.law(1)
        return np.maximum(hockey_stick_finite(p, q, eps), hockey_stick_finite(q, p, eps))

    @classmethod
    def example1(cls, b: float = 1e-3, d: float = 1e2, eps: float = 1.0) -> "FiniteOutputBase":
        """[XWW24] Example 1: an (eps, 0)-DP base on {A, B, C} where selection is worst."""
        e = math.exp(eps)
        return cls((1 - b * e - d * b, b * e, d * b), (1 - b - d * b * e, b, d * b * e))
