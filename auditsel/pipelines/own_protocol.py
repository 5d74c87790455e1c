"""Audit what you already run: your own protocol, as a function.

`audit_protocol(release, score, *, delta, trials, statistics, ...)` wraps a per-trial function
release(member, rng) -> y (your tuning run on X when member = 0, on X' when member = 1) and a
score(y) -> float (higher = "the canary was in") into the game engine of
`auditsel.games.engine` (seeded chunks, joblib workers, checkpoints), then the lower bound of
`auditsel.auditing.lower` ([XWW24] Algorithm 1 and eq. 4).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from auditsel.auditing.lower import LowerBound, audit_scores
from auditsel.auditing.rules import threshold_rule
from auditsel.errors import ConfigError
from auditsel.games.engine import Checkpoints, GameRecord, run_game
from auditsel.games.fingerprint import code_identity
from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions, given_options


@dataclass(frozen=True)
class FunctionProtocol:
    """A per-trial release function as a protocol (trainer side): y = release(member, rng)."""

    release_one: Callable[[int, np.random.Generator], Any]

    def release(self, member: NDArray[np.int8], rng: np.random.Generator) -> list[Any]:
        return [self.release_one(int(b), rng) for b in member]


@dataclass(frozen=True)
class FunctionProxy:
    """A per-observation score function as a proxy (adversary side): it sees y only."""

    score_one: Callable[[Any], float]

    def __call__(self, observations: Iterable[Any]) -> NDArray[np.float64]:
        return np.array([float(self.score_one(y)) for y in observations], dtype=float)


PROTOCOL_CHUNK_SIZE = 1000


def audit_protocol(
    release: Callable[[Any, np.random.Generator], Any],
    score: Callable[[Any], Any],
    *,
    delta: float,
    trials: int,
    statistics: AuditOptions | None = None,
    vectorized: bool = False,
    fingerprint: str | None = None,
    execution: ExecutionOptions | None = None,
) -> LowerBound:
    """eps lower bound for your own protocol.

    Functions must be importable (module level) when jobs != 1. The checkpoints record the
    code of `release` and `score` and of auditsel (`auditsel.games.fingerprint.code_identity`):
    after an edit to either, the old checkpoints are refused (a CheckpointError saying what
    changed and to delete the folder), never mixed in.

    Args:
        release: `release(member, rng) -> observation` for one trial (or, with
            `vectorized=True`, for an array of coins).
        score: `score(observation) -> float` (vectorized: observations -> array).
        delta: in [0, 1).
        trials: the number of trials (games).
        statistics: `AuditOptions(confidence, rule, seed)`: eps_L holds with probability
            `confidence` under the threshold `rule` (`auditsel.auditing.rules`); `seed` seeds
            the trials (and a named rule's split).
        vectorized: `release` and `score` take and return arrays.
        fingerprint: guards against mixing checkpoints of different audits (None: the
            functions' names, seed and chunk size).
        execution: an `ExecutionOptions` (chunk_size default 1000; checkpoint_dir resumes an
            interrupted audit); never changes the numbers.

    Returns:
        A `LowerBound` (`auditsel.auditing.lower`).

    Raises:
        auditsel.errors.ConfigError: bad input; a `CheckpointError` for checkpoints of other
            code or another audit.
    """
    st = given_options(AuditOptions, statistics, "statistics")
    ex = given_options(ExecutionOptions, execution, "execution")
    record = _play((release, score), trials, st.seed, ex, vectorized, fingerprint)
    assert record.scores is not None and record.member is not None  # played in memory
    # a rule's name gets the game's seed for its split (independent streams of it)
    named = threshold_rule(st.rule, seed=st.seed) if isinstance(st.rule, str) else st.rule
    return audit_scores(record.scores, record.member, delta, confidence=st.confidence, rule=named)


def _play(
    functions: tuple[Callable[..., Any], Callable[..., Any]],
    trials: int,
    seed: int,
    ex: ExecutionOptions,
    vectorized: bool,
    fingerprint: str | None,
) -> GameRecord:
    """The trials of `audit_protocol` played by the game engine, with its checkpoints."""
    release, score = functions
    if ex.scheduler is not None:
        raise ConfigError(
            "execution.scheduler", "audit_protocol plays in joblib workers; use audit_pipeline"
        )
    if ex.stream is True:
        raise ConfigError("execution.stream", "audit_protocol keeps its games in memory")
    if trials < 2:
        raise ConfigError("trials", f"must be an integer >= 2, got {trials}")
    chunk_size = ex.chunk_size if ex.chunk_size is not None else PROTOCOL_CHUNK_SIZE
    if fingerprint is None:  # the functions' names, the seed and the chunk size
        names = [
            f"{getattr(f, '__module__', None)}.{getattr(f, '__qualname__', repr(f))}"
            for f in (release, score)
        ]
        fingerprint = hashlib.sha256(f"{names}|{seed}|{chunk_size}".encode()).hexdigest()[:32]
    protocol = _VectorProtocol(release) if vectorized else FunctionProtocol(release)
    proxy = score if vectorized else FunctionProxy(score)
    return run_game(
        protocol,
        proxy,
        trials,
        seed,
        execution=replace(ex, chunk_size=chunk_size, checkpoint_dir=None),
        # the code identity of release and score: an edited one refuses old chunks
        checkpoints=None
        if ex.checkpoint_dir is None
        else Checkpoints(
            Path(ex.checkpoint_dir), fingerprint, chunk_size, code_identity(release, score)
        ),
    )


@dataclass(frozen=True)
class _VectorProtocol:
    release_many: Callable[[NDArray[np.int8], np.random.Generator], Any]

    def release(self, member: NDArray[np.int8], rng: np.random.Generator) -> Any:
        return self.release_many(member, rng)
