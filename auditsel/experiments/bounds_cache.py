"""The bounds of a setting kept on disk across runs of `auditsel run`.

Contract. `cached(key, compute, folder)` returns compute() and, with a `folder`, keeps it there
under the sha256 of the key, of the package's source digest
(`auditsel.games.fingerprint.package_digest`), of the versions of python, numpy, scipy and
dp_accounting and of numpy's vector unit (its enabled dispatch targets: exp and log round
differently with AVX-512). A value is thus read back only by the code, libraries and vector
unit that computed it, for the same setting (pair, law of K, delta, curves or not): it is the
value compute() would return (pickled: every float to the last bit). An unreadable file is
computed again and rewritten; an unwritable folder is not an error (nothing kept). Files are
written atomically. A key whose repr holds an object address is never kept.

`cache_folder(out_dir)` is where `auditsel run` keeps them: `$AUDITSEL_CACHE_DIR` when set (a
folder shared by every run; `off` keeps nothing), else `OUT/.bounds-cache` inside the run's
output folder. The CLI's `--no-cache` keeps nothing; the Python API keeps nothing unless given
a folder. Deleting the folder is always safe. The values are pickles, which run code when read:
the folder is made readable and writable by its owner only, and should not be one that others
can write.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pickle
import platform
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TypeVar

from auditsel.files import atomic_write_bytes
from auditsel.games.fingerprint import package_digest

#: the environment variable naming the folder (or "off")
CACHE_ENV = "AUDITSEL_CACHE_DIR"

T = TypeVar("T")
_ADDRESS = " at 0x"  # in a repr: an object's address, not its value


def cache_folder(out_dir: Path) -> Path | None:
    """The folder `auditsel run` into `out_dir` keeps bounds in (module docstring), None when
    switched off."""
    named = os.environ.get(CACHE_ENV)
    if named is not None:
        return None if named.strip().lower() in ("", "off") else Path(named).expanduser()
    return Path(out_dir) / ".bounds-cache"


def _versions() -> str:
    found = [platform.python_version()]
    for name in ("numpy", "scipy", "dp-accounting"):
        try:
            found.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    return ";".join(found)


def _vector_unit() -> str:
    """The machine and numpy's enabled dispatch targets (those NPY_DISABLE_CPU_FEATURES left)."""
    try:
        umath = importlib.import_module("numpy._core._multiarray_umath")
    except ImportError:  # numpy 1.x
        umath = importlib.import_module("numpy.core._multiarray_umath")
    on = [t for t in umath.__cpu_dispatch__ if umath.__cpu_features__.get(t)]
    return f"{platform.machine()}:{','.join(on)}"


def cache_file(key: object, folder: Path) -> Path:
    """The file that keeps the value of `key` (its repr names the setting: frozen dataclasses
    and floats, whose reprs are exact) for this code and these libraries."""
    digest = hashlib.sha256(
        "\0".join(
            (repr(key), package_digest(), _versions(), _vector_unit(), sys.byteorder)
        ).encode()
    ).hexdigest()
    return folder / f"{digest}.pickle"


def cached(key: object, compute: Callable[[], T], folder: Path | None) -> T:
    """compute(), read back from `folder` when this code kept it there for `key` before, else
    computed and kept (module docstring). folder None: computed, nothing kept."""
    if folder is None or _ADDRESS in repr(key):
        return compute()
    path = cache_file(key, folder)
    try:
        value: T = pickle.loads(path.read_bytes())
        return value
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
        pass  # not kept yet, or unreadable: computed again below
    value = compute()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_bytes(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        pass  # a read-only or full disk: the value is computed, not kept
    return value
