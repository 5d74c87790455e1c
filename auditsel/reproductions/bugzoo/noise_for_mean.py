"""Bug: the noise is scaled for the mean gradient but added to the sum.

The author averages the clipped gradients and reasons that the noise of the *mean* has standard
deviation NOISE * CLIP / BATCH; the line that adds it, though, adds it to the clipped *sum*,
which is divided by BATCH afterwards. The noise is BATCH = 400 times too small: the run is
DP-GD with noise multiplier NOISE / BATCH = 0.01, accounted as NOISE = 4.

Everything else is `correct_dpgd` (the same claim, canary and score).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import torch

from auditsel.mechanisms import GaussianBase
from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import correct_dpgd as reference
from auditsel.reproductions.bugzoo.author_claims import any_score_interval
from auditsel.reproductions.bugzoo.correct_dpgd import BATCH, CLIP, MEAN_RUNS, NOISE, STEPS
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval
from auditsel.rounds import Poisson

BUG = "noise scaled for the mean instead of the sum"
CANARY, TRAIN, claim, score = (reference.CANARY, reference.TRAIN, reference.claim, reference.score)
#: `correct_dpgd.train` with the noise of the mean gradient, NOISE * CLIP / BATCH, added to the
#: sum (the bug)
train = partial(reference.train, noise=NOISE * CLIP / BATCH)


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return reference.random_search(train_data, seed, canary, train)


def correct_interval(delta: float) -> Interval:
    """The run is DP-GD with noise multiplier NOISE / BATCH: the any-score interval of its
    Gaussian (the attack overflows this far from private: the rigorous upper end alone)."""
    mu = math.sqrt(STEPS) * BATCH / NOISE
    lower, upper = any_score_interval(GaussianBase(mu), Poisson(MEAN_RUNS), delta)
    return lower, upper, f"any score: the Gaussian of the noise it adds (mu = {mu:g})"


def privatize(grads: list[torch.Tensor], clip: float) -> list[torch.Tensor]:
    """`train`'s clip-and-noise step as `check_pipeline(privatizer=...)` takes it: the flat
    clipped sum plus the mean's noise NOISE * clip / BATCH, drawn from torch's default generator
    (`train` draws the same noise from its own)."""
    sigma = NOISE * clip / BATCH  # the noise of the mean gradient, added to the sum
    return [s + torch.normal(0.0, sigma, s.shape) for s in reference.clip_rows(grads, clip)]


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    """One seeded run's objects (`zoo_objects.run_objects`): a hand-written loop, no optimizer;
    its clip-and-noise step as the `privatizer`."""
    return {**reference.hand_objects(seed, train), "privatizer": privatize}
