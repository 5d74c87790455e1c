"""Statistical validity: every valid rule over-claims at most 1 - confidence of the time, on
every path (in memory, streamed from disk, real DP-SGD games; bonferroni with the spec's grid and
with a pilot grid).

Settings with a known true epsilon: the Gaussian base with k = 1, the reduced game with a TNB
law, Example 1 of [XWW24], and DP-SGD with ETCV, the Dirac canary, tau = 1 and k = 1, where
lambda_a is exactly N(b, sigma^2/N) so that the exact epsilon is the Gaussian one of
mu = sqrt(N)/sigma. The fast variants run in the default test run (200 repetitions each); the
long ones are marked slow (`python -m pytest -m slow`).
"""

import numpy as np
import pytest
from scipy import stats

from attacks.proxies import make_proxy
from auditsel.accounting.exact import exact_epsilon
from auditsel.auditing.lower import audit_scores
from auditsel.auditing.rules import THRESHOLD_RULES, threshold_rule
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.auditing.validity import Repetitions, overclaim_rates
from auditsel.executor import ExecutionOptions
from auditsel.mechanisms import FiniteOutputBase, GaussianBase, gaussian_epsilon
from auditsel.rounds import Point, TruncatedNegativeBinomial
from auditsel.selection import FiniteWinner, GaussianWinner

DELTA = 1e-3
VALID = ("split", "bonferroni", "bonferroni_all", "multisplit")
STREAMED = ("split", "bonferroni", "bonferroni_all")


def settings():
    k1 = GaussianWinner(GaussianBase(2.0), Point(1))
    tnb = GaussianWinner(GaussianBase(2.0), TruncatedNegativeBinomial(0.0, 0.05))
    ex1 = FiniteWinner(FiniteOutputBase.example1(), TruncatedNegativeBinomial(1.0, 1e-3))
    return {
        "gaussian-k1": (k1, gaussian_epsilon(2.0, DELTA), np.linspace(-8, 8, 20)),
        "reduced-tnb": (tnb, exact_epsilon(tnb, DELTA), np.linspace(-8, 8, 20)),
        "example1": (ex1, exact_epsilon(ex1, DELTA), np.array([-10.0, -2.0, 0.0, 2.0])),
    }


def ceiling(reps, allowed_tail=1e-3, level=0.05):
    return stats.binom.ppf(1 - allowed_tail, reps, level)


def check(name, reps, trials, grid="spec", path="memory", rules=VALID):
    winner, truth, spec_grid = settings()[name]
    cov = overclaim_rates(
        winner,
        make_proxy("likelihood_ratio", winner),
        truth,
        DELTA,
        Repetitions(reps, trials, path=path, chunk_size=max(trials // 4, 1)),
        rules=(*rules, "point"),
        threshold_grid=spec_grid if grid == "spec" else None,
    )
    for rule in rules:
        assert cov[rule].overclaims <= ceiling(reps), cov
    return cov


def test_every_rule_is_covered_here():
    assert set(VALID) == set(THRESHOLD_RULES)


# statistical runs (half a minute each on the 2-core machine): the slow tier; by default,
# tests/auditing/test_lower.py checks each rule's eps_L against the exact eps on sampled games
@pytest.mark.slow
@pytest.mark.parametrize("name", ["gaussian-k1", "reduced-tnb", "example1"])
@pytest.mark.parametrize("grid", ["spec", "pilot"])
def test_valid_rules_cover_fast(name, grid):
    check(
        name, reps=200, trials=2_000, grid=grid, rules=VALID if grid == "spec" else ("bonferroni",)
    )


@pytest.mark.slow  # statistical runs (tests/games/test_game.py checks streamed = in memory)
@pytest.mark.parametrize("name", ["gaussian-k1", "reduced-tnb"])
@pytest.mark.parametrize("grid", ["spec", "pilot"])
def test_valid_rules_cover_streamed(name, grid):
    check(
        name,
        reps=200,
        trials=2_000,
        grid=grid,
        path="stream",
        rules=STREAMED if grid == "spec" else ("bonferroni",),
    )


@pytest.mark.slow  # a statistical run (200 audits), the power of the slow coverage runs above
def test_the_check_has_power_where_the_setting_is_tight():
    # the point estimate (no confidence interval) over-claims often on a tight setting:
    # the coverage test above could fail
    cov = check("gaussian-k1", reps=200, trials=2_000, rules=("split",))
    assert cov["point"].overclaims > ceiling(200)


# --- real DP-SGD games --------------------------------------------------------------------


def dpsgd_blocks(games_per_audit, reps, sigma=1.0, steps=4, seed=0):
    """reps independent audits' scores of the ETCV / Dirac / tau = 1 / k = 1 game, played as one
    batched run and cut into consecutive blocks (the trials are i.i.d.)."""
    pytest.importorskip("torch")
    from auditsel.experiments.config import parse_config
    from auditsel.experiments.experiment import protocol_and_proxy
    from auditsel.games.engine import run_game

    raw = {
        "name": "cov",
        "delta": DELTA,
        "base": {"kind": "dpsgd", "noise_multiplier": sigma, "steps": steps, "sample_rate": 1.0},
        "rounds": {"kind": "point", "k": 1},
        "game": {
            "kind": "dpsgd",
            "threat": "etcv",
            "canary": "dirac",
            "dataset": "digits",
            "model": "logreg",
            "train_size": 50,
            "learning_rates": [0.01],
            "clip": 1.0,
            "proxy": "lambda_a",
            "trials": games_per_audit * reps,
            "chunk_size": 1000,
        },
    }
    spec = parse_config(raw)
    protocol, proxy = protocol_and_proxy(spec)
    rec = run_game(
        protocol, proxy, games_per_audit * reps, seed, execution=ExecutionOptions(chunk_size=1000)
    )
    mu = np.sqrt(steps) / sigma
    return rec.scores.reshape(reps, -1), rec.member.reshape(reps, -1), mu


def dpsgd_check(games, reps, sigma):
    scores, member, mu = dpsgd_blocks(games, reps, sigma=sigma)
    # the exactness claim behind the truth: lambda_a ~ N(b, sigma^2 / N)
    s, m = scores.ravel(), member.ravel()
    for b in (0, 1):
        assert stats.kstest(s[m == b], "norm", args=(b, 1 / mu)).pvalue > 1e-3
    truth = gaussian_epsilon(mu, DELTA)
    over = {rule: 0 for rule in VALID}
    point = 0
    for rep, (sc, me) in enumerate(zip(scores, member)):
        if me.min() == me.max():
            continue
        ss = SortedScores(sc, me)
        for rule in VALID:
            seeded = threshold_rule(rule, grid_size=20, seed=rep)  # fixed before the scores
            lb = audit_scores(sc, me, DELTA, rule=seeded, sorted_scores=ss)
            over[rule] += lb.eps > truth
        point += lb.eps_point_best > truth
    for rule in VALID:
        assert over[rule] <= ceiling(reps), (over, truth)
    return over, point


@pytest.mark.slow  # a statistical run over DP-SGD games
def test_valid_rules_cover_dpsgd_fast():
    over, point = dpsgd_check(games=60, reps=200, sigma=0.5)
    assert point > ceiling(200)  # the check has power: the point estimate over-claims


@pytest.mark.slow
def test_valid_rules_cover_dpsgd_long():
    dpsgd_check(games=2000, reps=200, sigma=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gaussian-k1", "reduced-tnb", "example1"])
@pytest.mark.parametrize("path", ["memory", "stream"])
def test_valid_rules_cover_long(name, path):
    check(name, reps=1000, trials=20_000, path=path, rules=VALID if path == "memory" else STREAMED)
