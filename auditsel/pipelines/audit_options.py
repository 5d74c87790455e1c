"""Options of the audits of your own code, as small frozen keyword-only dataclasses.

Contract: `AuditOptions` holds the statistics of an audit (confidence, threshold rule, seed:
these change eps_L, `auditsel.auditing.rules`); `ExecutionOptions` (from `auditsel.executor`,
re-exported) where and how the games play, and `ReportOptions` what is written beside the
result: neither changes a number (each chunk of games is seeded by its index,
`auditsel.games.engine`). The functions that take them check each field where it is used and
raise `ConfigError` naming it; `given_options` refuses an argument that is not its options
object (a dict is never read by its field names).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # annotations only: an options object imports nothing heavy
    from auditsel.auditing.rules import ThresholdRule
    from auditsel.roles import MechanismPair
    from auditsel.rounds import RoundsLaw

from auditsel.errors import ConfigError, shown
from auditsel.executor import ExecutionOptions as ExecutionOptions
from auditsel.executor import folder_option


@dataclass(frozen=True, kw_only=True)
class AuditOptions:
    """The statistics of an audit: eps_L is valid at `confidence` under the threshold `rule`
    (a name of `auditsel.auditing.rules.THRESHOLD_RULES` or a rule object; a name gets the
    audit's seed for its split), the games are seeded by `seed` (`plan_pipeline` plays its
    pilot at seed + 1, never the audit's games)."""

    confidence: float = 0.95
    rule: ThresholdRule | str = "split"
    seed: int = 0

    def __post_init__(self) -> None:
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise ConfigError(
                "seed", f"must be an integer (an int or a NumPy integer), got {shown(seed)}"
            )
        object.__setattr__(self, "seed", int(seed))  # np.int64(7) -> 7 (JSON, SeedSequence)


@dataclass(frozen=True, kw_only=True)
class ReportOptions:
    """What an audit writes and shows beside eps_L: `out_dir` (result.json, report.md and the
    plots of `auditsel run`, the checkpoints under out_dir/checkpoints), `name` (the report's
    title), `base` and `rounds` (a mechanism pair and a law of K, given together: the tuning
    bounds and the interval beside eps_L), `panel` (the estimator panel: True, False or "auto",
    up to 200,000 games)."""

    out_dir: str | Path | None = None
    name: str | None = None
    base: MechanismPair | None = None
    rounds: RoundsLaw | None = None
    panel: bool | str = "auto"

    def __post_init__(self) -> None:
        folder_option(self.out_dir, "out_dir")
        if self.name is not None and not isinstance(self.name, str):
            raise ConfigError("name", f"must be a string or None, got {shown(self.name)}")
        if isinstance(self.base, Mapping):  # a config's base section: parse_base makes a pair
            raise ConfigError(
                "base",
                "must be a mechanism pair (auditsel.DpsgdBase(...), GaussianBase(...), ...), "
                "not a mapping: auditsel.experiments.config.parse_base(mapping, delta) makes one",
            )


Options = TypeVar("Options")


def given_options(cls: type[Options], given: Options | None, argument: str) -> Options:
    """`given`, or the default `cls()` for None; anything else (a dict, another group's
    options object) is a ConfigError naming `argument`."""
    if given is None:
        return cls()
    if not isinstance(given, cls):
        raise ConfigError(
            argument, f"must be {cls.__name__}(...) or None, got {type(given).__name__}"
        )
    return given
