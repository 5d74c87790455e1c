"""The tuning protocol H ([XWW24] Algorithm 2) and the exact law of its released winner.

H draws K ~ xi, runs the base K times and releases the best-scored output; K = 0 (Poisson,
binomial, pmf laws) releases a fixed, data-independent output, which we place at -inf.

Exact winner laws, with G the pgf of xi ([XWW24] Theorem 2 / eq. 7, [PS22] Lemma 7 proof):

* finite-output base with cdf C in score order:  A(y) = G(C(<=y)) - G(C(<y));
* Gaussian base (the reduced game of [XWW24] Figure 5): cdf G(F(x - s)) and density
  G'(F(x - s)) phi(x - s), with s = 0 on X and s = mu on X' (F, phi: standard normal).

Sampling the winner costs O(1) per trial whatever K is: the max of k iid draws with cdf F has
cdf F^k, so it is F^-1(U^(1/k)) with U uniform; we evaluate 1 - U^(1/k) = -expm1(log(U)/k)
so that k up to 10^12 keeps full precision in the upper tail.

Tuning scores (`MonotoneScore`, `FarthestScore`, `BucketScore`) are data too: how H ranks its
runs before it releases the best one.

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
from typing import ClassVar, Literal

import numpy as np
from scipy.special import log_ndtr, ndtri

from auditsel.errors import ConfigError
from auditsel.mechanisms import FiniteOutputBase, GaussianBase
from auditsel.numerics import bisect
from auditsel.roles import MechanismPair
from auditsel.rounds import RoundsLaw

__all__ = [
    "MonotoneScore",
    "FarthestScore",
    "BucketScore",
    "TuningScore",
    "tuning_score_from_spec",
    "GaussianWinner",
    "FiniteWinner",
    "max_uniform_complement",
    "winner_law",
    "log_difference",
]

LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


def max_uniform_complement(k: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """1 - max(U_1..U_k) for k iid uniforms, drawn in O(1) each (0 where... k = 0 gives 1)."""
    u = rng.random(len(k))
    with np.errstate(divide="ignore"):
        return -np.expm1(np.log(u) / np.maximum(k, 1)) * (k > 0) + (k == 0)


@dataclass(frozen=True)
class GaussianWinner:
    """Winner of H over the Gaussian base: the reduced tuning game of [XWW24] Sec. 5."""

    #: joblib hint: the release is vectorised numpy, which frees the GIL, so threads run the
    #: chunks in parallel without the start-up of worker processes (`auditsel.games.engine.run_game`)
    parallel_prefer: ClassVar[str] = "threads"

    base: GaussianBase
    law: RoundsLaw

    @property
    def mu(self) -> float:
        return self.base.mu

    @property
    def atom(self) -> float:
        """Mass of the fixed output (K = 0), the same on X and X'."""
        return self.law.p_zero

    def log_density(self, x, member: int):
        """log of G'(F(x - s)) phi(x - s) (continuous part), s = member * mu."""
        t = np.asarray(x, dtype=float) - member * self.mu
        log_z, log_w = log_ndtr(t), log_ndtr(-t)
        return (
            self.law.log_pgf_derivative(np.exp(log_z), np.exp(log_w), log_z=log_z)
            - 0.5 * t * t
            - LOG_SQRT_2PI
        )

    def log_likelihood_ratio(self, x):
        """log p_X'(x) / p_X(x): the Neyman-Pearson statistic (0 at the fixed output)."""
        x = np.asarray(x, dtype=float)
        finite = np.isfinite(x)
        xf = np.where(finite, x, 0.0)
        return np.where(finite, self.log_density(xf, 1) - self.log_density(xf, 0), 0.0)

    def mass(self, a, b, member: int):
        """P[a < winner <= b] on the real line (the fixed output excluded), accurate in the tails."""
        s = member * self.mu
        u = np.asarray(a, dtype=float) - s
        v = np.asarray(b, dtype=float) - s
        law = self.law
        upper = u > 0  # both ends in the upper half: use 1 - G(1 - w) with w = 1 - F
        with np.errstate(invalid="ignore"):
            via_tail = law.pgf_complement(_sf(u)) - law.pgf_complement(_sf(v))
            via_cdf = law.pgf_above_zero(_cdf(v)) - law.pgf_above_zero(_cdf(u))
        return np.maximum(np.where(upper, via_tail, via_cdf), 0.0)

    def cell_masses(self, edges, member: int):
        """`mass(edges[:-1], edges[1:], member)` for ascending edges, each edge's pgf terms
        computed once instead of twice: the same numbers, half the work."""
        t = np.asarray(edges, dtype=float) - member * self.mu
        law = self.law
        with np.errstate(invalid="ignore"):
            tail = law.pgf_complement(_sf(t))
            head = law.pgf_above_zero(_cdf(t))
        via_tail = tail[:-1] - tail[1:]
        via_cdf = head[1:] - head[:-1]
        return np.maximum(np.where(t[:-1] > 0, via_tail, via_cdf), 0.0)

    def log_mass(self, a, b, member: int):
        """log P[a < winner <= b] (the fixed output excluded), from the laws' log-space pgf
        forms: full relative precision for masses far below the smallest double."""
        s = member * self.mu
        u = np.asarray(a, dtype=float) - s
        v = np.asarray(b, dtype=float) - s
        law = self.law
        upper = u > 0  # both ends in the upper half: 1 - G(1 - w), w = 1 - F
        with np.errstate(invalid="ignore"):
            hi = np.where(
                upper, law.log_pgf_complement(log_ndtr(-u)), law.log_pgf_above_zero(log_ndtr(v))
            )
            lo = np.where(
                upper, law.log_pgf_complement(log_ndtr(-v)), law.log_pgf_above_zero(log_ndtr(u))
            )
        return log_difference(hi, lo)

    def cdf(self, x, member: int):
        """P[winner <= x], the fixed output (at -inf) included."""
        return self.law.pgf(_cdf(np.asarray(x, dtype=float) - member * self.mu))

    def release(self, member: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Run H for each coin in `member`: K ~ xi, the max of K draws of N(member * mu, 1)."""
        k = self.law.sample(len(member), rng)
        w = max_uniform_complement(k, rng)
        with np.errstate(divide="ignore"):
            x = -ndtri(w)
        return np.where(k > 0, x + self.base.shift(member), -np.inf)

    def quantile_range(self, tail: float = 1e-6) -> tuple[float, float]:
        """[lo, hi]: the tail-quantile of the winner on X and the (1 - tail)-quantile on X'.

        Data-independent (a function of the spec only), so a threshold grid over it keeps the
        Bonferroni rule valid.
        The winner on X' is the winner on X shifted by mu, so both quantiles are those of the
        winner of K standard normals (`standard_winner_quantiles`, found once per law and tail),
        the upper one shifted by mu.
        """
        lo, hi = standard_winner_quantiles(self.law, tail)
        return lo, float(self.mu + hi)


def _standard_winner_quantiles(law: RoundsLaw, tail: float) -> tuple[float, float]:
    """(x0, x1): G(F(x0)) = tail and P[x1 < winner] = tail for the winner of K ~ law standard
    normals (F their cdf, G the pgf of K), bisected on [-40, 40] to a few ulps (it runs once
    per law and tail); -40 (resp. 40) where the K = 0 atom or the tail leaves no root there."""
    lower = lambda x: float(law.pgf(_cdf(np.float64(x)))) - tail
    upper = lambda x: _mass_above(law, x) - tail
    a, b = -40.0, 40.0
    lo = bisect(lower, a, b, xtol=1e-15, rtol=1e-15) if lower(a) < 0 < lower(b) else a
    hi = bisect(upper, a, b, xtol=1e-15, rtol=1e-15) if upper(a) > 0 > upper(b) else b
    return float(lo), float(hi)


_QUANTILES: dict = {}  # (law key, tail) -> quantiles; laws are frozen data


def standard_winner_quantiles(law: RoundsLaw, tail: float) -> tuple[float, float]:
    """`_standard_winner_quantiles`, computed once per (law, tail) and cached (a law that
    cannot be hashed, e.g. a pmf table, is keyed by its repr: its fields, floats exactly)."""
    try:
        key: object = (law, float(tail))
        hash(key)
    except TypeError:
        key = (type(law), repr(law), float(tail))
    got = _QUANTILES.get(key)
    if got is None:
        if len(_QUANTILES) >= 1024:
            _QUANTILES.clear()
        got = _QUANTILES[key] = _standard_winner_quantiles(law, float(tail))
    return got


def _mass_above(law: RoundsLaw, u: float) -> float:
    """P[u < winner < inf] of the winner of K standard normals, as `GaussianWinner.mass`."""
    with np.errstate(invalid="ignore"):
        if u > 0:
            return float(max(law.pgf_complement(_sf(u)) - law.pgf_complement(0.0), 0.0))
        return float(max(law.pgf_above_zero(1.0) - law.pgf_above_zero(_cdf(u)), 0.0))


def log_difference(hi, lo):
    """log(e^hi - e^lo), -inf where lo >= hi (vectorised)."""
    hi, lo = np.broadcast_arrays(np.asarray(hi, dtype=float), np.asarray(lo, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = hi + np.log(-np.expm1(np.minimum(lo - hi, 0.0)))
    return np.where((lo < hi) & np.isfinite(hi), out, np.where(np.isposinf(hi), np.inf, -np.inf))


def _cdf(t):
    return np.exp(log_ndtr(t))


def _sf(t):
    return np.exp(log_ndtr(-t))


@dataclass(frozen=True)
class FiniteWinner:
    """Winner of H over a finite-output base ([XWW24] Theorem 2, eq. 7)."""

    #: joblib hint: the release is vectorised numpy, which frees the GIL, so threads run the
    #: chunks in parallel without the start-up of worker processes (`auditsel.games.engine.run_game`)
    parallel_prefer: ClassVar[str] = "threads"

    base: FiniteOutputBase
    law: RoundsLaw

    @property
    def atom(self) -> float:
        return self.law.p_zero

    def pmf(self, member: int) -> np.ndarray:
        """A(y) = G(C(<=y)) - G(C(<y)) for y = 0..m-1 (the K = 0 mass excluded)."""
        probs = self.base.law(member)
        below = np.concatenate([[0.0], np.cumsum(probs)[:-1]])  # C(<y)
        at_or_above = np.cumsum(probs[::-1])[::-1]  # 1 - C(<y)
        above = np.concatenate([at_or_above[1:], [0.0]])  # 1 - C(<=y)
        via_cdf = self.law.pgf_above_zero(below + probs) - self.law.pgf_above_zero(below)
        via_tail = self.law.pgf_complement(at_or_above) - self.law.pgf_complement(above)
        return np.maximum(np.where(below > 0.5, via_tail, via_cdf), 0.0)

    def log_likelihood_ratio(self, y):
        y = np.asarray(y)
        with np.errstate(divide="ignore"):
            llr = np.log(self.pmf(1)) - np.log(self.pmf(0))
        return np.where(y >= 0, llr[np.clip(y, 0, None).astype(int)], 0.0)

    def release(self, member: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Run H for each coin; release the index of the best of K draws (-1 for the fixed output when K = 0)."""
        k = self.law.sample(len(member), rng)
        w = max_uniform_complement(k, rng)  # max of k uniforms is 1 - w
        tails = [np.cumsum(self.base.law(b)[::-1])[::-1] for b in (0, 1)]  # P[out >= y]
        # the max is y where tail(y+1) <= w < tail(y), i.e. the last y with tail(y) > w
        out = np.empty(len(member), dtype=np.int64)
        for b in (0, 1):
            sel = member == b
            t = tails[b][::-1]  # increasing: P[out >= m-1], ..., P[out >= 0] = 1
            out[sel] = len(t) - 1 - np.searchsorted(t, w[sel], side="right")
        return np.where(k > 0, np.clip(out, 0, None), -1)


def winner_law(base: MechanismPair, law: RoundsLaw) -> GaussianWinner | FiniteWinner:
    """The exact law of H's released winner for a base with an exact law."""
    if isinstance(base, GaussianBase):
        return GaussianWinner(base, law)
    if isinstance(base, FiniteOutputBase):
        return FiniteWinner(base, law)
    raise TypeError(f"no exact winner law for base {type(base).__name__}")


# --- tuning scores -----------------------------------------------------------------------

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
            raise ConfigError("score.edges", "a strictly increasing list of numbers")
        if len(self.ranks) != len(self.edges) + 1:
            raise ConfigError("score.ranks", "one rank per bucket (len(edges) + 1)")
        if self.guess is not None and len(self.guess) != len(self.ranks):
            raise ConfigError("score.guess", "one value per bucket (len(edges) + 1)")

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
            raise ConfigError("game.score", f"unknown key {sorted(extra)[0]!r} (kind, center)")
        center = spec.get("center")
        if isinstance(center, bool) or not isinstance(center, (int, float)):
            raise ConfigError("game.score.center", "a finite number (output units)")
        if not np.isfinite(center):
            raise ConfigError("game.score.center", "a finite number (output units)")
        return FarthestScore(float(center))
    raise ConfigError("game.score", "monotone | worst | {kind: farthest, center: C}")
