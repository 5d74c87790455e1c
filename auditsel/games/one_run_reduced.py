"""The reduced one-run tuning game: m canaries as independent coordinates, one tuning run.

Game (the one-run analogue of [XWW24] Figure 5): each canary c = 1..m is included with
probability 1/2 (S_c in {0, 1}); the tuner draws K ~ xi and trains K runs; run j releases
Y_j in R^m with Y_jc ~ N(mu S_c, 1), all independent (a Dirac gradient canary on its own
coordinate; mu = sqrt(N)/sigma for DP-SGD with tau = 1). **The tuner selects the run with the
largest sum sum_c Y_jc** (the analogue of ETCV's score (w_0 - w_N)[c] summed over the canaries'
coordinates) and releases that run's whole vector; K = 0 releases a fixed vector (all zeros).
The adversary scores canary c by the winner's Y_c (within one run the Neyman-Pearson ranking).

Exact privacy w.r.t. one canary c (add/remove; the other canaries fixed, any values): write
the winner's vector as its standardised sum T = sum_c Y_c / sqrt(m) and the residual of
coordinate c. T is the winner of the reduced game with base mu_T = mu / sqrt(m) (run sums are
iid N(const + mu S_c / sqrt(m), 1)); given T, Y_c - T / sqrt(m) ~ N(mu S_c (1 - 1/m) + const,
(m-1)/m) whatever the selection, and the other coordinates carry no further information about
S_c. So the release is the composition of the reduced game at mu_T with an independent
Gaussian mechanism of mu_Y = mu sqrt(1 - 1/m): at m = 1 it is [XWW24]'s reduced game, at K = 1
the Gaussian mechanism mu (mu_T^2 + mu_Y^2 = mu^2), and as m grows the selection's extra leak
vanishes (each canary moves the selected sum by 1/sqrt(m) of its noise).

delta(eps) of the composition is one integral over T (the Y-part in closed form: for fixed T
the log-likelihood ratio A(T) + mu_Y z - mu_Y^2/2 is linear in the standardised residual z)::

  H_{e^eps}(P||Q) = int [p_P(t) Phi(mu_Y - u(t)) - e^eps p_Q(t) Phi(-u(t))] dt,
  u(t) = (eps - A(t)) / mu_Y + mu_Y / 2,  A = log p_P(t) / p_Q(t),

with p_b the reduced-game winner densities G'(F(t - b mu_T)) phi(t - b mu_T) (G: pgf of xi),
a trapezoid sum on GRID_POINTS points between the 1e-12 quantiles.

The trade-off family for [MMC24] (`TuningFamily`, theta = mu): a lower bound on the symmetrised
trade-off curve made of the supporting lines of the Neyman-Pearson tests (beta + e^c alpha is
minimal at the test "L > c"), so the hypothesis is never stronger than the true curve.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr, ndtri

from auditsel.errors import ConfigError
from auditsel.mechanisms import GaussianBase
from auditsel.numerics import check_deltas
from auditsel.rounds import RoundsLaw
from auditsel.selection import GaussianWinner, max_uniform_complement

GRID_POINTS = 20_001
LINE_LEVELS = 600
TEST_SUBSAMPLE = 8


@dataclass(frozen=True)
class OneRunReducedGame:
    """m canaries, one tuning run over the Gaussian base mu with K ~ law (module docstring)."""

    mu: float
    law: RoundsLaw
    canaries: int

    def __post_init__(self):
        if not self.canaries >= 2:
            raise ConfigError("canaries", f"must be an integer >= 2, got {self.canaries}")
        if not (self.mu > 0 and math.isfinite(self.mu)):
            raise ConfigError("mu", f"must be in (0, inf), got {self.mu}")

    def play(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One tuning run: (scores, inclusion bits) of the m canaries."""
        m = self.canaries
        member = rng.integers(0, 2, m)
        k = self.law.sample(1, rng)
        if k[0] == 0:
            return np.zeros(m), member
        # winner's standardised sum: max of K iid N(mu |S| / sqrt(m), 1), drawn in O(1)
        x = -ndtri(max_uniform_complement(k, rng))[0]
        noise = rng.standard_normal(m)
        # given the noise sum sqrt(m) x, the noise vector is x / sqrt(m) + a centred Gaussian
        noise = noise - noise.mean() + x / math.sqrt(m)
        return self.mu * member + noise, member

    def play_direct(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The same game by brute force (K runs of m coordinates, argmax of the sums): for tests."""
        m = self.canaries
        member = rng.integers(0, 2, m)
        k = int(self.law.sample(1, rng)[0])
        if k == 0:
            return np.zeros(m), member
        runs = self.mu * member + rng.standard_normal((k, m))
        return runs[np.argmax(runs.sum(axis=1))], member

    def epsilon(self, delta: float) -> float:
        """Exact eps at delta of the released winner w.r.t. one canary (both directions)."""
        return canary_curve(self.mu, self.law, self.canaries).epsilon(delta)

    @property
    def family(self) -> TuningFamily:
        return TuningFamily(self.law, self.canaries)


class _CanaryCurve:
    """delta(eps) and the Neyman-Pearson tests of one canary in the reduced one-run game."""

    def __init__(self, mu: float, law: RoundsLaw, m: int):
        self.mu_t = mu / math.sqrt(m)
        self.mu_y = mu * math.sqrt(1.0 - 1.0 / m)
        self.atom = law.p_zero
        winner = GaussianWinner(GaussianBase(self.mu_t), law)
        lo, hi = winner.quantile_range(1e-12)
        t = np.linspace(lo - 1.0, hi + 1.0, GRID_POINTS)
        w = np.full(GRID_POINTS, t[1] - t[0])
        w[[0, -1]] *= 0.5
        self.log_w = np.log(w)
        self.lp = (winner.log_density(t, 0), winner.log_density(t, 1))

    def hockey_stick(self, eps: float, direction: int) -> float:
        """H_{e^eps}(P_direction || P_other) (module docstring); the K = 0 atom adds 0 for eps >= 0."""
        lp_p, lp_q = self.lp[direction], self.lp[1 - direction]
        d = self.mu_y
        u = (eps - (lp_p - lp_q)) / d + d / 2
        terms = np.exp(self.log_w + lp_p + log_ndtr(d - u)) - np.exp(
            self.log_w + eps + lp_q + log_ndtr(-u)
        )
        return max(float(np.sum(terms)), 0.0)

    def delta(self, eps: float) -> float:
        return max(self.hockey_stick(eps, 0), self.hockey_stick(eps, 1))

    def epsilon(self, delta: float) -> float:
        delta = float(check_deltas(delta)[0])
        if self.delta(0.0) <= delta:
            return 0.0
        if delta == 0:  # Gaussian draws: the privacy loss is unbounded
            return math.inf
        hi = 1.0
        while self.delta(hi) > delta:
            hi *= 2
            if hi > 1e3:
                return math.inf
        f = lambda e: (
            (math.log(self.delta(e)) if self.delta(e) > 0 else -math.inf) - math.log(delta)
        )
        from scipy.optimize import brentq  # deferred: scipy.optimize, one-run games only

        return brentq(f, 0.0, hi, xtol=1e-9)

    def tests(self, levels=LINE_LEVELS):
        """(c, alpha_c, beta_c) of the tests "log dP1/dP0 > c": FP on P0 and FN on P1."""
        d = self.mu_y
        step = TEST_SUBSAMPLE  # every 8th grid point (trapezoid weights scaled): 2,501 nodes
        lp0, lp1 = self.lp[0][::step], self.lp[1][::step]
        log_w = np.log(np.exp(self.log_w[::step]) * step)
        log_w[[0, -1]] = np.log(np.exp(self.log_w[1]) * step / 2)
        a = lp1 - lp0
        c = np.linspace(a.min() - d * d / 2 - 9 * d, a.max() + d * d / 2 + 9 * d, levels)
        u = (c[:, None] - a[None, :]) / d + d / 2
        alpha = np.exp(log_w + lp0 + log_ndtr(-u)).sum(axis=1) + self.atom * (c < 0)
        power = np.exp(log_w + lp1 + log_ndtr(d - u)).sum(axis=1) + self.atom * (c < 0)
        return c, np.clip(alpha, 0, 1), np.clip(1 - power, 0, 1)


_CURVES: dict = {}
_LINES: dict = {}


def _key(mu, law, m):
    return (float(mu), json.dumps(law.describe(), sort_keys=True, default=str), int(m))


def canary_curve(mu: float, law: RoundsLaw, m: int) -> _CanaryCurve:
    """The per-canary curve of the game (mu, law, m), cached (a few MB each, at most 64 kept)."""
    key = _key(mu, law, m)
    if key not in _CURVES:
        if len(_CURVES) >= 64:
            _CURVES.pop(next(iter(_CURVES)))
        _CURVES[key] = _CanaryCurve(float(mu), law, int(m))
    return _CURVES[key]


def _fbar_lines(mu: float, law: RoundsLaw, m: int):
    """Lines x_i(y) = a_i + b_i y whose max is f^-1(y) of a lower bound f on the symmetrised
    trade-off curve (supporting lines of both directions), pruned to those on the envelope;
    cached."""
    key = _key(mu, law, m)
    if key in _LINES:
        return _LINES[key]
    c, alpha, beta = canary_curve(mu, law, m).tests()
    # y = beta - e^c (x - alpha)  ->  x = alpha + e^-c beta - e^-c y;   mirrored: x = beta + e^c alpha - e^c y
    a = np.concatenate([alpha + np.exp(-c) * beta, beta + np.exp(c) * alpha])
    b = np.concatenate([-np.exp(-c), -np.exp(c)])
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    y = np.linspace(0.0, 1.0, 4001)
    keep = np.unique(np.argmax(a[:, None] + b[:, None] * y[None, :], axis=0))
    _LINES[key] = a[keep], b[keep]
    return _LINES[key]


@dataclass(frozen=True)
class TuningFamily:
    """[MMC24] hypothesis family of the reduced one-run game: theta = base mu (module docstring)."""

    law: RoundsLaw
    canaries: int
    name: str = "tuning"

    def fbar_inverse(self, theta: float) -> Callable[[ArrayLike], np.ndarray]:
        a, b = _fbar_lines(round(theta, 12), self.law, self.canaries)

        def inverse(r: ArrayLike) -> np.ndarray:
            y = 1.0 - np.asarray(r, dtype=float)
            x = np.max(a[None, :] + b[None, :] * y[..., None], axis=-1)
            return np.where(y <= 0, 1.0, np.clip(x, 0.0, 1.0))

        return inverse

    def epsilon(self, theta: float, delta: float) -> float:
        return canary_curve(theta, self.law, self.canaries).epsilon(delta) if theta > 0 else 0.0

    def theta_grid(self) -> np.ndarray:
        return np.exp(np.arange(np.log(1e-2), np.log(12.0), np.log(1.01)))
