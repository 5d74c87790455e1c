"""The real DP-SGD tuning game ([XWW24] Sec. 4), built where the attack lives.

The adversary sets up the game ([XWW24] Sec. 4.1, "Interaction"): it picks the threat model
(which X, which score g; ``attacks.threats``), the canary z (``attacks.dpsgd_canaries``) and the
proxy that turns a release into a score (``attacks.dpsgd_proxies``). The trainer
(``auditsel.dpsgd``) then runs the tuning protocol H of [XWW24] Algorithm 2 over DP-SGD on plain
data and never sees this module.

* ``DpsgdGameSpec``  the one settings type of a DP-SGD game (frozen data): threat, canary, data,
  model, grid of learning rates, clip, device. The DP-SGD base (sigma, N steps, tau) and the law
  xi of the number of runs come from the experiment (``base`` and ``rounds`` of a config).

* ``build_protocol(spec, base, rounds)``  the trainer's protocol H for one game.

* ``make_scorer(spec, proxies, base, rounds)``  the adversary's score: one proxy (scores of
  shape (n,)) or several evaluated on the same releases (``Scorer``, scores (n, P), one column
  per proxy), so that one training per game serves every proxy (the engine,
  ``auditsel.games.engine.run_game``, records either shape).

Heavy imports (torch, the trainer) happen inside the functions: reading a config that names a
DP-SGD game does not load torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attacks.names import CANARY_NAMES, DPSGD_PROXIES, INPUT_CANARIES, MODEL_NAMES, THREAT_NAMES
from auditsel.dpsgd.datasets import Dataset, load_split
from auditsel.errors import ConfigError
from auditsel.roles import Proxy

if TYPE_CHECKING:
    from attacks.dpsgd_proxies import LambdaA, LambdaB, WinnerLikelihoodRatio
    from auditsel.dpsgd.trainer import Canary
    from auditsel.dpsgd.tuning_protocol import DpsgdRelease, DpsgdTuningProtocol
    from auditsel.mechanisms import DpsgdBase
    from auditsel.rounds import RoundsLaw

__all__ = [
    "DpsgdGameSpec",
    "Scorer",
    "build_protocol",
    "make_scorer",
    "load_data",
    "THREAT_NAMES",
    "CANARY_NAMES",
    "INPUT_CANARIES",
    "MODEL_NAMES",
    "DPSGD_PROXIES",
]


@dataclass(frozen=True)
class DpsgdGameSpec:
    """Real DP-SGD tuning ([XWW24] Sec. 4): what the trainer runs and what the adversary does.
    Steps N, sample rate tau and sigma come from the DP-SGD base; the law of K from rounds."""

    threat: str = "etcv"  # ntnv | ntcv | etcv ([XWW24] Table 2)
    canary: str = "dirac"  # dirac (Z_D) | input
    input_canary: str = "inverted"  # inverted | constant | noise | checkerboard | mislabelled
    dataset: str = "digits"
    data_dir: str | None = None
    model: str = "logreg"  # logreg | mlp | cnn
    hidden: tuple[int, ...] = (32,)
    train_size: int | None = 500
    validation_size: int | None = None
    learning_rates: tuple[float, ...] = (0.001, 0.003, 0.01, 0.03)
    clip: float = 1.0
    device: str | None = None
    max_batch_runs: int = 256


def load_data(spec: DpsgdGameSpec) -> tuple[Dataset, Dataset]:
    """(train, validation) of the spec's data set, cut to train_size / validation_size."""
    train, validation = load_split(spec.dataset, spec.data_dir)
    return train.take(spec.train_size), validation.take(spec.validation_size)


def _canary(spec: DpsgdGameSpec, train: Dataset, validation: Dataset) -> Canary:
    # deferred: torch (the dpsgd extra, about 2 s to import) loads only when a DP-SGD game runs
    from attacks import dpsgd_canaries

    if spec.canary == "dirac":
        return dpsgd_canaries.dirac()
    if spec.canary != "input":
        raise ConfigError("game.canary", f"must be dirac or input, got {spec.canary!r}")
    if spec.input_canary == "mislabelled":
        return dpsgd_canaries.mislabelled(validation, 0)
    return dpsgd_canaries.out_of_distribution(train, spec.input_canary)


def build_protocol(
    spec: DpsgdGameSpec,
    base: DpsgdBase,
    rounds: RoundsLaw,
    data: tuple[Dataset, Dataset] | None = None,
) -> DpsgdTuningProtocol:
    """The tuning protocol H of one game: spec's threat, canary, data, model and grid over a
    DP-SGD base (``noise_multiplier``, ``steps``, ``sample_rate``: e.g.
    auditsel.mechanisms.DpsgdBase) with K ~ rounds. ``data``: a preloaded
    (train, validation) pair already cut to the spec's sizes (a grid loads it once)."""
    # deferred: torch (the dpsgd extra, about 2 s to import) loads only when a DP-SGD game runs
    from attacks.threats import tuning_game
    from auditsel.dpsgd.models import ModelSpec
    from auditsel.dpsgd.trainer import Execution

    train, validation = data if data is not None else load_data(spec)
    model = ModelSpec(spec.model, train.shape, train.num_classes, hidden=tuple(spec.hidden))
    return tuning_game(
        spec.threat,
        _canary(spec, train, validation),
        model=model,
        train=train,
        validation=validation,
        rounds=rounds,
        grid=[{"lr": float(v)} for v in spec.learning_rates],
        steps=base.steps,
        noise_multiplier=base.noise_multiplier,
        sample_rate=base.sample_rate,
        clip=spec.clip,
        execution=Execution(device=spec.device, max_batch_runs=spec.max_batch_runs),
    )


@dataclass(frozen=True)
class Scorer:
    """Several proxies on the same releases: observations -> scores (n, P), column j = names[j]."""

    names: tuple[str, ...]
    proxies: tuple[Proxy, ...]

    def __call__(self, observations: DpsgdRelease) -> np.ndarray:
        return np.stack(
            [np.asarray(p(observations), dtype=np.float64) for p in self.proxies], axis=1
        )


def make_scorer(
    spec: DpsgdGameSpec,
    proxies: Sequence[str] | str,
    base: DpsgdBase | None = None,
    rounds: RoundsLaw | None = None,
) -> Scorer | LambdaA | LambdaB | WinnerLikelihoodRatio:
    """One proxy by name (returns that proxy) or a Scorer over several names (same releases)."""
    # deferred: torch (the dpsgd extra, about 2 s to import) loads only when a DP-SGD game runs
    from attacks.dpsgd_proxies import make_dpsgd_proxy

    if isinstance(proxies, str):
        return make_dpsgd_proxy(proxies, spec.threat, base=base, rounds=rounds)
    names = tuple(proxies)
    if not names:
        raise ConfigError("game.proxy", "name at least one proxy")
    return Scorer(
        names, tuple(make_dpsgd_proxy(n, spec.threat, base=base, rounds=rounds) for n in names)
    )
