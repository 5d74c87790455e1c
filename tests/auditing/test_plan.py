"""Audit planning: the binomial sums against Monte Carlo, predictions against actual audits."""

import json

import numpy as np
import pytest
import yaml
from scipy import stats

from auditsel.auditing.clopper_pearson import clopper_pearson_upper
from auditsel.auditing.lower import apply_rule
from auditsel.auditing.planning import (
    PlanCurve,
    expected_eps,
    games_needed,
    prob_at_least,
    prob_for_games,
)
from auditsel.auditing.rules import BonferroniGrid, Split
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.auditing.threshold_search import epsilon_from_rates
from auditsel.cli import main

DELTA = 1e-5


def simulated_eps(fp, fn, evaluated, level, delta, draws, seed):
    rng = np.random.default_rng(seed)
    n0 = evaluated // 2
    n1 = evaluated - n0
    c0, c1 = rng.binomial(n0, fp, draws), rng.binomial(n1, fn, draws)
    return epsilon_from_rates(
        clopper_pearson_upper(c0, n0, level), clopper_pearson_upper(c1, n1, level), delta
    )


@pytest.mark.parametrize(
    "fp, fn, n, level, target",
    [
        (0.01, 0.4, 4000, 0.05, 0.5),
        (0.002, 0.7, 20_000, 0.05 / 200, 1.0),
        (0.2, 0.2, 600, 0.05, 0.3),
        (0.5, 0.1, 300_000, 1e-7, 1.2),
    ],
)  # the last one exercises the coarsened (binned) sums
def test_probability_and_expectation_match_monte_carlo(fp, fn, n, level, target):
    eps = simulated_eps(fp, fn, n, level, DELTA, 40_000, 1)
    p = prob_at_least(target, fp, fn, n, level, DELTA)
    freq = np.mean(eps >= target)
    assert p <= freq + 4 * np.sqrt(freq * (1 - freq) / 40_000) + 1e-3  # never over-stated
    assert p == pytest.approx(freq, abs=0.02 if n < 100_000 else 0.05)
    assert expected_eps(fp, fn, n, level, DELTA) == pytest.approx(eps.mean(), abs=0.01)


def gaussian_curve(mu):
    t = np.linspace(-6, mu + 6, 3000)
    return PlanCurve(stats.norm.sf(t), stats.norm.cdf(t - mu), "exact"), t


def test_a_threshold_fixed_in_advance_does_what_the_plan_says():
    # Gaussian mu = 1.5, k = 1: the planner's best test at n games is a threshold t; 300 real
    # audits with that threshold fixed in advance (a one-point bonferroni grid) reach eps_L
    # >= X as often as predicted and certify the predicted mean
    mu, n, target, reps = 1.5, 3000, 1.5, 300
    curve, ts = gaussian_curve(mu)
    from auditsel.auditing.planning import _best, rule_design

    evaluated, level = rule_design("bonferroni", n, 0.95, thresholds=1)
    _, (fp, fn), _ = _best(curve, lambda a, b: expected_eps(a, b, evaluated, level, DELTA))
    t = stats.norm.isf(fp)
    predicted_mean = expected_eps(fp, fn, evaluated, level, DELTA)
    predicted_p = prob_at_least(target, fp, fn, evaluated, level, DELTA)
    rng = np.random.default_rng(0)
    eps = []
    for _ in range(reps):
        m = rng.integers(0, 2, n).astype(np.int8)
        s = rng.normal(mu * m, 1.0)
        eps.append(apply_rule(SortedScores(s, m), BonferroniGrid(grid=[t]), 0.05, DELTA)["eps"])
    eps = np.array(eps)
    se = eps.std(ddof=1) / np.sqrt(reps)
    # the coins make n0, n1 random around n/2: a small extra spread
    assert eps.mean() == pytest.approx(predicted_mean, abs=4 * se + 0.01)
    freq = np.mean(eps >= target)
    assert freq == pytest.approx(
        predicted_p, abs=4 * np.sqrt(predicted_p * (1 - predicted_p) / reps) + 0.02
    )


def test_split_audits_certify_no_more_than_planned():
    mu, n, reps = 1.5, 3000, 150
    curve, _ = gaussian_curve(mu)
    from auditsel.auditing.planning import expected_for_games

    planned = expected_for_games(curve, n, "split", 0.95, DELTA)
    rng = np.random.default_rng(1)
    eps = []
    for rep in range(reps):
        m = rng.integers(0, 2, n).astype(np.int8)
        s = rng.normal(mu * m, 1.0)
        eps.append(apply_rule(SortedScores(s, m), Split(seed=rep), 0.05, DELTA)["eps"])
    assert np.mean(eps) <= planned + 3 * np.std(eps) / np.sqrt(reps)
    assert np.mean(eps) >= 0.6 * planned  # and the plan is not vacuous


def test_games_needed_is_the_least_n_reaching_the_power():
    curve, _ = gaussian_curve(1.0)
    n = games_needed(curve, 1.0, "split", 0.95, DELTA, 0.9)
    assert prob_for_games(curve, 1.0, n, "split", 0.95, DELTA) >= 0.9
    assert prob_for_games(curve, 1.0, int(n * 0.97), "split", 0.95, DELTA) < 0.9


def write_config(tmp_path, **game):
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "delta": DELTA,
                "base": {"kind": "gaussian", "epsilon": 2.0},
                "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
                "game": {"kind": "reduced", "trials": 2000, **game},
            }
        )
    )
    return path


def test_plan_cli_json_and_errors(tmp_path, capsys):
    path = write_config(tmp_path)
    assert main(["plan", str(path), "--target-eps", "1.0", "--games", "5000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out["games"], int) and out["target_eps"] == 1.0 and out["curve"] == "exact"
    assert 0 < out["expected_eps"] < out["exact_eps"] and 0 <= out["prob_at_games"] <= 1
    # the planned range of eps_L holds E[eps_L], and the text says it is a prediction
    assert out["eps_low"] <= out["expected_eps"] <= out["eps_high"] and out["eps_low"] > 0
    assert main(["plan", str(path), "--target-eps", "1.0", "--games", "5000"]) == 0
    text = capsys.readouterr().out
    assert f"[{out['eps_low']:.4f}, {out['eps_high']:.4f}]" in text and "not a bound" in text
    assert main(["plan", str(path), "--target-eps", "9"]) == 2
    assert "--target-eps" in capsys.readouterr().err
    assert main(["plan", str(path)]) == 2
    assert main(["plan", str(path), "--games", "2"]) == 2


def test_plan_predicts_a_real_run(tmp_path):
    # the planner's 90% point for the config's own (split) rule, checked against actual runs
    path = write_config(tmp_path, proxy="likelihood_ratio")
    from auditsel.experiments.config import load_config
    from auditsel.experiments.config_plan import plan_spec

    spec = load_config(path)
    plan = plan_spec(spec, 0.6)
    from auditsel.experiments.experiment import protocol_and_proxy
    from auditsel.games.engine import run_game

    protocol, proxy = protocol_and_proxy(spec)
    hits = 0
    for seed in range(40):
        rec = run_game(protocol, proxy, plan.games, seed)
        ss = SortedScores(rec.scores, rec.member)
        hits += apply_rule(ss, Split(seed=seed), 0.05, DELTA)["eps"] >= 0.6
    # planned for 0.9 with the best threshold; split must find it: between 0.5 and 1 of the runs
    assert 0.5 * 40 <= hits
