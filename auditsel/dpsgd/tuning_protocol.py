"""The tuning protocol H ([XWW24] Algorithm 2) over real DP-SGD runs, as a game protocol.

One trial of H on X (coin b = 0) or X' = X u {z} (b = 1)::

    k ~ xi;  for j = 1..k: pick a configuration uniformly from Omega, train one DP-SGD run
    (trainer.train_runs, eq. 1) on X or X', score it with g;  release the best-scored run
    (ties: the earliest run, a data-independent rule) and its score; k = 0 releases a fixed
    output.

Omega is a list of configurations: mappings that override any of the trainer's settings
``lr``, ``clip``, ``steps``, ``noise_multiplier``, ``sample_rate`` (the paper tunes the learning
rate). The score g (Table 2) is plain data read by this module::

    ValidationLoss(V):       g(y) = - sum_{v in V} l(w_N; v)        (NTNV: untampered validation;
                                                                     reduction="mean" divides by |V|)
    CanaryLoss(z):           g(y) = - l(w_N; z)                     (NTCV / ETCV, input canary)
    FirstCoordinateShift():  g(y) = (w_0 - w_N)[0]                  (NTCV / ETCV, Dirac canary)

``DpsgdTuningProtocol.release(member, rng)`` runs len(member) independent trials, all their
runs batched along the run dimension, deterministically given rng (every run's seed is drawn
from rng). It returns the observation of each trial, a dict of arrays with one row per trial::

    score        g of the released run                                  float64
    canary_dots  <p_i^z, p_i> for i = 1..N of the released run (T, N_max): float64
                 the per-step statistics of its trajectory with the public canary z
                 (0 past the run's N steps, and for k = 0)
    lr, clip, noise_multiplier, sample_rate, steps, config
                 the released run's configuration (its index in Omega)
    w0, wN       first and last iterate of the released run (T, d)      float32
    released     False where k = 0 (the fixed output)                   bool

(``RELEASE_FIELDS``.) This is a post-processing of the winner's trajectory y ([XWW24] Sec. 4)
with the public z, so an audit of it is an audit of the protocol; it holds nothing else (not
the coin, not k, not the losing runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TypedDict, cast

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from auditsel.dpsgd.datasets import Dataset
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.trainer import (
    Canary,
    ExampleCanary,
    Execution,
    TrainSettings,
    check_settings,
    resolve_device,
    train_runs,
)
from auditsel.errors import ConfigError
from auditsel.rounds import RoundsLaw

GRID_KEYS = ("lr", "clip", "steps", "noise_multiplier", "sample_rate")


class DpsgdRelease(TypedDict):
    """The observation of T trials: one row per trial, the fields of the module docstring."""

    score: NDArray[np.float64]
    canary_dots: NDArray[np.float64]
    config: NDArray[np.int64]  # -1: k = 0
    w0: NDArray[np.float32]
    wN: NDArray[np.float32]
    released: NDArray[np.bool_]
    lr: NDArray[np.float64]
    clip: NDArray[np.float64]
    steps: NDArray[np.int64]
    noise_multiplier: NDArray[np.float64]
    sample_rate: NDArray[np.float64]


#: the release's fields, in order: its configuration fields are GRID_KEYS
RELEASE_FIELDS: tuple[str, ...] = tuple(DpsgdRelease.__annotations__)


@dataclass(frozen=True)
class ValidationLoss:
    """g(y) = - sum_v l(w_N; v) over a validation set (Table 2, NTNV); ``mean`` divides by `|V|`."""

    data: Dataset
    reduction: str = "sum"

    def __post_init__(self):
        if self.reduction not in ("sum", "mean"):
            raise ConfigError(
                "game.validation_reduction", f"must be sum or mean, got {self.reduction!r}"
            )


@dataclass(frozen=True)
class CanaryLoss:
    """g(y) = - l(w_N; z) for an input-space canary z (Table 2, NTCV/ETCV)."""

    canary: ExampleCanary


@dataclass(frozen=True)
class FirstCoordinateShift:
    """g(y) = (w_0 - w_N)[coordinate] (Table 2, NTCV/ETCV with the Dirac canary)."""

    coordinate: int = 0


Score = ValidationLoss | CanaryLoss | FirstCoordinateShift


def evaluate_score(
    score: Score, model: ModelSpec, w0: torch.Tensor, wN: torch.Tensor, chunk: int = 1 << 22
) -> torch.Tensor:
    """g for each of R runs (R,), from (w_0, w_N) only."""
    R = wN.shape[0]
    if isinstance(score, FirstCoordinateShift):
        return (w0[:, score.coordinate] - wN[:, score.coordinate]).double()
    with torch.no_grad():
        if isinstance(score, CanaryLoss):
            x = torch.as_tensor(
                np.asarray(score.canary.x, np.float32)[None], dtype=wN.dtype, device=wN.device
            )
            y = torch.full((1,), int(score.canary.y), dtype=torch.long, device=wN.device)
            logits = model.batched_logits(wN, x)  # (R, 1, classes)
            return -F.cross_entropy(logits[:, 0], y.expand(R), reduction="none").double()
        if isinstance(score, ValidationLoss):
            data = score.data
            if len(data) == 0:
                raise ConfigError(
                    "game.validation_size", "must be >= 1 for a validation-loss score"
                )
            total = torch.zeros(R, dtype=torch.float64, device=wN.device)
            step = max(1, chunk // max(1, R * model.num_classes * 8))
            for s in range(0, len(data), step):
                x = torch.as_tensor(data.x[s : s + step], dtype=wN.dtype, device=wN.device)
                y = torch.as_tensor(data.y[s : s + step], dtype=torch.long, device=wN.device)
                if model.has_dense_path:  # examples-last logits (R, classes, n): one GEMM
                    z = model.dense_forward_t(wN, x.reshape(len(x), -1).T)[-1][1]
                    ce = torch.logsumexp(z, 1) - z.gather(1, y.expand(R, 1, -1))[:, 0]
                else:
                    logits = model.batched_logits(wN, x)  # (R, n, classes)
                    ce = F.cross_entropy(
                        logits.reshape(-1, logits.shape[-1]), y.repeat(R), reduction="none"
                    ).reshape(R, -1)
                total -= ce.double().sum(1)
            return total / len(data) if score.reduction == "mean" else total
    raise TypeError(f"unknown score {score!r}")


@dataclass(frozen=True)
class RunSettings:
    """The DP-SGD settings of every run of a grid that its configurations do not set: `steps`
    N, `noise_multiplier` sigma, `sample_rate` tau, `clip` C and `lr` (None: each
    configuration must set its own); checked per configuration (`check_settings`)."""

    steps: int
    noise_multiplier: float
    sample_rate: float = 1.0
    clip: float = 1.0
    lr: float | None = None


def _checked_config(c: object, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """One configuration of the grid over the defaults, checked, its steps an int."""
    if not isinstance(c, Mapping):
        raise ConfigError("game.grid", f"each configuration must be a mapping, got {c!r}")
    unknown = set(c) - set(GRID_KEYS)
    if unknown:
        raise ConfigError(
            "game.grid", f"unknown setting(s) {sorted(unknown)}; allowed: {', '.join(GRID_KEYS)}"
        )
    full = {**defaults, **c}
    if full["lr"] is None:
        raise ConfigError("game.learning_rates", "every configuration needs a learning rate")
    check_settings(
        steps=np.int64(full["steps"]) if float(full["steps"]).is_integer() else full["steps"],
        **{k: full[k] for k in GRID_KEYS if k != "steps"},
    )
    full["steps"] = int(full["steps"])
    return full


class DpsgdTuningProtocol:
    """H of Algorithm 2 over DP-SGD (see the module docstring); a game protocol.

    train: X (empty for ETCV); score: g; canary: z; rounds: the law xi of k; grid: Omega, a
    non-empty list of mappings over GRID_KEYS, the rest from `settings`.
    """

    def __init__(
        self,
        model: ModelSpec,
        train: Dataset,
        score: Score,
        canary: Canary,
        rounds: RoundsLaw,
        grid: Sequence[Mapping],
        settings: RunSettings,
        *,
        execution: Execution | None = None,
    ) -> None:
        if canary is None:
            raise ConfigError("game.canary", "must be dirac or an input canary, got None")
        if isinstance(score, CanaryLoss) and not isinstance(canary, ExampleCanary):
            raise ConfigError("game.score", "the canary loss needs an input-space canary")
        grid = list(grid) if grid is not None else []
        if not grid:
            raise ConfigError(
                "game.learning_rates", f"must be a non-empty grid of configurations, got {grid!r}"
            )
        configs = [_checked_config(c, asdict(settings)) for c in grid]
        if not isinstance(rounds, RoundsLaw):
            raise ConfigError("rounds", f"must be a number-of-runs law, got {rounds!r}")
        self.model, self.train, self.score, self.canary = model, train, score, canary
        self.rounds, self.configs = rounds, configs
        run = execution if execution is not None else Execution()
        self.device = resolve_device(run.device)
        self.execution = replace(run, device=self.device)
        self.dtype, self.max_batch_runs = run.dtype, int(run.max_batch_runs)

    def memory_bytes(self, trials: int) -> int:
        """A lower estimate of the memory `release` needs: w_0 and w_N of every trial (float32)
        and 4 copies of (runs, d) for the runs trained together (E[K] per trial, at most
        max_batch_runs)."""
        d = self.model.num_params
        runs = min(self.max_batch_runs, max(1, int(trials * self.rounds.mean)))
        item = torch.finfo(self.dtype).bits // 8
        return d * (2 * int(trials) * 4 + 4 * runs * item)

    def plan(
        self, trials: int, rng: np.random.Generator
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """The data-independent randomness of ``trials`` trials, drawn from rng in this order:
        k (trials,), then for the sum(k) runs (trial by trial) the configuration index and the
        run seed. Runs of trial t are the k[t] consecutive entries starting at sum(k[:t])."""
        k = np.asarray(self.rounds.sample(trials, rng), dtype=np.int64).reshape(-1)
        R = int(k.sum())
        config = rng.integers(len(self.configs), size=R)
        seeds = rng.integers(0, np.iinfo(np.int64).max, size=R, dtype=np.int64)
        return k, config, seeds

    def release(self, member: np.ndarray, rng: np.random.Generator) -> DpsgdRelease:
        """Run len(member) independent trials of H (member[t] = 1: X')."""
        member = np.asarray(member).reshape(-1)
        if member.size and not np.all((member == 0) | (member == 1)):
            raise ConfigError("member", "must hold 0/1 coins")
        T = len(member)
        k, config, seeds = self.plan(T, rng)
        R = int(k.sum())
        trial = np.repeat(np.arange(T), k)
        cols = {  # each setting of every configuration, as a column
            k: np.array([c[k] for c in self.configs], dtype=np.int64 if k == "steps" else float)
            for k in GRID_KEYS
        }
        d = self.model.num_params

        best_score, best_run = np.full(T, -np.inf), np.full(T, -1, dtype=np.int64)
        best_dots = np.zeros((T, int(cols["steps"].max())))
        w0, wN = np.zeros((T, d), dtype=np.float32), np.zeros((T, d), dtype=np.float32)
        best = (best_score, best_run, best_dots, w0, wN)  # updated in place by _update

        steps_of_run = cols["steps"][config]
        for steps in np.unique(steps_of_run):
            runs = np.flatnonzero(steps_of_run == steps)
            for start in range(0, len(runs), self.max_batch_runs):
                idx = runs[start : start + self.max_batch_runs]
                cfg = config[idx]
                res = train_runs(
                    self.model,
                    self.train,
                    seeds=seeds[idx],
                    canary=self.canary,
                    include_canary=member[trial[idx]] == 1,
                    execution=self.execution,
                    settings=TrainSettings(
                        steps=int(steps), **{k: cols[k][cfg] for k in GRID_KEYS if k != "steps"}
                    ),
                )
                g = evaluate_score(self.score, self.model, res.w0, res.wN).cpu().numpy()
                g = np.where(np.isnan(g), -np.inf, g)  # a diverged run never wins
                self._update(idx, trial[idx], g, res, best)

        released = k > 0
        picked = config[np.maximum(best_run, 0)] if R else np.zeros(T, dtype=np.int64)
        grid = {
            key: np.where(released, cols[key][picked], 0).astype(cols[key].dtype)
            for key in GRID_KEYS
        }
        release = {
            "score": np.where(released, best_score, 0.0),
            "canary_dots": best_dots,
            "config": np.where(released, picked, -1),
            "w0": w0,
            "wN": wN,
            "released": released,
        }
        return cast(DpsgdRelease, {**release, **grid})

    @staticmethod
    def _update(idx, trials, g, res, best):
        """Keep, per trial, the best run so far (ties: the lowest run index), in place in
        `best`: the arrays of each trial's best score, run, canary statistic, w_0 and w_N."""
        best_score, best_run, best_dots, w0, wN = best
        order = np.lexsort((idx, -g, trials))  # per trial: highest score, then earliest run
        first = np.ones(len(order), dtype=bool)
        first[1:] = trials[order][1:] != trials[order][:-1]
        cand = order[first]
        t, s, r = trials[cand], g[cand], idx[cand]
        better = (s > best_score[t]) | (
            (s == best_score[t]) & ((best_run[t] < 0) | (r < best_run[t]))
        )
        cand, t = cand[better], t[better]
        best_score[t] = g[cand]
        best_run[t] = idx[cand]
        steps = res.canary_dots.shape[1]
        best_dots[t, :steps] = res.canary_dots[cand].cpu().numpy()
        best_dots[t, steps:] = 0.0
        w0[t] = res.w0[cand].float().cpu().numpy()
        wN[t] = res.wN[cand].float().cpu().numpy()
