"""What every torch or Opacus pipeline of the zoo hands to a static check of its code, and the
shape of a pipeline's correct accounting.

`objects(...)` is the dict of a module's `pipeline_objects(seed=0)`: the objects of one seeded,
small run of its training, keyed as the fields of `auditsel.RunObjects` (what
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

__all__ = ["KEYS", "Interval", "objects", "quiet", "run_objects"]

Interval = tuple[float | None, float | None, str]
#: `auditsel.RunObjects`' fields, in order: what `auditsel check` reads
KEYS = RUN_OBJECTS


#: what `pipeline_objects` may hand over beside the model, optimizers, law of K and claim
#: (`auditsel.RunObjects`' fields; None where a pipeline has no such object)
OPTIONAL = ("data_loader", "engine", "dataset", "release", "base", "privatizer")


def objects(
    *,
    model: Any,
    optimizers: list[Any],
    rounds: RoundsLaw,
    claim: Callable[[float], float],
    **optional: Any,
) -> dict[str, Any]:
    """The dict of `pipeline_objects` (module docstring), its claim computed at the zoo's delta;
    `optional`: any of OPTIONAL (a data loader, the engine, the dataset, one release, the
    run as a DpsgdBase, a hand-written loop's clip-and-noise step)."""
    unknown = sorted(set(optional) - set(OPTIONAL))
    if unknown:
        raise TypeError(f"objects() got unexpected keyword(s) {unknown}; allowed: {OPTIONAL}")
    named = {
        "model": model,
        "optimizers": list(optimizers),
        "rounds": rounds,
        "delta": DELTA,
        "claim": float(claim(DELTA)),
    }
    return {key: named[key] if key in named else optional.get(key) for key in KEYS}


def run_objects(
    trained: Sequence[Any],
    rounds: RoundsLaw,
    claim: Callable[[float], float],
    rows: Sequence[Any],
    release: Any,
    **optional: Any,
) -> dict[str, Any]:
    """`objects` of one seeded torch run: `trained` is its (model, optimizers, data loader,
    engine), `rows` the training tensors (the dataset), `release` one release of `tune`;
    `optional`: the other OPTIONAL objects."""
    import torch  # deferred: torch, which the pipelines themselves import

    model, optimizers, loader, engine = trained
    return objects(
        model=model,
        optimizers=optimizers,
        rounds=rounds,
        claim=claim,
        data_loader=loader,
        engine=engine,
        dataset=torch.utils.data.TensorDataset(*rows),
        release=release,
        **optional,
    )


def quiet() -> None:
    """Silence Opacus's notices for the zoo's Opacus runs."""
    warnings.filterwarnings("ignore", message="Secure RNG turned off")  # fine for tuning
    warnings.filterwarnings("ignore", message="Full backward hook")  # Opacus's hooks
    warnings.filterwarnings("ignore", message="Optimal order is the")  # RDP's order range
