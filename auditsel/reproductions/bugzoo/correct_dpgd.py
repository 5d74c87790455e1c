"""A correct hand-written DP-GD tuning run (PyTorch): the reference the buggy pipelines edit.

Logistic regression on the zoo's data (`zoo_data`), full-batch DP gradient descent: STEPS
steps, each example's gradient clipped to CLIP, Gaussian noise of standard deviation
NOISE * CLIP added to the clipped sum, divided by the (public) batch size. Random search:
K ~ Poisson(MEAN_RUNS) runs, each with a learning rate drawn from LEARNING_RATES; the run with
the best validation accuracy is released with its learning rate (K = 0: the initial model).

The author's claim: one run is DpsgdBase(NOISE, STEPS, 1.0) (dp_accounting's RDP accountant),
the tuning run the smallest rigorous tuning bound for Poisson(MEAN_RUNS) under [XWW24]'s
monotone-score assumption (`author_claims.monotone_claim`; at sample rate 1 the exact reduced
game). For any selection score the tuning run's epsilon is the any-score interval
(`correct_interval`), above that claim.

The audit: a GradientCanary on the padding weight, added to the clipped sum by
`canary.step(...)`; the score is the released model's move along it per unit learning rate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from auditsel.mechanisms import DpsgdBase
from auditsel.pipelines.canaries import Canary, GradientCanary
from auditsel.reproductions.bugzoo import zoo_data
from auditsel.reproductions.bugzoo.author_claims import any_score_interval, monotone_claim
from auditsel.reproductions.bugzoo.zoo_data import TrainData, clip_rows
from auditsel.reproductions.bugzoo.zoo_objects import Interval, run_objects
from auditsel.rounds import Poisson, RoundsLaw

BUG = None
NOISE, CLIP, STEPS = 4.0, 1.0, 4
BATCH = zoo_data.TRAIN_SIZE  # full batch: the public batch size the sum is divided by
LEARNING_RATES = (0.25, 0.5, 1.0, 2.0, 4.0)
MEAN_RUNS = 10

TRAIN, VALIDATION = zoo_data.load()
CANARY = GradientCanary(coordinate=zoo_data.PAD)


def clipped_sum(
    X: torch.Tensor, y: torch.Tensor, w: torch.Tensor, b: torch.Tensor
) -> list[torch.Tensor]:
    """The sum over the examples of their logistic-loss gradients, each clipped to CLIP."""
    residual = torch.sigmoid(X @ w + b) - y  # d loss / d logit, one per example
    grad_w, grad_b = residual[:, None] * X, residual[:, None]
    return clip_rows([grad_w, grad_b], CLIP)


def privatize(grads: list[torch.Tensor], clip: float) -> list[torch.Tensor]:
    """`train`'s clip-and-noise step as `check_pipeline(privatizer=...)` takes it: the flat
    clipped sum plus noise NOISE * clip, drawn from torch's default generator (`train` draws
    the same noise from its own)."""
    return [s + torch.normal(0.0, NOISE * clip, s.shape) for s in clip_rows(grads, clip)]


def train(
    train_data: TrainData,
    lr: float,
    generator: torch.Generator,
    canary: Canary,
    noise: float = NOISE * CLIP,
    batch: int = BATCH,
) -> list[torch.Tensor]:
    """One DP-GD run: [weight, bias]; `noise` the standard deviation added to the clipped sum,
    `batch` what the noisy sum is divided by."""
    X, y = train_data
    w, b = torch.zeros(X.shape[1]), torch.zeros(1)
    for _ in range(STEPS):
        summed = clipped_sum(X, y, w, b)
        canary.step(summed, sample_rate=1.0, max_grad_norm=CLIP)  # a no-op outside an audit
        noisy = [s + torch.normal(0.0, noise, s.shape, generator=generator) for s in summed]
        w, b = w - lr * noisy[0] / batch, b - lr * noisy[1] / batch
    return [w, b]


def validation_accuracy(model: Sequence[torch.Tensor]) -> float:
    X, y = VALIDATION
    w, b = model
    return float(((X @ w + b > 0) == (y > 0.5)).float().mean())


def initial_release() -> dict[str, Any]:
    return {"model": [torch.zeros(zoo_data.PAD + 1), torch.zeros(1)], "lr": 0.0, "accuracy": -1.0}


TrainOne = Callable[[TrainData, float, torch.Generator, Canary], list[torch.Tensor]]


def runs(
    train_data: TrainData, seed: int, canary: Canary, train_one: TrainOne = train
) -> Iterator[tuple[float, list[torch.Tensor]]]:
    """(lr, model) of K ~ Poisson(MEAN_RUNS) runs of `train_one`, lr drawn from LEARNING_RATES."""
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(rng.poisson(MEAN_RUNS)):
        lr = float(rng.choice(LEARNING_RATES))
        yield lr, train_one(train_data, lr, generator, canary)


def best_of(candidates: Iterable[tuple[float, list[torch.Tensor]]]) -> dict[str, Any]:
    """The release of the best (lr, model) on the validation set (the first on ties)."""
    best = initial_release()
    for lr, model in candidates:
        if (accuracy := validation_accuracy(model)) > best["accuracy"]:
            best = {"model": model, "lr": lr, "accuracy": accuracy}
    return best


def random_search(
    train_data: TrainData, seed: int, canary: Canary, train_one: TrainOne = train
) -> dict[str, Any]:
    """K ~ Poisson(MEAN_RUNS) runs of `train_one`, the best on the validation set released."""
    return best_of(runs(train_data, seed, canary, train_one))


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return random_search(train_data, seed, canary)


def score(release: Mapping[str, Any], canary: Canary) -> float:
    return canary.score(release) / release["lr"] if release["lr"] else 0.0


def claim(delta: float) -> float:
    return monotone_claim(DpsgdBase(NOISE, STEPS, 1.0), Poisson(MEAN_RUNS), delta)


def correct_interval(delta: float) -> Interval:
    """The run is what the claim accounts, but the claim is [XWW24]'s monotone-score value: for
    any selection score the tuning run's epsilon lies in the any-score interval, above it."""
    lower, upper = any_score_interval(DpsgdBase(NOISE, STEPS, 1.0), Poisson(MEAN_RUNS), delta)
    return lower, upper, "any score: the claim's run (DP-GD, noise 4, 4 steps)"


def hand_objects(
    seed: int,
    train_one: TrainOne = train,
    tune_run: Callable[[TrainData, int, Canary], Any] | None = None,
    *,
    claimed: Callable[[float], float] | None = None,
    rounds: RoundsLaw | None = None,
) -> dict[str, Any]:
    """`zoo_objects.run_objects` of a hand-written DP-GD run (no module, optimizer, loader or
    engine): this module's claim and law of K unless given, the run the claim accounts as `base`,
    and `privatize` as the `privatizer` when each run is this module's `train`."""
    if tune_run is None:
        release = random_search(TRAIN, seed, CANARY, train_one)
    else:
        release = tune_run(TRAIN, seed, CANARY)
    law = Poisson(MEAN_RUNS) if rounds is None else rounds
    base, step = DpsgdBase(NOISE, STEPS, 1.0), privatize if train_one is train else None
    claimed = claim if claimed is None else claimed
    return run_objects(
        (None, [], None, None), law, claimed, TRAIN, release, base=base, privatizer=step
    )


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    return hand_objects(seed)
