"""The zoo's data: scikit-learn's breast-cancer set (offline), standardised, with a padding
feature, split into 400 training and 169 validation rows (torch float32 tensors).

The padding feature (column `PAD` = 30, 0 in every row) is the auditor's one change to the
data: its weight is moved by nothing but the noise and the canary, so a canary on it (a
`GradientCanary(coordinate=PAD)`, or an `InputCanary` whose only non-zero feature is PAD) is
[XWW24]'s worst-case Dirac canary. The parameters of every zoo model are (weight, bias) in
that order, so that flat coordinate PAD is the padding feature's weight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer

from auditsel.pipelines.canaries import flat_parameters

PAD = 30
TRAIN_SIZE = 400
TrainData = tuple[torch.Tensor, torch.Tensor]  # (X, y): float32 rows and labels in {0, 1}

torch.set_num_threads(1)  # tiny models: threads only cost (and fix the float sums' order)


def load() -> tuple[TrainData, TrainData]:
    """((X_train, y_train), (X_val, y_val)): 400 and 169 rows, 31 features, labels in {0, 1}."""
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    X = np.hstack([X, np.zeros((len(X), 1))])
    X, y = torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    return (X[:TRAIN_SIZE], y[:TRAIN_SIZE]), (X[TRAIN_SIZE:], y[TRAIN_SIZE:])


def spike(height: float) -> np.ndarray:
    """An input with `height` on the padding feature and 0 elsewhere: an InputCanary whose
    clipped gradient is (almost) C on the padding weight while it is misclassified."""
    x = np.zeros(PAD + 1, dtype=np.float32)
    x[PAD] = height
    return x


def padding_weight(release: Mapping[str, Any]) -> float:
    """The released model's padding weight per unit of its learning rate (0 for K = 0): the
    score of the example canaries `spike(h)` with label 1, which push it up."""
    return float(flat_parameters(release)[PAD]) / release["lr"] if release["lr"] else 0.0
