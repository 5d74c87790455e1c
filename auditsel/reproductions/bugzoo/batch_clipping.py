"""Bug: the batch's gradient is clipped instead of each example's.

The author computes the mean loss of the batch, calls `torch.nn.utils.clip_grad_norm_` on the
model (which clips the *batch's* gradient to CLIP) and adds the noise of DP-GD's mean gradient,
NOISE * CLIP / BATCH. No example's own gradient is ever clipped: one example with a large
gradient moves the clipped mean by up to 2 * CLIP, not CLIP / BATCH, so the noise is
2 * BATCH = 800 times too small for it. Accounted as `correct_dpgd` (the same claim).

The audit: a gradient canary cannot show it (`canary.step` adds a gradient that is already
clipped), so the canary is an example, `InputCanary(x, 1)` with x = 10^4 on the padding
feature: its logistic-loss gradient is about 10^4 / 2 on the padding weight while it is
misclassified. The score is the released padding weight per unit learning rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from auditsel.mechanisms import GaussianBase
from auditsel.pipelines.canaries import Canary, InputCanary
from auditsel.reproductions.bugzoo import correct_dpgd as reference
from auditsel.reproductions.bugzoo import zoo_data
from auditsel.reproductions.bugzoo.author_claims import any_score_interval
from auditsel.reproductions.bugzoo.correct_dpgd import BATCH, CLIP, MEAN_RUNS, NOISE, STEPS
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval
from auditsel.rounds import Poisson

BUG = "the canary's gradient not clipped (the batch's gradient clipped instead of each example's)"
TRAIN, claim = reference.TRAIN, reference.claim
CANARY = InputCanary(zoo_data.spike(1e4), 1.0)


def train(
    train_data: TrainData, lr: float, generator: torch.Generator, canary: Canary
) -> list[torch.Tensor]:
    X, y = train_data
    model = torch.nn.Linear(X.shape[1], 1)
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    loss = torch.nn.BCEWithLogitsLoss()
    for _ in range(STEPS):
        model.zero_grad()
        loss(model(X).squeeze(-1), y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)  # "clip the gradients"
        with torch.no_grad():
            for p in model.parameters():
                assert p.grad is not None  # backward() gave every parameter its gradient
                noise = torch.normal(0.0, NOISE * CLIP / BATCH, p.shape, generator=generator)
                p.sub_(lr * (p.grad + noise))  # in place, as `p -= ...`
    return [model.weight.detach().reshape(-1), model.bias.detach()]


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return reference.random_search(train_data, seed, canary, train)


def score(release: Mapping[str, Any], canary: Canary) -> float:
    return zoo_data.padding_weight(release)


def correct_interval(delta: float) -> Interval:
    """One example moves the clipped mean gradient by up to 2 CLIP (against the CLIP / BATCH
    that the noise NOISE * CLIP / BATCH is for): each step is a Gaussian mechanism with
    mu = 2 BATCH / NOISE (the attack overflows this far from private: the rigorous upper end
    alone)."""
    mu = 2 * math.sqrt(STEPS) * BATCH / NOISE
    lower, upper = any_score_interval(GaussianBase(mu), Poisson(MEAN_RUNS), delta)
    return lower, upper, f"any score: sensitivity 2 C per step (mu = {mu:g})"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    """One seeded run's objects (`zoo_objects.run_objects`): `clip_grad_norm_` and a hand-written
    update, no optimizer object."""
    return reference.hand_objects(seed, train)
