"""Calibration (issue 19, item 4): the noise or E[K] at which the tightest rigorous bound on the
tuning run equals a target, against dp_accounting's RepeatAndSelectDpEvent calibration."""

from __future__ import annotations

import json
import math

import dp_accounting as dpa
import pytest
import yaml

from auditsel.accounting.calibrate import CalibrationOptions, calibrate
from auditsel.accounting.exact import exact_epsilon
from auditsel.accounting.interval import tightest_bound
from auditsel.cli import main
from auditsel.errors import ConfigError
from auditsel.events import LaplaceBase
from auditsel.mechanisms import DpsgdBase, FiniteOutputBase, GaussianBase
from auditsel.rounds import Point, Poisson, TruncatedNegativeBinomial
from auditsel.selection import winner_law

RTOL = 1e-3


def _dpa_epsilon(event, law, shape, delta):
    ev = dpa.dp_event.RepeatAndSelectDpEvent(event, law.mean, shape)
    return dpa.rdp.RdpAccountant().compose(ev).get_epsilon(delta)


def test_gaussian_noise_is_where_the_exact_curve_meets_the_target():
    """Under [XWW24]'s monotone-score assumption (asked for), the reduced game's exact curve is
    the truth for that score: the calibration meets the target on it. For any score (the
    default) the tightest rigorous bound meets it, with more noise."""
    law, delta, target = TruncatedNegativeBinomial(0.0, 0.01), 1e-5, 3.0
    honest = calibrate(
        GaussianBase(1.0),
        law,
        target_epsilon=target,
        delta=delta,
        options=CalibrationOptions(rtol=RTOL),
    )
    assert honest.bound in ("generic_rdp", "profile") and honest.assumption is None
    assert tightest_bound(GaussianBase(1 / honest.value), law, delta).epsilon <= target
    c = calibrate(
        GaussianBase(1.0),
        law,
        target_epsilon=target,
        delta=delta,
        options=CalibrationOptions(rtol=RTOL, assume="monotone_score"),
    )
    assert c.parameter == "noise_multiplier" and c.bound == "exact"
    assert c.assumption == "monotone_score" and honest.value > c.value
    # the exact curve is the truth for a monotone score: at the answer it is the target
    at = exact_epsilon(winner_law(GaussianBase(1 / c.value), law), delta)
    assert at == pytest.approx(c.epsilon) and at <= target
    less_noise = exact_epsilon(winner_law(GaussianBase(1 / (c.value * (1 - 2 * RTOL))), law), delta)
    assert less_noise > target
    # dp_accounting's calibration needs more noise for the same budget, and meets it
    assert c.baseline_value > c.value and c.gain == pytest.approx(c.baseline_value / c.value)
    eps_dpa = _dpa_epsilon(dpa.GaussianDpEvent(c.baseline_value), law, 0.0, delta)
    assert eps_dpa <= target + 1e-9
    assert honest.baseline_value >= honest.value * (1 - 2 * RTOL)  # generic <= dp_accounting's
    # a Gaussian DpEvent is the same base
    same = calibrate(dpa.GaussianDpEvent(1.0), law, target_epsilon=target, delta=delta)
    assert same.value == pytest.approx(honest.value, rel=1e-9)


@pytest.mark.parametrize(
    "law",
    [
        Poisson(5.0),
        # reason: a second law of K through the same calibrations (10 CPU s); Poisson by default
        pytest.param(TruncatedNegativeBinomial(1.0, 0.1), marks=pytest.mark.slow),
    ],
)
def test_dpsgd_noise(law):
    base, delta, target = DpsgdBase(1.0, 20, 0.05), 1e-5, 3.0
    shape = math.inf if isinstance(law, Poisson) else law.eta
    c = calibrate(
        base, law, target_epsilon=target, delta=delta, options=CalibrationOptions(rtol=RTOL)
    )
    assert c.epsilon <= target
    tighter = DpsgdBase(c.value * (1 - 2 * RTOL), 20, 0.05)
    assert tightest_bound(tighter, law, delta).epsilon > target
    # never more noise than dp_accounting's calibration, which meets the budget
    assert c.gain >= 1
    assert _dpa_epsilon(DpsgdBase(c.baseline_value, 20, 0.05).event, law, shape, delta) <= target


@pytest.mark.parametrize(
    "base, law",
    [
        # a Gaussian base whose one run is near the DP-SGD one's below at delta 1e-5
        (GaussianBase(0.5), Poisson(5.0)),
        # reason: E[K] over DP-SGD's accountants (8 CPU s a law); the same solve on a Gaussian above
        pytest.param(DpsgdBase(1.0, 20, 0.05), Poisson(5.0), marks=pytest.mark.slow),
        pytest.param(
            DpsgdBase(1.0, 20, 0.05), TruncatedNegativeBinomial(1.0, 0.1), marks=pytest.mark.slow
        ),
    ],
    ids=["gaussian-poisson", "dpsgd-poisson", "dpsgd-tnb"],
)
def test_mean(base, law):
    delta, target = 1e-5, 3.0
    m = calibrate(
        base,
        law,
        target_epsilon=target,
        delta=delta,
        solve_for="mean",
        options=CalibrationOptions(rtol=RTOL),
    )
    assert m.parameter == "mean" and m.epsilon <= target and m.law.mean == pytest.approx(m.value)
    bigger = Poisson(m.value * (1 + 2 * RTOL)) if isinstance(law, Poisson) else None
    if bigger is not None:
        assert tightest_bound(base, bigger, delta).epsilon > target
    assert m.gain >= 1  # at least the runs dp_accounting allows
    # a target dp_accounting cannot reach with E[K] >= 1, where Poisson E[K] < 1 still can
    if isinstance(law, Poisson):
        low = calibrate(base, law, target_epsilon=2.0, delta=delta, solve_for="mean")
        assert low.value < 1 and low.epsilon <= 2.0
        assert low.baseline_value is None and "no E[K] >= 1" in low.baseline_note


@pytest.mark.slow  # reason: E[K] solved over a point law's integers (8 CPU s)
def test_point_law_mean_is_an_integer():
    base, delta, target = GaussianBase(0.3), 1e-5, 2.0
    c = calibrate(base, Point(2), target_epsilon=target, delta=delta, solve_for="mean")
    k = int(c.value)
    assert c.value == k and c.law == Point(k)
    assert tightest_bound(base, Point(k), delta).epsilon <= target
    assert tightest_bound(base, Point(k + 1), delta).epsilon > target
    assert c.baseline_value is None  # dp_accounting's RepeatAndSelectDpEvent has no point law


@pytest.mark.slow  # reason: two Laplace calibrations (6 CPU s); the pure-DP bound: test_events
def test_laplace_mean_is_unbounded_under_corollary3():
    """Geometric K over a 1-DP base: [PS22] Corollary 3 gives 3 eps whatever E[K], so a target
    of 3 allows any number of runs; the answer says so instead of inventing a limit."""
    c = calibrate(
        LaplaceBase(1.0),
        TruncatedNegativeBinomial(1.0, 0.1),
        target_epsilon=3.0,
        delta=1e-5,
        solve_for="mean",
    )
    assert c.at_range_end and c.epsilon <= 3.0
    noise = calibrate(
        LaplaceBase(1.0), TruncatedNegativeBinomial(1.0, 0.1), target_epsilon=1.5, delta=0.0
    )
    assert noise.value == pytest.approx(2.0, rel=2e-3)  # pure DP: 3 / b = 1.5


def test_noise_callable_for_any_event():
    law = TruncatedNegativeBinomial(1.0, 0.1)
    via_callable = calibrate(
        None, law, target_epsilon=2.5, delta=1e-6, noise=lambda b: dpa.LaplaceDpEvent(b)
    )
    via_pair = calibrate(LaplaceBase(1.0), law, target_epsilon=2.5, delta=1e-6)
    assert via_callable.value == pytest.approx(via_pair.value, rel=2e-3)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"target_epsilon": 0.0}, "target_epsilon"),
        ({"target_epsilon": 1e-3}, "target_epsilon"),  # unreachable: the base alone is above
        ({"solve_for": "runs"}, "solve_for"),
        ({"delta": 1.5}, "delta"),
        ({"options": CalibrationOptions(rtol=0.0)}, "rtol"),
        ({"options": CalibrationOptions(assume="always")}, "assume"),
        ({"options": {"rtol": 1e-3}}, "options"),  # a dict is never read by its field names
    ],
)
def test_bad_input_names_the_field(kwargs, field):
    args = {"target_epsilon": 2.0, "delta": 1e-5, **kwargs}
    with pytest.raises(ConfigError) as err:
        calibrate(
            GaussianBase(0.5), Point(2), **{**args, "solve_for": kwargs.get("solve_for", "mean")}
        )
    assert err.value.field == field


def test_finite_base_has_no_noise():
    with pytest.raises(ConfigError) as err:
        calibrate(FiniteOutputBase.example1(), Point(2), target_epsilon=3.0, delta=1e-5)
    assert err.value.field == "base"


def test_cli_calibrate_needs_a_target_and_a_noise(tmp_path, capsys):
    """The fast part of `test_cli_calibrate`: the refusals, before any calibration."""
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "cal",
                "delta": 1e-5,
                "base": {"kind": "gaussian", "mu": 1.0},
                "rounds": {"kind": "poisson", "mean": 5},
            }
        )
    )
    assert main(["calibrate", str(config)]) == 2  # --target-eps is required
    assert "--target-eps" in capsys.readouterr().err
    finite = tmp_path / "f.yaml"
    finite.write_text(
        yaml.safe_dump(
            {
                "name": "fin",
                "delta": 1e-5,
                "base": {"kind": "discrete", "p": [0.5, 0.5], "q": [0.4, 0.6]},
                "rounds": {"kind": "point", "k": 3},
            }
        )
    )
    assert main(["calibrate", str(finite), "--target-eps", "1"]) == 2  # no noise to calibrate
    assert "base: a finite-output base has no noise multiplier" in capsys.readouterr().err


@pytest.mark.slow  # reason: three calibrations through the CLI (11 CPU s); its refusals: above
def test_cli_calibrate(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "cal",
                "delta": 1e-5,
                "base": {"kind": "gaussian", "mu": 1.0},
                "rounds": {"kind": "poisson", "mean": 5},
            }
        )
    )
    assert main(["calibrate", str(config), "--target-eps", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["parameter"] == "noise_multiplier" and out["epsilon"] <= 3
    assert out["baseline"]["value"] > out["value"] and out["gain"] > 1
    assert main(["calibrate", str(config), "--target-eps", "3"]) == 0
    text = capsys.readouterr().out
    assert "less noise than dp_accounting" in text and "noise multiplier" in text
    assert main(["calibrate", str(config)]) == 2  # --target-eps is required
    assert "--target-eps" in capsys.readouterr().err
    finite = tmp_path / "f.yaml"
    finite.write_text(
        yaml.safe_dump(
            {
                "name": "fin",
                "delta": 1e-5,
                "base": {"kind": "discrete", "p": [0.5, 0.5], "q": [0.4, 0.6]},
                "rounds": {"kind": "point", "k": 3},
            }
        )
    )
    assert main(["calibrate", str(finite), "--target-eps", "1"]) == 2  # no noise to calibrate
    assert "base: a finite-output base has no noise multiplier" in capsys.readouterr().err
    assert main(["calibrate", str(finite), "--target-eps", "1", "--solve-for", "mean"]) == 0
    assert "E[K]" in capsys.readouterr().out
