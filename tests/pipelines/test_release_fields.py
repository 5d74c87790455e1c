"""The bugs users make, caught by the documented default route (issue 27 items 2 and 3).

Two small numpy pipelines with the bugs of issue 27:

* `clip_leak`: the clipping norm is the 90th percentile of the private gradient norms,
  computed without noise and released with the model. The canary's score reads the model
  only and sees nothing; every released field, each at its Bonferroni share
  (`score=FieldScores(fields)`), reads `clip` and refutes the claim, and so does the default
  score (`score=None`: learned from a pilot, `auditsel.pipelines.learned_scores`);
* `augmented`: every row augmented 8 times, and the augmented rows counted as people (the
  accountant's sample rate is the rate of one augmented row). `GradientCanary` takes the
  sample rate and "one row = one person" from the pipeline and cannot see it; `InputCanary` is
  a person, augmented with the rest, and refutes the claim; both canaries at once
  (`canary=(InputCanary, GradientCanary)`, Bonferroni) refute it too.

A correct pipeline that releases more than its model keeps its claim under the same route.
The route the tutorial teaches, `canary="both"` with the default score, refutes both bugs with
no canary chosen by hand.
"""

import math

import numpy as np
import pytest

from auditsel import (
    DpsgdBase,
    GaussianBase,
    GradientCanary,
    InputCanary,
    ReportOptions,
    audit_pipeline,
    plan_pipeline,
)
from auditsel.pipelines.canaries import default_score
from auditsel.pipelines.default_canaries import default_canaries
from auditsel.pipelines.pipeline import Pipeline
from auditsel.pipelines.release_scores import FieldScores, probe_fields, release_fields

DELTA = 1e-5
NO_PANEL = ReportOptions(panel=False)


class Linear:
    """A released logistic model: logits = x . theta (parameters(): for GradientCanary)."""

    def __init__(self, theta):
        self.theta = np.asarray(theta, dtype=float)

    def __call__(self, batch):
        return np.asarray(batch, dtype=float) @ self.theta

    def parameters(self):
        return [self.theta]


def _grads(theta, X, y):
    p = 1 / (1 + np.exp(-(X @ theta)))
    return (p - y)[:, None] * X


_rng = np.random.default_rng(0)
N, D = 25, 4
X = np.concatenate([_rng.normal(0, 1, (N, D - 1)), np.zeros((N, 1))], axis=1)
DATA = (X, (X[:, 0] > 0).astype(float))
INPUT = InputCanary(x=[0.0, 0.0, 0.0, 4.0], y=1)  # a person only the last feature describes
GRADIENT = GradientCanary(coordinate=D - 1)
LR = 0.5

CLIP_SIGMA, CLIP_STEPS = 4.0, 5
CLIP_CLAIM = GaussianBase(math.sqrt(CLIP_STEPS) / CLIP_SIGMA).epsilon(DELTA)  # full-batch DP-GD


def clip_leak(data, seed, canary):
    """Full-batch DP-GD, noise sigma * clip: private if clip were public; it is not."""
    X, y = data
    rng = np.random.default_rng(seed)
    theta = np.zeros(X.shape[1])
    clip = float(np.percentile(np.linalg.norm(_grads(theta, X, y), axis=1), 90))  # the bug
    for _ in range(CLIP_STEPS):
        g = _grads(theta, X, y)
        g = g / np.maximum(1.0, np.linalg.norm(g, axis=1, keepdims=True) / clip)
        theta = theta - LR * (g.sum(0) + rng.normal(0, CLIP_SIGMA * clip, X.shape[1])) / len(X)
    return {"model": Linear(theta), "clip": clip, "lr": LR}


def clip_fixed(data, seed, canary):
    """The same with the clipping norm fixed in advance: correct, and still a dict release."""
    X, y = data
    rng = np.random.default_rng(seed)
    theta, clip = np.zeros(X.shape[1]), 1.0
    for _ in range(CLIP_STEPS):
        g = _grads(theta, X, y)
        g = g / np.maximum(1.0, np.linalg.norm(g, axis=1, keepdims=True) / clip)
        theta = theta - LR * (g.sum(0) + rng.normal(0, CLIP_SIGMA * clip, X.shape[1])) / len(X)
    return {"model": Linear(theta), "clip": clip, "history": [LR, float(theta @ theta)]}


COPIES, SIGMA, STEPS, RATE, C = 8, 2.0, 30, 0.1, 1.0
AUGMENTED_CLAIM = DpsgdBase(SIGMA, STEPS, RATE, "pld").epsilon(DELTA)  # rows counted as people


def augmented(data, seed, canary):
    """DP-SGD on rows augmented COPIES times, Poisson-sampled at RATE as if each were a person."""
    X, y = data
    rng = np.random.default_rng(seed)
    Xa = np.repeat(X, COPIES, axis=0) + rng.normal(0, 0.01, (len(X) * COPIES, X.shape[1]))
    ya = np.repeat(y, COPIES)
    theta = np.zeros(X.shape[1])
    for _ in range(STEPS):
        take = rng.random(len(Xa)) < RATE
        g = _grads(theta, Xa[take], ya[take])
        g = g / np.maximum(1.0, np.linalg.norm(g, axis=1, keepdims=True) / C)
        grads = [g.sum(0)]
        canary.step(grads, sample_rate=RATE, max_grad_norm=C)
        theta = theta - LR * (grads[0] + rng.normal(0, SIGMA * C, X.shape[1]))
    return Linear(theta)


def test_release_fields_read_every_number_of_a_release():
    torch = pytest.importorskip("torch")
    release = {
        "model": Linear([0.0, 0.0, 0.0, 1.0]),
        "initial": [np.zeros(4)],
        "lr": 0.1,
        "steps": 7,
        "clip": np.float32(1.5),
        "weights": np.arange(6.0).reshape(2, 3),
        "tensor": torch.tensor([1.0, 2.0]),
        "one": torch.tensor(3.0),
        "history": [0.5, 0.25],
        "runs": [{"lr": 0.2, "name": "a"}, {"lr": 0.3, "acc": np.array([0.9])}],
        "net": torch.nn.Linear(2, 1),
        "note": "text",
        "nothing": None,
    }
    got = release_fields(release, INPUT)
    want_canary = -float(np.logaddexp(0.0, 4.0) - 4.0)  # minus the loss of (x, 1): logit 4
    assert got == pytest.approx(
        {
            "canary": want_canary,
            "lr": 0.1,
            "steps": 7.0,
            "clip": 1.5,
            "weights": 15.0,
            "tensor": 3.0,
            "one": 3.0,
            "history": 0.75,
            "runs[0].lr": 0.2,
            "runs[1].lr": 0.3,
            "runs[1].acc": 0.9,
        }
    )
    assert list(got)[0] == "canary"
    assert FieldScores(("clip", "lr"))(release, INPUT).tolist() == [1.5, 0.1]


def test_the_clipping_norm_leak_is_refuted_field_by_field_and_flagged_by_the_plan():
    every = FieldScores(probe_fields(clip_leak, DATA, INPUT))
    kw_on = dict(data=DATA, canary=INPUT)
    kw = dict(delta=DELTA, claimed_epsilon=CLIP_CLAIM)
    plan = plan_pipeline(Pipeline(clip_leak, every, **kw_on), pilot=300, games=400, **kw)
    assert set(plan.fields) == {"canary", "clip", "lr"}
    assert "clip" in plan.flagged and "lr" not in plan.flagged  # (the canary's own may be)
    assert plan.games_to_refute is not None
    audit = audit_pipeline(Pipeline(clip_leak, every, **kw_on), games=400, report=NO_PANEL, **kw)
    fields = audit.result["pipeline"]["fields"]
    assert audit.refuted and fields["best"] == "clip" and audit.eps == fields["eps"]["clip"]
    assert fields["confidence_each"] == pytest.approx(1 - 0.05 / 3)
    # the model alone (the canary's score) does not see it
    alone = audit_pipeline(
        Pipeline(clip_leak, default_score, **kw_on), games=400, report=NO_PANEL, **kw
    )
    assert not alone.refuted and alone.eps < fields["eps"]["clip"]


def test_a_correct_dict_release_keeps_its_claim_field_by_field():
    every = FieldScores(probe_fields(clip_fixed, DATA, INPUT))
    kw_on = dict(data=DATA, canary=INPUT)
    kw = dict(delta=DELTA, claimed_epsilon=CLIP_CLAIM)
    audit = audit_pipeline(Pipeline(clip_fixed, every, **kw_on), games=400, report=NO_PANEL, **kw)
    eps = audit.result["pipeline"]["fields"]["eps"]
    assert set(eps) == {"canary", "clip", "history"} and eps["clip"] == 0.0
    assert not audit.refuted and audit.eps <= CLIP_CLAIM
    plan = plan_pipeline(Pipeline(clip_fixed, every, **kw_on), pilot=100, games=400, **kw)
    assert plan.flagged in ((), ("history",))


@pytest.mark.slow  # a statistical run: two refuting audits of 1500 games
def test_augmented_rows_counted_as_people_are_refuted_by_the_input_canary_only():
    kw = dict(delta=DELTA, claimed_epsilon=AUGMENTED_CLAIM, games=1500, report=NO_PANEL)
    gradient = audit_pipeline(Pipeline(augmented, data=DATA, canary=GRADIENT), **kw)
    assert not gradient.refuted  # it takes the sample rate and one row = one person as given
    both = audit_pipeline(Pipeline(augmented, data=DATA, canary=(INPUT, GRADIENT)), **kw)
    assert both.refuted and both.games == 3000 and both.confidence == 0.95
    by_kind = {c["canary"]["kind"]: c for c in both.result["canaries"]}
    assert by_kind["input"]["refuted"] and not by_kind["gradient"]["refuted"]
    assert by_kind["input"]["confidence"] == pytest.approx(0.975)
    assert both.eps == by_kind["input"]["eps"] > AUGMENTED_CLAIM


@pytest.mark.slow  # reason: two statistical audits of the documented route (10 CPU s)
def test_the_documented_default_route_refutes_both_bugs_of_the_issue():
    """The tutorial's route: canary="both" (an InputCanary and a GradientCanary chosen from
    the data and a probe run), the default score (learned from a pilot), plan then audit:
    the clipping-norm leak and the augmented rows are both refuted, with no canary chosen by
    hand; the correct dict release is not."""
    person, gradient = default_canaries(augmented, DATA)
    assert np.argmax(np.abs(np.asarray(person.x) - X.mean(axis=0))) == D - 1  # the empty feature
    kw_on = dict(data=DATA, canary="both")
    kw = dict(delta=DELTA, report=ReportOptions(panel=False))
    clip = audit_pipeline(Pipeline(clip_leak, **kw_on), games=400, claimed_epsilon=CLIP_CLAIM, **kw)
    by_kind = {c["canary"]["kind"]: c for c in clip.result["canaries"]}
    assert clip.refuted and by_kind["input"]["refuted"] and not by_kind["gradient"]["refuted"]
    rows = audit_pipeline(
        Pipeline(augmented, **kw_on), games=1500, claimed_epsilon=AUGMENTED_CLAIM, **kw
    )
    assert rows.refuted and rows.games == 3000 and rows.confidence == 0.95
    fixed = audit_pipeline(
        Pipeline(clip_fixed, **kw_on), games=400, claimed_epsilon=CLIP_CLAIM, **kw
    )
    assert not fixed.refuted
    plan = plan_pipeline(
        Pipeline(clip_leak, data=DATA, canary="both"),
        delta=DELTA,
        claimed_epsilon=CLIP_CLAIM,
        pilot=300,
    )
    assert "'clip'" in plan.canaries[0].score and plan.games_to_refute is not None
