"""Bug: the classifier head is trained again by a second, non-private optimizer.

`correct_opacus_mlp` (digits, MLP 64-8-10 with a random init per seed, Opacus), but after each
private run the author "calibrates the head": HEAD_STEPS full-batch steps of a plain
`torch.optim.SGD` on the last layer only, on the private training rows, with no clipping and
no noise. The released model's head is a deterministic function of the private data given the
body. The claim is `correct_opacus_mlp`'s (`from_opacus` on the private part), which does not
cover the head.

Correct eps: none bounded: the head's updates carry no noise, and no theorem bounds what they
release.
"""

from __future__ import annotations

from typing import Any, cast

import torch

from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import correct_opacus_mlp as reference
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval, run_objects

BUG = "the head trained again by a second, non-DP optimizer on the private rows"
HEAD_LR, HEAD_STEPS = 0.5, 20
TRAIN, ROUNDS, NULL, claim = reference.TRAIN, reference.ROUNDS, reference.NULL, reference.claim


def calibrate_head(net: torch.nn.Module, train_data: TrainData) -> torch.optim.Optimizer:
    """HEAD_STEPS full-batch steps of plain SGD on the last layer (the bug), on a copy of it
    (the trained layer still carries Opacus's hooks), copied back; returns its optimizer."""
    X, y = train_data
    model = cast(torch.nn.Sequential, net)  # zoo_data.mlp()
    layer = cast(torch.nn.Linear, model[-1])
    head = torch.nn.Linear(layer.in_features, layer.out_features)
    head.load_state_dict(layer.state_dict())
    optimizer = torch.optim.SGD(head.parameters(), lr=HEAD_LR)
    loss = torch.nn.CrossEntropyLoss()
    with torch.no_grad():
        features = model[:-1](X)  # the private body, fixed
    for _ in range(HEAD_STEPS):
        optimizer.zero_grad()
        loss(head(features), y).backward()
        optimizer.step()
    layer.load_state_dict(head.state_dict())
    return optimizer


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    def train_one(lr: float, clip: float) -> torch.nn.Module:
        model = reference.train(train_data, lr, clip, canary)[0]
        calibrate_head(model, train_data)
        return model

    return reference.best_of(reference.runs(seed, train_one))


def correct_interval(delta: float) -> Interval:
    return None, None, "none bounded: the head's updates have no noise"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    """One seeded run's objects (`zoo_objects.run_objects`): the DP optimizer and the head's."""
    torch.manual_seed(seed)
    lr, clip = reference.LEARNING_RATES[0], reference.CLIPS[-1]
    model, optimizer, loader, engine = reference.train(TRAIN, lr, clip, NULL)
    head = calibrate_head(model, TRAIN)
    trained = (model, [optimizer, head], loader, engine)
    return run_objects(trained, ROUNDS, claim, TRAIN, tune(TRAIN, seed, NULL))
