"""The upper panel's faster code paths (issue 29, fifth round) give the same numbers, bit for
bit, as the straightforward computations they replaced (kept here as the references): the
score search's DP with its gains packed along its steps, the improved bound's Renyi integrals
with each order's window set directly, and the exact curve's level crossings found on the
scan's monotone pieces."""

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from auditsel.accounting import exact, improved
from auditsel.accounting import portable as pm
from auditsel.accounting.attack import gaussian_label_laws
from auditsel.accounting.score_search import COMBOS, SHAPES, ScoreSearch, merge_buckets
from auditsel.rounds import Binomial, Poisson, TruncatedNegativeBinomial, TwoPoint

LAWS = st.sampled_from(
    [
        Poisson(10.0),
        Poisson(0.5),
        TruncatedNegativeBinomial(eta=0.0, nu=0.01),
        TruncatedNegativeBinomial(eta=1.0, nu=0.1),
        TruncatedNegativeBinomial(eta=1.0, nu=0.001),
        TwoPoint(10, 0.1),
        Binomial(20, 0.3),
    ]
)


# --- the score search's DP -----------------------------------------------------------------------
# (each property at half the examples it had before the default tier's CPU budget: every
# example is a full bit-for-bit comparison, 0.05-0.2 CPU s)
def _reference_rows(search: ScoreSearch, shape: str, combos) -> list:
    """The DP's gains per state row d, each (2, len(combos), 1, m - d + 1) (the previous code)."""
    grids: list[list[np.ndarray]] = [[], [], []]
    for name in ("left", "right"):
        mv = search.moves[shape][name]
        valid = mv["valid"]
        a_lo, b = [], []
        for num, mixed in combos:
            bound = mv["side"][1 - num][2]
            bound = np.minimum(mv["side"][1 - num][1], bound) if mixed else bound
            a_lo.append(np.where(valid, mv["side"][num][0], -np.inf))
            b.append(np.where(valid, bound, 0.0))
        floor = np.where(valid, 0.0, -np.inf)
        for grid, v in zip(grids, (a_lo, b, [floor] * len(combos))):
            grid.append(np.stack(v))
    full = [np.stack(g) for g in grids]
    m = search.m
    return [
        tuple(np.ascontiguousarray(v[:, :, dd, None, : m - dd + 1]) for v in full)
        for dd in range(m + 1)
    ]


def _reference_dp(search: ScoreSearch, shape: str, combos, eps: np.ndarray, back: bool):
    """The DP one step at a time (the previous code of `ScoreSearch._dp`)."""
    m = search.m
    e = pm.exp(np.minimum(np.asarray(eps, dtype=float), 700.0))[None, None, :, None]
    rows = _reference_rows(search, shape, combos)
    size = len(combos) * e.shape[2]
    buf = np.full((size, m + 3), -np.inf)
    if shape == "extremes":
        buf[:, 1] = 0.0
        steps, (o_left, o_right) = range(m - 1, -1, -1), (0, 1)
    else:
        buf[:, 1 : m + 2] = 0.0
        steps, (o_left, o_right) = range(1, m + 1), (2, 1)
    choices = {}
    for d in steps:
        n = m - d + 1
        if shape == "extremes":
            buf[:, n] = -np.inf
        a_lo, b, floor = rows[d]
        g = a_lo - e * b
        np.maximum(g, floor, out=g)
        left, right = g.reshape(2, size, n)
        left += buf[:, o_left : o_left + n]
        right += buf[:, o_right : o_right + n]
        if back:
            choices[d] = left > right
        np.maximum(left, right, out=buf[:, 1 : n + 1])
    if shape == "extremes":
        value = buf[:, 1 : m + 2]
        return np.max(value, axis=1), choices, np.argmax(value, axis=1)
    return buf[:, 1].copy(), choices, np.zeros(size, dtype=np.int64)


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@settings(max_examples=6, deadline=None)
@given(
    mu=st.floats(0.2, 3.0),
    law=LAWS,
    m=st.integers(2, 40),
    eps=st.lists(st.floats(0.0, 6.0), min_size=1, max_size=9),
    combo_pick=st.integers(0, 15),
    block=st.sampled_from([1, 64, 1 << 18]),
)
def test_the_dp_gives_the_bits_of_one_step_at_a_time(mu, law, m, eps, combo_pick, block):
    """Values, choices and starts of the packed DP equal the previous step-by-step DP's, for
    every shape, any subset of the combos, with and without back-tracking, and any block size
    (a block of one step, of several, of all)."""
    from auditsel.accounting import score_search

    search = ScoreSearch(merge_buckets(gaussian_label_laws(mu, 4 * m), m), law)
    combos = tuple(c for k, c in enumerate(COMBOS) if combo_pick >> k & 1) or COMBOS
    e = np.array(eps)
    old_block = score_search.GAIN_BLOCK
    score_search.GAIN_BLOCK = block
    try:
        for shape, back in itertools.product(SHAPES, (True, False)):
            got = search._dp(shape, combos, e, back)
            want = _reference_dp(search, shape, combos, e, back)
            assert _same(got[0], want[0]) and _same(got[2], want[2])
            assert got[1].keys() == want[1].keys()
            assert all(_same(got[1][d], want[1][d]) for d in want[1])
    finally:
        score_search.GAIN_BLOCK = old_block


def _reference_best(search: ScoreSearch, d: np.ndarray, start: np.ndarray) -> list:
    """`ScoreSearch.best` on the previous DP (`_reference_dp`)."""
    from auditsel.accounting.score_search import DIRECTIONS, MAX_ROUNDS, TIE, _shape_of

    cur = np.array(start, dtype=float)
    found = [None] * len(d)
    ran = {key: np.full(len(d), np.nan) for key in itertools.product(SHAPES, COMBOS)}
    for _ in range(MAX_ROUNDS):
        improved = False
        live = np.isfinite(cur)
        for shape, ((num, name), mixed) in itertools.product(
            SHAPES, itertools.product(DIRECTIONS, (True, False))
        ):
            last = ran[shape, (num, mixed)]
            idx = np.nonzero(live & (cur != last))[0]
            if len(idx):
                last[idx] = cur[idx]
                value, choices, starts = _reference_dp(
                    search, shape, ((num, mixed),), cur[idx], True
                )
                e = pm.exp(np.minimum(cur[idx], 700.0))
                slack = search.slack
                need = d[idx] + slack[num] + e * (slack[1 - num] if mixed else 0.0)
                for row in np.nonzero(value > need)[0]:
                    i = idx[row]
                    path = search._path(shape, choices, int(starts[row]), int(row))
                    eps, order, pieces = search._evaluate(shape, num, path, d[i : i + 1])
                    better = eps[0] > cur[i] * (1.0 + TIE) + TIE  # the search's tie rule
                    if better or found[i] is None and eps[0] >= cur[i]:
                        improved |= better
                        cur[i] = eps[0]
                        found[i] = (float(eps[0]), _shape_of(order, shape), name, order, pieces)
        if not improved:
            break
    return [f if f is not None else (float(c), "none") for f, c in zip(found, cur)]


@settings(max_examples=5, deadline=None)
@given(
    mu=st.floats(0.2, 3.0),
    law=LAWS,
    m=st.integers(2, 48),
    deltas=st.lists(st.floats(1e-12, 0.3), min_size=1, max_size=8),
    start=st.floats(0.0, 1.0),
)
def test_best_scores_are_those_of_the_step_by_step_dp(mu, law, m, deltas, start):
    """The improvement loop on the packed DP equals the loop on the previous step-by-step DP:
    the same eps bits, scores, directions and pieces at every delta."""
    search = ScoreSearch(merge_buckets(gaussian_label_laws(mu, 4 * m), m), law)
    d = np.array(deltas)
    first = np.full(len(d), start) * np.linspace(0.0, 1.0, len(d))  # some at 0, some not
    got = search.best(d, start=first)
    want = _reference_best(search, d, first)
    for g, w in zip(got, want):
        if w[1] == "none":
            assert g.shape == "none" and _same(g.epsilon, w[0])
            continue
        assert _same(g.epsilon, w[0]) and (g.shape, g.direction, g.order) == w[1:4]
        assert all(_same(a, b) for a, b in zip(g.pieces, w[4]))


@settings(max_examples=4, deadline=None)
@given(
    mu=st.floats(0.2, 3.0),
    law=LAWS,
    m=st.integers(2, 40),
    eps=st.lists(st.floats(0.0, 6.0), min_size=1, max_size=30),
)
def test_the_curve_with_both_shapes_side_by_side_gives_the_same_bits(mu, law, m, eps):
    """`deltas_at` with the two shapes' DPs in two threads equals one after the other, and the
    DP's own reference (the previous step-by-step DP, combined as before)."""
    from auditsel.accounting import score_search

    search = ScoreSearch(merge_buckets(gaussian_label_laws(mu, 4 * m), m), law)
    e = np.array(eps)
    saved = score_search.SIDE_BY_SIDE_WORK
    try:
        score_search.SIDE_BY_SIDE_WORK = 0
        side_by_side = search.deltas_at(e)
        score_search.SIDE_BY_SIDE_WORK = 1 << 62
        one_after_the_other = search.deltas_at(e)
    finally:
        score_search.SIDE_BY_SIDE_WORK = saved
    want = np.zeros(len(e))
    for shape in SHAPES:
        value = _reference_dp(search, shape, COMBOS, e, False)[0]
        for c, (num, mixed) in enumerate(COMBOS):
            c_b = search.slack[1 - num] if mixed else 0.0
            with np.errstate(over="ignore", invalid="ignore"):
                val = value[c * len(e) : (c + 1) * len(e)] - search.slack[num] - pm.exp(e) * c_b
            want = np.maximum(want, np.where(np.isnan(val), 0.0, val))
    assert _same(side_by_side, want) and _same(one_after_the_other, want)


# --- the improved bound's Renyi integrals --------------------------------------------------------
def _reference_divergence(integ, alpha: np.ndarray, direction: int) -> np.ndarray:
    """`_Integrand.divergence` as it was (each order's window applied by a mask)."""
    la, lb = (integ.lp, integ.lq) if direction == 0 else (integ.lq, integ.lp)
    flat = np.asarray(alpha, dtype=float).ravel()
    out = np.empty(flat.shape)
    mu, x0, n, step = integ.mu, integ.x[0], len(integ.x), improved.STEP
    lo = np.minimum(0.0, (1.0 - flat) * mu) - improved._PAD
    hi = np.maximum(mu, flat * mu) + improved._PAD
    start = np.maximum(((lo - x0) / step).astype(np.int64), 0)
    stop = np.minimum(((hi - x0) / step).astype(np.int64) + 1, n)
    block = improved.ORDER_BLOCK
    for b in range(0, len(flat), block):
        a = flat[b : b + block, None]
        first, last = int(start[b : b + block].min()), int(stop[b : b + block].max())
        cols = np.arange(first, last)
        with np.errstate(invalid="ignore"):
            terms = a * la[None, first:last]
            terms += (1.0 - a) * lb[None, first:last]
        inside = (cols >= start[b : b + block, None]) & (cols < stop[b : b + block, None])
        if not integ.finite:
            inside &= ~np.isnan(terms)
        np.copyto(terms, -np.inf, where=~inside)
        top = np.max(terms, axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        terms -= top
        np.exp(terms, out=terms)
        with np.errstate(divide="ignore"):
            log_int = np.log(np.sum(terms, axis=1)) + top[:, 0] + math.log(step)
        out[b : b + block] = np.logaddexp(log_int, integ.log_atom) / (a[:, 0] - 1.0)
    return out.reshape(np.shape(alpha))


@settings(max_examples=8, deadline=None)
@given(
    mu=st.floats(0.1, 4.0),
    law=LAWS,
    alpha=st.lists(st.floats(1.001, 60.0), min_size=1, max_size=40),
)
def test_renyi_integrals_give_the_bits_of_the_masked_sum(mu, law, alpha):
    """Each order's divergence, in both directions, equals the previous masked computation bit
    for bit (blocks of ORDER_BLOCK orders with different windows included)."""
    a = np.array(alpha)
    integ = improved._Integrand(mu, law, float(np.max(a)))
    for direction in (0, 1):
        assert _same(integ.divergence(a, direction), _reference_divergence(integ, a, direction))


def test_renyi_integrals_with_infinite_log_densities_give_the_same_bits():
    """A law whose density vanishes somewhere (-inf log-densities: the NaN terms are left out)."""
    integ = improved._Integrand(1.0, Poisson(10.0), 30.0)
    integ.lp = integ.lp.copy()
    integ.lp[::97] = -np.inf
    integ.finite = False
    a = np.linspace(1.01, 30.0, 70)
    for direction in (0, 1):
        assert _same(integ.divergence(a, direction), _reference_divergence(integ, a, direction))


# --- the exact curve's level crossings ----------------------------------------------------------
@st.composite
def scans(draw):
    """A scan made of monotone pieces (with flat stretches and repeated values), or noise."""
    n = draw(st.integers(2, 400))
    kind = draw(st.sampled_from(["pieces", "noise", "flat"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "noise":
        return rng.normal(size=n)
    if kind == "flat":
        return np.full(n, draw(st.floats(-3, 3)))
    steps = rng.integers(-3, 4, size=n - 1).astype(float)  # repeated values: flat pairs
    pieces = draw(st.integers(1, 8))
    signs = np.repeat(rng.choice([-1.0, 1.0], size=pieces), math.ceil((n - 1) / pieces))[: n - 1]
    return np.concatenate([[0.0], np.cumsum(np.abs(steps) * signs)]) * 0.25


@settings(max_examples=100, deadline=None)
@given(
    values=scans(),
    levels=st.lists(st.floats(-20, 20), min_size=1, max_size=30),
    extra=st.booleans(),
)
def test_crossings_on_monotone_pieces_are_those_of_every_comparison(values, levels, extra):
    """The same (level, position) pairs in the same order as comparing every level with every
    grid point, levels on the scan's own values (ties) and off them, +-inf and NaN included."""
    lev = np.array(levels + (values[::7].tolist() + [np.inf, -np.inf, np.nan] if extra else []))
    got = exact._crossings(values, lev)
    want = exact._crossings_dense(values, lev)
    assert all(_same(g, w) for g, w in zip(got, want))


def _reference_region_masses(winner, levels, direction=1, scan=None, log=False):
    """`exact.likelihood_ratio_region_masses` as it was: the crossings found by comparing every
    level with every grid point, one bisection for one direction."""
    levels = np.atleast_1d(np.asarray(levels, dtype=float))
    grid, values = scan if scan is not None else exact._llr_grid(winner, direction)
    sign = 1.0 if direction == 1 else -1.0
    n = len(levels)
    above = values[None, :] > levels[:, None]
    first = above[:, 0]
    lev, pos = np.nonzero(above[:, 1:] != above[:, :-1])
    c = levels[lev]
    lo, hi = grid[pos].copy(), grid[pos + 1].copy()
    lo_above = values[pos] > c
    for _ in range(exact.BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        move_lo = (sign * winner.log_likelihood_ratio(mid) > c) == lo_above
        lo = np.where(move_lo, mid, lo)
        hi = np.where(move_lo, hi, mid)
    roots = 0.5 * (lo + hi)
    per_level = np.bincount(lev, minlength=n)
    piece_level = np.repeat(np.arange(n), per_level + 1)
    group_start = np.concatenate([[0], np.cumsum(per_level + 1)[:-1]])
    rank = np.arange(len(piece_level)) - group_start[piece_level]
    a = np.full(len(piece_level), -np.inf)
    b = np.full(len(piece_level), np.inf)
    a[rank != 0] = roots
    b[rank != per_level[piece_level]] = roots
    inside = first[piece_level] ^ (rank % 2 == 1)
    a, b, where = a[inside], b[inside], piece_level[inside]
    log_p = exact._segment_logsumexp(winner.log_mass(a, b, direction), where, n)
    log_q = exact._segment_logsumexp(winner.log_mass(a, b, 1 - direction), where, n)
    return (log_p, log_q) if log else (np.exp(log_p), np.exp(log_q))


def _one_direction_at_a_time(winner, eps, scans):
    """The hockey sticks as they were computed: each direction with its own bisection."""
    out = []
    for k in (0, 1):
        log_p, log_q = _reference_region_masses(winner, eps, k, scans[k], log=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = eps + log_q - log_p
            log_h = np.where(ratio < 0, log_p + np.log(-np.expm1(np.minimum(ratio, 0.0))), -np.inf)
            out.append((log_h, -np.exp(eps + log_q - log_h)))
    return out


@settings(max_examples=4, deadline=None)
@given(
    mu=st.floats(0.1, 3.0), law=LAWS, deltas=st.lists(st.floats(1e-12, 0.5), min_size=1, max_size=8)
)
def test_exact_curves_give_the_bits_of_the_previous_code(mu, law, deltas):
    """Privacy curve (a scalar eps too), trade-off curve and exact epsilons of a winner equal
    those computed with the dense crossings and one bisection per direction (the previous
    code), bit for bit."""
    from auditsel.mechanisms import GaussianBase
    from auditsel.selection import winner_law

    winner = winner_law(GaussianBase(mu), law)
    eps = np.linspace(-0.5, 4.0, 25)
    d = np.array(deltas)

    def curves():
        return (
            exact.privacy_curve(winner, eps),
            np.atleast_1d(exact.privacy_curve(winner, 0.7)),
            *exact.tradeoff_curve(winner, 60),
            exact._gaussian_epsilons(winner, d, 1e-9),
        )

    fast = curves()
    saved = exact.likelihood_ratio_region_masses, exact._gaussian_log_hockey_sticks
    exact.likelihood_ratio_region_masses = _reference_region_masses
    exact._gaussian_log_hockey_sticks = _one_direction_at_a_time
    try:
        slow = curves()
    finally:
        exact.likelihood_ratio_region_masses, exact._gaussian_log_hockey_sticks = saved
    assert all(_same(f, s) for f, s in zip(fast, slow))


def _reference_finite_epsilon(winner, delta: float, tol: float) -> float:
    """`exact._finite_epsilon` as it was: privacy_curve (both laws recomputed) at every eps."""
    from auditsel.numerics import bisect

    def curve(e):
        return float(exact.privacy_curve(winner, np.array([e]))[0])

    if curve(0.0) <= delta:
        return 0.0
    if delta == 0:
        return exact._pure_epsilon(winner)
    hi = 1.0
    while curve(hi) > delta:
        hi *= 2
        if hi > exact.EPS_CAP:
            return math.inf
    return bisect(
        lambda e: (math.log(curve(e)) if curve(e) > 0 else -math.inf) - math.log(delta),
        0.0,
        hi,
        xtol=tol,
        rtol=1e-12,
    )


@settings(max_examples=12, deadline=None)
@given(
    pq=st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)), min_size=2, max_size=6),
    law=LAWS,
    delta=st.sampled_from([0.0, 1e-12, 1e-6, 1e-3, 0.05, 0.3]),
)
def test_finite_exact_epsilon_gives_the_bits_of_the_previous_code(pq, law, delta):
    """A finite winner's exact epsilon, its laws read once, equals the previous bisection over
    privacy_curve bit for bit (disjoint supports and delta = 0 included)."""
    from hypothesis import assume

    from auditsel.mechanisms import FiniteOutputBase
    from auditsel.selection import winner_law

    p, q = np.array([x for x, _ in pq]), np.array([y for _, y in pq])
    assume(p.sum() > 0.1 and q.sum() > 0.1)
    winner = winner_law(FiniteOutputBase(tuple(p / p.sum()), tuple(q / q.sum())), law)
    got = exact._finite_epsilon(winner, delta, 1e-9)
    assert _same(got, _reference_finite_epsilon(winner, delta, 1e-9))
