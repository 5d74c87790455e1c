"""Checks before games: the bugs a black-box game cannot see, read from the pipeline's objects.

`check_pipeline(RunObjects(model=..., optimizers=..., data_loader=..., engine=..., rounds=...,
delta=..., dataset=..., release=..., claim=..., base=..., privatizer=...))` reads the objects of
one run of your training (each optional; keyword-only) and returns a list of `Finding`s, each naming the object that
contradicts the claim, how, the claim's epsilon as the bug changes it where it can be computed,
and the fix (docs/howto/check-your-pipeline.md). The checks, in order (`CHECKS`):

* `parameters_outside_dp`, `sampling`, `settings`, `per_layer_clipping`
  (`auditsel.pipelines.checks.training`: optimizers, loader, accountant; and the sensitivity
  probe of a hand-written loop's clip-and-noise step, `auditsel.pipelines.checks.privatizer`);
* `data_dependent_state`, `duplicates` (`auditsel.pipelines.checks.data`: the one-row probe and
  the dataset's rows);
* `release_runs` (`auditsel.pipelines.checks.release`: one release of `tune`).

They read public torch and Opacus attributes only and never import Opacus, so a plain torch
loop is checked with what it has. Nothing is trained: the only code run is the probe of
`data_dependent_state` (forward passes, state restored) and the privatizer probe's seeded calls
on made-up gradients. A correct pipeline gets no finding.
"""

from auditsel.pipelines.checks.finding import BREAKS, WARNING, Finding
from auditsel.pipelines.checks.runner import CHECKS, RunObjects, check_pipeline

__all__ = ["BREAKS", "CHECKS", "WARNING", "Finding", "RunObjects", "check_pipeline"]
