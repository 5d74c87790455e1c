"""Which tuning score a game plays: the config's `game.score` resolved for one setting.

Contract. `resolve_score(choice, pair, law, delta)` returns a `selection.TuningScore`: the
choice itself when it is one (`MonotoneScore`, `FarthestScore`, `BucketScore`), and for
"worst" the score that the attack of `accounting.attack` found for (pair, law, delta)
(a `BucketScore` over the run's privacy-loss label). Playing that score gives the game whose
exact trade-off the attack value measures, so a valid eps_L from it is a lower bound on the
tuning run's epsilon for any score. `scored_winner(pair, law, score)` is the reduced Gaussian
game under the score.
"""

from __future__ import annotations

from typing import Literal

from auditsel.accounting.attack import attack
from auditsel.errors import ConfigError
from auditsel.mechanisms import GaussianBase
from auditsel.numerics import check_deltas
from auditsel.roles import MechanismPair
from auditsel.rounds import RoundsLaw
from auditsel.selection import (
    BucketScore,
    FarthestScore,
    GaussianWinner,
    MonotoneScore,
    ScoredGaussianWinner,
    TuningScore,
    winner_law,
)


def resolve_score(
    choice: TuningScore | Literal["worst", "monotone"] | None,
    pair: MechanismPair,
    law: RoundsLaw,
    delta: float,
) -> TuningScore:
    """The score to play (see the module docstring); a ConfigError naming game.score when the
    attack finds none for this setting."""
    delta = float(check_deltas(delta, "delta")[0])
    if choice is None or choice == "monotone":
        return MonotoneScore()
    if choice != "worst":
        if not isinstance(choice, (MonotoneScore, FarthestScore, BucketScore)):
            raise ConfigError("game.score", f"must be a TuningScore or 'worst', got {choice!r}")
        return choice
    found = getattr(attack(pair, law, delta), "score", None)
    if not isinstance(found, (MonotoneScore, BucketScore)):
        raise ConfigError(
            "game.score",
            "worst: the attack found no score to play for this setting (needs the "
            "worst-score attack of accounting.attack); use monotone or {kind: farthest, center: C}",
        )
    return found


def is_monotone_largest(score: TuningScore) -> bool:
    """Today's game: the run with the largest value (output or label: the same order) wins."""
    return isinstance(score, MonotoneScore) and score.direction == "largest"


def scored_winner(
    pair: MechanismPair, law: RoundsLaw, score: TuningScore
) -> GaussianWinner | ScoredGaussianWinner:
    """The reduced game of `pair` (a Gaussian base, or a base whose `reduced()` is one) with
    H ranking its runs by `score`."""
    reduced = pair.reduced() if hasattr(pair, "reduced") else pair
    if reduced is None:
        raise ConfigError("base", f"{type(pair).__name__} has no reduced game to play")
    if is_monotone_largest(score):
        winner = winner_law(reduced, law)
        assert isinstance(winner, GaussianWinner) or not isinstance(reduced, GaussianBase)
        return winner  # type: ignore[return-value]
    if not isinstance(reduced, GaussianBase):
        raise ConfigError("game.score", "a score other than monotone needs a Gaussian reduced game")
    return ScoredGaussianWinner(reduced, law, score)
