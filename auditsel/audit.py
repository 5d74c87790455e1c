"""Audit what you already run: your own protocol, or scores your pipeline already produced.

* audit_protocol(release, score, ...): wraps a per-trial function release(member, rng) -> y
  (your tuning run on X when member = 0, on X' when member = 1) and a score(y) -> float
  (higher = "the canary was in") into the game engine of `auditsel.game`: the same seeded
  chunks, joblib workers and checkpoints as `auditsel run`, then the lower bound of
  `auditsel.lower` ([XWW24] Algorithm 1 and eq. 4).
* read_scores(path): a CSV with a header and columns `score`, `member`, or an .npz with arrays
  `score` and `member`, for `auditsel audit-scores`.
"""
from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from auditsel.game import run_game
from auditsel.lower import LowerBound, audit_scores
from auditsel.errors import ConfigError

__all__ = ["FunctionProtocol", "FunctionProxy", "audit_protocol", "read_scores", "ScoreFileError"]


@dataclass(frozen=True)
class FunctionProtocol:
    """A per-trial release function as a protocol (trainer side): y = release(member, rng)."""

    release_one: Callable[[int, np.random.Generator], Any]

    def release(self, member, rng):
        return [self.release_one(int(b), rng) for b in member]


@dataclass(frozen=True)
class FunctionProxy:
    """A per-observation score function as a proxy (adversary side): it sees y only."""

    score_one: Callable[[Any], float]

    def __call__(self, observations):
        return np.array([float(self.score_one(y)) for y in observations], dtype=float)


def _default_fingerprint(release, score, seed, chunk_size) -> str:
    names = [f"{getattr(f, '__module__', None)}.{getattr(f, '__qualname__', repr(f))}" for f in (release, score)]
    return hashlib.sha256(f"{names}|{seed}|{chunk_size}".encode()).hexdigest()[:32]


def audit_protocol(release: Callable, score: Callable, *, delta: float, trials: int, seed: int = 0,
                   confidence: float = 0.95, rule: str = "split", jobs: int = 1,
                   checkpoint_dir: str | Path | None = None, fingerprint: str | None = None,
                   chunk_size: int = 1000, vectorized: bool = False, progress: bool = False,
                   threshold_grid=None) -> LowerBound:
    """eps lower bound for your own protocol.

    release(member, rng) -> observation for one trial (or, with vectorized=True, for an array
    of coins); score(observation) -> float (vectorized: observations -> array). Functions
    must be importable (module level) when jobs != 1. Give `checkpoint_dir` to resume an
    interrupted audit; `fingerprint` (default: the functions' names, seed and chunk size)
    guards against mixing checkpoints of different audits.
    """
    if trials < 2:
        raise ConfigError("trials", f"must be an integer >= 2, got {trials}")
    protocol = _VectorProtocol(release) if vectorized else FunctionProtocol(release)
    proxy = score if vectorized else FunctionProxy(score)
    record = run_game(protocol, proxy, trials, seed, chunk_size=chunk_size, jobs=jobs,
                      checkpoint_dir=checkpoint_dir,
                      fingerprint=fingerprint or _default_fingerprint(release, score, seed, chunk_size),
                      progress=progress)
    return audit_scores(record.scores, record.member, delta, confidence=confidence, rule=rule,
                        threshold_grid=threshold_grid)


@dataclass(frozen=True)
class _VectorProtocol:
    release_many: Callable

    def release(self, member, rng):
        return self.release_many(member, rng)


class ScoreFileError(ConfigError):
    """A score file that cannot be audited; the message says how to fix it."""

    def __init__(self, message: str):
        super().__init__("", message)


def read_scores(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(score, member) from a CSV (header with `score` and `member`) or an .npz."""
    path = Path(path)
    if not path.exists():
        raise ScoreFileError(f"FILE: {path} not found; pass a CSV or .npz with columns score and member")
    if path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as data:
                missing = [k for k in ("score", "member") if k not in data.files]
                if missing:
                    raise ScoreFileError(f"FILE: {path} has no array {missing[0]!r}; "
                                         f"save arrays named score and member")
                score, member = np.asarray(data["score"]), np.asarray(data["member"])
        except ScoreFileError:
            raise
        except Exception as err:  # noqa: BLE001 - any unreadable archive
            raise ScoreFileError(f"FILE: {path} is not a readable .npz ({type(err).__name__}); "
                                 f"save it with numpy.savez(score=..., member=...)") from None
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
                    raise ScoreFileError(f"FILE: {path} has no column {need!r} in its header "
                                         f"(found {', '.join(fields) or 'none'}); add a header line 'score,member'")
            reader.fieldnames = fields
            scores, members = [], []
            for line, row in enumerate(reader, start=2):
                try:
                    scores.append(float(row["score"]))
                    members.append(float(row["member"]))
                except (TypeError, ValueError):
                    raise ScoreFileError(f"FILE: line {line} of {path} is not numeric "
                                         f"(score={row.get('score')!r}, member={row.get('member')!r})") from None
    except UnicodeDecodeError:
        raise ScoreFileError(f"FILE: {path} is not a text CSV; pass a CSV or an .npz") from None
    except csv.Error as err:  # e.g. a NUL byte or a field over csv's size limit
        raise ScoreFileError(f"FILE: {path} is not a readable CSV ({err}); pass a CSV or an .npz") from None
    except OSError as err:  # a directory, no permission: a user error, not an internal one
        raise ScoreFileError(f"FILE: cannot read {path} ({err.strerror or type(err).__name__}); "
                             f"pass a readable CSV or .npz file") from None
    return np.array(scores, dtype=float), np.array(members, dtype=float)


def _validate(path: Path, score, member):
    if score.ndim != 1 or member.ndim != 1 or len(score) != len(member):
        raise ScoreFileError(f"FILE: score and member in {path} must be 1-D and of equal length")
    if not np.issubdtype(score.dtype, np.number) or not np.issubdtype(member.dtype, np.number) \
            and member.dtype != bool:
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
        raise ScoreFileError(f"FILE: every row of {path} has member = {only}; the audit needs games "
                             f"with and without the canary")
    if len(member) < 4:
        raise ScoreFileError(f"FILE: {path} has {len(member)} rows; the audit needs at least 4")
    return score, member.astype(np.int8)
