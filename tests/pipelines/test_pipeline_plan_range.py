"""The plan's range of the certified eps_L (`PipelinePlan.eps_low`, `eps_high`): it holds the
plan's E[eps_L], it is the 5% and 95% quantiles of the planned law (a prediction, worded as
one), the JSON has it, and a plan of several canaries gives the range of their largest."""

import json

import numpy as np
import pytest

from auditsel import InputCanary, plan_pipeline
from auditsel.mechanisms import GaussianBase
from auditsel.pipelines.pipeline import Pipeline

DELTA = 1e-5
EMPTY = (np.zeros((4, 1)), np.zeros(4))
CANARY = InputCanary(x=[1.0], y=1)
CLAIM = GaussianBase(1.0).epsilon(DELTA)


def leaky(data, seed, canary):  # mu = 3 released, mu = 1 claimed
    present = float(np.asarray(data[0])[:, 0].sum() >= 1)
    return float(np.random.default_rng(seed).normal(3.0 * present, 1.0))


def itself(release, canary):
    return float(release)


def plan(canary, pilot=200):
    return plan_pipeline(
        Pipeline(leaky, itself, data=EMPTY, canary=canary),
        delta=DELTA,
        claimed_epsilon=CLAIM,
        pilot=pilot,
        games=1000,
    )


@pytest.mark.parametrize("pilot", [100, 200])
def test_the_range_holds_the_expectation_and_is_the_laws_quantiles(pilot):
    p = plan(CANARY, pilot)
    assert p.eps_low is not None and p.eps_high is not None and p.law is not None
    assert p.eps_low <= p.expected_eps <= p.eps_high
    assert p.eps_low < p.eps_high  # this pilot sees the leak: a law with spread
    assert p.eps_low == p.law.quantile(0.05) and p.eps_high == p.law.quantile(0.95)
    assert p.law.mean() == pytest.approx(p.expected_eps, rel=1e-9)
    assert p.eps_range >= 0.9
    text = p.summary()
    assert f"[{p.eps_low:.4f}, {p.eps_high:.4f}]" in text and "not a bound" in text
    out = json.loads(json.dumps(p.to_dict(), allow_nan=False))
    assert out["eps_low"] == p.eps_low and out["eps_high"] == p.eps_high and "law" not in out


def test_without_games_there_is_no_range():
    p = plan_pipeline(
        Pipeline(leaky, itself, data=EMPTY, canary=CANARY),
        delta=DELTA,
        claimed_epsilon=CLAIM,
        pilot=100,
    )
    assert p.eps_low is None and p.eps_high is None and "predicted in" not in p.summary()


def test_several_canaries_give_the_range_of_their_largest():
    p = plan((CANARY, InputCanary(x=[1.0], y=0)))
    assert len(p.canaries) == 2 and all(c.law is not None for c in p.canaries)
    # the largest of independent eps_L's is above each: its quantiles are at least theirs
    assert p.eps_low >= max(c.eps_low for c in p.canaries)
    assert p.eps_high >= max(c.eps_high for c in p.canaries)
    assert p.eps_low <= p.expected_eps <= p.eps_high
    grid = np.linspace(0, p.eps_high, 50)
    product = p.canaries[0].law.at(grid) * p.canaries[1].law.at(grid)
    assert np.allclose(p.law.at(grid), product)
    assert "largest of the canaries" in p.summary()
    assert [c["eps_low"] for c in p.to_dict()["canaries"]] == [c.eps_low for c in p.canaries]
