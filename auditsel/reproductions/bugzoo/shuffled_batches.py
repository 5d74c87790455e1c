"""Bug: Poisson sampling claimed while the batches are shuffled (each example once per epoch).

`correct_opacus` with `make_private(..., poisson_sampling=False)`: Opacus keeps the author's
shuffled DataLoader (every example in exactly one batch of every epoch) while its accountant
still charges Poisson sampling at rate 1 / len(loader). The claim is computed exactly as in
`correct_opacus` (from_opacus and the tuning bound), so it assumes an amplification by
subsampling that shuffling does not give.

The audit: a gradient canary would be injected at the Poisson rate Opacus charges, i.e. it
would audit the accounting's sampler, not the loader's; the canary must go through the data:
`InputCanary(x, 1)` with x = 10^4 on the padding feature (in exactly one batch per epoch). The
score is the released padding weight per unit learning rate.
"""

from __future__ import annotations

from typing import Any

import torch

from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import DELTA, batch_clipping
from auditsel.reproductions.bugzoo import correct_opacus as reference
from auditsel.reproductions.bugzoo.correct_opacus import TRAIN
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import KEYS, Interval

BUG = "Poisson sampling claimed while batches are shuffled (each example once per epoch)"
CANARY, score = batch_clipping.CANARY, batch_clipping.score


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    return reference.random_search(train_data, seed, canary, poisson_sampling=False)


def claim(delta: float) -> float:
    return reference.claim(delta, poisson_sampling=False)


def correct_interval(delta: float) -> Interval:
    """None: auditsel has no accountant for shuffled batches under add/remove neighbours (adding
    an example shifts every batch after it, and adds one to the last)."""
    return None, None, "none here: no accountant for shuffled batches (add/remove)"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    """One seeded run's objects (`zoo_objects.run_objects`'s keys), without a release or claim."""
    torch.manual_seed(seed)
    model, engine, optimizer, loader = reference.train(
        TRAIN, reference.LEARNING_RATES[0], CANARY, poisson_sampling=False
    )
    return {
        **dict.fromkeys(KEYS),
        "model": model,
        "optimizers": [optimizer],
        "data_loader": loader,
        "engine": engine,
        "rounds": reference.Poisson(reference.MEAN_RUNS),  # the law correct_opacus claims
        "delta": DELTA,
        "dataset": loader.dataset,
    }
