"""Digests of the code that determines a game's numbers, for checkpoint fingerprints.

Contract. A checkpoint may be resumed only by the code that wrote it. Two digests make that
checkable:

* `package_digest()`: sha256 over the source files (.py, .c) of `auditsel` and `attacks`, by
  relative path, computed once per process.

* `source_digest(*objects)`: sha256 over the code each object runs: the full source file of
  the module that defines it, the bytecode of the function itself and the `repr` of a
  partial's bound arguments. An edited function never has the digest of the old one, except
  when the edit is in another module that it imports.

* `code_identity(*functions, **extra)`: what, besides the config, determines a game's numbers,
  written into checkpoint manifests: the auditsel version, the package digest, numpy's
  version, the random-stream versions (`auditsel.dpsgd.RANDOM_STREAMS`,
  `auditsel.selection.WINNER_STREAMS`), the digest of the user's functions when given, and any
  `extra` entry. `describe_change(old, new)` says in words what differs between two of them.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import re
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from auditsel.dpsgd import RANDOM_STREAMS
from auditsel.selection import WINNER_STREAMS
from auditsel.version import __version__

_PACKAGES = ("auditsel", "attacks")
_SUFFIXES = (".py", ".c")
_ADDRESS = re.compile(rb" at 0x[0-9a-fA-F]+")


@functools.lru_cache(maxsize=1)
def package_digest() -> str:
    """sha256 (hex) of the source files of the installed `auditsel` and `attacks` packages."""
    h = hashlib.sha256()
    for name in _PACKAGES:
        module = sys.modules.get(name) or __import__(name)
        root = Path(str(module.__file__)).resolve().parent
        for path in sorted(p for p in root.rglob("*") if p.suffix in _SUFFIXES and p.is_file()):
            rel = f"{name}/{path.relative_to(root).as_posix()}"
            h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _code_bytes(code: types.CodeType, seen: set[int]) -> bytes:
    if id(code) in seen:
        return b""
    seen.add(id(code))
    parts = [code.co_code, repr(code.co_names).encode(), repr(code.co_varnames).encode()]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            parts.append(_code_bytes(const, seen))
        else:
            parts.append(repr(const).encode())
    return b"\0".join(parts)


def _unwrap(obj: object) -> tuple[object, bytes]:
    """The function or class behind obj, and the bytes of what is bound to it."""
    bound = b""
    while True:
        if isinstance(obj, functools.partial):
            bound += repr((obj.args, sorted(obj.keywords.items()))).encode()
            obj = obj.func
        elif isinstance(obj, types.MethodType):
            obj = obj.__func__
        elif hasattr(obj, "__wrapped__"):
            obj = obj.__wrapped__
        else:
            break
    if not isinstance(obj, (types.FunctionType, type, types.BuiltinFunctionType)):
        bound += repr(getattr(obj, "__dict__", "")).encode()
        obj = type(obj)
    return obj, bound


def _module_source(obj: Any) -> bytes:
    module = inspect.getmodule(obj)
    try:
        path = inspect.getsourcefile(module) if module is not None else None
    except TypeError:  # a built-in module
        path = None
    if path and Path(path).is_file():
        return Path(path).read_bytes()
    try:  # an interactive session keeps the source in linecache
        return inspect.getsource(obj).encode()
    except (OSError, TypeError):
        return b""


def source_digest(*objects: object) -> str:
    """sha256 (hex) of the code the objects run, from their modules' sources and bytecode."""
    h = hashlib.sha256()
    for item in objects:
        target, bound = _unwrap(item)
        name = f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', '')}"
        bound = _ADDRESS.sub(b"", bound)  # object addresses differ from run to run
        h.update(name.encode() + b"\0" + bound + b"\0" + _module_source(target) + b"\0")
        code = getattr(target, "__code__", None)
        if code is not None:
            h.update(_code_bytes(code, set()))
    return h.hexdigest()


def code_identity(*functions: object, **extra: str) -> dict[str, str]:
    """The code a game's numbers depend on (see the module docstring), as strings."""
    identity = {
        "auditsel": __version__,
        "package": package_digest(),
        "numpy": np.__version__,
        "random_streams": str(RANDOM_STREAMS),
        "winner_streams": str(WINNER_STREAMS),
    }
    if functions:
        identity["functions"] = source_digest(*functions)
    identity.update({key: str(value) for key, value in extra.items()})
    return identity


_WHAT = {
    "auditsel": "auditsel {old}, now {new}",
    "package": "the auditsel source code changed",
    "numpy": "numpy {old}, now {new}",
    "torch": "torch {old}, now {new}",
    "random_streams": "random streams version {old}, now {new}",
    "winner_streams": "the reduced games' random streams version {old}, now {new}",
    "functions": "the code of your release/score functions changed",
}


def describe_change(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """What differs between two code identities, in words ('' when nothing does)."""
    if not isinstance(old, Mapping):
        return "written by an auditsel that did not record its code"
    parts = []
    for key in dict.fromkeys([*new, *old]):
        a, b = old.get(key), new.get(key)
        if a != b:
            template = _WHAT.get(key, key + " {old}, now {new}")
            parts.append(template.format(old=a or "unrecorded", new=b or "absent"))
    return "; ".join(parts)
