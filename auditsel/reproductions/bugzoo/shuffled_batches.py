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

from auditsel.reproductions.bugzoo import correct_opacus as reference
from auditsel.reproductions.bugzoo.batch_clipping import CANARY, score
from auditsel.reproductions.bugzoo.correct_opacus import TRAIN

__all__ = ["BUG", "CANARY", "TRAIN", "claim", "score", "tune"]

BUG = "Poisson sampling claimed while batches are shuffled (each example once per epoch)"


def tune(train_data, seed, canary):
    return reference.random_search(train_data, seed, canary, poisson_sampling=False)


def claim(delta: float) -> float:
    return reference.claim(delta, poisson_sampling=False)
