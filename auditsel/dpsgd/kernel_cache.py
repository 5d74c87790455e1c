"""numba's on-disk cache of the compiled kernels, checked before anything in it is loaded.

numba's cache files (``.nbi``, ``.nbc``) are pickles, loaded as code. So ``compile_cached``
refuses a folder that another user could have written in (the kernels are then compiled in
memory for this process only, with one warning naming the folder and the fix) and checks every
cache file against the SHA-256 digests that the process which built it wrote beside it
(``MANIFEST``): a damaged, truncated, unknown or unlisted file is deleted with a warning and
rebuilt, never loaded; after a build it writes the digests (atomically). The rules, and what
Windows skips: docs/explanation/architecture.md, "The DP-SGD kernels".
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numba

MANIFEST = "auditsel-kernels.sha256.json"
_SUFFIXES = (".nbi", ".nbc")


def unsafe_reason(folder: Path) -> str | None:
    """Why another user could have written in `folder` or its cache files, or None."""
    if not hasattr(os, "getuid"):  # Windows: ACLs, not mode bits; digests still checked
        return None
    me = os.getuid()
    paths = [folder, *sorted(p for p in folder.iterdir() if p.suffix in _SUFFIXES)]
    paths += [folder / MANIFEST] if (folder / MANIFEST).exists() else []
    for path in paths:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            return f"{path} is a symbolic link"
        if st.st_uid not in (me, 0):
            return f"{path} is owned by another user (uid {st.st_uid})"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{path} is writable by its group or by others"
    for parent in folder.resolve().parents:  # a folder above that others may rename things in
        st = parent.stat()
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
            return f"{parent} (above the cache) is writable by its group or by others"
        if st.st_uid not in (me, 0):
            return f"{parent} (above the cache) is owned by another user (uid {st.st_uid})"
    return None


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ours(folder: Path, module: str) -> list[Path]:
    """The cache files of `module` for this Python (``module.qualname-line.py311...``)."""
    tag = f".py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}."
    return sorted(p for p in folder.glob(f"{module}.*") if p.suffix in _SUFFIXES and tag in p.name)


def _read_manifest(folder: Path) -> dict[str, str]:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _verify(folder: Path, module: str) -> list[str]:
    """Delete every cache file of `module` whose digest is not the one written when it was
    built; returns their names."""
    known = _read_manifest(folder)
    removed = []
    for path in _ours(folder, module):
        if known.get(path.name) != _digest(path):
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def _write_manifest(folder: Path, module: str) -> None:
    """Digests of the cache files of `module` as they are now (one atomic replace; other
    modules' entries are kept)."""
    ours = _ours(folder, module)
    known = {
        k: v
        for k, v in _read_manifest(folder).items()
        if (folder / k) not in ours and (folder / k).exists()
    }
    known.update({p.name: _digest(p) for p in ours})
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".manifest-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(known, f, indent=0, sort_keys=True)
        os.replace(tmp, folder / MANIFEST)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def compile_cached(
    functions: Iterable[tuple[Any, list[Any]]],
    *,
    module: str,
    nogil: bool = True,
    error_model: Literal["python", "numpy"] = "python",
) -> list[Any]:
    """``numba.njit(signatures, cache=True, nogil=nogil, error_model=error_model)`` of each
    (function, signatures), all defined in the module file named `module`, with numba's cache
    checked first; without a safe cache they are compiled in memory. numba keys its cache on
    the source file, not on these options: set them in that file."""
    functions = list(functions)
    folder = Path()
    try:  # where numba would cache them (creating the dispatcher reads nothing)
        where = numba.njit(cache=True, nogil=nogil)(functions[0][0]).stats.cache_path
        folder = Path(where or "")
        reason = unsafe_reason(folder) if where else "numba found no cache folder"
    except (OSError, RuntimeError) as err:  # no cache folder numba can write
        reason = f"no usable cache folder ({err})"
    if reason is not None:
        warnings.warn(
            f"auditsel: not using numba's cache of the DP-SGD kernels: {reason}; they are "
            f"compiled for this process only (a few seconds). Make that folder private "
            f"(chmod go-w), or set NUMBA_CACHE_DIR to a folder only you can write.",
            RuntimeWarning,
            stacklevel=3,
        )
        return [
            numba.njit(sigs, cache=False, nogil=nogil, error_model=error_model)(f)
            for f, sigs in functions
        ]
    removed = _verify(folder, module)
    if removed:
        warnings.warn(
            f"auditsel: {len(removed)} file(s) of numba's cache of the DP-SGD kernels in "
            f"{folder} did not match the digests written when they were built (damaged or not "
            f"ours: {', '.join(removed)}); deleted, the kernels are rebuilt",
            RuntimeWarning,
            stacklevel=3,
        )
    compiled = [
        numba.njit(sigs, cache=True, nogil=nogil, error_model=error_model)(f)
        for f, sigs in functions
    ]
    if removed or any(d.stats.cache_misses for d in compiled):
        _write_manifest(folder, module)
    return compiled
