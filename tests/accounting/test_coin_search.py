"""The coin search (`accounting.coin_search`, issue 37: the finite pairs' interval): a lower
bound for the finite base whose runs also release an independent uniform coin.

Checked independently of the search's own code: the certified value of the score it names is
at most that score's exact eps, recomputed from the pmf of K (not its pgf) and the exact
hockey stick of the winner's law; it never beats brute force over every order of the outputs
cut into 256 coin pieces each (a dynamic program over the pieces used, written here, the eps by
bisection) by more than the finer test resolution it reads; it is below every rigorous upper
bound of the registry for every law family; it beats every deterministic order (brute force
over all permutations) on a pair where atoms bind; and the interval says what it bounds."""

import itertools
import math

import numpy as np
import pytest
from brute_force import LAWS, pair_epsilon, random_pairs

from auditsel import FiniteOutputBase, Poisson, TruncatedNegativeBinomial, tuning_interval
from auditsel.accounting.attack import attack, attack_epsilon, with_one_run
from auditsel.accounting.coin_search import (
    COIN_ASSUMPTION,
    CoinScore,
    certify,
    coin_search,
    coin_winner_laws,
)
from auditsel.accounting.registry import BOUNDS, OPT_IN_BOUNDS
from auditsel.accounting.score_search import order_winner_laws

DELTA = 1e-5
#: (pair, law) settings: a binary pair, randomized response at eps 0.5, three random pairs
BINARY = [
    FiniteOutputBase((0.9, 0.1), (0.1, 0.9)),
    FiniteOutputBase((0.7, 0.3), (0.4, 0.6)),
    FiniteOutputBase((0.62245933, 0.37754067), (0.37754067, 0.62245933)),
]
SMALL = random_pairs(24, seed=5, sizes=(3, 7), concentration=0.8)
SEED5_LAWS = (Poisson(10.0), Poisson(3.0), TruncatedNegativeBinomial(1.0, 0.1))


def _exact_eps(p, q, score: CoinScore, law, delta: float) -> float:
    """The exact eps of `score` (float64): the sub-pieces' winner masses
    sum_k P[K = k] (F_i^k - F_i-1^k) from the pmf of K, then the likelihood-ratio test sets."""
    masses = [np.asarray(v, dtype=float) for v in coin_winner_laws(p, q, score, law)]
    k = np.arange(1, 2001)
    pmf = law.pmf(k)
    k, pmf = k[pmf > 1e-30], pmf[pmf > 1e-30]
    laws = []
    for x in masses:
        f = np.cumsum(x)
        fp = np.concatenate([[0.0], f[:-1]])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            # F_i^k - F_{i-1}^k = F_i^k (-expm1(-k log1p(x / F_{i-1}))) where x <= F_{i-1} (no
            # cancellation there); where x > F_{i-1}, F_i >= 2 F_{i-1} and the plain difference
            # loses nothing
            small = (fp > 0) & (x <= fp)
            r = np.where(small, x / np.where(small, fp, 1.0), 0.0)
            log_f = np.log(np.where(small, f, 1.0))
            near = np.exp(k[None, :] * log_f[:, None]) * -np.expm1(
                -k[None, :] * np.log1p(r)[:, None]
            )
            plain = f[:, None] ** k[None, :] - fp[:, None] ** k[None, :]
            diff = np.where(small[:, None], near, plain)
        assert np.all(np.isfinite(diff))
        laws.append(np.sum(diff * pmf[None, :], axis=1))
    return pair_epsilon(laws[0], laws[1], delta)


def _brute_force_delta(p, q, law, eps: float, m: int = 256) -> float:
    """max over every order of a binary pair's outputs cut into m equal coin pieces each (both
    directions) of the winner's hockey stick at eps: a DP over (pieces of output 0 used, pieces
    of output 1 used), V = max(gain + V(next)), gain = [dG(A) - e^eps dG(B)]_+ per piece."""
    i, j = np.meshgrid(np.arange(m + 1), np.arange(m + 1), indexing="ij")
    used = [(i * p[0] + j * p[1]) / m, (i * q[0] + j * q[1]) / m]
    g = [law.pgf(np.minimum(u, 1.0)) for u in used]
    c = math.exp(eps)
    out = 0.0
    for num in (0, 1):
        top, bot = g[num], g[1 - num]
        value = np.zeros((m + 1, m + 1))
        for level in range(2 * m - 1, -1, -1):
            ii = np.arange(max(0, level - m), min(m, level) + 1)
            jj = level - ii
            best = np.full(len(ii), -np.inf)
            for di, dj in ((1, 0), (0, 1)):
                ok = (ii + di <= m) & (jj + dj <= m)
                a, b = ii[ok], jj[ok]
                gain = top[a + di, b + dj] - top[a, b] - c * (bot[a + di, b + dj] - bot[a, b])
                best[ok] = np.maximum(best[ok], np.maximum(gain, 0.0) + value[a + di, b + dj])
            value[ii, jj] = best
        out = max(out, float(value[0, 0]))
    return out


def _best_permutation(pair: FiniteOutputBase, law, delta: float) -> float:
    """Every order of the outputs (no coin), both directions: the finite pair's own truth."""
    p, q = np.asarray(pair.p), np.asarray(pair.q)
    return max(
        pair_epsilon(*order_winner_laws((p, q), order, law), delta)
        for order in itertools.permutations(range(len(p)))
    )


#: the first law of each kind among the coin laws (the default tier's)
FIRST_OF_KIND = [
    law for i, law in enumerate(LAWS[:8]) if law.kind not in {x.kind for x in LAWS[:i]}
]


def _first_of_its_kind(laws: list) -> list:
    """Each law as a param, the second and later of a kind slow (one of each kind by default)."""
    kinds = [law.kind for law in laws]
    return [
        pytest.param(law, marks=pytest.mark.slow) if law.kind in kinds[:i] else law
        for i, law in enumerate(laws)
    ]


@pytest.mark.parametrize(
    # reason: eight laws are 10 CPU s; one of each family by default (poisson, tnb, binomial,
    # two_point), the other four slow
    "law",
    _first_of_its_kind(LAWS[:8]),
    ids=lambda law: law.kind,
)
def test_the_certified_value_is_at_most_the_exact_value_of_its_score(law):
    pairs = (BINARY[0], SMALL[19])
    # by default each law on one of the pairs, in turn (both pairs checked; the coin search
    # finds a value on every law and pair here); the slow laws on both
    if law in FIRST_OF_KIND:
        pairs = pairs[FIRST_OF_KIND.index(law) % 2 :: 2]
    for pair in pairs:
        start = attack(pair, law, DELTA, scores="deterministic").epsilons
        found = coin_search(pair.p, pair.q, law, [DELTA], start)
        if found is None:
            continue
        exact = _exact_eps(pair.p, pair.q, found.score, law, DELTA)
        assert found.epsilons[0] <= exact + 1e-9
        assert found.epsilons[0] >= exact - 1e-4 * max(1.0, exact)  # the enclosure is tight


COIN_LAWS = [Poisson(3.0), Poisson(10.0), TruncatedNegativeBinomial(1.0, 0.1)]


@pytest.mark.parametrize(
    "pair, law",
    # reason: three pairs x three laws are 4 CPU s; by default the diagonal (every pair and
    # every law once), the rest slow
    [
        pytest.param(pair, law, marks=() if i == j else pytest.mark.slow)
        for i, pair in enumerate(BINARY)
        for j, law in enumerate(COIN_LAWS)
    ],
    ids=[f"{name}-law{j}" for name in ("skewed", "mild", "rr0.5") for j in range(3)],
)
def test_never_above_brute_force_over_every_coin_order(pair, law):
    """Brute force over every order of 256 coin pieces per output, eps_bf = the largest eps
    with delta_bf(eps) > delta: the search's value is at most eps_bf (1 + 2e-3) (it reads 512
    sub-pieces of each segment, the brute force 1/256 of an output: measured, at most 0.07%
    above), and at least eps_bf (1 - 2e-2) (the search finds it; measured within 0.01%)."""
    start = attack(pair, law, DELTA, scores="deterministic").epsilons
    found = coin_search(pair.p, pair.q, law, [DELTA], start)
    value = start[0] if found is None else found.epsilons[0]
    p, q = np.asarray(pair.p), np.asarray(pair.q)
    assert _brute_force_delta(p, q, law, value / (1 + 2e-3)) > DELTA  # eps_bf >= that
    assert _brute_force_delta(p, q, law, value / (1 - 2e-2)) <= DELTA  # eps_bf <= that


#: the pairs the bounds are checked on: two binary pairs and the two random pairs where the coin
#: search is the value (SMALL[19]: atoms bind)
UPPER_PAIRS = (*BINARY[:2], SMALL[19], SMALL[23])


@pytest.mark.parametrize(
    "law, pair",
    # reason: every law on every pair is 40 cases (34 CPU s); by default each law on one pair,
    # the pairs in turn (the diagonal: every law and every pair checked), the rest slow
    [
        pytest.param(law, pair, marks=() if j == i % 4 else pytest.mark.slow)
        for i, law in enumerate(LAWS)
        for j, pair in enumerate(UPPER_PAIRS)
    ],
    ids=[f"{law.kind}{i}-pair{j}" for i, law in enumerate(LAWS) for j in range(len(UPPER_PAIRS))],
)
def test_below_every_rigorous_upper_bound_for_every_law(law, pair):
    lower = with_one_run(attack(pair, law, DELTA)).epsilon
    for b in BOUNDS + OPT_IN_BOUNDS:
        if b.key == "score_dual":  # minutes per pair; its soundness tests are its own
            continue
        if b.supports(pair, law) and b.rigour(pair) == "rigorous":
            upper = b.epsilon(pair, law, DELTA)
            assert lower <= upper + 1e-9, (b.key, lower, upper)


def test_beats_every_deterministic_order_where_atoms_bind():
    pair, law = SMALL[19], SEED5_LAWS[19 % 3]  # 3 outputs, Poisson(3)
    deterministic = _best_permutation(pair, law, DELTA)
    assert attack_epsilon(pair, law, DELTA) == pytest.approx(deterministic, abs=1e-6)
    value = with_one_run(attack(pair, law, DELTA))
    assert value.method == "coin_search" and value.coin is not None
    assert value.epsilon > deterministic + 0.3  # 1.5319 -> 1.9377 (upper end 1.9445)
    exact = _exact_eps(pair.p, pair.q, value.coin_score, law, DELTA)
    assert value.epsilon <= exact + 1e-9


def test_the_interval_names_what_the_coin_value_bounds():
    pair, law = SMALL[23], SEED5_LAWS[23 % 3]
    iv = tuning_interval(pair, law, DELTA)
    assert "coin" in iv.lower_source and COIN_ASSUMPTION in iv.lower_source
    assert iv.lower > attack_epsilon(pair, law, DELTA) and iv.lower <= iv.upper
    # the attack value for the finite pair itself is unchanged: the coin is read only by the
    # interval's lower end
    assert (
        attack_epsilon(pair, law, DELTA) == attack(pair, law, DELTA, scores="deterministic").epsilon
    )
    assert "released" in with_one_run(attack(pair, law, DELTA)).describe()


def test_certify_charges_round_off_and_reads_every_delta():
    pair, law = SMALL[2], SEED5_LAWS[2]
    found = coin_search(pair.p, pair.q, law, [DELTA, 1e-3, 0.0], [0.0, 0.0, 0.0])
    assert found is not None and len(found.epsilons) == 3
    again, _ = certify(pair.p, pair.q, found.score, law, [DELTA, 1e-3])
    assert again[0] == found.epsilons[0] and again[1] == found.epsilons[1]
    assert found.epsilons[1] <= found.epsilons[0] <= found.epsilons[2]  # eps falls as delta grows


def test_many_outputs_are_not_searched():
    n = 15
    p = tuple(np.full(n, 1 / n))
    q = tuple(np.linspace(1, 2, n) / np.linspace(1, 2, n).sum())
    assert coin_search(p, q, Poisson(3.0), [DELTA], [0.0]) is None


def test_the_curve_of_a_coin_value_is_its_score_s_curve():
    """`AttackValue.delta` (result.json's attack_curve) reads the coin score's certified curve
    where the value is the coin search's: delta_low(eps) crosses delta at the value."""
    pair, law = SMALL[19], SEED5_LAWS[19 % 3]
    value = with_one_run(attack(pair, law, DELTA))
    assert value.method == "coin_search"
    assert value.delta([value.epsilon * (1 + 1e-6)])[0] <= DELTA
    assert value.delta([value.epsilon * (1 - 1e-3)])[0] > DELTA
    assert attack(pair, law, DELTA).delta([value.epsilon * (1 - 1e-3)])[0] <= DELTA  # no coin
