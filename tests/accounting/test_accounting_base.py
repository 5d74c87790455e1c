"""DpsgdBase: validation, eq. 19, mu_GDP, and agreement with closed forms where they exist."""

import math

import numpy as np
import pytest

from auditsel.errors import ConfigError
from auditsel.mechanisms import DpsgdBase, gaussian_delta, gdp_mu_dpsgd


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(noise_multiplier=0.0, steps=10), "noise_multiplier"),
        (dict(noise_multiplier=-1.0, steps=10), "noise_multiplier"),
        (dict(noise_multiplier=1.0, steps=0), "steps"),
        (dict(noise_multiplier=1.0, steps=2.5), "steps"),
        (dict(noise_multiplier=1.0, steps=10, sample_rate=0.0), "sample_rate"),
        (dict(noise_multiplier=1.0, steps=10, sample_rate=1.5), "sample_rate"),
        (dict(noise_multiplier=1.0, steps=10, accountant="prv"), "accountant"),
    ],
)
def test_validation_messages(kwargs, field):
    with pytest.raises(ConfigError, match=rf"^{field}: must be .*, got "):
        DpsgdBase(**kwargs)


def test_mu_is_eq19():
    b = DpsgdBase(2.0, 400, 0.25)
    assert b.mu == pytest.approx(0.25 * 20 / 2.0)
    assert not b.reduction_is_exact and DpsgdBase(2.0, 400, 1.0).reduction_is_exact


def test_full_batch_rdp_curve_is_gaussian_composition():
    # tau = 1: N Gaussian steps compose to RDP N alpha / (2 sigma^2) = alpha mu^2 / 2
    b = DpsgdBase(5.0, 100, 1.0)
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    assert np.allclose(b.rdp(orders), orders * b.mu**2 / 2, rtol=1e-9)


def test_full_batch_pld_profile_is_pessimistic_and_close_to_exact_gaussian():
    b = DpsgdBase(5.0, 100, 1.0)  # mu = 2
    eps = np.linspace(0, 6, 13)
    pld = b.delta(eps)
    exact = gaussian_delta(b.mu, eps)
    assert np.all(pld >= exact - 1e-12)
    assert np.all(pld - exact <= 2e-3 * np.maximum(exact, 1e-3))


def test_pld_is_tighter_than_rdp_for_subsampled_gaussian():
    b = DpsgdBase(1.2, 300, 0.05)
    assert b.epsilon(1e-5, "pld") < b.epsilon(1e-5, "rdp")


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_from_epsilon_calibrates(accountant):
    b = DpsgdBase.from_epsilon(2.0, 1e-5, 200, 0.1, accountant)
    assert b.epsilon(1e-5) == pytest.approx(2.0, rel=1e-4)
    assert b.accountant == accountant


def test_mu_gdp_large_sigma_limit_is_eq19():
    # e^(1/s^2) Phi(1.5/s) + 3 Phi(-0.5/s) - 2 = 1/s^2 + O(1/s^3)... so mu_GDP -> sqrt(2) c / (sqrt(2) s)
    s, n, t = 200.0, 500, 1.0
    assert gdp_mu_dpsgd(s, n, t) == pytest.approx(t * math.sqrt(n) / s, rel=2e-2)
    # and it grows with the sample rate linearly (c = tau sqrt(N))
    assert gdp_mu_dpsgd(3.0, 100, 0.2) == pytest.approx(2 * gdp_mu_dpsgd(3.0, 100, 0.1))
