"""The tuning protocol H ([XWW24] Algorithm 2) over DP-SGD, and its theory check (Sec. 5.1)."""

import numpy as np
import pytest
from scipy import stats

from attacks import dpsgd_canaries, threats
from attacks.dpsgd_proxies import make_dpsgd_proxy
from auditsel.dpsgd.datasets import load_split
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.trainer import Execution, TrainSettings, train_runs
from auditsel.dpsgd.tuning_protocol import (
    CanaryLoss,
    DpsgdTuningProtocol,
    FirstCoordinateShift,
    RunSettings,
    ValidationLoss,
    evaluate_score,
)
from auditsel.rounds import Point, TruncatedNegativeBinomial

TRAIN, VAL = load_split("digits")
TRAIN_SMALL, VAL_SMALL = TRAIN.take(60), VAL.take(40)
LOGREG = ModelSpec("logreg", TRAIN.shape, 10)


def etcv_dirac(rounds, steps, sigma, lrs=(0.1,), **kw):
    return threats.tuning_game(
        "etcv",
        dpsgd_canaries.dirac(),
        model=LOGREG,
        train=TRAIN_SMALL,
        validation=VAL_SMALL,
        rounds=rounds,
        grid=[{"lr": v} for v in lrs],
        steps=steps,
        noise_multiplier=sigma,
        sample_rate=1.0,
        execution=Execution(device="cpu"),
        **kw,
    )


def test_etcv_dirac_one_run_lambda_a_is_exactly_normal_b_sigma2_over_n():
    """[XWW24] Sec. 5.1: X = {}, z = Z_D, tau = 1, k = 1 => lambda_a ~ N(b, sigma^2 / N)."""
    sigma, N, T = 1.3, 8, 1500
    proto = etcv_dirac(Point(1), N, sigma)
    member = np.repeat(np.array([0, 1], np.int8), T)
    obs = proto.release(member, np.random.default_rng(0))
    lam = make_dpsgd_proxy("lambda_a")(obs)
    scale = sigma / np.sqrt(N)
    for b in (0, 1):
        assert stats.kstest(lam[member == b], "norm", args=(b, scale)).pvalue > 1e-3


def test_etcv_dirac_tuning_winner_shifts_lambda_a_up():
    """With k ~ TNB the released run is the best of k by g = (w_0 - w_N)[0] = lr * C * N * lambda_a
    (one learning rate): lambda_a of the winner is the max of k draws of N(b, sigma^2/N)."""
    sigma, N, T = 1.0, 4, 600
    law = TruncatedNegativeBinomial(1.0, 0.25)  # geometric, mean 4
    proto = etcv_dirac(law, N, sigma)
    member = np.zeros(T, np.int8)
    obs = proto.release(member, np.random.default_rng(3))
    lam = make_dpsgd_proxy("lambda_a")(obs)
    scale = sigma / np.sqrt(N)
    # cdf of the winner: G(Phi(x / scale)) with G the pgf of xi
    cdf = lambda x: law.pgf(stats.norm.cdf(np.asarray(x) / scale))
    assert stats.kstest(lam, cdf).pvalue > 1e-3
    np.testing.assert_allclose(
        obs["score"], obs["lr"] * obs["clip"] * obs["steps"] * lam, rtol=1e-4, atol=1e-6
    )


def test_release_is_the_best_scored_run_of_each_trial():
    proto = threats.tuning_game(
        "ntnv",
        dpsgd_canaries.dirac(),
        model=LOGREG,
        train=TRAIN_SMALL,
        validation=VAL_SMALL,
        rounds=TruncatedNegativeBinomial(1, 0.4),
        grid=[{"lr": 0.01}, {"lr": 0.05}, {"lr": 0.2, "clip": 0.5}],
        steps=3,
        noise_multiplier=0.8,
        execution=Execution(device="cpu", max_batch_runs=4),
    )
    member = np.array([0, 1, 1, 0, 1, 0, 0, 1], np.int8)
    obs = proto.release(member, np.random.default_rng(5))
    k, config, seeds = proto.plan(len(member), np.random.default_rng(5))
    trial = np.repeat(np.arange(len(member)), k)
    cfg = [proto.configs[c] for c in config]
    res = train_runs(
        LOGREG,
        TRAIN_SMALL,
        seeds=seeds,
        canary=dpsgd_canaries.dirac(),
        include_canary=member[trial] == 1,
        execution=Execution(device="cpu"),
        settings=TrainSettings(
            steps=3,
            lr=[c["lr"] for c in cfg],
            clip=[c["clip"] for c in cfg],
            noise_multiplier=0.8,
            sample_rate=1.0,
        ),
    )
    assert isinstance(proto.score, ValidationLoss)
    g = evaluate_score(proto.score, LOGREG, res.w0, res.wN).numpy()
    for t in range(len(member)):
        runs = np.flatnonzero(trial == t)
        best = runs[np.argmax(g[runs])]
        assert obs["score"][t] == pytest.approx(g[best], rel=1e-5)
        assert obs["config"][t] == config[best]
        assert obs["lr"][t] == cfg[best]["lr"] and obs["clip"][t] == cfg[best]["clip"]
        np.testing.assert_allclose(obs["wN"][t], res.wN[best].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(obs["canary_dots"][t], res.canary_dots[best].numpy(), rtol=1e-5)


def test_release_is_deterministic_given_rng_and_has_one_row_per_trial():
    proto = threats.tuning_game(
        "ntcv",
        dpsgd_canaries.out_of_distribution(TRAIN, "inverted"),
        model=LOGREG,
        train=TRAIN_SMALL,
        validation=VAL_SMALL,
        rounds=TruncatedNegativeBinomial(0, 0.2),
        grid=[{"lr": 0.05}],
        steps=4,
        noise_multiplier=1.0,
        sample_rate=0.5,
        execution=Execution(device="cpu"),
    )
    member = np.array([1, 0, 1, 1, 0], np.int8)
    a = proto.release(member, np.random.default_rng(9))
    b = proto.release(member, np.random.default_rng(9))
    for key in a:
        assert len(a[key]) == len(member)
        np.testing.assert_array_equal(a[key], b[key])
    assert "member" not in a and "k" not in a
    assert isinstance(proto.score, CanaryLoss)


def test_zero_rounds_release_the_fixed_output():
    from auditsel.rounds import Poisson

    proto = etcv_dirac(Poisson(0.5), 2, 1.0)
    member = np.ones(400, np.int8)
    obs = proto.release(member, np.random.default_rng(1))
    empty = ~obs["released"]
    assert 0 < empty.sum() < 400
    assert np.all(make_dpsgd_proxy("lambda_a")(obs)[empty] == -np.inf)
    assert np.all(np.isfinite(make_dpsgd_proxy("lambda_a")(obs)[~empty]))


def test_threat_models_pick_training_set_and_score():
    z = dpsgd_canaries.dirac()
    assert isinstance(threats.ETCV.score(z), FirstCoordinateShift)
    assert len(threats.ETCV.training_set(TRAIN)) == 0
    assert len(threats.NTCV.training_set(TRAIN)) == len(TRAIN)
    assert isinstance(threats.NTNV.score(z, VAL), ValidationLoss)


@pytest.mark.parametrize(
    "field,kwargs",
    [
        ("game.learning_rates", dict(grid=[])),
        ("game.clip", dict(clip=0.0)),
        ("base.noise_multiplier", dict(noise_multiplier=-1.0)),
        ("base.sample_rate", dict(sample_rate=0.0)),
        ("base.sample_rate", dict(sample_rate=1.01)),
        ("game.grid", dict(grid=[{"momentum": 0.9}])),
    ],
)
def test_bad_protocol_settings_raise_value_error(field, kwargs):
    settings = dict(
        model=LOGREG,
        train=TRAIN_SMALL,
        score=FirstCoordinateShift(),
        canary=dpsgd_canaries.dirac(),
        rounds=Point(1),
        grid=[{"lr": 0.1}],
        steps=2,
        noise_multiplier=1.0,
    )
    settings.update(kwargs)
    run = {k: settings.pop(k) for k in list(settings) if k in RunSettings.__dataclass_fields__}
    with pytest.raises(ValueError, match=rf"^{field}: "):
        DpsgdTuningProtocol(**settings, settings=RunSettings(**run))


def test_unknown_threat_is_a_value_error():
    with pytest.raises(ValueError, match=r"^game.threat: must be one of ntnv, ntcv, etcv"):
        threats.get_threat("xyz")


def _audit(scores, member):
    from auditsel.auditing.lower import audit_scores

    return audit_scores(scores, member, delta=1e-5, confidence=0.95, rule="split")


@pytest.mark.slow
def test_etcv_dirac_audit_approaches_but_does_not_exceed_the_gaussian_epsilon():
    """k = 1: eps_L of lambda_a (split rule, 95%) stays below eps of mu = sqrt(N)/sigma and
    is as large as the audit of the reduced game N(0,1) vs N(mu,1) with as many trials."""
    from auditsel.mechanisms import gaussian_epsilon

    sigma, N, T = 2.0, 16, 20000
    mu = np.sqrt(N) / sigma
    member = np.random.default_rng(0).integers(0, 2, T).astype(np.int8)
    lam = make_dpsgd_proxy("lambda_a")(
        etcv_dirac(Point(1), N, sigma).release(member, np.random.default_rng(1))
    )
    eps_l = _audit(lam, member).eps
    assert eps_l <= gaussian_epsilon(mu, 1e-5)
    reduced = [
        _audit(member * mu + np.random.default_rng(s).normal(size=T), member).eps
        for s in range(2, 8)
    ]
    _within_spread(eps_l, reduced)


def _within_spread(eps, replicates, slack=0.25):
    """eps lies in the range of audits of the reduced game (same T, other seeds), +- slack: the
    split-rule eps_L at T = 2e4 varies by about +-0.7 between seeds at eps ~ 4."""
    assert min(replicates) - slack <= eps <= max(replicates) + slack, (eps, replicates)


@pytest.mark.slow
def test_etcv_dirac_tuning_audit_is_comparable_to_the_reduced_tuning_game():
    """TNB xi, one learning rate: the DP-SGD audit matches the reduced game of Figure 5."""
    from auditsel.mechanisms import GaussianBase
    from auditsel.selection import GaussianWinner

    sigma, N, T = 2.0, 16, 20000
    law = TruncatedNegativeBinomial(0.0, 0.05)
    member = np.random.default_rng(0).integers(0, 2, T).astype(np.int8)
    lam = make_dpsgd_proxy("lambda_a")(
        etcv_dirac(law, N, sigma).release(member, np.random.default_rng(1))
    )
    winner = GaussianWinner(GaussianBase(np.sqrt(N) / sigma), law)
    reduced = [
        _audit(winner.release(member, np.random.default_rng(s)), member).eps for s in range(2, 8)
    ]
    _within_spread(_audit(lam, member).eps, reduced)
