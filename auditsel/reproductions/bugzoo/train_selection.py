"""Bug: the winner is chosen by its loss on the private training data.

Each run is correct DP-GD (`correct_dpgd.train`), but the author has no validation split and
releases the run with the lowest *training* loss. A run's training loss is not a function of
its DP output alone: it reads every training example again, without noise. The [PS22] and
[KRW24] tuning bounds assume a selection score computed from each run's DP output (or from
public data), so the claim (`correct_dpgd`'s) does not apply.

The audit: an example canary, `InputCanary(x, 1)` with x = 10^4 on the padding feature. While
the padding weight w is negative its training loss is about 10^4 |w|, which outweighs the other
400 losses: with the canary in, the selection avoids every run whose w is negative, so the
released w is negative only when all K runs' are (probability E[2^-K]-ish), against 1/2 without
the canary. The score is the released w per unit learning rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import batch_clipping, correct_dpgd
from auditsel.reproductions.bugzoo.correct_dpgd import initial_release, train
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval

BUG = "selection score computed on the private training data"
CANARY, score = batch_clipping.CANARY, batch_clipping.score
TRAIN, claim = correct_dpgd.TRAIN, correct_dpgd.claim


def training_loss(train_data: TrainData, model: Sequence[torch.Tensor]) -> float:
    X, y = train_data
    w, b = model
    return float(torch.nn.functional.binary_cross_entropy_with_logits(X @ w + b, y))


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    best, best_loss = initial_release(), np.inf
    for lr, model in correct_dpgd.runs(train_data, seed, canary):
        if (loss := training_loss(train_data, model)) < best_loss:
            best, best_loss = {"model": model, "lr": lr}, loss
    return best


def correct_interval(delta: float) -> Interval:
    return None, None, "none: no tuning theorem covers a selection that reads the private data"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    return correct_dpgd.hand_objects(seed, train, tune)
