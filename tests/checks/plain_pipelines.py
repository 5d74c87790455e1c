"""Small plain-torch pipelines for the checks: each with one bug, and the correct one.

A hand-written DP optimizer (`HandDP`) declares Opacus's public `noise_multiplier` and
`max_grad_norm` attributes, so the checks read it without Opacus.
"""

import numpy as np
import torch

from auditsel import DpsgdBase

ROWS, FEATURES = 64, 3
BASE = DpsgdBase(1.0, 8, 0.25, "pld")  # the run the claim describes


def data(duplicate: int = 1) -> torch.utils.data.TensorDataset:
    """64 rows of 3 features and a label; with `duplicate` > 1, row 5 copied over rows 6, ..."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(ROWS, FEATURES, generator=g)
    y = (X[:, 0] > 0).float()
    for i in range(1, duplicate):
        X[5 + i], y[5 + i] = X[5], y[5]
    return torch.utils.data.TensorDataset(X, y)


class HandDP(torch.optim.SGD):
    """A hand-written DP-SGD optimizer: it declares its noise and clipping norm."""

    def __init__(self, params, lr=0.1, noise_multiplier=1.0, max_grad_norm=1.0):
        super().__init__(params, lr=lr)
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm


class Scaled(torch.nn.Module):
    """A linear model that standardises its input with a stored mean and scale."""

    def __init__(self, mean, scale):
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.float32))
        self.linear = torch.nn.Linear(FEATURES, 1)

    def forward(self, x):
        return self.linear((x - self.mean) / self.scale)


def train(model, optimizers, loader, epochs=1):
    """A plain loop (the noise is not the point here: the checks read the objects)."""
    loss = torch.nn.BCEWithLogitsLoss()
    model.train()
    for _ in range(epochs):
        for xb, yb in loader:
            for o in optimizers:
                o.zero_grad()
            loss(model(xb).squeeze(-1), yb).backward()
            for o in optimizers:
                o.step()
    return model


def loader(dataset, batch=16, shuffle=True):
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch, shuffle=shuffle, generator=torch.Generator().manual_seed(0)
    )


def column_stats(dataset):
    X = dataset.tensors[0].numpy().astype(float)
    return X.mean(0), X.std(0)


def constant_stats():
    return np.full(FEATURES, 0.5), np.full(FEATURES, 2.0)
