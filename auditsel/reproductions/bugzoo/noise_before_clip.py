"""Bug: the noise is added to each example's gradient before clipping, and none after.

A hand-written DP-SGD loop (`hand_dpsgd`: digits, MLP 64-8-10 with a fixed init, Poisson
sampling at rate 0.2, 5 steps, the grid of `correct_opacus_mlp`, K ~ TNB(1, 0.5)) whose author
"adds Gaussian noise of standard deviation NOISE * C to every example's gradient, then clips"
and sums. Clipping then removes most of the noise (each noisy gradient has norm about
NOISE * C * sqrt(parameters) and is cut to C), and an example whose own gradient is far larger
than its noise passes through at norm C, in its own direction, against only the other examples'
clipped noise. Claimed as DP-SGD with noise multiplier NOISE (`hand_dpsgd.claim`).

Correct eps: none bounded: no theorem covers noise that is clipped away.
"""

from __future__ import annotations

from typing import Any

import torch

from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import hand_dpsgd
from auditsel.reproductions.bugzoo.zoo_data import TrainData, clip_rows
from auditsel.reproductions.bugzoo.zoo_objects import Interval

BUG = "noise added to each example's gradient before clipping (none after)"
TRAIN, claim = hand_dpsgd.TRAIN, hand_dpsgd.claim
SHAPE: dict[str, Any] = {"hidden": (8,), "last_bias": True}  # the MLP 64-8-10


def privatize(grads: list[torch.Tensor], clip: float, canary: Canary) -> list[torch.Tensor]:
    noisy = [g + torch.normal(0.0, hand_dpsgd.NOISE * clip, g.shape) for g in grads]  # the bug
    summed = clip_rows(noisy, clip)
    canary.step(summed, sample_rate=hand_dpsgd.RATE, max_grad_norm=clip)
    return summed  # "the noise is already in"


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return hand_dpsgd.random_search(train_data, seed, canary, privatize, **SHAPE)


def correct_interval(delta: float) -> Interval:
    return None, None, "none bounded: the noise is clipped away with the gradient"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    return hand_dpsgd.hand_objects(seed, privatize, **SHAPE)
