"""The result of `run_config`: result.json as a frozen, typed object.

`RunResult` holds the sections of the result.json contract (docs/reference/result-json.md) as attributes
(`result.upper["exact"]`, `result.lower["eps"]`, `result.eps_lower`), and the whole document as
`to_dict()` (what `auditsel run` writes, keys only ever added).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from auditsel.accounting.interval import IntervalRecord


@dataclass(frozen=True)
class RunResult:
    """One run of a config (docs/reference/result-json.md)."""

    name: str
    delta: float
    base: Mapping[str, Any]  # kind, epsilon (eps_B at delta), mu, the pair's parameters
    rounds: Mapping[str, Any]  # kind, mean (E[K]), the law's parameters
    #: one value per registered bound (None: not applicable, or under an assumption: the
    #: reduced game's keys are in `monotone_score` / `reduced_game`)
    upper: Mapping[str, float | None]
    upper_rigour: Mapping[str, str]  # bound -> "rigorous" | "monotone_score" | "heuristic"
    lower: Mapping[str, Any] | None  # eps_L and its audit (None without a game)
    one_run: Mapping[str, Any] | None  # game.one_run: the one-run audits (None otherwise)
    notes: Mapping[str, str]  # why a bound is None or heuristic
    version: str
    seconds: float
    document: Mapping[str, Any] = field(repr=False)  # the whole result.json content
    #: lower, lower_source, upper, upper_source, width: the tuning run's epsilon lies in
    #: [lower, upper] (accounting.interval); None in result.json documents written before it
    interval: IntervalRecord | None = None
    attack: Mapping[str, Any] | None = None  # the attack value (a lower bound) and its source
    reduced_game: Mapping[str, float | None] | None = None  # tau < 1: the heuristic values
    #: the reduced game's values under [XWW24]'s monotone-score assumption (its `assumption`
    #: line included); None where the reduction is not exact
    monotone_score: Mapping[str, Any] | None = None

    @classmethod
    def from_dict(cls, result: Mapping[str, Any]) -> RunResult:
        """The object of a result.json document (as `auditsel run` writes it)."""
        required = ("name", "delta", "base", "rounds", "upper", "upper_rigour")
        optional = ("lower", "one_run", "interval", "attack", "reduced_game", "monotone_score")
        given: dict[str, Any] = {k: result.get(k) for k in optional}
        return cls(
            **{k: result[k] for k in required},
            **given,
            notes=result.get("notes", {}),
            version=result["version"],
            seconds=result["seconds"],
            document=result,
        )

    @property
    def eps_lower(self) -> float | None:
        """eps_L of the game's audit (None without a game)."""
        return None if self.lower is None else self.lower["eps"]

    @property
    def eps_exact(self) -> float | None:
        """The exact epsilon of the reduced game's released winner at delta, under [XWW24]'s
        monotone-score assumption (None where it does not apply): not the tuning run's epsilon
        for any score (that lies in `interval`)."""
        if self.monotone_score is not None:
            return self.monotone_score.get("exact")
        return self.upper.get("exact")  # result.json documents written before 0.2

    def to_dict(self) -> dict[str, Any]:
        """result.json's content (a deep copy: the result stays frozen)."""
        return copy.deepcopy(dict(self.document))
