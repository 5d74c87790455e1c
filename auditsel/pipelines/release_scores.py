"""Every released field scored: the default attack on a release that publishes more than a model.

Contract. A release that is a mapping (`{"model": ..., "lr": 0.1, "clip": 1.7, "history": [...]}`,
nested mappings, lists and tuples included) publishes every value in it, and a leak may sit in
any of them (a clipping norm set to a percentile of the private gradient norms, say).
`release_fields(release, canary)` reads one number per field:

* "canary": the canary's own score of the release (its model), where the canary can read one;
* a number (Python, numpy or a one-element tensor), at any depth: its value;
* an array or tensor of several entries (other than the model's parameters): the sum of its
  entries (a linear statistic: a leak in one entry of a large array shows only diluted; score
  that entry yourself);
* a torch module or the "model" / "initial" entries: read by the canary only (the parameters
  of a model are not fields);
* anything else (strings, None, objects): not a field.

Paths name the fields as written: `clip`, `history[2]`, `stats.mean`. `probe_fields` plays one
run outside the audit (seed `PROBE_SEED`, canary out) to fix the fields before the games; each
game then scores all of them (`FieldScores`), each field's eps_L at confidence
`1 - (1 - confidence) / fields` (Bonferroni: the largest holds at `confidence`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditsel.errors import ConfigError
from auditsel.pipelines.canaries import Canary
from auditsel.pipelines.game import probe_call

CANARY_FIELD = "canary"
MODEL_KEYS = ("model", "initial")  # read by the canary's score, not fields themselves
PROBE_SEED = 2**31 - 1  # the probe run's seed: not one an audit's games hand to tune


def _is_module(value: Any) -> bool:
    return callable(getattr(value, "parameters", None)) and callable(value)


def _number(value: Any) -> float | None:
    """The value of a number, or the sum of an array's or tensor's entries; None otherwise."""
    if isinstance(value, (bool, int, float, np.number)):
        return float(value)
    detach = getattr(value, "detach", None)
    if detach is not None and hasattr(value, "shape"):  # a torch tensor
        value = detach().cpu().numpy()
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf" and value.size:
        return float(value.astype(np.float64).sum())
    return None


def _walk(value: Any, path: str, out: dict[str, float]) -> None:
    if _is_module(value):
        return
    number = _number(value)
    if number is not None:
        out[path] = number
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not path and key in MODEL_KEYS:
                continue
            _walk(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, (list, tuple)):
        if value and all(_number(v) is not None and np.ndim(v) == 0 for v in value):
            out[path or "release"] = float(np.sum(np.asarray(value, dtype=np.float64)))
            return
        for i, item in enumerate(value):
            _walk(item, f"{path}[{i}]", out)


def canary_score(release: Any, canary: Canary) -> float | None:
    """The canary's own score of `release` (`canary.score`); None where it cannot read one."""
    try:
        return float(canary.score(release))
    except (ConfigError, NotImplementedError, TypeError, ValueError, IndexError, KeyError):
        return None


def release_fields(release: Any, canary: Canary) -> dict[str, float]:
    """One number per released field (module docstring): "canary" first, where the canary can
    score the release, then the mapping's fields in order."""
    score = canary_score(release, canary)
    out: dict[str, float] = {} if score is None else {CANARY_FIELD: score}
    if isinstance(release, Mapping):
        _walk(release, "", out)
    return out


def probe_fields(
    tune: Callable[[Any, int, Canary], Any], data: Any, canary: Canary
) -> tuple[str, ...]:
    """The fields of the release of the probe run (module docstring; what `tune` raises is a
    PipelineError: `auditsel.pipelines.game.probe_call`)."""
    bound = canary.for_game(False, np.random.default_rng(PROBE_SEED))
    what = f"the probe run that reads the release's fields (seed {PROBE_SEED}, canary out)"
    release = probe_call("tune", tune, what, bound.prepare(data), PROBE_SEED, bound)
    return tuple(release_fields(release, canary))


@dataclass(frozen=True)
class FieldScores:
    """score(release, canary) -> one number per field of `fields` (the default score of a
    mapping release); a field missing from a game's release scores NaN there, which the audit
    refuses (the release's structure changed between games)."""

    fields: tuple[str, ...]

    def __call__(self, release: Any, canary: Canary) -> np.ndarray:
        found = release_fields(release, canary)
        missing = [f for f in self.fields if f not in found]
        if missing:
            raise ConfigError(
                "score",
                f"the release has no field {missing[0]!r} in this game, though the probe run's "
                f"release had it: every game must publish the same fields (or pass your own "
                f"score)",
            )
        return np.array([found[f] for f in self.fields], dtype=np.float64)
