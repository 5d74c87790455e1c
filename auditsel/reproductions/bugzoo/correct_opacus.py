"""A correct Opacus tuning run: Poisson sampling, per-example clipping, the claim from Opacus.

Logistic regression on the zoo's data (`zoo_data`) made private by `opacus.PrivacyEngine`:
Poisson sampling at rate BATCH / 400, clipping norm CLIP, noise multiplier NOISE, EPOCHS epochs.
Random search: K ~ Poisson(MEAN_RUNS) runs with learning rates drawn from LEARNING_RATES, the
best on the validation set released with its learning rate.

The author's claim: `auditsel.from_opacus` on one run's engine, optimizer and loader (Opacus's
PRV accountant for the run) with the law of K: the smallest rigorous tuning bound for any score
(`OpacusRun.tuning_epsilon`), the upper end of `correct_interval`.

The audit: a GradientCanary on the padding weight, attached to Opacus's DPOptimizer (added to
the clipped sum at the sample rate Opacus charges); the score is the released model's move
along it per unit learning rate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import numpy as np
import torch
from opacus import PrivacyEngine

from auditsel.pipelines.canaries import Canary, GradientCanary
from auditsel.pipelines.opacus import OpacusRun, from_opacus
from auditsel.reproductions.bugzoo import correct_dpgd, zoo_data, zoo_objects
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval, run_objects, tuning_claim
from auditsel.rounds import Poisson

BUG = None
score = correct_dpgd.score
NOISE, CLIP, BATCH, EPOCHS = 1.0, 1.0, 40, 1
LEARNING_RATES = (0.25, 0.5, 1.0, 2.0)
MEAN_RUNS = 3
POISSON_SAMPLING = True

(X_TRAIN, Y_TRAIN), (X_VAL, Y_VAL) = zoo_data.load()
TRAIN = (X_TRAIN, Y_TRAIN)
CANARY = GradientCanary(coordinate=zoo_data.PAD)


def zero_model() -> torch.nn.Linear:
    model = torch.nn.Linear(X_TRAIN.shape[1], 1)
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    return model


#: (model, optimizer, loader, engine) of `PrivacyEngine.make_private` (`zoo_objects.make_private`:
#: SGD, batches of BATCH, clipping norm CLIP, noise multiplier NOISE) for a net, the rows and lr
make_private = partial(zoo_objects.make_private, batch=BATCH, noise=NOISE, clip=CLIP)


def run_epochs(model: torch.nn.Module, optimizer: Any, loader: Any) -> None:
    """EPOCHS epochs of the logistic loss."""
    loss = torch.nn.BCEWithLogitsLoss()
    for _ in range(EPOCHS):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss(model(xb).squeeze(-1), yb).backward()
            optimizer.step()


def train(
    train_data: TrainData, lr: float, canary: Canary, poisson_sampling: bool = POISSON_SAMPLING
) -> tuple[torch.nn.Module, PrivacyEngine, Any, Any]:
    model, optimizer, loader, engine = make_private(
        zero_model(), train_data, lr, poisson_sampling=poisson_sampling
    )
    canary.attach(optimizer)  # a no-op unless this game's coin put the canary in
    run_epochs(model, optimizer, loader)
    return model, engine, optimizer, loader


def validation_accuracy(model: torch.nn.Module) -> float:
    with torch.no_grad():
        return float(((model(X_VAL).squeeze(-1) > 0) == (Y_VAL > 0.5)).float().mean())


def runs(seed: int, train_one: Callable[[float], Any]) -> Iterator[tuple[float, Any]]:
    """(lr, train_one(lr)) of K ~ Poisson(MEAN_RUNS) runs, lr drawn from LEARNING_RATES."""
    rng = np.random.default_rng(seed)
    for _ in range(rng.poisson(MEAN_RUNS)):
        lr = float(rng.choice(LEARNING_RATES))
        yield lr, train_one(lr)


def best_of(initial: torch.nn.Module, candidates: Iterable[tuple[float, Any]]) -> dict[str, Any]:
    """The release of the best (lr, model) on the validation set (the first on ties)."""
    best: dict[str, Any] = {"model": initial, "lr": 0.0, "accuracy": -1.0}  # K = 0
    for lr, model in candidates:
        if (accuracy := validation_accuracy(model)) > best["accuracy"]:
            best = {"model": model, "lr": lr, "accuracy": accuracy}
    return best


def random_search(
    train_data: TrainData, seed: int, canary: Canary, poisson_sampling: bool = POISSON_SAMPLING
) -> dict[str, Any]:
    trained = runs(seed, lambda lr: train(train_data, lr, canary, poisson_sampling)[0])
    return best_of(zero_model(), trained)


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return random_search(train_data, seed, canary)


def opacus_run(delta: float, poisson_sampling: bool = POISSON_SAMPLING) -> OpacusRun:
    _, engine, optimizer, loader = train(TRAIN, LEARNING_RATES[0], CANARY, poisson_sampling)
    return from_opacus(
        engine, optimizer=optimizer, data_loader=loader, delta=delta, rounds=Poisson(MEAN_RUNS)
    )


def claim(delta: float, poisson_sampling: bool = POISSON_SAMPLING) -> float:
    return tuning_claim(opacus_run(delta, poisson_sampling))


def correct_interval(delta: float) -> Interval:
    """The claim's own interval: the run is what Opacus accounts (Poisson sampling)."""
    run = opacus_run(delta)
    assert run.interval is not None  # from_opacus with rounds
    return run.interval.lower, run.interval.upper, "any score: the claim's interval"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    torch.manual_seed(seed)
    model, engine, optimizer, loader = train(TRAIN, LEARNING_RATES[0], CANARY)
    trained = (model, [optimizer], loader, engine)
    return run_objects(trained, Poisson(MEAN_RUNS), claim, TRAIN, tune(TRAIN, seed, CANARY))
