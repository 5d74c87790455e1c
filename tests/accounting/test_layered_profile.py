"""The layered profile bound (issue 37 item 4; docs/explanation/bounds.md): rigorous for any
score, never above [KRW24]'s profile bound, exact for one run.

The truth is bounded from below by brute force over every score order of a finite pair and over
every two-piece split of one output between two ranks (`brute_force.brute_force_truth`,
exact post-processing games), and by the worst-score attack."""

import numpy as np
import pytest
from brute_force import brute_force_truth, random_pairs

from auditsel import (
    Binomial,
    GaussianBase,
    Point,
    Poisson,
    TruncatedNegativeBinomial,
    TwoPoint,
)
from auditsel.accounting.attack import attack_epsilon
from auditsel.accounting.profile import (
    BaseProfile,
    base_profile,
    layered_epsilon,
    profile_epsilon,
)
from auditsel.accounting.registry import bound
from auditsel.accounting.two_sided import two_sided_epsilon
from auditsel.mechanisms import DpsgdBase

LAWS = [
    Poisson(3.0),
    Poisson(10.0),
    TruncatedNegativeBinomial(1.0, 0.2),
    TruncatedNegativeBinomial(0.0, 0.1),
    Binomial(9, 0.846),
    TwoPoint(10, 0.5),
    Point(3),
]


@pytest.mark.parametrize(
    "law",
    # the point law (3.5 CPU s) in the slow tier; the six others by default
    [pytest.param(law, marks=pytest.mark.slow) if law == Point(3) else law for law in LAWS],
    ids=lambda law: law.kind + str(law.mean)[:4],
)
def test_never_below_brute_force_nor_above_krw(law):
    deltas = np.array([1e-2, 1e-5])  # each bound's curve at both deltas (one setup each)
    for pair in random_pairs(2, seed=int(law.mean * 100)):
        layered_curve = layered_epsilon(pair, law, deltas)
        krw_curve = profile_epsilon(pair, law, deltas)
        # the panel's `profile` reads the layered bound per direction for finite pairs
        # (`two_sided`: never above the layered bound), the smaller with [KRW24]'s
        registered_curve = bound("profile").curve(pair, law, deltas)
        sided_curve = two_sided_epsilon(pair, law, deltas)
        for i, delta in enumerate(deltas.tolist()):
            layered, krw = float(layered_curve[i]), float(krw_curve[i])
            registered, sided = float(registered_curve[i]), float(sided_curve[i])
            truth = brute_force_truth(pair, law, delta)
            assert layered >= truth - 1e-9
            # the recipe's cells may sit a little above [KRW24]'s closed-form shift
            assert layered <= krw * (1 + 1e-3) + 1e-6
            assert registered == min(sided, krw)
            assert registered >= truth - 1e-9
            assert registered <= min(layered, krw) + 1e-5


def test_exact_for_one_run():
    """K = 1: G' = 1 has no layers above the first, and the bound is the base's own eps."""
    pair = random_pairs(1, seed=5)[0]
    for delta in (1e-2, 1e-5):
        assert float(layered_epsilon(pair, Point(1), delta)[0]) == pytest.approx(
            brute_force_truth(pair, Point(1), delta), abs=1e-5
        )


@pytest.mark.parametrize(
    "pair,law",
    [
        (GaussianBase(1.0), Poisson(10.0)),
        pytest.param(
            DpsgdBase(0.79, 1100, 0.0013, "pld"),
            Poisson(17.7),
            marks=pytest.mark.slow,  # reason: a DP-SGD attack and PLD (about 6 CPU s)
        ),
    ],
    ids=["gaussian", "dpsgd-low-rate"],
)
def test_narrower_than_krw_and_generic_above_the_attack(pair, law):
    """Where [KRW24]'s uniform m x TV shift is most of its bound the layered bound gains, and
    stays above the attack value (Gaussian mu 1, Poisson(10): [KRW24] 8.72 and [PS22] 8.46
    against the attack's 8.16)."""
    prof = base_profile(pair)
    layered = float(layered_epsilon(pair, law, 1e-5, prof)[0])
    krw = profile_epsilon(pair, law, 1e-5, prof)
    assert layered < krw - 0.1
    assert layered >= attack_epsilon(pair, law, 1e-5)
    registered = float(bound("profile").curve(pair, law, np.array([1e-5]))[0])
    if isinstance(pair, DpsgdBase):  # read per direction (`two_sided`), never above it
        assert attack_epsilon(pair, law, 1e-5) <= registered <= layered + 1e-6
    else:
        assert registered == layered


@pytest.mark.slow  # reason: three PLDs of 6,000 steps, one on a 1e-4 grid (over 2 CPU s)
def test_the_profile_reads_a_finer_pld_where_the_grid_binds():
    """At a low sample rate one step's loss is comparable to the 1e-3 grid: the profile reads
    the PLD on a finer grid too (the smaller of two upper bounds), which stays above the
    optimistic PLD's curve ([DGKKM22] Algorithm 2, a lower bound) and lowers [KRW24]'s bound."""
    from auditsel.accounting.pld import optimistic_pld, subsampled_gaussian_curves
    from auditsel.mechanisms import PLD_DISCRETIZATION, profile_step

    base = DpsgdBase(1.38, 6000, 0.0011, "pld")
    assert profile_step(1.38, 6000, 0.0011) < PLD_DISCRETIZATION
    eps = np.array([0.0, 0.1, 0.3])  # deltas above 1e-7: well above both PLDs' FFT round-off
    fine = np.asarray(base.profile_delta(eps))
    assert np.all(fine <= np.asarray(base.delta(eps)))
    curves = subsampled_gaussian_curves(0.0011, 1.38)
    low = np.max([optimistic_pld(c, 1e-4).compose(6000).delta(eps) for c in curves], axis=0)
    assert np.all(fine >= low * (1 - 1e-9))
    law = Poisson(11.2)
    coarse = BaseProfile(base.delta, base.profile_epsilon, base.profile_grid())
    assert profile_epsilon(base, law, 1e-5) < profile_epsilon(base, law, 1e-5, coarse) - 0.03


def test_a_capped_exact_value_is_no_infinite_lower_end():
    """`exact_epsilon` answers inf above its cap; the attack read that as an infinite lower end,
    which crossed the (finite) layered bound at mu 200, Poisson(10) (issue 37)."""
    from auditsel.accounting.exact import EPS_CAP
    from auditsel.accounting.interval import tuning_interval

    iv = tuning_interval(GaussianBase(200.0), Poisson(10.0), 1e-5)
    assert iv.lower == EPS_CAP < iv.upper < np.inf
