"""The bounds' batched searches (issue 29, fixed costs) against scalar references: the batched
golden section against a textbook scalar one, the improved RDP bound's order search against
one scalar search per delta on the same curve (the code path before batching), never above the
grid minimum and never below a dense grid's minimum of the same curve; the score search's DP
that runs only the deltas whose eps moved against the plain loop; the remembered exact epsilons
and the shared scan against fresh ones."""

import itertools
import math

import mpmath as mp
import numpy as np
import pytest

from auditsel.accounting import exact as exact_module
from auditsel.accounting.attack import DEFAULT_RESOLUTION, gaussian_label_laws
from auditsel.accounting.improved import _Integrand, _orders_for, improved_epsilon
from auditsel.accounting.rdp import (
    ORDER_XTOL,
    gaussian_rdp,
    rdp_to_epsilon,
    rdp_to_epsilon_continuous,
)
from auditsel.accounting.score_search import (
    COMBOS,
    DIRECTIONS,
    MAX_ROUNDS,
    SHAPES,
    TIE,
    ScoreSearch,
    SearchResult,
    _shape_of,
    merge_buckets,
)
from auditsel.mechanisms import GaussianBase
from auditsel.numerics import golden_min
from auditsel.rounds import Binomial, Poisson, TruncatedNegativeBinomial, TwoPoint
from auditsel.selection import winner_law

DELTAS = np.array([1e-5, 1e-10, 1e-8, 1e-6, 1e-4, 1e-3, 1e-2])
LAWS = [
    TruncatedNegativeBinomial(0.0, 0.01),
    TruncatedNegativeBinomial(1.0, 1e-3),
    Poisson(10.0),
    TwoPoint(1000, 1e-3),
    Binomial(100, 0.1),
]


def _golden_reference(f, left, right, steps=60):
    """The textbook scalar golden section (the search the bounds used one delta at a time)."""
    g = (math.sqrt(5) - 1) / 2
    c, d = right - g * (right - left), left + g * (right - left)
    fc, fd = f(c), f(d)
    for _ in range(steps):
        if fc < fd:
            right, d, fd = d, c, fc
            c = right - g * (right - left)
            fc = f(c)
        else:
            left, c, fc = c, d, fd
            d = left + g * (right - left)
            fd = f(d)
    return (c, fc) if fc < fd else (d, fd)


FUNCTIONS = [
    lambda x: (x - 0.3) ** 2,
    lambda x: np.abs(x - 1.7) + 0.1 * x,  # a kink at the minimum
    lambda x: np.cosh(x) - 2 * x,
    lambda x: np.maximum(x, -x) + 1e-3 * np.sin(50 * x),  # several local minima
]


@pytest.mark.parametrize("k", range(len(FUNCTIONS)))
def test_batched_golden_min_is_the_scalar_search_entry_by_entry(k):
    """Each entry of a batch follows its own scalar search: the same point and value, bit for
    bit, on brackets of every width and position; the scalar form is the same search."""
    f = FUNCTIONS[k]
    rng = np.random.default_rng(k)
    left = rng.uniform(-3, 1, 25)
    right = left + rng.uniform(1e-6, 4, 25)
    x, fx = golden_min(f, left, right)
    for i in range(len(left)):
        ref = _golden_reference(lambda t: float(f(np.array([t]))[0]), left[i], right[i])
        assert (x[i], fx[i]) == ref
        assert golden_min(lambda t: float(f(np.array([t]))[0]), left[i], right[i]) == ref
    assert np.array_equal(fx, f(x))  # a real evaluation of f, never an extrapolation


def test_golden_min_stops_on_the_bracket_width():
    """xtol: every bracket at most xtol wide at the stop, fewer evaluations, the same minimum
    of a smooth function to 1e-12 relative."""
    calls = []
    f = lambda x: (calls.append(1), (x - 0.3) ** 2 + 1.0)[1]
    left, right = np.array([0.0, -1.0]), np.array([1.0, 2.0])
    _, full = golden_min(f, left, right)
    n_full = len(calls)
    calls.clear()
    x, early = golden_min(f, left, right, xtol=1e-7)
    assert len(calls) < n_full - 20
    assert np.allclose(early, full, rtol=1e-12, atol=0)
    assert np.all(np.abs(x - 0.3) < 1e-7)


def _gaussian_minimum(mu: float, delta: float) -> float:
    """min over alpha > 1 of alpha mu^2 / 2 + log(1 - 1/alpha) - (log delta + log alpha) /
    (alpha - 1), at 40 digits (mpmath: the root of the derivative, then the value there)."""
    with mp.workdps(40):
        mu, d = mp.mpf(mu), mp.mpf(delta)
        f = lambda a: a * mu**2 / 2 + mp.log(1 - 1 / a) - (mp.log(d) + mp.log(a)) / (a - 1)
        # bracket the minimum on a float scan, then the root of f' inside the bracket
        a = 1 + np.geomspace(1e-4, 1e5, 2001)
        v = [f(mp.mpf(x)) for x in a]
        k = int(np.argmin(v))
        bracket = (mp.mpf(a[max(k - 1, 0)]), mp.mpf(a[min(k + 1, len(a) - 1)]))
        return float(f(mp.findroot(lambda x: mp.diff(f, x), bracket, solver="anderson")))


# reason: 0.9 CPU s a mu (mpmath's minimum per delta); the two ends by default
@pytest.mark.parametrize("mu", [0.1, pytest.param(1.0, marks=pytest.mark.slow), 3.0])
def test_continuous_conversion_of_many_deltas_is_each_deltas_own(mu):
    """rdp_to_epsilon_continuous at an array of deltas = one call per delta (the same scan and
    search, evaluated together), for the default scan and for a grid per delta; never above
    the grid conversion over the same orders; for the Gaussian curve, never below its true
    minimum over alpha (mpmath) and within 1e-12 relative of it."""
    curve = lambda a: gaussian_rdp(mu, a)
    many = rdp_to_epsilon_continuous(curve, DELTAS)
    one = np.array([rdp_to_epsilon_continuous(curve, float(d)) for d in DELTAS])
    assert np.array_equal(many, one)
    grids = 1 + np.geomspace(np.full(len(DELTAS), 0.01), np.full(len(DELTAS), 500.0), 50, axis=-1)
    per = rdp_to_epsilon_continuous(curve, DELTAS, grid=grids)
    for j, d in enumerate(DELTAS):
        assert per[j] == rdp_to_epsilon_continuous(curve, float(d), grid=grids[j])
        assert per[j] <= rdp_to_epsilon(grids[j], curve(grids[j]), float(d))
        true = _gaussian_minimum(mu, float(d))
        for value in (many[j], per[j]):
            assert true * (1 - 1e-14) <= value <= true * (1 + 1e-12)
    assert rdp_to_epsilon_continuous(curve, np.array([0.0, 1e-5]))[0] == math.inf


def _improved_scalar(mu, law, d):
    """The improved bound at one delta by the scalar path: the grid, then 9 orders between the
    best grid order's neighbours, then a 60-step scalar golden search in log(alpha - 1)
    around the best of them (today's batched code, one delta at a time, no early stop)."""
    orders = _orders_for(mu)
    integ = _Integrand(mu, law, float(np.max(orders)))
    gamma = integ.gamma(orders)
    conv = lambda a: np.log1p(-1 / a) - (math.log(d) + np.log(a)) / (a - 1)
    grid_eps = rdp_to_epsilon(orders, gamma, d)
    i = int(np.argmin(gamma + conv(orders)))
    lo, hi = orders[max(i - 1, 0)] - 1, orders[min(i + 1, len(orders) - 1)] - 1
    xs = np.geomspace(lo, hi, 9)
    vals = integ.gamma(1 + xs) + conv(1 + xs)
    k = int(np.argmin(vals))
    f = lambda t: float(integ.gamma(np.array([1 + math.exp(t)]))[0] + conv(1 + math.exp(t)))
    _, best = _golden_reference(f, math.log(xs[max(k - 1, 0)]), math.log(xs[min(k + 1, 8)]))
    return min(grid_eps, max(min(best, float(vals[k])), 0.0)), integ, gamma, orders


def _nested_grid_minimum(integ, orders, gamma, d):
    """The minimum of the conversion of the same curve by nested dense grids of orders (201
    orders between the best one's neighbours, five times: a spacing below 1e-9 of the grid's,
    also at a kink where the two directions cross)."""
    conv = lambda a, g: g + np.log1p(-1 / a) - (math.log(d) + np.log(a)) / (a - 1)
    a, values = orders, conv(orders, gamma)
    for _ in range(5):
        i = int(np.argmin(values))
        a = np.linspace(a[max(i - 1, 0)], a[min(i + 1, len(a) - 1)], 201)
        values = conv(a, integ.gamma(a))
    return float(np.min(values))


@pytest.mark.parametrize(
    ("mu", "law"),
    [
        # reason: about 2.5 CPU s each; the second setting runs by default
        pytest.param(0.268, LAWS[0], marks=pytest.mark.slow),
        (0.05, LAWS[2]),
        pytest.param(1.0, LAWS[3], marks=pytest.mark.slow),
    ],
)
def test_improved_order_search_batched_is_the_scalar_search(mu, law):
    """The improved RDP bound at seven deltas at once = one scalar search per delta on the
    same curve to 1e-12 relative (the batched search stops once its bracket is ORDER_XTOL
    wide); never above the bound over the grid; never below the minimum of the same curve
    found by nested dense grids of orders (the value is the conversion at an order actually
    evaluated, so a valid bound at any order; it must not undercut the curve's minimum)."""
    ours = improved_epsilon(mu, law, DELTAS)
    for j, d in enumerate(DELTAS):
        if j % 2 and mu != 0.268:  # every delta for the quickstart's mu, four for the others
            continue
        ref, integ, gamma, orders = _improved_scalar(mu, law, float(d))
        assert ours[j] == pytest.approx(ref, rel=1e-12, abs=0)
        assert ours[j] <= rdp_to_epsilon(orders, gamma, float(d))
        assert ours[j] >= _nested_grid_minimum(integ, orders, gamma, float(d)) * (1 - 1e-12)
    assert ORDER_XTOL <= 1e-9


def test_improved_renyi_integrals_in_blocks_are_each_orders_own():
    """The divergence of many orders at once (blocks of orders, each with its own window of
    the grid) = each order alone, to rounding (1e-14 relative), in both directions; any shape."""
    integ = _Integrand(0.3, LAWS[1], 80.0)
    orders = np.concatenate([_orders_for(0.3), [1.001, 1.5, 33.3]])
    for direction in (0, 1):
        many = integ.divergence(orders, direction)
        one = np.array([integ.divergence(np.array([a]), direction)[0] for a in orders])
        assert np.allclose(many, one, rtol=1e-12, atol=1e-12)
    grid = orders[:12].reshape(3, 4)
    assert np.array_equal(integ.gamma(grid), integ.gamma(orders[:12]).reshape(3, 4))


def _best_plain(search: ScoreSearch, d: np.ndarray, start: np.ndarray) -> list:
    """ScoreSearch.best as a plain loop: every DP of every round for every live delta."""
    cur, found = np.array(start, dtype=float), [None] * len(d)
    for _ in range(MAX_ROUNDS):
        improved = False
        for shape, ((num, name), mixed) in itertools.product(
            SHAPES, itertools.product(DIRECTIONS, (True, False))
        ):
            idx = np.nonzero(np.isfinite(cur))[0]
            value, choices, starts = search._dp(shape, ((num, mixed),), cur[idx], True)
            e = np.exp(np.minimum(cur[idx], 700.0))
            need = d[idx] + search.slack[num] + e * (search.slack[1 - num] if mixed else 0.0)
            for row in np.nonzero(value > need)[0]:
                i = idx[row]
                path = search._path(shape, choices, int(starts[row]), int(row))
                eps, order, pieces = search._evaluate(shape, num, path, d[i : i + 1])
                better = eps[0] > cur[i] * (1.0 + TIE) + TIE  # the search's tie rule
                if better or found[i] is None and eps[0] >= cur[i]:
                    improved |= better
                    cur[i] = eps[0]
                    found[i] = SearchResult(
                        float(eps[0]), _shape_of(order, shape), name, order, pieces
                    )
        if not improved:
            break
    return [(f.epsilon, f.shape, f.direction, f.order) if f else c for f, c in zip(found, cur)]


# reason: 1 CPU s a law; a TNB and a two-point law by default
@pytest.mark.parametrize("law", [LAWS[0], pytest.param(LAWS[2], marks=pytest.mark.slow), LAWS[3]])
def test_score_search_runs_only_moved_deltas_and_finds_the_same_scores(law):
    """best() skips a DP whose delta's eps has not moved since it last ran (the DP at the same
    eps finds the same score, which improved nothing): the same eps and scores, bit for bit,
    as the plain loop; deltas_at (one DP per shape for its four bounds) = the max over the
    four DPs run one by one."""
    mu = 0.268
    laws = gaussian_label_laws(mu, DEFAULT_RESOLUTION)
    search = ScoreSearch(merge_buckets(laws, DEFAULT_RESOLUTION), law)
    start = np.asarray(exact_module.exact_epsilon(winner_law(GaussianBase(mu), law), DELTAS))
    got = [(f.epsilon, f.shape, f.direction, f.order) for f in search.best(DELTAS, start)]
    assert got == _best_plain(search, DELTAS, start)
    eps = np.linspace(0.0, 4.0, 23)
    want = np.zeros(len(eps))
    for shape, (num, mixed) in itertools.product(SHAPES, COMBOS):
        value, _, _ = search._dp(shape, ((num, mixed),), eps, False)
        c_b = search.slack[1 - num] if mixed else 0.0
        want = np.maximum(want, value - search.slack[num] - np.exp(eps) * c_b)
    assert np.array_equal(search.deltas_at(eps), want)


def test_exact_epsilons_remembered_and_the_scan_shared():
    """exact_epsilon remembers a Gaussian winner's epsilons per (winner, deltas): the same
    numbers as a fresh computation, each call its own copy; the scan's direction 0 is the
    exact negation of direction 1, computed once per winner and read-only."""
    w = winner_law(GaussianBase(0.5), LAWS[0])
    first = exact_module.exact_epsilon(w, DELTAS)
    fresh = exact_module._gaussian_epsilons(w, DELTAS, 1e-9)
    assert np.array_equal(first, fresh)
    first[:] = -1.0
    assert np.array_equal(exact_module.exact_epsilon(w, DELTAS), fresh)
    (g0, v0), (g1, v1) = exact_module._llr_grid(w, 0), exact_module._llr_grid(w, 1)
    assert g0 is g1 and np.array_equal(v0, -v1)
    assert exact_module._llr_grid(w, 1)[1] is v1
    assert not v1.flags.writeable and not v0.flags.writeable
    grid = np.arange(-40.0, 0.5 + 40.0 + 2e-3, 2e-3)
    assert np.array_equal(v1, w.log_likelihood_ratio(grid))
