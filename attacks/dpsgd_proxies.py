"""Proxies of the DP-SGD game ([XWW24] eq. 10): observation -> real score, higher = "z was in".

With p_i the released private gradient of step i and p_i^z the canary's clipped gradient at
w_{i-1} (C e_0 for the Dirac canary)::

    lambda_a = (1/N) sum_{i=1}^N <p_i^z, p_i> / C^2
    lambda_b = lambda_a - g(y)   under NTNV      lambda_b = lambda_a + g(y)   under NTCV, ETCV

A proxy reads only the observation released by auditsel.dpsgd.tuning_protocol (fields ``canary_dots``
= the per-step <p_i^z, p_i> of the released trajectory, ``steps``, ``clip``, ``score`` = g(y),
``released``; see ``auditsel.dpsgd.tuning_protocol.RELEASE_FIELDS``): never the coin, k or a losing
run. lambda_a is computed here, from those released numbers.
The fixed output of k = 0 scores -inf. For ETCV with the Dirac canary, tau = 1 and one run,
lambda_a ~ N(b, sigma^2 / N) exactly ([XWW24] Sec. 5.1). ::

    likelihood_ratio = log A'(s) / A(s),  s = lambda_a sqrt(N) / sigma

with A, A' the laws of the released winner of the reduced game ([XWW24] Sec. 5: the best of
K ~ xi draws of N(0, 1) or N(mu, 1), mu = tau sqrt(N) / sigma; ``auditsel.selection``), built
from public knowledge only (sigma, N, tau and the law of K). Under ETCV with Z_D, tau = 1 and
one learning rate, s of each run is exactly N(b mu, 1) and the score g = (w_0 - w_N)[0] =
lr N C lambda_a ranks runs as s does, so the released s IS the reduced game's winner and this
proxy is the Neyman-Pearson test of the release. Elsewhere it is one more score (any score
gives a valid audit; only its power changes). k = 0 scores 0 (the fixed output has the same
mass under both coins).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attacks.names import DPSGD_PROXIES
from attacks.threats import ThreatModel, get_threat
from auditsel.errors import ConfigError
from auditsel.mechanisms import GaussianBase
from auditsel.selection import GaussianWinner

if TYPE_CHECKING:
    from auditsel.dpsgd.tuning_protocol import DpsgdRelease
    from auditsel.mechanisms import DpsgdBase
    from auditsel.rounds import RoundsLaw

__all__ = [
    "LambdaA",
    "LambdaB",
    "WinnerLikelihoodRatio",
    "DPSGD_PROXIES",
    "make_dpsgd_proxy",
    "canary_dot",
]


def canary_dot(obs: DpsgdRelease) -> np.ndarray:
    """sum_i <p_i^z, p_i> of each released run, summed step by step (float64)."""
    dots = np.asarray(obs["canary_dots"], dtype=np.float64)
    total = np.zeros(dots.shape[0])
    for i in range(dots.shape[1]):
        total += dots[:, i]
    return total


def _lambda_a(obs: DpsgdRelease) -> np.ndarray:
    released = np.asarray(obs["released"], dtype=bool)
    steps = np.where(released, obs["steps"], 1).astype(float)
    clip = np.where(released, obs["clip"], 1.0).astype(float)
    return np.where(released, canary_dot(obs) / (steps * clip * clip), -np.inf)


@dataclass(frozen=True)
class LambdaA:
    """lambda_a of eq. 10."""

    def __call__(self, obs: DpsgdRelease) -> np.ndarray:
        return _lambda_a(obs)


@dataclass(frozen=True)
class LambdaB:
    """lambda_b of eq. 10: lambda_a + s g(y), s = threat.score_sign (-1 NTNV, +1 NTCV/ETCV)."""

    threat: ThreatModel

    def __call__(self, obs: DpsgdRelease) -> np.ndarray:
        a = _lambda_a(obs)
        released = np.asarray(obs["released"], dtype=bool)
        g = np.where(released, np.asarray(obs["score"], dtype=float), 0.0)
        return np.where(released, a + self.threat.score_sign * g, -np.inf)


@dataclass(frozen=True)
class WinnerLikelihoodRatio:
    """log A'(s)/A(s) of the reduced game's winner at s = lambda_a sqrt(N)/sigma (see above)."""

    winner: GaussianWinner  # public laws, no coins
    scale: float  # sqrt(N) / sigma

    def __call__(self, obs: DpsgdRelease) -> np.ndarray:
        released = np.asarray(obs["released"], dtype=bool)
        s = np.where(released, _lambda_a(obs) * self.scale, -np.inf)
        return np.asarray(self.winner.log_likelihood_ratio(s), dtype=float)


def make_dpsgd_proxy(
    name: str,
    threat: str | ThreatModel | None = None,
    *,
    base: DpsgdBase | None = None,
    rounds: RoundsLaw | None = None,
) -> LambdaA | LambdaB | WinnerLikelihoodRatio:
    """lambda_a, or lambda_b under ``threat`` (a ThreatModel or its name). ``base`` (the public
    DP-SGD settings) and ``rounds`` (the public law of K) are for proxies that use them."""
    if name == "lambda_a":
        return LambdaA()
    if name == "lambda_b":
        if threat is None:
            raise ConfigError("game.threat", "lambda_b needs the threat model (ntnv, ntcv, etcv)")
        return LambdaB(get_threat(threat))
    if name == "likelihood_ratio":
        if base is None or rounds is None:
            raise ConfigError(
                "game.proxy", "likelihood_ratio needs the DP-SGD base and the law of K"
            )

        mu = base.sample_rate * float(np.sqrt(base.steps)) / base.noise_multiplier
        return WinnerLikelihoodRatio(
            GaussianWinner(GaussianBase(mu), rounds),
            float(np.sqrt(base.steps)) / base.noise_multiplier,
        )
    raise ConfigError("game.proxy", f"must be one of {', '.join(DPSGD_PROXIES)}, got {name!r}")
