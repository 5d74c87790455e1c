"""gaussian_delta and gaussian_epsilon as `auditsel/mechanisms.py` had them at commit 28bd174
(copied unchanged), so that the pinned `lower` needs nothing from today's package."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr


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
    f = lambda e: (
        math.log(gaussian_delta(e, mu)) - math.log(delta) if gaussian_delta(e, mu) > 0 else -1e3
    )
    return brentq(f, 0.0, hi, xtol=1e-12, rtol=1e-12)
