"""auditsel.tuning_epsilon (issue 19, item 4): the epsilon to report for a tuning run, with its
source and the interval; the same upper end as the panel and calibrate."""

from __future__ import annotations

import json
import math

import dp_accounting as dpa
import pytest

from auditsel import (
    DpsgdBase,
    FiniteOutputBase,
    GaussianBase,
    LaplaceBase,
    Point,
    Poisson,
    TruncatedNegativeBinomial,
    TuningEpsilon,
    calibrate,
    panel,
    tuning_epsilon,
)
from auditsel.accounting.calibrate import CalibrationOptions
from auditsel.accounting.interval import IntervalRecord
from auditsel.accounting.registry import BOUNDS
from auditsel.errors import ConfigError
from auditsel.events import as_pair
from auditsel.mechanisms import gaussian_epsilon
from auditsel.rounds import Binomial

SETTINGS = {
    "dpsgd_poisson": (DpsgdBase(1.0, 100, 0.05), Poisson(10.0)),
    "dpsgd_tau1": (DpsgdBase(2.0, 4, 1.0), TruncatedNegativeBinomial(1.0, 0.1)),
    "gaussian_tnb": (GaussianBase(0.8), TruncatedNegativeBinomial(0.0, 0.01)),
    "finite_binomial": (FiniteOutputBase.example1(), Binomial(5, 0.3)),
    "laplace_tnb": (LaplaceBase(1.0, steps=2), TruncatedNegativeBinomial(1.0, 0.1)),
    "event_poisson_below_1": (
        dpa.ComposedDpEvent([dpa.LaplaceDpEvent(2.0), dpa.GaussianDpEvent(3.0)]),
        Poisson(0.4),
    ),
}


def _rigorous_min(pair, law, delta):
    """min over the registry, bound by bound through Bound.epsilon (no shared profile)."""
    pair = as_pair(pair)
    values = [
        (b.epsilon(pair, law, delta), b.key)
        for b in BOUNDS
        if b.supports(pair, law)
        and b.rigour(pair) == "rigorous"
        and not b.not_applicable(pair, law, delta)
    ]
    return min((v for v in values if math.isfinite(v[0])), default=(math.inf, None))


@pytest.mark.parametrize(
    "name, delta",
    # reason: every setting at both deltas is 12 cases (6 CPU s); by default each setting at
    # one delta, the deltas in turn (every setting and both deltas checked), the rest slow
    [
        pytest.param(name, delta, marks=() if j == i % 2 else pytest.mark.slow)
        for i, name in enumerate(sorted(SETTINGS))
        for j, delta in enumerate([1e-5, 1e-2])
    ],
)
def test_is_the_smallest_rigorous_bound_and_tops_the_interval(name, delta):
    pair, law = SETTINGS[name]
    out = tuning_epsilon(pair, law, delta)
    value, key = _rigorous_min(pair, law, delta)
    assert out.epsilon == pytest.approx(value, rel=1e-12) and out.bound == key
    assert out.interval.upper == out.epsilon
    assert out.interval.lower <= out.epsilon  # the attack value (or 0) is a lower bound
    assert out.interval.width == pytest.approx(out.epsilon - out.interval.lower)
    heuristic = {b.key for b in BOUNDS if b.rigour(as_pair(pair)) == "heuristic"}
    assert out.bound not in heuristic  # a heuristic is never the answer


def test_dpsgd_with_poisson_k_the_readme_setting():
    """DP-SGD with sample rate below 1: the reduced game's values are heuristics, below the
    attack value here, and never the answer; the panel gives the same interval."""
    run, law = DpsgdBase(1.0, 1000, 0.01), Poisson(10.0)
    out = tuning_epsilon(run, law, 1e-5)
    p = panel(run, law, 1e-5)
    assert out.interval == p.interval  # one implementation of both ends
    assert out.epsilon > p.base["epsilon"]  # tuning costs more than one run
    assert p.reduced_game["exact"] < out.interval.lower < out.epsilon
    assert out.interval.lower_source.startswith("attack:")


@pytest.mark.parametrize(
    "delta, mu",
    # reason: the 3 x 3 grid is 2.4 CPU s; by default its diagonal (each delta and each mu
    # once), the rest slow
    [
        pytest.param(d, m, marks=() if i == j else pytest.mark.slow)
        for i, d in enumerate([1e-10, 1e-5, 0.1])
        for j, m in enumerate([0.3, 1.0, 2.5])
    ],
)
def test_gaussian_base_with_one_run_is_the_base_epsilon(mu, delta):
    """K = 1 releases the run itself: the tuning run is the Gaussian mechanism, whose epsilon
    has the closed form of [BW18] (gaussian_epsilon); the interval is exact (width 0)."""
    out = tuning_epsilon(GaussianBase(mu), Point(1), delta)
    assert out.epsilon == pytest.approx(gaussian_epsilon(mu, delta), rel=1e-9, abs=1e-12)
    assert out.epsilon == pytest.approx(GaussianBase(mu).epsilon(delta), rel=1e-9, abs=1e-12)
    assert out.interval.width == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(
    "event, pair",
    [
        (dpa.GaussianDpEvent(2.0), GaussianBase(0.5)),
        (
            dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.05, dpa.GaussianDpEvent(1.0)), 100),
            DpsgdBase(1.0, 100, 0.05, "pld"),
        ),
        (
            dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(1.0), 2),
            LaplaceBase(1.0, steps=2),
        ),
    ],
    ids=["gaussian", "dpsgd", "laplace"],
)
def test_a_dp_event_equals_the_equivalent_pair(event, pair):
    law = Poisson(5.0)
    from_event, from_pair = tuning_epsilon(event, law, 1e-5), tuning_epsilon(pair, law, 1e-5)
    assert from_event.epsilon == pytest.approx(from_pair.epsilon, rel=1e-12)
    assert from_event.bound == from_pair.bound
    assert from_event.interval.lower == pytest.approx(from_pair.interval.lower, rel=1e-12)


def test_event_base_without_a_known_pair_starts_at_zero():
    event = dpa.ComposedDpEvent([dpa.LaplaceDpEvent(2.0), dpa.GaussianDpEvent(3.0)])
    out = tuning_epsilon(event, TruncatedNegativeBinomial(1.0, 0.1), 1e-5)
    assert out.interval.lower == 0.0 and out.interval.lower_source.startswith("eps >= 0")
    assert 0 < out.epsilon < math.inf and out.bound in ("generic_rdp", "profile")


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, math.nan, math.inf])
def test_delta_outside_zero_one_is_a_config_error_naming_delta(bad):
    with pytest.raises(ConfigError) as err:
        tuning_epsilon(GaussianBase(1.0), Poisson(3.0), bad)
    assert err.value.field == "delta" and "[0, 1)" in err.value.message


def test_delta_zero_is_the_pure_value_or_inf():
    """A Gaussian base is never (eps, 0)-DP: inf (no bound, the interval's upper end inf). A
    pure-DP base: [PS22] Corollary 3, (2 + eta) eps for TNB."""
    gauss = tuning_epsilon(GaussianBase(1.0), TruncatedNegativeBinomial(1.0, 0.1), 0.0)
    assert gauss.epsilon == math.inf and gauss.interval.upper == math.inf
    lap = tuning_epsilon(LaplaceBase(1.0, steps=2), TruncatedNegativeBinomial(1.0, 0.1), 0.0)
    assert lap.epsilon == pytest.approx(3 * 2.0)  # (2 + eta) eps, eps = 2


def test_bad_pair_and_law_are_config_errors():
    with pytest.raises(ConfigError, match="^pair: must be a mechanism pair"):
        tuning_epsilon("dpsgd", Poisson(3.0), 1e-5)
    with pytest.raises(ConfigError, match="^law: must be a law of K"):
        tuning_epsilon(GaussianBase(1.0), 3, 1e-5)


@pytest.mark.parametrize(
    "base",
    [
        GaussianBase(1.0),
        # reason: a DP-SGD calibration (1.5 CPU s); the same identity on a Gaussian base above
        pytest.param(DpsgdBase(1.0, 100, 0.05), marks=pytest.mark.slow),
    ],
    ids=["gaussian", "dpsgd"],
)
def test_calibration_reports_the_same_epsilon(base):
    """calibrate's epsilon at its answer is tuning_epsilon's there (one implementation)."""
    law = Poisson(5.0)
    c = calibrate(
        base, law, target_epsilon=2.0, delta=1e-5, options=CalibrationOptions(baseline=False)
    )
    out = tuning_epsilon(c.pair, c.law, 1e-5)
    assert out.epsilon == c.epsilon and out.bound == c.bound and out.epsilon <= 2.0


def test_result_type_is_frozen_and_json_ready():
    out = tuning_epsilon(GaussianBase(1.0), Poisson(3.0), 1e-5)
    assert isinstance(out, TuningEpsilon)
    with pytest.raises(AttributeError):
        out.epsilon = 0.0  # type: ignore[misc]
    doc = json.loads(json.dumps(out.to_dict()))
    assert doc["epsilon"] == out.epsilon and doc["interval"]["upper"] == out.interval.upper
    assert doc["bound"] == out.bound and f"{out.epsilon:.4f}" in str(out)
    assert tuning_epsilon(GaussianBase(1.0), Poisson(3.0), 0.0).to_dict()["epsilon"] is None


@pytest.mark.parametrize("assume", [None, "monotone_score"])
def test_the_interval_record_has_its_declared_keys(assume):
    """`Interval.to_dict()` is an IntervalRecord: the required keys always, `assumption` exactly
    when the ends rest on the monotone-score assumption; non-finite ends as None."""
    iv = tuning_epsilon(GaussianBase(1.0), Poisson(3.0), 1e-5, assume=assume).interval
    record = iv.to_dict()
    required, optional = IntervalRecord.__required_keys__, IntervalRecord.__optional_keys__
    assert required <= set(record) <= required | optional
    assert ("assumption" in record) == (assume is not None)
    assert record["lower"] == iv.lower and record["upper"] == iv.upper
    assert record["width"] == pytest.approx(iv.upper - iv.lower)
    zero = tuning_epsilon(GaussianBase(1.0), Poisson(3.0), 0.0).interval.to_dict()
    assert zero["upper"] is None and zero["width"] is None and zero["upper_source"] is None
