"""Options of the audits of your own code, as small frozen keyword-only dataclasses.

Contract: an options object only carries settings; none changes a number an audit reports
(the same seed gives the same eps_L for any `ExecutionOptions`: each chunk of games is seeded
by its index, `auditsel.games.engine`). `ExecutionOptions` says where and how the games play
(workers, backend, chunks, checkpoints, progress); the functions that take it
(`audit_protocol`, `audit_pipeline`, `plan_pipeline`) check each field where it is used and
raise `ConfigError` naming it. `legacy_options` maps the keyword arguments these functions took
before (jobs=, checkpoint_dir=, ...) onto an options object, for one release, with a
DeprecationWarning.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["ExecutionOptions", "legacy_options"]


@dataclass(frozen=True, kw_only=True)
class ExecutionOptions:
    """Where and how the games play; never what they compute.

    `jobs`: worker processes (joblib's convention: -1 all cores); `backend`: loky, threading or
    dask (None: the function's default); `scheduler`: a dask scheduler address (backend dask);
    `chunk_size`: games per chunk, the unit of work and of checkpoints (None: the function's
    default); `checkpoint_dir`: finished chunks are kept there and an interrupted audit resumes
    from them; `progress`: a progress bar on stderr."""

    jobs: int = 1
    backend: str | None = None
    scheduler: str | None = None
    chunk_size: int | None = None
    checkpoint_dir: str | Path | None = None
    progress: bool = False


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
    applied for one release with a DeprecationWarning; a keyword that is no field is a
    TypeError, as Python's own."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(old) - names
    if unknown:
        raise TypeError(
            f"{caller}() got unexpected keyword arguments: {', '.join(sorted(unknown))}"
        )
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
        f"are accepted for one release",
        DeprecationWarning,
        stacklevel=3,
    )
    return replace(base, **old)  # type: ignore[type-var]
