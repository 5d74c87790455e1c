"""[XWW24] Algorithm 3: numerical Renyi divergences of the reduced game."""

import mpmath as mp
import numpy as np
import oracles
import pytest

from auditsel.accounting.improved import finite_improved_epsilon, improved_epsilon, winner_renyi
from auditsel.accounting.rdp import gaussian_rdp, rdp_to_epsilon_continuous
from auditsel.mechanisms import FiniteOutputBase
from auditsel.rounds import Point, Poisson, TruncatedNegativeBinomial, TwoPoint


@pytest.mark.parametrize("mu", [0.2, 1.0, 2.5])
def test_single_run_is_the_gaussian(mu):
    orders = np.array([1.5, 2.0, 10.0, 1 + 15 / mu])
    assert np.allclose(winner_renyi(mu, Point(1), orders), gaussian_rdp(mu, orders), rtol=1e-8)
    ref = rdp_to_epsilon_continuous(lambda a: gaussian_rdp(mu, a), 1e-5)
    assert improved_epsilon(mu, Point(1), 1e-5) == pytest.approx(ref, rel=1e-6)


def _mp_renyi(mu, alpha, eta, nu):
    seen: dict = {}  # both integrals read the same quadrature nodes: each density once

    def density(x, shift):
        if (x, shift) not in seen:
            seen[x, shift] = oracles.tnb_density(x, shift, eta, nu)
        return seen[x, shift]

    f = lambda x: density(x, 0) ** alpha * density(x, mu) ** (1 - alpha)
    g = lambda x: density(x, mu) ** alpha * density(x, 0) ** (1 - alpha)
    pts = [-60, -20, -5, 0, 2, 5, 10, 60]
    return max(
        float(mp.log(mp.quad(f, pts)) / (alpha - 1)), float(mp.log(mp.quad(g, pts)) / (alpha - 1))
    )


@pytest.mark.parametrize("alpha", [2.0, 6.0])
def test_tnb_divergence_matches_mpmath_quadrature(alpha):
    mu, eta, nu = 0.7, 1.0, 0.05
    ours = winner_renyi(mu, TruncatedNegativeBinomial(eta, nu), [alpha])[0]
    assert ours == pytest.approx(_mp_renyi(mu, alpha, eta, nu), rel=1e-6)


def test_atom_of_poisson_is_counted():
    # K = 0 w.p. e^-m releases the same output on both sides: divergence below the K >= 1 part
    mu = 1.0
    d_pois = winner_renyi(mu, Poisson(0.5), [2.0])[0]
    assert 0 < d_pois < winner_renyi(mu, Point(1), [2.0])[0]


def test_finite_recipe_example1():
    # Example 1 of [XWW24]: exact (2.92, 1e-5) <= Renyi-of-the-exact-winner <= generic RDP 3.02
    v = finite_improved_epsilon(
        FiniteOutputBase.example1(), TruncatedNegativeBinomial(1, 1e-3), 1e-5
    )
    assert 2.92 <= v <= 3.02


@pytest.mark.parametrize(
    "mu_uo, mu_ug, paper",
    [
        # tau = 1, N = 500, eps_B = 1 / 4 (mu calibrated with the RDP accountant): [XWW24] Table 4
        (
            0.247195,
            0.248291,
            {(10, 0.1): (1.13, 1.12), (100, 0.01): (2.58, 2.57), (1000, 1e-3): (5.42, 5.40)},
        ),
        (
            0.863880,
            0.877418,
            {(10, 0.1): (4.51, 4.43), (100, 1e-3): (7.85, 7.80), (1000, 1e-3): (10.22, 10.20)},
        ),
    ],
)
def test_table4_cells_within_a_few_tenths(mu_uo, mu_ug, paper):
    for (L, s), (ug, uo) in paper.items():
        law = TwoPoint(L, s)
        assert improved_epsilon(mu_ug, law, 1e-5) == pytest.approx(ug, abs=0.25)
        assert improved_epsilon(mu_uo, law, 1e-5) == pytest.approx(uo, abs=0.25)
