"""Files written whole or not at all: through a temporary file beside the target and a rename,
so a reader (or a resumed run) never sees half a file."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text"]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` via `.NAME.tmp` in the same folder and an atomic rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` via a temporary file and an atomic rename."""
    atomic_write_bytes(path, text.encode())
