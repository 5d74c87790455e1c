"""The number-of-runs laws against their closed forms, series identities and sampling."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

from auditsel.errors import ConfigError
from auditsel.rounds import (
    Binomial,
    FinitePmf,
    Point,
    Poisson,
    TruncatedNegativeBinomial,
    TwoPoint,
    law_from_dict,
)

LAWS = [
    TruncatedNegativeBinomial(0.0, 0.01),
    TruncatedNegativeBinomial(1.0, 0.05),
    TruncatedNegativeBinomial(-0.5, 0.02),
    TruncatedNegativeBinomial(-0.95, 0.1),
    TruncatedNegativeBinomial(2.5, 0.2),
    TruncatedNegativeBinomial(0.3, 0.5),
    Poisson(4.0),
    Binomial(12, 0.3),
    TwoPoint(10, 0.1),
    Point(7),
    FinitePmf({0: 0.1, 2: 0.3, 9: 0.6}),
]
IDS = [f"{law.kind}-{law.params()}" for law in LAWS]
KMAX = 4000


def series(law, z):
    k = np.arange(KMAX)
    p = law.pmf(k)
    return p, np.sum(p * z**k), np.sum(k * p * z ** np.maximum(k - 1, 0))


@pytest.mark.parametrize("law", LAWS, ids=IDS)
def test_pmf_sums_to_one_and_mean_matches(law):
    k = np.arange(KMAX)
    p = law.pmf(k)
    assert np.all(p >= 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-10)
    assert np.sum(k * p) == pytest.approx(law.mean, rel=1e-9)
    assert law.pgf_derivative(1.0) == pytest.approx(law.mean, rel=1e-9)


@pytest.mark.parametrize("law", LAWS, ids=IDS)
@pytest.mark.parametrize("z", [0.0, 0.3, 0.9, 0.999])
def test_pgf_and_derivative_match_the_series(law, z):
    _, g, dg = series(law, z)
    assert law.pgf(z) == pytest.approx(g, rel=1e-9, abs=1e-15)
    assert law.pgf_complement(1 - z) == pytest.approx(1 - g, rel=1e-7, abs=1e-15)
    assert law.pgf_derivative(z) == pytest.approx(dg, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("law", LAWS, ids=IDS)
def test_tails_stay_accurate_for_tiny_w(law):
    # 1 - G(1 - w) ~ E[K] w and G'(1 - w) -> E[K] as w -> 0
    w = 1e-13
    assert law.pgf_complement(w) == pytest.approx(law.mean * w, rel=1e-4)
    assert np.exp(law.log_pgf_derivative(1 - w, w)) == pytest.approx(law.mean, rel=1e-6)


@pytest.mark.parametrize("law", LAWS, ids=IDS)
def test_sampler_matches_pmf(law):
    rng = np.random.default_rng(1)
    n = 200_000
    draws = law.sample(n, rng)
    assert draws.dtype.kind == "i" and len(draws) == n
    k = np.arange(KMAX)
    p = law.pmf(k)
    # chi-square on cells with enough expected counts, the rest pooled
    if p.max() == 1:
        assert np.all(draws == np.argmax(p))
        return
    keep = p * n >= 20
    observed = np.bincount(np.minimum(draws, KMAX - 1), minlength=KMAX)
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(p[keep] * n, n - p[keep].sum() * n)
    if exp[-1] < 20:
        obs[-2] += obs[-1]
        exp[-2] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    assert stats.chisquare(obs, exp).pvalue > 1e-4


@pytest.mark.parametrize("eta, nu", [(0.01, 0.5), (0.2, 0.9), (1e-9, 0.01)])
def test_small_positive_eta_sampler(eta, nu):
    law = TruncatedNegativeBinomial(eta, nu)
    draws = law.sample(100_000, np.random.default_rng(5))
    k = np.arange(1, 50)
    freq = np.array([(draws == j).mean() for j in k[:5]])
    assert freq == pytest.approx(law.pmf(k[:5]), abs=0.006)
    assert draws.mean() == pytest.approx(law.mean, rel=0.05)


def test_sampler_is_seeded():
    law = TruncatedNegativeBinomial(-0.5, 0.01)
    a = law.sample(1000, np.random.default_rng(3))
    b = law.sample(1000, np.random.default_rng(3))
    assert np.array_equal(a, b)


def test_special_cases_of_tnb():
    nu = 0.01
    geo = TruncatedNegativeBinomial(1.0, nu)
    k = np.arange(1, 50)
    assert geo.pmf(k) == pytest.approx(nu * (1 - nu) ** (k - 1), rel=1e-12)
    log = TruncatedNegativeBinomial(0.0, nu)
    assert log.pmf(k) == pytest.approx((1 - nu) ** k / (k * math.log(1 / nu)), rel=1e-12)
    assert log.mean == pytest.approx((1 / nu - 1) / math.log(1 / nu))
    # eta -> 0 is continuous
    assert TruncatedNegativeBinomial(1e-7, nu).pmf(k) == pytest.approx(log.pmf(k), rel=1e-5)
    assert TruncatedNegativeBinomial(-1e-7, nu).pmf(k) == pytest.approx(log.pmf(k), rel=1e-5)


def test_poisson_zero_mass_is_the_fixed_output():
    law = Poisson(2.0)
    assert law.p_zero == pytest.approx(math.exp(-2.0))
    assert TruncatedNegativeBinomial(0.0, 0.1).p_zero == 0.0


@given(eta=st.floats(-0.99, 5.0), nu=st.floats(1e-6, 0.99), z=st.floats(0.0, 1.0))
@example(eta=5e-324, nu=0.5, z=0.0)
@example(eta=-1e-300, nu=1e-6, z=0.999)
@settings(max_examples=200, deadline=None)
def test_tnb_pgf_identities(eta, nu, z):
    law = TruncatedNegativeBinomial(eta, nu)
    g = float(law.pgf(z))
    assert -1e-12 <= g <= 1 + 1e-12
    assert float(law.pgf(1.0)) == pytest.approx(1.0, rel=1e-9)
    assert float(law.pgf_complement(1 - z)) == pytest.approx(1 - g, abs=1e-9)
    # derivative by central difference
    h = min(1e-6, nu * 1e-3)  # G' varies on the scale nu near z = 1
    zc = min(max(z, h), 1 - h)
    numeric = (float(law.pgf(zc + h)) - float(law.pgf(zc - h))) / (2 * h)
    assert float(law.pgf_derivative(zc)) == pytest.approx(numeric, rel=1e-4, abs=1e-6)
    assert law.mean >= 1


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"kind": "tnb", "eta": -1.0, "nu": 0.1}, "rounds.eta"),
        ({"kind": "tnb", "eta": 0.0, "nu": 1.5}, "rounds.nu"),
        ({"kind": "tnb", "eta": 0.0, "nu": 0.0}, "rounds.nu"),
        ({"kind": "tnb", "eta": "x", "nu": 0.1}, "rounds.eta"),
        ({"kind": "poisson", "mean": -1}, "rounds.mean"),
        ({"kind": "binomial", "n": 0, "p": 0.5}, "rounds.n"),
        ({"kind": "binomial", "n": 3, "p": 1.5}, "rounds.p"),
        ({"kind": "two_point", "L": 0, "s": 0.5}, "rounds.L"),
        ({"kind": "two_point", "L": 10, "s": 2}, "rounds.s"),
        ({"kind": "point", "k": 0}, "rounds.k"),
        ({"kind": "pmf", "pmf": {1: 0.5, 2: 0.4}}, "rounds.pmf"),
        ({"kind": "pmf", "pmf": {-1: 0.5, 2: 0.5}}, "rounds.pmf"),
        ({"kind": "pmf", "pmf": {0: 1.0}}, "rounds.pmf"),
        ({"kind": "zipf"}, "rounds.kind"),
        ({"kind": "tnb", "eta": 0.0}, "rounds.nu"),
        ({"kind": "tnb", "eta": 0.0, "nu": 0.1, "mean": 3}, "rounds.mean"),
    ],
)
def test_invalid_parameters_name_the_field(spec, field):
    with pytest.raises(ConfigError) as err:
        law_from_dict(spec)
    assert err.value.field == field
    assert str(err.value).startswith(field)


def test_the_ratio_shortcut_at_eta_0_gives_the_same_numbers(monkeypatch):
    """At eta = 0 (the logarithmic law) every expm1(x)/x factor of the TNB formulas is taken at
    x = +-0; the helpers return 1 (log: 0) there without computing expm1, and every pgf form
    gives the bits of the full computation, which is checked here against the helpers as
    they were (no shortcut)."""
    from auditsel import rounds

    def ratio(x):
        x = np.asarray(x, dtype=float)
        small = np.abs(x) < 1e-8
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(small, 1 + x / 2, np.expm1(x) / np.where(small, 1.0, x))
        return out if out.ndim else float(out)

    def log_ratio(x):
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            big = x + np.log(-np.expm1(-np.maximum(x, 50.0))) - np.log(np.maximum(x, 50.0))
            mid = np.log(np.asarray(ratio(np.clip(x, -745.0, 50.0)), dtype=float))
        return np.where(x > 50, big, mid)

    rng = np.random.default_rng(5)
    z = np.concatenate([[0.0, 0.5, 1.0, 1e-300, 1 - 1e-16], rng.random(500)])
    w = 1 - z
    log_z = np.log(np.maximum(z, 1e-300))
    for x in (np.zeros(4), -np.zeros(4), np.array([0.0, -0.0]), 0.0, -0.0):
        assert np.array_equal(rounds._expm1_ratio(x), ratio(x))
        assert np.array_equal(rounds._log_expm1_ratio_array(x), log_ratio(x))
    for x in (np.array([0.0, 1e-9, -3.0, 60.0, np.nan]), rng.normal(0, 5, 50)):  # no shortcut
        assert np.array_equal(rounds._expm1_ratio(x), ratio(x), equal_nan=True)
        assert np.array_equal(rounds._log_expm1_ratio_array(x), log_ratio(x), equal_nan=True)

    def forms(law):
        return [
            law.pgf(z),
            law.pgf_complement(w),
            law.pgf_above_zero(z),
            law.log_pgf_above_zero(log_z),
            law.log_pgf_complement(np.log(np.maximum(w, 1e-300))),
            law.log_pgf_derivative(z, w),
            np.array([law.mean, law.p_zero]),
        ]

    for nu in (0.5, 0.01, 1e-9):
        law = TruncatedNegativeBinomial(eta=0.0, nu=nu)
        now = forms(law)
        with monkeypatch.context() as m:
            m.setattr(rounds, "_expm1_ratio", ratio)
            m.setattr(rounds, "_log_expm1_ratio_array", log_ratio)
            before = forms(law)
        for a, b in zip(now, before):
            assert np.array_equal(a, b, equal_nan=True)
