"""Checked by mypy in CI (pyproject's [tool.mypy] files), never run: audits of your own
pipeline as a type checker sees them. Each `# type: ignore[code]` marks an error mypy must find
there: with `warn_unused_ignores`, a line that stops being an error fails the check."""

from __future__ import annotations

from typing import Any

import numpy as np

from auditsel import (
    AuditOptions,
    GradientCanary,
    InputCanary,
    PipelineAudit,
    PipelinePlan,
    ReportOptions,
    audit_pipeline,
    audit_until_refuted,
    plan_pipeline,
)
from auditsel.pipelines.canaries import Canary
from auditsel.pipelines.pipeline import Pipeline
from auditsel.pipelines.pipeline_result import FieldsEntry, LookEntry


def tune(data: tuple[np.ndarray, np.ndarray], seed: int, canary: Canary) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    grads = [np.zeros(3)]
    canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
    return {"model": grads[0] + rng.normal(size=3), "lr": 0.1}


def score(release: dict[str, Any], canary: Canary) -> float:
    return float(release["lr"])


DATA = (np.zeros((4, 3)), np.zeros(4))

# --- what type checks -------------------------------------------------------------------------
audit: PipelineAudit = audit_pipeline(
    Pipeline(
        tune, data=DATA, canary=(InputCanary(x=[0.0, 0.0, 1.0], y=1), GradientCanary(coordinate=2))
    ),
    games=64,
    delta=1e-5,
    statistics=AuditOptions(confidence=0.9, rule="split"),
    report=ReportOptions(panel=False),
)
eps: float = audit.eps
fields: FieldsEntry = audit.result["pipeline"]["fields"]
field_eps: dict[str, float] = fields["eps"]
canary_eps: list[float] = [c["eps"] for c in audit.result["canaries"]]
early = audit_until_refuted(
    Pipeline(tune, score, data=DATA, canary=GradientCanary(coordinate=2)),
    games=64,
    delta=1e-5,
    claimed_epsilon=1.0,
)
looks: list[LookEntry] = early.result["sequential"]["seen"]
stopped: int = early.result["sequential"]["stopped_at"]
plan: PipelinePlan = plan_pipeline(
    Pipeline(tune, data=DATA, canary=GradientCanary(coordinate=2)), delta=1e-5, target_eps=1.0
)

# --- what must not type check -----------------------------------------------------------------
audit.result["pipline"]  # type: ignore[typeddict-item]
bad_best: float = audit.result["pipeline"]["fields"]["best"]  # type: ignore[assignment]
bad_seen: int = early.result["sequential"]["seen"]  # type: ignore[assignment]
audit_pipeline(Pipeline(tune, data=DATA, canary="dirac"), games=64, delta=1e-5)  # type: ignore[arg-type]
AuditOptions(rule=3)  # type: ignore[arg-type]
