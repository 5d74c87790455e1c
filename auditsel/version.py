"""The version of auditsel: the one place it is written (pyproject.toml reads it from here).

`source_commit()` adds, when the package runs from a git checkout, the commit checked out and
whether the package's files differ from it (result.json records both next to the version).
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

__version__ = "0.3.0"


@functools.lru_cache(maxsize=1)
def source_commit() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding this package, or (None, None) when the
    package is not in a git checkout (an installed wheel) or git is not available."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None, None
    outputs = []
    for args in (["rev-parse", "HEAD"], ["status", "--porcelain", "--", "auditsel", "attacks"]):
        command = ["git", "-C", str(root), *args]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None, None
        if done.returncode != 0:
            return None, None
        outputs.append(done.stdout)
    commit, status = outputs
    return (commit.strip() or None), bool(status.strip())
