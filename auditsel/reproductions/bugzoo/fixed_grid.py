"""Bug: a fixed number of runs accounted as if the number were random.

Grid search: each learning rate of LEARNING_RATES is run once (K = 5, always) with
`correct_dpgd.train`, the best on the validation set released. The author cites [PS22] for
"tuning with E[K] = 5 runs" and claims the bound of K ~ Poisson(5). Those bounds need K to be
random; for a fixed K the run's epsilon for any selection score is the any-score interval of
K = 5 runs (`correct_interval`), far above the claim; [XWW24]'s reduced game with K = 5
(`reduced_game_epsilon`, exact at sample rate 1 under its monotone-score assumption) is
below that interval and still above the claim.

The audit: `correct_dpgd`'s gradient canary and score.
"""

from __future__ import annotations

from typing import Any

import torch

from auditsel.accounting.exact import exact_epsilon
from auditsel.mechanisms import DpsgdBase
from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import correct_dpgd
from auditsel.reproductions.bugzoo.author_claims import any_score_interval, monotone_claim
from auditsel.reproductions.bugzoo.correct_dpgd import (
    LEARNING_RATES,
    NOISE,
    STEPS,
    best_of,
    train,
)
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval
from auditsel.rounds import Point, Poisson
from auditsel.selection import winner_law

BUG = "a fixed number of runs accounted as if it were random"
CANARY, TRAIN, score = (correct_dpgd.CANARY, correct_dpgd.TRAIN, correct_dpgd.score)


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(seed)
    return best_of((lr, train(train_data, lr, generator, canary)) for lr in LEARNING_RATES)


def claim(delta: float) -> float:
    runs = Poisson(len(LEARNING_RATES))  # "E[K] = 5 runs"
    return monotone_claim(DpsgdBase(NOISE, STEPS, 1.0), runs, delta)


def reduced_game_epsilon(delta: float) -> float:
    """[XWW24]'s reduced game with K = len(LEARNING_RATES) fixed: exact at sample rate 1 for a
    selection score that is a monotone function of the reduced draw (what the worst-case
    config bugzoo_fixed_grid_worst_case.yaml plays)."""
    winner = winner_law(DpsgdBase(NOISE, STEPS, 1.0).reduced(), Point(len(LEARNING_RATES)))
    return float(exact_epsilon(winner, delta))


def correct_interval(delta: float) -> Interval:
    """The any-score interval of the run with K = len(LEARNING_RATES) fixed (above the reduced
    game's monotone-score value)."""
    base = DpsgdBase(NOISE, STEPS, 1.0)
    lower, upper = any_score_interval(base, Point(len(LEARNING_RATES)), delta)
    return lower, upper, "any score: K = 5 fixed"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    rounds = Poisson(len(LEARNING_RATES))  # the law the claim assumes
    return correct_dpgd.hand_objects(seed, train, tune, claimed=claim, rounds=rounds)
