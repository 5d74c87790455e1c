"""Coverage of the lower bounds: how often does eps_L exceed the true epsilon?

For a protocol whose exact epsilon is known, repeat the whole audit (game + bound) `reps`
times with independent seeds and count the repetitions where eps_L > eps_true. A valid rule
at confidence c over-claims in at most a fraction 1 - c of them (up to binomial noise); the
optimistic `best` rule and the point estimate (no confidence interval) carry no such promise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from auditsel.game import run_game
from auditsel.lower import audit_scores

__all__ = ["Coverage", "overclaim_rates"]


@dataclass(frozen=True)
class Coverage:
    rule: str
    reps: int
    overclaims: int
    mean_eps: float

    @property
    def rate(self) -> float:
        return self.overclaims / self.reps


def overclaim_rates(protocol, proxy, true_epsilon: float, delta: float, *, reps: int, trials: int,
                    rules=("split", "bonferroni", "best", "point"), confidence: float = 0.95,
                    seed: int = 0, threshold_grid=None) -> dict[str, Coverage]:
    """Over-claim counts per rule ('point' = eq. 4 at the empirical rates of the best threshold)."""
    eps = {rule: [] for rule in rules}
    for r in range(reps):
        record = run_game(protocol, proxy, trials, seed + r, progress=False)
        for rule in rules:
            if rule == "point":
                value = audit_scores(record.scores, record.member, delta, confidence=confidence,
                                     rule="best").eps_point
            else:
                value = audit_scores(record.scores, record.member, delta, confidence=confidence,
                                     rule=rule, threshold_grid=threshold_grid).eps
            eps[rule].append(value)
    return {rule: Coverage(rule, reps, int(np.sum(np.asarray(v) > true_epsilon)),
                           float(np.mean(np.minimum(v, 1e3)))) for rule, v in eps.items()}
