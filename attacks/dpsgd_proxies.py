"""Proxies of the DP-SGD game ([XWW24] eq. 10): observation -> real score, higher = "z was in".

With p_i the released private gradient of step i and p_i^z the canary's clipped gradient at
w_{i-1} (C e_0 for the Dirac canary):

    lambda_a = (1/N) sum_{i=1}^N <p_i^z, p_i> / C^2
    lambda_b = lambda_a - g(y)   under NTNV      lambda_b = lambda_a + g(y)   under NTCV, ETCV

A proxy reads only the observation released by auditsel.dpsgd.protocol (fields ``canary_dot``
= sum_i <p_i^z, p_i>, ``steps``, ``clip``, ``score`` = g(y), ``released``): never the coin.
The fixed output of k = 0 scores -inf. For ETCV with the Dirac canary, tau = 1 and one run,
lambda_a ~ N(b, sigma^2 / N) exactly ([XWW24] Sec. 5.1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.threats import ThreatModel, get_threat
from auditsel.errors import ConfigError

__all__ = ["LambdaA", "LambdaB", "DPSGD_PROXIES", "make_dpsgd_proxy"]

DPSGD_PROXIES = ("lambda_a", "lambda_b")


def _lambda_a(obs) -> np.ndarray:
    released = np.asarray(obs["released"], dtype=bool)
    steps = np.where(released, obs["steps"], 1).astype(float)
    clip = np.where(released, obs["clip"], 1.0).astype(float)
    dot = np.asarray(obs["canary_dot"], dtype=float)
    return np.where(released, dot / (steps * clip * clip), -np.inf)


@dataclass(frozen=True)
class LambdaA:
    """lambda_a of eq. 10."""

    def __call__(self, obs) -> np.ndarray:
        return _lambda_a(obs)


@dataclass(frozen=True)
class LambdaB:
    """lambda_b of eq. 10: lambda_a + s g(y), s = threat.score_sign (-1 NTNV, +1 NTCV/ETCV)."""

    threat: ThreatModel

    def __call__(self, obs) -> np.ndarray:
        a = _lambda_a(obs)
        released = np.asarray(obs["released"], dtype=bool)
        g = np.where(released, np.asarray(obs["score"], dtype=float), 0.0)
        return np.where(released, a + self.threat.score_sign * g, -np.inf)


def make_dpsgd_proxy(name: str, threat=None, *, base=None, rounds=None):
    """lambda_a, or lambda_b under ``threat`` (a ThreatModel or its name). ``base`` (the public
    DP-SGD settings) and ``rounds`` (the public law of K) are for proxies that use them."""
    if name == "lambda_a":
        return LambdaA()
    if name == "lambda_b":
        if threat is None:
            raise ConfigError("game.threat", "lambda_b needs the threat model (ntnv, ntcv, etcv)")
        return LambdaB(get_threat(threat))
    raise ConfigError("game.proxy", f"must be one of {', '.join(DPSGD_PROXIES)}, got {name!r}")
