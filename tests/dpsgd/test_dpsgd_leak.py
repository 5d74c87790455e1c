"""Tuning's leak on real DP-SGD (results/dpsgd_leak): the configs describe the same setting,
the exact curve puts the tuning epsilon well above eps_B there, and the committed audit
certifies (valid split rule, 95%) more than eps_B without exceeding the exact epsilon."""

import json
from pathlib import Path

import pytest

from auditsel.experiments.config import load_config

ROOT = Path(__file__).resolve().parents[2]
REAL, REDUCED = ROOT / "configs" / "dpsgd_leak.yaml", ROOT / "configs" / "dpsgd_leak_reduced.yaml"


def test_the_real_and_reduced_configs_are_the_same_setting():
    real, reduced = load_config(REAL), load_config(REDUCED)
    assert (
        real.base == reduced.base and real.rounds == reduced.rounds and real.delta == reduced.delta
    )
    for key in ("trials", "seed", "proxy", "threshold", "confidence"):
        assert getattr(real.game, key) == getattr(reduced.game, key), key
    g = real.game.dpsgd
    assert (g.threat, g.canary, len(g.learning_rates), real.base.sample_rate) == (
        "etcv",
        "dirac",
        1,
        1.0,
    )


def test_the_exact_tuning_epsilon_is_well_above_eps_b():
    from auditsel.accounting.exact import exact_epsilon
    from auditsel.mechanisms import GaussianBase
    from auditsel.selection import GaussianWinner

    spec = load_config(REDUCED)
    eps_b = spec.base.epsilon(spec.delta)
    exact = exact_epsilon(GaussianWinner(GaussianBase(spec.base.mu), spec.rounds), spec.delta)
    assert eps_b == pytest.approx(2.0, rel=1e-3) and exact > eps_b + 2


@pytest.mark.parametrize("part", ["dpsgd", "reduced"])
def test_committed_audit_certifies_more_than_eps_b(part):
    result = json.loads((ROOT / "results" / "dpsgd_leak" / part / "result.json").read_text())
    spec = load_config(REAL if part == "dpsgd" else REDUCED)
    lower = result["lower"]
    assert lower["threshold_rule"] == "split" and lower["confidence"] == 0.95
    assert lower["trials"] == spec.game.trials
    exact = (result.get("monotone_score") or result["upper"])["exact"]  # pre-0.2.0: upper
    assert result["base"]["epsilon"] < lower["eps"] <= exact
