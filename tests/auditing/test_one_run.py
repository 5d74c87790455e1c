"""One-run audits ([SNJ23], [MMC24]) and the reduced one-run tuning game."""

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import binom, kstest

from auditsel.accounting.exact import exact_epsilon
from auditsel.auditing.one_run_analysis import (
    GdpFamily,
    PureDpFamily,
    audit_one_run,
    guess_counts,
    guess_grid,
    mmc24_rejects,
    snj23_epsilon,
    snj23_p_value,
)
from auditsel.games.one_run_reduced import OneRunReducedGame, TuningFamily, canary_curve
from auditsel.mechanisms import GaussianBase, gaussian_epsilon
from auditsel.rounds import Point, law_from_dict
from auditsel.selection import GaussianWinner

#: the one-run CLI runs check numbers and checkpoints, not figures (0.4 CPU s a run)
NO_PLOTS = "--no-plots"

TNB = law_from_dict({"kind": "tnb", "eta": 0.0, "nu": 0.1})


@pytest.mark.parametrize(
    "m,r,v,eps", [(1000, 100, 80, 0.7), (50, 20, 20, 2.0), (10_000, 3000, 1700, 0.2)]
)
def test_snj23_pure_is_binomial_tail(m, r, v, eps):
    # [SNJ23] Thm 3.1: delta = 0 is the tail of Bin(r, e^eps / (1 + e^eps))
    q = math.exp(eps) / (1 + math.exp(eps))
    assert snj23_p_value(m, r, v, eps, 0.0) == pytest.approx(binom.sf(v - 1, r, q), rel=1e-12)
    # and eps_L is where that tail crosses the significance
    e = snj23_epsilon(m, r, v, 0.05, 0.0)
    if e > 0:
        assert binom.sf(v - 1, r, expit(e)) == pytest.approx(0.05, rel=1e-6)


def test_snj23_delta_term_matches_the_papers_sum():
    # [SNJ23] Thm 5.2's alpha written as the paper does: max_i (1/i) sum_{j=1..i} P[Bin = v - j]
    m, r, v, eps, delta = 2000, 300, 220, 0.6, 1e-4
    q = expit(eps)
    pmf = [binom.pmf(v - j, r, q) for j in range(1, v + 1)]
    alpha = max(sum(pmf[:i]) / i for i in range(1, v + 1))
    expected = binom.sf(v - 1, r, q) + 2 * m * delta * alpha
    assert snj23_p_value(m, r, v, eps, delta) == pytest.approx(expected, rel=1e-9)
    assert snj23_epsilon(m, r, v, 0.05, delta) < snj23_epsilon(m, r, v, 0.05, 0.0)


@pytest.mark.parametrize("eps,k,m", [(0.5, 100, 1000), (1.0, 40, 200), (2.0, 256, 1000)])
def test_mmc24_type_one_error_on_randomized_response(eps, k, m):
    # randomized response is the worst (eps, 0)-DP mechanism: each guess is right with prob
    # q = e^eps/(1+e^eps) independently; the probability of a rejected count must be <= tau
    tau = 0.05
    c = np.arange(k + 1)
    rejected = mmc24_rejects(PureDpFamily().fbar_inverse(eps), m, np.full(k + 1, k), c, tau)
    assert rejected.any()  # the test has power at all
    assert binom.pmf(c[rejected], k, expit(eps)).sum() <= tau


def test_mmc24_single_guess_closed_form():
    # one guess, correct: r = tau/m, h = fbar^-1(tau/m); rejects iff fbar^-1(tau/m) > (1 - tau)/m
    m, tau = 10, 0.3
    for mu in (0.5, 2.0, 4.0):
        inv = GdpFamily().fbar_inverse(mu)
        assert bool(mmc24_rejects(inv, m, 1, 1, tau)[0]) == bool(inv(tau / m) > (1 - tau) / m)


def test_guess_counts_top_and_bottom():
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    members = np.array([1, 1, 0, 1, 0, 0])
    r, v = guess_counts(scores, members, np.array([[2, 0], [0, 2], [3, 3], [1, 1]]))
    assert r.tolist() == [2, 2, 6, 2]
    assert v.tolist() == [2, 2, 4, 2]
    grid = guess_grid(1000)
    assert grid.min() >= 0 and (grid.sum(axis=1) > 0).all() and grid.max() <= 500


def test_canary_curve_closed_forms():
    # K = 1: the composition is the Gaussian mechanism mu (mu_T^2 + mu_Y^2 = mu^2)
    for m in (2, 37, 1000):
        assert canary_curve(1.5, Point(1), m).epsilon(1e-5) == pytest.approx(
            gaussian_epsilon(1.5, 1e-5), rel=1e-6
        )
    # between the single run and [XWW24]'s reduced game (m = 1), decreasing in m
    reduced = exact_epsilon(GaussianWinner(GaussianBase(1.5), TNB), 1e-5)
    eps = [OneRunReducedGame(1.5, TNB, m).epsilon(1e-5) for m in (2, 10, 100, 1000)]
    assert gaussian_epsilon(1.5, 1e-5) < eps[-1] and eps[0] < reduced
    assert all(a > b for a, b in zip(eps, eps[1:]))


def test_play_matches_brute_force_selection():
    # the O(m) sampler draws the law of the K-run argmax-of-sums game
    game = OneRunReducedGame(1.0, TNB, 8)
    fast, slow = np.random.default_rng(1), np.random.default_rng(2)
    draws = {name: [] for name in ("fast", "slow")}
    for _ in range(3000):
        s, mem = game.play(fast)
        draws["fast"].append((s[0] - game.mu * mem[0], s.sum() - game.mu * mem.sum()))
        s, mem = game.play_direct(slow)
        draws["slow"].append((s[0] - game.mu * mem[0], s.sum() - game.mu * mem.sum()))
    f, s = np.array(draws["fast"]), np.array(draws["slow"])
    for j in range(2):
        assert kstest(f[:, j], s[:, j]).pvalue > 1e-3


def test_tuning_family_is_never_stronger_than_the_truth():
    # K = 1: the family is mu-GDP, whose fbar^-1 is closed form; the supporting-line curve must be
    # at or below it (a weaker hypothesis) and close to it
    r = np.linspace(0.001, 0.999, 200)
    for mu in (0.5, 2.0):
        lines = TuningFamily(Point(1), 50).fbar_inverse(mu)(r)
        exact = GdpFamily().fbar_inverse(mu)(r)
        assert np.all(lines <= exact + 1e-12)
        assert np.max(exact - lines) < 2e-3


def test_audit_one_run_detects_a_large_leak_and_rejects_bad_input():
    rng = np.random.default_rng(0)
    members = rng.integers(0, 2, 1000)
    scores = 4.0 * members + rng.standard_normal(1000)
    bound = audit_one_run(scores, members, 1e-5)
    truth = gaussian_epsilon(4.0, 1e-5)
    assert 1.0 < bound.eps_snj23 < truth and 1.0 < bound.eps_mmc24 < truth
    shuffled = audit_one_run(scores, rng.permutation(members), 1e-5)
    assert shuffled.eps_snj23 < 0.5
    for bad in [
        (scores[:1], members[:1]),
        (scores, members[:10]),
        (scores * np.nan, members),
        (scores, members + 2),
    ]:
        with pytest.raises(ValueError):
            audit_one_run(*bad, 1e-5)


def _coverage(game, reps, seed, family=None):
    exact = game.epsilon(1e-5)
    over = {"snj23": 0, "mmc24": 0}
    rng = np.random.default_rng(seed)
    for _ in range(reps):
        scores, members = game.play(rng)
        b = audit_one_run(scores, members, 1e-5, family=family or game.family)
        over["snj23"] += b.eps_snj23 > exact
        over["mmc24"] += b.eps_mmc24 > exact
    return over


@pytest.mark.slow  # a statistical run
def test_coverage_on_the_gaussian_one_run_game():
    # 200 one-run audits of K = 1 (the Gaussian mechanism, exact eps, the GDP family exact);
    # eps_L may exceed the truth in at most 5% of them: P[Bin(200, 0.05) > 19] < 0.003
    over = _coverage(OneRunReducedGame(3.0, Point(1), 100), 200, seed=3, family=GdpFamily())
    assert over["snj23"] <= 19 and over["mmc24"] <= 19


@pytest.mark.slow
def test_coverage_on_the_reduced_one_run_tuning_game():
    # the same on a tuning run (TNB, E[K] = 3.9) with [MMC24]'s exact per-canary family (~90 s)
    over = _coverage(OneRunReducedGame(2.0, TNB, 100), 200, seed=4)
    assert over["snj23"] <= 19 and over["mmc24"] <= 19


def test_cli_audit_scores_one_run(tmp_path, capsys):
    import json

    from auditsel.cli import main

    rng = np.random.default_rng(5)
    members = rng.integers(0, 2, 500)
    scores = 3.0 * members + rng.standard_normal(500)
    path = tmp_path / "canaries.csv"
    path.write_text("score,member\n" + "".join(f"{s},{b}\n" for s, b in zip(scores, members)))
    assert main(["audit-scores", "--one-run", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = audit_one_run(scores, members, 1e-5)
    assert out["eps_snj23"] == pytest.approx(expected.eps_snj23)
    assert out["eps_mmc24"] == pytest.approx(expected.eps_mmc24)
    assert main(["audit-scores", "--one-run", str(path), "--confidence", "0.2"]) == 2
    assert "--confidence" in capsys.readouterr().err


def test_one_run_dpsgd_scores_are_the_gaussian_canaries():
    # ETCV, tau = 1, K = 1: the released (w_0 - w_N)[c] / lr of each Dirac canary is
    # C (N S_c + sigma sqrt(N) Z_c): standardised, N(mu S_c, 1) with mu = sqrt(N)/sigma
    from auditsel.games.one_run_dpsgd import OneRunDpsgd

    game = OneRunDpsgd(
        canaries=600, noise_multiplier=2.0, steps=9, law=Point(1), learning_rates=(0.05, 0.2)
    )
    rng = np.random.default_rng(11)
    setup = game.setup()
    z0, z1 = [], []
    for _ in range(3):
        scores, members = game.play(rng, setup)
        z = scores / (game.clip * game.noise_multiplier * math.sqrt(game.steps))
        z0.append(z[members == 0])
        z1.append(z[members == 1] - game.mu)
    assert kstest(np.concatenate(z0), "norm").pvalue > 1e-3
    assert kstest(np.concatenate(z1), "norm").pvalue > 1e-3
    with pytest.raises(ValueError, match="canaries"):
        OneRunDpsgd(canaries=700, noise_multiplier=1.0, steps=2, law=Point(1)).setup()


ONE_RUN_CONFIG = """
name: one_run_test
delta: 1.0e-5
base: {kind: gaussian, epsilon: 4.0}
rounds: {kind: tnb, eta: 0.0, nu: 0.1}
game: {kind: reduced, seed: 3, one_run: {canaries: 300, repeats: 2, family: gdp}}
"""


def test_run_config_with_one_run(tmp_path, capsys):
    import json

    from auditsel.cli import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text(ONE_RUN_CONFIG)
    assert main(["run", str(cfg), "--out", str(tmp_path / "a"), "--quiet", NO_PLOTS]) == 0
    assert (
        main(["run", str(cfg), "--out", str(tmp_path / "b"), "--quiet", "--jobs", "2", NO_PLOTS])
        == 0
    )
    a = json.loads((tmp_path / "a" / "result.json").read_text())["one_run"]
    b = json.loads((tmp_path / "b" / "result.json").read_text())["one_run"]
    assert a["eps_snj23_runs"] == b["eps_snj23_runs"] and a["eps_mmc24_runs"] == b["eps_mmc24_runs"]
    game = OneRunReducedGame(gaussian_mu_for(4.0), TNB, 300)
    scores, members = game.play(np.random.default_rng(np.random.SeedSequence(3, spawn_key=(0,))))
    assert a["eps_snj23"] == pytest.approx(audit_one_run(scores, members, 1e-5).eps_snj23)
    assert a["exact_per_canary"] == pytest.approx(game.epsilon(1e-5))
    assert "one-run" in (tmp_path / "a" / "report.md").read_text()
    capsys.readouterr()
    for bad, field in [
        ("canaries: 300", "canaries: 1"),
        ("kind: reduced", "kind: discrete"),
        ("family: gdp", "family: pure"),
        ("repeats: 2", "repeat: 2"),
    ]:
        cfg.write_text(ONE_RUN_CONFIG.replace(bad, field))
        assert main(["run", str(cfg), "--out", str(tmp_path / "c")]) == 2
        err = capsys.readouterr().err
        assert "game" in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "c").exists()


def test_one_run_audits_resume_from_checkpoints(tmp_path, monkeypatch):
    """A rerun into the same folder plays no audit again; after losing one audit's checkpoint it
    plays exactly that one; the numbers are those of a run in one go; a folder of another
    experiment is refused."""
    import json

    from auditsel.cli import main
    from auditsel.games.one_run_reduced import OneRunReducedGame as Game

    cfg = tmp_path / "c.yaml"
    cfg.write_text(ONE_RUN_CONFIG)
    assert main(["run", str(cfg), "--out", str(tmp_path / "a"), "--quiet", NO_PLOTS]) == 0
    first = json.loads((tmp_path / "a" / "result.json").read_text())["one_run"]
    kept = sorted((tmp_path / "a" / "checkpoints" / "one_run").glob("chunk_*.npz"))
    assert len(kept) == first["repeats"] >= 2
    played = []
    original = Game.play
    monkeypatch.setattr(Game, "play", lambda self, rng: played.append(1) or original(self, rng))
    assert main(["run", str(cfg), "--out", str(tmp_path / "a"), "--quiet", NO_PLOTS]) == 0
    assert played == []
    kept[1].unlink()
    assert main(["run", str(cfg), "--out", str(tmp_path / "a"), "--quiet", NO_PLOTS]) == 0
    assert played == [1]
    again = json.loads((tmp_path / "a" / "result.json").read_text())["one_run"]
    assert again["eps_snj23_runs"] == first["eps_snj23_runs"]
    assert again["eps_mmc24_runs"] == first["eps_mmc24_runs"]
    cfg.write_text(ONE_RUN_CONFIG.replace("canaries: 300", "canaries: 200"))
    assert main(["run", str(cfg), "--out", str(tmp_path / "a"), "--quiet", NO_PLOTS]) == 2


def gaussian_mu_for(eps):
    from auditsel.mechanisms import gaussian_mu

    return gaussian_mu(eps, 1e-5)


@pytest.mark.slow  # a regeneration of results/one_run's table (small budget)
def test_comparison_rows_on_a_tiny_budget(tmp_path):
    # the committed results/one_run table, at a budget a test can afford: every number is
    # recomputed by an independent route (exact curves) or bounded by its target
    from auditsel.reproductions.one_run_vs_games import SETTING, rows, tightness_rows, write

    table = rows(games=(64,), canaries=(50,), repeats=1, game_repeats=2)
    game, one = table
    assert game["repeats"] == 2 and game["eps_L_min"] <= game["eps_L"] <= game["eps_L_max"]
    assert game["eps_L"] == pytest.approx(np.mean(game["eps_L_runs"]))
    winner = GaussianWinner(GaussianBase(game["mu"]), law_from_dict(SETTING["rounds"]))
    assert game["exact"] == pytest.approx(exact_epsilon(winner, 1e-5))
    assert one["exact"] == pytest.approx(
        OneRunReducedGame(game["mu"], law_from_dict(SETTING["rounds"]), 50).epsilon(1e-5)
    )
    assert one["exact"] < game["exact"]  # the selection over 50 canaries dilutes the leak
    assert game["eps_L"] <= game["exact"] and one["eps_L"] <= one["exact"]
    tight = tightness_rows(eps_b=(2.0,), canaries=(100,), repeats=1)
    files = write(table, tmp_path, 1.0, tight)
    assert all(f.exists() for f in files) and "one-run" in (tmp_path / "table.md").read_text()


def test_committed_one_run_dpsgd_config_runs_small():
    from dataclasses import replace

    from auditsel.experiments.config import OneRunSpec, load_config
    from auditsel.experiments.one_run_experiment import play_one_run

    spec = load_config(Path(__file__).resolve().parents[2] / "configs" / "one_run_dpsgd.yaml")
    assert spec.game.one_run == OneRunSpec(canaries=650, repeats=10, family="tuning")
    spec = spec.with_game(one_run=replace(spec.game.one_run, canaries=60, repeats=1, family="gdp"))
    out = play_one_run(spec)
    assert out["exact_rigour"] == "rigorous" and 0 <= out["eps_snj23"] <= out["exact_per_canary"]
    assert "not a tuning run's epsilon for every score" in out["exact_scope"]


def test_neyman_pearson_tests_reproduce_the_hockey_stick():
    # two code paths on the same pair: the tests "L > c" (the MMC24 family's lines) and the
    # hockey-stick integral; H_{e^eps}(P1 || P0) = max_c [(1 - beta_c) - e^eps alpha_c] (attained
    # at c = eps), so the tests' maximum must approach it from below
    curve = canary_curve(1.5, TNB, 20)
    c, alpha, beta = curve.tests()
    for eps in (0.5, 1.0, 2.0):
        dual = np.max((1 - beta) - np.exp(eps) * alpha)
        exact = curve.hockey_stick(eps, 1)
        assert dual <= exact + 1e-9 and dual == pytest.approx(exact, rel=1e-3)
