"""A new user's Opacus tuning pipeline (issue 36): sklearn digits, an MLP 64-8-10 with a random
init drawn from each game's seed, Poisson rate 0.2, 5 steps, a grid of learning rate {2, 5, 10}
x clipping norm {0.5, 1, 2}, K ~ TNB(1, 0.5) trials of grid points drawn at random, the trial
of best validation accuracy released as {model, lr, clip, accuracy}.

`make_tune(noise_scale)` builds the tuning run: noise_scale 1 is the correct pipeline (noise
multiplier NOISE, what the accountant is told), 0.2 trains with a fifth of it (the bug "noise
divided by 5") and 0 with none, while the claim (`claim()`) stays the correct one's.
`release_initial=True` is the one change docs/tutorials/audit-your-pipeline.md asks of a
random-init pipeline: release the initial weights too (they do not depend on the data), so that
a score can read the displacement from them.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np
import torch
from opacus import PrivacyEngine
from sklearn.datasets import load_digits

from auditsel import TruncatedNegativeBinomial, from_opacus

NOISE, RATE, STEPS, DELTA = 2.0, 0.2, 5, 1e-5
LEARNING_RATES, CLIPS = (2.0, 5.0, 10.0), (0.5, 1.0, 2.0)
ROUNDS = TruncatedNegativeBinomial(1.0, 0.5)


@functools.cache
def data() -> tuple[torch.utils.data.TensorDataset, torch.Tensor, torch.Tensor]:
    """(training set, validation inputs, validation labels): digits scaled to [0, 1]."""
    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X / 16.0, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.long)
    return torch.utils.data.TensorDataset(X[:1400], y[:1400]), X[1400:], y[1400:]


def _train(train: Any, lr: float, clip: float, noise: float, canary: Any, seed: int) -> Any:
    torch.manual_seed(seed)  # the random init, drawn from the game's seed
    model = torch.nn.Sequential(torch.nn.Linear(64, 8), torch.nn.ReLU(), torch.nn.Linear(8, 10))
    initial = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loader = torch.utils.data.DataLoader(train, batch_size=int(RATE * len(train)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant="rdp")
        model, optimizer, loader = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=noise,
            max_grad_norm=clip,
            poisson_sampling=True,
        )
    canary.attach(optimizer)
    loss = torch.nn.CrossEntropyLoss()
    steps = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while steps < STEPS:
            for xb, yb in loader:
                if steps == STEPS:
                    break
                optimizer.zero_grad()
                if len(xb):
                    loss(model(xb), yb).backward()
                optimizer.step()
                steps += 1
    return model._module, initial, (engine, optimizer, loader)


def _accuracy(model: Any) -> float:
    _, X_val, y_val = data()
    with torch.no_grad():
        return float((model(X_val).argmax(dim=1) == y_val).float().mean())


def make_tune(noise_scale: float = 1.0, *, release_initial: bool = False) -> Any:
    """The tuning run (module docstring), training with NOISE * noise_scale."""

    def tune(train: Any, seed: int, canary: Any) -> dict[str, Any]:
        torch.set_num_threads(1)
        rng = np.random.default_rng(seed)
        k = int(ROUNDS.sample(1, rng)[0])
        best: tuple[float, dict[str, Any]] | None = None
        for trial in range(k):
            lr = float(rng.choice(LEARNING_RATES))
            clip = float(rng.choice(CLIPS))
            model, initial, _ = _train(
                train, lr, clip, NOISE * noise_scale, canary, seed * 64 + trial
            )
            accuracy = _accuracy(model)
            if best is None or accuracy > best[0]:
                release = {"model": model, "lr": lr, "clip": clip, "accuracy": accuracy}
                if release_initial:
                    release["initial"] = initial
                best = (accuracy, release)
        assert best is not None
        return best[1]

    tune.__name__ = tune.__qualname__ = f"tune_noise_x{noise_scale:g}"
    return tune


def claim() -> Any:
    """`from_opacus` on one run of the correct pipeline: its claim for K ~ ROUNDS."""
    train, _, _ = data()
    _, _, (engine, optimizer, loader) = _train(train, 2.0, 1.0, NOISE, _Out(), 0)
    return from_opacus(engine, optimizer=optimizer, data_loader=loader, delta=DELTA, rounds=ROUNDS)


class _Out:
    def attach(self, optimizer: Any) -> Any:
        return optimizer
