"""What every torch or Opacus pipeline of the zoo hands to a static check of its code, and the
shape of a pipeline's correct accounting.

`run_objects(...)` builds the dict of a module's `pipeline_objects(seed=0)`: the objects of one
seeded, small run of its training, keyed as the fields of `auditsel.RunObjects` (what
`auditsel.check_pipeline` reads): `model`, `optimizers` (a list), `data_loader`, `engine` (the
Opacus `PrivacyEngine`), `rounds` (the law of K the claim assumes), `delta`, `dataset` (the
training rows), `release` (one release of `tune`), `claim` (the module's `claim` at `delta`),
`base` (one run as the claim accounts it, for a hand-written loop) and `privatizer` (a
hand-written loop's clip-and-noise step, `fn(per_example_grads, clip)`); None where a pipeline
has no such object. Building them runs the pipeline's own code with its own seeds.

`Interval`: what `correct_interval(delta)` returns, (lower, upper, how): the tuning run's epsilon
for any selection score lies in [lower, upper] (docs/findings/any-score.md); lower None where no
valid lower end is computed, upper None where no theorem bounds it, inf where a value computed
without noise from the private data is released.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from auditsel.pipelines.checks.runner import RUN_OBJECTS
from auditsel.reproductions.bugzoo import DELTA
from auditsel.rounds import RoundsLaw

Interval = tuple[float | None, float | None, str]
#: `auditsel.RunObjects`' fields, in order: what `auditsel check` reads
KEYS = RUN_OBJECTS


def run_objects(
    trained: Sequence[Any],
    rounds: RoundsLaw,
    claim: Callable[[float], float],
    rows: Sequence[Any],
    release: Any,
    *,
    base: Any = None,
    privatizer: Any = None,
) -> dict[str, Any]:
    """The dict of `pipeline_objects` (module docstring) of one seeded torch run: `trained` is
    its (model, optimizers, data loader, engine), `rows` the training tensors (the dataset),
    `release` one release of `tune`, the claim computed at the zoo's delta; `base` the run as
    a DpsgdBase and `privatizer` a hand-written loop's clip-and-noise step, where it has them."""
    import torch  # deferred: torch, which the pipelines themselves import

    model, optimizers, loader, engine = trained
    named = {
        "model": model,
        "optimizers": list(optimizers),
        "data_loader": loader,
        "engine": engine,
        "rounds": rounds,
        "delta": DELTA,
        "dataset": torch.utils.data.TensorDataset(*rows),
        "release": release,
        "claim": float(claim(DELTA)),
        "base": base,
        "privatizer": privatizer,
    }
    return {key: named[key] for key in KEYS}


def make_private(
    net: Any,
    train_data: Sequence[Any],
    lr: float,
    *,
    batch: int,
    noise: float,
    clip: float,
    poisson_sampling: bool = True,
) -> tuple[Any, Any, Any, Any]:
    """(model, optimizer, loader, engine) from `opacus.PrivacyEngine.make_private`: SGD at `lr`,
    shuffled batches of `batch` rows (Poisson sampling at batch / rows unless
    `poisson_sampling` is False), clipping norm `clip`, noise multiplier `noise`."""
    import torch  # deferred: torch and opacus, which the Opacus pipelines import
    from opacus import PrivacyEngine

    quiet()
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    dataset = torch.utils.data.TensorDataset(*train_data)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True)
    engine = PrivacyEngine()
    model, optimizer, loader = engine.make_private(
        module=net,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=noise,
        max_grad_norm=clip,
        poisson_sampling=poisson_sampling,
    )
    return model, optimizer, loader, engine


def tuning_claim(run: Any) -> float:
    """An `OpacusRun`'s tuning epsilon (from_opacus with rounds always has a rigorous bound)."""
    if run.tuning_epsilon is None:
        raise RuntimeError("from_opacus returned no rigorous tuning bound")
    return float(run.tuning_epsilon)


def quiet() -> None:
    """Silence Opacus's notices for the zoo's Opacus runs."""
    warnings.filterwarnings("ignore", message="Secure RNG turned off")  # fine for tuning
    warnings.filterwarnings("ignore", message="Full backward hook")  # Opacus's hooks
    warnings.filterwarnings("ignore", message="Optimal order is the")  # RDP's order range
