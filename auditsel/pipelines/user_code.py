"""The boundary around the user's code: importing it by path, calling it, and naming the files
it runs from.

Contract.

* `import_file(path, field)` imports a Python file under a module name of its own,
  `auditsel_user_<12 hex digits of the resolved path and the content>_<stem>`: two files with
  one stem are two modules, and a file named like a standard module (`json.py`) neither shadows
  it nor is shadowed (its folder goes at the end of sys.path). A game sent to a worker process
  carries these files' names and paths, and the worker imports them the same way before it
  unpickles their functions (`auditsel.pipelines.game.USER_MODULES`).
* `call_user(field, what, fn, *args)` calls a function of the user's: anything it raises but
  KeyboardInterrupt (SystemExit included) becomes a `PipelineError` naming `field`, `what` and
  the exception, with the user's traceback; while it runs, sys.argv is the file alone (a
  script that parses its command line at import sees none of auditsel's).
* `user_files(*objects)` is path -> sha256 of the source files the user's code runs from: the
  modules of the objects (an instance: its class's), of every module their globals refer to,
  transitively, and the project-local files those import (read with `ast`, never run: lazy
  imports too), less installed packages (the standard library, site-packages, the
  interpreter's prefixes) and auditsel. A file beside them that nothing imports is not the
  pipeline's. `describe_changes(old, new)` names the files that changed, appeared or went.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
import sysconfig
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from auditsel.errors import ConfigError
from auditsel.pipelines.game import (
    PipelineError,
    describe_exception,
    import_by_path,
    user_traceback,
)

_PARSING = threading.Lock()  # ast.parse, one thread at a time (two audits in two threads)
MAX_USER_FILES = 2000  # files fingerprinted (a folder with more is a sign of a wrong guess)


def module_name(path: Path) -> str:
    """The unique module name of a file (module docstring): by its path and its content, so
    that an edited file is imported afresh, also by a worker that imported the old one."""
    h = hashlib.sha256(str(path).encode("utf-8", "surrogatepass") + b"\0")
    try:
        h.update(path.read_bytes())
    except OSError:
        pass
    digest = h.hexdigest()[:12]
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in path.stem)
    return f"auditsel_user_{digest}_{stem}"


@contextmanager
def _argv(path: Path | None) -> Iterator[None]:
    saved = sys.argv
    sys.argv = [str(path) if path is not None else saved[0] if saved else ""]
    try:
        yield
    finally:
        sys.argv = saved


def call_user(
    field: str, what: str, fn: Callable[..., Any], *args: Any, path: Path | None = None
) -> Any:
    """`fn(*args)`, with anything it raises (but Ctrl-C) made the user's PipelineError."""
    try:
        with _argv(path):
            return fn(*args)
    except (KeyboardInterrupt, ConfigError):
        raise
    except BaseException as err:
        raise PipelineError(
            field, f"{what} raised {describe_exception(err)}", user_traceback(err)
        ) from None


def import_file(path: str | Path, field: str) -> types.ModuleType:
    """The module of the Python file `path`, imported once under its unique name."""
    resolved = Path(path).resolve()
    if not resolved.is_file():
        raise ConfigError(field, f"no such file: {path}")
    name = module_name(resolved)
    if name in sys.modules:
        return sys.modules[name]
    module: types.ModuleType = call_user(
        field, f"importing {path}", import_by_path, name, str(resolved), path=resolved
    )
    return module


def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    here = Path(__file__).resolve().parents[1]  # auditsel/
    roots |= {str(here), str(here.parent / "attacks")}
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots if r))


def _file_of(module: types.ModuleType) -> str | None:
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        return None
    real = os.path.realpath(path)
    return real if os.path.isfile(real) else None


def _module_of(value: Any) -> types.ModuleType | None:
    if isinstance(value, types.ModuleType):
        return value
    name = getattr(value, "__module__", None)
    if not isinstance(name, str):
        name = getattr(type(value), "__module__", None)
    return sys.modules.get(name) if isinstance(name, str) else None


def _user_modules(
    objects: tuple[Any, ...], installed: tuple[str, ...]
) -> dict[str, types.ModuleType]:
    """file -> module of the user's modules reachable from the objects (module docstring)."""
    found: dict[str, types.ModuleType] = {}
    queue = [m for m in map(_module_of, objects) if m is not None]
    while queue and len(found) < MAX_USER_FILES:
        module = queue.pop()
        path = _file_of(module)
        if path is None or path in found or path.startswith(installed):
            continue
        found[path] = module
        for value in list(vars(module).values()):
            other = _module_of(value)
            if other is not None and other is not module:
                queue.append(other)
    return found


def _imported_files(paths: list[str], installed: tuple[str, ...]) -> set[str]:
    """The project-local files that the files `paths` import, transitively (module docstring):
    each `import a.b` and `from a import b` looked up beside the importing file."""
    seen: set[str] = set()
    queue = list(paths)
    while queue and len(seen) < MAX_USER_FILES:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            source = Path(path).read_bytes()
            with _PARSING:  # CPython 3.11's parser is not safe in two threads at once
                tree = ast.parse(source, filename=path)
        except (OSError, SyntaxError, ValueError):
            continue
        folder = Path(path).parent
        for name in _import_names(tree):
            for found in _local_files(folder, name):
                if not found.startswith(installed) and found not in seen:
                    queue.append(found)
    return seen


def _import_names(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(level, dotted name) of every module an `import` or `from ... import` names (a
    `from a import b` names a.b too: b may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            yield node.level, base
            for alias in node.names:
                yield node.level, f"{base}.{alias.name}" if base else alias.name


def _local_files(folder: Path, name: tuple[int, str]) -> list[str]:
    """The files beside `folder` (or above it, for a relative import) that the dotted module
    name would load: every package __init__.py on the way, and the module itself."""
    level, dotted = name
    root = folder
    for _ in range(max(level - 1, 0)):
        root = root.parent
    out: list[str] = []
    parts = [p for p in dotted.split(".") if p]
    for i in range(len(parts)):
        stem = root.joinpath(*parts[: i + 1])
        for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
            if candidate.is_file():
                out.append(os.path.realpath(candidate))
    return out


def user_files(*objects: Any) -> dict[str, str]:
    """path -> sha256 of each source file the user's code runs from (module docstring)."""
    installed = _installed_roots()
    modules = list(_user_modules(objects, installed))
    paths = set(modules) | _imported_files(modules, installed)
    digests = {}
    for path in sorted(paths):
        try:
            digests[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            digests[path] = "unreadable"
    return digests


def describe_changes(old: Any, new: Mapping[str, str]) -> str:
    """The files that differ between two `user_files` results, in words."""
    if not isinstance(old, Mapping):
        return "the files your code runs from were not recorded"
    parts = [f"{p} changed" for p in new if p in old and old[p] != new[p]]
    parts += [f"{p} is new" for p in new if p not in old]
    parts += [f"{p} is no longer used" for p in old if p not in new]
    return "; ".join(parts[:5]) + (f" (and {len(parts) - 5} more)" if len(parts) > 5 else "")
