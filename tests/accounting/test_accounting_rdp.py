"""RDP curves and the Canonne-Kamath-Steinke conversion."""

import math

import numpy as np
import pytest

from auditsel.accounting.rdp import (
    ORDERS,
    finite_rdp,
    gaussian_rdp,
    monotone_envelope,
    pure_dp_rdp,
    rdp_to_delta,
    rdp_to_epsilon,
    rdp_to_epsilon_continuous,
    renyi_divergence_finite,
)
from auditsel.mechanisms import gaussian_epsilon


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_gaussian_conversion_is_an_upper_bound_close_to_exact(mu, delta):
    exact = gaussian_epsilon(mu, delta)
    grid = rdp_to_epsilon(ORDERS, gaussian_rdp(mu, ORDERS), delta)
    cont = rdp_to_epsilon_continuous(lambda a: gaussian_rdp(mu, a), delta)
    assert exact <= cont + 1e-9 <= grid + 2e-9
    assert grid <= cont * 1.002 + 1e-6  # the stated grid loses < 0.2 %
    assert cont <= exact * 1.35 + 0.05  # RDP is loose, but not by much for the Gaussian


def test_conversion_closed_form_at_one_order():
    # one order: eps = r + log(1 - 1/a) - (log delta + log a)/(a - 1)
    a, r, d = 5.0, 0.7, 1e-5
    expected = r + math.log(1 - 1 / a) - (math.log(d) + math.log(a)) / (a - 1)
    assert rdp_to_epsilon([a], [r], d) == pytest.approx(expected)


def test_rdp_to_delta_inverts_rdp_to_epsilon():
    r = gaussian_rdp(0.8, ORDERS)
    eps = rdp_to_epsilon(ORDERS, r, 1e-6)
    assert rdp_to_delta(ORDERS, r, eps) <= 1e-6 * (1 + 1e-9)


def test_pure_dp_curve_is_randomized_response():
    eps = 1.3
    p = math.exp(eps) / (1 + math.exp(eps))
    rr = finite_rdp([p, 1 - p], [1 - p, p], ORDERS)
    assert np.allclose(pure_dp_rdp(eps, ORDERS), rr, rtol=1e-10)
    curve = pure_dp_rdp(eps, ORDERS)
    assert np.all(curve <= eps + 1e-12)
    assert curve[-1] == pytest.approx(eps, rel=2e-3)  # -> eps as alpha -> inf
    assert np.all(np.diff(curve) >= -1e-12)  # non-decreasing in alpha


def test_finite_renyi_basic_identities():
    p = np.array([0.2, 0.3, 0.5])
    assert np.allclose(renyi_divergence_finite(p, p, ORDERS), 0, atol=1e-12)
    q = np.array([0.1, 0.6, 0.3])
    # order 2: log sum p^2/q
    assert renyi_divergence_finite(p, q, [2.0])[0] == pytest.approx(math.log(np.sum(p**2 / q)))
    assert np.isinf(renyi_divergence_finite([0.5, 0.5], [1.0, 0.0], [2.0])[0])


def test_monotone_envelope():
    out = monotone_envelope([3.0, 1.5, 2.0], [1.0, 5.0, 0.5])
    assert out.tolist() == [1.0, 0.5, 0.5]
