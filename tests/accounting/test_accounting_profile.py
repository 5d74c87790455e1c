"""Koskela-Redberg-Wang profile bounds: corollaries, the Theorem 4.1 recipe, exact <= profile."""

import math

import pytest

from auditsel.accounting.exact import exact_epsilon
from auditsel.accounting.profile import (
    base_profile,
    binomial_shift,
    general_shift,
    poisson_shift,
    profile_epsilon,
    rnm_epsilon,
    rnm_gaussian_closed_form,
    rnm_gaussian_rdp,
    tnb_shift,
)
from auditsel.mechanisms import FiniteOutputBase, GaussianBase, gaussian_epsilon
from auditsel.rounds import Binomial, Poisson, TruncatedNegativeBinomial, TwoPoint
from auditsel.selection import winner_law


def _rr(eps):
    p = math.exp(eps) / (1 + math.exp(eps))
    return FiniteOutputBase((1 - p, p), (p, 1 - p))


@pytest.mark.parametrize("eps0", [0.3, 1.0, 2.0])
@pytest.mark.parametrize("eta", [0.0, 1.0, 2.5])
def test_pure_dp_base_obeys_corollary_5_3(eps0, eta):
    base, law = _rr(eps0), TruncatedNegativeBinomial(eta, 1e-3)
    assert profile_epsilon(base, law, 1e-8) <= (eta + 2) * eps0 + 1e-9


@pytest.mark.parametrize("sigma", [2.0, 4.0, 8.0])
@pytest.mark.parametrize("eta, nu", [(1.0, 1 / 30), (1.0, 1 / 3000), (0.0, 1e-2), (0.5, 1e-3)])
def test_gaussian_base_beats_corollary_5_5(sigma, eta, nu):
    law = TruncatedNegativeBinomial(eta, nu)
    delta = 1e-6
    m = law.mean
    cor55 = (eta + 2) * (
        1 / (2 * sigma**2) + (1 / sigma) * math.sqrt(2 * math.log(max(m, 1 / nu) / delta))
    ) + (eta + 1) * delta
    assert profile_epsilon(GaussianBase(1 / sigma), law, delta) <= cor55 + 1e-9


def test_poisson_recipe_equals_m_times_tv():
    # log G'(q)/G'(q') = m (q - q'): the sup over the Gaussian region is m * TV = m delta_Q(0)
    base, m = GaussianBase(0.4), 7.0
    prof = base_profile(base)
    assert general_shift(prof, Poisson(m)) == pytest.approx(m * float(prof.delta(0.0)), rel=1e-4)
    # Corollary 5.8 with eps1 = 0 is the same number, and its minimum over eps1 is no larger
    assert poisson_shift(prof, m) <= m * float(prof.delta(0.0)) + 1e-12


def test_binomial_feasibility_and_fallback():
    prof = base_profile(GaussianBase(0.5))
    assert math.isinf(binomial_shift(prof, 10, 1.0))  # p = 1 has no feasible eps1
    c = binomial_shift(prof, 100, 0.1)
    # the feasible eps1 obey eps1 >= log(1 + p/(1-p) delta(eps1)); the shift is finite
    assert 0 < c < math.inf
    # Bin(10, 1) = best of exactly 10 runs: the recipe sup is unbounded for a Gaussian base
    assert math.isinf(profile_epsilon(GaussianBase(0.5), Binomial(10, 1.0), 1e-6))


@pytest.mark.parametrize(
    "law",
    [
        TruncatedNegativeBinomial(1.0, 0.01),
        TruncatedNegativeBinomial(0.0, 0.01),
        Poisson(5.0),
        Binomial(50, 0.2),
        TwoPoint(20, 0.1),
    ],
)
def test_exact_below_profile(law):
    base = GaussianBase(0.8)
    exact = exact_epsilon(winner_law(base, law), 1e-5)
    assert exact <= profile_epsilon(base, law, 1e-5) + 1e-6


def test_tnb_recipe_at_least_as_tight_as_theorem_5_2():
    # Theorem 5.2 relaxes the region of Theorem 4.1 to one eps1: the exact-region sup is smaller
    prof = base_profile(GaussianBase(0.25))
    for eta, nu in [(1.0, 1 / 30), (0.0, 1e-2)]:
        assert (
            general_shift(prof, TruncatedNegativeBinomial(eta, nu))
            <= tnb_shift(prof, eta, nu) + 1e-9
        )


@pytest.mark.parametrize("m", [10, 100, 1000])
def test_report_noisy_max(m):
    sigma, delta = 4.0, 1e-6
    thm32 = rnm_epsilon(lambda d: gaussian_epsilon(2 / sigma, d), m, delta)
    assert thm32 <= rnm_gaussian_closed_form(sigma, m, delta) + 1e-9  # Cor 3.4 bounds Thm 3.2
    assert thm32 <= rnm_gaussian_rdp(sigma, m, delta)  # profile beats RDP
