"""The grids the profile bounds read are fine enough that their discretisation does not bind
(issue 37): the PLD grid `mechanisms.profile_step` picks, and the region's cells `profile.layers`
refines (`LAYER_TOL`). Each test compares the rule's value with a much finer grid's (within a
small share) and with the coarse grid's (clearly worse), so a rule coarsened past the binding
point fails here. All values are upper bounds at every grid; only their tightness is tested
(soundness: tests/accounting/test_layered_profile.py, test_two_sided.py)."""

import auditsel.accounting.profile as profile_module
import auditsel.accounting.two_sided as two_sided_module
from auditsel import DpsgdBase, GaussianBase, Poisson
from auditsel.accounting.attack import attack_epsilon
from auditsel.accounting.profile import layered_epsilon
from auditsel.accounting.two_sided import two_sided_epsilon
from auditsel.mechanisms import PLD_DISCRETIZATION

DELTA = 1e-5


def test_the_layers_refinement_does_not_bind(monkeypatch):
    """Gaussian mu 0.5, Poisson(20): the rule's layered bound is within 0.1% of the one refined
    to 1e-4 nats, and the unrefined cells (tol inf) are more than 5% above it."""
    pair, law = GaussianBase(0.5), Poisson(20.0)
    rule = float(layered_epsilon(pair, law, DELTA)[0])
    monkeypatch.setattr(profile_module, "LAYER_TOL", 1e-4)
    monkeypatch.setattr(profile_module, "LAYER_ROUNDS", 20)
    fine = float(layered_epsilon(pair, law, DELTA)[0])
    monkeypatch.setattr(profile_module, "LAYER_TOL", float("inf"))
    coarse = float(layered_epsilon(pair, law, DELTA)[0])
    assert attack_epsilon(pair, law, DELTA) <= fine <= rule <= fine * 1.001
    assert coarse > rule * 1.05


def test_the_pld_grid_does_not_bind(monkeypatch):
    """sigma 1.38, 6,000 steps, rate 0.0011, Poisson(11.2) (one step's loss is comparable to
    1e-3): the two-sided bound on the rule's PLD grid is within 0.5% of the one on 3e-5, and on
    the 1e-3 grid alone more than 5% above it."""
    pair, law = DpsgdBase(1.38, 6000, 0.0011, "pld"), Poisson(11.2)
    rule = float(two_sided_epsilon(pair, law, DELTA)[0])
    values = {}
    for step in (3e-5, PLD_DISCRETIZATION):
        monkeypatch.setattr(two_sided_module, "profile_step", lambda *args, s=step: s)
        values[step] = float(two_sided_epsilon(pair, law, DELTA)[0])
    assert values[3e-5] <= rule <= values[3e-5] * 1.005
    assert values[PLD_DISCRETIZATION] > rule * 1.05
