"""The claim of an Opacus run, read from the run itself: `from_opacus(privacy_engine, ...)`.

Contract. For a run made by `opacus.PrivacyEngine.make_private` (an engine, its `DPOptimizer`
and its `DPDataLoader`), `from_opacus` returns

* `claimed_epsilon`: the epsilon of one run at `delta` exactly as Opacus computes it: the
  engine's own `get_epsilon(delta)` over the steps its accountant recorded (or, with `steps`
  given, a fresh accountant of the same kind over that many steps of the run's noise multiplier
  and sample rate);
* `base`: the run as a `DpsgdBase` (noise multiplier, steps taken, sample rate, accountant):
  the sample rate is the one Opacus's accountant charges, 1 / len(data_loader); Opacus's PRV
  accountant maps to dp_accounting's PLD (`base_epsilon` agrees with the claim to the
  accountants' discretisation), RDP to RDP;
* with `rounds` (the user's law of K), the tuning bounds of `auditsel.accounting.panel` for
  that base and law at `delta` (`tuning`, each with its rigour and source: the bounds that hold
  for any score the tuning run ranks its runs by), the interval of the tuning run's epsilon
  (`interval`: the worst-score attack value on the worst-case pair below, the tightest rigorous
  bound above) and `tuning_epsilon`, its upper end: the smallest bound labelled rigorous. The
  reduced game's values sit apart: `monotone_score` (sample rate 1: they hold only under
  [XWW24]'s monotone-score assumption) and `reduced_game` (sample rate below 1: heuristic).
  With `assume="monotone_score"`, `interval` and `tuning_epsilon` are [XWW24]'s under that
  assumption instead (the interval says so: `interval.assumption`).
* `findings`: what `auditsel.check_pipeline` finds in the engine, optimizer and loader, each
  with its fix; a finding that breaks the claim is also a note.

Nothing here imports Opacus: the objects are read through their public attributes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from auditsel.accounting.interval import Interval, check_assume
from auditsel.accounting.panel import panel
from auditsel.errors import ConfigError, integer, number
from auditsel.mechanisms import DpsgdBase
from auditsel.pipelines.checks import BREAKS, Finding, RunObjects, check_pipeline
from auditsel.pipelines.checks.finding import ACCOUNTANT, read_history
from auditsel.rounds import RoundsLaw


@dataclass(frozen=True)
class OpacusRun:
    """One Opacus run as auditsel sees it (see the module docstring)."""

    base: DpsgdBase
    claimed_epsilon: float  # one run at delta, as Opacus computes it
    delta: float
    opacus_accountant: str  # "prv", "rdp" or "gdp"
    base_epsilon: float  # base.epsilon(delta): auditsel's accountant on the same run
    rounds: RoundsLaw | None = None
    tuning: Mapping[str, float | None] = field(default_factory=dict)  # bound key -> eps
    tuning_rigour: Mapping[str, str] = field(default_factory=dict)
    tuning_sources: Mapping[str, str | None] = field(default_factory=dict)
    reduced_game: Mapping[str, float | None] = field(default_factory=dict)  # heuristic, tau < 1
    interval: Interval | None = None  # [attack value, tightest rigorous bound] with rounds
    notes: tuple[str, ...] = ()
    #: tau = 1: the reduced game's values, under [XWW24]'s monotone-score assumption
    monotone_score: Mapping[str, float | None] = field(default_factory=dict)
    #: the checks before games on the engine, optimizer and loader (`check_pipeline`)
    findings: tuple[Finding, ...] = ()

    @property
    def tuning_epsilon(self) -> float | None:
        """The interval's upper end for `rounds` (None without rounds or when no bound
        applies): the smallest rigorous tuning bound, an honest epsilon for the whole tuning run
        and any score (under `assume="monotone_score"`: [XWW24]'s value, see `interval`)."""
        if self.interval is None or not math.isfinite(self.interval.upper):
            return None
        return float(self.interval.upper)

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.describe(),
            "claimed_epsilon": self.claimed_epsilon,
            "delta": self.delta,
            "opacus_accountant": self.opacus_accountant,
            "base_epsilon": self.base_epsilon,
            "rounds": None if self.rounds is None else self.rounds.describe(),
            "tuning": dict(self.tuning),
            "tuning_rigour": dict(self.tuning_rigour),
            "tuning_sources": dict(self.tuning_sources),
            "tuning_epsilon": self.tuning_epsilon,
            "reduced_game": dict(self.reduced_game),
            "monotone_score": dict(self.monotone_score),
            "interval": None if self.interval is None else self.interval.to_dict(),
            "notes": list(self.notes),
            "findings": [f.to_dict() for f in self.findings],
        }


def from_opacus(
    privacy_engine: Any,
    *,
    optimizer: Any,
    data_loader: Any,
    delta: float,
    rounds: RoundsLaw | None = None,
    steps: int | None = None,
    assume: str | None = None,
) -> OpacusRun:
    """The DpsgdBase and claimed epsilon of an Opacus run, and the tuning bounds of `rounds`.

    Call it after training (the steps the engine's accountant recorded), or before with `steps`
    (the steps one run will take).

    Args:
        privacy_engine: the `opacus.PrivacyEngine` that made the run private.
        optimizer: the `DPOptimizer` that `make_private` returned (its noise multiplier).
        data_loader: the `DPDataLoader` that `make_private` returned (its sample rate).
        delta: in (0, 1).
        rounds: the law of K of the tuning run (None: the run alone, no tuning bounds).
        steps: the steps one run takes (None: the steps the engine's accountant recorded).
        assume: None (the interval holds for any score), or "monotone_score": [XWW24]'s
            interval under that assumption (module docstring).

    Returns:
        An `OpacusRun`: the claim, the run as a `DpsgdBase`, and with `rounds` the tuning
        bounds, the interval and `tuning_epsilon`.

    Raises:
        auditsel.errors.ConfigError: an object that is not the run's engine, optimizer or
            loader, a run whose noise or sample rate changed, no step recorded and no
            `steps`, or a bad `delta`.
    """
    assume = check_assume(assume)
    delta = number(delta, "delta", 0, 1, lo_open=True, hi_open=True)
    run = _read_run(privacy_engine, optimizer, data_loader, delta, steps, rounds)
    base, claimed, mechanism, findings = run
    notes = list(_NOTES.get(mechanism, ()))
    notes += [f"breaks the claim: {f.message}" for f in findings if f.severity == BREAKS]
    tuning = _tuning_fields(base, rounds, delta, assume)
    return OpacusRun(
        base=base,
        claimed_epsilon=claimed,
        delta=delta,
        opacus_accountant=mechanism,
        base_epsilon=float(base.epsilon(delta)),
        rounds=rounds,
        notes=tuple(notes + tuning.pop("notes", [])),
        findings=tuple(findings),
        **tuning,
    )


def _read_run(
    privacy_engine: Any,
    optimizer: Any,
    data_loader: Any,
    delta: float,
    steps: int | None,
    rounds: RoundsLaw | None,
) -> tuple[DpsgdBase, float, str, list[Finding]]:
    """(base, claimed epsilon, accountant's mechanism, `check_pipeline`'s findings) of the run."""
    accountant = getattr(privacy_engine, "accountant", None)
    if accountant is None or not hasattr(privacy_engine, "get_epsilon"):
        raise ConfigError("privacy_engine", "must be an opacus.PrivacyEngine")
    sigma = number(
        getattr(optimizer, "noise_multiplier", None), "optimizer.noise_multiplier", 0, math.inf
    )
    loader_rate = getattr(data_loader, "sample_rate", None)
    if loader_rate is None:
        loader_rate = 1 / len(data_loader)  # what make_private charges for any loader
    read = read_history(privacy_engine)
    if read is None:
        raise ConfigError(
            "privacy_engine",
            "must be an opacus.PrivacyEngine (its accountant's history is unreadable)",
        )
    history, mechanism = read
    claimed, steps, rate = _claim(
        privacy_engine, accountant, history, sigma, loader_rate, delta, steps
    )
    if not math.isclose(rate, loader_rate, rel_tol=1e-12) and rate < loader_rate:
        raise ConfigError(
            "data_loader",
            f"sample rate {loader_rate:g} differs from the {rate:g} the engine's accountant "
            f"charges: pass the data loader of this engine",
        )
    base = DpsgdBase(sigma, steps, min(rate, 1.0), ACCOUNTANT.get(mechanism, "pld"))
    findings = check_pipeline(
        RunObjects(
            optimizers=[optimizer],
            data_loader=data_loader,
            engine=privacy_engine,
            delta=delta,
            rounds=rounds if isinstance(rounds, RoundsLaw) else None,
        )
    )
    return base, claimed, mechanism, findings


def _claim(
    privacy_engine: Any,
    accountant: Any,
    history: list[tuple[float, float, int]],
    sigma: float,
    loader_rate: float,
    delta: float,
    steps: int | None,
) -> tuple[float, int, float]:
    """(claimed epsilon, steps, sample rate) of the run (module docstring)."""
    if steps is not None:
        steps = integer(steps, "steps", 1)
        rate = history[-1][1] if history else float(loader_rate)
        planned = type(accountant)()
        planned.history = [(sigma, rate, steps)]
        return float(planned.get_epsilon(delta)), steps, rate
    if not history:
        raise ConfigError(
            "steps",
            "the engine's accountant has recorded no step yet: train first, or pass "
            "steps=N (the steps one run takes)",
        )
    if len({(s, q) for s, q, _ in history}) > 1:
        raise ConfigError(
            "privacy_engine",
            f"the run changed its noise multiplier or sample rate during training "
            f"({history}); a DpsgdBase has one of each",
        )
    sigma_run, rate, _ = history[0]
    if not math.isclose(sigma_run, sigma, rel_tol=1e-12):
        raise ConfigError(
            "optimizer",
            f"noise multiplier {sigma:g} differs from the {sigma_run:g} the engine's "
            f"accountant recorded: the engine's claim is not for noise {sigma:g}; pass the "
            f"engine whose make_private returned this optimizer (the accountant of the run "
            f"that trained), or train with the noise multiplier the claim assumes",
        )
    steps = sum(n for _, _, n in history)
    return float(privacy_engine.get_epsilon(delta)), steps, rate


_NOTES = {
    "prv": (
        "Opacus's PRV accountant; auditsel's DpsgdBase uses dp_accounting's PLD accountant "
        "for the same run (base_epsilon)",
    ),
    "gdp": (
        "Opacus's gdp accountant is a central-limit approximation, not a bound: the claim "
        "is heuristic; auditsel's DpsgdBase uses dp_accounting's PLD accountant",
    ),
}


def _tuning_fields(
    base: DpsgdBase, rounds: Any, delta: float, assume: str | None
) -> dict[str, Any]:
    """OpacusRun's tuning fields for the law `rounds` (module docstring; none without one)."""
    if rounds is None:
        return {}
    if not isinstance(rounds, RoundsLaw):
        raise ConfigError("rounds", "must be a law of K (auditsel.Poisson(3), ...)")
    bounds = panel(base, rounds, delta, assume=assume)
    apart = {**bounds.reduced_game, **bounds.monotone_score}
    return {
        "tuning": {k: v for k, v in bounds.upper.items() if k not in apart},
        "tuning_rigour": bounds.labels,
        "tuning_sources": bounds.sources,
        "reduced_game": dict(bounds.reduced_game),
        "monotone_score": dict(bounds.monotone_score),
        "interval": bounds.interval,
        "notes": list(bounds.notes),
    }
