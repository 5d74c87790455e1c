"""The check that reads the release: does it hold more than one run?

`release_runs`: a tuning run's claim (the winner of K runs, [PS22], [XWW24]) covers the release
of the winner alone. A release (one output of `tune`) that holds two or more runs, i.e. a list
or tuple (at most 4 levels down) of two or more models (torch modules, lists of tensors,
mappings holding a tensor or a module) or of two or more scores (numbers under a key naming a
score: "score", "accurac", "loss", "metric", "auc", "f1", "valid", ``"val_"``; or mappings each holding such
a number), releases each of them. The second form is a heuristic (a list of numbers under such
a key is read as one score per run). The effect: the epsilon of releasing all K runs composed,
K drawn from the claim's law (delta(eps) = sum_k P(K = k) delta_k(eps) with each delta_k from
dp_accounting's PLD of k runs, the tail of the law above delta / 100 counted as leaking all),
on a grid: an upper bound, also for a release of the scores alone (post-processing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from auditsel.errors import number
from auditsel.pipelines.checks.finding import BREAKS, Context, Finding

_SCORE_WORDS = ("score", "accurac", "loss", "metric", "auc", "f1", "valid", "val_")
_DEPTH = 4


def _has_model(obj: Any, depth: int = 0) -> bool:
    """Whether obj is a model (a torch module, a tensor, a list of tensors) or a mapping
    holding one (a run's record, a state dict)."""
    if hasattr(obj, "named_parameters") or hasattr(obj, "detach"):
        return True
    if depth >= 2:
        return False
    if isinstance(obj, Mapping):
        return any(_has_model(v, depth + 1) for v in list(obj.values())[:50])
    if isinstance(obj, (list, tuple)):
        return bool(obj) and all(hasattr(v, "detach") for v in obj[:50])
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)


def _scored(key: str) -> bool:
    return any(word in key.lower() for word in _SCORE_WORDS)


def _holds_score(item: Any) -> bool:
    return isinstance(item, Mapping) and any(
        _scored(str(k)) and _is_number(v) for k, v in item.items()
    )


def _runs(obj: Any, path: str, key: str = "", depth: int = 0) -> list[tuple[str, int, str]]:
    """(path, how many, "models" or "scores") of each sequence of several runs in obj."""
    if depth > _DEPTH:
        return []
    if isinstance(obj, Mapping):
        return [hit for k, v in list(obj.items())[:100]
                for hit in _runs(v, f"{path}[{k!r}]", str(k), depth + 1)]  # fmt: skip
    if not isinstance(obj, (list, tuple)) or len(obj) < 2:
        return []
    items = list(obj)
    if all(_has_model(v) for v in items) and not all(hasattr(v, "detach") for v in items):
        return [(path, len(items), "models")]
    if (key and _scored(key) and all(_is_number(v) for v in items)) or all(
        _holds_score(v) for v in items
    ):
        return [(path, len(items), "scores")]
    return [
        hit for i, v in enumerate(items[:100]) for hit in _runs(v, f"{path}[{i}]", "", depth + 1)
    ]


def release_runs(ctx: Context) -> list[Finding]:
    """A release holding two or more runs' models or scores (module docstring)."""
    if ctx.release is None:
        return []
    hits = _runs(ctx.release, "release")
    if not hits:
        return []
    path, count, kind = hits[0]
    effect, text = None, "not computed: needs the run's base (an engine) and the law of K"
    if ctx.base is not None and ctx.rounds is not None and ctx.delta is not None:
        effect = released_runs_epsilon(ctx.base, ctx.rounds, ctx.delta)
        text = "all K runs composed, K from the claim's law (an upper bound)"
    heuristic = " (a heuristic reading of the score names)" if kind == "scores" else ""
    return [
        Finding(
            BREAKS,
            path,
            f"holds the {kind} of {count} runs{heuristic}: the tuning claim covers the winner "
            f"alone, and every released run adds to what is learned about a person",
            effect,
            "release only the winner (its model and, if needed, its own score); keep the other "
            "runs private, or account for releasing them all (composition)",
            check="release_runs",
            effect_text=text,
        )
    ]


def released_runs_epsilon(base: Any, rounds: Any, delta: float) -> float:
    """eps at delta of releasing all K ~ rounds runs of `base` (module docstring): the
    smallest point of a geometric grid where the mixture's delta is at most `delta` (inf at
    delta = 0: a Gaussian release is not pure DP)."""
    delta = number(delta, "delta", 0, 1, hi_open=True)
    if delta == 0:
        return math.inf
    tail_limit = delta / 100
    ks: list[int] = []
    rest = 1.0 - float(rounds.p_zero)
    while rest > tail_limit and len(ks) < 400:
        k = len(ks) + 1
        ks.append(k)
        rest -= float(rounds.pmf(np.array([k]))[0])
    weights = rounds.pmf(np.array(ks)) if ks else np.zeros(0)
    grid = np.geomspace(1e-3, 1e3, 481)
    total = np.full(grid.shape, max(rest, 0.0))
    for k, w in zip(ks, weights):
        if w > 0:
            total += float(w) * np.asarray(replace(base, steps=base.steps * k).delta(grid))
    ok = np.nonzero(total <= delta)[0]
    return float(grid[ok[0]]) if len(ok) else math.inf
