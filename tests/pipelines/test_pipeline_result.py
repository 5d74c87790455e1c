"""The typed result.json of a pipeline audit (`auditsel.pipelines.pipeline_result`) describes
what the audits write: every key an audit writes is declared, every required key is written,
and every value has its declared type (checked from the TypedDicts' own annotations, so a
writer and its type cannot drift apart)."""

import types
import typing
from typing import Any, Union

import numpy as np
import pytest

from auditsel import (
    GaussianBase,
    GradientCanary,
    InputCanary,
    Poisson,
    ReportOptions,
    audit_pipeline,
)
from auditsel.pipelines.pipeline import Pipeline
from auditsel.pipelines.pipeline_result import PipelineEntry, PipelineResult
from auditsel.pipelines.release_scores import FieldScores, probe_fields
from auditsel.pipelines.sequential import audit_until_refuted

DELTA = 1e-5


def conforms(value: Any, hint: Any, path: str = "result") -> list[str]:
    """Where `value` differs from the type `hint` (TypedDicts, list, dict, unions, scalars)."""
    if hint is Any:
        return []
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a dict"]
        hints = typing.get_type_hints(hint)
        problems = [f"{path}: {k} missing" for k in sorted(hint.__required_keys__ - set(value))]
        problems += [f"{path}: {k} not declared" for k in sorted(set(value) - set(hints))]
        for key in sorted(set(value) & set(hints)):
            problems += conforms(value[key], hints[key], f"{path}.{key}")
        return problems
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        tries = [conforms(value, a, path) for a in args]
        return [] if any(not t for t in tries) else [f"{path}: {value!r} is none of {hint}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        return [p for i, v in enumerate(value) for p in conforms(v, args[0], f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a dict"]
        return [p for k, v in value.items() for p in conforms(v, args[1], f"{path}.{k}")]
    if hint is type(None):
        return [] if value is None else [f"{path}: {value!r}, not None"]
    if hint is float:  # JSON's numbers: an int is a float too, a bool is not
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: {value!r}, not a float"]
    if hint is int and isinstance(value, bool):
        return [f"{path}: {value!r}, not an int"]
    return [] if isinstance(value, hint) else [f"{path}: {value!r}, not {hint}"]


class Linear:
    """A released linear model (parameters(): for GradientCanary)."""

    def __init__(self, theta):
        self.theta = np.asarray(theta, dtype=float)

    def __call__(self, batch):
        return np.asarray(batch, dtype=float) @ self.theta

    def parameters(self):
        return [self.theta]


_rng = np.random.default_rng(0)
X = np.concatenate([_rng.normal(0, 1, (20, 2)), np.zeros((20, 1))], axis=1)
DATA = (X, (X[:, 0] > 0).astype(float))
INPUT = InputCanary(x=[0.0, 0.0, 3.0], y=1)
GRADIENT = GradientCanary(coordinate=2)


def noisy_step(data, seed, canary):
    """One noisy gradient step on the last coordinate; releases the model and the step size."""
    X, y = data
    rng = np.random.default_rng(seed)
    grads = [np.array([0.0, 0.0, float(np.sum(X[:, 2] * y))])]
    canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
    theta = -(grads[0] + rng.normal(0, 1.0, 3))
    return {"model": Linear(theta), "lr": 1.0}


def test_a_field_by_field_audit_with_a_claim_and_bounds_writes_what_its_type_declares():
    every = FieldScores(probe_fields(noisy_step, DATA, GRADIENT))  # field by field
    audit = audit_pipeline(
        Pipeline(noisy_step, every, data=DATA, canary=GRADIENT),
        games=64,
        delta=DELTA,
        claimed_epsilon=1.0,
        report=ReportOptions(panel=False, base=GaussianBase(1.0), rounds=Poisson(2.0)),
    )
    assert conforms(audit.result, PipelineResult) == []
    assert conforms(audit.to_dict(), PipelineResult) == []
    entry = audit.result["pipeline"]
    assert {"fields", "reproducibility"} <= set(entry)  # both optional sections written here
    assert set(PipelineEntry.__optional_keys__) == {"fields", "reproducibility"}
    assert audit.result["claim"] == {"epsilon": 1.0, "refuted": audit.refuted}
    assert audit.result["pipeline"]["fields"]["eps"][
        audit.result["pipeline"]["fields"]["best"]
    ] == (audit.eps)


def test_several_canaries_and_early_stopping_write_what_their_types_declare():
    both = audit_pipeline(
        Pipeline(noisy_step, data=DATA, canary=(INPUT, GRADIENT)),
        games=32,
        delta=DELTA,
        report=ReportOptions(panel=False),
    )
    assert conforms(both.result, PipelineResult) == []
    assert [c["canary"]["kind"] for c in both.result["canaries"]] == ["input", "gradient"]
    early = audit_until_refuted(
        Pipeline(noisy_step, data=DATA, canary=GRADIENT),
        games=64,
        looks=2,
        claimed_epsilon=0.5,
        delta=DELTA,
        report=ReportOptions(panel=False),
    )
    assert conforms(early.result, PipelineResult) == []
    seen = early.result["sequential"]["seen"]
    assert seen[-1]["games"] == early.result["sequential"]["stopped_at"]


@pytest.mark.parametrize(
    "value, problem",
    [
        ({"pipeline": {"tune": "t"}}, "result.pipeline: score missing"),
        ({"claim": {"epsilon": 1.0, "refuted": None, "extra": 1}}, "extra not declared"),
        ({"claim": {"epsilon": "1", "refuted": None}}, "result.claim.epsilon: '1', not a float"),
        ({"sequential": {"looks": [1, True]}}, "result.sequential.looks[1]: True, not an int"),
        ({"git_dirty": 1}, "result.git_dirty: 1 is none of"),
    ],
)
def test_the_check_catches_a_missing_key_an_undeclared_key_and_a_wrong_type(value, problem):
    assert any(problem in p for p in conforms(value, PipelineResult))
