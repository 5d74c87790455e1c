"""The one sort of an audit: each coin's scores sorted once, and every count read from it.

Contract. `SortedScores(scores, member)` sorts the scores of each coin (b = 0, b = 1) once;
`counts()` is the table of every distinct threshold t (t[0] = -inf) with the direction-'>'
counts fp = #{b = 0, score > t} and fn = #{b = 1, score <= t} (direction '<=' has n0 - fp and
n1 - fn); `pilot(split_fraction, seed)` is a uniformly random subset of `int(n_c *
split_fraction)` games of each class c, chosen independently of the scores, and `rest_at`
counts the other games. Nothing here depends on the order of the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from auditsel.errors import ConfigError
from auditsel.executor import run_ordered

#: the user-facing names (the other functions are building blocks of the audits)


_POPCOUNT = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)


class SortedPart:
    """The sorted scores of one class (`s`), or the subset of them at the positions set in
    `members` (a boolean mask over s). A subset of a large s (`copy_below` positions or more)
    is kept as a bitset with per-word prefix counts (never copied out of s); a smaller one is
    copied out."""

    copy_below = 1 << 21

    def __init__(self, s: np.ndarray, members: np.ndarray | None = None):
        self.s = s
        self.words: np.ndarray | None = None
        if members is not None and len(s) < self.copy_below:
            self.s = s[members]
            members = None
        if members is None:
            self.n = len(self.s)
            return
        packed = np.packbits(members, bitorder="little")
        packed = np.concatenate([packed, np.zeros(-len(packed) % 8, np.uint8)])
        self.words = packed.view("<u8")
        per_word = _POPCOUNT[packed].reshape(-1, 8).sum(axis=1)
        self.prefix = np.concatenate([[0], np.cumsum(per_word)])
        self.n = int(self.prefix[-1])

    def rank(self, pos: ArrayLike) -> np.ndarray:
        """Members among the first `pos` positions of s."""
        pos = np.asarray(pos, dtype=np.int64)
        if self.words is None:
            return pos
        flat = pos.reshape(-1)
        w, b = flat >> 6, (flat & 63).astype(np.uint64)
        word = self.words[np.minimum(w, len(self.words) - 1)]
        low = word & ((np.uint64(1) << b) - np.uint64(1))
        partial = _POPCOUNT[low.view(np.uint8).reshape(-1, 8)].sum(axis=-1)
        return (self.prefix[w] + np.where(w < len(self.words), partial, 0)).reshape(pos.shape)

    def count_le(self, t: ArrayLike) -> np.ndarray:
        """Members <= each t."""
        return self.rank(np.searchsorted(self.s, t, side="right"))

    def count_le_own(self, j: ArrayLike) -> np.ndarray:
        """count_le(value(j)): members <= the j-th smallest member."""
        j = np.asarray(j, dtype=np.int64)
        if self.words is not None:
            return self.count_le(self.value(j))
        s, n = self.s, len(self.s)
        out = j + 1
        nxt = np.minimum(j + 1, n - 1)
        search = (j + 1 < n) & ~(s[nxt] > s[j])  # ties (and NaN) are searched
        if search.any():
            out[search] = np.searchsorted(s, s[j[search]], side="right")
        return out

    def count_lt(self, t: ArrayLike) -> np.ndarray:
        return self.rank(np.searchsorted(self.s, t, side="left"))

    def value(self, i: ArrayLike) -> np.ndarray:
        """The i-th smallest member (0-based)."""
        i = np.asarray(i, dtype=np.int64)
        if self.words is None:
            return self.s[i]
        flat = i.reshape(-1)
        w = np.searchsorted(self.prefix, flat, side="right") - 1  # prefix[w] <= i < prefix[w+1]
        bits = np.unpackbits(
            self.words[w].view(np.uint8).reshape(-1, 8), axis=-1, bitorder="little"
        )
        at = np.argmax(np.cumsum(bits, axis=-1) > (flat - self.prefix[w])[:, None], axis=-1)
        return self.s[w * 64 + at].reshape(i.shape)


@dataclass(frozen=True)
class Counts:
    """Counts at thresholds t of a set of trials, direction '>':
    fp[i] = #{b = 0, score > t[i]}, fn[i] = #{b = 1, score <= t[i]}; t[0] = -inf."""

    t: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    n0: int
    n1: int

    @classmethod
    def from_sorted(cls, s: NDArray[np.float64], b: ArrayLike) -> Counts:
        """From scores already sorted ascending and their coins (no sort here)."""
        b = np.asarray(b, dtype=bool)
        n = len(b)
        cum1 = np.cumsum(b, dtype=np.int64)
        n1 = int(cum1[-1]) if n else 0
        n0 = n - n1
        distinct = s[1:] != s[:-1]
        if distinct.all():  # continuous scores: every position ends a run (no gathers)
            m, top, ones, rank = n, s, cum1, np.arange(1, n + 1)
        else:
            last = np.nonzero(np.append(distinct, True))[0]
            m, top, ones, rank = len(last), s[last], cum1[last], last + 1
        t = np.empty(m + 1)
        fn = np.empty(m + 1, dtype=np.int64)
        fp = np.empty(m + 1, dtype=np.int64)
        t[0], fn[0], fp[0] = -np.inf, 0, n0
        t[1:] = top
        fn[1:] = ones
        np.subtract(n0 - rank, -ones, out=fp[1:])  # n0 - #(b = 0 among the first rank)
        return cls(t, fp, fn, n0, n1)

    def at(self, thresholds: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(fp, fn) counts at arbitrary thresholds (largest table threshold <= each one)."""
        idx = np.searchsorted(self.t, np.asarray(thresholds, dtype=float), side="right") - 1
        return self.fp[idx], self.fn[idx]


def search_counts(
    s0: np.ndarray, s1: np.ndarray, t: ArrayLike
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """'>' counts at thresholds t from each coin's sorted scores: fp = #(b = 0, score > t),
    fn = #(b = 1, score <= t), by binary search."""
    return len(s0) - np.searchsorted(s0, t, side="right"), np.searchsorted(s1, t, side="right")


def _counts_at_thresholds(
    s0: SortedPart | np.ndarray, s1: SortedPart | np.ndarray, thresholds: ArrayLike
) -> Counts:
    """A table of the trials with sorted scores s0, s1 at the given thresholds only (with the
    row t = -inf first), whose `at` answers exactly there."""
    t = np.unique(np.asarray(thresholds, dtype=float))
    p0, p1 = (x if isinstance(x, SortedPart) else SortedPart(x) for x in (s0, s1))
    return Counts(
        np.concatenate([[-np.inf], t]),
        np.concatenate([[p0.n], p0.n - p0.count_le(t)]),
        np.concatenate([[0], p1.count_le(t)]),
        p0.n,
        p1.n,
    )


def uniform_subset(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """A boolean mask with exactly k of n entries set, uniform over the k-subsets: independent
    draws (set with probability about k / n), then a uniform choice of the surplus (or
    deficit) flipped back; the law is permutation-invariant with k entries, hence uniform."""
    mask = rng.integers(0, 256, n, dtype=np.uint8) < round(256 * k / max(n, 1))
    surplus = int(np.count_nonzero(mask)) - k
    flip = surplus < 0  # deficit: add entries instead
    left = abs(surplus)
    while left:  # uniform distinct positions on the wrong side, by rejection
        pos = np.unique(rng.integers(0, n, 2 * left + 16))
        pos = pos[mask[pos] != flip]
        pos = rng.permutation(pos)[:left]
        mask[pos] = flip
        left -= len(pos)
    return mask


SPLIT_STREAM = 0x7370  # the seed's spawn key of a split (rule split, bonferroni's pilot)
MULTISPLIT_STREAM = 0x6D73  # of multisplit's splits (with the split's index)
THREADED_SORT_ABOVE = 1 << 20


def _sorted_part(s: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
    return np.sort(s[mask])


def sort_parts(
    s: NDArray[np.float64], masks: Sequence[NDArray[np.bool_]]
) -> tuple[NDArray[np.float64], ...]:
    """np.sort(s[m]) for each mask m: in threads (`executor`) for a large `s`."""
    s = np.asarray(s, dtype=np.float64)
    if len(s) < THREADED_SORT_ABOVE:
        return tuple(np.sort(s[m]) for m in masks)
    calls = [(_sorted_part, (s, m)) for m in masks]
    return tuple(run_ordered(calls, jobs=len(masks), backend="threading"))


class SortedScores:
    """The one sort: each coin's scores sorted ascending, from which every count and every
    split is read. Results computed on it (`memo`) are kept and shared."""

    def __init__(self, scores: ArrayLike, member: ArrayLike) -> None:
        self.scores = np.asarray(scores, dtype=float)
        self.member = np.asarray(member).astype(bool)
        self.n = len(self.scores)
        self._all: Counts | None = None
        self._coins: tuple[np.ndarray, np.ndarray] | None = None
        self._memo: dict = {}

    def by_coin(self, mask: NDArray[np.bool_] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(sorted scores of the b = 0 trials, of the b = 1 trials) among `mask` (all if None)."""
        if mask is None and self._coins is not None:
            return self._coins
        s, b = (
            (self.scores, self.member) if mask is None else (self.scores[mask], self.member[mask])
        )
        coins = cast("tuple[np.ndarray, np.ndarray]", sort_parts(s, (~b, b)))
        if mask is None:
            self._coins = coins
        return coins

    def counts(self, mask: NDArray[np.bool_] | None = None) -> Counts:
        """Counts at every distinct threshold of the trials selected by `mask`; all when None."""
        if mask is None:
            if self._all is None:
                self._all = counts_from_coins(*self.by_coin())
            return self._all
        return counts_from_coins(*self.by_coin(mask))

    def counts_at(self, mask: NDArray[np.bool_] | None, thresholds: ArrayLike) -> Counts:
        """`_counts_at_thresholds` of the trials selected by `mask` (None: all)."""
        return _counts_at_thresholds(*self.by_coin(mask), thresholds)

    def memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """compute(), once per key on this sort."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def pilot(
        self, split_fraction: float, seed: int | None, index: int | None = None
    ) -> tuple[SortedPart, SortedPart]:
        """The pilot of a split as `SortedPart`s: `int(n_c * split_fraction)` of the n_c games
        of class c, a uniform random subset drawn from `seed` (`index`: the index-th split of a
        multisplit); the rest of each class is the evaluation part."""
        if seed is None:  # apply_rule gives every rule a seed first
            raise ValueError("a split needs a seed")
        s0, s1 = self.by_coin()
        sizes = [int(len(s) * split_fraction) for s in (s0, s1)]
        for c, (s, k) in enumerate(zip((s0, s1), sizes)):
            if not 0 < k < len(s):
                part = "pilot" if k == 0 else "evaluation part"
                raise ConfigError(
                    "split_fraction",
                    f"{split_fraction:g} leaves no game with member = {c} in the {part} "
                    f"({len(s)} such games); each part needs both coins: use more games or "
                    f"another split_fraction",
                )

        def draw():
            key = (SPLIT_STREAM,) if index is None else (MULTISPLIT_STREAM, index)
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))
            return tuple(
                SortedPart(s, uniform_subset(len(s), k, rng)) for s, k in zip((s0, s1), sizes)
            )

        if index is not None:
            return draw()
        return self.memo(("pilot", split_fraction, seed), draw)

    def rest_at(self, pilot: tuple[SortedPart, SortedPart], thresholds: ArrayLike) -> Counts:
        """Counts of the evaluation part (all games but the `pilot`'s) at the thresholds."""
        every = self.counts_at(None, thresholds)
        p0, p1 = pilot
        part = _counts_at_thresholds(p0, p1, thresholds)
        return Counts(
            every.t, every.fp - part.fp, every.fn - part.fn, every.n0 - part.n0, every.n1 - part.n1
        )


def counts_from_coins(s0: np.ndarray, s1: np.ndarray) -> Counts:
    """The count table of the trials whose sorted scores are s0 (b = 0) and s1 (b = 1), merged
    in O(n) (no sort)."""
    n0, n1 = len(s0), len(s1)
    pos1 = np.searchsorted(s0, s1, side="right") + np.arange(n1)
    is1 = np.zeros(n0 + n1, dtype=bool)
    is1[pos1] = True
    merged = np.empty(n0 + n1)
    merged[pos1] = s1
    merged[~is1] = s0
    return Counts.from_sorted(merged, is1)


def threshold_table(
    scores: ArrayLike, member: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64], int, int]:
    """(t, fp_count, fn_count, n0, n1): `SortedScores.counts()` as arrays."""
    c = SortedScores(scores, member).counts()
    return c.t, c.fp, c.fn, c.n0, c.n1


def kth_smallest(parts: list[SortedPart], ks: np.ndarray) -> np.ndarray:
    """The ks-th smallest (0-based) finite scores among the members of two parts (no merge)."""
    ranges = []
    for p in parts:  # the members at finite scores: member indices [first, first + count)
        lo, hi = (
            np.searchsorted(p.s, [-np.inf, np.inf], side="right")[0],
            np.searchsorted(p.s, np.inf, side="left"),
        )
        first = int(p.rank(lo))
        ranges.append((first, int(p.rank(hi)) - first))

    def first_reaching(x: SortedPart, xr, other: SortedPart, orr):
        lo, hi = np.zeros(len(ks), np.int64), np.full(len(ks), xr[1], np.int64)
        while np.any(lo < hi):
            active = lo < hi
            mid = np.where(active, (lo + hi) // 2, 0)
            rank = mid + 1 + other.count_le(x.value(xr[0] + mid)) - orr[0]
            reach = rank >= ks + 1
            hi = np.where(active & reach, mid, hi)
            lo = np.where(active & ~reach, mid + 1, lo)
        out = np.full(len(ks), np.inf)
        found = lo < xr[1]
        out[found] = x.value(xr[0] + lo[found])
        return out

    (a, b), (ar, br) = parts, ranges
    return np.minimum(first_reaching(a, ar, b, br), first_reaching(b, br, a, ar))


def pilot_grid(
    pilot: tuple[SortedPart | np.ndarray, SortedPart | np.ndarray], grid_size: int
) -> np.ndarray:
    """`grid_size` quantiles of the pilot's finite scores: the values at ranks
    round(linspace(0, N - 1, grid_size))."""
    parts = [x if isinstance(x, SortedPart) else SortedPart(x) for x in pilot]
    finite = [int(p.count_lt(np.inf)) - int(p.count_le(-np.inf)) for p in parts]
    total = sum(finite)
    if not total:
        return np.zeros(1)
    ranks = np.unique(np.round(np.linspace(0, total - 1, grid_size)).astype(np.int64))
    return np.unique(kth_smallest(parts, ranks))
