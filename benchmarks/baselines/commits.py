"""A baseline commit's tree, for benchmarks that compare two commits (asv-style).

The tree is the commit's files (``git archive``) in a temporary folder, removed afterwards; it
runs with its own package first on the path (``PYTHONPATH`` = the tree) in the same Python
environment. The baseline is that commit's code, helpers and all, so it cannot drift with
today's code the way a copy of old code that imports today's helpers does. Nothing here
imports the package.

    from baselines.commits import checkout, run_in
    with checkout("794a0de") as tree:
        done = run_in(tree, [sys.executable, "-c", "import auditsel; print(auditsel.__file__)"])
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def checkout(commit: str) -> Iterator[Path]:
    """The files of `commit` (a hash, tag or branch of this repository) in a temporary folder."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit],
        check=True,
        capture_output=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="auditsel-baseline-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp)


def run_in(
    tree: Path, command: Sequence[str], *, cwd: str | Path | None = None
) -> subprocess.CompletedProcess:
    """`command` with `tree`'s package first on the path, in `cwd` (default: a fresh temporary
    folder, so that no other tree's package is found from the working directory)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory(prefix="auditsel-run-") as work:
        return subprocess.run(
            list(command), cwd=cwd or work, env=env, capture_output=True, text=True
        )
