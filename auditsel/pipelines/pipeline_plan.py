"""How many games an audit of your pipeline needs: `plan_pipeline`, sized from a pilot.

Contract. A pilot of `pilot` games (the audit's own game, with the pilot's seed: keep it
different from the audit's, so that the audit's games are fresh) gives the pipeline's empirical
trade-off curve: (FP, FN) of every threshold on the pilot's scores, each rate shrunk to
(count + 1/2) / (n + 1) so that no test of a small pilot looks perfect
(`auditsel.auditing.planning.empirical_curve`). On that curve the planning arithmetic of
`auditsel.auditing.planning` gives

* `games_for_target`: the least number of games with P(eps_L >= target_eps) >= power;
* `games_to_refute`: the least number with P(eps_L > claimed_epsilon) >= power (None when the
  pilot's curve cannot reach the claim: a pipeline that keeps its claim is never refuted, and
  a pilot that sees no leak above it plans no refutation);
* at a given number of games: E[eps_L] and the probabilities of both events (the power);
* the CPU seconds per game of the pilot, to turn games into time.

The planner takes the best threshold of the curve as a threshold fixed in advance would be:
rules that choose it from the data (split) certify somewhat less, and a small pilot's curve is
itself an estimate, so the numbers are estimates (`auditsel.auditing.planning`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from auditsel.auditing.planning import (
    empirical_curve,
    expected_for_games,
    games_needed,
    prob_for_games,
)
from auditsel.auditing.rules import THRESHOLD_RULES
from auditsel.auditing.threshold_search import epsilon_from_rates
from auditsel.errors import ConfigError, choice, integer, number
from auditsel.pipelines.canaries import Canary, default_score
from auditsel.pipelines.pipeline import PipelineGame, _check, play_games

__all__ = ["PipelinePlan", "plan_pipeline"]

SHRINK = 0.5


@dataclass(frozen=True)
class PipelinePlan:
    """What `plan_pipeline` found (see the module docstring)."""

    pilot_games: int
    delta: float
    confidence: float
    rule: str
    power: float
    curve_eps: float  # the largest eq. 4 eps on the pilot's (shrunk) curve: no audit of this
    #                   pipeline is planned to certify more
    cpu_seconds_per_game: float
    target_eps: float | None = None
    games_for_target: int | None = None
    claimed_epsilon: float | None = None
    games_to_refute: int | None = None
    games: int | None = None
    expected_eps: float | None = None
    prob_target: float | None = None  # P(eps_L >= target_eps) with `games` games
    prob_refute: float | None = None  # P(eps_L > claimed_epsilon) with `games` games

    def to_dict(self) -> dict:
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in asdict(self).items()
        }

    def summary(self) -> str:
        lines = [
            f"plan from {self.pilot_games:,} pilot games: valid {self.rule} audit at "
            f"{self.confidence:.0%} confidence, delta = {self.delta:g}; the pilot's curve "
            f"reaches eps {self.curve_eps:.4f}; {self.cpu_seconds_per_game:.3g} CPU s per game"
        ]
        if self.target_eps is not None:
            n = self.games_for_target
            lines.append(
                f"  games for P(eps_L >= {self.target_eps:g}) >= {self.power:g}: "
                + (f"{n:,}" if n is not None else "none (the pilot's curve does not reach it)")
            )
        if self.claimed_epsilon is not None:
            n = self.games_to_refute
            lines.append(
                f"  games to refute the claim {self.claimed_epsilon:g} with probability "
                f">= {self.power:g}: "
                + (f"{n:,}" if n is not None else "none (the pilot sees no leak above the claim)")
            )
        if self.games is not None:
            extra = ""
            if self.prob_target is not None:
                extra += f", P(eps_L >= {self.target_eps:g}) = {self.prob_target:.3f}"
            if self.prob_refute is not None:
                extra += f", P(refuted) = {self.prob_refute:.3f}"
            lines.append(f"  {self.games:,} games: E[eps_L] = {self.expected_eps:.4f}{extra}")
        lines.append(
            "  (estimates: the best threshold of the pilot's curve, as if fixed in advance; "
            "a split audit certifies somewhat less)"
        )
        return "\n".join(lines)


def plan_pipeline(
    tune: Callable,
    score: Callable | None = None,
    *,
    data: Any,
    canary: Canary,
    delta: float,
    pilot: int = 200,
    target_eps: float | None = None,
    claimed_epsilon: float | None = None,
    games: int | None = None,
    power: float = 0.9,
    confidence: float = 0.95,
    rule: str = "split",
    seed: int = 1,
    jobs: int = 1,
    backend: str | None = None,
    progress: bool = False,
) -> PipelinePlan:
    """Size an audit of your pipeline from `pilot` games (seed `seed`: not the audit's)."""
    pilot = integer(pilot, "pilot", 20)
    _check(tune, score, canary, pilot, delta, claimed_epsilon, confidence, seed, rule, jobs)
    choice(rule, "rule", THRESHOLD_RULES)
    power = number(power, "power", 0.5, 1, hi_open=True)
    if target_eps is not None:
        target_eps = number(target_eps, "target_eps", 0, math.inf, lo_open=True)
    if games is not None:
        games = integer(games, "games", 4)
    if target_eps is None and claimed_epsilon is None and games is None:
        raise ConfigError(
            "target_eps", "give target_eps, claimed_epsilon or games: what to plan for"
        )
    game = PipelineGame(tune, score if score is not None else default_score, data, canary)
    start = time.process_time()
    record, inline = play_games(game, pilot, seed, jobs=jobs, backend=backend, progress=progress)
    assert record.scores is not None and record.member is not None  # played in memory
    cpu = (time.process_time() - start) - inline + float(record.scores[:, 1].sum())
    scores, member = record.scores[:, 0], record.member
    if member.min() == member.max():
        raise ConfigError("pilot", f"{pilot} games drew one coin only; use a larger pilot")
    curve = empirical_curve(scores, member, f"pilot ({pilot:,} games)", shrink=SHRINK)
    fps, fns = curve.candidates(10**6)
    curve_eps = float(epsilon_from_rates(fps, fns, delta).max()) if len(fps) else 0.0
    plan = dict(rule=rule, confidence=confidence, delta=delta, spec_grid=False)

    def needed(target):
        if target >= curve_eps:
            return None
        return games_needed(curve, target, power=power, **plan)

    refute_at = None if claimed_epsilon is None else math.nextafter(claimed_epsilon, math.inf)
    out = PipelinePlan(
        pilot_games=pilot,
        delta=delta,
        confidence=confidence,
        rule=rule,
        power=power,
        curve_eps=curve_eps,
        cpu_seconds_per_game=cpu / pilot,
        target_eps=target_eps,
        games_for_target=None if target_eps is None else needed(target_eps),
        claimed_epsilon=claimed_epsilon,
        games_to_refute=None if refute_at is None else needed(refute_at),
        games=games,
    )
    if games is not None:
        at = lambda target: prob_for_games(curve, target, games, **plan)
        out = PipelinePlan(
            **{
                **asdict(out),
                "expected_eps": expected_for_games(curve, games, **plan),
                "prob_target": None if target_eps is None else at(target_eps),
                "prob_refute": None if refute_at is None else at(refute_at),
            }
        )
    return out
