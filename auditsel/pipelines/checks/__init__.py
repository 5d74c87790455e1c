"""Checks before games: the bugs a black-box game cannot see, read from the pipeline's objects.

`check_pipeline(model=..., optimizers=..., data_loader=..., engine=..., rounds=..., delta=...,
dataset=..., release=..., claim=..., base=...)` reads the objects of one run of your training
(each optional; keyword-only) and returns a list of `Finding`s, each naming the object that
contradicts the claim, how, the claim's epsilon as the bug changes it where it can be computed,
and the fix (docs/howto/check-your-pipeline.md). The checks, in order (`CHECKS`):

* `parameters_outside_dp`, `sampling`, `settings`, `per_layer_clipping`
  (`auditsel.pipelines.checks.training`: optimizers, loader, accountant);
* `data_dependent_state`, `duplicates` (`auditsel.pipelines.checks.data`: the one-row probe and
  the dataset's rows);
* `release_runs` (`auditsel.pipelines.checks.release`: one release of `tune`).

They read public torch and Opacus attributes only (`param_groups`, `noise_multiplier`,
`max_grad_norm`, `max_grad_norms`, `sample_rate`, `batch_sampler`, `accountant.history`,
`get_epsilon`, buffers) and never import Opacus, so a plain torch loop is checked with what it
has. Nothing is trained: the one model run is the probe of `data_dependent_state`, forward
passes with the state restored. A correct pipeline gets no finding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from auditsel.errors import ConfigError, number
from auditsel.mechanisms import DpsgdBase
from auditsel.pipelines.checks.data import data_dependent_state, duplicates
from auditsel.pipelines.checks.finding import BREAKS, WARNING, Context, Finding
from auditsel.pipelines.checks.release import release_runs
from auditsel.pipelines.checks.training import (
    parameters_outside_dp,
    per_layer_clipping,
    sampling,
    settings,
)
from auditsel.rounds import RoundsLaw

__all__ = ["BREAKS", "CHECKS", "WARNING", "Finding", "check_pipeline"]

#: name -> check, in the order they run
CHECKS: dict[str, Callable[[Context], list[Finding]]] = {
    "parameters_outside_dp": parameters_outside_dp,
    "sampling": sampling,
    "settings": settings,
    "per_layer_clipping": per_layer_clipping,
    "data_dependent_state": data_dependent_state,
    "duplicates": duplicates,
    "release_runs": release_runs,
}


def check_pipeline(
    *,
    model: Any = None,
    optimizers: Sequence[Any] | Any = None,
    data_loader: Any = None,
    engine: Any = None,
    rounds: RoundsLaw | None = None,
    delta: float | None = None,
    dataset: Any = None,
    release: Any = None,
    claim: float | None = None,
    base: DpsgdBase | None = None,
) -> list[Finding]:
    """The findings of every check on the objects of one run of your training.

    Args:
        model: the trained model (a torch module; Opacus's wrapped module too).
        optimizers: every optimizer the training used (one, or a list): Opacus's DPOptimizer
            and any plain one beside it.
        data_loader: the loader that fed the training.
        engine: the `opacus.PrivacyEngine` (its accountant's history), or None.
        rounds: the law of K the claim assumes (None: the claim is for one run).
        delta: the claim's delta, in (0, 1).
        dataset: the training rows (a torch Dataset, arrays; default: the loader's dataset).
        release: one release of your `tune` (what is published).
        claim: the claimed epsilon.
        base: one run as a DpsgdBase, when there is no engine to read it from.

    Returns:
        The findings, "breaks" ones first; empty when no check finds anything.

    Raises:
        auditsel.errors.ConfigError: a bad `delta`, `claim`, `rounds` or `base`.
    """
    if delta is not None:
        delta = number(delta, "delta", 0, 1, lo_open=True, hi_open=True)
    if claim is not None:
        claim = number(claim, "claim", 0, float("inf"))
    if rounds is not None and not isinstance(rounds, RoundsLaw):
        raise ConfigError("rounds", "must be a law of K (auditsel.Poisson(3), ...) or None")
    if base is not None and not isinstance(base, DpsgdBase):
        raise ConfigError("base", "must be an auditsel.DpsgdBase or None")
    if optimizers is None:
        optimizers = []
    elif not isinstance(optimizers, (list, tuple)):
        optimizers = [optimizers]
    ctx = Context(
        model=model, optimizers=list(optimizers), data_loader=data_loader, engine=engine,
        rounds=rounds, delta=delta, dataset=dataset, release=release, claim=claim, base=base,
    )  # fmt: skip
    findings = [finding for check in CHECKS.values() for finding in check(ctx)]
    return sorted(findings, key=lambda f: f.severity != BREAKS)
