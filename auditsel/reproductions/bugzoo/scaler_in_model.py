"""Bug: the private rows' mean and standard deviation ship inside the model, as its scaler.

`correct_opacus` (logistic regression on the zoo's breast-cancer rows, Opacus, Poisson
sampling), but the author standardises the features inside the model, so that it takes raw
inputs: a `Scaled` module whose buffers `mean` and `std` are computed from the training rows it
is trained on (the private data, no noise), in front of the private linear layer. The release is
the winning model with its buffers. The claim is `correct_opacus`'s (`from_opacus`: it accounts
the optimizer, not the buffers).

Correct eps: inf, exactly: the released mean is a deterministic function of the private rows,
so adding one row moves it to a value the release without that row never takes.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import correct_opacus as reference
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval, run_objects
from auditsel.rounds import Poisson

BUG = "the private rows' mean and std shipped inside the model as its scaler"
TRAIN, claim, NULL = reference.TRAIN, reference.claim, reference.CANARY


class Scaled(torch.nn.Module):
    """A linear model on standardised inputs: (x - mean) / std, then a zero-initialised
    linear layer; mean and std are buffers (saved with the model)."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, X: torch.Tensor) -> None:
        super().__init__()
        std = X.std(dim=0)
        self.register_buffer("mean", X.mean(dim=0))
        self.register_buffer("std", torch.where(std > 0, std, torch.ones_like(std)))
        self.linear = torch.nn.Linear(X.shape[1], 1)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear((x - self.mean) / self.std)


def train(train_data: TrainData, lr: float, canary: Canary) -> tuple[Scaled, Any, Any, Any]:
    """One private run of `correct_opacus`'s loop on a `Scaled` model."""
    net = Scaled(train_data[0])  # the scaler, fitted on the private rows (the bug)
    model, optimizer, loader, engine = reference.make_private(net, train_data, lr)
    canary.attach(optimizer)
    reference.run_epochs(model, optimizer, loader)
    return net, optimizer, loader, engine


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    trained = reference.runs(seed, lambda lr: train(train_data, lr, canary)[0])
    return reference.best_of(Scaled(train_data[0]), trained)


def correct_interval(delta: float) -> Interval:
    return math.inf, math.inf, "exact: the scaler is computed from the private rows, no noise"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    torch.manual_seed(seed)
    model, optimizer, loader, engine = train(TRAIN, reference.LEARNING_RATES[0], NULL)
    trained = (model, [optimizer], loader, engine)
    return run_objects(trained, Poisson(reference.MEAN_RUNS), claim, TRAIN, tune(TRAIN, seed, NULL))
