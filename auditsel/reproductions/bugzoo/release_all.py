"""Bug: every candidate's model is released, not only the winner.

The runs are `correct_dpgd`'s, but the tuning run publishes the whole sweep: every run's model,
learning rate and validation accuracy (a results table with its checkpoints), and marks the
best. The author still claims the tuning bound for releasing the winner of K ~
Poisson(MEAN_RUNS) runs; what is released is K runs, composed.

The audit: `correct_dpgd`'s gradient canary; the score is the likelihood ratio of all released
runs. Each run's move along the canary per unit learning rate, divided by its noise
NOISE * CLIP * sqrt(STEPS) / BATCH, is z_i ~ N(mu, 1) with the canary and N(0, 1) without, mu =
sqrt(STEPS) / NOISE; the log-likelihood ratio of the K runs is mu * sum(z_i) - K mu^2 / 2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import correct_dpgd
from auditsel.reproductions.bugzoo.author_claims import released_runs_epsilon
from auditsel.reproductions.bugzoo.correct_dpgd import (
    BATCH,
    CLIP,
    MEAN_RUNS,
    NOISE,
    STEPS,
    train,
    validation_accuracy,
)
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval
from auditsel.rounds import Poisson

BUG = "every candidate's model released, not only the winner"
CANARY, TRAIN, claim = (correct_dpgd.CANARY, correct_dpgd.TRAIN, correct_dpgd.claim)
MU = math.sqrt(STEPS) / NOISE  # one run's shift along the canary, in units of its noise


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    trials = correct_dpgd.runs(train_data, seed, canary)
    runs: list[dict[str, Any]] = [
        {"model": m, "lr": lr, "accuracy": validation_accuracy(m)} for lr, m in trials
    ]
    best = max(range(len(runs)), key=lambda i: runs[i]["accuracy"], default=None)
    return {"runs": runs, "best": best}


def score(release: Mapping[str, Any], canary: Canary) -> float:
    unit = NOISE * CLIP * math.sqrt(STEPS) / BATCH
    z = [canary.score(run) / run["lr"] / unit for run in release["runs"]]
    return MU * sum(z) - len(z) * MU**2 / 2


def correct_interval(delta: float) -> Interval:
    """Exact: the release is every run (no selection score enters)."""
    value = released_runs_epsilon(MU, Poisson(MEAN_RUNS), delta)
    return value, value, "exact: K runs composed"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    return correct_dpgd.hand_objects(seed, train, tune)
