"""The threat models of [XWW24] Table 2: which training set X, which score g.

The adversary sets up the game ([XWW24] Sec. 4.1, "Interaction"): it picks the pair
X, X' = X u {z} and, when it controls validation, the score function g of the tuning protocol. ::

    NTNV  normal training, normal validation:  X = a real training set,
          g(y) = - mean_v l(w_N; v) over the untampered validation set;  lambda_b = lambda_a - g
          (Table 2 writes the sum; the winner is the same, but with the sum g is hundreds of
          times larger than lambda_a and lambda_b degenerates to -g: on digits we measured
          eps_L = 0 for lambda_b at every eps_B. ``validation_reduction="sum"`` restores it.)
    NTCV  normal training, controlled validation:  X = a real training set,
          g(y) = - l(w_N; z) (input canary) or (w_0 - w_N)[0] (Dirac canary); lambda_b = lambda_a + g
    ETCV  empty training, controlled validation:  X = {}, X' = {z}, g as in NTCV;
          lambda_b = lambda_a + g  (the worst case of Sec. 5)

``tuning_game`` builds the trainer's protocol from a threat model and a canary; the protocol
then sees only plain data (the data sets, z, g), never this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from auditsel.dpsgd.datasets import Dataset
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.trainer import Canary, DiracCanary, ExampleCanary
from auditsel.dpsgd.tuning_protocol import (
    CanaryLoss,
    DpsgdTuningProtocol,
    FirstCoordinateShift,
    RunSettings,
    Score,
    ValidationLoss,
)
from auditsel.errors import ConfigError
from auditsel.rounds import RoundsLaw

__all__ = ["ThreatModel", "NTNV", "NTCV", "ETCV", "THREATS", "get_threat", "tuning_game"]


@dataclass(frozen=True)
class ThreatModel:
    """One row of Table 2: whether X is empty and whether the adversary chooses g."""

    name: str
    empty_training: bool
    controlled_validation: bool
    description: str = ""
    validation_reduction: str = "mean"

    @property
    def score_sign(self) -> int:
        """s in lambda_b = lambda_a + s g(y): -1 under normal validation, +1 when controlled."""
        return 1 if self.controlled_validation else -1

    def training_set(self, train: Dataset) -> Dataset:
        """X: the real training set, or the empty set for ETCV."""
        return Dataset.empty_like(train) if self.empty_training else train

    def score(self, canary: Canary, validation: Dataset | None = None) -> Score:
        """The score g the protocol uses under this threat model (Table 2)."""
        if not self.controlled_validation:
            if validation is None or len(validation) == 0:
                raise ConfigError(
                    "game.validation_size",
                    "must be >= 1 under ntnv (g is the "
                    "validation loss), got an empty validation set",
                )
            return ValidationLoss(validation, reduction=self.validation_reduction)
        if isinstance(canary, DiracCanary):
            if not isinstance(canary.coordinate, int):  # several Dirac canaries: one-run games
                raise ConfigError("game.canary", "a threat's score reads one coordinate")
            return FirstCoordinateShift(canary.coordinate)
        if isinstance(canary, ExampleCanary):
            return CanaryLoss(canary)
        raise ConfigError("game.canary", f"must be a Dirac or input canary, got {canary!r}")


NTNV = ThreatModel(
    "ntnv",
    empty_training=False,
    controlled_validation=False,
    description="normal training, normal validation",
)
NTCV = ThreatModel(
    "ntcv",
    empty_training=False,
    controlled_validation=True,
    description="normal training, controlled validation",
)
ETCV = ThreatModel(
    "etcv",
    empty_training=True,
    controlled_validation=True,
    description="empty training, controlled validation",
)
THREATS = {t.name: t for t in (NTNV, NTCV, ETCV)}


def get_threat(name: str | ThreatModel) -> ThreatModel:
    if isinstance(name, ThreatModel):
        return name
    key = str(name).lower()
    if key not in THREATS:
        raise ConfigError("game.threat", f"must be one of {', '.join(THREATS)}, got {name!r}")
    return THREATS[key]


def tuning_game(
    threat: str | ThreatModel,
    canary: Canary,
    *,
    model: ModelSpec,
    train: Dataset,
    validation: Dataset | None,
    rounds: RoundsLaw,
    grid: Sequence[Mapping[str, float]],
    **settings: Any,
) -> DpsgdTuningProtocol:
    """The protocol H the trainer runs under ``threat`` with canary z (settings: steps,
    noise_multiplier, sample_rate, clip, lr, execution)."""
    threat = get_threat(threat)
    execution = settings.pop("execution", None)
    return DpsgdTuningProtocol(
        model,
        threat.training_set(train),
        threat.score(canary, validation),
        canary,
        rounds,
        grid,
        RunSettings(**settings),
        execution=execution,
    )
