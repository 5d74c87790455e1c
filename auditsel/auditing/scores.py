"""Scores and coins: the one family of checks for arrays and score files.

`check_scores(scores, member)` is what every audit runs on its input (the Python API and the
score files alike); `read_scores(path)` reads a score file for `auditsel audit-scores`: a CSV
with a header naming columns `score` and `member` (in any order, among others), or an .npz
with arrays `score` and `member`. What they accept (MIN_GAMES, MAX_FILE_BYTES, MAX_ROWS) and
refuse, before anything is read where they can, is docs/reference/estimators.md's "Input": one
`ConfigError` naming the argument, or for a file a `ScoreFileError` (a `ConfigError`, exit 2
in the CLI) whose field is the path.

A CSV is read in blocks of whole lines by `np.loadtxt`; a block it refuses (quotes, text, a
ragged row) is re-read with the csv module, which names the bad line. A ragged row is refused,
never read with its columns shifted.
"""

from __future__ import annotations

import csv
import io
import os
import stat
import zipfile
from collections.abc import Callable
from functools import partial
from itertools import chain
from pathlib import Path

import numpy as np

from auditsel.errors import ConfigError

MIN_GAMES = 4
MAX_ROWS = 10**8  # rows of a score file (~1.7 GB as float64 scores and int8 coins)
MAX_FILE_BYTES = 8 * 2**30  # bytes of a score file on disk
CSV_BLOCK = 1 << 24  # bytes per block of the CSV reader
MAX_HEADER = 1 << 16
MAX_LINE = 1 << 26  # bytes of one CSV line (a file without newlines is not a CSV)


class ScoreFileError(ConfigError):
    """A score file that cannot be audited; the field is its path, the message how to fix it."""

    def __init__(self, path: str | os.PathLike, message: str):
        super().__init__(str(path), message)


def _as_array(values, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError):  # ragged nested sequences
        raise ConfigError(name, "must be a 1-D array (one entry per game)") from None
    if arr.dtype == object:
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError):
            raise ConfigError(name, "must hold numbers, got other objects") from None
    if np.iscomplexobj(arr):
        raise ConfigError(name, "must be real numbers, not complex")
    if arr.dtype != bool and not np.issubdtype(arr.dtype, np.number):
        kind = {"U": "text", "S": "bytes", "M": "dates", "m": "durations"}.get(arr.dtype.kind)
        raise ConfigError(name, f"must be numbers, got {kind or arr.dtype}")
    if arr.ndim != 1:
        raise ConfigError(
            name, f"must be 1-D (one entry per game), got shape {tuple(int(d) for d in arr.shape)}"
        )
    return arr


def check_scores(
    scores: object,
    member: object,
    *,
    names: tuple[str, str] = ("scores", "member"),
    where: Callable[[int], str] = lambda i: f"at index {i}",
) -> tuple[np.ndarray, np.ndarray]:
    """(scores as float64, member as int8) after the checks of the module docstring; `names`
    are the arguments' names in messages, `where(i)` says where entry i is."""
    score_name, member_name = names
    s = _as_array(scores, score_name)
    m = _as_array(member, member_name)
    if len(m) != len(s):
        raise ConfigError(
            member_name, f"has {len(m):,} entries for {len(s):,} scores; one coin per score"
        )
    if m.dtype != bool:
        bad = ~((m == 0) | (m == 1))
        if bad.any():
            i = int(np.argmax(bad))
            value = m[i].item()
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            raise ConfigError(
                member_name, f"must be 0 or 1 (1 = the canary was in), got {shown} {where(i)}"
            )
    s = s.astype(float, copy=False)
    nan = np.isnan(s)
    if nan.any():
        raise ConfigError(
            score_name,
            f"contains NaN {where(int(np.argmax(nan)))}; every score must be a number "
            f"(+-inf allowed)",
        )
    if len(s) < MIN_GAMES:
        raise ConfigError(score_name, f"has {len(s)} games; an audit needs at least {MIN_GAMES}")
    m = m.astype(np.int8, copy=False)
    n1 = int(np.count_nonzero(m))
    if n1 == 0 or n1 == len(m):
        raise ConfigError(
            member_name,
            f"needs games with member = 0 and with member = 1; every game has member = "
            f"{1 if n1 else 0}",
        )
    return s, m


def read_scores(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """(score, member) from a CSV (header naming `score` and `member`) or an .npz, checked."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ScoreFileError(
            path, "not found; pass a CSV or .npz with columns score and member"
        ) from None
    except OSError as err:
        raise ScoreFileError(
            path, f"cannot be read ({err.strerror or type(err).__name__})"
        ) from None
    if stat.S_ISDIR(info.st_mode):
        raise ScoreFileError(path, "is a directory; pass a CSV or .npz file")
    if not stat.S_ISREG(info.st_mode):
        raise ScoreFileError(
            path, "is not a regular file (a device or a pipe); pass a CSV or .npz file"
        )
    if info.st_size > MAX_FILE_BYTES:
        raise ScoreFileError(
            path,
            f"is too large ({info.st_size / 2**30:.1f} GiB, at most {MAX_FILE_BYTES / 2**30:g} "
            f"GiB); audit-scores holds every score in memory",
        )
    if path.suffix.lower() == ".npz":
        score, member = _npz_arrays(path)
    else:
        score, member = _csv_columns(path)
    try:
        return check_scores(
            score, member, names=("score", "member"), where=lambda i: f"in row {i + 1:,}"
        )
    except ConfigError as err:
        raise ScoreFileError(path, f"column {err.field} {err.message}") from None


def _too_many_rows(path, rows: int) -> ScoreFileError:
    return ScoreFileError(
        path,
        f"is too large ({rows:,} rows or more, at most {MAX_ROWS:,}); audit-scores holds every "
        f"score in memory",
    )


def _npz_arrays(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The .npz's arrays, after their headers (not their data) are checked against the limits."""
    try:
        with zipfile.ZipFile(path) as archive:
            for name in ("score", "member"):
                try:
                    entry = archive.getinfo(f"{name}.npy")
                except KeyError:
                    raise ScoreFileError(
                        path, f"has no array {name!r}; save arrays named score and member"
                    ) from None
                if entry.file_size > MAX_FILE_BYTES:
                    raise _too_many_rows(path, entry.file_size // 8)
                with archive.open(entry) as handle:
                    fmt = np.lib.format
                    v1 = fmt.read_magic(handle) == (1, 0)
                    read = fmt.read_array_header_1_0 if v1 else fmt.read_array_header_2_0
                    shape, _, _ = read(handle)
                rows = int(np.prod(shape, dtype=np.int64)) if shape else 1
                if rows > MAX_ROWS:
                    raise _too_many_rows(path, rows)
        with np.load(path, allow_pickle=False) as data:
            return np.asarray(data["score"]), np.asarray(data["member"])
    except ScoreFileError:
        raise
    except Exception as err:  # not a zip, a damaged header or array: the file's problem
        raise ScoreFileError(
            path,
            f"is not a readable .npz ({type(err).__name__}); save it with "
            f"numpy.savez(path, score=..., member=...)",
        ) from None


def _csv_columns(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as handle:
            return _read_csv(path, handle)
    except UnicodeDecodeError:
        raise ScoreFileError(path, "is not a text CSV; pass a CSV or an .npz") from None
    except csv.Error as err:  # e.g. a NUL byte or a field over csv's size limit
        raise ScoreFileError(
            path, f"is not a readable CSV ({err}); pass a CSV or an .npz"
        ) from None
    except OSError as err:  # no permission: a user error, not an internal one
        raise ScoreFileError(
            path, f"cannot be read ({err.strerror or type(err).__name__}); pass a readable file"
        ) from None


def _read_csv(path: Path, handle) -> tuple[np.ndarray, np.ndarray]:
    raw = handle.readline(MAX_HEADER)
    if raw and not raw.endswith(b"\n") and len(raw) >= MAX_HEADER:
        raise ScoreFileError(path, f"has a header line over {MAX_HEADER:,} bytes; is it a CSV?")
    header = raw.decode("utf-8-sig")
    fields = [f.strip() for f in next(csv.reader([header]), [])]
    for need in ("score", "member"):
        if need not in fields:
            raise ScoreFileError(
                path,
                f"has no column {need!r} in its header (found {', '.join(fields) or 'none'}); "
                f"add a header line 'score,member'",
            )
        if fields.count(need) > 1:  # which one is meant? never the first silently
            raise ScoreFileError(
                path,
                f"has {fields.count(need)} columns named {need!r} in its header; keep one "
                f"(rename the others)",
            )
    columns = (fields.index("score"), fields.index("member"), len(fields))
    scores: list[np.ndarray] = []
    members: list[np.ndarray] = []
    rows, line, rest = 0, 2, b""
    for block in chain(iter(partial(handle.read, CSV_BLOCK), b""), [b""]):  # b"": the end
        data = rest + block
        cut = data.rfind(b"\n") + 1 if block else len(data)  # whole lines, all at the end
        data, rest = data[:cut], data[cut:]
        if len(rest) > MAX_LINE:
            raise ScoreFileError(
                path, f"has a line over {MAX_LINE // 2**20} MiB around line {line:,}; is it a CSV?"
            )
        if data:
            s, m, lines = _csv_block(path, data, columns, line)
            scores.append(s)
            members.append(m)
            rows += len(s)
            line += lines
            if rows > MAX_ROWS:
                raise _too_many_rows(path, rows)
    if not scores:
        return np.empty(0), np.empty(0, np.int8)
    return np.concatenate(scores), np.concatenate(members)


def _csv_block(path: Path, data: bytes, columns, line: int):
    """(scores, members, number of lines) of a block of whole lines starting at `line`."""
    si, mi, width = columns
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    if not data.strip():  # blank lines only (skipped, as csv.DictReader does)
        return np.empty(0), np.empty(0), lines
    if b'"' not in data and b"\x00" not in data:
        try:
            table = np.loadtxt(
                io.BytesIO(data), delimiter=",", comments=None, ndmin=2, encoding="utf-8"
            )
        except ValueError:
            pass  # quotes, text that is not a number, a ragged row: the csv module names it
        else:
            if table.shape[1] == width:
                return table[:, si].copy(), table[:, mi].copy(), lines
    return (*_csv_block_slow(path, data, columns, line), lines)


def _csv_block_slow(path: Path, data: bytes, columns, line: int):
    """The csv module's reading of a block (quotes, blank lines), naming a bad line."""
    si, mi, width = columns
    scores, members = [], []
    reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""))
    for row in reader:
        if not row:  # a blank line (as csv.DictReader skips them)
            continue
        at = line + reader.line_num - 1
        if len(row) != width:
            raise ScoreFileError(
                path,
                f"line {at:,} has {len(row)} columns where the header has {width} (a ragged "
                f"row); write one value per header column on every line",
            )
        cells = (row[si], row[mi])
        try:
            scores.append(float(cells[0]))
            members.append(float(cells[1]))
        except ValueError:
            raise ScoreFileError(
                path, f"line {at:,} is not numeric (score={cells[0]!r}, member={cells[1]!r})"
            ) from None
    return np.array(scores, dtype=float), np.array(members, dtype=float)
