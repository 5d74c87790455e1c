"""The worst-case DP-SGD game with Poisson subsampling (`game.kind: dpsgd_worst_case`) against
closed forms and dp_accounting: per-step law (KS), mean run LLR = KL divergences of the PLD,
coverage of eps_L, eps_L below the rigorous bounds, an independent per-trial loop."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from attacks.proxies import SampleProxy
from auditsel.accounting.registry import bound
from auditsel.auditing.lower import audit_scores
from auditsel.executor import ExecutionOptions
from auditsel.games.engine import run_game
from auditsel.games.worst_case import DpsgdWorstCase, step_log_likelihood_ratio
from auditsel.mechanisms import dense_pmfs
from auditsel.reproductions.accountant_claims import (
    Setting,
    claim_epsilon,
    lower_estimates,
    single_run_epsilon,
)
from auditsel.rounds import Point, TruncatedNegativeBinomial, TwoPoint


def mixture_cdf(x, sigma, tau):
    return (1 - tau) * stats.norm.cdf(x / sigma) + tau * stats.norm.cdf((x - 1) / sigma)


@pytest.mark.parametrize("sigma,tau", [(0.8, 0.2), (1.5, 0.05), (0.5, 1.0)])
def test_per_step_law_is_the_subsampled_gaussian_pair(sigma, tau):
    game = DpsgdWorstCase(sigma, 7, tau, Point(1))
    rng = np.random.default_rng(1)
    x0 = game.steps_of_runs(20_000, 0, rng).ravel().astype(float)
    x1 = game.steps_of_runs(20_000, 1, rng).ravel().astype(float)
    assert stats.kstest(x0, lambda x: stats.norm.cdf(x / sigma)).pvalue > 1e-3
    assert stats.kstest(x1, lambda x: mixture_cdf(x, sigma, tau)).pvalue > 1e-3
    # the test has power: a wrong sample rate is rejected
    wrong = min(1.0, tau * 1.5) if tau < 1 else 0.8
    assert stats.kstest(x1, lambda x: mixture_cdf(x, sigma, wrong)).pvalue < 1e-6


def _pld_means(sigma, tau, steps):
    """Mean privacy loss of dp_accounting's PLD per direction (= the KL divergences)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    pld = pld_lib.from_gaussian_mechanism(
        sigma,
        sampling_prob=tau,
        value_discretization_interval=1e-4,
        use_connect_dots=False,
        pessimistic_estimate=True,
    )
    # the arrays as auditsel reads them (the one place that reads dp_accounting's private PLD)
    return [steps * float(np.dot(probs, losses)) for losses, probs, _ in dense_pmfs(pld)]


@pytest.mark.parametrize("sigma,tau,steps", [(0.8, 0.2, 3), (1.0, 0.1, 10)])
def test_mean_run_llr_matches_the_kl_divergences_of_dp_accountings_pld(sigma, tau, steps):
    game = DpsgdWorstCase(sigma, steps, tau, Point(1))
    rng = np.random.default_rng(2)
    n = 400_000
    s1, s0 = game.run_scores(n, 1, rng), game.run_scores(n, 0, rng)
    kl_remove, kl_add = _pld_means(sigma, tau, steps)
    # E_X'[s] = KL(X' || X) (remove pair: mixture against Gaussian), -E_X[s] = KL(X || X') (add pair)
    tol1 = 5 * s1.std() / math.sqrt(n) + steps * 2e-4
    tol0 = 5 * s0.std() / math.sqrt(n) + steps * 2e-4
    assert abs(s1.mean() - kl_remove) < tol1
    assert abs(-s0.mean() - kl_add) < tol0
    assert kl_remove != pytest.approx(kl_add, rel=1e-3)  # the two directions differ for tau < 1


def test_float32_scores_match_the_float64_formula():
    game = DpsgdWorstCase(0.7, 5, 0.3, Point(1))
    x = game.steps_of_runs(1000, 1, np.random.default_rng(3))
    exact = step_log_likelihood_ratio(x.astype(float), 0.7, 0.3).sum(axis=1)
    rng = np.random.default_rng(3)
    assert np.allclose(game.run_scores(1000, 1, rng), exact, rtol=1e-5, atol=1e-5)


def _loop_release(game, member, rng):
    """Independent reference: one trial at a time, K runs drawn with Bernoulli(tau) per step."""
    out = np.empty(len(member))
    ks = game.law.sample(len(member), rng)
    for i, (b, k) in enumerate(zip(member, ks)):
        if k == 0:
            out[i] = -np.inf
            continue
        x = game.noise_multiplier * rng.standard_normal((k, game.steps)) + b * (
            rng.random((k, game.steps)) < game.sample_rate
        )
        out[i] = (
            step_log_likelihood_ratio(x, game.noise_multiplier, game.sample_rate).sum(axis=1).max()
        )
    return out


@pytest.mark.parametrize("law", [TruncatedNegativeBinomial(0.0, 0.1), TwoPoint(6, 0.5)])
def test_winner_law_matches_a_per_trial_loop(law):
    game = DpsgdWorstCase(1.0, 4, 0.3, law, block=64)  # tiny blocks: trials split across blocks
    for b in (0, 1):
        member = np.full(6000, b, np.int8)
        fast = game.release(member, np.random.default_rng(10 + b))
        slow = _loop_release(game, member, np.random.default_rng(20 + b))
        assert stats.ks_2samp(fast, slow).pvalue > 1e-3


def test_winner_is_the_max_of_k_runs():
    game = DpsgdWorstCase(1.0, 3, 0.5, Point(5))
    member = np.array([0, 1, 1, 0], np.int8)
    top = game.release(member, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    rng.integers(
        0, 1, 0
    )  # Point.sample draws nothing; the run draws follow (b = 0 trials, then b = 1)
    runs0 = game.run_scores(10, 0, rng).reshape(2, 5).max(axis=1)
    runs1 = game.run_scores(10, 1, rng).reshape(2, 5).max(axis=1)
    assert np.allclose(top[[0, 3]], runs0) and np.allclose(top[[1, 2]], runs1)


def _audit(game, trials, seed, delta=1e-5):
    record = run_game(game, SampleProxy(), trials, seed)
    return audit_scores(record.scores, record.member, delta, rule="split")


def test_single_run_audit_is_below_the_pld_epsilon_and_refutes_the_eq19_heuristic():
    setting = Setting(0.8, 3, 0.2)
    audit = _audit(DpsgdWorstCase(0.8, 3, 0.2, Point(1)), 1_000_000, seed=0)
    pld = single_run_epsilon(setting)
    assert audit.eps <= pld
    assert audit.eps > claim_epsilon(
        "reduced_mu", setting
    )  # 1.70: the tau < 1 heuristic is too low


BOUNDS_HERE = ("profile", "generic_rdp")


@pytest.mark.parametrize(
    "law",
    [
        # reason: a statistical run (3 CPU s); the two-point law runs by default
        pytest.param(TruncatedNegativeBinomial(0.0, 0.1), marks=pytest.mark.slow),
        TwoPoint(10, 0.5),
    ],
)
def test_tuning_audit_never_exceeds_the_rigorous_tuning_bounds(law):
    setting = Setting(1.0, 3, 0.2, law)
    audit = _audit(DpsgdWorstCase(1.0, 3, 0.2, law), 400_000, seed=1)
    # the two rigorous bounds alone (the panel's curves: accounting.registry), not the panel
    delta = np.array([setting.delta])
    profile, generic = (float(bound(k).curve(setting.base, law, delta)[0]) for k in BOUNDS_HERE)
    assert 0 < audit.eps <= min(profile, generic)
    # and tuning leaks more than one run is claimed to (the naive claim) at a larger E[K]
    assert audit.eps_best_threshold > 0


@pytest.mark.slow  # a statistical run (200 seeds)
def test_eps_l_covers_the_true_epsilon_over_200_seeds():
    """eps_L > true eps in at most a few percent of audits (valid rule, 95% confidence). The true
    eps is bracketed by the optimistic and pessimistic PLDs; we count against the optimistic one."""
    sigma, steps, tau, delta = 1.0, 2, 0.5, 0.05
    setting = Setting(sigma, steps, tau, Point(1), delta)
    truth_low = max(lower_estimates(setting).values())
    assert truth_low <= single_run_epsilon(setting) + 1e-9
    game = DpsgdWorstCase(sigma, steps, tau, Point(1))
    eps = np.array([_audit(game, 4000, seed, delta).eps for seed in range(200)])
    over = int((eps > truth_low).sum())
    assert over <= 20, over  # Binomial(200, 0.05) exceeds 20 with probability < 0.01
    assert eps.mean() > 0.3 * truth_low  # the audits are not vacuous


def test_config_and_cli_run_the_game(tmp_path):
    from auditsel.cli import main

    cfg = tmp_path / "wc.yaml"
    cfg.write_text(
        "name: wc\ndelta: 1.0e-5\nbase: {kind: dpsgd, noise_multiplier: 0.8, steps: 3, "
        "sample_rate: 1.0}\nrounds: {kind: point, k: 1}\n"
        "game: {kind: dpsgd_worst_case, trials: 40000, chunk_size: 8192}\n"
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                str(cfg),
                "--out",
                str(out),
                "--jobs",
                "2",
                "--no-progress",
                "--quiet",
                "--no-plots",
            ]
        )  # fmt: skip
        == 0
    )
    lower = json.loads((out / "result.json").read_text())["lower"]
    assert lower["game"] == "dpsgd_worst_case" and lower["trials"] == 40_000 and lower["eps"] > 0


def test_same_seed_same_scores_whatever_the_jobs():
    game = DpsgdWorstCase(1.0, 4, 0.3, TruncatedNegativeBinomial(0.0, 0.2))
    one = run_game(
        game, SampleProxy(), 30_000, 5, execution=ExecutionOptions(chunk_size=4096, jobs=1)
    )
    two = run_game(
        game, SampleProxy(), 30_000, 5, execution=ExecutionOptions(chunk_size=4096, jobs=2)
    )
    assert np.array_equal(one.scores, two.scores) and np.array_equal(one.member, two.member)


@pytest.mark.parametrize(
    "game,field",
    [
        ("{kind: dpsgd_worst_case, proxy: likelihood_ratio}", "game.proxy"),
        ("{kind: dpsgd_worst_case, trials: 1}", "game.trials"),
    ],
)
def test_bad_game_fields_are_one_line_exit_2(tmp_path, capsys, game, field):
    from auditsel.cli import main

    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        f"name: bad\ndelta: 1.0e-5\nbase: {{kind: dpsgd, noise_multiplier: 1, steps: 2}}\n"
        f"rounds: {{kind: point, k: 1}}\ngame: {game}\n"
    )
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert field in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_the_game_needs_a_dpsgd_base(tmp_path, capsys):
    from auditsel.cli import main

    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        "name: bad\ndelta: 1.0e-5\nbase: {kind: gaussian, mu: 1}\nrounds: {kind: point, k: 1}\n"
        "game: {kind: dpsgd_worst_case}\n"
    )
    assert main(["run", str(cfg), "--quiet"]) == 2
    assert "game.kind" in capsys.readouterr().err


def test_regression_example_fails_for_opacus_gdp_and_passes_for_opacus_prv():
    """The Opacus block of docs/tutorials/regression-tests.md (marked `# not run` for the docs
    harness because of its 10^6-game audits): the PRV test passes, the Gaussian one fails."""
    import re
    from pathlib import Path

    from auditsel.testing import RefutedClaim

    pytest.importorskip("opacus")
    page = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "regression-tests.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    block = next(b for b in blocks if "opacus" in b)
    namespace = {}
    exec(compile(block, str(page), "exec"), namespace)
    namespace["test_opacus_prv_accountant"]()
    with pytest.raises(RefutedClaim):
        namespace["test_opacus_gaussian_accountant"]()


def _reproduce(tmp_path, grid, games):
    pytest.importorskip("opacus")
    pytest.importorskip("prv_accountant")
    from auditsel.reproductions import _clean
    from auditsel.reproductions import accountants_table as at
    from auditsel.reproductions.accountants import render as _render_accountants

    rows = at.cell_rows(grid, games=games, close_games=0, work_dir=tmp_path / "ck", log=None)
    for row in rows:  # the rigorous bounds are never refuted
        assert not {
            "dp_accounting_pld",
            "profile",
            "generic_rdp",
            "opacus_rdp",
            "repeat_and_select",
        } & set(row["refuted"])
    out = _render_accountants([{k: _clean(v) for k, v in r.items()} for r in rows], 1.0, tmp_path)
    assert not (tmp_path / "ck").exists()
    return rows, out


@pytest.mark.slow  # a regeneration (one cell of the accountants table)
def test_reproduce_accountants_on_one_cell(tmp_path):
    """The reproduction's rows, findings and files on one cell (the full grid: the command)."""
    (single,), out = _reproduce(tmp_path, [Setting(0.8, 3, 0.2)], 1_000_000)
    assert "opacus_gdp" in single["refuted"] and "reduced_mu" in single["refuted"]
    assert single["eps_L"] <= single["claim_dp_accounting_pld"]
    md = (out / "table.md").read_text()
    assert "opacus 1." in md and "refuted" in md and (out / "accountants.png").stat().st_size > 0
    assert json.loads((out / "rows.json").read_text())["rows"][0]["refuted"] == single["refuted"]


@pytest.mark.slow
def test_reproduce_accountants_tuning_cells(tmp_path):
    grid = [
        Setting(1.0, 1, 1.0, TwoPoint(10, 0.5)),
        Setting(1.0, 3, 0.2, TruncatedNegativeBinomial(0.0, 0.1)),
    ]
    rows, _ = _reproduce(tmp_path, grid, 2_000_000)
    assert rows[0]["claim_repeat_and_select"] is None and rows[0]["claim_opacus_rdp"] is None
    assert rows[1]["claim_repeat_and_select"] is not None
    assert all(r["eps_L"] <= r["claim_profile"] for r in rows)


def test_missing_extra_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    import sys

    from auditsel.cli import main

    monkeypatch.setitem(sys.modules, "opacus.accountants", None)  # import fails as if not installed
    assert main(["reproduce", "accountants", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and 'pip install "auditsel[accountants]"' in err
