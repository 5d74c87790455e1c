"""The zoo's data, scikit-learn's (offline) as torch tensors, and the digits pipelines' model.

* `load()`: the breast-cancer set, standardised, with a padding feature, split into 400 training
  and 169 validation rows (float32 rows, labels in {0, 1}). The padding feature (column `PAD` =
  30, 0 in every row) is the auditor's one change to the data: its weight is moved by nothing
  but the noise and the canary, so a canary on it (a `GradientCanary(coordinate=PAD)`, or an
  `InputCanary` whose only non-zero feature is PAD) is [XWW24]'s worst-case Dirac canary. The
  parameters of every breast-cancer model are (weight, bias) in that order, so that flat
  coordinate PAD is the padding feature's weight.
* `load_digits()`: the digits, 8 x 8 images as 64 features in [0, 1] and labels 0-9, split into
  1,000 training and 797 validation rows (float32 rows, int64 labels), and the new user's
  model: an MLP 64-8-10 (`mlp()`), initialised from torch's global generator (a random init per
  game: an audit seeds that generator with the game's seed).

`clip_rows` is the flat per-example clipping of the zoo's hand-written loops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch
from sklearn import datasets

from auditsel.pipelines.canaries import flat_parameters

PAD = 30
TRAIN_SIZE = 400
DIGITS_TRAIN_SIZE = 1000
HIDDEN = 8
CLASSES = 10
TrainData = tuple[torch.Tensor, torch.Tensor]  # (X, y): float32 rows and their labels

torch.set_num_threads(1)  # tiny models: threads only cost (and fix the float sums' order)


def load() -> tuple[TrainData, TrainData]:
    """((X_train, y_train), (X_val, y_val)): 400 and 169 rows, 31 features, labels in {0, 1}."""
    X, y = datasets.load_breast_cancer(return_X_y=True)
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


def clip_rows(grads: list[torch.Tensor], clip: float) -> list[torch.Tensor]:
    """The sum over the examples (dim 0) of their gradients, each example's whole gradient
    (all tensors together) clipped to `clip`: flat clipping."""
    norms = torch.sqrt(cast(torch.Tensor, sum((g.reshape(len(g), -1) ** 2).sum(1) for g in grads)))
    factor = (clip / norms.clamp(min=1e-12)).clamp(max=1.0)
    return [(g * factor.reshape(-1, *[1] * (g.dim() - 1))).sum(0) for g in grads]


def load_digits() -> tuple[TrainData, TrainData]:
    """((X_train, y_train), (X_val, y_val)): 1,000 and 797 rows, 64 features in [0, 1]."""
    X, y = datasets.load_digits(return_X_y=True)
    X, y = torch.tensor(X / 16.0, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)
    n = DIGITS_TRAIN_SIZE
    return (X[:n], y[:n]), (X[n:], y[n:])


def mlp(hidden: Sequence[int] = (HIDDEN,), last_bias: bool = True) -> torch.nn.Sequential:
    """An MLP 64-(hidden)-10 with ReLUs, torch's default init (from the global generator)."""
    layers: list[torch.nn.Module] = []
    width = 64
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, CLASSES, bias=last_bias))
    return torch.nn.Sequential(*layers)


def accuracy(model: torch.nn.Module, data: TrainData) -> float:
    """The fraction of `data`'s rows that `model` labels right."""
    X, y = data
    with torch.no_grad():
        return float((model(X).argmax(-1) == y).float().mean())
