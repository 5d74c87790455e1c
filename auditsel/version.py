"""The version of auditsel: the one place it is written (pyproject.toml reads it from here).

`source_commit()` adds, when the package runs from a git checkout, the commit checked out and
whether the package's files differ from it (result.json records both next to the version).
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

__version__ = "0.2.0"

#: The release that removes the deprecated keywords, keys and aliases of 0.2.0: every
#: DeprecationWarning names it (CHANGELOG.md's 0.2.0 section lists what goes).
REMOVED_IN = "0.3.0"

__all__ = ["REMOVED_IN", "__version__", "source_commit", "start_source_commit"]


#: the two git commands of `source_commit` started ahead by `start_source_commit`, with the
#: process that started them (a forked child never collects its parent's)
_STARTED: dict[int, tuple[subprocess.Popen[str], ...]] = {}


def _root() -> Path:
    return Path(__file__).resolve().parent.parent


def _git_commands(root: Path) -> tuple[list[str], list[str]]:
    return (
        ["git", "-C", str(root), "rev-parse", "HEAD"],
        ["git", "-C", str(root), "status", "--porcelain", "--", "auditsel", "attacks"],
    )


def _start(root: Path) -> tuple[subprocess.Popen[str], ...]:
    return tuple(
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for cmd in _git_commands(root)
    )


def start_source_commit() -> None:
    """Start `source_commit`'s two git commands now, side by side, as child processes (no
    thread), so that the `source_commit()` a run calls at its end only reads their answers:
    `auditsel run` starts them with the game (they take 0.03-0.05 s of wall time). Nothing
    happens outside a git checkout, once the answer is known, or when git cannot start."""
    if source_commit.cache_info().currsize or os.getpid() in _STARTED:
        return
    root = _root()
    if (root / ".git").exists():
        try:
            _STARTED[os.getpid()] = _start(root)
        except OSError:
            pass


@functools.lru_cache(maxsize=1)
def source_commit() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding this package, or (None, None) when the
    package is not in a git checkout (an installed wheel) or git is not available. The two git
    commands run side by side (started ahead where `start_source_commit` was called)."""
    root = _root()
    if not (root / ".git").exists():
        return None, None
    try:
        procs = _STARTED.pop(os.getpid(), None) or _start(root)
    except OSError:
        return None, None
    _STARTED.clear()  # a parent's commands, inherited by a fork: not ours to collect
    try:
        outputs = [p.communicate(timeout=10)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.communicate()
        return None, None
    if any(p.returncode != 0 for p in procs):
        return None, None
    commit, status = outputs
    return (commit.strip() or None), bool(status.strip())
