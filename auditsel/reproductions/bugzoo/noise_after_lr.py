"""Bug: the noise is added to the weights after the learning-rate step, not scaled by it.

`correct_dpgd` (full-batch DP-GD on the zoo's breast-cancer rows, K ~ Poisson(10) runs over
five learning rates), but the author adds the noise to the updated weights, `w - lr * mean
gradient + N(0, (NOISE * CLIP / BATCH)^2)`, instead of to the gradient before the step: the
noise is not multiplied by lr. Against the gradient's scale the noise multiplier is NOISE / lr:
16 at lr 0.25 (more private than claimed), 1 at lr 4 (four times less). Claimed as
`correct_dpgd`.

Correct eps: at most the any-score upper end of DP-GD with noise multiplier NOISE / max(lr)
(every run is a post-processing of that one: lr is public and released); no lower end is
computed here (the learning rate is random).
"""

from __future__ import annotations

from typing import Any

import torch

from auditsel.mechanisms import DpsgdBase
from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import correct_dpgd as reference
from auditsel.reproductions.bugzoo.author_claims import any_score_interval
from auditsel.reproductions.bugzoo.correct_dpgd import (
    BATCH,
    CLIP,
    LEARNING_RATES,
    MEAN_RUNS,
    NOISE,
    STEPS,
    clipped_sum,
)
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval
from auditsel.rounds import Poisson

BUG = "noise added after the learning-rate step, not scaled by it"
TRAIN, claim, NULL = reference.TRAIN, reference.claim, reference.CANARY


def train(
    train_data: TrainData, lr: float, generator: torch.Generator, canary: Canary
) -> list[torch.Tensor]:
    X, y = train_data
    w, b = torch.zeros(X.shape[1]), torch.zeros(1)
    for _ in range(STEPS):
        summed = clipped_sum(X, y, w, b)
        canary.step(summed, sample_rate=1.0, max_grad_norm=CLIP)
        w, b = w - lr * summed[0] / BATCH, b - lr * summed[1] / BATCH  # the step ...
        sigma = NOISE * CLIP / BATCH  # ... then the noise of the mean gradient, not times lr
        w = w + torch.normal(0.0, sigma, w.shape, generator=generator)
        b = b + torch.normal(0.0, sigma, b.shape, generator=generator)
    return [w, b]


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return reference.random_search(train_data, seed, canary, train)


def correct_interval(delta: float) -> Interval:
    noise = NOISE / max(LEARNING_RATES)
    _, upper = any_score_interval(DpsgdBase(noise, STEPS, 1.0), Poisson(MEAN_RUNS), delta)
    return (
        None,
        upper,
        f"any score, upper end: DP-GD with noise {noise:g} (lr {max(LEARNING_RATES):g})",
    )


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    return reference.hand_objects(seed, train)
