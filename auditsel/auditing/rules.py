"""Threshold rules: how an audit picks the test "guess member when score > t" (or "<= t").

A rule is a small frozen strategy object in jax_privacy's manner (a dataclass with keyword-only
options); `auditsel.auditing.lower.apply_rule` runs it. The rules (`Split`, `BonferroniGrid`,
`BonferroniAll`, `MultiSplit`), what they compute and why each is valid at the audit's
confidence are in `auditsel.auditing.lower`'s docstring.

The pilot must be independent of the scores, so `seed` must be chosen without looking at
them. The default `seed=None` draws a fresh seed for each audit (`fresh_seed`), which the audit
records (`LowerBound.threshold_options`): pass it to repeat the audit exactly.

`threshold_rule(name, **options)` turns a name and a bag of options into a rule, keeping the
options the named rule has and ignoring the others.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

import numpy as np

from auditsel.errors import MAX_GRID, MAX_SEED, ConfigError, integer, number

MULTISPLITS = 21  # odd, so the median is one of the bounds
OPTIMISTIC_RULES = ("best",)


class ThresholdRule:
    """Base of the threshold rules: `name` (as configs and the CLI write it) and `options()`."""

    name: ClassVar[str] = ""

    def options(self) -> dict[str, Any]:
        """The rule's options as plain values (what result.json records; a grid by its size)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)  # type: ignore[arg-type]
            if f.name != "grid"
        }


def _fraction(value: object) -> float:
    return number(value, "split_fraction", 0, 1, lo_open=True, hi_open=True)


def _seed(value: object) -> int | None:
    return None if value is None else integer(value, "seed", 0, MAX_SEED)


def fresh_seed() -> int:
    """A seed from the operating system's entropy, in [0, 2^63)."""
    return secrets.randbits(63)


def with_seed(rule: ThresholdRule, seed: int | None = None) -> ThresholdRule:
    """`rule` with a seed: its own, else `seed`, else a fresh one (`fresh_seed`). A rule whose
    split draws no pilot (BonferroniAll, a fixed grid) is returned as it is."""
    if getattr(rule, "seed", 0) is not None or getattr(rule, "grid", None) is not None:
        return rule
    return replace(rule, seed=fresh_seed() if seed is None else seed)  # type: ignore[type-var]


@dataclass(frozen=True, kw_only=True)
class Split(ThresholdRule):
    """Choose (t, direction) on a seeded pilot of each class, bound on the rest."""

    split_fraction: float = 0.5
    seed: int | None = None
    name: ClassVar[str] = "split"

    def __post_init__(self) -> None:
        object.__setattr__(self, "split_fraction", _fraction(self.split_fraction))
        object.__setattr__(self, "seed", _seed(self.seed))


@dataclass(frozen=True, kw_only=True)
class BonferroniGrid(ThresholdRule):
    """A grid of thresholds at alpha / (2 m) each: fixed in advance (`grid`) or `grid_size`
    quantiles of a seeded pilot that is left out of the bound."""

    grid: tuple[float, ...] | None = field(default=None)
    grid_size: int = 100
    split_fraction: float = 0.5
    seed: int | None = None
    name: ClassVar[str] = "bonferroni"

    def __post_init__(self) -> None:
        if self.grid is not None:
            object.__setattr__(self, "grid", _grid(self.grid))
        object.__setattr__(self, "grid_size", integer(self.grid_size, "grid_size", 1, MAX_GRID))
        object.__setattr__(self, "split_fraction", _fraction(self.split_fraction))
        object.__setattr__(self, "seed", _seed(self.seed))

    def options(self) -> dict[str, Any]:
        if self.grid is not None:  # the pilot's options do not apply to a fixed grid
            return {"grid_size": len(self.grid)}
        return super().options()


@dataclass(frozen=True, kw_only=True)
class BonferroniAll(ThresholdRule):
    """Every threshold and both directions at alpha / n (n games)."""

    name: ClassVar[str] = "bonferroni_all"


@dataclass(frozen=True, kw_only=True)
class MultiSplit(ThresholdRule):
    """`splits` seeded splits at alpha / 2 each; the lower median of their bounds."""

    splits: int = MULTISPLITS
    split_fraction: float = 0.5
    seed: int | None = None
    name: ClassVar[str] = "multisplit"

    def __post_init__(self) -> None:
        object.__setattr__(self, "splits", integer(self.splits, "splits", 1, 10_001))
        object.__setattr__(self, "split_fraction", _fraction(self.split_fraction))
        object.__setattr__(self, "seed", _seed(self.seed))


RULES: dict[str, type[ThresholdRule]] = {
    cls.name: cls for cls in (Split, BonferroniGrid, BonferroniAll, MultiSplit)
}
THRESHOLD_RULES = tuple(RULES)


def _grid(values: Iterable[float]) -> tuple[float, ...]:
    """A fixed grid: a non-empty 1-D sequence of numbers (no NaN), at most MAX_GRID of them."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError("grid", "must be a 1-D sequence of numbers") from None
    if arr.ndim != 1 or not len(arr):
        shape = "empty" if arr.size == 0 else f"of shape {arr.shape}"
        raise ConfigError("grid", f"must be a non-empty 1-D sequence of thresholds, got {shape}")
    if np.isnan(arr).any():
        raise ConfigError("grid", "contains NaN; every threshold must be a number")
    if len(arr) > MAX_GRID:
        raise ConfigError("grid", f"has {len(arr):,} thresholds; at most {MAX_GRID:,}")
    return tuple(float(x) for x in arr)


def threshold_rule(rule: ThresholdRule | str, /, **options: Any) -> ThresholdRule:
    """The rule object for `rule`: a rule is returned as it is (no options allowed then); a
    name (one of THRESHOLD_RULES) becomes its rule with those of `options` that it has (None
    means "the default"); the other options are ignored."""
    if isinstance(rule, ThresholdRule):
        given = {k: v for k, v in options.items() if v is not None}
        if given:
            raise TypeError(
                f"give the options on the rule object, not beside it: {', '.join(given)}"
            )
        return rule
    if not isinstance(rule, str):
        raise ConfigError(
            "rule",
            f"must be a threshold rule (Split(), BonferroniGrid(), BonferroniAll(), "
            f"MultiSplit()) or its name, got {type(rule).__name__}",
        )
    if rule in OPTIMISTIC_RULES:
        raise ConfigError(
            "rule",
            f"{rule!r} is optimistic (no confidence statement) and is reported as "
            f"eps_best_threshold in every audit; choose one of {', '.join(THRESHOLD_RULES)}",
        )
    if rule not in RULES:
        raise ConfigError("rule", f"must be one of {', '.join(THRESHOLD_RULES)}, got {rule!r}")
    cls = RULES[rule]
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in options.items() if k in names and v is not None})
