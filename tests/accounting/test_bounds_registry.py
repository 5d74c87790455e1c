"""The bounds registry: one computation per bound gives the same curve as asking delta by
delta; the pairs answer what the bounds ask; one behaviour for a bad delta everywhere."""

import math

import numpy as np
import pytest

from auditsel.accounting.generic import generic_epsilon
from auditsel.accounting.improved import improved_epsilon
from auditsel.accounting.panel import Panel, panel
from auditsel.accounting.profile import profile_epsilon
from auditsel.accounting.rdp import ORDERS, rdp_to_epsilon
from auditsel.accounting.registry import BOUND_KEYS, BOUNDS, bound
from auditsel.errors import ConfigError
from auditsel.mechanisms import DpsgdBase, FiniteOutputBase, GaussianBase, Neighbouring
from auditsel.rounds import Poisson, TruncatedNegativeBinomial, TwoPoint

DELTAS = [1e-8, 1e-5, 1e-3]


@pytest.mark.parametrize(
    "pair, law",
    [
        (GaussianBase(0.7), TruncatedNegativeBinomial(1.0, 0.05)),
        # reason: a second Gaussian pair (1.2 CPU s); a Gaussian and a finite pair by default
        pytest.param(GaussianBase(0.4), Poisson(5.0), marks=pytest.mark.slow),
        (FiniteOutputBase.example1(), TruncatedNegativeBinomial(1.0, 1e-3)),
        # reason: 4 CPU s (K up to 20)
        pytest.param(GaussianBase(0.5), TwoPoint(20, 0.1), marks=pytest.mark.slow),
    ],
)
def test_curves_equal_the_panel_asked_delta_by_delta(pair, law):
    whole = panel(pair, law, 1e-5, curve_deltas=DELTAS)
    for i, d in enumerate(DELTAS):
        single = panel(pair, law, d).upper
        for key in BOUND_KEYS:
            a, b = whole.curves[key][i], single[key]
            assert (a is None and b is None) or a == pytest.approx(b, rel=1e-12, abs=1e-12), (
                key,
                d,
            )


def test_registry_order_keys_and_support():
    assert BOUND_KEYS == ("generic_rdp", "profile", "improved_rdp", "improved_rdp_gdp", "exact")
    g, dp = GaussianBase(1.0), DpsgdBase(1.0, 10, 0.5)
    law = TruncatedNegativeBinomial(0.0, 0.1)
    assert not bound("improved_rdp_gdp").supports(g, law) and bound("improved_rdp_gdp").supports(
        dp, law
    )
    assert {b.rigour(dp) for b in BOUNDS if b.key in ("improved_rdp", "exact")} == {"heuristic"}
    # for a Gaussian base the reduced game's values are exact, under a monotone score only
    assert {b.rigour(g) for b in BOUNDS if b.key in ("generic_rdp", "profile")} == {"rigorous"}
    assert {b.rigour(g) for b in BOUNDS if b.key in ("improved_rdp", "exact")} == {"monotone_score"}
    assert [b.key for b in BOUNDS] == list(BOUND_KEYS)
    with pytest.raises(ConfigError, match="^bound: must be one of generic_rdp"):
        bound("nope")


def test_pairs_state_their_neighbouring_relation_and_reduction():
    assert GaussianBase(1.0).neighbouring is Neighbouring.SHIFT
    assert FiniteOutputBase.example1().neighbouring is Neighbouring.GIVEN_LAWS
    dp = DpsgdBase(2.0, 100, 0.1)
    assert dp.neighbouring is Neighbouring.ADD_REMOVE
    assert dp.reduced() == GaussianBase(dp.mu) and not dp.reduction_is_exact
    assert DpsgdBase(2.0, 100, 1.0).reduction_is_exact


def test_dpsgd_profile_equals_dp_accountings_query():
    """The binary-search profile against dp_accounting's own (Python-loop) query."""
    dp = DpsgdBase(1.5, 200, 0.05)
    eps = np.sort(np.concatenate([np.linspace(0.0, 6.0, 25), [1e-3, np.inf]]))
    ours = dp.delta(eps)
    theirs = np.maximum(np.asarray(dp.pld().get_delta_for_epsilon(eps), dtype=float), 0.0)
    assert np.allclose(ours, theirs, rtol=1e-9, atol=1e-15)
    shuffled = np.random.default_rng(0).permutation(eps)  # any order, any shape
    assert np.array_equal(dp.delta(shuffled), ours[np.searchsorted(eps, shuffled)])
    assert dp.delta(0.5) == pytest.approx(float(dp.delta(np.array([0.5]))[0]))


@pytest.mark.parametrize(
    "call",
    [
        lambda d: rdp_to_epsilon(ORDERS, ORDERS * 0.1, d),
        lambda d: generic_epsilon(ORDERS, ORDERS * 0.1, TruncatedNegativeBinomial(0.0, 0.1), d),
        lambda d: profile_epsilon(GaussianBase(0.5), Poisson(3.0), d),
        lambda d: improved_epsilon(0.5, Poisson(3.0), d),
        lambda d: panel(GaussianBase(0.5), Poisson(3.0), d),
    ],
)
def test_one_behaviour_for_a_bad_delta_and_for_delta_zero(call):
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ConfigError, match="^delta: must be in \\[0, 1\\)"):
            call(bad)
    zero = call(0.0)
    if isinstance(zero, Panel):  # the panel: no RDP or profile bound certifies delta = 0
        assert zero.upper["generic_rdp"] is None and zero.upper["profile"] is None
    else:
        assert zero == math.inf
    many = call(np.array([1e-6, 1e-3]))
    if not isinstance(many, Panel):
        assert isinstance(many, np.ndarray) and many.shape == (2,) and many[0] > many[1]
        assert isinstance(call(1e-6), float) and call(1e-6) == many[0]


@pytest.mark.parametrize("pair", [FiniteOutputBase.example1(), DpsgdBase(2.0, 50, 0.5)])
def test_region_envelope_equals_the_brute_force_min_over_the_grid(pair):
    """The post-processing region from line envelopes against n evaluations per point; where
    they differ by rounding, the envelope is on the safe side (a larger region)."""
    from auditsel.accounting.profile import base_profile, region_grid

    prof = base_profile(pair)
    w, q = region_grid()
    e, d = prof.eps_grid[None, :], np.asarray(prof.delta(prof.eps_grid), dtype=float)[None, :]
    w_max = np.minimum(np.exp(e) * w[:, None] + d, 1.0 - np.exp(-e) * (q[:, None] - d)).min(axis=1)
    q_min = np.maximum((q[:, None] - d) * np.exp(-e), 1.0 - d - np.exp(e) * w[:, None]).max(axis=1)
    brute_w = np.maximum(np.clip(w_max, 0, 1), w)
    brute_q = np.minimum(np.clip(q_min, 0, 1), q)
    ours_w, ours_q = prof.region(w, q)
    assert np.allclose(ours_w, brute_w, rtol=0, atol=1e-15) and np.all(ours_w >= brute_w)
    assert np.allclose(ours_q, brute_q, rtol=0, atol=1e-15) and np.all(ours_q <= brute_q)
