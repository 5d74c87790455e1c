"""The honest interval: where the tuning run's epsilon lies, with both ends guaranteed.

Contract. For a mechanism pair, a law of K and delta in [0, 1), the epsilon eps_T(delta) of the
tuning run ([XWW24] Algorithm 2; `accounting.attack`) satisfies

    lower <= eps_T(delta) <= upper,

    lower = max(the attack value, a valid eps_L of a game when one is given),
    upper = min over the registered bounds that are rigorous for the pair (`accounting.bounds`),

and `width = upper - lower`. The lower end holds with certainty when it is the attack value
(`accounting.attack`: a post-processing of the true pair, round-off charged) and at the game's
stated confidence when it is eps_L; the upper end holds by the bounds' theorems. A heuristic
(the reduced game of [XWW24] eq. 19 for DP-SGD with tau < 1, the Gaussian-DP central limit) is
never an end: it is neither a lower bound nor an upper bound.

What a user reports: `upper` (the tightest proven epsilon); `width` says how much a better proof
could still gain at most, and 0 means the bound is exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from auditsel.accounting.attack import attack
from auditsel.accounting.bounds import BOUNDS
from auditsel.accounting.rdp import check_deltas
from auditsel.rounds import RoundsLaw

__all__ = ["Interval", "tuning_interval", "attack_source", "interval_from"]


@dataclass(frozen=True)
class Interval:
    """[lower, upper] holding the tuning run's epsilon (module docstring); `upper` is inf and
    `upper_source` None when no rigorous bound applies; `width` = upper - lower."""

    lower: float
    lower_source: str
    upper: float
    upper_source: str | None
    width: float

    def contains(self, eps: float, tol: float = 0.0) -> bool:
        return self.lower - tol <= eps <= self.upper + tol

    def to_dict(self) -> dict:
        """result.json's `interval` (non-finite numbers as null)."""
        fin = lambda x: float(x) if math.isfinite(x) else None
        return {
            "lower": fin(self.lower),
            "lower_source": self.lower_source,
            "upper": fin(self.upper),
            "upper_source": self.upper_source,
            "width": fin(self.width),
        }


def interval_from(
    lowers: Iterable[tuple[float | None, str]], uppers: Iterable[tuple[float | None, str]]
) -> Interval:
    """The interval from candidate ends, each (value, source): the largest lower value and the
    smallest upper one (None and nan are skipped; no lower value gives 0, "eps >= 0")."""
    low = [(float(v), s) for v, s in lowers if v is not None and not math.isnan(v)]
    up = [(float(v), s) for v, s in uppers if v is not None and not math.isnan(v)]
    lower, lower_source = max(low, key=lambda t: t[0], default=(0.0, "eps >= 0"))
    lower = max(lower, 0.0)
    finite_up = [t for t in up if math.isfinite(t[0])]
    upper, upper_source = min(finite_up, key=lambda t: t[0], default=(math.inf, None))
    width = upper - lower if math.isfinite(upper) else math.inf
    return Interval(lower, lower_source, upper, upper_source, width)


def attack_source(value) -> str:
    """One line saying which attack an `attack.AttackValue` is."""
    if value.method == "exact":
        return "attack: exact winner curve of the pair (the tuning run's own epsilon)"
    return (
        f"attack: release the run with the {value.strategy} label, {value.direction} "
        f"(worst-case pair, label step {value.label_step:g})"
    )


def tuning_interval(
    pair,
    law: RoundsLaw,
    delta: float,
    *,
    eps_l: float | None = None,
    eps_l_source: str = "valid eps_L of a game",
    upper: Mapping[str, float | None] | None = None,
    sources: Mapping[str, str | None] | None = None,
) -> Interval:
    """The interval for one setting (module docstring). `eps_l`: a valid lower bound from a
    game (its confidence is the caller's to state in `eps_l_source`); `upper` / `sources`: the
    registry's values and theorems when already computed (`accounting.panel`), else computed
    here."""
    d = float(check_deltas(delta)[0])
    value = attack(pair, law, d)
    lowers = [(value.epsilon, attack_source(value)), (eps_l, eps_l_source)]
    if upper is None:
        upper, sources = {}, {}
        for b in BOUNDS:
            if b.rigour(pair) != "rigorous" or not b.supports(pair, law):
                continue
            if b.not_applicable(pair, law, d):
                continue
            upper[b.key] = b.epsilon(pair, law, d)
            sources[b.key] = b.source(pair, law, d)
    rigorous = {b.key for b in BOUNDS if b.rigour(pair) == "rigorous"}
    uppers = [
        (v, _upper_name(k, (sources or {}).get(k)))
        for k, v in upper.items()
        if k in rigorous and v is not None
    ]
    return interval_from(lowers, uppers)


def _upper_name(key: str, source: str | None) -> str:
    return f"{key} ({source})" if source else key
