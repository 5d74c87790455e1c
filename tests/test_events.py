"""Any mechanism as a base (issue 19, item 5): a dp_accounting DpEvent wherever a pair is
accepted; a Laplace base against [PS22] Corollary 3 and dp_accounting's RepeatAndSelectDpEvent."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest

from auditsel.accounting.attack import attack_epsilon
from auditsel.accounting.exact import exact_epsilon
from auditsel.accounting.panel import panel
from auditsel.accounting.pld import laplace_curve
from auditsel.accounting.registry import BOUNDS, bound
from auditsel.errors import ConfigError
from auditsel.events import EventBase, LaplaceBase, as_pair
from auditsel.experiments.config import parse_config
from auditsel.mechanisms import DpsgdBase, GaussianBase
from auditsel.rounds import Poisson, TruncatedNegativeBinomial
from auditsel.selection import winner_law

RepeatAndSelect = dpa.dp_event.RepeatAndSelectDpEvent


def test_as_pair_maps_events_to_the_exact_pair_where_one_is_known():
    assert as_pair(dpa.GaussianDpEvent(2.0)) == GaussianBase(0.5)
    self_composed = as_pair(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(4.0), 4))
    assert self_composed.mu == pytest.approx(0.5)
    composed = as_pair(
        dpa.ComposedDpEvent(
            [dpa.GaussianDpEvent(1.0), dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.0), 4)]
        )
    )
    assert composed.mu == pytest.approx(math.sqrt(2.0))  # 1/1 + 4/4
    dpsgd = as_pair(
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(1.5)), 30)
    )
    assert dpsgd == DpsgdBase(1.5, 30, 0.1, "pld")
    laplace = as_pair(dpa.LaplaceDpEvent(2.0))
    assert isinstance(laplace, EventBase) and laplace.pure_epsilon == 0.5
    pair = GaussianBase(1.0)
    assert as_pair(pair) is pair
    with pytest.raises(ConfigError, match="^base: must be a mechanism pair"):
        as_pair("gaussian")
    with pytest.raises(ConfigError, match="^event: is not private"):
        as_pair(dpa.ComposedDpEvent([dpa.LaplaceDpEvent(1.0), dpa.NonPrivateDpEvent()]))
    with pytest.raises(ConfigError, match="^event: dp_accounting's RDP and PLD"):
        as_pair(dpa.UnsupportedDpEvent())


def test_gaussian_event_gets_the_exact_curve():
    """A Gaussian event is the Gaussian pair: the exact winner curve and every bound apply."""
    law = TruncatedNegativeBinomial(0.0, 0.01)
    event, pair = dpa.GaussianDpEvent(2.0), GaussianBase(0.5)
    from_event, from_pair = panel(event, law, 1e-5), panel(pair, law, 1e-5)
    assert from_event.upper == from_pair.upper
    assert from_event.attack == from_pair.attack and from_event.interval == from_pair.interval
    assert from_event.monotone_score == from_pair.monotone_score  # the reduced game's values
    # the attack plays the worst score found: at least the reduced game's exact (monotone) value
    monotone = exact_epsilon(winner_law(pair, law), 1e-5)
    assert from_event.attack["epsilon"] >= monotone
    assert bound("exact").epsilon(event, law, 1e-5) == exact_epsilon(winner_law(pair, law), 1e-5)


def test_dpsgd_event_has_the_dpsgd_attack_value():
    """N Poisson-sampled Gaussian steps as a DpEvent are the DP-SGD pair: the same attack."""
    law = Poisson(3.0)
    event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(1.0)), 10)
    assert attack_epsilon(event, law, 1e-5) == attack_epsilon(DpsgdBase(1.0, 10, 0.1), law, 1e-5)


def test_laplace_profile_and_rdp_are_dp_accountings_and_bound_the_closed_forms():
    b = 0.8
    base = as_pair(dpa.LaplaceDpEvent(b))
    eps = np.linspace(0.0, 1.2 / b, 200)
    exact = laplace_curve(1 / b).at_eps(eps)  # closed-form hockey stick of the Laplace pair
    ours = base.delta(eps)
    assert np.all(ours >= exact - 1e-12)  # pessimistic PLD, chords: an upper bound
    assert np.max(ours - exact) < 2e-3  # and a close one (discretization 1e-3)
    a = np.array([1.5, 2.0, 8.0, 64.0])
    e0 = 1 / b  # Mironov 2017 Prop. 6, the exact RDP of the Laplace pair
    mironov = e0 + np.log1p((a - 1) * np.expm1(e0 * (1 - 2 * a)) / (2 * a - 1)) / (a - 1)
    assert np.allclose(base.rdp(a), mironov, rtol=1e-10)


@pytest.mark.parametrize("eta, nu", [(0.0, 0.01), (1.0, 0.1), (1.0, 1e-3), (2.0, 0.05)])
@pytest.mark.parametrize("b", [0.5, 1.0, 4.0])
def test_laplace_base_against_ps22_corollary3(b, eta, nu):
    """[PS22] Corollary 3: an eps-DP base tuned with TNB(eta, nu) is ((2 + eta) eps)-DP. The
    generic bound gives exactly that at delta = 0 and never more at any delta; so does the
    tightest rigorous bound."""
    law, eps = TruncatedNegativeBinomial(eta, nu), 1 / b
    base = LaplaceBase(b)
    assert base.pure_epsilon == pytest.approx(eps)
    generic = bound("generic_rdp")
    assert generic.epsilon(base, law, 0.0) == pytest.approx((2 + eta) * eps, rel=1e-12)
    for delta in (1e-10, 1e-5, 1e-2):
        values = [
            b_.epsilon(base, law, delta)
            for b_ in BOUNDS
            if b_.supports(base, law) and b_.rigour(base) == "rigorous"
        ]
        assert generic.epsilon(base, law, delta) <= (2 + eta) * eps + 1e-12
        assert min(values) <= (2 + eta) * eps + 1e-12


@pytest.mark.parametrize(
    "law, shape",
    [
        (TruncatedNegativeBinomial(1.0, 0.1), 1.0),
        (TruncatedNegativeBinomial(0.0, 0.01), 0.0),
        (TruncatedNegativeBinomial(3.0, 0.02), 3.0),
        (Poisson(4.0), math.inf),
        (Poisson(40.0), math.inf),
    ],
)
@pytest.mark.parametrize("b", [0.3, 1.0, 3.0])
def test_laplace_base_never_looser_than_dp_accountings_repeat_and_select(b, law, shape):
    event = dpa.LaplaceDpEvent(b)
    for delta in (1e-9, 1e-5, 1e-3):
        theirs = dpa.rdp.RdpAccountant().compose(RepeatAndSelect(event, law.mean, shape))
        ours = bound("generic_rdp").epsilon(event, law, delta)
        assert ours <= theirs.get_epsilon(delta) * (1 + 1e-12) + 1e-12


def test_laplace_one_run_bounds_bound_the_closed_form():
    """K = 1 (TNB with nu = 1): every rigorous bound is at least the Laplace pair's own eps
    (e0 + 2 log(1 - delta), from its closed-form profile) and the profile bound is close."""
    b = 0.5
    base, law = LaplaceBase(b), TruncatedNegativeBinomial(1.0, 1.0)
    for delta in (1e-6, 1e-3, 0.1):
        truth = 1 / b + 2 * math.log1p(-delta)
        for b_ in BOUNDS:
            if b_.supports(base, law):
                assert b_.epsilon(base, law, delta) >= truth - 1e-9, b_.key
        assert bound("profile").epsilon(base, law, delta) == pytest.approx(truth, abs=5e-3)


def test_event_bases_compose_and_subsample():
    law = TruncatedNegativeBinomial(1.0, 0.1)
    composed = dpa.ComposedDpEvent([dpa.LaplaceDpEvent(2.0), dpa.GaussianDpEvent(3.0)])
    out = panel(composed, law, 1e-5)
    assert out.upper["exact"] is None and out.upper["improved_rdp"] is None
    assert out.upper["generic_rdp"] > out.base["epsilon"]
    assert out.upper["profile"] > out.base["epsilon"]
    # no worst-case pair is known for this event: no attack value, the interval starts at 0
    assert out.attack["epsilon"] is None and "no attack value" in out.attack["source"]
    assert out.interval.lower == 0.0 and out.interval.lower_source.startswith("eps >= 0")
    assert out.interval.upper == min(out.upper["generic_rdp"], out.upper["profile"])
    with pytest.raises(ConfigError, match=r"^pair: no attack value for this base \(EventBase\)"):
        attack_epsilon(composed, law, 1e-5)
    # RDP cannot account for a subsampled Laplace; its pure eps still gives a generic bound
    # (randomized response's RDP curve, the largest of any eps-DP base, and Corollary 3)
    sub = LaplaceBase(0.5, steps=20, sample_rate=0.1)
    assert not sub.supports_rdp and sub.supports_pld
    pure = 20 * math.log1p(0.1 * math.expm1(2.0))
    assert sub.pure_epsilon == pytest.approx(pure)
    assert bound("generic_rdp").epsilon(sub, law, 0.0) == pytest.approx(3 * pure)
    eps_b = sub.epsilon(1e-5)
    assert eps_b < bound("generic_rdp").epsilon(sub, law, 1e-5) < 3 * pure
    assert eps_b < bound("profile").epsilon(sub, law, 1e-5) < 3 * pure


def test_laplace_config_form():
    raw = {
        "name": "x",
        "delta": 1e-5,
        "base": {"kind": "laplace", "epsilon": 0.5, "steps": 4},
        "rounds": {"kind": "poisson", "mean": 3},
    }
    spec = parse_config(raw)
    assert isinstance(spec.base, LaplaceBase)
    assert spec.base.pure_epsilon == pytest.approx(0.5) and spec.base.noise_multiplier == 8.0
    bad = [
        ({"kind": "laplace"}, "base.noise_multiplier"),
        ({"kind": "laplace", "epsilon": 1, "noise_multiplier": 1}, "base.noise_multiplier"),
        ({"kind": "laplace", "noise_multiplier": -1}, "base.noise_multiplier"),
        ({"kind": "laplace", "epsilon": 1, "steps": 0}, "base.steps"),
        ({"kind": "laplace", "epsilon": 1, "sample_rate": 2}, "base.sample_rate"),
        ({"kind": "laplace", "epsilon": 1, "accountant": "prv"}, "base.accountant"),
        ({"kind": "laplace", "epsilon": 1, "scale": 2}, "base.scale"),
    ]
    for base, field in bad:
        with pytest.raises(ConfigError) as err:
            parse_config({**raw, "base": base})
        assert err.value.field == field, (base, str(err.value))
    with pytest.raises(ConfigError) as err:
        parse_config({**raw, "game": {"kind": "reduced"}})
    assert err.value.field == "game.kind"
