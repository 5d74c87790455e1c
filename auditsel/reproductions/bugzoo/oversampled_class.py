"""Bug: the rare class oversampled 9x, its rows then counted as people.

`correct_dpgd` (full-batch DP-GD on the zoo's breast-cancer rows, K ~ Poisson(10) runs over
five learning rates), but the author balances the classes first: every row of the less frequent
label is repeated COPIES = 9 times, and DP-GD runs on the augmented rows (the mean over them).
The accounting counts rows as people: one person of the rare class is 9 rows, whose clipped
gradients move each step's sum by up to 9 * CLIP against the noise NOISE * CLIP. Claimed as
`correct_dpgd`.

Correct eps: the any-score interval of full-batch DP-GD with noise multiplier NOISE / COPIES
(a person of the rare class; one of the other class costs the claim's).
"""

from __future__ import annotations

from typing import Any

import torch

from auditsel.mechanisms import DpsgdBase
from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import correct_dpgd as reference
from auditsel.reproductions.bugzoo.author_claims import any_score_interval
from auditsel.reproductions.bugzoo.correct_dpgd import MEAN_RUNS, NOISE, STEPS
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval
from auditsel.rounds import Poisson

BUG = "the rare class oversampled 9x, its rows counted as people"
COPIES = 9
TRAIN, claim = reference.TRAIN, reference.claim


def oversample(train_data: TrainData) -> TrainData:
    """Every row of the less frequent label repeated COPIES times (the bug's balancing)."""
    X, y = train_data
    rare = float(y.mean() < 0.5)  # labels in {0, 1}: 1 when it is the rarer, else 0
    repeats = torch.where(y == rare, COPIES, 1)
    return X.repeat_interleave(repeats, dim=0), y.repeat_interleave(repeats)


def train(
    train_data: TrainData, lr: float, generator: torch.Generator, canary: Canary
) -> list[torch.Tensor]:
    """`correct_dpgd.train` on the oversampled rows, the sum divided by their number."""
    X, y = oversample(train_data)
    return reference.train((X, y), lr, generator, canary, batch=len(X))


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return reference.random_search(train_data, seed, canary, train)


def correct_interval(delta: float) -> Interval:
    base = DpsgdBase(NOISE / COPIES, STEPS, 1.0)
    lower, upper = any_score_interval(base, Poisson(MEAN_RUNS), delta)
    return lower, upper, f"any score: DP-GD with noise {NOISE / COPIES:.4g} (9 rows a person)"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    """One seeded run's objects (`zoo_objects.run_objects`): a hand-written loop, no optimizer;
    the dataset is the rows the loop trains on (the oversampled ones, as the author has them)."""
    out = reference.hand_objects(seed, train)
    out["dataset"] = torch.utils.data.TensorDataset(*oversample(TRAIN))
    return out
