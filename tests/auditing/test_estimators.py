"""The estimator panel: each entry against a closed form or an independent implementation,
never above the exact eps where it is known, and beside jax_privacy's counterparts when that
optional test dependency is installed (`pip install ".[crosscheck]"`)."""

import math

import numpy as np
import pytest
from scipy import stats

from auditsel.accounting.exact import exact_epsilon
from auditsel.auditing.estimators import LABELS, PanelOptions, estimator_panel, winner_tradeoff
from auditsel.auditing.lower import apply_rule, audit_scores
from auditsel.auditing.planning import PlanCurve, expected_for_games
from auditsel.auditing.rules import threshold_rule
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.errors import ConfigError
from auditsel.mechanisms import GaussianBase, gaussian_epsilon
from auditsel.rounds import FinitePmf, Point
from auditsel.selection import GaussianWinner

DELTA = 1e-5


def gaussian_scores(mu, n, seed):
    rng = np.random.default_rng(seed)
    member = rng.integers(0, 2, n).astype(np.int8)
    return rng.normal(mu * member, 1.0), member


def one_plus_poisson(mean):
    """K = 1 + Poisson(mean), its tail below 1e-18 dropped (each term of a finite law costs in
    every pgf; the dropped mass moves no number the tests read: exact eps to ~1e-16)."""
    pmf = np.r_[0.0, stats.poisson.pmf(np.arange(0, 80), mean)]
    return FinitePmf({k: float(v) for k, v in enumerate(pmf / pmf.sum()) if v > 1e-18})


def selection_release(n, seed, shift=0.6):
    w = GaussianWinner(GaussianBase(shift), one_plus_poisson(9))
    rng = np.random.default_rng(seed)
    member = rng.integers(0, 2, n).astype(np.int8)
    return w.release(member, rng), member, w


def test_every_entry_is_labelled_and_valid_entries_are_the_rules():
    s, m = gaussian_scores(1.0, 4000, 0)
    panel = estimator_panel(s, m, DELTA, law=Point(1), seed=0)
    assert all(e.label in LABELS for e in panel.values())
    assert {n for n, e in panel.items() if e.label == "valid"} == {
        "cp_split",
        "cp_multisplit",
        "cp_bonferroni",
        "cp_bonferroni_all",
    }
    assert panel["gdp_fit"].label == panel["selection_fit"].label == "heuristic"
    assert panel["bayesian"].label == "bayesian" and panel["best_threshold"].label == "optimistic"
    for name, rule in (
        ("cp_split", "split"),
        ("cp_bonferroni_all", "bonferroni_all"),
        ("cp_multisplit", "multisplit"),
        ("cp_bonferroni", "bonferroni"),
    ):
        assert panel[name].value == audit_scores(s, m, DELTA, rule=threshold_rule(rule, seed=0)).eps


def test_auroc_is_mann_whitney_and_its_interval_is_delong():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(3)
    m = rng.integers(0, 2, 3000).astype(np.int8)
    s = np.round(rng.normal(0.7 * m, 1.0), 1)  # ties on purpose
    e = estimator_panel(s, m, DELTA)["auroc"]
    assert e.value == pytest.approx(roc_auc_score(m, s), abs=1e-12)
    # DeLong's standard error from placement values, computed by brute force
    s0, s1 = s[m == 0], s[m == 1]
    psi = (s1[:, None] > s0[None, :]) + 0.5 * (s1[:, None] == s0[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    se = math.sqrt(v10.var(ddof=1) / len(s1) + v01.var(ddof=1) / len(s0))
    assert e.detail["se"] == pytest.approx(se, rel=1e-9)


def test_tpr_at_fpr_matches_a_direct_count():
    s, m = gaussian_scores(2.0, 20_000, 4)
    by = estimator_panel(s, m, DELTA, options=PanelOptions(fpr=(0.01, 0.1)))["tpr_at_fpr"].detail[
        "by_fpr"
    ]
    for f, row in by.items():
        t = np.quantile(s[m == 0], 1 - float(f))  # threshold with about that FPR
        direct = np.mean(s[m == 1] > t)
        assert row["tpr"] == pytest.approx(direct, abs=0.01)
        assert row["low"] <= row["tpr"] <= row["high"]


def test_gdp_fit_recovers_a_gaussian_and_stays_below_its_eps():
    s, m = gaussian_scores(1.5, 40_000, 1)
    gdp = estimator_panel(s, m, DELTA)["gdp_fit"]
    assert gdp.detail["gdp_fit_ok"] is True
    assert 1.3 < gdp.detail["mu"] <= 1.5
    assert gdp.value <= gaussian_epsilon(1.5, DELTA)


def test_gdp_fit_is_rejected_where_the_trade_off_is_not_gaussian():
    # members leak completely 20% of the time and not at all otherwise: no single mu fits
    rng = np.random.default_rng(5)
    m = rng.integers(0, 2, 40_000).astype(np.int8)
    leak = (m == 1) & (rng.random(40_000) < 0.2)
    s = rng.normal(8.0 * leak, 1.0)
    gdp = estimator_panel(s, m, DELTA)["gdp_fit"]
    assert gdp.detail["gdp_fit_ok"] is False and "rejected" in gdp.detail["note"]


@pytest.mark.slow  # a statistical run (40,000 games)
def test_selection_fit_is_below_the_truth_where_the_gdp_fit_over_claims():
    # the winner of K ~ 1 + Poisson(9) Gaussian runs with shift 0.6: true eps 2.76 at 1e-5
    s, m, w = selection_release(40_000, 2)
    truth = exact_epsilon(w, DELTA)
    panel = estimator_panel(s, m, DELTA, law=w.law)
    assert panel["gdp_fit"].value > truth  # the Gaussian model over-claims
    assert panel["selection_fit"].value <= truth  # the selection-aware fit does not
    assert panel["selection_fit"].value > panel["cp_split"].value
    for name, e in panel.items():
        if e.label == "valid":
            assert e.value <= truth, name


def test_winner_tradeoff_is_the_gaussian_one_for_k1():
    fp, fn = winner_tradeoff(1.2, Point(1))
    inner = (fp > 1e-6) & (fp < 1 - 1e-6)
    exact = stats.norm.cdf(stats.norm.isf(fp[inner]) - 1.2)
    assert np.max(np.abs(fn[inner] - exact)) < 2e-3


def test_bayesian_is_a_posterior_quantile():
    s, m = gaussian_scores(1.0, 6000, 6)
    b = estimator_panel(s, m, 0.0, options=PanelOptions(posterior_draws=200_000))["bayesian"]
    fp, fn = b.detail["fp_count"], b.detail["fn_count"]
    n = b.detail["evaluated_trials"]
    # the evaluation part of the split: the other half of each class
    n0, n1 = int((m == 0).sum()), int((m == 1).sum())
    e0, e1 = n0 - n0 // 2, n1 - n1 // 2
    rng = np.random.default_rng(99)  # an independent posterior sample, delta = 0
    a = rng.beta(fp + 0.5, e0 - fp + 0.5, 400_000)
    c = rng.beta(fn + 0.5, e1 - fn + 0.5, 400_000)
    eps = np.maximum(np.maximum(np.log((1 - a) / c), np.log((1 - c) / a)), 0)
    assert n == e0 + e1
    assert b.value == pytest.approx(np.quantile(eps, 0.05), abs=0.02)
    assert b.detail["posterior_median"] == pytest.approx(np.median(eps), abs=0.02)


def test_no_valid_or_bayesian_entry_exceeds_the_exact_eps_across_seeds():
    w = GaussianWinner(GaussianBase(2.0), one_plus_poisson(3))
    truth = exact_epsilon(w, 1e-3)
    over, values = {}, {}
    for seed in range(20):
        rng = np.random.default_rng(seed)
        m = rng.integers(0, 2, 3000).astype(np.int8)
        s = w.release(m, rng)
        for name, e in estimator_panel(
            s, m, 1e-3, seed=seed, options=PanelOptions(splits=5)
        ).items():
            if e.label in ("valid", "bayesian"):
                over[name] = over.get(name, 0) + (e.value > truth)
                values.setdefault(name, []).append(e.value)
    # at 95%, 20 audits: more than 4 over-claims has probability < 2%
    assert all(v <= 4 for v in over.values()), over
    # and the valid entries have power (a zero estimator passes the line above, not this one):
    # their mean is within a fifth of what the planner's oracle test expects at 3000 games
    # (auditsel.auditing.planning, exact trade-off curve of the winner)
    curve = PlanCurve(*(np.asarray(x) for x in winner_tradeoff(w.mu, w.law)), "exact")
    rules = {
        "cp_split": ("split", {}),
        "cp_multisplit": ("multisplit", {}),
        "cp_bonferroni": ("bonferroni", {"spec_grid": False}),
        "cp_bonferroni_all": ("bonferroni_all", {}),
    }
    for name, (rule, design) in rules.items():
        planned = expected_for_games(curve, 3000, rule, 0.95, 1e-3, **design)
        assert 0.8 * planned <= np.mean(values[name]) <= truth, (name, planned, values[name])


# --- jax_privacy (optional test dependency) -----------------------------------------------


def test_valid_estimators_are_at_least_as_strong_as_jax_privacy():
    auditing = pytest.importorskip("jax_privacy.auditing")
    alpha = 0.05
    s, m = gaussian_scores(1.5, 40_000, 7)
    ss = SortedScores(s, m)
    aud = auditing.CanaryScoreAuditor(s[m == 1], s[m == 0])
    # one threshold fixed in advance (no score equals it): the same Clopper-Pearson numbers
    from auditsel.auditing.lower import evaluate_at

    for t in (0.5, 1.7, 2.9):
        ours = evaluate_at(ss.counts(), t, False, alpha, DELTA)["eps"]
        theirs = aud.epsilon_clopper_pearson(
            alpha, DELTA, one_sided=False, threshold_strategy=auditing.Explicit(t)
        )
        assert ours >= theirs - 1e-9
    # Bonferroni over all thresholds at the same per-threshold level: ours searches every
    # threshold and both directions, theirs the convex-hull thresholds
    n = len(s)
    ours_all = apply_rule(ss, "bonferroni_all", alpha, DELTA)["eps"]
    theirs_n = aud.epsilon_clopper_pearson(alpha / n * len(aud._fn_counts), DELTA, one_sided=False)
    assert ours_all >= theirs_n - 1e-9
    # split and multisplit: random partitions differ, so compare means over datasets
    ours_s, theirs_s = [], []
    for seed in range(12):
        s2, m2 = gaussian_scores(1.0, 4000, 100 + seed)
        a2 = auditing.CanaryScoreAuditor(s2[m2 == 1], s2[m2 == 0])
        ours_s.append(audit_scores(s2, m2, DELTA, rule=threshold_rule("split", seed=seed)).eps)
        theirs_s.append(
            a2.epsilon_clopper_pearson(
                alpha, DELTA, one_sided=False, threshold_strategy=auditing.Split(seed=seed)
            )
        )
    se = np.std(np.subtract(ours_s, theirs_s), ddof=1) / math.sqrt(len(ours_s))
    assert np.mean(ours_s) >= np.mean(theirs_s) - 3 * se
    # descriptive entries: the hull variants are theirs; the empirical curve is never above
    panel = estimator_panel(s, m, DELTA)
    assert panel["auroc_hull"].value == pytest.approx(aud.attack_auroc(), abs=1e-12)
    assert panel["auroc"].value <= aud.attack_auroc() + 1e-12
    for f, row in panel["tpr_at_fpr_hull"].detail["by_fpr"].items():
        assert row["tpr"] == pytest.approx(aud.tpr_at_given_fpr(float(f)), abs=1e-12)


# --- one GDP estimate, one name -------------------------------------------------------------


def test_one_gdp_estimate_everywhere():
    # the audit's GDP fit is the panel's (maximised over every threshold, limits that hold at
    # all of them at once): one number, not the fit at the split threshold beside another
    s, m = gaussian_scores(1.5, 40_000, 1)
    bound = audit_scores(s, m, DELTA)
    panel = estimator_panel(s, m, DELTA)
    assert bound.gdp_fit == panel["gdp_fit"].value
    assert bound.gdp_fit_mu == panel["gdp_fit"].detail["mu"]
    assert bound.gdp_fit_ok is panel["gdp_fit"].detail["gdp_fit_ok"] is True
    # the aliases of 0.2 are gone
    assert not {"eps_gdp", "mu_gdp"} & set(bound.to_dict())
    assert not hasattr(bound, "eps_gdp") and not hasattr(bound, "mu_gdp")
    # stronger than the fit at one split threshold, and below the truth (the model holds here)
    from auditsel.auditing.gdp_fitting import gdp_mu

    at_split = gdp_mu(bound.fp_upper, bound.fn_upper)
    assert at_split < bound.gdp_fit_mu <= 1.5
    assert bound.gdp_fit <= gaussian_epsilon(1.5, DELTA)


# --- ROC summaries: the empirical curve and its convex hull (jax_privacy's) ------------------


def two_classes(member_scores, other_scores):
    s = np.r_[np.asarray(member_scores, float), np.asarray(other_scores, float)]
    m = np.r_[np.ones(len(member_scores)), np.zeros(len(other_scores))].astype(np.int8)
    return s, m


def test_auroc_empirical_and_hull_on_jax_privacys_vector():
    from auditsel.auditing.roc import auroc

    # jax_privacy tests/auditing_test.py::test_attack_auroc_simple: frontier (0,0) (0,2) (1,3)
    # (4,4) in (FP, TP) counts, area 13/16; the empirical curve (Mann-Whitney) is 11/16
    s, m = two_classes([0, 4, 6, 7], [1, 2, 3, 5])
    assert auroc(s, m, hull=True) == pytest.approx(13 / 16, abs=1e-15)
    assert auroc(s, m) == pytest.approx(11 / 16, abs=1e-15)
    panel = estimator_panel(s, m, DELTA, options=PanelOptions(splits=1))
    assert panel["auroc_hull"].value == pytest.approx(13 / 16, abs=1e-15)
    assert panel["auroc"].value == pytest.approx(11 / 16, abs=1e-15)


def test_tpr_at_fpr_empirical_and_hull_on_jax_privacys_vector():
    from auditsel.auditing.roc import tpr_at_fpr

    # jax_privacy test_tpr_at_given_fpr_simple: in [1, 3], out [0, 2]
    s, m = two_classes([1, 3], [0, 2])
    fprs = [0, 0.25, 0.5, 0.75, 1.0]
    assert np.allclose(tpr_at_fpr(s, m, fprs, hull=True), [0.5, 0.75, 1.0, 1.0, 1.0], atol=1e-15)
    # the empirical curve, randomised between neighbouring thresholds: flat from (0, .5) to
    # (.5, .5), then up to (.5, 1)
    assert np.allclose(tpr_at_fpr(s, m, fprs), [0.5, 0.5, 1.0, 1.0, 1.0], atol=1e-15)


@pytest.mark.parametrize("ratio", [0.5, 1.0, 1.5])
def test_roc_summaries_on_jax_privacys_worst_and_best_cases(ratio):
    from auditsel.auditing.roc import auroc, tpr_at_fpr

    fprs = np.linspace(0, 1, 10)
    n_out = int(30 * ratio)
    worst = two_classes(np.zeros(30), np.ones(n_out))  # members score lower
    best = two_classes(np.ones(30), np.zeros(n_out))
    assert np.allclose(tpr_at_fpr(*worst, fprs, hull=True), fprs, atol=1e-12)
    assert auroc(*worst, hull=True) == pytest.approx(0.5)
    assert np.array_equal(tpr_at_fpr(*best, fprs, hull=True), np.ones(10))
    assert np.array_equal(tpr_at_fpr(*best, fprs), np.ones(10))
    assert auroc(*best, hull=True) == 1.0 == auroc(*best)
    # at FPR = 1 every variant is 1 (guess "member" always), the worst case included
    assert tpr_at_fpr(*worst, [1.0])[0] == 1.0 == tpr_at_fpr(*worst, [1.0], hull=True)[0]
    panel = estimator_panel(*worst, DELTA, options=PanelOptions(fpr=(0.5, 1.0), splits=1))
    assert panel["tpr_at_fpr"].detail["by_fpr"]["1"]["tpr"] == 1.0
    assert panel["tpr_at_fpr_hull"].detail["by_fpr"]["1"]["tpr"] == 1.0


@pytest.mark.parametrize("ratio", [0.5, 1.0, 1.5])
def test_roc_hull_on_jax_privacys_circular_roc(ratio):
    from auditsel.auditing.roc import auroc, tpr_at_fpr

    # jax_privacy _scores_with_circular_roc: the ROC is the arc sqrt(f (2 - f))
    n_in = 10_000
    n_out = int(n_in * ratio)
    s, m = two_classes(np.sqrt(1 - np.linspace(0, 1, n_in) ** 2), np.linspace(0, 1, n_out))
    fprs = np.linspace(0, 1, 10)
    assert np.allclose(tpr_at_fpr(s, m, fprs, hull=True), np.sqrt(fprs * (2 - fprs)), rtol=1e-3)
    assert auroc(s, m, hull=True) == pytest.approx(np.pi / 4, abs=5e-4)


@pytest.mark.parametrize(
    "member_scores, other_scores, fp, tp",
    [
        # jax_privacy test_get_tn_fn_counts*: their (tn, fn) frontier as (FP, TP) counts
        ([1.5, 2.5, 0.5, 3.5], [0, 3, 2, 1], [0, 0, 3, 4], [0, 1, 4, 4]),
        ([0, 1, 1, 2], [0, 0, 1, 1], [0, 0, 2, 4], [0, 1, 3, 4]),
        ([0, 0, 1, 2], [0, 1, 1, 1], [0, 0, 4], [0, 1, 4]),
        (np.zeros(4), np.zeros(4), [0, 4], [0, 4]),
    ],
)
def test_roc_hull_vertices_are_jax_privacys_frontier(member_scores, other_scores, fp, tp):
    from auditsel.auditing.roc import roc_hull

    s, m = two_classes(member_scores, other_scores)
    hull_fp, hull_tp = roc_hull(s, m)
    assert hull_fp.tolist() == fp and hull_tp.tolist() == tp


def test_roc_hull_is_the_exhaustive_upper_hull():
    # against a brute-force hull: a point is a vertex iff no chord of two others lies on or
    # above it
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from auditsel.auditing.roc import auroc, roc_hull

    @given(st.lists(st.tuples(st.integers(-4, 4), st.booleans()), min_size=4, max_size=40))
    @settings(max_examples=150, deadline=None)
    def check(pairs):
        s = np.array([p[0] for p in pairs], float)
        m = np.array([p[1] for p in pairs], np.int8)
        if m.min() == m.max():
            return
        n0, n1 = int((m == 0).sum()), int(m.sum())
        ts = np.r_[np.unique(s), -np.inf]
        pts = {(int(((m == 0) & (s > t)).sum()), int(((m == 1) & (s > t)).sum())) for t in ts}
        pts |= {(0, 0)}
        pts = sorted(pts)
        top = [p for p in pts if p[1] == max(q[1] for q in pts if q[0] == p[0])]
        hull = [(0, 0)] + [p for p in top if p != (0, 0)]  # (0, 0) starts the curve
        keep = []
        for i, p in enumerate(hull):  # not on or below a chord between neighbours' extremes
            below = any(
                (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]) <= 0
                for a in hull[:i]
                for b in hull[i + 1 :]
            )
            if not below:
                keep.append(p)
        fp, tp = roc_hull(s, m)
        assert list(zip(fp.tolist(), tp.tolist())) == keep
        area = sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(keep[:-1], keep[1:])) / (
            n0 * n1
        )
        assert auroc(s, m, hull=True) == pytest.approx(area, abs=1e-12)

    check()


# --- the selection fit's fixed costs: quantiles found once per law, tradeoffs cached, exact
# Clopper-Pearson limits only where a threshold can still raise the fit ---------------------


def _scalar_quantile_range(w, tail):
    """The old `GaussianWinner.quantile_range`: two scalar bisections per call, in x."""
    from auditsel.numerics import bisect

    lower = lambda x: float(w.cdf(x, 0)) - tail
    upper = lambda x: float(w.mass(x, np.inf, 1)) - tail
    a, b = -40.0, w.mu + 40.0
    lo = bisect(lower, a, b) if lower(a) < 0 < lower(b) else a
    hi = bisect(upper, a, b) if upper(a) > 0 > upper(b) else b
    return lo, hi


@pytest.mark.parametrize(
    "law",
    [
        Point(1),
        one_plus_poisson(9),
        FinitePmf({0: 0.3, 2: 0.3, 40: 0.4}),  # an atom at K = 0
        FinitePmf({0: 1 - 1e-7, 3: 1e-7}),  # the atom holds almost everything: no lower root
    ],
)
def test_quantile_range_once_per_law_is_the_scalar_bisection(law):
    from auditsel.rounds import TruncatedNegativeBinomial

    for lw in (law, TruncatedNegativeBinomial(eta=0.0, nu=0.01)):
        for mu in (1e-6, 0.4, 2.0, 30.0):
            for tail in (1e-12, 1e-6, 0.2):
                w = GaussianWinner(GaussianBase(mu), lw)
                new, old = w.quantile_range(tail), _scalar_quantile_range(w, tail)
                for a, b in zip(new, old):  # within the old bisection's own tolerance
                    assert abs(a - b) <= 1e-12 + 1e-12 * abs(b), (lw, mu, tail, new, old)


def test_winner_tradeoff_cache_returns_identical_read_only_arrays():
    from auditsel.auditing import estimators

    law = one_plus_poisson(9)
    first = winner_tradeoff(0.7, law)
    estimators._TRADEOFFS.clear()
    fresh = winner_tradeoff(0.7, law)
    again = winner_tradeoff(0.7, law)
    assert again[0] is fresh[0]  # from the cache
    for a, b in zip(first, fresh):
        assert np.array_equal(a, b) and not a.flags.writeable
    with pytest.raises(ValueError):
        again[1][0] = 0.5


def test_selection_fit_equals_the_fit_over_every_threshold_evaluated_exactly():
    from auditsel.auditing.clopper_pearson import clopper_pearson_upper
    from auditsel.auditing.estimators import _selection_fit, selection_fit_mu

    s, m, w = selection_release(20_000, 4)
    c = SortedScores(s, m).counts()
    a = 0.05 / len(s)
    fit = _selection_fit(c, len(s), 0.05, DELTA, w.law)
    f = np.concatenate([c.fp, c.n0 - c.fp])  # direction '>', then '<='
    g = np.concatenate([c.fn, c.n1 - c.fn])
    pf, pg = clopper_pearson_upper(f, c.n0, a), clopper_pearson_upper(g, c.n1, a)
    keep = (pf < 1) & (pg < 1)
    every = selection_fit_mu(pf[keep], pg[keep], w.law)
    assert fit.detail["thresholds_evaluated"] < len(f) / 4  # most were never evaluated exactly
    assert fit.detail["mu"] == every > 0


def _cell_masses_every_edge(w, edges, member):
    """cell_masses as it was computed before each side was restricted to its own cells: both
    pgf terms at every edge, the cell's side chosen by np.where (the reference)."""
    from auditsel.selection import _cdf, _sf

    t = np.asarray(edges, dtype=float) - member * w.mu
    with np.errstate(invalid="ignore"):
        tail = w.law.pgf_complement(_sf(t))
        head = w.law.pgf_above_zero(_cdf(t))
    return np.maximum(np.where(t[:-1] > 0, tail[:-1] - tail[1:], head[1:] - head[:-1]), 0.0)


def test_cell_masses_are_mass_between_consecutive_edges_bit_for_bit():
    """cell_masses computes each pgf term only on the edges of the cells that use it: the same
    bits as mass() of each cell and as the computation at every edge, for every kind of law,
    shifts that put 0 anywhere among the edges (before, after, on an edge) and random edges."""
    from auditsel.rounds import Binomial, Poisson, TruncatedNegativeBinomial, TwoPoint

    laws = (
        one_plus_poisson(9),
        TruncatedNegativeBinomial(eta=0.0, nu=0.01),  # logarithmic
        TruncatedNegativeBinomial(eta=1.0, nu=0.05),  # geometric
        TruncatedNegativeBinomial(eta=0.5, nu=0.001),
        Poisson(mean=3.0),
        Binomial(n=12, p=0.3),
        TwoPoint(L=20, s=0.4),
        Point(1),
    )
    rng = np.random.default_rng(7)
    for law in laws:
        for mu in (0.8, 3.0, 0.01):
            w = GaussianWinner(GaussianBase(mu), law)
            lo, hi = w.quantile_range(1e-12)
            grid = np.linspace(lo, hi, 2001)
            grid[0], grid[-1] = -np.inf, np.inf
            random = np.sort(rng.normal(0.0, 3.0, 300))
            on_zero = np.append(np.linspace(-2, 2, 41) + mu, [np.inf])  # an edge at t = 0
            for edges in (grid, random, on_zero, np.linspace(5, 9, 7), np.linspace(-9, -5, 7)):
                for member in (0, 1):
                    got = w.cell_masses(edges, member)
                    assert np.array_equal(got, _cell_masses_every_edge(w, edges, member))
                    assert np.array_equal(got, w.mass(edges[:-1], edges[1:], member))


@pytest.mark.slow  # reason: the previous computation replayed (5.5 CPU s); exactness: above
def test_selection_fit_is_the_previous_computation_bit_for_bit(monkeypatch):
    """The selection fit's shortcuts (each cell mass computed on its own side only, the
    Zubkov-Serov bounds read from a table of every count) give the panel exactly the numbers of
    the computation without them, on random games of several sizes, shifts and laws."""
    from auditsel.auditing import estimators
    from auditsel.auditing.clopper_pearson import CpLimits
    from auditsel.rounds import TruncatedNegativeBinomial
    from auditsel.selection import GaussianWinner as Winner

    cases = [
        (3_000, 0.6, one_plus_poisson(9), 1),
        (20_000, 1.5, TruncatedNegativeBinomial(eta=0.0, nu=0.01), 2),
        (8_000, 0.1, Point(1), 3),
    ]
    for n, shift, law, seed in cases:
        rng = np.random.default_rng(seed)
        member = rng.integers(0, 2, n).astype(np.int8)
        s = Winner(GaussianBase(shift), law).release(member, rng)
        c = SortedScores(s, member).counts()
        estimators._TRADEOFFS.clear()
        now = estimators._selection_fit(c, n, 0.05, DELTA, law)
        with monkeypatch.context() as m:
            m.setattr(estimators, "_bounds_of", CpLimits.bound)
            m.setattr(Winner, "cell_masses", _cell_masses_every_edge)
            estimators._TRADEOFFS.clear()
            before = estimators._selection_fit(c, n, 0.05, DELTA, law)
        estimators._TRADEOFFS.clear()
        assert now.to_dict() == before.to_dict()
        assert now.detail["mu"] > 0 or shift < 0.2


def test_bounds_from_the_table_of_every_count_are_the_bounds():
    from auditsel.auditing.clopper_pearson import CpLimits
    from auditsel.auditing.estimators import _bounds_of

    rng = np.random.default_rng(11)
    for nobs in (1, 7, 1000):
        for upper in (True, False):
            lim = CpLimits(nobs, 0.05 / 2000, upper=upper)
            for size in (3, 5 * nobs + 5):  # direct, and from the table
                counts = rng.integers(0, nobs + 1, size)
                assert np.array_equal(_bounds_of(lim, counts), lim.bound(counts))


# --- the panel's options: one frozen dataclass -----------------------------------------------


def test_panel_options_change_the_panel_and_the_old_keywords_are_refused():
    """options=PanelOptions(...) reaches the panel's rules; the flat keywords of 0.2 are a
    TypeError naming them."""
    s, m = gaussian_scores(1.0, 600, 5)
    grid = np.linspace(-1.0, 2.0, 7)
    old = dict(threshold_grid=grid, grid_size=9, split_fraction=0.4, splits=3, fpr=(0.05,))
    new = estimator_panel(s, m, DELTA, seed=3, options=PanelOptions(**old, posterior_draws=500))
    assert (
        new["cp_bonferroni"].detail != estimator_panel(s, m, DELTA, seed=3)["cp_bonferroni"].detail
    )
    for name, value in {**old, "posterior_draws": 500}.items():
        with pytest.raises(TypeError, match=rf"unexpected keyword argument '{name}'"):
            estimator_panel(s, m, DELTA, seed=3, **{name: value})


def test_panel_options_reject_a_mix_an_unknown_keyword_and_bad_values():
    s, m = gaussian_scores(1.0, 200, 6)
    with pytest.raises(TypeError, match="unexpected keyword argument 'grid'"):
        estimator_panel(s, m, DELTA, grid=(0.0, 1.0))
    with pytest.raises(ConfigError, match=r"^fpr: "):
        PanelOptions(fpr=(0.5, 2.0))
    with pytest.raises(ConfigError, match=r"^threshold_grid: "):
        PanelOptions(threshold_grid=(0.0, float("nan")))
    with pytest.raises(TypeError):
        PanelOptions(0.5)  # type: ignore[misc]  # keyword-only
    options = PanelOptions(threshold_grid=np.array([0.0, 1.0]))
    assert options.threshold_grid == (0.0, 1.0) and hash(options) == hash(
        PanelOptions(threshold_grid=[0.0, 1.0])
    )
