"""One-run audit of a real DP-SGD tuning run (the torch trainer of auditsel.dpsgd).

The game: m Dirac gradient canaries on the model's coordinates 0..m-1, each in the training
set independently with probability 1/2; ETCV (empty training set) or NTCV (the first
`train_size` real examples); full batches (tau = 1); K ~ xi runs, each with a learning rate
drawn from the grid and its own seed. The tuner's score of a run is sum_c (w_0 - w_N)[c] / lr;
the best-scored run is released (K = 0: all scores 0). The adversary's score of canary c is
the winner's (w_0 - w_N)[c] / lr.

With ETCV this is exactly the reduced one-run game (`auditsel.games.one_run_reduced`) at
mu = sqrt(N) / sigma, so the per-canary exact epsilon is known; with NTCV the reduced game's
epsilon is the value for the canaries alone (heuristic as a target).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from auditsel.dpsgd.datasets import Dataset, load_split
from auditsel.errors import ConfigError
from auditsel.games.one_run_reduced import OneRunReducedGame
from auditsel.rounds import RoundsLaw

if TYPE_CHECKING:
    from auditsel.dpsgd.models import ModelSpec


@dataclass(frozen=True)
class OneRunDpsgd:
    """One tuning run of DP-SGD with m Dirac canaries (module docstring)."""

    canaries: int
    noise_multiplier: float
    steps: int
    law: RoundsLaw
    learning_rates: tuple[float, ...] = (0.01,)
    clip: float = 1.0
    threat: str = "etcv"
    dataset: str = "digits"
    model: str = "logreg"
    train_size: int = 500
    device: str | None = None

    def __post_init__(self) -> None:
        if self.threat not in ("etcv", "ntcv"):
            raise ConfigError(
                "game.threat", f"one-run DP-SGD audits support etcv and ntcv, got {self.threat!r}"
            )
        if self.canaries < 2:
            raise ConfigError("game.one_run.canaries", f"must be >= 2, got {self.canaries}")

    @property
    def mu(self) -> float:
        return math.sqrt(self.steps) / self.noise_multiplier

    @property
    def reduced(self) -> OneRunReducedGame:
        """The reduced one-run game of the same setting (exact for ETCV)."""
        return OneRunReducedGame(self.mu, self.law, self.canaries)

    def setup(self) -> tuple[ModelSpec, Dataset]:
        from auditsel.dpsgd.models import ModelSpec  # deferred: torch

        train, _ = load_split(self.dataset, None)
        train = train.take(self.train_size) if self.threat == "ntcv" else Dataset.empty_like(train)
        model = ModelSpec(self.model, train.shape, train.num_classes)
        if self.canaries > model.num_params:
            raise ConfigError(
                "game.one_run.canaries",
                f"at most {model.num_params} Dirac canaries fit "
                f"the {self.model} model's coordinates, got {self.canaries}",
            )
        return model, train

    def play(
        self, rng: np.random.Generator, setup: tuple[ModelSpec, Dataset] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """One tuning run: (scores, inclusion bits) of the m canaries."""
        import torch  # deferred: the dpsgd extra

        from auditsel.dpsgd.trainer import DiracCanary, Execution, TrainSettings, train_runs

        model, train = setup if setup is not None else self.setup()
        m = self.canaries
        member = rng.integers(0, 2, m)
        k = int(self.law.sample(1, rng)[0])
        if k == 0:
            return np.zeros(m), member
        lrs = np.asarray(self.learning_rates, dtype=float)[
            rng.integers(0, len(self.learning_rates), k)
        ]
        seeds = rng.integers(0, 2**63, k, dtype=np.uint64)
        included = tuple(int(c) for c in np.flatnonzero(member))
        canary = DiracCanary(coordinate=included) if included else None
        out = train_runs(
            model,
            train,
            seeds=seeds,
            canary=canary,
            include_canary=np.full(k, bool(included)),
            execution=Execution(device=self.device, dtype=torch.float64),
            settings=TrainSettings(
                steps=self.steps,
                lr=lrs,
                clip=self.clip,
                noise_multiplier=self.noise_multiplier,
                sample_rate=1.0,
            ),
        )
        shift = (out.w0 - out.wN).double().cpu().numpy()[:, :m] / lrs[:, None]
        winner = int(np.argmax(shift.sum(axis=1)))  # ties: the earliest run
        return shift[winner], member
