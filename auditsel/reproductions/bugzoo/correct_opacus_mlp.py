"""A correct Opacus tuning run as a new user writes it: an MLP with a random init per seed.

scikit-learn's digits (`zoo_data.load_digits`: 1,000 training rows), an MLP 64-8-10 initialised from
torch's global generator (a new init every run, from the game's seed), made private by
`opacus.PrivacyEngine`: Poisson sampling at rate BATCH / 1,000 = 0.2, noise multiplier NOISE,
one epoch (STEPS = 5 expected batches). Random search over LEARNING_RATES x CLIPS:
K ~ TNB(ETA, NU) runs ([PS22]; here geometric, E[K] = 2), the best on the validation rows
released with its learning rate, clipping norm and accuracy.

The author's claim: `auditsel.from_opacus` on one run (at the grid's largest clipping norm: the
noise is NOISE times each run's own norm, so every run is the same DpsgdBase) with the law of K,
the interval's upper end for any score (`OpacusRun.tuning_epsilon`). Correct eps: that
interval (`OpacusRun.interval`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch
from opacus import PrivacyEngine

from auditsel.pipelines.canaries import Canary, GradientCanary
from auditsel.pipelines.opacus import OpacusRun, from_opacus
from auditsel.reproductions.bugzoo import zoo_data
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import (
    Interval,
    make_private,
    run_objects,
    tuning_claim,
)
from auditsel.rounds import TruncatedNegativeBinomial

BUG = None
NOISE, BATCH, EPOCHS = 2.0, 200, 1
LEARNING_RATES = (2.0, 5.0, 10.0)
CLIPS = (0.5, 1.0, 2.0)
GRID = tuple(itertools.product(LEARNING_RATES, CLIPS))
ETA, NU = 1.0, 0.5
ROUNDS = TruncatedNegativeBinomial(ETA, NU)

TRAIN, VALIDATION = zoo_data.load_digits()
NULL = GradientCanary(coordinate=0)  # unbound: a no-op (the claim's run, outside any game)


def train(
    train_data: TrainData, lr: float, clip: float, canary: Canary
) -> tuple[torch.nn.Module, Any, Any, PrivacyEngine]:
    """One private run: (the trained MLP, its optimizer, loader and engine)."""
    net = zoo_data.mlp()  # a random init, from the game's seeded generator
    model, optimizer, loader, engine = make_private(
        net, train_data, lr, batch=BATCH, noise=NOISE, clip=clip
    )
    canary.attach(optimizer)  # a no-op unless this game's coin put the canary in
    loss = torch.nn.CrossEntropyLoss()
    for _ in range(EPOCHS):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss(model(xb), yb).backward()
            optimizer.step()
    return net, optimizer, loader, engine


def runs(seed: int, train_one: Callable[[float, float], Any]) -> Iterator[tuple[float, float, Any]]:
    """(lr, clip, train_one(lr, clip)) of K ~ ROUNDS runs, (lr, clip) drawn from GRID."""
    rng = np.random.default_rng(seed)
    for _ in range(int(ROUNDS.sample(1, rng)[0])):
        lr, clip = GRID[int(rng.integers(len(GRID)))]
        yield lr, clip, train_one(lr, clip)


def best_of(candidates: Iterable[tuple[float, float, torch.nn.Module]]) -> dict[str, Any]:
    """The release of the best (lr, clip, model) on the validation rows (the first on ties)."""
    best: dict[str, Any] = {"accuracy": -1.0}
    for lr, clip, model in candidates:
        if (accuracy := zoo_data.accuracy(model, VALIDATION)) > best["accuracy"]:
            best = {"model": model, "lr": lr, "clip": clip, "accuracy": accuracy}
    return best


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return best_of(runs(seed, lambda lr, clip: train(train_data, lr, clip, canary)[0]))


def opacus_run(delta: float) -> OpacusRun:
    _, optimizer, loader, engine = train(TRAIN, LEARNING_RATES[0], CLIPS[-1], NULL)
    return from_opacus(engine, optimizer=optimizer, data_loader=loader, delta=delta, rounds=ROUNDS)


def claim(delta: float) -> float:
    return tuning_claim(opacus_run(delta))


def correct_interval(delta: float) -> Interval:
    """The claim's own interval: the run is what Opacus accounts."""
    interval = opacus_run(delta).interval
    assert interval is not None  # from_opacus with rounds
    return interval.lower, interval.upper, "any score: the claim's interval (Poisson sampling)"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    torch.manual_seed(seed)
    model, optimizer, loader, engine = train(TRAIN, LEARNING_RATES[0], CLIPS[-1], NULL)
    return run_objects(
        (model, [optimizer], loader, engine), ROUNDS, claim, TRAIN, tune(TRAIN, seed, NULL)
    )
