"""The two-sided layered bound (`accounting.two_sided`, issue 37 item 4): the layered profile
bound with each direction's own profile and the pair's own region. Never below the truth
(brute force over every order and two-piece split of finite pairs, the attack on DP-SGD), never
above the layered bound it refines (its region and Psi are pointwise smaller)."""

import numpy as np
import pytest
from brute_force import LAWS, PAIRS, brute_force_truth

from auditsel import (
    DpsgdBase,
    FiniteOutputBase,
    GaussianBase,
    Point,
    Poisson,
    TruncatedNegativeBinomial,
    TwoPoint,
)
from auditsel.accounting.attack import attack_epsilon
from auditsel.accounting.profile import layered_epsilon
from auditsel.accounting.registry import BOUND_KEYS, opt_in_bound
from auditsel.accounting.two_sided import two_sided_epsilon

#: the soundness pairs, and one far from symmetric (its two directions differ most)
SKEWED = FiniteOutputBase((0.97, 0.02, 0.01), (0.5, 0.3, 0.2))


@pytest.mark.parametrize(
    "law",
    [pytest.param(law, marks=pytest.mark.slow) if isinstance(law, Point) else law for law in LAWS],
    ids=repr,
)
def test_never_below_the_brute_force_truth(law):
    deltas = (1e-2, 1e-6)
    # each law on two of the four pairs, the halves in turn (every law and every pair checked;
    # all four for each law: 1.5 CPU s more)
    half = LAWS.index(law) % 2
    for pair in [*PAIRS, SKEWED][half::2]:
        values = two_sided_epsilon(pair, law, list(deltas))  # one curve, both deltas read off it
        for delta, value in zip(deltas, values.tolist()):
            assert value >= brute_force_truth(pair, law, delta) - 1e-9, (pair, delta, value)


@pytest.mark.parametrize(
    "pair,law,delta",
    [
        (SKEWED, Poisson(10.0), 1e-5),
        (SKEWED, TruncatedNegativeBinomial(1.0, 0.1), 1e-5),
        (DpsgdBase(noise_multiplier=0.8, steps=3, sample_rate=0.2), TwoPoint(10, 0.5), 1e-5),
        (DpsgdBase(noise_multiplier=1.0, steps=100, sample_rate=0.05), Poisson(10.0), 1e-5),
    ],
    ids=["skewed-poisson", "skewed-tnb", "dpsgd-N3", "dpsgd-N100"],
)
def test_between_the_attack_and_the_layered_bound(pair, law, delta):
    """Above the attack value; at most the layered bound (one max profile for both directions
    and the region it cuts), to the bisection's 1e-6."""
    value = float(two_sided_epsilon(pair, law, delta)[0])
    assert value >= attack_epsilon(pair, law, delta) - 1e-9
    assert value <= float(layered_epsilon(pair, law, delta)[0]) * (1 + 1e-5) + 1e-6


def test_the_directions_matter_on_dpsgd():
    """sigma 0.8, 3 steps, rate 0.2, two-point(10, 0.5): the add direction's profile is far
    below the remove one's, and the bound gains more than 5% of the layered bound."""
    pair, law = DpsgdBase(noise_multiplier=0.8, steps=3, sample_rate=0.2), TwoPoint(10, 0.5)
    value = float(two_sided_epsilon(pair, law, 1e-5)[0])
    assert value < 0.95 * float(layered_epsilon(pair, law, 1e-5)[0])


def test_registered_opt_in():
    bound = opt_in_bound("two_sided")
    assert "two_sided" not in BOUND_KEYS
    assert bound.supports(SKEWED, Poisson(3.0))
    assert bound.supports(DpsgdBase(noise_multiplier=1.0, steps=10, sample_rate=0.1), Poisson(3.0))
    assert not bound.supports(GaussianBase(1.0), Poisson(3.0))
    assert np.isinf(bound.epsilon(SKEWED, Poisson(3.0), 0.0))
