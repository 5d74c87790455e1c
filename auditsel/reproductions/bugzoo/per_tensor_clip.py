"""Bug: each parameter tensor clipped to C, the noise calibrated to C (per-tensor clipping
accounted as flat clipping).

A hand-written DP-SGD loop (`hand_dpsgd`: digits, an MLP 64-16-8-10 whose last layer has no
bias: 5 parameter tensors, a fixed init, Poisson sampling at rate 0.2, 5 steps, the grid of
`correct_opacus_mlp`, K ~ TNB(1, 0.5)) that clips each example's gradient tensor by tensor, each
of the 5 to norm C, and adds noise NOISE * C to the sum as flat clipping would. An example's
whole gradient then has norm up to C * sqrt(5): the run is DP-SGD with noise multiplier
NOISE / sqrt(5), claimed as NOISE (`hand_dpsgd.claim`).

Correct eps: the any-score interval of DP-SGD with noise NOISE / sqrt(TENSORS), STEPS steps at
rate RATE, K ~ TNB(1, 0.5) (the sensitivity C sqrt(5) is reached by an example whose gradient
has norm at least C in every tensor).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from auditsel.mechanisms import DpsgdBase
from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import hand_dpsgd
from auditsel.reproductions.bugzoo.author_claims import any_score_interval
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval

BUG = "each of 5 tensors clipped to C, the noise calibrated to C (per-tensor claimed as flat)"
TENSORS = 5
SHAPE: dict[str, Any] = {"hidden": (16, 8), "last_bias": False}  # 5 tensors
TRAIN, claim = hand_dpsgd.TRAIN, hand_dpsgd.claim


def privatize(grads: list[torch.Tensor], clip: float, canary: Canary) -> list[torch.Tensor]:
    summed = []
    for g in grads:  # "clip every layer's gradient to C"
        norms = g.reshape(len(g), -1).norm(dim=1)
        factor = (clip / norms.clamp(min=1e-12)).clamp(max=1.0)
        summed.append((g * factor.reshape(-1, *[1] * (g.dim() - 1))).sum(0))
    canary.step(summed, sample_rate=hand_dpsgd.RATE, max_grad_norm=clip)
    return [s + torch.normal(0.0, hand_dpsgd.NOISE * clip, s.shape) for s in summed]


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return hand_dpsgd.random_search(train_data, seed, canary, privatize, **SHAPE)


def correct_interval(delta: float) -> Interval:
    noise = hand_dpsgd.NOISE / math.sqrt(TENSORS)
    base = DpsgdBase(noise, hand_dpsgd.STEPS, hand_dpsgd.RATE)
    lower, upper = any_score_interval(base, hand_dpsgd.ROUNDS, delta)
    return lower, upper, f"any score: DP-SGD with noise {noise:.4g} (sensitivity C sqrt(5))"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    return hand_dpsgd.hand_objects(seed, privatize, **SHAPE)
