"""One-run audits: eps_L from the guesses on m canaries of a single (tuning) run.

The game ([SNJ23] Algorithm 1, [MMC24] Algorithm 1): m canaries, each included independently
with probability 1/2 (S_c in {0, 1}); one run of the audited mechanism; one score per canary
(higher = "included"). The auditor guesses "in" on the k+ highest scores and "out" on the k-
lowest, abstains on the rest, and counts the v correct guesses among r = k+ + k-.

Analyses (each rejects a privacy claim for the mechanism w.r.t. every single canary's
inclusion, the other canaries arbitrary; add/remove neighbours):

* [SNJ23] Theorem 5.2: if the mechanism is (eps, delta)-DP, ::

      P[W >= v] <= P[Bin(r, q) >= v] + 2 m delta max_{i=1..v} P[v - i <= Bin(r, q) < v] / i,

  q = e^eps / (1 + e^eps); with delta = 0 this is the binomial tail of [SNJ23] Theorem 3.1.
  eps_L is the largest eps whose p-value is below the significance.

* [MMC24] Theorem 9 / Algorithm 3 (the recursion "audit_rh_with_cap", as in the public
  jax_privacy implementation): if the mechanism is f-DP, c correct among k guesses has
  probability below tau whenever r_0 + h_0 > k / m, where r_c = tau c / m, h_c = tau (k - c) / m
  and for i = c-1, ..., 0: h_i = max(h_{i+1}, fbar^-1(r_{i+1})),
  r_i = min(r_{i+1} + i / (k - i) (h_i - h_{i+1}), 1), fbar(x) = 1 - f(x).
  A one-parameter family f_theta (ordered: larger theta, weaker claim) turns rejections into
  theta_L = the largest rejected theta, and eps_L = eps of f_{theta_L} at delta. This is an
  eps lower bound for the mechanism only when its trade-off lies in the family (it does, by
  construction, in the reduced one-run game; `auditsel.games.one_run_reduced`).

Choosing k+ and k-: every pair on a grid fixed by m alone (`guess_grid`) is tried and the
significance is split over the whole grid (Bonferroni), so the search costs confidence, not
validity: eps_L holds at the stated confidence on every code path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit, log_ndtr, logit, ndtri

from auditsel.errors import ConfigError
from auditsel.mechanisms import gaussian_epsilon
from auditsel.numerics import FloatArray, IntArray, check_deltas

EPS_MAX = 50.0  # eps above this is reported as this (a search cap, stated in the output)
EPS_TOL = 1e-6


def snj23_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Upper bound on P[>= v correct of r guesses] for an (eps, delta)-DP mechanism ([SNJ23] Thm 5.2)."""
    from scipy.stats import binom  # deferred: scipy.stats, only for a one-run audit

    delta = float(check_deltas(delta)[0])
    if not 0 <= v <= r <= m:
        raise ConfigError("v", f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    q = float(expit(eps))
    tail = float(binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return min(tail, 1.0)
    i = np.arange(1, v + 1)
    window = binom.sf(v - i - 1, r, q) - tail  # P[v - i <= Bin < v]
    alpha = float(np.max(window / i))
    return min(tail + alpha * 2 * m * delta, 1.0)


def _snj23_pure_epsilon(r, v, significance):
    """delta = 0 in closed form: P[Bin(r, q) >= v] = I_q(v, r - v + 1) (regularized incomplete
    beta), increasing in q, so the bound is logit of its significance-quantile (0 if not rejected)."""
    from scipy.stats import beta as beta_dist  # deferred: scipy.stats, one-run audits only

    r = np.asarray(r, dtype=float)
    v = np.asarray(v, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(v > 0, beta_dist.ppf(significance, np.maximum(v, 1), r - v + 1), 0.0)
        eps = np.where(q > 0.5, logit(np.clip(q, 0.5, 1.0)), 0.0)
    return np.minimum(np.nan_to_num(eps, nan=0.0, posinf=EPS_MAX), EPS_MAX)


def snj23_epsilon(m: int, r: int, v: int, significance: float, delta: float) -> float:
    """Largest eps in [0, EPS_MAX] such that (eps, delta)-DP is rejected at `significance`."""
    delta = float(check_deltas(delta)[0])
    upper = float(_snj23_pure_epsilon(r, v, significance))  # delta > 0 only lowers it
    if delta == 0 or upper == 0.0:
        return upper
    p = lambda e: snj23_p_value(m, r, v, e, delta)
    if p(0.0) > significance:
        return 0.0
    lo, hi = 0.0, upper
    while hi - lo > EPS_TOL:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if p(mid) <= significance else (lo, mid)
    return lo


def mmc24_rejects(
    fbar_inv: Callable[[FloatArray], FloatArray], m: int, k: ArrayLike, c: ArrayLike, tau: float
) -> np.ndarray:
    """[MMC24]'s test, vectorised over guess counts: True where "c correct of k guesses" has
    probability below tau under every f-DP mechanism (f given by fbar_inv(r) = f^-1(1 - r))."""
    k = np.atleast_1d(np.asarray(k, dtype=float))
    c = np.atleast_1d(np.asarray(c, dtype=float))
    r = tau * c / m
    h = tau * (k - c) / m
    active = c > 0
    for i in range(int(c.max(initial=0)) - 1, -1, -1):
        step = active & (i < c)
        if not step.any():
            continue
        h_new = np.where(step, np.maximum(h, fbar_inv(np.where(step, r, 0.0))), h)
        grow = np.where(k > i, i / np.maximum(k - i, 1), 0.0)
        r = np.where(step, np.minimum(r + grow * (h_new - h), 1.0), r)
        h = h_new
    return r + h > k / m


class TradeoffFamily(Protocol):
    """A family of trade-off curves f_theta for [MMC24]'s test (Theorem 9), indexed by theta:
    `fbar_inverse(theta)` is r -> f_theta^-1(1 - r), `epsilon(theta, delta)` converts theta,
    `theta_grid()` the thetas searched (`GdpFamily`, mu-GDP, the default; `PureDpFamily`;
    `auditsel.games.one_run_reduced.TuningFamily`)."""

    @property
    def name(self) -> str: ...

    def fbar_inverse(self, theta: float) -> Callable[[FloatArray], FloatArray]: ...

    def epsilon(self, theta: float, delta: float) -> float: ...

    def theta_grid(self) -> FloatArray: ...


@dataclass(frozen=True)
class GdpFamily:
    """mu-GDP ([DRS22]): fbar^-1(r) = Phi(Phi^-1(r) - mu); eps at delta by the GDP conversion."""

    name: str = "gdp"

    def fbar_inverse(self, theta: float) -> Callable[[FloatArray], FloatArray]:
        return lambda r: np.exp(log_ndtr(ndtri(np.clip(r, 0.0, 1.0)) - theta))

    def epsilon(self, theta: float, delta: float) -> float:
        delta = float(check_deltas(delta)[0])
        return float(gaussian_epsilon(theta, delta)) if theta > 0 else 0.0

    def theta_grid(self) -> np.ndarray:
        return np.exp(np.arange(np.log(1e-3), np.log(40.0), np.log(1.002)))


@dataclass(frozen=True)
class PureDpFamily:
    """(eps, 0)-DP (randomized response): f(x) = max(0, 1 - e^eps x, e^-eps (1 - x))."""

    name: str = "pure_dp (delta = 0)"

    def fbar_inverse(self, theta: float) -> Callable[[FloatArray], FloatArray]:
        # fbar(x) = min(1, e^eps x, 1 - e^-eps (1 - x)); its inverse at r:
        return lambda r: np.clip(
            np.maximum(r * np.exp(-theta), 1 - (1 - r) * np.exp(theta)), 0.0, 1.0
        )

    def epsilon(self, theta: float, delta: float) -> float:
        delta = float(check_deltas(delta)[0])
        return float(theta)

    def theta_grid(self) -> np.ndarray:
        return np.concatenate(
            [[0.0], np.exp(np.arange(np.log(1e-3), np.log(EPS_MAX), np.log(1.002)))]
        )


def _mmc24_theta(family, m, k, c, significance) -> float:
    """Largest theta on the family's grid rejected by some (k, c) at `significance` (0 if none).
    Rejection weakens as theta grows (the family is ordered), so bisection over the grid is exact."""
    grid = family.theta_grid()
    rejects = lambda j: bool(
        np.any(mmc24_rejects(family.fbar_inverse(float(grid[j])), m, k, c, significance))
    )
    if not rejects(0):
        return 0.0
    lo, hi = 0, len(grid) - 1
    if rejects(hi):
        return float(grid[hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid)
    return float(grid[lo])


def guess_grid(m: int) -> np.ndarray:
    """(k+, k-) pairs fixed by m alone: each of k+ and k- in {0, 1, 2, 4, ..., <= m/2}, not both 0."""
    sizes = [0] + [
        1 << j for j in range(int(math.log2(max(m // 2, 1))) + 1) if (1 << j) <= max(m // 2, 1)
    ]
    pairs = [(a, b) for a in sizes for b in sizes if a + b > 0 and a + b <= m]
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def guess_counts(
    scores: ArrayLike, members: ArrayLike, grid: IntArray, rng: np.random.Generator | None = None
) -> tuple[IntArray, IntArray]:
    """(r, v) for each (k+, k-): guesses "in" on the k+ highest scores, "out" on the k- lowest.

    Ties are broken by a random permutation (`rng`; the order of the input when None), so the
    ranking never looks at the inclusion bits."""
    scores = np.asarray(scores, dtype=float)
    members = np.asarray(members).astype(bool)
    perm = np.arange(len(scores)) if rng is None else rng.permutation(len(scores))
    order = perm[np.argsort(-scores[perm], kind="stable")]  # highest first
    in_sorted = members[order]
    top = np.concatenate([[0], np.cumsum(in_sorted)])  # included among the top j
    bottom = np.concatenate([[0], np.cumsum(~in_sorted[::-1])])  # excluded among the bottom j
    kp, km = grid[:, 0], grid[:, 1]
    return kp + km, top[kp] + bottom[km]


@dataclass(frozen=True)
class OneRunBound:
    """eps_L of a one-run audit under each analysis (valid at `confidence`, Bonferroni over the grid)."""

    eps_snj23: float
    eps_mmc24: float
    mmc24_family: str
    mmc24_theta: float
    confidence: float
    delta: float
    canaries: int
    members: int
    guesses_snj23: tuple  # (k+, k-, r, v) of the pair that gave eps_snj23
    grid_size: int
    notes: tuple = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        kp, km, r, v = out.pop("guesses_snj23")
        del out["grid_size"], out["notes"]
        return {
            **out,
            "k_plus": kp,
            "k_minus": km,
            "guesses": r,
            "correct": v,
            "guess_grid_size": self.grid_size,
            "rule": "bonferroni over the (k+, k-) grid",
            "rigour": "empirical, valid at the stated confidence ([SNJ23] Thm 5.2; [MMC24] "
            "Thm 9, valid as an eps bound when the trade-off lies in the family)",
            "notes": list(self.notes),
        }


def audit_one_run(
    scores: ArrayLike,
    members: ArrayLike,
    delta: float,
    confidence: float = 0.95,
    family: TradeoffFamily | None = None,
    grid: IntArray | None = None,
    seed: int = 0,
) -> OneRunBound:
    """eps_L of one run from per-canary scores (higher = "included") and inclusion bits.

    `family`: the hypothesised trade-off family of [MMC24] (default mu-GDP; the reduced
    one-run tuning game supplies its exact family, `OneRunReducedGame.family`).
    `grid`: the (k+, k-) pairs (default `guess_grid(m)`); significance 1 - confidence is split
    over it. `seed` only breaks ties among equal scores.
    """
    scores = np.asarray(scores, dtype=float)
    members = np.asarray(members)
    m = len(scores)
    if m < 2 or members.shape != scores.shape:
        raise ConfigError(
            "scores",
            f"need at least 2 canaries and one inclusion bit per score, got "
            f"{m} scores and {members.size} bits",
        )
    if not np.all(np.isfinite(scores)):
        raise ConfigError("scores", "must be finite")
    if not np.all((members == 0) | (members == 1)):
        raise ConfigError("member", "inclusion bits must be 0 or 1")
    if not 0.5 <= confidence < 1:
        raise ConfigError("confidence", f"must be in [0.5, 1), got {confidence}")
    family = GdpFamily() if family is None else family
    grid = guess_grid(m) if grid is None else np.asarray(grid, dtype=np.int64).reshape(-1, 2)
    significance = (1 - confidence) / len(grid)
    r, v = guess_counts(scores, members, grid, np.random.default_rng(seed))
    pure = _snj23_pure_epsilon(r, v, significance)
    best, best_j = 0.0, 0
    for j in np.argsort(-pure):  # delta > 0 only lowers a pair's eps: prune with the closed form
        if pure[j] <= best:
            break
        e = snj23_epsilon(m, int(r[j]), int(v[j]), significance, delta)
        if e > best:
            best, best_j = e, int(j)
    theta = _mmc24_theta(family, m, r, v, significance)
    notes = []
    if best >= EPS_MAX:
        notes.append(f"eps_snj23 reached the search cap {EPS_MAX}")
    return OneRunBound(
        eps_snj23=float(best),
        eps_mmc24=family.epsilon(theta, delta) if theta > 0 else 0.0,
        mmc24_family=family.name,
        mmc24_theta=theta,
        confidence=confidence,
        delta=delta,
        canaries=m,
        members=int(members.sum()),
        guesses_snj23=(int(grid[best_j, 0]), int(grid[best_j, 1]), int(r[best_j]), int(v[best_j])),
        grid_size=len(grid),
        notes=tuple(notes),
    )
