"""Bug: every trial's validation accuracy released (a leaderboard whose length is K).

`correct_dpgd`'s runs (full-batch DP-GD, K ~ Poisson(10) runs over five learning rates), the
best released with its learning rate and accuracy, and beside it the results table of the
sweep: every trial's learning rate and validation accuracy, in the order run (`leaderboard`, a
list of K entries). Each accuracy is a function of its run's DP output, so the release is a
post-processing of all K runs, composed; the author still claims the tuning bound for the
winner alone (`correct_dpgd`'s claim).

Correct eps: at most `release_all`'s exact epsilon of releasing every run (K runs composed, a
rigorous upper end for a post-processing of them); no lower end is computed here.
"""

from __future__ import annotations

from typing import Any

from auditsel.pipelines.canaries import Canary
from auditsel.reproductions.bugzoo import correct_dpgd as reference
from auditsel.reproductions.bugzoo import release_all
from auditsel.reproductions.bugzoo.correct_dpgd import train, validation_accuracy
from auditsel.reproductions.bugzoo.zoo_data import TrainData
from auditsel.reproductions.bugzoo.zoo_objects import Interval

BUG = "every trial's accuracy released (a leaderboard of K entries)"
TRAIN, claim = reference.TRAIN, reference.claim


def tune(train_data: TrainData, seed: int, canary: Canary) -> dict[str, Any]:
    trials = list(reference.runs(train_data, seed, canary))
    board = [{"lr": lr, "accuracy": validation_accuracy(model)} for lr, model in trials]
    return {**reference.best_of(trials), "leaderboard": board}


def correct_interval(delta: float) -> Interval:
    _, upper, _ = release_all.correct_interval(delta)
    return None, upper, "upper end: every run released, composed (exact for release_all)"


def pipeline_objects(seed: int = 0) -> dict[str, Any]:
    return reference.hand_objects(seed, train, tune)
