"""One finding of the pipeline checks, and what every check reads: `Finding`, `Context`.

Contract. A `Finding` names the object that contradicts the claim (`obj`), says how
(`message`), gives the claim's epsilon as the bug changes it (`effect`, at the claim's delta;
None where it cannot be computed, `effect_text` then says why) and the fix. `severity` is
"breaks" (the claim is certainly wrong for this pipeline: `audit-pipeline --opacus` refuses to
certify it unless `--accept`) or "warning" (the claim may hold, under an assumption the pipeline
does not show).

`Context` holds the pipeline's objects as `check_pipeline` received them, with what is read
from them once: the DP optimizers (any optimizer with the public `noise_multiplier` and
`max_grad_norm` attributes of Opacus's `DPOptimizer`), the engine's accountant history, and the
run as a `DpsgdBase` (`base`) when the history or the caller gives one. `claim_epsilon` is the
claim's epsilon for that run with some of its settings changed: one run at `delta`, or with
`rounds` the smallest rigorous tuning bound (`auditsel.accounting.interval.tightest_bound`, the
panel interval's upper end: the number `from_opacus` reports as `tuning_epsilon`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from auditsel.accounting.interval import tightest_bound
from auditsel.mechanisms import DpsgdBase
from auditsel.rounds import RoundsLaw

BREAKS, WARNING = "breaks", "warning"
#: Opacus accountant -> auditsel's accountant for the same run (as `from_opacus` maps it)
ACCOUNTANT = {"rdp": "rdp", "prv": "pld", "gdp": "pld"}


@dataclass(frozen=True)
class Finding:
    """One way the pipeline's objects contradict the claim (module docstring)."""

    severity: str  # "breaks" (the claim is certainly wrong) or "warning"
    obj: str  # the object named, e.g. "optimizers[1]" or "data_loader"
    message: str  # what contradicts the claim
    effect: float | None  # the claim's epsilon as the bug changes it (None: not computed)
    fix: str
    check: str = ""  # the check that found it (see docs/howto/check-your-pipeline.md)
    effect_text: str = ""  # what `effect` is, or why it is not computed

    def line(self) -> str:
        """The finding on one line: severity, object, what contradicts the claim, the effect
        on epsilon, the fix."""
        label = "breaks the claim" if self.severity == BREAKS else "warning"
        return f"{label}: {self.obj}: {self.message}; effect: {effect_words(self)}; fix: {self.fix}"

    def to_dict(self) -> dict[str, Any]:
        effect = self.effect
        return {
            "check": self.check,
            "severity": self.severity,
            "object": self.obj,
            "message": self.message,
            "effect": None if effect is None or not math.isfinite(effect) else effect,
            "effect_unbounded": effect is not None and not math.isfinite(effect),
            "effect_text": self.effect_text,
            "fix": self.fix,
        }


def effect_words(finding: Finding) -> str:
    """The effect as a user reads it: the number with what it is, or why there is none."""
    if finding.effect is None:
        return finding.effect_text or "not computed"
    value = "unbounded (inf)" if math.isinf(finding.effect) else f"eps {finding.effect:.4g}"
    return f"{value} ({finding.effect_text})" if finding.effect_text else value


def read_history(engine: Any) -> tuple[list[tuple[float, float, int]], str] | None:
    """The engine's accountant history [(noise, sample rate, steps)] and mechanism name, read
    through Opacus's public attributes; None for an object that is not an engine."""
    accountant = getattr(engine, "accountant", None)
    try:
        history = [(float(s), float(q), int(n)) for s, q, n in accountant.history]  # type: ignore[union-attr]
        mechanism = str(accountant.mechanism())  # type: ignore[union-attr]
    except (AttributeError, TypeError, ValueError):
        return None
    return history, mechanism


def _is_dp_optimizer(optimizer: Any) -> bool:
    return hasattr(optimizer, "noise_multiplier") and hasattr(optimizer, "max_grad_norm")


@dataclass
class Context:
    """The pipeline's objects and what is read from them once (module docstring)."""

    model: Any = None
    optimizers: list[Any] = field(default_factory=list)
    data_loader: Any = None
    engine: Any = None
    rounds: RoundsLaw | None = None
    delta: float | None = None
    dataset: Any = None
    release: Any = None
    claim: float | None = None
    base: DpsgdBase | None = None
    privatizer: Callable[[list[Any], float], Any] | None = None
    history: list[tuple[float, float, int]] = field(default_factory=list)
    mechanism: str | None = None
    cache: dict[str, Any] = field(default_factory=dict)  # what the checks read once

    def __post_init__(self) -> None:
        read = None if self.engine is None else read_history(self.engine)
        if read is not None:
            self.history, self.mechanism = read
        steps = sum(n for _, _, n in self.history)
        if self.base is None and steps and len({(s, q) for s, q, _ in self.history}) == 1:
            sigma, rate, _ = self.history[0]
            kind = ACCOUNTANT.get(self.mechanism or "", "pld")
            self.base = DpsgdBase(sigma, steps, min(rate, 1.0), kind)
        if self.dataset is None:
            self.dataset = getattr(self.data_loader, "dataset", None)

    @property
    def dp_optimizers(self) -> list[tuple[int, Any]]:
        """(index, optimizer) of the DP optimizers among `optimizers`."""
        return [(i, o) for i, o in enumerate(self.optimizers) if _is_dp_optimizer(o)]

    @property
    def assumes_poisson(self) -> bool:
        """Whether the claim's accounting assumes Poisson sampling below rate 1: Opacus's
        accountants always do, a DpsgdBase does (dp_accounting's Poisson-subsampled Gaussian)."""
        if self.history:
            return any(q < 1 for _, q, _ in self.history)
        if self.mechanism is not None:  # an engine that has recorded no step yet
            return True
        return self.base is not None and self.base.sample_rate < 1

    def claim_epsilon(self, **changes: Any) -> float | None:
        """The claim's epsilon for `base` with `changes` (noise_multiplier, steps,
        sample_rate) at `delta` (or `changes["delta"]`): one run, or with `rounds` the
        smallest rigorous tuning bound. None without a base or a delta."""
        delta = changes.pop("delta", self.delta)
        if self.base is None or delta is None:
            return None
        base = replace(self.base, **changes)
        return claim_curve(base, self.rounds)(float(delta))


def claim_curve(base: DpsgdBase, rounds: RoundsLaw | None) -> Callable[[float], float]:
    """delta -> the claim's epsilon for `base`: one run, or the tuning run's smallest rigorous
    bound for `rounds` (inf where no bound applies)."""

    def epsilon(delta: float) -> float:
        if rounds is None:
            return float(base.epsilon(delta))
        return float(tightest_bound(base, rounds, delta).epsilon)  # the panel's upper end

    return epsilon
