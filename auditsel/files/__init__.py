"""Files and output folders: files written whole or not at all, where a run may write and
delete, one run per folder.

Contract: `claim_folder` resolves an output folder, refuses one that escapes
(`check_output_path`), creates and locks it (`folder_lock`) and returns an `OutputFolder`;
`atomic_write_bytes`, `atomic_write_text` and `temporary_beside` write a file whole or not at
all; `open_regular` and `read_regular` read a file the user hands over without ever blocking.
What a claimed folder may delete:

* `OutputFolder.discard()` (a failed run) removes exactly what this run created: every path
  under the folder that was not there when it was claimed, then the folder itself and the
  parents it created, if they are empty. A path that existed before is never removed.
  `OutputFolder.release()` (success, interruption, a full disk) keeps everything, including
  checkpoints to resume from, and removes only an empty folder this run created. Both do
  nothing in any process but the one that claimed the folder (a child forked by the user's
  code that exits through the audit's stack deletes nothing and keeps the lock).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import BinaryIO

import filelock

from auditsel.errors import ConfigError

__all__ = [
    "LOCK_NAME",
    "DISK_FULL",
    "OutputFolder",
    "claim_folder",
    "folder_lock",
    "FolderLock",
    "atomic_write_bytes",
    "atomic_write_text",
    "temporary_beside",
    "open_regular",
    "read_regular",
    "check_output_path",
]

LOCK_NAME = ".auditsel.lock"
#: errno values that mean "the disk (or the quota) is full": the environment, not a bug
DISK_FULL = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e is not None)


def check_output_path(path: str | Path, field: str) -> Path:
    """The resolved folder (symbolic links and `..` followed), or a ConfigError naming `field`
    when it escapes to the working directory, one of its parents (`--out ..`, `--out x/../..`),
    the home directory or the file system root, or names an existing file; also, before the
    file system is asked, for a name over NAME_MAX bytes or a path of PATH_MAX bytes or more."""
    text = os.fspath(path)
    if not text or "\0" in text:
        raise ConfigError(field, f"must name a folder, got {text!r}")
    _check_path_length(text, field)
    try:
        here = Path.cwd().resolve()
    except OSError:  # the working folder was deleted: resolve against nothing
        here = None
    try:
        target = Path(text).resolve()
        target.exists()  # a loop past the resolved part raises here (ELOOP)
    except (RuntimeError, OSError) as err:  # a symbolic link loop, or a path that cannot be
        loop = isinstance(err, RuntimeError) or getattr(err, "errno", None) == errno.ELOOP
        reason = "it runs into a symbolic link loop" if loop else getattr(err, "strerror", err)
        raise ConfigError(field, f"{text} cannot be resolved ({reason}); name a folder") from None
    if here is not None and (target == here or target in here.parents):
        what = "the current folder" if target == here else "a parent of the current folder"
        raise ConfigError(
            field,
            f"{text} is {what} ({target}); name a new or dedicated folder below it, "
            f"e.g. results/NAME",
        )
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError, OSError):  # no home folder known
        home = None
    if target == home or target == Path(target.anchor):
        raise ConfigError(field, f"{text} is {target}; name a dedicated folder for the outputs")
    if target.exists() and not target.is_dir():
        raise ConfigError(field, f"{text} exists and is not a folder; name a folder")
    return target


class OutputFolder(AbstractContextManager["OutputFolder"]):
    """A claimed (locked) output folder; see the module docstring for what it may delete."""

    def __init__(self, path: Path, created: list[Path], before: set[str] | None, lock):
        self.path = path
        self._created = created  # folders this claim made, outermost first
        self._before = before  # relative paths present at the claim (None: the folder is new)
        self._lock = lock
        self._pid = os.getpid()  # the process that claimed it: the only one that cleans up

    def release(self) -> None:
        """Unlock; keep every file; remove the folders this claim created if they are empty."""
        if os.getpid() != self._pid:  # a child forked by the user's code: nothing
            return
        self._lock.close()
        _rmdirs(self._created)

    def discard(self) -> None:
        """Unlock and remove what this run created (and only that); see the module docstring.
        Nothing at all in a process other than the one that claimed the folder."""
        if os.getpid() != self._pid:
            return
        new = _tree(self.path) - (self._before or set())
        new.discard(LOCK_NAME)
        # deepest first: a folder is empty (of what this run made) when its turn comes
        for rel in sorted(new, key=lambda r: r.count("/"), reverse=True):
            target = self.path / rel
            try:
                if target.is_dir() and not target.is_symlink():
                    target.rmdir()
                else:
                    target.unlink()
            except OSError:
                pass  # best effort: what cannot be removed stays, nothing else is touched
        self._lock.close()
        _rmdirs(self._created)

    def __exit__(self, kind, value, tb) -> None:
        keep = kind is None or issubclass(kind, (KeyboardInterrupt, SystemExit))
        # a full disk or a closed pipe: keep what was written (checkpoints resume)
        if keep or isinstance(value, OSError) and value.errno in (*DISK_FULL, errno.EPIPE):
            self.release()
        else:
            self.discard()


def _tree(folder: Path) -> set[str]:
    """Relative paths of every file, link and folder under `folder` (links not followed)."""
    out = set()
    for root, dirs, files in os.walk(folder, followlinks=False):
        rel = os.path.relpath(root, folder)
        for name in dirs + files:
            out.add(name if rel == "." else f"{rel}/{name}")
    return out


def claim_folder(path: str | Path, *, field: str = "--out") -> OutputFolder:
    """Resolve, refuse escapes, create one by one (remembering what was created) and lock an
    output folder.

    ConfigError (exit 2) for a folder that escapes (see `check_output_path`), cannot be
    created or written, or is in use by another run; an OSError with a DISK_FULL errno is
    passed on (the environment)."""
    target = check_output_path(path, field)
    created: list[Path] = []
    missing = [p for p in [target, *target.parents] if not p.exists()]
    try:
        for folder in reversed(missing):
            try:
                folder.mkdir()
                created.append(folder)
            except FileExistsError:  # made meanwhile by someone else: not ours to remove
                if not folder.is_dir():
                    raise
        before = None if created and created[-1] == target else _tree(target)
        lock = folder_lock(target, field)
        try:
            with tempfile.NamedTemporaryFile(dir=target, prefix=".write-test-"):
                pass
        except BaseException:
            lock.close()
            raise
    except ConfigError:
        _rmdirs(created)
        raise
    except OSError as err:
        _rmdirs(created)
        if err.errno in DISK_FULL:
            raise
        raise ConfigError(
            field, f"cannot write to {path} ({err.strerror or err}); choose a writable folder"
        ) from None
    return OutputFolder(target, created, before, lock)


def _rmdirs(created: list[Path]) -> None:
    """Remove the created folders, innermost first, while they are empty (anything written
    there by others stays)."""
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:
            break


class FolderLock(AbstractContextManager["FolderLock"]):
    """A held folder lock (`folder_lock`); `close()` releases it (also as a context manager)."""

    def __init__(self, lock: filelock.BaseFileLock, path: Path):
        self._lock: filelock.BaseFileLock | None = lock
        self.path = path
        self._pid = os.getpid()

    def close(self) -> None:
        """Release the lock and remove its file; nothing in a forked child (the lock and its
        file are the parent's)."""
        if self._lock is None or os.getpid() != self._pid:
            return
        try:  # remove the file while holding the lock (filelock may already do so)
            os.unlink(self.path)
        except OSError:
            pass
        self._lock.release(force=True)
        self._lock = None

    def __exit__(self, *exc: object) -> None:
        self.close()


def folder_lock(folder: str | Path, field: str) -> FolderLock:
    """Lock an existing folder (`DIR/.auditsel.lock`, filelock's OS lock: `flock` on POSIX) for
    this process, or raise a ConfigError naming `field` at once when another process (or
    another claim here) holds it ("... is in use by another auditsel run (pid N)": the holder
    writes its pid into the lock file). The kernel releases the lock when the holder exits,
    also when it is killed: no stale locks."""
    folder = Path(folder)
    path = folder / LOCK_NAME
    lock = filelock.FileLock(path, timeout=0, thread_local=False)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise ConfigError(
            field,
            f"{folder} is in use by another auditsel run{_read_pid(path)}; wait for it to "
            f"finish or choose another folder",
        ) from None
    try:
        path.write_text(str(os.getpid()))
    except BaseException:
        lock.release(force=True)
        raise
    return FolderLock(lock, path)


def _read_pid(path: Path) -> str:
    try:
        text = path.read_text()[:32].strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return f" (pid {text})" if text.isdigit() else ""


_UMASK = os.umask(0o022)  # the process's mask, read by setting one and put back at once
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK  # what open() would give a new file


@contextmanager
def temporary_beside(path: str | Path) -> Iterator[tuple]:
    """(binary handle, temporary path) of a new, uniquely named file beside `path`, with the
    permissions a plain new file gets; renamed onto `path` when the block ends, removed if it
    fails. An OSError names `path` (a full disk says where)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            yield handle, tmp
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(err, OSError) and err.filename is None and err.errno is not None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a uniquely named temporary file beside it and an atomic
    rename: readers (a resumed run, concurrent writers) never see half a file."""
    with temporary_beside(path) as (handle, _):
        handle.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` through a temporary file and an atomic rename."""
    atomic_write_bytes(path, text.encode())


NAME_MAX = 255  # bytes in one component of a path (Linux, macOS)
PATH_MAX = 4096  # bytes in a whole path


def _check_path_length(text: str, field: str) -> None:
    """A ConfigError naming `field` for a path the file system would refuse as too long."""
    encoded = os.fsencode(text)
    absolute = os.fsencode(os.path.abspath(text))
    if len(absolute) >= PATH_MAX:
        raise ConfigError(
            field, f"the path is {len(absolute):,} bytes long; at most {PATH_MAX - 1:,} allowed"
        )
    longest = max(encoded.split(os.fsencode(os.sep)), key=len)
    if len(longest) > NAME_MAX:
        raise ConfigError(
            field,
            f"a folder name of {len(longest):,} bytes ({os.fsdecode(longest[:40])}...); "
            f"at most {NAME_MAX} bytes per name",
        )


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def _require_regular(mode: int, path: str | os.PathLike[str], field: str) -> None:
    """A ConfigError naming `field` unless `mode` is a regular file's."""
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise ConfigError(field, f"{os.fspath(path)} is {kind}; pass a regular file")


def open_regular(path: str | os.PathLike[str], field: str) -> BinaryIO:
    """A binary handle on the regular file `path`, opened without blocking; a ConfigError
    naming `field` for a FIFO, device, socket or folder (never opened for reading). Missing
    files raise FileNotFoundError, as open() does."""
    _require_regular(os.stat(path).st_mode, path, field)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:  # it may have been swapped between the stat and the open
        _require_regular(os.fstat(fd).st_mode, path, field)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike, field: str, limit: int) -> bytes:
    """At most `limit` bytes of the regular file `path` (see `open_regular`); a ConfigError
    naming `field` when the file is larger."""
    with open_regular(path, field) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(
            field, f"{os.fspath(path)} is larger than {limit:,} bytes; it is not what was expected"
        )
    return data
