"""PS22 generic bounds: dp_accounting cross-check, closed forms, Example 1."""

import math

import dp_accounting as dpa
import numpy as np
import pytest

from auditsel.accounting.generic import (
    generic_epsilon,
    lemma7_rdp,
    pure_dp_generic_epsilon,
    tnb_rdp,
)
from auditsel.accounting.profile import base_profile
from auditsel.accounting.rdp import ORDERS, finite_rdp, gaussian_rdp, pure_dp_rdp
from auditsel.mechanisms import RDP_ORDERS, DpsgdBase, FiniteOutputBase, GaussianBase
from auditsel.rounds import Point, Poisson, TruncatedNegativeBinomial, TwoPoint

DPA_ORDERS = np.array(dpa.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS, dtype=float)


def _dpa_repeat_and_select(event, mean, shape, delta, orders):
    ev = dpa.dp_event.RepeatAndSelectDpEvent(event, mean, shape)
    return dpa.rdp.RdpAccountant(list(orders)).compose(ev).get_epsilon(delta)


@pytest.mark.parametrize("sigma", [1.0, 3.0])
@pytest.mark.parametrize("eta, nu", [(0.0, 1e-2), (0.5, 1e-3), (1.0, 1e-2), (2.0, 1e-2)])
def test_tnb_matches_dp_accounting(sigma, eta, nu):
    law = TruncatedNegativeBinomial(eta, nu)
    ref = _dpa_repeat_and_select(dpa.GaussianDpEvent(sigma), law.mean, eta, 1e-5, DPA_ORDERS)
    ours = generic_epsilon(DPA_ORDERS, gaussian_rdp(1 / sigma, DPA_ORDERS), law, 1e-5)
    # dp_accounting recovers nu from the mean by bisection, conservatively (nu slightly smaller)
    assert ours <= ref * (1 + 1e-3)
    assert ours == pytest.approx(ref, rel=1e-3)


@pytest.mark.parametrize("mean", [3.0, 30.0])
def test_poisson_matches_dp_accounting_and_profile_delta_is_tighter(mean):
    sigma = 2.0
    ref = _dpa_repeat_and_select(dpa.GaussianDpEvent(sigma), mean, math.inf, 1e-5, DPA_ORDERS)
    rdp = gaussian_rdp(1 / sigma, DPA_ORDERS)
    ours = generic_epsilon(DPA_ORDERS, rdp, Poisson(mean), 1e-5)
    assert ours == pytest.approx(ref, rel=1e-3)
    # delta_hat from the exact Gaussian profile instead of the RDP curve: never looser
    prof = base_profile(GaussianBase(1 / sigma))
    assert generic_epsilon(DPA_ORDERS, rdp, Poisson(mean), 1e-5, prof) <= ours + 1e-12


def test_dpsgd_base_matches_dp_accounting():
    base = DpsgdBase(1.5, 100, 0.05)
    law = TruncatedNegativeBinomial(1.0, 0.05)
    orders = np.asarray(RDP_ORDERS)
    ref = _dpa_repeat_and_select(base.event, law.mean, 1.0, 1e-5, orders)
    ours = generic_epsilon(orders, base.rdp(orders), law, 1e-5)
    assert ours == pytest.approx(ref, rel=1e-3)


@pytest.mark.parametrize("rho, eta, nu", [(0.01, 0.0, 1e-2), (0.05, 1.0, 1e-3), (0.1, 0.5, 1e-2)])
def test_tnb_zcdp_base_matches_corollary4(rho, eta, nu):
    # Q rho-zCDP: r(alpha) = rho alpha. Theorem 2 with alpha_hat free gives Corollary 4.
    law = TruncatedNegativeBinomial(eta, nu)
    orders = 1 + np.logspace(-2, 3, 4000)
    curve = tnb_rdp(orders, rho * orders, eta, nu)
    m = law.mean
    a_star = 1 + math.sqrt(math.log(m) / rho)
    cor4 = np.where(
        orders > a_star,
        rho * (orders - 1)
        + math.log(m) / (orders - 1)
        + 2 * (1 + eta) * math.sqrt(rho * math.log(1 / nu))
        - eta * rho,
        2 * math.sqrt(rho * math.log(m))
        + 2 * (1 + eta) * math.sqrt(rho * math.log(1 / nu))
        - eta * rho,
    )
    assert np.all(curve >= cor4 - 1e-9)  # Cor 4 is the exact optimum over alpha_hat
    assert np.all(curve <= cor4 + 2e-3)  # the grid over alpha_hat loses little


def test_point_mass_lemma7_is_ps22_point_mass_bound():
    # Without a profile, Lemma 7 + Bernoulli post-processing: k r(alpha) + log(k)/(alpha-1)
    k, mu = 4, 0.7
    r = gaussian_rdp(mu, ORDERS)
    expected = np.minimum.accumulate((k * r + math.log(k) / (ORDERS - 1))[::-1])[::-1]
    assert np.allclose(lemma7_rdp(ORDERS, r, Point(k)), expected, rtol=1e-10)


def test_lemma7_profile_region_never_looser():
    base = GaussianBase(0.6)
    r = gaussian_rdp(base.mu, ORDERS)
    law = TwoPoint(50, 0.05)
    with_region = lemma7_rdp(ORDERS, r, law, base_profile(base))
    without = lemma7_rdp(ORDERS, r, law)
    assert np.all(with_region <= without + 1e-12)
    assert np.all(with_region >= r - 1e-12)  # the sup term is >= 0 (q = q' is feasible)


def test_example1_generic_bounds():
    base = FiniteOutputBase.example1()
    law = TruncatedNegativeBinomial(1.0, 1e-3)
    assert pure_dp_generic_epsilon(1.0, law) == 3.0  # (2 + eta) eps
    exact_rdp = generic_epsilon(ORDERS, finite_rdp(base.law(0), base.law(1), ORDERS), law, 1e-5)
    rr_rdp = generic_epsilon(ORDERS, pure_dp_rdp(1.0, ORDERS), law, 1e-5)
    # the exact RDP curve of the base is below the randomized-response curve of a 1-DP base
    assert exact_rdp <= rr_rdp + 1e-12
    # both lie between the exact 2.92 and the paper's 3.11
    assert 2.92 < exact_rdp < 3.11 and 2.92 < rr_rdp < 3.11
