"""Bug: the noise is scaled for the mean gradient but added to the sum.

The author averages the clipped gradients and reasons that the noise of the *mean* has standard
deviation NOISE * CLIP / BATCH; the line that adds it, though, adds it to the clipped *sum*,
which is divided by BATCH afterwards. The noise is BATCH = 400 times too small: the run is
DP-GD with noise multiplier NOISE / BATCH = 0.01, accounted as NOISE = 4.

Everything else is `correct_dpgd` (the same claim, canary and score).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from auditsel.mechanisms import GaussianBase
from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import correct_dpgd as reference
from auditsel.reproductions.bugzoo.author_claims import tuning_epsilon
from auditsel.reproductions.bugzoo.correct_dpgd import (
    BATCH,
    CLIP,
    MEAN_RUNS,
    NOISE,
    STEPS,
    clipped_sum,
)
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.rounds import Poisson

BUG = "noise scaled for the mean instead of the sum"
# the same as in correct_dpgd:
CANARY, TRAIN, claim, score = (
    reference.CANARY,
    reference.TRAIN,
    reference.claim,
    reference.score,
)


def train(
    train_data: TrainData, lr: float, generator: torch.Generator, canary: Canary
) -> list[torch.Tensor]:
    X, y = train_data
    w, b = torch.zeros(X.shape[1]), torch.zeros(1)
    for _ in range(STEPS):
        summed = clipped_sum(X, y, w, b)
        canary.step(summed, sample_rate=1.0, max_grad_norm=CLIP)
        sigma = NOISE * CLIP / BATCH  # the noise of the mean gradient ...
        noisy = [s + torch.normal(0.0, sigma, s.shape, generator=generator) for s in summed]
        w, b = w - lr * noisy[0] / BATCH, b - lr * noisy[1] / BATCH  # ... added to the sum
    return [w, b]


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return reference.random_search(train_data, seed, canary, train)


def correct_epsilon(delta: float) -> tuple[float | None, str]:
    """The run is DP-GD with noise multiplier NOISE / BATCH: accounted like the claim."""
    mu = math.sqrt(STEPS) * BATCH / NOISE
    value = tuning_epsilon(GaussianBase(mu), Poisson(MEAN_RUNS), delta)
    return value, f"rigorous bound for the noise it adds (mu = {mu:g})"
