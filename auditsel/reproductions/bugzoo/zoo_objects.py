"""What every torch or Opacus pipeline of the zoo hands to a static check of its code, and the
shape of a pipeline's correct accounting.

`objects(...)` is the dict of a module's `pipeline_objects(seed=0)`: the objects of one seeded,
small run of its training, keyed exactly as the keyword arguments of `auditsel.check_pipeline`
(`model`, `optimizers`: a list, `data_loader`, `engine`: the Opacus `PrivacyEngine` or None,
`rounds`: the law of K the claim assumes, `delta`), plus `dataset` (the training rows), `release`
(one release of `tune`) and `claim` (the claimed epsilon, computed by the module's `claim`).
Objects a pipeline does not have are None.

`Interval`: what `correct_interval(delta)` returns, (lower, upper, how): the tuning run's epsilon
for any selection score lies in [lower, upper] (docs/findings/any-score.md); lower None where no
valid lower end is computed, upper None where no theorem bounds it, inf where the release is
not DP at all (a value computed without noise from the private data is released).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from auditsel.reproductions.bugzoo import DELTA
from auditsel.rounds import RoundsLaw

__all__ = ["KEYS", "Interval", "objects"]

Interval = tuple[float | None, float | None, str]
KEYS = (
    "model",
    "optimizers",
    "data_loader",
    "engine",
    "rounds",
    "delta",
    "dataset",
    "release",
    "claim",
)


def objects(
    *,
    model: Any,
    optimizers: list[Any],
    rounds: RoundsLaw,
    claim: Callable[[float], float],
    data_loader: Any = None,
    engine: Any = None,
    dataset: Any = None,
    release: Any = None,
) -> dict[str, Any]:
    """The dict of `pipeline_objects` (module docstring), its claim computed at the zoo's delta."""
    return {
        "model": model,
        "optimizers": list(optimizers),
        "data_loader": data_loader,
        "engine": engine,
        "rounds": rounds,
        "delta": DELTA,
        "dataset": dataset,
        "release": release,
        "claim": float(claim(DELTA)),
    }
