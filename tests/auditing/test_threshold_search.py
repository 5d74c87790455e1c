"""The batched threshold search against the one-block-per-pass walk it replaced, and against a
dense evaluation of every row: the same row, value and limits, on flat objectives, ties,
infinite values, `floor` and `stop_above`."""

import math
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditsel.auditing import clopper_pearson, threshold_search
from auditsel.auditing.clopper_pearson import cp_limits
from auditsel.auditing.gdp_fitting import minus_mu_objective, mu_objective
from auditsel.auditing.sorted_scores import SortedPart, SortedScores
from auditsel.auditing.threshold_search import CandidateRows, eq4_objective, search_rows

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
try:  # the walk before batching (commit bd35971), pinned for the benchmark
    from baselines import search_sequential as before
finally:
    sys.path.remove(str(ROOT / "benchmarks"))


def _steps(fp_u, fn_u):  # non-increasing in both, many ties (flat on wide ranges)
    return np.floor(4 * eq4_objective(1e-5)(fp_u, fn_u)) / 4


def _constant(fp_u, fn_u):  # every row ties
    return np.zeros(np.shape(fp_u))


def _minus_infinity(fp_u, fn_u):  # no row has a value: the first row found is returned
    return np.full(np.shape(fp_u), -np.inf)


def _infinite(fp_u, fn_u):  # +inf where FN_u is small: non-increasing in both
    return np.where(np.asarray(fn_u) < 0.2, np.inf, mu_objective(fp_u, fn_u))


OBJECTIVES = {
    "eq4": eq4_objective(1e-5),
    "mu": mu_objective,
    "steps": _steps,
    "constant": _constant,
    "infinite": _infinite,
    "minus infinity": _minus_infinity,
}


@contextmanager
def batch(n):
    saved = threshold_search.BATCH
    threshold_search.BATCH = n
    try:
        yield
    finally:
        threshold_search.BATCH = saved


def same(a, b):
    """Equal tuples, nan equal to nan, bit for bit."""
    return a[0] == b[0] and all(
        np.array_equal(np.float64(x), np.float64(y), equal_nan=True) for x, y in zip(a[1:], b[1:])
    )


def dense(rows, n0, n1, lim0, lim1, objective, flip):
    """Every row's value with exact limits (the reference maximum)."""
    i = np.arange(rows.m)
    f, g = rows.fp(i), rows.fn(i)
    c0, c1 = (n0 - f, n1 - g) if flip else (f, g)
    with np.errstate(invalid="ignore"):
        value = objective(lim0.exact(c0), lim1.exact(c1))
    return np.where(np.isnan(value), -np.inf, value)


def both_ways(rows, n0, n1, lim0, lim1, objective, **kw):
    """search_rows now (at several batch sizes) and before; they must agree exactly."""
    old = before.search_rows(rows, n0, n1, lim0, lim1, objective, **kw)
    for n in (1, 3, threshold_search.BATCH):
        with batch(n):
            new = search_rows(rows, n0, n1, lim0, lim1, objective, **kw)
        assert same(new, old), (n, new, old)
    return old


@given(
    st.lists(st.tuples(st.integers(-20, 20), st.booleans()), min_size=4, max_size=300),
    st.sampled_from(sorted(OBJECTIVES)),
    st.sampled_from([0.05, 1e-4]),
    st.booleans(),
    st.sampled_from([(2, 1), (3, 2), (4, 3), (64, 32)]),
    st.sampled_from(["none", "at a row", "below", "above"]),
    st.sampled_from(["none", "at a row", "low"]),
)
@settings(max_examples=150, deadline=None)
def test_the_batched_search_is_the_walk_before_and_the_dense_maximum(
    pairs, name, alpha, flip, shape, floor_at, stop_at
):
    scores = np.array([p[0] for p in pairs], dtype=float)
    member = np.array([p[1] for p in pairs], dtype=np.int8)
    c = SortedScores(scores, member).counts()
    rows = CandidateRows.table(c.t, c.fp, c.fn)
    objective = OBJECTIVES[name]
    lim0, lim1 = cp_limits(c.n0, alpha), cp_limits(c.n1, alpha)
    values = dense(rows, c.n0, c.n1, lim0, lim1, objective, flip)
    finite = values[np.isfinite(values)]
    pick = float(np.median(finite)) if len(finite) else 0.0
    floor = {"none": -math.inf, "at a row": pick, "below": pick - 1, "above": values.max() + 1}
    stop = {"none": math.inf, "at a row": pick, "low": -math.inf}
    kw = dict(flip=flip, fanout=shape[0], leaf=shape[1])
    kw |= dict(floor=floor[floor_at], stop_above=stop[stop_at])
    row, value, l0, l1 = both_ways(rows, c.n0, c.n1, lim0, lim1, objective, **kw)
    above = values > kw["floor"]
    if not above.any() and kw["floor"] > -math.inf:
        assert (row, value) == (-1, -math.inf) and math.isnan(l0) and math.isnan(l1)
        return
    assert row >= 0 and value == values[row] and (value > kw["floor"] or not above.any())
    if not value > kw["stop_above"]:  # no early stop: the exact maximum
        assert value == values.max()
    i = np.array([row])
    f, g = rows.fp(i), rows.fn(i)
    c0, c1 = (c.n0 - f, c.n1 - g) if flip else (f, g)
    assert (l0, l1) == (lim0.exact(c0)[0], lim1.exact(c1)[0])


@given(
    st.lists(st.tuples(st.integers(-20, 20), st.booleans()), min_size=4, max_size=300),
    st.booleans(),
    st.sampled_from([(2, 1), (3, 2), (64, 32)]),
)
@settings(max_examples=60, deadline=None)
def test_the_goodness_of_fit_search_increasing_in_lower_limits(pairs, flip, shape):
    # the GDP fit's other search: lower limits, an objective increasing in both, -inf where the
    # interval is unbounded, stop_above and floor at -mu_L
    scores = np.array([p[0] for p in pairs], dtype=float)
    member = np.array([p[1] for p in pairs], dtype=np.int8)
    c = SortedScores(scores, member).counts()
    rows = CandidateRows.table(c.t, c.fp, c.fn)
    l0, l1 = cp_limits(c.n0, 1e-3, upper=False), cp_limits(c.n1, 1e-3, upper=False)
    values = dense(rows, c.n0, c.n1, l0, l1, minus_mu_objective, flip)
    for level in (
        -math.inf,
        float(np.median(values[np.isfinite(values)] if np.isfinite(values).any() else [0])),
    ):
        kw = dict(flip=flip, increasing=True, fanout=shape[0], leaf=shape[1])
        found = both_ways(rows, c.n0, c.n1, l0, l1, minus_mu_objective, **kw, floor=level)
        if found[0] >= 0:
            assert found[1] == values[found[0]] and found[1] == values.max()


def _stepped(k, objective):  # non-increasing, ties wherever values share a step of 1/k
    return lambda fp_u, fn_u: np.floor(k * objective(fp_u, fn_u)) / k


def test_ties_on_stepped_objectives_break_as_before():
    # many rows tie on stepped objectives: the row returned is the one the walk before found
    # first (a later row of the same value never replaces it; a leaf's rows in decreasing order
    # of their bound). Seeded inputs of duplicated scores, 100 of them (each fanout and leaf 25
    # times, each level 50). Note: at this commit the pruning (a block or row whose bound is
    # not above the best is never opened) keeps equal values from competing, so ">= for >",
    # a leaf's rows in increasing order, or its last maximum taken are each not caught here
    # even over 250 seeds (checked by hand); what this asserts is the walk before's row.
    objectives = (_stepped(1, eq4_objective(1e-5)), _stepped(2, mu_objective))
    for seed in range(100):
        rng = np.random.default_rng(seed)
        n, grid = int(rng.integers(20, 3000)), int(rng.integers(3, 60))
        member = rng.integers(0, 2, n).astype(np.int8)
        scores = np.round((rng.normal(size=n) + rng.random() * member) * grid / 6)
        c = SortedScores(scores, member).counts()
        rows = CandidateRows.table(c.t, c.fp, c.fn)
        fanout, leaf = [(2, 1), (3, 2), (8, 4), (64, 32)][seed % 4]
        lim0, lim1 = (cp_limits(k, [0.05, 1e-3][seed % 2]) for k in (c.n0, c.n1))
        for objective in objectives:
            for flip in (False, True):
                kw = dict(flip=flip, fanout=fanout, leaf=leaf)
                old = before.search_rows(rows, c.n0, c.n1, lim0, lim1, objective, **kw)
                new = search_rows(rows, c.n0, c.n1, lim0, lim1, objective, **kw)
                assert same(new, old), (seed, flip, new, old)


def test_ties_go_to_the_row_found_first():
    # a constant objective: every block has the same bound, blocks pop by their first row, so the
    # first leaf is the first rows and its first row (in decreasing bound, stably) is row 0
    rng = np.random.default_rng(4)
    scores, member = rng.normal(size=5000), rng.integers(0, 2, 5000).astype(np.int8)
    c = SortedScores(scores, member).counts()
    rows = CandidateRows.table(c.t, c.fp, c.fn)
    lim0, lim1 = cp_limits(c.n0, 0.05), cp_limits(c.n1, 0.05)
    for flip in (False, True):
        found = both_ways(rows, c.n0, c.n1, lim0, lim1, _constant, flip=flip)
        assert found[:2] == (0, 0.0)


@pytest.mark.parametrize("shift", [0.0, 0.5])
def test_flat_objectives_on_gaussian_scores_in_few_passes(shift, monkeypatch):
    # the GDP mu on Gaussian scores is nearly constant over thresholds: hundreds of blocks are
    # opened; the batched walk returns what the walk before returned, in a few vectorised passes
    n = 1_000_000
    rng = np.random.default_rng(1)
    member = rng.integers(0, 2, n).astype(np.int8)
    scores = rng.standard_normal(n) + shift * member
    s0, s1 = SortedScores(scores, member).by_coin()
    p0, p1 = SortedPart(s0), SortedPart(s1)
    a = 0.05 / (2 * n)
    lim0, lim1 = cp_limits(p0.n, a), cp_limits(p1.n, a)
    passes = []
    split = threshold_search._Walk.split
    monkeypatch.setattr(
        threshold_search._Walk,
        "split",
        lambda self, b, w: passes.append(len(b)) or split(self, b, w),
    )
    for flip, part in ((False, p0), (True, p1)):
        rows = CandidateRows.on(part, p0, p1)
        old = before.search_rows(rows, p0.n, p1.n, lim0, lim1, mu_objective, flip=flip)
        passes.clear()
        new = search_rows(rows, p0.n, p1.n, lim0, lim1, mu_objective, flip=flip)
        assert same(new, old)
        blocks = sum(passes) - 1  # the root's split is one pass of one block
        assert blocks >= 50 and len(passes) <= 2 + math.log2(blocks), passes


def test_the_limit_bounds_are_the_ones_before_bit_for_bit():
    # the bounds order the walk: the same walk needs the same numbers (the divergence's terms
    # in x, computed once for every Newton step, change none)
    rng = np.random.default_rng(2)
    for nobs in (7, 1000, 5_000_000):
        counts = np.concatenate([rng.integers(0, nobs + 1, 20_000), [0, 1, nobs - 1, nobs]])
        for a in (0.05, 1e-5, 2.5e-9):
            for upper in (True, False):
                lim = cp_limits(nobs, a, upper)
                old = before._limit_bounds(upper, counts / nobs, lim.c, lim.edge)
                assert np.array_equal(lim.bound(counts), old)
    x = np.concatenate([rng.random(10_000), [0.0, 1e-300, 0.5, 1 - 1e-16]])
    for c in (1e-12, 1e-4, 0.3):
        assert np.array_equal(clopper_pearson._kl_root_below(x, c), before._kl_root_below(x, c))


@given(
    st.lists(
        st.sampled_from([-np.inf, -2.0, -1.0, 0.0, 0.5, 3.0, np.inf]), min_size=1, max_size=60
    ),
    st.lists(st.floats(-5, 5), min_size=0, max_size=60),
)
@settings(max_examples=100, deadline=None)
def test_own_counts_are_the_binary_searches(tied, spread):
    # a part's count <= its own j-th member: j + 1 unless the next member ties (or is NaN)
    s = np.sort(np.array(tied + spread + [math.nan] * (len(spread) % 3)))
    for part in (SortedPart(s), SortedPart(s, np.arange(len(s)) % 2 == 0)):
        j = np.arange(part.n)
        assert np.array_equal(part.count_le_own(j), part.count_le(part.value(j)))


def test_own_counts_of_a_subset_kept_as_a_bitset():
    rng = np.random.default_rng(5)
    s = np.sort(np.round(rng.normal(size=SortedPart.copy_below + 10) * 1000))  # many ties
    part = SortedPart(s, rng.random(len(s)) < 0.3)
    assert part.words is not None
    j = np.concatenate([np.arange(0, part.n, 997), [part.n - 1]])
    assert np.array_equal(part.count_le_own(j), part.count_le(part.value(j)))
