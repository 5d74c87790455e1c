"""Tuning scores as data: how a tuning run ranks its K runs before it releases the best one.

Contract. A tuning run ([XWW24] Algorithm 2) releases the run with the highest score; the score
is any function of a run's output that the analyst or a controlled-validation adversary picks.
An epsilon for the tuning run holds for every score, or it is not a guarantee for the tuning run.
[XWW24] (Sec. 5.2, Theorem 1, Proposition 3) assumes a continuous one-to-one score of the
reduced Gaussian draw, hence monotone (`MonotoneScore`); a score that is not one-to-one (the run
farthest from a point wins, `FarthestScore`) leaks more. The attack of `accounting.attack` finds
a score whose lower sets are intervals of the privacy-loss-label order and returns it as a
`BucketScore`, so that a game can play it.

Units. `unit = "label"`: a run's privacy-loss label l(y) = log(q(y) / p(y)) with q the law on
X' = X u {z} (the canary in) and p on X (for the reduced Gaussian game of shift mu,
l(x) = mu x - mu^2 / 2, increasing in x; for N steps the sum of the steps' labels). `unit =
"output"`: the run's output itself (the reduced game's x).

Ties. Runs of equal score are broken by the larger value (label or output); any tie rule gives
the same law of the released bucket, which is all the adversary of a `BucketScore` reads.

Each score maps an array of values (one per run) to an array of scores, higher wins:
`score.score(values)`. Nothing here draws randomness or reads a coin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from auditsel.errors import ConfigError

__all__ = [
    "MonotoneScore",
    "FarthestScore",
    "BucketScore",
    "TuningScore",
    "tuning_score_from_spec",
]

Unit = Literal["label", "output"]


@dataclass(frozen=True)
class MonotoneScore:
    """The run with the largest value wins (`direction="largest"`), or the smallest.

    [XWW24]'s assumption (Sec. 5.2): the score is a continuous one-to-one, hence monotone,
    function of the reduced draw; the reduced game's values (`reduced_game.*`) hold only for it.
    """

    direction: Literal["largest", "smallest"] = "largest"
    unit: Unit = "output"

    def score(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        return values if self.direction == "largest" else -values

    def describe(self) -> str:
        return (
            f"monotone: the run with the {self.direction} {self.unit} wins ([XWW24]'s assumption)"
        )


@dataclass(frozen=True)
class FarthestScore:
    """The run farthest from `center` wins: s(y) = |y - center| (not one-to-one)."""

    center: float
    unit: Unit = "output"

    def score(self, values: np.ndarray) -> np.ndarray:
        return np.abs(np.asarray(values, dtype=float) - self.center)

    def describe(self) -> str:
        return f"farthest: the run farthest from {self.center:g} ({self.unit} units) wins"


@dataclass(frozen=True)
class BucketScore:
    """A score constant on buckets of the value: bucket i is (edges[i-1], edges[i]] with
    edges[-1] = -inf and edges[len] = +inf, and its score is `ranks[i]` (higher wins).

    `shape` says how the attack found it: "extremes" (every lower set {s <= t} is an interval of
    buckets: the runs far out on either side win), "middle" (every lower set is the complement
    of an interval: the middle wins), "monotone", or "other". `guess`, when given, is the
    adversary's statistic for each bucket of the released winner (higher = "the canary is in";
    the log likelihood ratio of the winner's bucket under the two laws, +-inf allowed): a game
    that plays this score thresholds it.
    """

    edges: tuple[float, ...]
    ranks: tuple[float, ...]
    unit: Unit = "label"
    shape: Literal["extremes", "middle", "monotone", "other"] = "other"
    guess: tuple[float, ...] | None = field(default=None)

    def __post_init__(self) -> None:
        edges = np.asarray(self.edges, dtype=float)
        if edges.ndim != 1 or (edges.size and not np.all(np.diff(edges) > 0)):
            raise ConfigError("score.edges: a strictly increasing list of numbers")
        if len(self.ranks) != len(self.edges) + 1:
            raise ConfigError("score.ranks: one rank per bucket (len(edges) + 1)")
        if self.guess is not None and len(self.guess) != len(self.ranks):
            raise ConfigError("score.guess: one value per bucket (len(edges) + 1)")

    def bucket(self, values: np.ndarray) -> np.ndarray:
        """The bucket index of each value (0 .. len(edges))."""
        return np.searchsorted(np.asarray(self.edges, dtype=float), values, side="left")

    def score(self, values: np.ndarray) -> np.ndarray:
        return np.asarray(self.ranks, dtype=float)[self.bucket(values)]

    def adversary_statistic(self, values: np.ndarray) -> np.ndarray:
        """The adversary's statistic of released values (their buckets' `guess`)."""
        if self.guess is None:
            raise ValueError("this BucketScore carries no adversary statistic (guess)")
        return np.asarray(self.guess, dtype=float)[self.bucket(values)]

    def describe(self) -> str:
        cuts = ", ".join(f"{e:.4g}" for e in self.edges[:6])
        more = f", ... ({len(self.edges)} cuts)" if len(self.edges) > 6 else ""
        return f"{self.shape}: {len(self.ranks)} buckets of the {self.unit}, cuts at {cuts}{more}"


TuningScore = MonotoneScore | FarthestScore | BucketScore


def tuning_score_from_spec(spec: object) -> TuningScore | Literal["worst"]:
    """A config's `game.score`: "monotone", "worst" (resolved per setting by the attack of
    `accounting.attack`), or {kind: farthest, center: C}."""
    if spec is None or spec == "monotone":
        return MonotoneScore()
    if spec == "worst":
        return "worst"
    if isinstance(spec, dict) and spec.get("kind") == "farthest":
        extra = set(spec) - {"kind", "center"}
        if extra:
            raise ConfigError(f"game.score: unknown key {sorted(extra)[0]!r} (kind, center)")
        center = spec.get("center")
        if isinstance(center, bool) or not isinstance(center, (int, float)):
            raise ConfigError("game.score.center: a finite number (output units)")
        if not np.isfinite(center):
            raise ConfigError("game.score.center: a finite number (output units)")
        return FarthestScore(float(center))
    raise ConfigError("game.score: monotone | worst | {kind: farthest, center: C}")
