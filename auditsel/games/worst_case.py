"""The worst-case DP-SGD game with Poisson subsampling (`game.kind: dpsgd_worst_case`).

One run is the one-dimensional worst case of [XWW24] Section 5 without the tau = 1 restriction:
an empty training set X = {} and X' = {z} with a Dirac canary z whose clipped gradient is C at
every step. In units of the clip norm C, step i of DP-SGD releases ::

    x_i = b * B_i + sigma * Z_i,     B_i ~ Bernoulli(tau),  Z_i ~ N(0, 1),  i = 1..N,

with b = 0 on X and b = 1 on X'. Each step is the pair (N(0, sigma^2), (1 - tau) N(0, sigma^2) +
tau N(1, sigma^2)), which is the tight dominating pair of the Poisson-subsampled Gaussian
mechanism under add/remove neighbours (Zhu, Dong & Wang 2022; Koskela et al. 2020): every other
pair of neighbouring data sets and every clipped gradient is a post-processing of it. The N steps
are independent given the coin (fresh subsampling and noise at each step), and the composition of
dominating pairs dominates the adaptive composition, so the run (x_1..x_N) is the worst case of
one DP-SGD run: no audit of one run can certify more than its privacy curve, which is what
dp_accounting's PLD accountant computes (pessimistically) for the same add/remove relation.

The run's log-likelihood ratio (X' against X) is ::

    s(x) = sum_i log(1 - tau + tau exp((2 x_i - 1) / (2 sigma^2))),

a sufficient statistic: by Neyman-Pearson, thresholds on s trace the exact trade-off curve of one
run, so with K = 1 the audit's eps_L approaches the run's true epsilon from below.

Tuning ([XWW24] Algorithm 2): K ~ xi runs, each with its own subsampling and noise on the same
data set, and the run with the highest score s is released (K = 0 releases a fixed output at
-inf). The released run y has density G'(F_b(s(y))) p_b(y), with G the pgf of K and F_b the cdf
of s under b, so its likelihood ratio depends on y only through s(y): the winner's score is a
sufficient statistic of the release, and it is what `release` returns (proxy `sample`).
For K > 1 the tuner's score is a choice of the protocol (selecting by the largest LLR is not
the worst case), so an audit of this game is a valid lower bound for the protocol it plays,
not a proof of tightness of the tuning bounds.

Scores. `score` (a `selection.TuningScore` over the run's label) is how the tuner ranks its
runs: `MonotoneScore` (largest or smallest label, default largest) or a `BucketScore` in label
units (the highest-ranked label bucket wins, ties broken by the larger label), e.g. the
worst-score attack's (`games.played_score`). The adversary reads `statistic(release)`: the
label for a monotone score, the bucket's `guess` for a bucket score (0 for K = 0).

Cost: linear in E[K] * N; runs are drawn in blocks of at most `block` steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike

from auditsel.errors import ConfigError, shown
from auditsel.games.played_score import resolve_score
from auditsel.mechanisms import DpsgdBase
from auditsel.rounds import RoundsLaw
from auditsel.selection import BucketScore, MonotoneScore, TuningScore

DEFAULT_BLOCK = 1 << 21  # steps per vectorised block (16 MiB of float64 per array)


def step_log_likelihood_ratio(
    x: ArrayLike, noise_multiplier: float, sample_rate: float
) -> np.ndarray:
    """log((1 - tau) + tau exp((2x - 1) / (2 sigma^2))) per step, overflow-safe (float64)."""
    a = (2.0 * np.asarray(x, dtype=float) - 1.0) / (2.0 * noise_multiplier**2)
    if sample_rate >= 1.0:
        return a
    return np.logaddexp(math.log1p(-sample_rate), math.log(sample_rate) + a)


def _step_terms(x: np.ndarray, noise_multiplier: float, sample_rate: float) -> np.ndarray:
    """The same in float32, in place on x. Where a > CAP, exp is capped at e^CAP and the excess
    added back (exact to float32 precision)."""
    a = x
    a *= np.float32(1.0 / noise_multiplier**2)
    a -= np.float32(0.5 / noise_multiplier**2)
    if sample_rate >= 1.0:
        return a
    excess = None
    if a.max(initial=-np.inf) > _CAP:
        excess = np.maximum(a - np.float32(_CAP), np.float32(0.0))
        a -= excess
    np.exp(a, out=a)
    a *= np.float32(sample_rate)
    a += np.float32(1.0 - sample_rate)
    np.log(a, out=a)
    if excess is not None:
        a += excess
    return a


_CAP = 80.0
PILOT_SEED = 0x5EED_0B0E


@dataclass(frozen=True)
class DpsgdWorstCase:
    """K ~ law runs of the worst-case N-step DP-SGD run; the best-scored run is released (by
    default the one of highest LLR, the label)."""

    #: joblib hint: the release is vectorised numpy, which frees the GIL
    parallel_prefer: ClassVar[str] = "threads"

    noise_multiplier: float
    steps: int
    sample_rate: float
    law: RoundsLaw
    block: int = DEFAULT_BLOCK
    #: how the tuner ranks its runs; "worst" is resolved per delta by `resolved(delta)`
    score: TuningScore | Literal["worst"] = MonotoneScore("largest", "label")

    def __post_init__(self) -> None:
        score = self.score
        if score == "worst":
            return
        if not isinstance(score, (MonotoneScore, BucketScore)):
            raise ConfigError(
                "game.score",
                "the DP-SGD game plays monotone, worst or a bucket score of the run's label "
                f"(a farthest score needs game.kind: reduced), got {score!r}",
            )
        if isinstance(score, BucketScore) and (score.unit != "label" or score.guess is None):
            raise ConfigError(
                "game.score", "a bucket score of the DP-SGD game needs label units and a guess"
            )
        if not (math.isfinite(self.noise_multiplier) and self.noise_multiplier > 0):
            raise ConfigError(
                "base.noise_multiplier", f"must be in (0, inf), got {shown(self.noise_multiplier)}"
            )
        if not (isinstance(self.steps, (int, np.integer)) and self.steps >= 1):
            raise ConfigError("base.steps", f"must be an integer >= 1, got {shown(self.steps)}")
        if not (0 < self.sample_rate <= 1):
            raise ConfigError(
                "base.sample_rate", f"must be in (0, 1], got {shown(self.sample_rate)}"
            )

    @classmethod
    def from_base(
        cls, base: DpsgdBase, law: RoundsLaw, score: TuningScore | None = None
    ) -> DpsgdWorstCase:
        """From a `mechanisms.DpsgdBase` (sigma, N, tau), the law of K and the tuner's score."""
        game = cls(base.noise_multiplier, base.steps, base.sample_rate, law)
        return game if score is None else replace(game, score=score)

    def resolved(self, delta: float) -> DpsgdWorstCase:
        """The game with score "worst" replaced by the score the worst-score attack finds at
        `delta` (with K = 1 always: the label); other games: self."""
        if self.score != "worst":
            return self
        one_run = self.law.p_zero == 0 and self.law.mean == 1
        pair = DpsgdBase(self.noise_multiplier, self.steps, self.sample_rate)
        score = (
            MonotoneScore("largest", "label")
            if one_run
            else resolve_score("worst", pair, self.law, delta)
        )
        return replace(self, score=score)

    def statistic(self, released: ArrayLike) -> np.ndarray:
        """The adversary's statistic of released labels (see the module docstring)."""
        released = np.asarray(released, dtype=float)
        score = self.score
        if isinstance(score, BucketScore):
            assert score.guess is not None  # checked in __post_init__
            return np.where(np.isfinite(released), score.adversary_statistic(released), 0.0)
        return released

    def _winners(self, scores: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The released label of each trial: the best of its `counts` runs under the score."""
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        score = self.score
        if isinstance(score, MonotoneScore):
            if score.direction == "largest":
                return np.maximum.reduceat(scores, starts)
            return np.minimum.reduceat(scores, starts)
        assert isinstance(score, BucketScore)  # "worst" is resolved before any release
        order = np.lexsort((np.arange(len(score.ranks)), np.asarray(score.ranks, dtype=float)))
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        pos = position[score.bucket(scores)]
        best = np.maximum.reduceat(pos, starts)
        kept = np.where(pos == np.repeat(best, counts), scores, -np.inf)
        return np.maximum.reduceat(kept, starts)

    def steps_of_runs(self, runs: int, member: int, rng: np.random.Generator) -> np.ndarray:
        """The released steps x (runs x N, float32) of `runs` runs, all on X (member 0) or X'."""
        x = rng.standard_normal((runs, self.steps), dtype=np.float32)
        x *= np.float32(self.noise_multiplier)
        if member:
            if self.sample_rate >= 1.0:
                x += np.float32(1.0)
            else:
                x += rng.random((runs, self.steps), dtype=np.float32) < np.float32(self.sample_rate)
        return x

    def run_scores(self, runs: int, member: int, rng: np.random.Generator) -> np.ndarray:
        """The LLR score s of `runs` runs on X or X', in blocks of at most `block` steps."""
        rows = max(1, self.block // self.steps)
        out = np.empty(runs, dtype=np.float64)
        for start in range(0, runs, rows):
            n = min(rows, runs - start)
            x = self.steps_of_runs(n, member, rng)
            out[start : start + n] = _step_terms(x, self.noise_multiplier, self.sample_rate).sum(
                axis=1
            )
        return out

    def release(self, member: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """For each coin: K ~ law, K runs, the winner's score (-inf for the fixed output, K = 0);
        the trials of each coin in blocks of whole trials holding about `block` steps."""
        if self.score == "worst":
            raise ConfigError(
                "score",
                "'worst' depends on delta: play game.resolved(delta) (auditsel.testing.audit "
                "does so)",
            )
        member = np.asarray(member)
        k = self.law.sample(len(member), rng).astype(np.int64)
        out = np.full(len(member), -np.inf)
        budget = max(1, self.block // self.steps)
        for b in (0, 1):
            played = np.flatnonzero((k > 0) & (member == b))
            counts_all = k[played]
            ends = np.cumsum(counts_all)
            first = 0
            while first < len(played):
                done = int(ends[first - 1]) if first else 0
                last = max(int(np.searchsorted(ends, done + budget, side="right")), first + 1)
                counts = counts_all[first:last]
                scores = self.run_scores(int(counts.sum()), b, rng)
                out[played[first:last]] = self._winners(scores, counts)
                first = last
        return out

    def score_range(self, trials: int = 1 << 13) -> tuple[float, float]:
        """A Bonferroni grid range fixed by the spec alone: the extreme finite winner scores of
        a pilot from SeedSequence(PILOT_SEED), which no chunk of any game uses."""
        rng = np.random.default_rng(np.random.SeedSequence(PILOT_SEED))
        scores = np.concatenate([self.release(np.full(trials, b, np.int8), rng) for b in (0, 1)])
        finite = scores[np.isfinite(scores)]
        if len(finite) == 0:
            return -1.0, 1.0
        lo, hi = float(finite.min()), float(finite.max())
        pad = 0.1 * max(hi - lo, 1e-6)
        return lo - pad, hi + pad

    @property
    def mean_step_draws(self) -> float:
        """E[K] * N: the expected number of Gaussian steps drawn per game."""
        return float(self.law.mean) * self.steps
