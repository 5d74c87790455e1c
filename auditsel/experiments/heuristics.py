"""Heuristic numbers in a result, the valid lower values, and the heuristics they contradict.

Contract. A value is *heuristic* when no theorem makes it a bound for the stated setting:

* `reduced_game.K`: for a base whose reduction is not exact (DP-SGD with sample rate tau < 1),
  the values that rest on the reduced game with mu = tau sqrt(N)/sigma ([XWW24] eq. 19, a
  large-N approximation) or mu_GDP: `exact`, `improved_rdp`, `improved_rdp_gdp`. They are not in
  `upper` (result.json keeps them under `reduced_game`, a labelled comparison with the paper);
* `upper.K` whose `upper_rigour[K]` is "heuristic" and whose value is still in `upper`:
  `improved_rdp_gdp` for DP-SGD with tau = 1 (the Gaussian-DP central limit of [DRS22],
  [XWW24] Appendix A.4);
* `lower.gdp_fit`, the Gaussian-DP fit of [NHSBTJCT23] over every threshold (a lower value that
  holds if the Gaussian trade-off model does), and its alias of earlier releases
  `lower.eps_gdp` (kept for one release).

A *valid lower value* is a number the tuning run's epsilon is known to be at least, at the
same delta: the attack value (`attack.epsilon`, certain, every law of K, mass at K = 0
included: `accounting.attack`) and a valid empirical lower bound eps_L (`lower.eps` of a rule
labelled valid, `split` or `bonferroni` with a grid fixed in advance; at its confidence; not
the eps_L of a `reduced` game on a DP-SGD base with tau < 1, which audits the eq. 19 Gaussian,
not the base: `audits_the_base`). eps_B,
the epsilon of one run (`base.epsilon`), is a further reference when the law of K has no mass
at 0: a tuning run that trains at least once is then reported cheaper than one of its runs
(eps_B is an accountant's number, so this reason is a warning, the two above are proofs).

A heuristic value u is *contradicted* when u is below one of these lower values. Every output
(terminal table, report.md, result.json, sweep tables, plots) reads these functions, so a
heuristic is never shown as if it were a bound, and a contradicted one says so.
"""

from __future__ import annotations

import math

__all__ = [
    "VALID_RULES",
    "heuristic_upper_keys",
    "heuristic_values",
    "heuristic_fields",
    "valid_lower",
    "audits_the_base",
    "lower_values",
    "contradictions",
    "honesty_fields",
]

VALID_RULES = ("split", "bonferroni")


def heuristic_values(result: dict) -> dict[str, float | None]:
    """{key: value} of every heuristic upper value of the result (registry keys, in registry
    order): the `reduced_game` values and the `upper` values labelled heuristic."""
    rigour = result.get("upper_rigour") or {}
    out = {k: v for k, v in (result.get("reduced_game") or {}).items()}
    for k, v in (result.get("upper") or {}).items():
        if rigour.get(k) == "heuristic" and k not in out:
            out[k] = v
    order = list(result.get("upper") or {})
    return dict(sorted(out.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99))


def heuristic_upper_keys(result: dict) -> list[str]:
    """Registry keys whose value is heuristic for this base (in the order of `upper`)."""
    return list(heuristic_values(result))


def _path(result: dict, key: str) -> str:
    return f"reduced_game.{key}" if key in (result.get("reduced_game") or {}) else f"upper.{key}"


def heuristic_fields(result: dict) -> list[str]:
    """Dotted paths of every heuristic number in the result (upper values and the GDP fit)."""
    fields = [_path(result, k) for k in heuristic_upper_keys(result)]
    if result.get("lower"):
        fields += ["lower.gdp_fit", "lower.eps_gdp"]
    return fields


def audits_the_base(result: dict) -> bool:
    """Whether the result's game plays the base itself (or an exact reduction of it): a
    `reduced` game on a DP-SGD base with tau < 1 plays the eq. 19 Gaussian instead, so its
    eps_L bounds that heuristic pair, not the tuning run of the base."""
    base, low = result.get("base") or {}, result.get("lower") or {}
    heuristic_pair = base.get("kind") == "dpsgd" and (base.get("sample_rate") or 1.0) < 1.0
    return not (heuristic_pair and low.get("game") == "reduced")


def valid_lower(result: dict) -> float | None:
    """eps_L when its threshold rule is valid at the stated confidence and its game plays the
    base (`audits_the_base`), else None.

    A `valid` flag in `lower` (set by the audit where a rule's grid was not fixed in advance)
    overrides the rule name."""
    low = result.get("lower") or {}
    eps = low.get("eps")
    if eps is None or not math.isfinite(eps) or not audits_the_base(result):
        return None
    valid = low.get("valid")
    if valid is None:
        valid = low.get("threshold_rule") in VALID_RULES
    return float(eps) if valid else None


def lower_values(result: dict) -> list[tuple[float, str]]:
    """Every valid lower value of the result with a short description (module docstring)."""
    out = []
    att = (result.get("attack") or {}).get("epsilon")
    if att is not None and math.isfinite(att):
        out.append((float(att), f"the attack value {att:.4f} (a lower bound)"))
    eps_l = valid_lower(result)
    if eps_l is not None:
        low = result["lower"]
        out.append(
            (
                eps_l,
                f"the valid eps_L = {eps_l:.4f} ({low['threshold_rule']}, {low['confidence']:.0%})",
            )
        )
    return out


def contradictions(result: dict) -> dict[str, str]:
    """{key: one-line reason} for each heuristic value below a valid lower value or eps_B."""
    eps_b = (result.get("base") or {}).get("epsilon")
    if (result.get("rounds") or {}).get("p_zero"):
        eps_b = None  # K = 0 is possible: a tuning run may legitimately cost less than one run
    lows = lower_values(result)
    found = {}
    for key, value in heuristic_values(result).items():
        if value is None:
            continue
        reasons = [why for low, why in lows if value < low]
        if eps_b is not None and value < eps_b:
            reasons.append(f"below eps_B = {eps_b:.4f} of one run")
        if reasons:
            found[key] = (
                f"heuristic {_path(result, key)} = {value:.4f} is contradicted: "
                f"below {' and '.join(r.removeprefix('below ') for r in reasons)}; "
                "it is not a bound"
            )
    return found


def honesty_fields(result: dict) -> dict:
    """What result.json adds: `heuristic` (dotted paths) and `contradicted` ({key: reason})."""
    return {"heuristic": heuristic_fields(result), "contradicted": contradictions(result)}
