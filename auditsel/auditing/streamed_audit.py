"""Streamed audits: audit_scores for trials read back chunk by chunk, in bounded memory.

Contract. `audit_chunks(source, delta, rule=...)` holds one chunk and the threshold counts in
memory whatever the number of trials; chunks [0, cut) are the pilot of a split (the games are
independent draws in chunk order), candidate thresholds are quantiles of chunk 0 (a part of the
pilot). Every rule it offers is valid at `confidence`, as in `auditsel.auditing.lower`
(multisplit needs the scores in memory and is refused with a ConfigError).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from auditsel.auditing.gdp_fitting import gdp_over_rows
from auditsel.auditing.lower import (
    EvaluatedTest,
    LowerBound,
    check_levels,
    evaluate_at,
    lower_bound,
)
from auditsel.auditing.rules import BonferroniGrid, MultiSplit, Split, ThresholdRule, threshold_rule
from auditsel.auditing.sorted_scores import Counts, SortedScores, pilot_grid, search_counts
from auditsel.auditing.threshold_search import CandidateRows, best_on_table
from auditsel.errors import ConfigError


class ChunkReader(Protocol):
    """What a streamed audit reads: the number of chunks, the trials in all of them, and one
    chunk's (scores, coins) at a time (auditsel.games.engine.ChunkSource is one)."""

    @property
    def trials(self) -> int: ...

    def __len__(self) -> int: ...

    def load(self, index: int) -> tuple[NDArray[Any], NDArray[Any]]: ...


#: the user-facing names (the other functions are building blocks of the audits)


STREAM_CANDIDATES = 4096


def _stream_counts(source, indices, thresholds):
    """The '>' counts of the chunks `indices` at each threshold."""
    fp = np.zeros(len(thresholds), dtype=np.int64)
    fn = np.zeros(len(thresholds), dtype=np.int64)
    n0 = n1 = 0
    for i in indices:
        s0, s1 = SortedScores(*source.load(i)).by_coin()
        a, b = search_counts(s0, s1, thresholds)
        fp, fn, n0, n1 = fp + a, fn + b, n0 + len(s0), n1 + len(s1)
    return Counts(np.asarray(thresholds, dtype=float), fp, fn, n0, n1)


def audit_chunks(
    source: ChunkReader,
    delta: float,
    *,
    confidence: float = 0.95,
    rule: ThresholdRule | str = "split",
    candidates: int = STREAM_CANDIDATES,
) -> LowerBound:
    """audit_scores for trials streamed chunk by chunk from `source`
    (auditsel.games.engine.ChunkSource).

    Chunks [0, cut) with cut = round(chunks * split_fraction) are the pilot, the others the
    evaluation part (a rule's `seed` is not used here). Candidate thresholds are `candidates`
    quantiles of chunk 0's scores: bonferroni's pilot grid, bonferroni_all, eps_best_threshold
    and the GDP fit take their maxima over them (valid: bonferroni_all's limits hold at every
    threshold at once).
    """
    rule = threshold_rule(rule)
    confidence, delta = check_levels(confidence, delta)
    alpha = 1 - confidence
    n_chunks = len(source)
    cut = _cut(rule, n_chunks)
    first, _ = source.load(0)
    finite = np.sort(first[np.isfinite(first)])
    quantiles = pilot_grid((finite, finite[:0]), candidates)
    grid = np.unique(np.concatenate([[-np.inf], quantiles]))
    head = _stream_counts(source, range(min(max(cut, 1), n_chunks)), grid)
    tail = _stream_counts(source, range(min(max(cut, 1), n_chunks), n_chunks), grid)
    total = Counts(grid, head.fp + tail.fp, head.fn + tail.fn, head.n0 + tail.n0, head.n1 + tail.n1)
    if total.n0 == 0 or total.n1 == 0:
        raise ConfigError("member", "needs trials with both member = 0 and member = 1")
    n = total.n0 + total.n1
    best = best_on_table(total, alpha, delta)
    chosen, grid_source = _chosen(source, rule, (head, tail, total), finite, cut, alpha, delta)
    rows = CandidateRows.table(total.t, total.fp, total.fn)
    gdp = gdp_over_rows(rows, rows, total.n0, total.n1, n, alpha, delta)
    return lower_bound(chosen, best, rule, confidence, delta, source.trials, grid_source, gdp)


def _cut(rule: ThresholdRule, n_chunks: int) -> int:
    """The chunks of the selection part, [0, cut): a ConfigError for a rule that needs the
    scores in memory, or a split that leaves a part empty."""
    if isinstance(rule, MultiSplit):
        raise ConfigError(
            "rule",
            "multisplit needs the scores in memory; a streamed audit "
            "offers split, bonferroni and bonferroni_all (or set game.stream: false)",
        )
    fraction = getattr(rule, "split_fraction", 0.5)
    cut = int(round(n_chunks * fraction))
    spec_grid = isinstance(rule, BonferroniGrid) and rule.grid is not None
    if isinstance(rule, (Split, BonferroniGrid)) and not 0 < cut < n_chunks and not spec_grid:
        raise ConfigError(
            "split_fraction",
            f"with {n_chunks} chunks the split leaves a part "
            f"empty; use more trials or a smaller game.chunk_size",
        )
    return cut


def _chosen(
    source: ChunkReader,
    rule: ThresholdRule,
    counts: tuple[Counts, Counts, Counts],
    finite: NDArray[np.float64],
    cut: int,
    alpha: float,
    delta: float,
) -> tuple[EvaluatedTest, str]:
    """The rule's chosen test and its grid_source: `counts` are the pilot chunks', the others'
    and all of them at the candidate thresholds, `finite` chunk 0's sorted finite scores."""
    head, tail, total = counts
    n_chunks, n = len(source), total.n0 + total.n1
    if isinstance(rule, Split):
        _need_both(head), _need_both(tail)
        pick = best_on_table(head, alpha, delta)
        ev = _stream_counts(source, range(cut, n_chunks), np.array([pick["threshold"]]))
        return evaluate_at(ev, pick["threshold"], pick["flip"], alpha, delta), ""
    if isinstance(rule, BonferroniGrid) and rule.grid is not None:
        fixed = np.unique(np.asarray(rule.grid, dtype=float))
        c = _stream_counts(source, range(n_chunks), fixed)
        return {**best_on_table(c, alpha / (2 * len(fixed)), delta), "n": n}, "spec"
    if isinstance(rule, BonferroniGrid):
        _need_both(tail)
        pilot = pilot_grid((finite, finite[:0]), rule.grid_size)
        c = _stream_counts(source, range(cut, n_chunks), pilot)
        return {**best_on_table(c, alpha / (2 * len(pilot)), delta), "n": c.n0 + c.n1}, "pilot"
    # bonferroni_all
    return {**best_on_table(total, alpha / n, delta), "n": n}, "all"


def _need_both(c: Counts):
    if c.n0 == 0 or c.n1 == 0:
        raise ConfigError(
            "split_fraction", "leaves a part of the chunks without both coins; use more trials"
        )
