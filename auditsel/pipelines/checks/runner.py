"""`check_pipeline(RunObjects(...))`: every check of `auditsel.pipelines.checks` on one run's
objects (`RunObjects`, checked when made), in order (`CHECKS`); the package's docstring and
docs/howto/check-your-pipeline.md say what each finds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from auditsel.errors import ConfigError, number
from auditsel.mechanisms import DpsgdBase
from auditsel.pipelines.checks.data import data_dependent_state, duplicates
from auditsel.pipelines.checks.finding import BREAKS, Context, Finding
from auditsel.pipelines.checks.release import release_runs
from auditsel.pipelines.checks.training import (
    parameters_outside_dp,
    per_layer_clipping,
    sampling,
    settings,
)
from auditsel.rounds import RoundsLaw

#: name -> check, in the order they run
CHECKS: dict[str, Callable[[Context], list[Finding]]] = {
    "parameters_outside_dp": parameters_outside_dp,
    "sampling": sampling,
    "settings": settings,
    "per_layer_clipping": per_layer_clipping,
    "data_dependent_state": data_dependent_state,
    "duplicates": duplicates,
    "release_runs": release_runs,
}


@dataclass(frozen=True, kw_only=True, eq=False)
class RunObjects:
    """The objects of one run of your training that `check_pipeline` reads, each optional.

    `model`: the trained model (Opacus's wrapped module too); `optimizers`: every optimizer the
    training used (one, or a list; kept as a tuple); `data_loader`: the loader that fed the
    training; `engine`: the `opacus.PrivacyEngine`; `rounds`: the law of K the claim assumes
    (None: one run); `delta`: the claim's delta, in (0, 1); `dataset`: the training rows
    (default: the loader's); `release`: one release of your `tune`; `claim`: the claimed
    epsilon; `base`: one run as a DpsgdBase, when there is no engine; `privatizer`: a
    hand-written loop's clip-and-noise step (`auditsel.pipelines.checks.privatizer`). A bad
    `delta`, `claim`, `rounds`, `base` or `privatizer` is a ConfigError naming it.
    """

    model: Any = None
    optimizers: Sequence[Any] | Any = None
    data_loader: Any = None
    engine: Any = None
    rounds: RoundsLaw | None = None
    delta: float | None = None
    dataset: Any = None
    release: Any = None
    claim: float | None = None
    base: DpsgdBase | None = None
    privatizer: Callable[[list[Any], float], Any] | None = None

    def __post_init__(self) -> None:
        if self.delta is not None:
            delta = number(self.delta, "delta", 0, 1, lo_open=True, hi_open=True)
            object.__setattr__(self, "delta", delta)
        if self.claim is not None:
            object.__setattr__(self, "claim", number(self.claim, "claim", 0, float("inf")))
        if self.rounds is not None and not isinstance(self.rounds, RoundsLaw):
            raise ConfigError("rounds", "must be a law of K (auditsel.Poisson(3), ...) or None")
        if self.base is not None and not isinstance(self.base, DpsgdBase):
            raise ConfigError("base", "must be an auditsel.DpsgdBase or None")
        if self.privatizer is not None and not callable(self.privatizer):
            raise ConfigError("privatizer", "must be a function (per_example_grads, clip) or None")
        optimizers = () if self.optimizers is None else self.optimizers
        if not isinstance(optimizers, (list, tuple)):
            optimizers = (optimizers,)
        object.__setattr__(self, "optimizers", tuple(optimizers))


#: the fields of `RunObjects`, in order (what `auditsel check`'s FUNCTION may return)
RUN_OBJECTS = tuple(f.name for f in fields(RunObjects))


def check_pipeline(run: RunObjects) -> list[Finding]:
    """The findings of every check on the objects of one run of your training.

    Args:
        run: the run's objects (`RunObjects(model=..., optimizers=..., delta=..., ...)`).

    Returns:
        The findings, "breaks" ones first; empty when no check finds anything.

    Raises:
        auditsel.errors.ConfigError: `run` is not a RunObjects (a dict is never read by its
            keys: `RunObjects(**objects)` makes one).
    """
    if not isinstance(run, RunObjects):
        raise ConfigError(
            "run", f"must be RunObjects(...): RunObjects(**objects), got {type(run).__name__}"
        )
    ctx = Context(**{name: getattr(run, name) for name in RUN_OBJECTS})
    ctx.optimizers = list(run.optimizers)
    findings = [finding for check in CHECKS.values() for finding in check(ctx)]
    return sorted(findings, key=lambda f: f.severity != BREAKS)
