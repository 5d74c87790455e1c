"""One-run audits of your own pipeline: many canaries in one tuning run ([SNJ23], [MMC24]).

Contract. `audit_pipeline_one_run(tune, score, *, data, canaries, delta, claimed_epsilon,
statistics, family)` draws an inclusion bit S_i ~ Bernoulli(1/2) for each of the m canaries
(seeded by `statistics`, an `AuditOptions`, as `audit_pipeline`'s games), runs your tuning once
with the included ones, scores every canary on the release, and bounds eps from below with the
analyses of `auditsel.auditing.one_run_analysis`:

* `eps`: [SNJ23] Theorem 5.2, valid at `confidence` for a claim of (eps, delta)-DP with respect
  to each canary's inclusion (add/remove, the other canaries arbitrary), whatever the pipeline:
  with `claimed_epsilon`, `refuted` is eps > claim, and a true claim is refuted with
  probability at most 1 - confidence;
* `eps_mmc24`: [MMC24] Theorem 9 under a hypothesised trade-off family (mu-GDP by default): an
  eps lower bound only when the pipeline's trade-off lies in that family (an assumption, named
  wherever it is shown).

`tune` receives the canaries through the same argument as one canary: a `CanarySet`, whose
every call (`prepare`, `attach`, `step`) acts for each included canary (each sampled on its
own), so a `tune` written for `audit_pipeline` runs unchanged. The score is called once per
canary, `score(release, canary_i)` with the unbound canary_i (None: each canary's own). The
canaries must not interfere (GradientCanaries on distinct coordinates, InputCanaries that are
distinct outliers). One run gives far fewer bits of evidence than many games: its eps_L is
smaller than a games audit's, and bounds the epsilon per canary, not the selection alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from auditsel.auditing.one_run_analysis import OneRunBound, TradeoffFamily, audit_one_run
from auditsel.errors import ConfigError, integer, number, percent
from auditsel.pipelines.audit_options import AuditOptions, given_options
from auditsel.pipelines.canaries import Canary, default_score
from auditsel.pipelines.game import (
    PipelineError,
    ScoreFn,
    TuneFn,
    function_name,
    game_seed,
    probe_call,
)


@dataclass(frozen=True, eq=False)
class CanarySet(Canary):
    """Many canaries as one: bound to a run by `for_run(bits, rng)`, each call below acts for
    every canary of the set (the module docstring)."""

    canaries: tuple[Canary, ...] = ()
    _bound: tuple[Canary, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        canaries = tuple(self.canaries)
        if len(canaries) < 2 or not all(isinstance(c, Canary) for c in canaries):
            raise ConfigError("canaries", "must be at least 2 auditsel canaries")
        if any(isinstance(c, CanarySet) for c in canaries):
            raise ConfigError("canaries", "a CanarySet holds canaries, not other sets")
        object.__setattr__(self, "canaries", canaries)

    def for_run(
        self, bits: Sequence[int] | NDArray[np.integer], rng: np.random.Generator
    ) -> CanarySet:
        """This set bound to one run: canary i is in when bits[i] = 1."""
        bound = cast(CanarySet, self.for_game(bool(np.any(bits)), rng))
        each = tuple(c.for_game(bool(b), rng) for c, b in zip(self.canaries, bits))
        object.__setattr__(bound, "_bound", each)
        return bound

    def _each(self) -> tuple[Canary, ...]:
        return self._bound or tuple(c.for_game(False, np.random.default_rng(0)) for c in self)

    def __iter__(self) -> Iterator[Canary]:
        return iter(self.canaries)

    def __len__(self) -> int:
        return len(self.canaries)

    def prepare(self, data: Any) -> Any:
        for canary in self._each():
            data = canary.prepare(data)
        return data

    def attach(self, optimizer: Any, *, sample_rate: float | None = None, model: Any = None) -> Any:
        for canary in self._each():
            optimizer = canary.attach(optimizer, sample_rate=sample_rate, model=model)
        return optimizer

    def step(
        self,
        grads: Sequence[Any],
        *,
        sample_rate: float,
        max_grad_norm: Any,
        names: Sequence[str] | None = None,
    ) -> bool:
        added = [
            c.step(grads, sample_rate=sample_rate, max_grad_norm=max_grad_norm, names=names)
            for c in self._each()
        ]
        return any(added)

    def score(self, release: Any) -> float:
        raise ConfigError("score", "a CanarySet is scored canary by canary (one score each)")

    def describe(self) -> dict[str, Any]:
        kinds = sorted({c.describe().get("kind", "?") for c in self.canaries})
        return {"kind": "set", "canaries": len(self.canaries), "kinds": kinds}


@dataclass(frozen=True, eq=False)
class OneRunPipelineAudit:
    """The result of `audit_pipeline_one_run` (module docstring)."""

    eps: float  # [SNJ23] eps_L, valid at `confidence`
    eps_mmc24: float  # [MMC24] eps_L, valid only if the trade-off lies in `bound.mmc24_family`
    refuted: bool | None
    claimed_epsilon: float | None
    delta: float
    confidence: float
    seed: int
    bound: OneRunBound
    scores: NDArray[np.float64]  # one per canary
    members: NDArray[np.int8]  # the inclusion bits
    cpu_seconds: float
    tune: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "one_run": self.bound.to_dict(),
            "eps": self.eps,
            "eps_mmc24": self.eps_mmc24,
            "eps_mmc24_assumes": f"the trade-off lies in the {self.bound.mmc24_family} family",
            "claim": None
            if self.claimed_epsilon is None
            else {"epsilon": self.claimed_epsilon, "refuted": self.refuted},
            "tune": self.tune,
            "seed": self.seed,
            "cpu_seconds": self.cpu_seconds,
        }

    def summary(self) -> str:
        m, k = len(self.scores), int(self.members.sum())
        lines = [
            f"one-run audit of {self.tune}: {m:,} canaries ({k:,} in), one run, delta = "
            f"{self.delta:g}",
            f"  eps_L ([SNJ23], valid at {percent(self.confidence)})       {self.eps:.4f}",
            f"  eps_L ([MMC24], if the trade-off is {self.bound.mmc24_family})  "
            f"{self.eps_mmc24:.4f}  (an assumption, not a guarantee)",
        ]
        if self.claimed_epsilon is not None:
            verdict = "REFUTED" if self.refuted else "not refuted"
            lines.append(f"  claim {self.claimed_epsilon:g}: {verdict} ([SNJ23] eps_L vs claim)")
        return "\n".join(lines)

    __str__ = summary


def audit_pipeline_one_run(
    tune: TuneFn,
    score: ScoreFn | None = None,
    *,
    data: Any,
    canaries: Sequence[Canary] | CanarySet,
    delta: float,
    claimed_epsilon: float | None = None,
    statistics: AuditOptions | None = None,
    family: TradeoffFamily | None = None,
) -> OneRunPipelineAudit:
    """One run of `tune` with m canaries, each in with probability 1/2 (seeded by
    `statistics.seed`), and the one-run analyses of its per-canary scores at
    `statistics.confidence` (module docstring; `AuditOptions`, None: its defaults; the
    one-run analyses take no threshold rule, so a rule other than the default is refused)."""
    stats = given_options(AuditOptions, statistics, "statistics")
    if stats.rule != "split":
        raise ConfigError("statistics.rule", "the one-run analyses take no threshold rule")
    confidence, seed = stats.confidence, stats.seed
    if not callable(tune):
        raise ConfigError("tune", "must be a function tune(data, seed, canary) -> release")
    if score is not None and not callable(score):
        raise ConfigError("score", "must be a function score(release, canary) -> float, or None")
    canary_set = canaries if isinstance(canaries, CanarySet) else CanarySet(tuple(canaries))
    number(delta, "delta", 0, 1, hi_open=True)
    if claimed_epsilon is not None:
        number(claimed_epsilon, "claimed_epsilon", 0)
    number(confidence, "confidence", 0.5, 1, hi_open=True)
    seed = integer(seed, "seed", 0, 2**63 - 1)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2**32 - 1,)))
    bits = rng.integers(0, 2, len(canary_set)).astype(np.int8)
    bound = canary_set.for_run(bits, rng)
    user_seed = game_seed(seed, 0)
    score_fn = score if score is not None else default_score
    start = time.process_time()
    release = probe_call("tune", tune, "the one run", bound.prepare(data), user_seed, bound)
    raw = [probe_call("score", score_fn, "the one run", release, c) for c in canary_set]
    try:
        scores = np.array([float(r) for r in raw], dtype=np.float64)
    except (OverflowError, TypeError, ValueError) as err:
        raise PipelineError(
            "score", f"{function_name(score_fn)} returned no real number: {err}"
        ) from None
    analysis = audit_one_run(scores, bits, delta, confidence=confidence, family=family, seed=seed)
    eps = float(analysis.eps_snj23)
    return OneRunPipelineAudit(
        eps=eps,
        eps_mmc24=float(analysis.eps_mmc24),
        refuted=None if claimed_epsilon is None else bool(eps > claimed_epsilon),
        claimed_epsilon=None if claimed_epsilon is None else float(claimed_epsilon),
        delta=float(delta),
        confidence=float(confidence),
        seed=seed,
        bound=analysis,
        scores=scores,
        members=bits,
        cpu_seconds=time.process_time() - start,
        tune=function_name(tune),
    )
