"""The tuning protocol H ([XWW24] Algorithm 2) and the exact law of its released winner.

H draws K ~ xi, runs the base K times and releases the best-scored output; K = 0 (Poisson,
binomial, pmf laws) releases a fixed, data-independent output, which we place at -inf.

Exact winner laws, with G the pgf of xi ([XWW24] Theorem 2 / eq. 7, [PS22] Lemma 7 proof):

* finite-output base with cdf C in score order:  A(y) = G(C(<=y)) - G(C(<y));

* Gaussian base (the reduced game of [XWW24] Figure 5): cdf G(F(x - s)) and density
  G'(F(x - s)) phi(x - s), with s = 0 on X and s = mu on X' (F, phi: standard normal).

Sampling the winner costs one uniform per trial whatever K is (`winner_tail`, random streams
version `WINNER_STREAMS` = 2): the winner's tail W = 1 - F(winner) satisfies
P[W > w] = G(1 - w) (K = 0 included: W = 1, the fixed output), so W = C^-1(U) with
C(w) = 1 - G(1 - w) and U uniform on (0, 1], U > C(1) = 1 - G(0) meaning K = 0
(`RoundsLaw.pgf_complement_inverse`: closed forms for TNB, Poisson, binomial and point laws,
Newton in log space for a pmf), then the winner is F^-1(1 - W), evaluated from W so that the
upper tail keeps full precision (the one-run games draw K: `max_uniform_complement`).

Tuning scores (`MonotoneScore`, `FarthestScore`, `BucketScore`) are data too: how H ranks its
runs before it releases the best one.

Contract. The score is any function of a run's output that the analyst or a
controlled-validation adversary picks, and an epsilon for the tuning run holds for every score.
[XWW24] (Sec. 5.2, Theorem 1, Proposition 3) assumes a continuous one-to-one score of the
reduced Gaussian draw, hence monotone (`MonotoneScore`); a score that is not one-to-one
(`FarthestScore`) leaks more. The attack of `accounting.attack` finds a score whose lower sets
are intervals of the privacy-loss-label order and returns it as a `BucketScore`.

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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Literal, cast

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr, ndtri

from auditsel.errors import ConfigError, shown
from auditsel.mechanisms import FiniteOutputBase, GaussianBase
from auditsel.numerics import FloatArray, bisect, newton_bracketed
from auditsel.roles import MechanismPair
from auditsel.rounds import RoundsLaw

LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


#: version of the reduced and finite games' random streams (`winner_tail`); checkpoints record
#: it (`games.fingerprint.code_identity`), so a chunk of another version is refused
WINNER_STREAMS = 2


def winner_tail(
    law: RoundsLaw, size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(W, played) for `size` tuning runs from one uniform each: W = 1 - F(winner) in the
    one-run cdf F of the selection order (P[W > w] = G(1 - w)), and played = K >= 1 (W = 1
    where K = 0). See the module docstring."""
    u = rng.random(int(size))
    np.subtract(1.0, u, out=u)  # uniform on (0, 1]
    if law.p_zero == 0:  # every game plays
        return law.pgf_complement_inverse(u), np.ones(len(u), dtype=bool)
    played = u <= law.pgf_complement(1.0)
    w = np.ones(len(u))
    w[played] = law.pgf_complement_inverse(u[played])
    return w, played


def max_uniform_complement(k: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """1 - max(U_1..U_k) for k iid uniforms, drawn in O(1) each (0 where... k = 0 gives 1)."""
    u = rng.random(len(k))
    with np.errstate(divide="ignore"):
        return cast("np.ndarray", -np.expm1(np.log(u) / np.maximum(k, 1)) * (k > 0) + (k == 0))


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

    def log_density(self, x: ArrayLike, member: int) -> FloatArray:
        """log of G'(F(x - s)) phi(x - s) (continuous part), s = member * mu."""
        t = np.asarray(x, dtype=float) - member * self.mu
        log_z, log_w = log_ndtr(t), log_ndtr(-t)
        log_slope = self.law.log_pgf_derivative(np.exp(log_z), np.exp(log_w), log_z=log_z)
        return cast("FloatArray", log_slope - 0.5 * t * t - LOG_SQRT_2PI)

    def log_likelihood_ratio(self, x: ArrayLike) -> FloatArray:
        """log p_X'(x) / p_X(x): the Neyman-Pearson statistic (0 at the fixed output)."""
        x = np.asarray(x, dtype=float)
        finite = np.isfinite(x)
        xf = np.where(finite, x, 0.0)
        return np.where(finite, self.log_density(xf, 1) - self.log_density(xf, 0), 0.0)

    def mass(self, a: ArrayLike, b: ArrayLike, member: int) -> FloatArray:
        """P[a < winner <= b] on the real line (the fixed output excluded), accurate in the tails."""
        u, v = (np.asarray(x, dtype=float) - member * self.mu for x in (a, b))
        return _standard_mass(self.law, u, v)

    def cell_masses(self, edges: ArrayLike, member: int) -> FloatArray:
        """`mass(edges[:-1], edges[1:], member)` for ascending edges, each edge's pgf terms
        computed once instead of twice, and each side only on the edges of the cells that use
        it (the cells whose left end is above 0 are a suffix of ascending edges): the same
        numbers, a quarter of the work."""
        t = np.asarray(edges, dtype=float) - member * self.mu
        if t.ndim != 1 or not np.all(t[1:] >= t[:-1]):  # not ascending, or a NaN: as `mass`
            return _standard_mass(self.law, t[:-1], t[1:])
        law = self.law
        k = int(np.searchsorted(t[:-1], 0.0, side="right"))  # cells k.. via the tail
        with np.errstate(invalid="ignore"):
            head = law.pgf_above_zero(_cdf(t[: k + 1]))
            tail = law.pgf_complement(_sf(t[k:]))
            cells = np.concatenate([head[1:] - head[:-1], tail[:-1] - tail[1:]])
        return cast("FloatArray", np.maximum(cells, 0.0))

    def log_mass(self, a: ArrayLike, b: ArrayLike, member: int) -> FloatArray:
        """log P[a < winner <= b] (the fixed output excluded), from the laws' log-space pgf
        forms: full relative precision for masses far below the smallest double."""
        u, v = (np.asarray(x, dtype=float) - member * self.mu for x in (a, b))
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

    def cdf(self, x: ArrayLike, member: int) -> FloatArray:
        """P[winner <= x], the fixed output (at -inf) included."""
        return self.law.pgf(_cdf(np.asarray(x, dtype=float) - member * self.mu))

    def release(self, member: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Run H for each coin in `member`: K ~ xi, the max of K draws of N(member * mu, 1)."""
        w, played = winner_tail(self.law, len(member), rng)
        with np.errstate(divide="ignore"):
            x = -ndtri(w)
        return np.where(played, x + self.base.shift(member), -np.inf)

    def quantile_range(self, tail: float = 1e-6) -> tuple[float, float]:
        """[lo, hi]: the tail-quantile of the winner on X and the (1 - tail)-quantile on X'
        (the winner on X shifted by mu): a function of the spec only, so a threshold grid over
        it keeps the Bonferroni rule valid."""
        lo, hi = _standard_winner_quantiles(self.law, tail)
        return lo, float(self.mu + hi)


#: (law key, tail) -> `_standard_winner_quantiles`; laws are frozen data
_QUANTILES: dict[object, tuple[float, float]] = {}


def _standard_winner_quantiles(law: RoundsLaw, tail: float) -> tuple[float, float]:
    """(x0, x1): G(F(x0)) = tail and P[x1 < winner] = tail for the winner of K ~ law standard
    normals (F their cdf, G the pgf of K), bisected on [-40, 40] to a few ulps; -40 (resp. 40)
    where the K = 0 atom or the tail leaves no root there. Cached per (law, tail) (a law that
    cannot be hashed, e.g. a pmf table, is keyed by its repr: its fields, floats exactly)."""
    tail = float(tail)
    try:
        key: object = (law, tail)
        hash(key)
    except TypeError:
        key = (type(law), repr(law), tail)
    if key not in _QUANTILES:
        lower: Callable[[float], float] = lambda x: float(law.pgf(_cdf(np.float64(x)))) - tail
        upper: Callable[[float], float] = lambda x: float(_standard_mass(law, x, np.inf)) - tail
        a, b = -40.0, 40.0
        lo = bisect(lower, a, b, xtol=1e-15, rtol=1e-15) if lower(a) < 0 < lower(b) else a
        hi = bisect(upper, a, b, xtol=1e-15, rtol=1e-15) if upper(a) > 0 > upper(b) else b
        if len(_QUANTILES) >= 1024:
            _QUANTILES.clear()
        _QUANTILES[key] = (float(lo), float(hi))
    return _QUANTILES[key]


def _standard_mass(law: RoundsLaw, u: ArrayLike, v: ArrayLike) -> FloatArray:
    """P[u < winner <= v] of the winner of K standard normals (the fixed output excluded),
    accurate in the tails: where both ends are in the upper half, from 1 - G(1 - w), w = 1 - F."""
    with np.errstate(invalid="ignore"):
        via_tail = law.pgf_complement(_sf(u)) - law.pgf_complement(_sf(v))
        via_cdf = law.pgf_above_zero(_cdf(v)) - law.pgf_above_zero(_cdf(u))
    return np.maximum(np.where(np.asarray(u) > 0, via_tail, via_cdf), 0.0)


def log_difference(hi: ArrayLike, lo: ArrayLike) -> FloatArray:
    """log(e^hi - e^lo), -inf where lo >= hi (vectorised)."""
    hi, lo = np.broadcast_arrays(np.asarray(hi, dtype=float), np.asarray(lo, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = hi + np.log(-np.expm1(np.minimum(lo - hi, 0.0)))
    return np.where((lo < hi) & np.isfinite(hi), out, np.where(np.isposinf(hi), np.inf, -np.inf))


def _cdf(t: ArrayLike) -> FloatArray:
    return cast("FloatArray", np.exp(log_ndtr(t)))


def _sf(t: ArrayLike) -> FloatArray:
    return cast("FloatArray", np.exp(log_ndtr(-np.asarray(t, dtype=float))))


@dataclass(frozen=True)
class FiniteWinner:
    """Winner of H over a finite-output base ([XWW24] Theorem 2, eq. 7)."""

    #: joblib hint: vectorised numpy releases the GIL (see `GaussianWinner`)
    parallel_prefer: ClassVar[str] = "threads"

    base: FiniteOutputBase
    law: RoundsLaw

    @property
    def atom(self) -> float:
        return self.law.p_zero

    def pmf(self, member: int) -> np.ndarray:
        """A(y) = G(C(<=y)) - G(C(<y)) for y = 0..m-1 (the K = 0 mass excluded)."""
        return winner_pmf(self.base.law(member), self.law)

    def log_likelihood_ratio(self, y: ArrayLike) -> FloatArray:
        y = np.asarray(y)
        with np.errstate(divide="ignore"):
            llr = np.log(self.pmf(1)) - np.log(self.pmf(0))
        return np.where(y >= 0, llr[np.clip(y, 0, None).astype(int)], 0.0)

    def release(self, member: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Run H for each coin; release the index of the best of K draws (-1 for the fixed output when K = 0)."""
        w, played = winner_tail(self.law, len(member), rng)  # the max of K uniforms is 1 - w
        # the max is y where tail(y+1) <= w < tail(y), i.e. the last y with tail(y) > w
        out = np.empty(len(member), dtype=np.int64)
        for b in (0, 1):
            sel = member == b
            t = np.cumsum(self.base.law(b)[::-1])  # tail(m-1), ..., tail(0) = 1: P[out >= y]
            out[sel] = len(t) - 1 - np.searchsorted(t, w[sel], side="right")
        return np.where(played, np.clip(out, 0, None), -1)


def winner_pmf(probs: np.ndarray, law: RoundsLaw) -> np.ndarray:
    """The winner's pmf over outcomes listed in selection order (lowest first) with one-run
    masses `probs`: A(y) = G(C(<=y)) - G(C(<y)) ([XWW24] eq. 7), the K = 0 mass excluded;
    tails from the complements 1 - G(1 - w) so that small masses keep their digits."""
    probs = np.asarray(probs, dtype=float)
    below = np.concatenate([[0.0], np.cumsum(probs)[:-1]])  # C(<y)
    at_or_above = np.cumsum(probs[::-1])[::-1]  # 1 - C(<y)
    above = np.concatenate([at_or_above[1:], [0.0]])  # 1 - C(<=y)
    via_cdf = law.pgf_above_zero(below + probs) - law.pgf_above_zero(below)
    via_tail = law.pgf_complement(at_or_above) - law.pgf_complement(above)
    return np.maximum(np.where(below > 0.5, via_tail, via_cdf), 0.0)


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
    """The run farthest from `center` wins: `s(y) = |y - center|` (not one-to-one)."""

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
        return cast("np.ndarray", np.asarray(self.ranks, dtype=float)[self.bucket(values)])

    def adversary_statistic(self, values: np.ndarray) -> np.ndarray:
        """The adversary's statistic of released values (their buckets' `guess`)."""
        if self.guess is None:
            raise ValueError("this BucketScore carries no adversary statistic (guess)")
        return cast("np.ndarray", np.asarray(self.guess, dtype=float)[self.bucket(values)])

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
            raise ConfigError(
                f"game.score.{sorted(map(str, extra))[0]}", "unknown key; allowed: center, kind"
            )
        center = spec.get("center")
        if (
            isinstance(center, bool)
            or not isinstance(center, (int, float))
            or not np.isfinite(center)
        ):
            raise ConfigError("game.score.center", "must be a finite number (output units)")
        return FarthestScore(float(center))
    raise ConfigError(
        "game.score", f"must be monotone, worst or {{kind: farthest, center: C}}, got {shown(spec)}"
    )


# --- the reduced game under any tuning score ----------------------------------------------


def normal_mass(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """P[a < Z <= b] for Z ~ N(0, 1), accurate in both tails (a <= b, +-inf allowed)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore"):
        upper = log_difference(log_ndtr(-a), log_ndtr(-b))  # sf(a) - sf(b)
        lower = log_difference(log_ndtr(b), log_ndtr(a))  # cdf(b) - cdf(a)
    return np.exp(np.where(a > 0, upper, lower))


@dataclass(frozen=True)
class ScoredGaussianWinner:
    """Winner of H over the Gaussian base when H ranks its runs by `score` (a `TuningScore`).

    Contract. One run draws X ~ N(s_b, 1) (s_b = b mu); its key is (score(X), X): the run of
    highest score wins, ties broken by the larger value. With H_b(x) = P_b[key(X) <= key(x)] and
    T_b(x) = 1 - H_b(x) the one-run laws of the key (both computed directly, never as 1 minus
    the other), the max of K keys has cdf G(H_b) (G the pgf of K), so the released winner has
    density G'(H_b(x)) phi(x - s_b) on the real line and the fixed output (-inf) has mass G(0)
    on both sides; its log likelihood ratio is ::

        LLR(x) = label(x) + log G'(H_1(x)) - log G'(H_0(x)),   label(x) = mu x - mu^2 / 2.

    For a `BucketScore` (edges in label or output units) the winner's bucket has the exact pmf
    `winner_pmf` of the buckets' one-run masses in selection order (by rank, then by index), and
    the adversary's statistic is the score's `guess` of the released value's bucket (the
    winner's bucket log likelihood ratio when the score carries none); for any other score it
    is LLR(x). The fixed output's statistic is 0 (the same mass on both sides).

    Release. W = 1 - (max of K uniforms) (`winner_tail`: one uniform per game whatever K is)
    is the winner's tail T_b(x), so x = T_b^-1(W): for buckets, the bucket from the tail
    masses above it, then the normal quantile inside the bucket; for the farthest score, the
    radius r with `P_b[|X - c| > r] = W`, found as its offset d = r - abs(c - s_b) (safeguarded
    Newton in log space on the bracket `[isf(W), isf(W / 2)]`, `farthest_offset`), and the side
    c + r with probability phi(c + r - s_b) / (phi(c + r - s_b) + phi(c - r - s_b)). The near
    point c - r is written -d (reflected), never as a difference: a center far from the data
    plays the score it names (at abs(c) = 1e17, c - r rounded to a multiple of 16).
    """

    #: joblib hint: vectorised numpy releases the GIL (see `GaussianWinner`)
    parallel_prefer: ClassVar[str] = "threads"

    base: GaussianBase
    law: RoundsLaw
    score: TuningScore

    @property
    def mu(self) -> float:
        return self.base.mu

    @property
    def atom(self) -> float:
        return self.law.p_zero

    def label(self, x: ArrayLike) -> FloatArray:
        """The privacy-loss label of an output: log q/p = mu x - mu^2 / 2."""
        return self.mu * np.asarray(x, dtype=float) - 0.5 * self.mu**2

    def _to_output(self, v: ArrayLike) -> FloatArray:
        """Label units -> output units (label is increasing in x)."""
        return (np.asarray(v, dtype=float) + 0.5 * self.mu**2) / self.mu

    # --- buckets ---------------------------------------------------------------------------

    def output_edges(self) -> np.ndarray:
        """The bucket edges of a BucketScore in output units."""
        score = self.score
        if not isinstance(score, BucketScore):
            raise TypeError("output_edges: the score is not a BucketScore")
        edges = np.asarray(score.edges, dtype=float)
        return self._to_output(edges) if score.unit == "label" else edges

    def bucket_order(self) -> np.ndarray:
        """Bucket indices in selection order, lowest first (by rank, then by index)."""
        score = self.score
        if not isinstance(score, BucketScore):
            raise TypeError("bucket_order: the score is not a BucketScore")
        ranks = np.asarray(score.ranks, dtype=float)
        return np.lexsort((np.arange(len(ranks)), ranks))

    def bucket_masses(self, member: int) -> np.ndarray:
        """One run's mass in each bucket (index order) on X (member 0) or X'."""
        edges = np.concatenate([[-np.inf], self.output_edges(), [np.inf]]) - member * self.mu
        return normal_mass(edges[:-1], edges[1:])

    def bucket_pmf(self, member: int) -> np.ndarray:
        """The winner's bucket pmf (index order; the K = 0 mass G(0) excluded)."""
        order = self.bucket_order()
        out = np.empty(len(order))
        out[order] = winner_pmf(self.bucket_masses(member)[order], self.law)
        return out

    def bucket_guess(self) -> np.ndarray:
        """log A'(i) / A(i): the winner's bucket log likelihood ratio (+-inf where one is 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return cast("np.ndarray", np.log(self.bucket_pmf(1)) - np.log(self.bucket_pmf(0)))

    def _bucket_parts(self, member: int) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """(edges in shifted output units, masses, tail above each bucket, mass below each
        bucket) in index order, for member b."""
        order = self.bucket_order()
        masses = self.bucket_masses(member)
        ordered = masses[order]
        above = np.concatenate([np.cumsum(ordered[::-1])[::-1][1:], [0.0]])
        below = np.concatenate([[0.0], np.cumsum(ordered)[:-1]])
        tail, head = np.empty_like(masses), np.empty_like(masses)
        tail[order], head[order] = above, below
        edges = np.concatenate([[-np.inf], self.output_edges(), [np.inf]]) - member * self.mu
        return edges, masses, tail, head

    # --- the key's one-run law -------------------------------------------------------------

    def key_laws(self, x: ArrayLike, member: int) -> tuple[FloatArray, FloatArray]:
        """(H_b(x), T_b(x)) for finite x: P_b[key(X) <= key(x)] and its complement."""
        t = np.asarray(x, dtype=float) - member * self.mu
        score = self.score
        if isinstance(score, BucketScore):
            edges, masses, tail, head = self._bucket_parts(member)
            i = np.searchsorted(edges[1:-1], t, side="left")
            return head[i] + normal_mass(edges[i], t), tail[i] + normal_mass(t, edges[i + 1])
        if isinstance(score, FarthestScore):
            sign, a = self._farthest_frame(member)
            u = sign * t  # reflected so that the center is at a = |c| >= 0
            d = np.where(u <= a, -u, u - 2 * a)  # r - a: never c - r, which cancels
            return normal_mass(-d, 2 * a + d), normal_mass(2 * a + d, np.inf) + normal_mass(
                -np.inf, -d
            )
        below, above = normal_mass(-np.inf, t), normal_mass(t, np.inf)
        return (below, above) if score.direction == "largest" else (above, below)

    def _center(self) -> float:
        score = self.score
        assert isinstance(score, FarthestScore)
        return float(self._to_output(score.center)) if score.unit == "label" else score.center

    def _farthest_frame(self, member: int) -> tuple[float, float]:
        """(sign, a) of the farthest score's center c in member b's shifted units (c - s_b =
        sign a, a >= 0): the outputs are the near point sign (-d) and the far point
        sign (2a + d), d = r - a (class docstring, "Release")."""
        c = self._center() - member * self.mu
        return (1.0 if c >= 0 else -1.0), abs(c)

    def log_likelihood_ratio(self, x: ArrayLike) -> FloatArray:
        """log p_X'(x) / p_X(x) of the released winner (0 at the fixed output)."""
        x = np.asarray(x, dtype=float)
        finite = np.isfinite(x)
        xf = np.where(finite, x, 0.0)
        out = self.label(xf)
        for member, sign in ((1, 1.0), (0, -1.0)):
            h, t = self.key_laws(xf, member)
            with np.errstate(divide="ignore"):
                out = out + sign * self.law.log_pgf_derivative(h, t, log_z=np.log(h))
        return np.where(finite, out, 0.0)

    def statistic(self, x: ArrayLike) -> FloatArray:
        """The adversary's statistic of released values (higher = "the canary is in")."""
        x = np.asarray(x, dtype=float)
        score = self.score
        if not isinstance(score, BucketScore):
            return self.log_likelihood_ratio(x)
        guess = np.asarray(score.guess if score.guess is not None else self.bucket_guess())
        i = np.searchsorted(self.output_edges(), x, side="left")
        return np.where(np.isfinite(x), guess[i], 0.0)

    # --- release ---------------------------------------------------------------------------

    def release(self, member: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Run H for each coin: K ~ xi, the winner's output under the score (-inf when K = 0)."""
        member = np.asarray(member)
        w, played = winner_tail(self.law, len(member), rng)
        side = rng.random(len(member)) if isinstance(self.score, FarthestScore) else None
        x = np.empty(len(member))
        for b in (0, 1):
            sel = member == b
            x[sel] = self.invert_tail(w[sel], b, None if side is None else side[sel])
        return np.where(played, x, -np.inf)

    def invert_tail(self, w: ArrayLike, member: int, side: ArrayLike | None = None) -> FloatArray:
        """x with T_b(x) = w (w in (0, 1]); `side` (uniforms) picks the farthest score's side."""
        w = np.asarray(w, dtype=float)
        s = member * self.mu
        score = self.score
        if isinstance(score, BucketScore):
            return self._invert_buckets(w, member) + s
        if isinstance(score, FarthestScore):
            sign, a = self._farthest_frame(member)
            d = farthest_offset(w, a)
            with np.errstate(over="ignore"):
                right = np.asarray(side) < 0.5 * (1 - np.tanh(sign * a * (a + d)))  # expit(-2cr)
            far = right if sign > 0 else ~right  # the far point is c + r for c >= 0
            return sign * np.where(far, 2 * a + d, -d) + s
        with np.errstate(divide="ignore"):
            q = ndtri(w)
        return cast("FloatArray", (-q if score.direction == "largest" else q) + s)

    def _invert_buckets(self, w: np.ndarray, member: int) -> np.ndarray:
        edges, masses, tail, _ = self._bucket_parts(member)
        order = self.bucket_order()
        top_first = order[::-1]
        tails = tail[top_first]  # increasing from 0 (the top bucket)
        j = top_first[np.clip(np.searchsorted(tails, w, side="right") - 1, 0, len(order) - 1)]
        m = masses[j]
        r = np.clip(w - tail[j], 0.0, m)  # the bucket's mass above x
        a, b = edges[j], edges[j + 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            upper = -ndtri(np.minimum(_sf(b) + r, 1.0))
            lower = ndtri(np.minimum(_cdf(a) + (m - r), 1.0))
        return cast("np.ndarray", np.clip(np.where(a >= 0, upper, lower), a, b))

    # --- the adversary's trade-off ---------------------------------------------------------

    def tradeoff(self, points: int = 40_000) -> tuple[np.ndarray, np.ndarray]:
        """(FP, FN) of every threshold on the adversary's statistic (the fixed output included
        at statistic 0). Exact for a BucketScore (the bucket pmfs); for other scores the
        statistic (the LLR) is thresholded on `points` bins of the output over
        [-15 + min(0, c, mu), 15 + max(0, c, mu)] (c: a farthest score's center, clipped to
        [-30, 30]), each bin's
        winner mass by the midpoint rule on the density G'(H_b(x)) phi(x - s_b), the masses
        rescaled to sum to 1 - G(0): a numerical curve (`tradeoff_source` says which)."""
        if isinstance(self.score, BucketScore):
            stat = np.append(self.statistic(self._bucket_points()), 0.0)
            p0 = np.append(self.bucket_pmf(0), self.atom)
            p1 = np.append(self.bucket_pmf(1), self.atom)
        else:
            c = self._center() if isinstance(self.score, FarthestScore) else 0.0
            # a center beyond +-30 holds its far side below sf(30) < 1e-197 a run: the grid
            # stays where the winner's mass is
            c = min(max(c, -30.0), 30.0)
            lo, hi = -15.0 + min(0.0, c, self.mu), 15.0 + max(0.0, c, self.mu)
            x = np.linspace(lo, hi, points + 1)
            mid = (x[:-1] + x[1:]) / 2
            masses = []
            for b in (0, 1):
                h, t = self.key_laws(mid, b)
                with np.errstate(divide="ignore"):
                    log_d = self.law.log_pgf_derivative(h, t, log_z=np.log(h))
                d = np.exp(log_d - 0.5 * (mid - b * self.mu) ** 2 - LOG_SQRT_2PI) * (x[1] - x[0])
                masses.append(np.append(d * (1 - self.atom) / d.sum(), self.atom))
            p0, p1 = masses
            stat = np.append(self.log_likelihood_ratio(mid), 0.0)
        return statistic_tradeoff(stat, p0, p1)

    @property
    def tradeoff_source(self) -> str:
        return "exact" if isinstance(self.score, BucketScore) else "numerical (quadrature)"

    def _bucket_points(self) -> np.ndarray:
        """One output inside each bucket (index order)."""
        e = self.output_edges()
        if len(e) == 0:
            return np.zeros(1)
        inner = (e[:-1] + e[1:]) / 2
        return np.concatenate([[e[0] - 1.0], inner, [e[-1] + 1.0]])

    def statistic_grid(self, size: int) -> np.ndarray:
        """Bonferroni thresholds fixed by the spec alone: midpoints between the statistic's
        distinct values (buckets), or `size` points over its range (other scores)."""
        if isinstance(self.score, BucketScore):
            values = np.unique(np.append(self.statistic(self._bucket_points()), 0.0))
            values = values[np.isfinite(values)]
            return cast("np.ndarray", (values[:-1] + values[1:]) / 2 if len(values) > 1 else values)
        lo = -40.0 + min(0.0, self.mu)
        values = self.statistic(np.linspace(lo, 40.0 + max(0.0, self.mu), 4001))
        values = values[np.isfinite(values)]
        return np.linspace(values.min(), values.max(), size)


def statistic_tradeoff(
    statistic: ArrayLike, p0: ArrayLike, p1: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """(FP, FN) of every threshold test "guess X' when the statistic is at least t" on a
    discrete release whose outcomes have the given statistic and masses p0 (on X), p1 (on X'):
    outcomes of equal statistic are never split (a threshold cannot), from t = +inf (FP = 0,
    FN = 1) down to t = -inf."""
    values, inverse = np.unique(-np.asarray(statistic, dtype=float), return_inverse=True)
    a0 = np.bincount(inverse, weights=np.asarray(p0, dtype=float), minlength=len(values))
    a1 = np.bincount(inverse, weights=np.asarray(p1, dtype=float), minlength=len(values))
    fp = np.concatenate([[0.0], np.cumsum(a0)])  # guess X' on the first g groups
    fn = np.concatenate([np.cumsum(a1[::-1])[::-1], [0.0]])
    return np.clip(fp, 0, 1), np.clip(fn, 0, 1)


def farthest_radius(w: ArrayLike, c: float, iterations: int = 60) -> FloatArray:
    """r >= 0 with `P[|Z - c| > r] = sf(c + r) + sf(r - c) = w` for Z ~ N(0, 1) (w in (0, 1]):
    abs(c) + `farthest_offset(w, abs(c))` (a sum: the offset is the accurate part)."""
    a = abs(float(c))
    return a + farthest_offset(w, a, iterations)


def farthest_offset(w: ArrayLike, a: float, iterations: int = 60) -> FloatArray:
    """d = r - a >= -a with `P[|Z - a| > r] = sf(2a + d) + sf(d) = w` for Z ~ N(0, 1), a >= 0
    (w in (0, 1]): the radius of the farthest score as an offset from the center's distance,
    with no cancellation however far the center (the near point is a - r = -d).

    Bracket: `sf(d) <= P <= 2 sf(d)`, so d lies in `[isf(w), isf(w/2)]` (clipped at -a); Newton
    on log P - log w inside it (`numerics.newton_bracketed`)."""
    w = np.asarray(w, dtype=float)
    a = abs(float(a))
    log_w = np.log(w)
    with np.errstate(divide="ignore"):
        lo = np.maximum(-ndtri(w), -a)
        hi = np.maximum(-ndtri(0.5 * w), -a)

    def fun(d: FloatArray) -> tuple[FloatArray, FloatArray]:
        log_p = np.logaddexp(log_ndtr(-(2 * a + d)), log_ndtr(-d))
        # d/dd log P = -(phi(2a + d) + phi(d)) / P
        log_dens = np.logaddexp(-0.5 * (2 * a + d) ** 2, -0.5 * d * d) - LOG_SQRT_2PI
        return log_p - log_w, -np.exp(log_dens - log_p)

    d = newton_bracketed(fun, lo, hi, increasing=False, iterations=iterations)
    return np.where(w >= 1, -a, d)
