"""Options of the audits of your own code, as small frozen keyword-only dataclasses.

Contract: an options object only carries settings; none changes a number an audit reports
(the same seed gives the same eps_L for any `ExecutionOptions`: each chunk of games is seeded
by its index, `auditsel.games.engine`). `AuditOptions` holds the statistics of an audit (confidence, threshold rule, seed: these
do change eps_L, as documented by `auditsel.auditing.rules`), `ExecutionOptions` where and how
the games play (workers, backend, chunks, checkpoints, memory, progress: the same numbers
whatever they are), `ReportOptions` what is written beside the result (the output folder, its
name, the tuning bounds of a mechanism pair and a law of K, the estimator panel). The functions
that take them (`audit_protocol`, `audit_pipeline`, `plan_pipeline`) check each field where it
is used and raise `ConfigError` naming it. `legacy_options` maps the keyword arguments these functions took
before (jobs=, checkpoint_dir=, ...) onto an options object until auditsel 0.3.0 removes them
(`auditsel.version.REMOVED_IN`), with a DeprecationWarning.
"""

from __future__ import annotations

import numbers
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # annotations only: an options object imports nothing heavy
    from auditsel.auditing.rules import ThresholdRule
    from auditsel.roles import MechanismPair
    from auditsel.rounds import RoundsLaw

from auditsel.errors import AuditselDeprecationWarning, ConfigError, shown
from auditsel.version import REMOVED_IN

__all__ = [
    "AuditOptions",
    "ExecutionOptions",
    "ReportOptions",
    "grouped_options",
    "legacy_options",
]


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
        _folder(self.out_dir, "out_dir")
        if self.name is not None and not isinstance(self.name, str):
            raise ConfigError("name", f"must be a string or None, got {shown(self.name)}")
        if isinstance(self.base, Mapping):  # a config's base section: parse_base makes a pair
            raise ConfigError(
                "base",
                "must be a mechanism pair (auditsel.DpsgdBase(...), GaussianBase(...), ...), "
                "not a mapping: auditsel.experiments.config.parse_base(mapping, delta) makes one",
            )


@dataclass(frozen=True, kw_only=True)
class ExecutionOptions:
    """Where and how the games play; never what they compute.

    `jobs`: worker processes (joblib's convention: -1 all cores); `backend`: loky, threading or
    dask (None: the function's default); `scheduler`: a dask scheduler address (backend dask);
    `chunk_size`: games per chunk, the unit of work and of checkpoints (None: the function's
    default); `checkpoint_dir`: finished chunks are kept there and an interrupted audit resumes
    from them; `stream`: audit chunk by chunk from disk, in bounded memory (True, False or
    "auto": above 2^20 games with a checkpoint folder); `progress`: a progress bar on stderr
    (progress lines where stderr is no terminal); `game_threads`: BLAS, OpenMP and torch
    threads of the process playing the games (None: 1 with one job, else cores // jobs;
    `auditsel.games.backends`); `checkpoint_after`: seconds a game plays before its chunks are
    written (None: 5; 0: from the first chunk); `fresh`: start over: delete the checkpoints
    first (once the output folder is locked and every other option checked), resume nothing."""

    jobs: int = 1
    backend: str | None = None
    scheduler: str | None = None
    chunk_size: int | None = None
    checkpoint_dir: str | Path | None = None
    stream: bool | str = "auto"
    progress: bool = False
    game_threads: int | None = None
    checkpoint_after: float | None = None
    fresh: bool = False

    def __post_init__(self) -> None:
        _folder(self.checkpoint_dir, "checkpoint_dir")


def _folder(value: object, field: str) -> None:
    """A ConfigError naming `field` unless `value` is None or a path (str or os.PathLike)."""
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise ConfigError(field, f"must be a folder (a str or a Path) or None, got {shown(value)}")


Options = TypeVar("Options")


def legacy_options(
    cls: type[Options],
    given: Options | None,
    old: Mapping[str, Any],
    *,
    caller: str,
    argument: str,
) -> Options:
    """`given`, or the default `cls()`, with the old keyword arguments `old` (fields of `cls`)
    applied until auditsel 0.3.0 with a DeprecationWarning; a keyword that is no field is a
    TypeError, as Python's own."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(old) - names
    if unknown:
        raise TypeError(
            f"{caller}() got unexpected keyword arguments: {', '.join(sorted(unknown))}"
        )
    if given is not None and not isinstance(given, cls):
        raise ConfigError(
            argument, f"must be {cls.__name__}(...) or None, got {type(given).__name__}"
        )  # a dict, or another group's options object: never read by its field names
    base = given if given is not None else cls()
    if not old:
        return base
    if given is not None:
        raise TypeError(
            f"{caller}(): give {', '.join(sorted(old))} on {argument}={cls.__name__}(...), "
            f"not beside it"
        )
    warnings.warn(
        f"{caller}({', '.join(f'{k}=...' for k in sorted(old))}) is deprecated; pass "
        f"{argument}={cls.__name__}(...) (auditsel.pipelines.audit_options); the old keywords "
        f"are accepted until auditsel {REMOVED_IN}, which removes them",
        AuditselDeprecationWarning,
        stacklevel=3,
    )
    return replace(base, **old)  # type: ignore[type-var]


def grouped_options(
    groups: Mapping[str, tuple[type, Any]], old: Mapping[str, Any], *, caller: str
) -> dict[str, Any]:
    """Each group's options object (argument name -> (class, given)), the old keyword
    arguments `old` sorted into the groups whose fields they are (one DeprecationWarning for
    the call, as `legacy_options`); a keyword of no group is a TypeError."""
    owner = {f.name: arg for arg, (cls, _) in groups.items() for f in fields(cls)}
    unknown = set(old) - set(owner)
    if unknown:
        raise TypeError(
            f"{caller}() got unexpected keyword arguments: {', '.join(sorted(unknown))}"
        )
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for arg, (cls, given) in groups.items():
            mine = {k: v for k, v in old.items() if owner[k] == arg}
            out[arg] = legacy_options(cls, given, mine, caller=caller, argument=arg)
    if caught:
        args = ", ".join(
            f"{arg}={cls.__name__}(...)"
            for arg, (cls, _) in groups.items()
            if any(owner[k] == arg for k in old)
        )
        warnings.warn(
            f"{caller}({', '.join(f'{k}=...' for k in sorted(old))}) is deprecated; pass "
            f"{args} (auditsel.pipelines.audit_options); the old keywords are accepted until "
            f"auditsel {REMOVED_IN}, which removes them",
            AuditselDeprecationWarning,
            stacklevel=3,
        )
    return out
