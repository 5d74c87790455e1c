"""Bug: early stopping on the raw training loss, and the step it stopped at released.

`correct_opacus` (logistic regression on the zoo's breast-cancer rows, Opacus, Poisson
sampling at rate BATCH / 400), trained for up to MAX_EPOCHS epochs, but after every step the
author evaluates the loss on the whole private training set (no clipping, no noise) and stops
once it has not improved for PATIENCE steps; the release records the step it stopped at
(`steps`), as a training log does. The claim is `from_opacus` for the most steps a run can take
(MAX_EPOCHS epochs), and the tuning bound of K ~ Poisson(MEAN_RUNS) (any score).

Correct eps: none bounded: the stopping step is computed from the private rows without noise,
and no theorem bounds what it releases. (A second, smaller leak sits in the same field: Opacus's
loader takes ceil(rows / BATCH) steps an epoch, so a run with one more row that never stops
takes MAX_EPOCHS more steps, 22 rather than 20.)
"""

from __future__ import annotations

from typing import Any

import torch

from auditsel.pipelines.canaries import Canary
from auditsel.pipelines.opacus import from_opacus
from auditsel.reproductions.bugzoo import correct_opacus as reference
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval, run_objects, tuning_claim
from auditsel.rounds import Poisson

BUG = "early stopping on the raw training loss, the stop step released"
MAX_EPOCHS, PATIENCE = 2, 2
MAX_STEPS = MAX_EPOCHS * reference.TRAIN[0].shape[0] // reference.BATCH
TRAIN, NULL, MEAN_RUNS = reference.TRAIN, reference.CANARY, reference.MEAN_RUNS


def train(train_data: TrainData, lr: float, canary: Canary) -> tuple[Any, int, Any, Any, Any]:
    """One private run, stopped early: (model, steps taken, optimizer, loader, engine)."""
    model, optimizer, loader, engine = reference.make_private(
        reference.zero_model(), train_data, lr
    )
    canary.attach(optimizer)
    loss = torch.nn.BCEWithLogitsLoss()
    X, y = train_data
    best, since, step = float("inf"), 0, 0
    for _ in range(MAX_EPOCHS):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss(model(xb).squeeze(-1), yb).backward()
            optimizer.step()
            step += 1
            with torch.no_grad():  # the raw training loss (the bug)
                current = float(loss(model(X).squeeze(-1), y))
            best, since = (current, 0) if current < best else (best, since + 1)
            if since >= PATIENCE:
                return model, step, optimizer, loader, engine
    return model, step, optimizer, loader, engine


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    best: dict[str, Any] = {"model": reference.zero_model(), "lr": 0.0, "accuracy": -1.0}
    best["steps"] = 0
    for lr, (model, steps, *_) in reference.runs(seed, lambda lr: train(train_data, lr, canary)):
        if (accuracy := reference.validation_accuracy(model)) > best["accuracy"]:
            best = {"model": model, "lr": lr, "accuracy": accuracy, "steps": steps}
    return best


def claim(delta: float) -> float:
    _, _, optimizer, loader, engine = train(TRAIN, reference.LEARNING_RATES[0], NULL)
    rounds, loaded = Poisson(MEAN_RUNS), {"optimizer": optimizer, "data_loader": loader}
    return tuning_claim(from_opacus(engine, **loaded, delta=delta, rounds=rounds, steps=MAX_STEPS))


def correct_interval(delta: float) -> Interval:
    return None, None, "none bounded: the stop step reads the private rows without noise"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    torch.manual_seed(seed)
    model, _, optimizer, loader, engine = train(TRAIN, reference.LEARNING_RATES[0], NULL)
    trained = (model, [optimizer], loader, engine)
    return run_objects(trained, Poisson(MEAN_RUNS), claim, TRAIN, tune(TRAIN, seed, NULL))
