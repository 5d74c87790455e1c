"""Issue 36's acceptance pipeline: a new user's random-init Opacus MLP tuning run
(`random_init_mlp`), audited by the documented route with nothing chosen by hand
(`canary="both"`, the learned default score, the plan on a 200-game pilot), after the one
change the tutorial asks of a random-init pipeline (release the initial weights)."""

import pytest

pytest.importorskip("opacus")
pytest.importorskip("sklearn")

import random_init_mlp as mlp

from auditsel import (
    ExecutionOptions,
    ReportOptions,
    audit_pipeline,
    plan_pipeline,
)
from auditsel.pipelines.default_canaries import default_canaries
from auditsel.pipelines.pipeline import Pipeline

GAMES = 1_000  # per canary: the budget
NO_PANEL = ReportOptions(panel=False)


def test_both_canaries_sit_where_the_data_do_not_move_the_weights():
    """The digits have pixels that are 0 in every image: the gradient canary sits on a
    first-layer weight of one and the input canary's outlier feature on another."""
    train, _, _ = mlp.data()
    X = train.tensors[0].numpy()
    person, gradient = default_canaries(mlp.make_tune(1.0, release_initial=True), train)
    unused = {int(j) for j in (X == 0).all(axis=0).nonzero()[0]}
    x = person.x.reshape(-1)
    assert int(x.argmax()) in unused and x.max() > 4 * X.std(axis=0).max()
    assert gradient.coordinate in unused and gradient.coordinate < 64  # row 0 of fc1.weight


@pytest.mark.slow  # a statistical run: three plans and three audits of 2 x 1,000 Opacus games
@pytest.mark.parametrize("noise_scale", [0.0, 0.2, 1.0])
def test_the_documented_route_refutes_the_buggy_copies_and_not_the_correct_one(noise_scale):
    train, _, _ = mlp.data()
    claim = mlp.claim().tuning_epsilon
    tune = mlp.make_tune(noise_scale, release_initial=True)
    kw_on = dict(data=train, canary="both")
    kw = dict(delta=mlp.DELTA, claimed_epsilon=claim)
    plan = plan_pipeline(
        Pipeline(tune, **kw_on), games=GAMES, execution=ExecutionOptions(jobs=2), **kw
    )
    audit = audit_pipeline(
        Pipeline(tune, **kw_on),
        games=GAMES,
        execution=ExecutionOptions(jobs=2),
        report=NO_PANEL,
        **kw,
    )
    if noise_scale == 0:  # the pilot separates: the plan predicts the refutation
        assert plan.prob_refute >= 0.5 and audit.refuted
    elif noise_scale < 1:  # the leak is in the tail: 11 of the gradient canary's 50 held-out
        # games with it score above all 50 without; they reject the claim (p 0.036 <= 0.1), and
        # the plan reads that test at its medians (issue 36 item 3): P(refuted) 0.68 at 1,000
        assert plan.reading == "median" and plan.prob_refute >= 0.5 and audit.refuted
    else:  # the correct pipeline: no planned refutation, none found, and the plan says so
        assert plan.games_to_refute is None and not audit.refuted
        assert "cannot refute claims above" in plan.summary()
