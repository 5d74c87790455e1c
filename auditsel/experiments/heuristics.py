"""Heuristic numbers in a result, and the heuristic upper values that the result contradicts.

Contract. A value is *heuristic* when no theorem makes it a bound for the stated setting:

* `upper.K` whose `upper_rigour[K]` is "heuristic": `improved_rdp_gdp` always (the Gaussian-DP
  central limit of [DRS22], [XWW24] Appendix A.4), and `exact` / `improved_rdp` for a DP-SGD
  base with sample rate tau < 1 (the reduced game with mu = tau sqrt(N)/sigma, [XWW24] eq. 19,
  is a large-N approximation, not a bound);
* `lower.gdp_fit`, the Gaussian-DP fit of [NHSBTJCT23] over every threshold (a lower value that
  holds if the Gaussian trade-off model does), and its alias of earlier releases
  `lower.eps_gdp` (kept for one release).

A heuristic upper value u is *contradicted* when the same result holds a number it must not be
below, at the same delta:

* eps_B, the epsilon of one run of the base mechanism (`base.epsilon`), when the law of K has
  no mass at 0 (no `rounds.p_zero`): the released winner of a tuning run that trains at least
  once is reported cheaper than a single one of its runs;
* a valid empirical lower bound eps_L (`lower.eps` of a rule labelled valid, `split` or
  `bonferroni` with a grid fixed in advance): the attack demonstrably achieves more, at the
  stated confidence.

Every output (terminal table, report.md, result.json, sweep tables, plots) reads these two
functions, so a heuristic is never shown as if it were a bound, and a contradicted one says so.
"""

from __future__ import annotations

import math

__all__ = [
    "VALID_RULES",
    "heuristic_upper_keys",
    "heuristic_fields",
    "valid_lower",
    "contradictions",
    "honesty_fields",
]

VALID_RULES = ("split", "bonferroni")


def heuristic_upper_keys(result: dict) -> list[str]:
    """Keys of `result["upper"]` labelled heuristic for this base (in the order of `upper`)."""
    rigour = result.get("upper_rigour") or {}
    return [k for k in result.get("upper", {}) if rigour.get(k) == "heuristic"]


def heuristic_fields(result: dict) -> list[str]:
    """Dotted paths of every heuristic number in the result (upper values and the GDP fit)."""
    fields = [f"upper.{k}" for k in heuristic_upper_keys(result)]
    if result.get("lower"):
        fields += ["lower.gdp_fit", "lower.eps_gdp"]
    return fields


def valid_lower(result: dict) -> float | None:
    """eps_L when its threshold rule is valid at the stated confidence, else None.

    A `valid` flag in `lower` (set by the audit where a rule's grid was not fixed in advance)
    overrides the rule name."""
    low = result.get("lower") or {}
    eps = low.get("eps")
    if eps is None or not math.isfinite(eps):
        return None
    valid = low.get("valid")
    if valid is None:
        valid = low.get("threshold_rule") in VALID_RULES
    return float(eps) if valid else None


def contradictions(result: dict) -> dict[str, str]:
    """{upper key: one-line reason} for each heuristic upper value below eps_B or a valid eps_L."""
    eps_b = (result.get("base") or {}).get("epsilon")
    if (result.get("rounds") or {}).get("p_zero"):
        eps_b = None  # K = 0 is possible: a tuning run may legitimately cost less than one run
    eps_l = valid_lower(result)
    found = {}
    for key in heuristic_upper_keys(result):
        value = result["upper"].get(key)
        if value is None:
            continue
        reasons = []
        if eps_b is not None and value < eps_b:
            reasons.append(f"below eps_B = {eps_b:.4f} of one run")
        if eps_l is not None and value < eps_l:
            low = result["lower"]
            reasons.append(
                f"below the valid eps_L = {eps_l:.4f} ({low['threshold_rule']}, "
                f"{low['confidence']:.0%})"
            )
        if reasons:
            found[key] = (
                f"heuristic {key} = {value:.4f} is contradicted: "
                f"{' and '.join(reasons)}; it is not a bound"
            )
    return found


def honesty_fields(result: dict) -> dict:
    """What result.json adds: `heuristic` (dotted paths) and `contradicted` ({key: reason})."""
    return {"heuristic": heuristic_fields(result), "contradicted": contradictions(result)}
