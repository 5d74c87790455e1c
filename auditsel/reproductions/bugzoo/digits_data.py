"""The zoo's second data set: scikit-learn's digits (offline), 8 x 8 images as 64 features in
[0, 1] and labels 0-9, split into 1,000 training and 797 validation rows (torch float32 rows,
int64 labels), and the new user's model: an MLP 64-8-10 (`mlp()`), initialised from torch's
global generator (a random init per game: an audit seeds that generator with the game's seed).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from sklearn.datasets import load_digits

TRAIN_SIZE = 1000
HIDDEN = 8
CLASSES = 10
TrainData = tuple[torch.Tensor, torch.Tensor]  # (X, y): float32 rows and int64 labels

torch.set_num_threads(1)  # tiny models: threads only cost (and fix the float sums' order)


def load() -> tuple[TrainData, TrainData]:
    """((X_train, y_train), (X_val, y_val)): 1,000 and 797 rows, 64 features in [0, 1]."""
    X, y = load_digits(return_X_y=True)
    X, y = torch.tensor(X / 16.0, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)
    return (X[:TRAIN_SIZE], y[:TRAIN_SIZE]), (X[TRAIN_SIZE:], y[TRAIN_SIZE:])


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
