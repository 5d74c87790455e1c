"""Proxies for the reduced and finite-output games: observation -> score (higher = "b = 1").

* SampleProxy: the released winner itself ([XWW24] Sec. 5: "the released sample itself is the
  proxy"); the fixed output of K = 0 sits at -inf.

* LikelihoodRatioProxy: log A'(y) / A(y) from the exact winner laws, which are public (the
  spec is known to the adversary). By Neyman-Pearson, thresholding it gives the most powerful
  test at every false-positive rate, i.e. the exact trade-off curve of the pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from auditsel.errors import ConfigError
from auditsel.roles import GameProtocol, Winner

__all__ = ["SampleProxy", "LikelihoodRatioProxy", "ScoreProxy", "PROXIES", "make_proxy"]


@dataclass(frozen=True)
class SampleProxy:
    def __call__(self, observations: ArrayLike) -> np.ndarray:
        return np.asarray(observations, dtype=float)


@dataclass(frozen=True)
class LikelihoodRatioProxy:
    public_law: Winner  # GaussianWinner or FiniteWinner: exact laws, no coins

    def __call__(self, observations: ArrayLike) -> np.ndarray:
        return np.asarray(self.public_law.log_likelihood_ratio(observations), dtype=float)


@dataclass(frozen=True)
class ScoreProxy:
    public_game: object  # a game with statistic(observations): public, no coins

    def __call__(self, observations: ArrayLike) -> np.ndarray:
        statistic = getattr(self.public_game, "statistic", None)
        values = observations if statistic is None else statistic(observations)
        return np.asarray(values, dtype=float)


PROXIES = ("sample", "likelihood_ratio", "score")


def make_proxy(
    name: str, public_law: GameProtocol
) -> SampleProxy | LikelihoodRatioProxy | ScoreProxy:
    """The proxy called `name` (one of PROXIES) for the game `public_law`, whose laws are
    public (for "likelihood_ratio": a Winner, with exact winner laws)."""
    if name == "sample":
        return SampleProxy()
    if name == "likelihood_ratio":
        return LikelihoodRatioProxy(cast(Winner, public_law))
    if name == "score":
        return ScoreProxy(public_law)
    raise ConfigError("game.proxy", f"must be one of {', '.join(PROXIES)}, got {name!r}")
