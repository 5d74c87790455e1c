"""A hand-written DP-SGD tuning run on the digits MLP (`torch.func` per-example gradients): the
loop the `noise_before_clip` and `per_tensor_clip` authors wrote, with their `privatize` step.

Each run: an MLP (`zoo_data.mlp`) with a fixed init (INIT_SEED), STEPS steps of Poisson
sampling at RATE, per-example gradients of the cross-entropy, with the canary's own example
gradient appended when it takes part (`canary.examples`: it goes through the author's clipping
as any example's), then `privatize(grads, clip, canary)` (the author's clipping and noise: the
privatised sum; its `canary.step` after clipping is then a no-op), divided by the expected
batch RATE * rows, and a step of learning rate lr. Random search over `correct_opacus_mlp`'s
grid, K ~ TNB(ETA, NU) runs, the best on the validation rows released with its learning rate,
clipping norm and accuracy.

The author's claim: the run as DpsgdBase(NOISE, STEPS, RATE) and the tuning interval's upper
end for K ~ TNB(ETA, NU) (any score).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.func import functional_call, grad, vmap

from auditsel.accounting.interval import tuning_epsilon
from auditsel.mechanisms import DpsgdBase
from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import correct_opacus_mlp, zoo_data
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import run_objects

NOISE, STEPS, RATE = 2.0, 5, 0.2
INIT_SEED = 0
GRID, ROUNDS, NULL = correct_opacus_mlp.GRID, correct_opacus_mlp.ROUNDS, correct_opacus_mlp.NULL
TRAIN = correct_opacus_mlp.TRAIN

#: the author's clipping and noise: (per-example gradients, each [batch, *shape], in parameter
#: order; the clipping norm; the canary) -> the privatised sum, one tensor per parameter
Privatize = Callable[[list[torch.Tensor], float, Canary], list[torch.Tensor]]


def fixed_mlp(hidden: Sequence[int], last_bias: bool) -> torch.nn.Sequential:
    with torch.random.fork_rng():
        torch.manual_seed(INIT_SEED)
        return zoo_data.mlp(hidden, last_bias)


def per_example_grads(
    model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor
) -> list[torch.Tensor]:
    """Each row's gradient of the cross-entropy, one [rows, *shape] tensor per parameter."""
    params = {n: p.detach() for n, p in model.named_parameters()}

    def loss(p: dict[str, torch.Tensor], x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, p, (x[None],))
        return torch.nn.functional.cross_entropy(out, t[None])

    grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, X, y)
    return [grads[n] for n in params]


def train(
    train_data: TrainData,
    lr: float,
    clip: float,
    canary: Canary,
    privatize: Privatize,
    model: torch.nn.Sequential,
) -> torch.nn.Sequential:
    """One run of the hand-written loop (module docstring) on `model`, in place."""
    X, y = train_data
    for _ in range(STEPS):
        rows = torch.rand(len(X)) < RATE  # Poisson sampling
        grads = per_example_grads(model, X[rows], y[rows])
        # the canary's own example, when it takes part, before the author's clipping:
        grads = canary.examples(grads, sample_rate=RATE, max_grad_norm=clip)
        summed = privatize(grads, clip, canary)
        with torch.no_grad():
            for p, g in zip(model.parameters(), summed):
                p.sub_(lr * g / (RATE * len(X)))
    return model


def random_search(
    train_data: TrainData, seed: int, canary: Canary, privatize: Privatize, **shape: Any
) -> dict[str, Any]:
    """`correct_opacus_mlp`'s random search over runs of the hand-written loop."""

    def train_one(lr: float, clip: float) -> torch.nn.Sequential:
        return train(train_data, lr, clip, canary, privatize, fixed_mlp(**shape))

    return correct_opacus_mlp.best_of(correct_opacus_mlp.runs(seed, train_one))


def claim(delta: float) -> float:
    return tuning_epsilon(DpsgdBase(NOISE, STEPS, RATE), ROUNDS, delta).epsilon


def hand_objects(seed: int, privatize: Privatize, **shape: Any) -> dict[str, Any]:
    """`zoo_objects.run_objects` of a hand-written run: no optimizer, loader or engine; the run the
    claim accounts (`base`) and the author's `privatize` step outside an audit (`privatizer`:
    the canary a no-op), for the checks' sensitivity probe."""
    torch.manual_seed(seed)
    lr, clip = GRID[0]
    model = train(TRAIN, lr, clip, NULL, privatize, fixed_mlp(**shape))
    release = random_search(TRAIN, seed, NULL, privatize, **shape)
    base, step = DpsgdBase(NOISE, STEPS, RATE), privatizer(privatize)
    return run_objects(
        (model, [], None, None), ROUNDS, claim, TRAIN, release, base=base, privatizer=step
    )


def privatizer(privatize: Privatize) -> Callable[[list[torch.Tensor], float], list[torch.Tensor]]:
    """The author's step as `check_pipeline(privatizer=...)` takes it: (grads, clip) -> the
    privatised sum, outside an audit (the canary a no-op)."""

    def step(grads: list[torch.Tensor], clip: float) -> list[torch.Tensor]:
        return privatize(grads, clip, NULL)

    step.__name__ = getattr(privatize, "__module__", "privatize").rsplit(".", 1)[-1] + ".privatize"
    return step
