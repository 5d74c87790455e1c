"""Score files for `auditsel audit-scores`: scores your pipeline already produced.

read_scores(path): a CSV with a header and columns `score`, `member`, or an .npz with arrays
`score` and `member`; validated (1-D, equal length, member in {0, 1}, both coins present) before
any audit runs. Every problem is a `ScoreFileError` (a `ConfigError`: exit 2 in the CLI).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from auditsel.errors import ConfigError

__all__ = ["read_scores", "ScoreFileError"]


class ScoreFileError(ConfigError):
    """A score file that cannot be audited; the message says how to fix it."""

    def __init__(self, message: str):
        super().__init__("", message)


def read_scores(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(score, member) from a CSV (header with `score` and `member`) or an .npz."""
    path = Path(path)
    if not path.exists():
        raise ScoreFileError(
            f"FILE: {path} not found; pass a CSV or .npz with columns score and member"
        )
    if path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as data:
                missing = [k for k in ("score", "member") if k not in data.files]
                if missing:
                    raise ScoreFileError(
                        f"FILE: {path} has no array {missing[0]!r}; "
                        f"save arrays named score and member"
                    )
                score, member = np.asarray(data["score"]), np.asarray(data["member"])
        except ScoreFileError:
            raise
        except Exception as err:
            raise ScoreFileError(
                f"FILE: {path} is not a readable .npz ({type(err).__name__}); "
                f"save it with numpy.savez(score=..., member=...)"
            ) from None
    else:
        score, member = _read_csv(path)
    return _validate(path, score, member)


def _read_csv(path: Path):
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            fields = [f.strip() for f in (reader.fieldnames or [])]
            for need in ("score", "member"):
                if need not in fields:
                    raise ScoreFileError(
                        f"FILE: {path} has no column {need!r} in its header "
                        f"(found {', '.join(fields) or 'none'}); add a header line 'score,member'"
                    )
            reader.fieldnames = fields
            scores, members = [], []
            for line, row in enumerate(reader, start=2):
                try:
                    scores.append(float(row["score"]))
                    members.append(float(row["member"]))
                except (TypeError, ValueError):
                    raise ScoreFileError(
                        f"FILE: line {line} of {path} is not numeric "
                        f"(score={row.get('score')!r}, member={row.get('member')!r})"
                    ) from None
    except UnicodeDecodeError:
        raise ScoreFileError(f"FILE: {path} is not a text CSV; pass a CSV or an .npz") from None
    except csv.Error as err:  # e.g. a NUL byte or a field over csv's size limit
        raise ScoreFileError(
            f"FILE: {path} is not a readable CSV ({err}); pass a CSV or an .npz"
        ) from None
    except OSError as err:  # a directory, no permission: a user error, not an internal one
        raise ScoreFileError(
            f"FILE: cannot read {path} ({err.strerror or type(err).__name__}); "
            f"pass a readable CSV or .npz file"
        ) from None
    return np.array(scores, dtype=float), np.array(members, dtype=float)


def _validate(path: Path, score, member):
    if score.ndim != 1 or member.ndim != 1 or len(score) != len(member):
        raise ScoreFileError(f"FILE: score and member in {path} must be 1-D and of equal length")
    if (
        not np.issubdtype(score.dtype, np.number)
        or not np.issubdtype(member.dtype, np.number)
        and member.dtype != bool
    ):
        raise ScoreFileError(f"FILE: score and member in {path} must be numeric")
    if np.iscomplexobj(score) or np.iscomplexobj(member):
        raise ScoreFileError(f"FILE: score and member in {path} must be real numbers, not complex")
    member = member.astype(float)
    if np.any((member != 0) & (member != 1)):
        raise ScoreFileError(f"FILE: member in {path} must be 0 or 1 (1 = the canary was in)")
    score = score.astype(float)
    if np.isnan(score).any():
        raise ScoreFileError(f"FILE: score in {path} contains NaN; drop or fix those rows")
    n1 = int(member.sum())
    if n1 == 0 or n1 == len(member):
        only = "1" if n1 else "0"
        raise ScoreFileError(
            f"FILE: every row of {path} has member = {only}; the audit needs games "
            f"with and without the canary"
        )
    if len(member) < 4:
        raise ScoreFileError(f"FILE: {path} has {len(member)} rows; the audit needs at least 4")
    return score, member.astype(np.int8)
