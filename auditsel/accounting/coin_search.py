"""The coin search: the attack on a finite-output base whose runs each release an independent
uniform coin, a valid LOWER bound on the tuning run's epsilon for that base (the pair with a
released coin), which has the finite pair's privacy profile.

Contract. For a finite pair (p, q) on n outputs (`mechanisms.FiniteOutputBase`, n <=
`MAX_OUTPUTS`), a law of K and deltas, `coin_search(p, q, law, deltas, start)` returns a
`CoinResult` with ::

    eps_coin(delta) <= eps_T~(delta),

where T~ is the tuning run of [XWW24] Algorithm 2 on the base B~ = (P x U, Q x U): one run
releases its output y and a coin u ~ Uniform[0, 1) drawn independently of everything else, the
run of the highest score s(y, u) is released (with its coin), and the fixed output when K = 0.
eps_coin is NOT a lower bound for the finite pair without the coin (whose runs release y alone):
there the attack of `accounting.attack` (the deterministic score orders) is the lower end.

Why the value bounds the quantity the interval states. B~ has the same privacy-loss
distribution as (P, Q) (the coin's density cancels in the likelihood ratio), so every upper
bound computed from the pair's privacy profile, RDP curve or loss distribution ([PS22]'s
generic bound, [KRW24]'s profile bound, the layered and two-sided bounds, the region pure bound)
holds for T~ as well: [eps_coin, upper] brackets the tuning run's epsilon of B~ (equivalently:
a randomised tie-break whose coin is released). A value read as "the finite pair's tuning run"
needs that assumption named; `accounting.interval` and `attack.with_one_run` name it.

The score (`CoinScore`). The coin range of output y is cut at c_y,0 = 0 < c_y,1 < ... <
c_y,k = 1 into k_y segments; the segments of all outputs are listed in increasing score
(`segments`, the j-th segment of output y holds the runs with y and c_y,j <= u < c_y,j+1), and
inside a segment a larger coin ranks higher. A run's score is a deterministic function of the
released (y, u), ties have probability 0, and the adversary reads from the release which of
`pieces` equal sub-intervals of its segment the winner's coin lies in: a post-processing of
(T~(X), T~(X')). The winner's law on the sub-pieces, listed in increasing score with masses x_i
(p_y or q_y times the coin length), is G(F_i) - G(F_i-1) ([XWW24] eq. 7), and the hockey stick
of that pair lower-bounds T~'s at every eps (data processing).

Why the coin helps: a finite pair's winner law has atoms, so at a small delta the best test
cannot hold the Neyman-Pearson set's mass exactly. With the coin the test can cut a segment
where the winner's likelihood ratio crosses e^eps, and an output's mass can be split between
ranks.

The search (a heuristic: any score found is valid, only the tightness depends on it).

1. A dynamic program over how much of each output's coin is used, in m equal pieces per output
   ((m + 1)^n <= `DP_STATES` states): at c = e^eps, the best order of the pieces maximises the
   sum of [G_A(F_A') - G_A(F_A) - c (G_B(F_B') - G_B(F_B))]_+, which depends on the state only
   through the masses used: V(k) = max_y gain_y(k) + V(k + e_y) (m = 1: all n! orders).
2. The order found is merged into segments and their coin cuts optimised (Nelder-Mead on the
   float eps, `_OPT_PIECES` sub-pieces per unit of mass); 1 and 2 repeat at the eps found while
   it rises (at most `ROUNDS`), both directions, started from `start`.
3. The best path is certified with `FINAL_PIECES` sub-pieces per segment.

Round-off (the value is a lower bound in floating point too). The coin cuts are float64 numbers
(the score is defined by them); each sub-piece's mass p_y (c' - c) is computed in longdouble
(relative error <= 2 u_ld), so the computed masses are within L1 distance `_MASS_L1` of the true
ones and each is at most its computed value times (1 + 4 u). The winner's masses are enclosed
exactly as the attack's (`score_search.enclose_order`, A3 of `accounting.attack`), and the hockey
stick is read from the enclosures (`score_search.direction_pieces`, prefix sums rounded down /
up): no other error enters. The search itself uses float64, which only steers it: on another
vector unit the cuts found may move in their last bits, the certified value far less than its
4 printed decimals.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import groupby

import numpy as np
from numpy.typing import ArrayLike

from auditsel.accounting.score_search import (
    U64,
    direction_pieces,
    enclose_order,
    pieces_epsilons,
)
from auditsel.numerics import FloatArray, check_deltas
from auditsel.rounds import RoundsLaw

#: the finite bases searched have at most this many outputs (the DP has at least 2^n states)
MAX_OUTPUTS = 14
#: the DP's states (m + 1)^n are at most this many (m pieces per output, m >= 1)
DP_STATES = 20000
#: sub-pieces per unit of mass while the cuts are optimised (a segment of mass w, the larger of
#: its two sides, is read in ceil(w _OPT_PIECES) of them, at least 4: as fine as the DP's pieces),
#: and sub-pieces per segment in the certified value
_OPT_PIECES = 512
FINAL_PIECES = 512
#: improvement rounds per direction, and float evaluations per refinement
ROUNDS = 6
MAX_EVALS = 200
#: L1 distance between the computed and the true sub-piece masses (2 u_ld relative per piece,
#: with margin) and the factor bounding each true mass above
_MASS_L1 = 8 * U64
MASS_UP = 1 + 4 * U64
#: the one line that names what the coin value bounds (interval labels, JSON, docs)
COIN_ASSUMPTION = (
    "for the base with an independent uniform coin released with each run (a randomised "
    "tie-break whose coin is released: the pair's privacy profile, which every upper bound "
    "covers), not for the finite pair releasing its output alone"
)

DIRECTIONS = ((1, "X' over X"), (0, "X over X'"))


@dataclass(frozen=True)
class CoinScore:
    """A score of the base with a released coin (module docstring): `segments` lists
    (output, coin_from, coin_to) in increasing score (inside a segment a larger coin ranks
    higher); the adversary reads which of `pieces` equal sub-intervals of its segment the
    winner's coin lies in, and tests `direction`."""

    segments: tuple[tuple[int, float, float], ...]
    pieces: int
    direction: str

    def describe(self) -> str:
        """One line: the segments from the lowest score to the highest."""
        parts = [f"y{y}[{a:.4g}, {b:.4g})" for y, a, b in self.segments]
        return (
            f"coin score, lowest first: {' < '.join(parts)}; a larger coin wins inside a "
            f"segment; test {self.direction} on {self.pieces} sub-pieces per segment"
        )


@dataclass(frozen=True)
class CoinResult:
    """`coin_search`'s answer: certified `epsilons` (one per delta; module docstring), the
    score found at the first delta and its certified curve's (U_k, V_k) pieces."""

    deltas: tuple[float, ...]
    epsilons: tuple[float, ...]
    score: CoinScore
    pieces: tuple[np.ndarray, np.ndarray] = field(repr=False, compare=False)
    seconds: float = 0.0


# --- the pieces of a path --------------------------------------------------------------------
def _sub_pieces(segments: tuple[tuple[int, float, float], ...], s: int | np.ndarray):
    """(output per sub-piece, coin length per sub-piece in longdouble) of the segments, segment
    i split into s (or s[i]) equal sub-intervals of its coin range (in increasing score)."""
    count = np.broadcast_to(np.asarray(s, dtype=np.int64), (len(segments),))
    ys = np.repeat(np.array([y for y, _, _ in segments], dtype=np.int64), count)
    a = np.repeat(np.array([lo for _, lo, _ in segments], dtype=float), count)
    b = np.repeat(np.array([hi for _, _, hi in segments], dtype=float), count)
    first = np.repeat(np.cumsum(count) - count, count)
    k = np.arange(len(ys)) - first
    n = np.repeat(count, count).astype(float)
    # float64 cut points inside each segment: the segment's ends exactly, non-decreasing
    lo = np.where(k == 0, a, np.minimum(a + (b - a) * (k / n), b))
    hi = np.where(k == n - 1, b, np.minimum(a + (b - a) * ((k + 1) / n), b))
    hi = np.maximum(hi, lo)
    return ys, hi.astype(np.longdouble) - lo.astype(np.longdouble)


def coin_winner_laws(
    p: ArrayLike, q: ArrayLike, score: CoinScore, law: RoundsLaw
) -> tuple[np.ndarray, np.ndarray]:
    """The sub-pieces' masses of one run on X and X' (longdouble, in increasing score) under
    `score`; the winner's law is G(F_i) - G(F_i-1) of these (`score_search.order_winner_laws`)."""
    pp, qq = (np.asarray(v, dtype=np.longdouble) for v in (p, q))
    ys, length = _sub_pieces(score.segments, score.pieces)
    return pp[ys] * length, qq[ys] * length


def certify(
    p: ArrayLike, q: ArrayLike, score: CoinScore, law: RoundsLaw, deltas: ArrayLike
) -> tuple[FloatArray, tuple[np.ndarray, np.ndarray]]:
    """The certified eps of `score` at each delta (its direction; module docstring, "Round-off")
    and its (U_k, V_k) pieces: every winner mass enclosed (`score_search.enclose_order`), the
    hockey stick from prefix sums of the enclosures."""
    d = check_deltas(deltas, "deltas")
    masses = coin_winner_laws(p, q, score, law)
    keep = (masses[0] > 0) | (masses[1] > 0)
    order = np.arange(int(np.sum(keep)))
    sides = [
        enclose_order(m[keep], (m[keep].astype(float) * MASS_UP), _MASS_L1, order, law, 2)
        for m in masses
    ]
    num = 1 if score.direction == "X' over X" else 0
    U, V = direction_pieces(sides[num][0], sides[1 - num][1], sides[1 - num][1], 0.0, 0.0)
    return pieces_epsilons(U, V, d), (U, V)


# --- the search ------------------------------------------------------------------------------
def _pgf(law: RoundsLaw, x: np.ndarray) -> np.ndarray:
    """G(x) in float64: the pgf below 1/2, 1 - Gc(1 - x) above."""
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    low = x <= 0.5
    out = np.empty_like(x)
    out[low] = law.pgf(x[low])
    out[~low] = 1.0 - law.pgf_complement(1.0 - x[~low])
    return out


@lru_cache(maxsize=16)
def _states(n: int, m: int):
    """The DP's states (counts of used pieces per output, flattened), grouped by level (total
    count): per level from the top down, (states, [(output, rows, successors)])."""
    shape = (m + 1,) * n
    idx = np.indices(shape).reshape(n, -1)
    strides = np.array([(m + 1) ** (n - 1 - y) for y in range(n)], dtype=np.int64)
    level = idx.sum(axis=0)
    by_level = []
    for lev in range(n * m - 1, -1, -1):
        st = np.flatnonzero(level == lev)
        moves = []
        for y in range(n):
            rows = np.flatnonzero(idx[y, st] < m)
            moves.append((y, rows, st[rows] + strides[y]))
        by_level.append((st, moves))
    return idx, strides, by_level


def _dp_order(
    p: np.ndarray, q: np.ndarray, law: RoundsLaw, m: int, c: float, num: int
) -> list[int]:
    """The order of the m pieces per output (outputs listed piece by piece, lowest score first)
    maximising the sum over pieces of [dG(num side) - c dG(other side)]_+ (module docstring)."""
    n = len(p)
    idx, strides, by_level = _states(n, m)
    frac = idx / m
    g = [_pgf(law, p @ frac), _pgf(law, q @ frac)]
    top, bot = g[num], g[1 - num]
    value = np.zeros(idx.shape[1])
    pick = np.zeros(idx.shape[1], dtype=np.int64)
    for st, moves in by_level:
        best = np.full(len(st), -np.inf)
        arg = np.zeros(len(st), dtype=np.int64)
        for y, rows, nxt in moves:
            here = st[rows]
            gain = np.maximum(top[nxt] - top[here] - c * (bot[nxt] - bot[here]), 0.0)
            cand = gain + value[nxt]
            better = cand > best[rows]
            best[rows[better]] = cand[better]
            arg[rows[better]] = y
        value[st], pick[st] = best, arg
    order, s = [], 0
    for _ in range(n * m):
        y = int(pick[s])
        order.append(y)
        s += int(strides[y])
    return order


def _segments(outputs: list[int], fractions: np.ndarray, n: int):
    """Segments (output, coin_from, coin_to) from per-segment outputs and coin lengths."""
    used = np.zeros(n)
    out = []
    for y, f in zip(outputs, fractions):
        lo = used[y]
        used[y] = min(1.0, lo + f)
        out.append((int(y), float(lo), float(used[y]) if used[y] < 1 - 1e-15 else 1.0))
    # each output's last segment ends at 1 exactly
    last = {y: i for i, (y, _, _) in enumerate(out)}
    for y, i in last.items():
        out[i] = (y, out[i][1], 1.0)
    return tuple(out)


def _float_eps(
    p: np.ndarray, q: np.ndarray, segments, law: RoundsLaw, delta: float, num: int, s: int
) -> float:
    """The float64 eps of a path (its sub-pieces' winner law, the likelihood-ratio test sets):
    the search's objective."""
    w = np.array([max(p[y], q[y]) * (hi - lo) for y, lo, hi in segments])
    ys, length = _sub_pieces(segments, np.clip(np.ceil(s * w), 4, s))
    length = length.astype(float)
    out = []
    for v in (p, q):
        g = _pgf(law, np.concatenate([[0.0], np.cumsum(v[ys] * length)]))
        out.append(np.maximum(np.diff(g), 0.0))
    a, b = out[num], out[1 - num]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(a > 0, a / b, -1.0)
    order = np.argsort(-ratio, kind="stable")
    u, w = np.cumsum(a[order]), np.cumsum(b[order])
    live = u > delta
    if not np.any(live):
        return 0.0
    if np.any(w[live] <= 0):
        return math.inf
    return max(0.0, math.log(float(np.max((u[live] - delta) / w[live]))))


def _refine(p, q, law, outputs, lengths, delta, num):
    """Nelder-Mead over the coin cuts of the outputs with several segments (the order of the
    segments fixed); returns (float eps, segments)."""
    from scipy.optimize import minimize  # deferred: only finite bases search coins

    n = len(p)
    where = {y: [i for i, z in enumerate(outputs) if z == y] for y in range(n)}
    free = [y for y in range(n) if len(where[y]) > 1]

    def build(x: np.ndarray):
        f = np.array(lengths, dtype=float)
        j = 0
        for y in free:
            k = len(where[y])
            cuts = np.concatenate([[0.0], np.sort(np.clip(x[j : j + k - 1], 0, 1)), [1.0]])
            f[where[y]] = np.diff(cuts)
            j += k - 1
        return _segments(outputs, f, n)

    x0 = np.concatenate(
        [np.cumsum(np.asarray(lengths, dtype=float)[where[y]])[:-1] for y in free] or [[]]
    )
    if not len(x0):
        segs = build(x0)
        return _float_eps(p, q, segs, law, delta, num, _OPT_PIECES), segs
    # vertices of infinite eps: scipy's convergence test then subtracts inf from inf (nan, not
    # converged), and the search goes on to maxfev
    with np.errstate(invalid="ignore"):
        res = minimize(
            lambda x: -_float_eps(p, q, build(x), law, delta, num, _OPT_PIECES),
            x0,
            method="Nelder-Mead",
            options={"xatol": 1e-7, "fatol": 1e-10, "maxfev": MAX_EVALS},
        )
    return -float(res.fun), build(res.x)


def coin_search(
    p: ArrayLike, q: ArrayLike, law: RoundsLaw, deltas: ArrayLike, start: ArrayLike
) -> CoinResult | None:
    """The coin search (module docstring) at the first delta, started from `start` (the values
    already known, one per delta); the score found certified at every delta. None where the
    base has more than `MAX_OUTPUTS` outputs or no score found beats `start` at the first
    delta."""
    t0 = time.perf_counter()
    d = check_deltas(deltas, "deltas")
    pp, qq = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    n = len(pp)
    if n > MAX_OUTPUTS or n < 2:
        return None
    m = 1
    while (m + 2) ** n <= DP_STATES:
        m += 1
    first = float(d[0])
    base = float(np.atleast_1d(np.asarray(start, dtype=float))[0])
    best: tuple[float, tuple, int] | None = None
    for num, _ in DIRECTIONS:
        eps = base
        for _ in range(ROUNDS):
            c = math.exp(min(eps, 700.0))
            # the order's runs of one output are segments (coin lengths summed piece by piece)
            order = _dp_order(pp, qq, law, m, c, num)
            runs = [(y, sum(1.0 / m for _ in g)) for y, g in groupby(order)]
            outputs, lengths = [y for y, _ in runs], [w for _, w in runs]
            found, segs = _refine(pp, qq, law, outputs, lengths, first, num)
            if not math.isfinite(found):
                break
            if best is None or found > best[0]:
                best = (found, segs, num)
            if found <= eps * (1 + 1e-9):
                break
            eps = found
    if best is None:
        return None
    _, segs, num = best
    direction = dict(DIRECTIONS)[num]
    segs = tuple(s for s in segs if s[2] > s[1])  # empty segments hold nothing
    score = CoinScore(segs, FINAL_PIECES, direction)
    eps_d, pieces = certify(pp, qq, score, law, d)
    if not eps_d[0] > base:
        return None
    return CoinResult(
        tuple(d.tolist()),
        tuple(float(e) for e in eps_d),
        score,
        pieces,
        time.perf_counter() - t0,
    )
