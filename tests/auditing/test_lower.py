"""Epsilon lower bounds: eq. 4, Clopper-Pearson limits, threshold rules, validity."""

import math
import typing

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from attacks.proxies import make_proxy
from auditsel.accounting.exact import exact_epsilon
from auditsel.auditing.clopper_pearson import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    cp_limits,
    pair_limit_bounds,
)
from auditsel.auditing.estimators import winner_tradeoff
from auditsel.auditing.gdp_fitting import gdp_fit, gdp_mu, minus_mu_objective, mu_objective
from auditsel.auditing.lower import RuleChoice, apply_rule, audit_scores
from auditsel.auditing.planning import PlanCurve, expected_for_games
from auditsel.auditing.rules import BonferroniAll, BonferroniGrid, MultiSplit, Split, threshold_rule
from auditsel.auditing.sorted_scores import SortedScores, threshold_table
from auditsel.auditing.threshold_search import (
    CandidateRows,
    ThresholdTest,
    best_on_coins,
    epsilon_from_rates,
    eq4_objective,
    search_rows,
)
from auditsel.errors import ConfigError
from auditsel.games.engine import run_game
from auditsel.mechanisms import GaussianBase, gaussian_epsilon
from auditsel.rounds import Point, TruncatedNegativeBinomial
from auditsel.selection import GaussianWinner


def test_eq4_is_tight_on_the_gaussian_trade_off():
    # for an (eps, delta) pair of the Gaussian profile, the trade-off point of the optimal test
    # at the crossing threshold satisfies FP + e^eps FN = 1 - delta exactly.
    mu, t = 1.0, 0.3
    fp = stats.norm.sf(t)  # b = 0 is N(0,1), guess 1 when x > t
    fn = stats.norm.cdf(t - mu)  # b = 1 is N(mu,1)
    eps = epsilon_from_rates(fp, fn, 0.0)
    assert eps == pytest.approx(max(math.log((1 - fp) / fn), math.log((1 - fn) / fp)))
    # no (FP, FN) of a mu-GDP test can certify more than the true eps at any delta
    for delta in (1e-5, 1e-2):
        ts = np.linspace(-3, 4, 200)
        eps_all = epsilon_from_rates(stats.norm.sf(ts), stats.norm.cdf(ts - mu), delta)
        assert eps_all.max() <= gaussian_epsilon(mu, delta) + 1e-9


def test_zero_rates_give_finite_valid_bounds():
    # a raw zero rate would give log(.../0) = inf; the CP limits keep every bound finite
    assert float(epsilon_from_rates(0.0, 0.5, 1e-5)) == math.inf
    n = 1000
    scores = np.r_[np.zeros(n), np.ones(n)]  # perfectly separated: FP = FN = 0
    member = np.r_[np.zeros(n), np.ones(n)].astype(np.int8)
    for rule in ("split", "bonferroni", "bonferroni_all"):
        rng = np.random.default_rng(0)
        order = rng.permutation(2 * n)
        rule = threshold_rule(rule, grid=np.linspace(0, 1, 100))
        lb = audit_scores(scores[order], member[order], 1e-5, rule=rule)
        rule = rule.name
        assert math.isfinite(lb.eps) and lb.eps > 0
        # with zero errors the CP limit is 1 - (a/2)^(1/n): eps_L = log((1 - d - u)/u)
        a = {"split": 0.05, "bonferroni": 0.05 / 200, "bonferroni_all": 0.05 / (2 * n)}[rule]
        u = 1 - (a / 2) ** (1 / (lb.evaluated_trials / 2))
        assert lb.eps <= math.log((1 - 1e-5) / u) + 0.05
        assert math.isfinite(lb.eps_best_threshold) and lb.eps_best_threshold >= lb.eps - 1e-12


def test_clopper_pearson_is_statsmodels_beta():
    from statsmodels.stats.proportion import proportion_confint

    assert clopper_pearson_upper(3, 50, 0.05)[()] == pytest.approx(
        proportion_confint(3, 50, 0.05, "beta")[1]
    )
    assert clopper_pearson_upper(0, 50, 0.05)[()] == pytest.approx(1 - 0.025 ** (1 / 50))
    assert clopper_pearson_upper(50, 50, 0.05)[()] == 1.0
    # every count, two levels: the same numbers as statsmodels (no per-call overhead here)
    k = np.arange(0, 301)
    for a in (0.05, 1e-9):
        lo, up = proportion_confint(k, 300, alpha=a, method="beta")
        assert np.allclose(
            clopper_pearson_upper(k, 300, a), np.where(k >= 300, 1.0, up), rtol=1e-12, atol=0
        )
        assert np.allclose(
            clopper_pearson_lower(k, 300, a), np.where(k <= 0, 0.0, lo), rtol=1e-12, atol=0
        )


@given(st.lists(st.tuples(st.integers(-5, 5), st.booleans()), min_size=2, max_size=60))
@settings(max_examples=100, deadline=None)
def test_threshold_table_matches_brute_force(pairs):
    scores = np.array([p[0] for p in pairs], dtype=float)
    member = np.array([p[1] for p in pairs], dtype=np.int8)
    t, fp, fn, n0, n1 = threshold_table(scores, member)
    assert np.all(np.diff(t) > 0)
    for ti, fpi, fni in zip(t, fp, fn):
        assert fpi == np.sum((scores > ti) & (member == 0))
        assert fni == np.sum((scores <= ti) & (member == 1))


def test_best_rule_equals_exhaustive_maximum():
    rng = np.random.default_rng(1)
    n = 3000
    member = rng.integers(0, 2, n).astype(np.int8)
    scores = rng.normal(member * 1.5, 1.0)
    lb = audit_scores(scores, member, 1e-5, rule="bonferroni_all")
    t, fp, fn, n0, n1 = threshold_table(scores, member)

    def brute(a):
        return max(
            epsilon_from_rates(
                clopper_pearson_upper(fp, n0, a), clopper_pearson_upper(fn, n1, a), 1e-5
            ).max(),
            epsilon_from_rates(
                clopper_pearson_upper(n0 - fp, n0, a), clopper_pearson_upper(n1 - fn, n1, a), 1e-5
            ).max(),
        )

    assert lb.eps_best_threshold == pytest.approx(brute(0.05), rel=1e-12)
    assert lb.eps == pytest.approx(brute(0.05 / n), rel=1e-12)  # bonferroni_all: a = alpha / n
    assert lb.eps < lb.eps_best_threshold


@pytest.mark.parametrize(
    "rule",
    [
        Split(seed=3),
        BonferroniGrid(seed=3),
        BonferroniGrid(grid=(-1.0, 0.0, 0.5, 1.0, 2.0)),
        BonferroniAll(),
        MultiSplit(splits=5, seed=3),
    ],
)
def test_apply_rule_returns_its_typed_choice(rule):
    """`apply_rule` returns a RuleChoice: every required key, nothing undeclared, the declared
    types; its eps is eq. 4 at its own limits, and multisplit's is the lower median of its
    splits."""
    rng = np.random.default_rng(5)
    member = rng.integers(0, 2, 2000).astype(np.int8)
    scores = rng.normal(member * 1.0, 1.0)
    got = apply_rule(SortedScores(scores, member), rule, 0.05, 1e-5)
    required, optional = RuleChoice.__required_keys__, RuleChoice.__optional_keys__
    assert required <= set(got) <= required | optional
    assert ("splits" in got) == isinstance(rule, MultiSplit)
    assert set(ThresholdTest.__required_keys__) <= required
    for key, hint in typing.get_type_hints(RuleChoice).items():
        if key in got and key != "splits":
            assert isinstance(got[key], hint) and not (hint is int and isinstance(got[key], bool))
    assert got["eps"] == pytest.approx(float(epsilon_from_rates(got["fp_u"], got["fn_u"], 1e-5)))
    assert 0 < got["n"] <= len(scores)
    if isinstance(rule, MultiSplit):
        assert got["splits"] == sorted(got["splits"]) and len(got["splits"]) == 5
        assert got["eps"] == got["splits"][2]


def test_best_is_never_a_rule():
    with pytest.raises(ValueError, match="eps_best_threshold"):
        audit_scores(np.arange(10.0), np.arange(10) % 2, 1e-5, rule="best")


def test_direction_is_found_when_the_signal_is_reversed():
    rng = np.random.default_rng(2)
    member = rng.integers(0, 2, 20000).astype(np.int8)
    scores = rng.normal(-2.0 * member, 1.0)  # members score *lower*
    lb = audit_scores(scores, member, 1e-5, rule="split")
    assert lb.direction == "<=" and lb.eps > 1


def test_gdp_fit_recovers_mu():
    mu = 1.3
    fp, fn = stats.norm.sf(0.5), stats.norm.cdf(0.5 - mu)
    assert gdp_mu(fp, fn) == pytest.approx(mu)


def test_one_class_and_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="member"):
        audit_scores(np.arange(10.0), np.zeros(10), 1e-5)
    with pytest.raises(ConfigError, match="rule: must be one of"):
        audit_scores(np.arange(10.0), np.arange(10) % 2, 1e-5, rule="max")
    with pytest.raises(ValueError, match="score"):
        audit_scores(np.array([np.nan, 1.0]), np.array([0, 1]), 1e-5)


@pytest.mark.parametrize(
    "seed", [0, *(pytest.param(s, marks=pytest.mark.slow) for s in (1, 2, 3))]
)  # seeds 1-3: a statistical run (2 CPU s each); seed 0 by default
def test_lower_bound_never_exceeds_exact_on_reduced_game(seed):
    w = GaussianWinner(GaussianBase.from_epsilon(2.0, 1e-5), TruncatedNegativeBinomial(0.0, 0.01))
    exact = exact_epsilon(w, 1e-5)
    rec = run_game(w, make_proxy("likelihood_ratio", w), 200_000, seed)
    # what the planner's oracle test expects of each rule at 200,000 games (the exact trade-off
    # curve of the winner, auditsel.auditing.planning): a rule that finds its threshold in the
    # data reaches at least half of it (a zero estimator would pass `<= exact` alone; the seeded
    # splits make the numbers repeatable)
    curve = PlanCurve(*(np.asarray(x) for x in winner_tradeoff(w.mu, w.law)), "exact")
    for rule in ("split", "bonferroni", "bonferroni_all", "multisplit"):
        for grid in (np.linspace(-3, 6, 50), None):
            chosen = threshold_rule(rule, grid=grid, seed=seed)
            lb = audit_scores(rec.scores, rec.member, 1e-5, rule=chosen)
            assert lb.valid and lb.eps <= exact
            design = {"thresholds": 50} if grid is not None else {"spec_grid": False}
            planned = expected_for_games(
                curve, 200_000, rule, 0.95, 1e-5, **(design if rule == "bonferroni" else {})
            )
            assert lb.eps >= 0.5 * planned, (rule, grid is None, lb.eps, planned)
            # the optimistic max over all thresholds is reported, and is at least the valid ones
            assert lb.eps_best_threshold >= lb.eps - 1e-12


@pytest.mark.slow  # a statistical run (200 audits)
def test_split_rule_coverage_on_the_gaussian_base():
    # k = 1: the exact eps is the Gaussian one; over 200 repetitions the valid rule must exceed it
    # in at most ~(1 - confidence) of them (binomial noise allowed).
    mu, delta = 1.0, 1e-3
    true_eps = gaussian_epsilon(mu, delta)
    w = GaussianWinner(GaussianBase(mu), Point(1))
    proxy = make_proxy("sample", w)
    over = 0
    reps = 200
    for r in range(reps):
        rec = run_game(w, proxy, 4000, 1000 + r)
        over += audit_scores(rec.scores, rec.member, delta, rule=Split(seed=r)).eps > true_eps
    assert over <= stats.binom.ppf(0.999, reps, 0.05)


@given(
    st.lists(st.tuples(st.integers(-30, 30), st.booleans()), min_size=4, max_size=400),
    st.sampled_from([0.05, 1e-4]),
    st.sampled_from([0.0, 1e-5, 0.1]),
)
@settings(max_examples=60, deadline=None)
def test_pruned_search_is_the_exhaustive_maximum(pairs, alpha, delta):
    # the block-pruned search returns exactly the brute-force max of eq. 4 with CP limits over
    # every threshold and both directions (small blocks force many block bounds)
    scores = np.array([p[0] for p in pairs], dtype=float)
    member = np.array([p[1] for p in pairs], dtype=np.int8)
    if member.min() == member.max():
        return
    c = SortedScores(scores, member).counts()
    brute = max(
        epsilon_from_rates(
            clopper_pearson_upper(c.fp, c.n0, alpha),
            clopper_pearson_upper(c.fn, c.n1, alpha),
            delta,
        ).max(),
        epsilon_from_rates(
            clopper_pearson_upper(c.n0 - c.fp, c.n0, alpha),
            clopper_pearson_upper(c.n1 - c.fn, c.n1, alpha),
            delta,
        ).max(),
    )
    rows = CandidateRows.table(c.t, c.fp, c.fn)
    for fanout, leaf in ((2, 1), (3, 2), (32, 32)):
        best = max(
            search_rows(
                rows,
                c.n0,
                c.n1,
                cp_limits(c.n0, alpha),
                cp_limits(c.n1, alpha),
                eq4_objective(delta),
                flip=flip,
                fanout=fanout,
                leaf=leaf,
            )[1]
            for flip in (False, True)
        )
        assert best == pytest.approx(brute, rel=1e-12, abs=1e-15)
    # the candidates of the search over one sort (b = 0 scores for '>', b = 1 for '<=')
    s0, s1 = SortedScores(scores, member).by_coin()
    assert best_on_coins(s0, s1, alpha, delta)["eps"] == pytest.approx(brute, rel=1e-12, abs=1e-15)


# --- the Python API checks its input as the CLI does (one family of checks) -----------------


def _games(n=400, seed=0):
    rng = np.random.default_rng(seed)
    member = rng.integers(0, 2, n).astype(np.int8)
    return rng.normal(1.5 * member, 1.0), member


@pytest.mark.parametrize("bad", [2, -1, 257, 0.7, np.nan])
def test_member_values_other_than_0_and_1_are_refused(bad):
    from auditsel.errors import ConfigError

    scores, member = _games()
    member = member.astype(float)
    member[7] = bad
    with pytest.raises(ConfigError) as err:
        audit_scores(scores, member, 1e-5)
    assert err.value.field == "member" and "0 or 1" in err.value.message
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda s, m: (s.reshape(-1, 2), m), "scores"),
        (lambda s, m: (s, m.reshape(-1, 2)), "member"),
        (lambda s, m: (s[:, None], m), "scores"),
        (lambda s, m: (s[:-1], m), "member"),
        (lambda s, m: (s.astype(str), m), "scores"),
        (lambda s, m: (s + 1j, m), "scores"),
        (lambda s, m: (s, np.array(["a"] * len(m))), "member"),
    ],
)
def test_bad_shapes_and_types_are_refused_naming_the_argument(change, field):
    from auditsel.errors import ConfigError

    scores, member = change(*_games())
    with pytest.raises(ConfigError) as err:
        audit_scores(scores, member, 1e-5)
    assert err.value.field == field, str(err.value)
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"delta": "1e-5"}, "delta"),
        ({"delta": -1e-5}, "delta"),
        ({"delta": np.nan}, "delta"),
        ({"confidence": "0.95"}, "confidence"),
        ({"confidence": 0.3}, "confidence"),
    ],
)
def test_bad_options_are_refused_naming_the_argument(kwargs, field):
    from auditsel.errors import ConfigError

    scores, member = _games()
    kwargs = {"delta": 1e-5, **kwargs}
    with pytest.raises(ConfigError) as err:
        audit_scores(scores, member, **kwargs)
    assert err.value.field == field, str(err.value)
    assert len(str(err.value).splitlines()) == 1


# --- the order of the rows never matters ----------------------------------------------------


@pytest.mark.parametrize("rule", ["split", "bonferroni", "bonferroni_all", "multisplit"])
def test_every_rule_is_the_same_in_any_row_order(rule):
    # scores laid out by class (all members first, as jax_privacy's tests pass them), sorted by
    # score, or shuffled: the split is seeded within each class, so every order gives one answer
    scores, member = _games(2000, seed=3)
    by_class = np.argsort(-member, kind="stable")
    by_score = np.argsort(scores, kind="stable")
    shuffled = np.random.default_rng(9).permutation(len(scores))
    results = [
        audit_scores(scores[order], member[order], 1e-5, rule=threshold_rule(rule, seed=11))
        for order in (by_class, by_score, shuffled, np.arange(len(scores)))
    ]
    assert all(r == results[0] for r in results[1:]), [r.eps for r in results]
    assert results[0].eps > 0.5  # a real audit, not an empty one


@given(
    st.lists(st.tuples(st.integers(-30, 30), st.booleans()), min_size=4, max_size=300),
    st.sampled_from([0.05, 1e-6]),
)
@settings(max_examples=60, deadline=None)
def test_gdp_searches_are_the_exhaustive_max_and_min(pairs, alpha):
    # mu_L's maximum (upper limits) and the goodness-of-fit minimum of mu_hi (lower limits) over
    # one sort's candidates equal the brute force over every threshold and direction
    scores = np.array([p[0] for p in pairs], dtype=float)
    member = np.array([p[1] for p in pairs], dtype=np.int8)
    if member.min() == member.max():
        return
    ss = SortedScores(scores, member)
    c = ss.counts()
    a = alpha / (2 * len(scores))
    up = [
        mu_objective(clopper_pearson_upper(f, c.n0, a), clopper_pearson_upper(g, c.n1, a))
        for f, g in ((c.fp, c.fn), (c.n0 - c.fp, c.n1 - c.fn))
    ]
    fit = gdp_fit(ss, alpha, 0.0)
    lo = max(u.max() for u in up)
    assert fit.mu_interval_max_low == pytest.approx(lo, rel=1e-12, abs=1e-12)
    flip = int(up[1].max() > up[0].max())
    f, g = ((c.fp, c.fn), (c.n0 - c.fp, c.n1 - c.fn))[flip]
    hi = -minus_mu_objective(clopper_pearson_lower(f, c.n0, a), clopper_pearson_lower(g, c.n1, a))
    # rejected exactly when some threshold's mu_hi is below mu_L, and then it names one
    assert fit.ok == bool(hi.min() >= lo)
    if fit.ok:
        assert fit.mu_interval_min_high == math.inf
    else:
        assert fit.mu_interval_min_high < lo
        assert np.min(np.abs(hi - fit.mu_interval_min_high)) <= 1e-12 * max(1, abs(lo))


@given(
    st.integers(1, 10**7),
    st.floats(0, 1),
    st.sampled_from([0.9, 0.5, 0.05, 1e-3, 1e-9, 1e-15, 1e-22]),
)
@settings(max_examples=300, deadline=None)
def test_cheap_limit_bounds_never_beat_the_exact_limits(nobs, frac, a):
    # Zubkov and Serov's binomial inequality: the search's cheap bounds are at most the upper
    # and at least the lower Clopper-Pearson limit, and within a few counts of them
    k = np.unique(np.r_[0, 1, round(frac * nobs), max(nobs - 1, 0), nobs])
    up, low = cp_limits(nobs, a, True), cp_limits(nobs, a, False)
    assert np.all(up.bound(k) <= up.exact(k))
    assert np.all(low.bound(k) >= low.exact(k))
    assert np.all((up.exact(k) - up.bound(k)) * nobs <= 4)
    # both limits of a search in one pass: the same numbers
    other = cp_limits(nobs + 3, a, True)
    pair = pair_limit_bounds(up, k, other, k + 1)
    assert np.array_equal(pair[0], up.bound(k)) and np.array_equal(pair[1], other.bound(k + 1))


@given(
    st.lists(st.sampled_from([-np.inf, -1.0, 0.0, 0.5, 2.0, np.inf]), min_size=1, max_size=300),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
@settings(max_examples=100, deadline=None)
def test_a_pilot_bitset_answers_as_its_copied_out_scores(values, seed, bitset):
    # a split's pilot is kept as a bitset over the sorted scores of a large audit (forced here
    # with copy_below = 0), or copied out of a small one: either way its order statistics,
    # counts and grid quantiles are those of the subset copied out and sorted
    from auditsel.auditing.sorted_scores import SortedPart, kth_smallest, pilot_grid, uniform_subset

    s = np.sort(np.array(values))
    rng = np.random.default_rng(seed)
    k = int(rng.integers(0, len(s) + 1))
    mask = uniform_subset(len(s), k, rng)
    assert mask.sum() == k
    default = SortedPart.copy_below
    SortedPart.copy_below = 0 if bitset else default
    try:
        part = SortedPart(s, mask)
    finally:
        SortedPart.copy_below = default
    copy = s[mask]
    assert (part.words is not None) == bitset
    assert part.n == k
    assert np.array_equal(part.value(np.arange(k)), copy)
    t = np.array([-np.inf, -1.0, 0.25, 2.0, np.inf])
    assert np.array_equal(part.count_le(t), np.searchsorted(copy, t, side="right"))
    if bitset:  # positions of s
        assert np.array_equal(part.rank(np.arange(len(s) + 1)), np.r_[0, np.cumsum(mask)])
    else:  # positions of the copy
        assert np.array_equal(part.rank(np.arange(k + 1)), np.arange(k + 1))
    other = SortedPart(s[: len(s) // 2])
    finite = np.sort(np.r_[copy, s[: len(s) // 2]])
    finite = finite[np.isfinite(finite)]
    if len(finite):
        ks = np.arange(len(finite))
        assert np.array_equal(kth_smallest([part, other], ks), finite)
        idx = np.unique(np.round(np.linspace(0, len(finite) - 1, 7)).astype(int))
        assert np.array_equal(pilot_grid((part, other), 7), np.unique(finite[idx]))


def test_uniform_subsets_are_uniform():
    # every 2-subset of 5 positions equally often (chi-square, 10 cells)
    from itertools import combinations

    from auditsel.auditing.sorted_scores import uniform_subset

    rng = np.random.default_rng(0)
    cells = {c: 0 for c in combinations(range(5), 2)}
    for _ in range(20_000):
        cells[tuple(np.flatnonzero(uniform_subset(5, 2, rng)))] += 1
    assert stats.chisquare(list(cells.values())).pvalue > 1e-3
