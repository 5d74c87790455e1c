"""Coverage of the lower bounds: how often does eps_L exceed the true epsilon?

For a protocol whose exact epsilon is known, repeat the whole audit (game + bound) with
independent seeds (`Repetitions`) and count the repetitions where eps_L > eps_true. A valid rule
at confidence c over-claims in at most a fraction 1 - c of them (up to binomial noise); the
optimistic `best` rule and the point estimate carry no such promise. `path="stream"` audits
the chunks from a temporary folder (`audit_chunks`), "memory" in memory (`audit_scores`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from auditsel.auditing.lower import audit_scores
from auditsel.auditing.rules import Split, threshold_rule
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.auditing.streamed_audit import audit_chunks
from auditsel.errors import ConfigError
from auditsel.executor import ExecutionOptions
from auditsel.games.engine import run_game
from auditsel.numerics import check_deltas
from auditsel.roles import GameProtocol, Proxy


@dataclass(frozen=True)
class Coverage:
    rule: str
    reps: int
    overclaims: int
    mean_eps: float

    @property
    def rate(self) -> float:
        return self.overclaims / self.reps


@dataclass(frozen=True)
class Repetitions:
    """The repeated games of `overclaim_rates`: `reps` games of `trials` trials each, at seeds
    seed, seed + 1, ...; `path` "memory" (the scores audited in memory) or "stream" (chunks of
    `chunk_size` games written to a temporary folder and audited from there)."""

    reps: int
    trials: int
    seed: int = 0
    path: str = "memory"
    chunk_size: int = 1000


def _audit_once(record, rules, delta, confidence, threshold_grid, path, seed):
    """Each rule's eps on one game's record; the splits seeded with the game's seed."""
    out = {}
    ss = None if path == "stream" else SortedScores(record.scores, record.member)
    for rule in rules:
        if rule in ("best", "point"):
            continue
        if ss is None:
            chosen = threshold_rule(rule, grid=threshold_grid)
            out[rule] = audit_chunks(record.chunks, delta, confidence=confidence, rule=chosen).eps
            continue
        bound = audit_scores(
            record.scores,
            record.member,
            delta,
            confidence=confidence,
            rule=threshold_rule(rule, grid=threshold_grid, seed=seed),
            sorted_scores=ss,
        )
        out[rule] = bound.eps
        out["best"], out["point"] = bound.eps_best_threshold, bound.eps_point_best
    return out


def overclaim_rates(
    protocol: GameProtocol,
    proxy: Proxy,
    true_epsilon: float,
    delta: float,
    games: Repetitions,
    *,
    rules: Sequence[str] = ("split", "bonferroni", "best", "point"),
    confidence: float = 0.95,
    threshold_grid: Sequence[float] | None = None,
) -> dict[str, Coverage]:
    """Over-claim counts per rule over the repeated games `games` ('best' = max over all
    thresholds, optimistic; 'point' = eq. 4 at the empirical rates of the best threshold).
    `threshold_grid` is the spec's grid for `bonferroni` (None: a pilot grid)."""
    reps, trials, seed, path = games.reps, games.trials, games.seed, games.path
    delta = float(check_deltas(delta)[0])
    if path not in ("memory", "stream"):
        raise ConfigError("path", f"must be 'memory' or 'stream', got {path!r}")
    valid = [r for r in rules if r not in ("best", "point")] or ["split"]
    eps: dict[str, list[float]] = {rule: [] for rule in rules}
    for r in range(reps):
        with tempfile.TemporaryDirectory(prefix="auditsel-cov-") as tmp:
            stream = path == "stream"
            record = run_game(
                protocol,
                proxy,
                trials,
                seed + r,
                fingerprint="coverage",
                in_memory=not stream,
                execution=ExecutionOptions(
                    chunk_size=games.chunk_size if stream else max(trials, 1),
                    checkpoint_dir=tmp if stream else None,
                ),
            )
            values = _audit_once(record, valid, delta, confidence, threshold_grid, path, seed + r)
            if stream and ("best" in rules or "point" in rules):
                assert record.chunks is not None  # a checkpointed game reads back its chunks
                s, m = record.chunks.head(trials)
                bound = audit_scores(s, m, delta, confidence=confidence, rule=Split(seed=seed + r))
                values["best"], values["point"] = bound.eps_best_threshold, bound.eps_point_best
        for rule in rules:
            eps[rule].append(values[rule])
    return {
        rule: Coverage(
            rule,
            reps,
            int(np.sum(np.asarray(v) > true_epsilon)),
            float(np.mean(np.minimum(v, 1e3))),
        )
        for rule, v in eps.items()
    }
