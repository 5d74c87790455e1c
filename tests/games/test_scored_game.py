"""The reduced and worst-case DP-SGD games under any tuning score (issue 25 item 3).

Checked against independent implementations: the release against brute force (all K runs
drawn, the best key picked), the winner's LLR against the sum over k of k P[K = k] H^(k-1)
with H from scipy.stats, the bucket pmf against Monte Carlo counts (chi-square), the winner's
tail T_b(x) against its exact law (KS), the farthest score's value against the issue's
independent computation, and every game's eps against a rigorous bound."""

import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from auditsel.accounting.exact import exact_epsilon
from auditsel.accounting.interval import tuning_epsilon
from auditsel.accounting.registry import bound
from auditsel.auditing.lower import epsilon_from_rates
from auditsel.errors import ConfigError
from auditsel.experiments.config import parse_config
from auditsel.experiments.experiment import fingerprint, run_experiment
from auditsel.games.worst_case import DpsgdWorstCase
from auditsel.mechanisms import GaussianBase
from auditsel.rounds import FinitePmf, Poisson, TruncatedNegativeBinomial
from auditsel.selection import (
    BucketScore,
    FarthestScore,
    GaussianWinner,
    MonotoneScore,
    ScoredGaussianWinner,
    farthest_radius,
    winner_law,
)


@lru_cache
def generic_rdp_epsilon(base, law, delta):
    """[PS22]'s generic bound (rigorous for any score)."""
    return float(bound("generic_rdp").curve(base, law, np.array([delta]))[0])


# False-failure rates: every statistical check below runs on a fixed seed (deterministic); on a
# fresh seed each p-value threshold 1e-4 fails a correct implementation with probability 1e-4.
P_MIN = 1e-4

EXTREMES = BucketScore(edges=(-2.0, 0.5, 2.0), ranks=(3, 0, 1, 2), unit="label", shape="extremes")
MIDDLE = BucketScore(edges=(-1.0, 0.0, 1.5), ranks=(0, 2, 3, 1), unit="output", shape="middle")
SCORES = [FarthestScore(-1.0), EXTREMES, MIDDLE, MonotoneScore("smallest")]
SCORE_IDS = ["farthest", "extremes", "middle", "smallest"]


def _key(score, x, mu):
    """An independent key: (score, value) as one float pair, for brute-force selection."""
    if isinstance(score, BucketScore):
        v = mu * x - mu**2 / 2 if score.unit == "label" else x
        rank = np.asarray(score.ranks, float)[np.searchsorted(score.edges, v, side="left")]
        return rank, x
    if isinstance(score, FarthestScore):
        return np.abs(x - score.center), x
    return (x if score.direction == "largest" else -x), x


def _brute_force(score, mu, law, member, n, rng):
    """The winner of K runs, every run drawn (K >= 1 only): the trials of each K as one
    (trials, K) matrix, each row's best (score, value) pair by lexsort along the row."""
    ks = law.sample(n, rng)
    out = []
    for k in np.unique(ks[ks > 0]):
        x = rng.standard_normal((int((ks == k).sum()), int(k))) + member * mu
        s, v = _key(score, x, mu)
        best = np.lexsort((v, s), axis=-1)[:, -1]
        out.append(x[np.arange(len(x)), best])
    return np.concatenate(out)


def test_farthest_radius_inverts_the_tail_down_to_1e_300():
    w = np.array([1e-300, 1e-100, 1e-30, 1e-8, 1e-3, 0.3, 0.9, 1 - 1e-9])
    for c in (0.0, 1.3, -2.8, 10.0):
        r = farthest_radius(w, c)
        log_p = np.logaddexp(stats.norm.logsf(r + c), stats.norm.logsf(r - c))
        assert np.max(np.abs(log_p - np.log(w))) < 1e-9


def test_monotone_largest_is_todays_game_bit_for_bit():
    base, law = GaussianBase(1.3), TruncatedNegativeBinomial(1.0, 0.05)
    member = np.random.default_rng(0).integers(0, 2, 5000)
    today = GaussianWinner(base, law).release(member, np.random.default_rng(7))
    scored = ScoredGaussianWinner(base, law, MonotoneScore()).release(
        member, np.random.default_rng(7)
    )
    np.testing.assert_array_equal(today, scored)


@pytest.mark.parametrize("score", SCORES, ids=SCORE_IDS)
def test_release_matches_brute_force_selection(score):
    mu, law = 1.0, Poisson(4)
    game = ScoredGaussianWinner(GaussianBase(mu), law, score)
    rng = np.random.default_rng(3)
    for member in (0, 1):
        fast = game.release(np.full(20_000, member), rng)
        slow = _brute_force(score, mu, law, member, 6000, rng)
        assert stats.ks_2samp(fast[np.isfinite(fast)], slow).pvalue > P_MIN
    # power: the farthest game of another center is rejected
    if isinstance(score, FarthestScore):
        other = ScoredGaussianWinner(GaussianBase(mu), law, FarthestScore(0.5))
        x = other.release(np.zeros(20_000, int), rng)
        slow = _brute_force(score, mu, law, 0, 6000, rng)
        assert stats.ks_2samp(x[np.isfinite(x)], slow).pvalue < 1e-6


@pytest.mark.parametrize("score", SCORES, ids=SCORE_IDS)
def test_winner_tail_has_its_exact_law(score):
    """T_b(winner) = 1 - max of K uniforms: P[T > w | K >= 1] = (G(1 - w) - G(0)) / (1 - G(0))."""
    law = Poisson(10)
    game = ScoredGaussianWinner(GaussianBase(1.0), law, score)
    rng = np.random.default_rng(5)
    for member in (0, 1):
        x = game.release(np.full(100_000, member), rng)
        _, tail = game.key_laws(x[np.isfinite(x)], member)
        cdf = lambda w: 1 - (law.pgf(1 - w) - law.p_zero) / (1 - law.p_zero)
        assert stats.kstest(tail, cdf).pvalue > P_MIN


def _independent_llr(score, mu, pmf, x):
    """log sum_k k p_k H_1^(k-1) phi(x - mu) / sum_k k p_k H_0^(k-1) phi(x), with H from
    scipy.stats by direct integration of the key's one-run law."""
    out = []
    for b in (0, 1):
        d = stats.norm(b * mu, 1)
        if isinstance(score, FarthestScore):
            r = abs(x - score.center)
            h = d.cdf(score.center + r) - d.cdf(score.center - r)
        else:
            v = mu * x - mu**2 / 2 if score.unit == "label" else x
            edges = np.asarray(score.edges, float)
            if score.unit == "label":
                edges = (edges + mu**2 / 2) / mu
            i = np.searchsorted(score.edges, v, side="left")
            lo = np.concatenate([[-np.inf], edges])
            hi = np.concatenate([edges, [np.inf]])
            mass = d.cdf(hi) - d.cdf(lo)
            rank = np.asarray(score.ranks, float)
            below = sum(mass[j] for j in range(len(rank)) if (rank[j], j) < (rank[i], i))
            h = below + d.cdf(x) - d.cdf(lo[i])
        g = sum(k * p * h ** (k - 1) for k, p in pmf.items())
        out.append(math.log(g) + d.logpdf(x))
    return out[1] - out[0]


@pytest.mark.parametrize("score", SCORES[:3], ids=["farthest", "extremes", "middle"])
def test_llr_against_an_independent_sum(score):
    pmf = {1: 0.2, 2: 0.3, 5: 0.5}
    game = ScoredGaussianWinner(GaussianBase(0.8), FinitePmf(pmf), score)
    xs = np.array([-3.1, -1.7, -0.4, 0.3, 1.1, 2.6, 4.2])
    ours = game.log_likelihood_ratio(xs)
    for x, value in zip(xs, ours):
        assert value == pytest.approx(_independent_llr(score, 0.8, pmf, x), abs=1e-9)


def test_bucket_counts_follow_the_exact_pmf():
    """Monte Carlo of a bucket score against its sampling-free law: chi-square per member."""
    law = Poisson(10)
    game = ScoredGaussianWinner(GaussianBase(1.0), law, EXTREMES)
    rng = np.random.default_rng(11)
    n = 400_000
    for member in (0, 1):
        x = game.release(np.full(n, member), rng)
        fin = np.isfinite(x)
        counts = np.bincount(EXTREMES.bucket(game.label(x[fin])), minlength=len(EXTREMES.ranks))
        expected = game.bucket_pmf(member) * n
        assert counts.sum() + (~fin).sum() == n
        assert stats.chisquare(counts, expected * counts.sum() / expected.sum()).pvalue > P_MIN
        # power: the monotone game's bucket law is rejected
        mono = ScoredGaussianWinner(GaussianBase(1.0), law, MonotoneScore())
        y = mono.release(np.full(n, member), rng)
        wrong = np.bincount(EXTREMES.bucket(game.label(y[np.isfinite(y)])), minlength=4)
        assert stats.chisquare(wrong, expected * wrong.sum() / expected.sum()).pvalue < 1e-6


def test_farthest_value_matches_the_issue_and_stays_below_a_rigorous_bound():
    """[issue 25]: the run farthest from -1.8 wins, mu = 1, Poisson(10), delta 1e-5: 8.03 (an
    independent quadrature and dynamic program); [PS22]'s generic bound 8.46 is above."""
    game = ScoredGaussianWinner(GaussianBase(1.0), Poisson(10), FarthestScore(-1.8))
    fp, fn = game.tradeoff()
    eps = float(np.max(epsilon_from_rates(fp, fn, 1e-5)))
    assert eps == pytest.approx(8.03, abs=0.03)
    assert eps < generic_rdp_epsilon(GaussianBase(1.0), Poisson(10), 1e-5)


@pytest.mark.parametrize("center", [1e17, -1e17, 1e8])
def test_a_far_center_plays_the_score_it_names(center):
    """[issue 37]: the run farthest from c = +-1e17 is, in real arithmetic, the run with the
    smallest (c > 0) or largest (c < 0) output (the far side holds below sf(1e17)); c - r and
    c + r cancelled to multiples of 16 before, and the game's eps_L passed the generic bound.
    Its release, its statistic and its curve are the monotone game's."""
    base, law = GaussianBase(1.0), Poisson(10)
    far = ScoredGaussianWinner(base, law, FarthestScore(center))
    near = ScoredGaussianWinner(base, law, MonotoneScore("smallest" if center > 0 else "largest"))
    w = np.array([1e-300, 1e-30, 1e-6, 0.01, 0.3, 0.7, 0.99, 1 - 1e-12])
    side = np.full(len(w), 0.5)
    for member in (0, 1):
        np.testing.assert_allclose(
            far.invert_tail(w, member, side), near.invert_tail(w, member), rtol=1e-9, atol=1e-9
        )
        x = near.invert_tail(w[1:-1], member)
        for got, want in zip(far.key_laws(x, member), near.key_laws(x, member)):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)
    x = np.linspace(-6.0, 7.0, 27)
    np.testing.assert_allclose(far.statistic(x), near.statistic(x), rtol=1e-9, atol=1e-9)
    eps = float(np.max(epsilon_from_rates(*far.tradeoff(20_000), 1e-5)))
    assert eps == pytest.approx(float(np.max(epsilon_from_rates(*near.tradeoff(20_000), 1e-5))))
    assert eps <= generic_rdp_epsilon(base, law, 1e-5)


@pytest.mark.slow  # reason: a 2e5-game run (about 3 CPU s)
def test_the_far_center_game_certifies_no_more_than_the_upper_end():
    """[issue 37]: `game.score: {kind: farthest, center: 1.0e17}` (mu 1, Poisson(10)) certified
    eps_L 11.12 (1e6 games; 9.5 at 2e5) above the tuning run's upper end 8.46."""
    cfg = {**CONFIG, "delta": 1e-5, "game": {**CONFIG["game"], "trials": 200_000}}
    cfg["game"]["score"] = {"kind": "farthest", "center": 1.0e17}
    result, _ = run_experiment(parse_config(cfg), progress=False)
    upper = tuning_epsilon(GaussianBase(1.0), Poisson(10), 1e-5).epsilon
    assert 0 < result["lower"]["eps"] <= upper


@pytest.mark.parametrize("score", [EXTREMES, MIDDLE, FarthestScore(-1.0), FarthestScore(0.3)])
@pytest.mark.parametrize("delta", [1e-2, 1e-5])
def test_every_scored_game_stays_below_the_generic_bound(score, delta):
    for mu, law in [(1.0, Poisson(10)), (0.6, TruncatedNegativeBinomial(1.0, 0.1))]:
        game = ScoredGaussianWinner(GaussianBase(mu), law, score)
        fp, fn = game.tradeoff(20_000)
        eps = float(np.max(epsilon_from_rates(fp, fn, delta)))
        assert eps <= generic_rdp_epsilon(GaussianBase(mu), law, delta) + 1e-9


def test_bucket_tradeoff_is_exact_and_monotone():
    game = ScoredGaussianWinner(GaussianBase(1.0), Poisson(10), EXTREMES)
    fp, fn = game.tradeoff()
    assert fp[0] == 0 and fn[-1] == 0
    assert np.all(np.diff(fp) >= 0) and np.all(np.diff(fn) <= 0)
    assert fp[-1] == pytest.approx(1.0, abs=1e-12) and fn[0] == pytest.approx(1.0, abs=1e-12)


# --- the worst-case DP-SGD game under a bucket score ---------------------------------------


def test_dpsgd_bucket_winners_match_a_loop():
    score = BucketScore(
        edges=(-1.0, 0.0, 1.0), ranks=(2, 0, 1, 3), unit="label", guess=(0.5, -1.0, 0.1, 2.0)
    )
    game = DpsgdWorstCase(1.0, 3, 0.3, Poisson(3), score=score)
    rng = np.random.default_rng(2)
    counts = np.array([1, 3, 2, 5, 1, 4])
    labels = rng.normal(0, 1.5, counts.sum())
    got = game._winners(labels, counts)
    start = 0
    for n, value in zip(counts, got):
        runs = labels[start : start + n]
        rank = np.asarray(score.ranks)[score.bucket(runs)]
        assert value == runs[np.lexsort((runs, rank))[-1]]
        start += n
    assert np.array_equal(game.statistic(np.array([-np.inf, -2.0, 0.5, 3.0])), [0, 0.5, 0.1, 2.0])


def test_dpsgd_monotone_default_is_todays_game():
    a = DpsgdWorstCase(1.0, 4, 0.2, Poisson(3))
    b = DpsgdWorstCase(1.0, 4, 0.2, Poisson(3), score=MonotoneScore("largest", "label"))
    member = np.random.default_rng(0).integers(0, 2, 3000)
    np.testing.assert_array_equal(
        a.release(member, np.random.default_rng(4)), b.release(member, np.random.default_rng(4))
    )


# --- config and runs ------------------------------------------------------------------------

CONFIG = {
    "name": "scored",
    "delta": 1e-2,
    "base": {"kind": "gaussian", "mu": 1.0},
    "rounds": {"kind": "poisson", "mean": 10},
    "game": {"trials": 20_000, "score": {"kind": "farthest", "center": -1.0}},
}


def _with_game(**game):
    return {**CONFIG, "game": {**CONFIG["game"], **game}}


@pytest.mark.parametrize(
    "game,field",
    [
        ({"score": "best"}, "game.score"),
        ({"score": {"kind": "farthest", "centre": 1}}, "game.score.centre"),
        ({"score": {"kind": "farthest", "center": "x"}}, "game.score.center"),
        ({"score": {"kind": "farthest", "center": float("nan")}}, "game.score.center"),
        ({"score": {"kind": "farthest"}}, "game.score.center"),
        ({"score": "worst", "one_run": {"canaries": 10}}, "game.score"),
    ],
)
def test_bad_scores_name_their_field(game, field):
    with pytest.raises(ConfigError) as err:
        parse_config(_with_game(**game))
    assert err.value.field == field


def test_games_that_play_only_some_scores_say_so():
    dpsgd = {"kind": "dpsgd", "noise_multiplier": 1.0, "steps": 2, "sample_rate": 0.5}
    cfg = {**CONFIG, "base": dpsgd, "game": {"kind": "dpsgd_worst_case", **CONFIG["game"]}}
    with pytest.raises(ConfigError, match="farthest score needs game.kind: reduced"):
        parse_config(cfg)
    discrete = {"kind": "discrete", "p": [0.5, 0.5], "q": [0.3, 0.7]}
    with pytest.raises(ConfigError, match="monotone score only"):
        parse_config({**CONFIG, "base": discrete, "game": {"kind": "discrete", "score": "worst"}})
    spec = parse_config({**cfg, "game": {"kind": "dpsgd_worst_case", "score": "worst"}})
    assert spec.game.score == "worst" and spec.game.proxy == "score"


def test_a_scored_run_records_its_score_and_fingerprint():
    spec = parse_config(CONFIG)
    assert spec.game.proxy == "score"
    monotone = parse_config(_with_game(score="monotone"))
    assert fingerprint(spec) != fingerprint(monotone)
    # the run without its estimator panel (not read here; its own tests: tests/auditing)
    result, _ = run_experiment(parse_config(_with_game(panel=False)), progress=False)
    low = result["lower"]
    assert low["score"]["kind"] == "FarthestScore" and low["score"]["center"] == -1.0
    fp, fn = ScoredGaussianWinner(GaussianBase(1.0), Poisson(10), FarthestScore(-1.0)).tradeoff()
    # a valid eps_L: below the game's own eps (up to the curve's quadrature)
    assert 0 < low["eps"] <= float(np.max(epsilon_from_rates(fp, fn, 1e-2))) + 1e-3


# --- the winner from one uniform per game (issue 29 item 1) ---------------------------------

LAWS = [
    Poisson(10),
    Poisson(0.7),
    TruncatedNegativeBinomial(0.0, 0.01),
    TruncatedNegativeBinomial(1.0, 0.05),
    TruncatedNegativeBinomial(-0.5, 1e-3),
    TruncatedNegativeBinomial(3.0, 0.2),
    FinitePmf({0: 0.1, 1: 0.5, 3: 0.4}),
]


@pytest.mark.parametrize("law", LAWS, ids=lambda law: f"{law.kind}{sorted(law.params().items())}")
def test_pgf_complement_inverse_inverts_in_log_space(law):
    from auditsel.rounds import RoundsLaw

    top = float(law.pgf_complement(1.0))
    u = top * np.array([1e-300, 1e-100, 1e-20, 1e-8, 1e-3, 0.1, 0.5, 0.9, 1.0])
    w = law.pgf_complement_inverse(u)
    assert np.all((w > 0) & (w <= 1))
    assert np.max(np.abs(law.log_pgf_complement(np.log(w)) - np.log(u))) < 1e-9
    # the closed form equals the generic Newton inverse
    generic = RoundsLaw.pgf_complement_inverse(law, u)
    assert np.max(np.abs(np.log(generic) - np.log(w))) < 1e-9


@pytest.mark.parametrize("law", LAWS, ids=lambda law: f"{law.kind}{sorted(law.params().items())}")
def test_the_one_uniform_winner_has_the_exact_cdf(law):
    """KS of the released winner against G(F(x - s)) (the K = 0 atom at -inf counted apart)."""
    game = GaussianWinner(GaussianBase(1.2), law)
    rng = np.random.default_rng(8)
    n = 100_000
    for member in (0, 1):
        x = game.release(np.full(n, member), rng)
        zero = ~np.isfinite(x)
        assert stats.binomtest(int(zero.sum()), n, law.p_zero).pvalue > P_MIN
        c = lambda t: (game.cdf(t, member) - law.p_zero) / (1 - law.p_zero)
        assert stats.kstest(x[~zero], c).pvalue > P_MIN
    # power: another law of K is rejected
    other = GaussianWinner(GaussianBase(1.2), Poisson(law.mean * 1.3 + 0.5))
    y = other.release(np.zeros(n, int), rng)
    c0 = lambda t: (game.cdf(t, 0) - law.p_zero) / (1 - law.p_zero)
    assert stats.kstest(y[np.isfinite(y)], c0).pvalue < 1e-6


def test_plan_knows_the_score():
    """`plan` plans on the curve of the statistic the adversary thresholds under the score: its
    best test (game_eps) is the game's eps (above the monotone game's exact value here), and
    a target between the two is reachable."""
    from auditsel.experiments.config_plan import plan_spec

    spec = parse_config(CONFIG)
    exact = exact_epsilon(winner_law(GaussianBase(1.0), Poisson(10)), 1e-2)
    plan = plan_spec(spec, exact + 0.1)
    fp, fn = ScoredGaussianWinner(GaussianBase(1.0), Poisson(10), FarthestScore(-1.0)).tradeoff()
    assert plan.curve == "numerical (quadrature)"
    assert plan.game_eps == pytest.approx(float(np.max(epsilon_from_rates(fp, fn, 1e-2))))
    assert plan.game_eps > exact + 1.0
    assert plan.games is not None
    assert plan_spec(spec, exact + 0.3).games > plan.games  # more certainty costs more games
    monotone = plan_spec(parse_config(_with_game(score="monotone")), exact - 0.1)
    assert monotone.game_eps <= exact + 1e-9  # no test of a game beats the game's exact eps


# --- the worst score (the attack's, accounting.attack) --------------------------------------


@lru_cache
def _worst(pair, law, delta):
    from auditsel.games.played_score import resolve_score

    return resolve_score("worst", pair, law, delta)


def _chi_square_p(counts, expected):
    """Chi-square p-value with buckets of expected count < 20 pooled (left to right)."""
    expected = np.asarray(expected, dtype=float) * np.sum(counts) / np.sum(expected)
    groups, acc_c, acc_e = [], 0.0, 0.0
    for c, e in zip(counts, expected):
        acc_c, acc_e = acc_c + c, acc_e + e
        if acc_e >= 20:
            groups.append((acc_c, acc_e))
            acc_c, acc_e = 0.0, 0.0
    if groups and acc_e > 0:
        c, e = groups.pop()
        groups.append((c + acc_c, e + acc_e))
    c, e = np.array(groups).T
    return stats.chisquare(c, e * c.sum() / e.sum()).pvalue


def test_the_worst_score_game_has_the_attack_value_as_its_epsilon():
    """Two computations of one number: the attack's value, and the eps of the best threshold on
    the exact curve of the game that plays the attack's score (this module's bucket pmfs)."""
    from auditsel.accounting.attack import attack

    pair, law, delta = GaussianBase(1.0), Poisson(10), 1e-2
    score = _worst(pair, law, delta)
    assert isinstance(score, BucketScore) and score.guess is not None
    fp, fn = ScoredGaussianWinner(pair, law, score).tradeoff()
    eps = float(np.max(epsilon_from_rates(fp, fn, delta)))
    assert eps == pytest.approx(attack(pair, law, delta).epsilon, abs=1e-4)


def test_worst_score_counts_follow_the_attacks_sampling_free_law():
    """Monte Carlo of the found score against `winner_bucket_laws` (chi-square, buckets of
    expected count < 20 pooled): the reduced game and the DP-SGD game (tau < 1)."""
    from auditsel.accounting.attack import winner_bucket_laws
    from auditsel.mechanisms import DpsgdBase

    rng = np.random.default_rng(21)
    pair, law = GaussianBase(1.0), Poisson(10)
    score = _worst(pair, law, 1e-2)
    game = ScoredGaussianWinner(pair, law, score)
    laws = winner_bucket_laws(pair, law, score)
    for member in (0, 1):
        x = game.release(np.full(200_000, member), rng)
        counts = np.bincount(
            score.bucket(game.label(x[np.isfinite(x)])), minlength=len(score.ranks)
        )
        assert _chi_square_p(counts, laws[member]) > P_MIN
    # power: the monotone game's counts are rejected
    mono = GaussianWinner(pair, law).release(np.zeros(200_000, int), rng)
    counts = np.bincount(
        score.bucket(game.label(mono[np.isfinite(mono)])), minlength=len(score.ranks)
    )
    assert _chi_square_p(counts, laws[0]) < 1e-6
    dpsgd, small = DpsgdBase(1.0, 10, 0.2), Poisson(5)
    score = _worst(dpsgd, small, 1e-2)
    game = DpsgdWorstCase(1.0, 10, 0.2, small, score=score)
    laws = winner_bucket_laws(dpsgd, small, score)
    for member in (0, 1):
        y = game.release(np.full(40_000, member, dtype=np.int8), rng)
        counts = np.bincount(score.bucket(y[np.isfinite(y)]), minlength=len(score.ranks))
        assert _chi_square_p(counts, laws[member]) > P_MIN


def test_a_worst_score_run_certifies_more_than_the_monotone_exact_value():
    """`score: worst` at the games `plan` asks for: a valid eps_L above the exact epsilon of
    [XWW24]'s monotone-score game (mu = 1, Poisson(10), delta 1e-2)."""
    from auditsel.experiments.config_plan import plan_spec

    spec = parse_config({**CONFIG, "game": {"score": "worst", "panel": False}})
    exact = exact_epsilon(winner_law(GaussianBase(1.0), Poisson(10)), 1e-2)
    # a margin of 0.3: at exact + 0.1 the plan's 90% power held for 1 of 3 seeds with the
    # score the attack finds at this delta (issue 37), at + 0.3 seed 0 certifies 4.12
    games = plan_spec(spec, exact + 0.3).games
    assert games is not None and games <= 200_000
    result, _ = run_experiment(spec.with_game(trials=games), progress=False)
    assert result["lower"]["eps"] > exact
    assert result["lower"]["score"]["configured"] == "worst"


# --- the committed runs (issue 25 item 3) ---------------------------------------------------

RESULTS = Path(__file__).resolve().parents[2] / "results"


def _reduced_game_value(result: dict, key: str) -> float | None:
    """A value of [XWW24]'s monotone-score reduced game, wherever result.json keeps it."""
    for section in ("monotone_score", "reduced_game", "upper"):
        value = (result.get(section) or {}).get(key)
        if isinstance(value, dict):
            value = value.get("epsilon")
        if value is not None:
            return float(value)
    return None


@pytest.mark.parametrize(
    "name,key",
    [
        ("any_score_farthest", "exact"),
        ("any_score_gaussian", "exact"),
        ("any_score_dpsgd_full_batch", "improved_rdp"),
        ("any_score_dpsgd_subsampled", "improved_rdp"),
    ],
)
def test_committed_runs_certify_more_than_the_monotone_score_values(name, key):
    """Each committed any-score run: a valid eps_L (split rule) above the monotone-score game's
    value it is committed to exceed, with the games its config asks for; never above the
    rigorous upper end nor, for a bucket score, above the game's own eps (the attack value)."""
    result = json.loads((RESULTS / name / "result.json").read_text())
    low = result["lower"]
    assert low["valid"] and low["threshold_rule"] == "split"
    assert low["eps"] > _reduced_game_value(result, key)
    assert low["score"]["configured"] in ("worst", "farthest")
    if low["score"]["configured"] == "worst":
        assert low["eps"] <= result["attack"]["epsilon"]
    assert low["eps"] <= min(
        v for k, v in result["upper"].items() if k in ("generic_rdp", "profile")
    )


def test_run_config_takes_a_score_object():
    """The Python API: run_config(..., score=BucketScore(...)) plays it, the adversary reading
    its statistic (the winner's bucket LLR when the score carries no guess)."""
    from auditsel.experiments.experiment import run_config

    result = run_config(_with_game(score="monotone", trials=4000, panel=False), score=EXTREMES)
    assert result.lower["proxy"] == "score"
    assert result.lower["score"]["kind"] == "BucketScore"
    assert result.lower["score"]["configured"] == "bucket"
    with pytest.raises(ConfigError) as err:
        run_config(CONFIG, score="best")
    assert err.value.field == "game.score"
