"""`canary="both"`: an InputCanary and a GradientCanary chosen for you, audited together.

Contract. `resolve_canary(canary, tune, data)` returns `canary` unchanged unless it is the
string "both" (or a list, returned as a tuple); "both" becomes `default_canaries(tune, data)`,
the pair (InputCanary, GradientCanary) that `audit_pipeline` and `plan_pipeline` then treat as
any tuple of canaries: each canary plays the audit's games (the games are doubled, not split)
and is certified at confidence 1 - (1 - confidence) / 2 (Bonferroni), so that the verdict holds
at `confidence` whichever canary refutes (`auditsel.pipelines.pipeline`).

The choice is a heuristic for power, never for validity (any canary gives a valid eps_L):

* the InputCanary is an outlier person built from `data` ((X, y) arrays or tensors, or a
  TensorDataset of two tensors): the mean row, with the feature of least variance (the first
  such) set `OUTLIER` standard deviations of the most variable feature above its mean; its label
  the least frequent one of y (the first on ties);
* the GradientCanary's coordinate is the coordinate of the released parameters that moved least
  in one probe run (seed `PROBE_SEED`, the canary out): abs(theta_i - initial_i) smallest, with the
  initial weights from `release["initial"]` when the release holds them, else 0 (the
  coordinate the data pushes least, where the canary stands out most). The probe needs a
  release whose parameters `flat_parameters` reads (a torch module, a mapping with "model").

Give your own tuple, `canary=(InputCanary(x, y), GradientCanary(coordinate=i))`, to choose
them; a pipeline whose data or release these rules cannot read is refused by name (ConfigError).
"""

from __future__ import annotations

from typing import Any, Literal, cast

import numpy as np

from auditsel.errors import ConfigError
from auditsel.pipelines.canaries import (
    Canary,
    GradientCanary,
    InputCanary,
    _to_numpy,
    flat_parameters,
)
from auditsel.pipelines.game import TuneFn, probe_call
from auditsel.pipelines.release_scores import PROBE_SEED

__all__ = ["BOTH", "OUTLIER", "default_canaries", "outlier_example", "resolve_canary"]

BOTH: Literal["both"] = "both"
OUTLIER = 4.0  # the outlier's feature: this many standard deviations above its mean


#: what `audit_pipeline`, `plan_pipeline` and `audit_until_refuted` take as `canary`: one canary,
#: several (each audited at its Bonferroni share), or "both" (an input and a gradient canary)
CanaryChoice = Canary | tuple[Canary, ...] | Literal["both"]


def resolve_canary(canary: Any, tune: TuneFn, data: Any) -> Canary | tuple[Canary, ...]:
    """`canary`, with "both" replaced by `default_canaries(tune, data)` and a list by a tuple
    (module docstring); anything else is returned as given, for the caller to check."""
    if isinstance(canary, str):
        if canary != BOTH:
            raise ConfigError(
                "canary",
                f"must be a canary, a tuple of canaries or 'both', got {canary!r}",
            )
        return default_canaries(tune, data)
    if isinstance(canary, list):
        return tuple(canary)
    return cast("Canary | tuple[Canary, ...]", canary)  # checked by the caller


def _arrays(data: Any) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of a training set the InputCanary can be appended to, as numpy arrays."""
    tensors = getattr(data, "tensors", None)
    if isinstance(tensors, tuple) and len(tensors) == 2:  # a torch TensorDataset
        data = tensors
    if isinstance(data, (tuple, list)) and len(data) == 2:
        try:
            X, y = _to_numpy(data[0]), _to_numpy(data[1])
        except (TypeError, ValueError):
            X = y = np.empty(0)
        if X.ndim >= 1 and y.ndim >= 1 and len(X) == len(y) > 0:
            return X, y
    raise ConfigError(
        "canary",
        f"'both' builds its InputCanary from (X, y) arrays or tensors or a TensorDataset; got "
        f"{type(data).__name__}: give canary=(InputCanary(x, y), GradientCanary(...))",
    )


def outlier_example(data: Any) -> InputCanary:
    """The InputCanary of "both": the mean row with its least variable feature set OUTLIER
    standard deviations (of the most variable feature) above its mean, and the least frequent
    label (module docstring)."""
    X, y = _arrays(data)
    rows = X.reshape(len(X), -1)
    spread = rows.std(axis=0)
    x = rows.mean(axis=0)
    j = int(np.argmin(spread))
    x[j] += OUTLIER * (float(spread.max()) or 1.0)
    labels, counts = np.unique(y.reshape(len(y), -1), axis=0, return_counts=True)
    label = labels[int(np.argmin(counts))]
    return InputCanary(x=x.reshape(X.shape[1:]), y=label.reshape(y.shape[1:]))


def default_canaries(tune: TuneFn, data: Any) -> tuple[InputCanary, GradientCanary]:
    """(InputCanary, GradientCanary) for `canary="both"` (module docstring): the outlier
    person of `data`, and the coordinate that moved least in one probe run of `tune`."""
    person = outlier_example(data)
    what = (
        f"the probe run that chooses the gradient canary of canary='both' (seed {PROBE_SEED}, "
        f"canary out)"
    )
    release = probe_call("tune", tune, what, data, PROBE_SEED, person)  # unbound: out
    try:
        theta = flat_parameters(release)
        initial = (
            flat_parameters(release["initial"])
            if isinstance(release, dict) and "initial" in release
            else np.zeros_like(theta)
        )
    except (TypeError, ValueError, AttributeError):
        theta = initial = np.empty(0)
    if theta.size == 0 or theta.shape != initial.shape or not np.all(np.isfinite(theta)):
        raise ConfigError(
            "canary",
            f"'both' chooses the gradient canary's coordinate from the released parameters, "
            f"and cannot read them from a {type(release).__name__} release: give "
            f"canary=(InputCanary(x, y), GradientCanary(coordinate=i))",
        )
    return person, GradientCanary(coordinate=int(np.argmin(np.abs(theta - initial))))
