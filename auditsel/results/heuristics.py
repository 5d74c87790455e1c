"""The labels of a result, computed once: the values under an assumption, the heuristic numbers,
the valid lower values, the heuristics they contradict, and the interval (`ResultLabels`).

Contract. The tuning run's epsilon is taken over every score function ([XWW24] Algorithm 2 with
any score; docs/findings/any-score.md). A value *assumes a monotone score* when it is the
reduced game's ([XWW24] Figure 5): `monotone_score.K` (`exact`, `improved_rdp`,
`improved_rdp_gdp`, where the base's reduction is exact) holds only under [XWW24]'s
monotone-score assumption, stated in `monotone_score.assumption`; such a value is proven for the
reduced game and is no bound for the tuning run, so it is shown in its own block, one line,
never as the interval's end and never flagged CONTRADICTED (a valid lower value for any score
above it says how much a non-monotone score leaks, not that the value is wrong for the reduced
game). A value is *heuristic* when no theorem makes it a bound even for its own setting:

* `reduced_game.K`: for a base whose reduction is not exact (DP-SGD with sample rate tau < 1),
  the values that rest on the reduced game with mu = tau sqrt(N)/sigma ([XWW24] eq. 19, a
  large-N approximation) or mu_GDP: `exact`, `improved_rdp`, `improved_rdp_gdp`. They are not in
  `upper` (result.json keeps them under `reduced_game`, a labelled comparison with the paper);

* `monotone_score.K` or `upper.K` whose `upper_rigour[K]` is "heuristic": `improved_rdp_gdp`
  for DP-SGD with tau = 1 (the Gaussian-DP central limit of [DRS22], [XWW24] Appendix A.4; a
  monotone score assumed too, so it is not checked against lower values for any score);

* `lower.gdp_fit`, the Gaussian-DP fit of [NHSBTJCT23] over every threshold (a lower value that
  holds if the Gaussian trade-off model does).

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
(terminal table, report.md, result.json, sweep tables, plots) reads `result_labels` (or these
functions, which it is made of), so a heuristic is never shown as if it were a bound, a value
under an assumption always names it, and a contradicted one says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from auditsel.errors import percent

VALID_RULES = ("split", "bonferroni")

#: the reduced game of a base whose reduction is not exact, in one line
REDUCED_GAME_ASSUMPTION = (
    "[XWW24]'s reduced game with mu of eq. 19 (a large-N approximation for sample rate < 1: "
    "heuristic) and a monotone score: not bounds"
)


def _monotone(result: dict) -> dict[str, Any]:
    """The `monotone_score` values of the result (without its `assumption` line)."""
    return {k: v for k, v in (result.get("monotone_score") or {}).items() if k != "assumption"}


def heuristic_values(result: dict) -> dict[str, float | None]:
    """{key: value} of every heuristic upper value of the result that a lower value for any
    score may contradict (registry keys, in registry order): the `reduced_game` values and the
    `upper` values labelled heuristic (module docstring)."""
    rigour = result.get("upper_rigour") or {}
    out = {k: v for k, v in (result.get("reduced_game") or {}).items()}
    for k, v in (result.get("upper") or {}).items():
        if rigour.get(k) == "heuristic" and k not in out and k not in _monotone(result):
            out[k] = v
    order = list(result.get("upper") or {})
    return dict(sorted(out.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99))


def heuristic_upper_keys(result: dict) -> list[str]:
    """Registry keys whose value is heuristic for this base (in the order of `upper`), those
    under the monotone-score assumption included."""
    rigour = result.get("upper_rigour") or {}
    keys = list(heuristic_values(result))
    keys += [k for k in _monotone(result) if rigour.get(k) == "heuristic" and k not in keys]
    order = list(result.get("upper") or {})
    return sorted(keys, key=lambda k: order.index(k) if k in order else 99)


def _path(result: dict, key: str) -> str:
    if key in (result.get("reduced_game") or {}):
        return f"reduced_game.{key}"
    return f"monotone_score.{key}" if key in _monotone(result) else f"upper.{key}"


def heuristic_fields(result: dict) -> list[str]:
    """Dotted paths of every heuristic number in the result (upper values and the GDP fit)."""
    fields = [_path(result, k) for k in heuristic_upper_keys(result)]
    if result.get("lower"):
        fields.append("lower.gdp_fit")
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
        # a coin score's value bounds the finite base with a coin released with each run
        # (`accounting.coin_search`): named so wherever a value is said to sit below it
        coin = (result.get("attack") or {}).get("method") == "coin_search"
        what = "a lower bound for the base with a released coin" if coin else "a lower bound"
        out.append((float(att), f"the attack value {att:.4f} ({what})"))
    eps_l = valid_lower(result)
    if eps_l is not None:
        low = result["lower"]
        rule = f"{low['threshold_rule']}, {percent(low['confidence'])}"
        out.append((eps_l, f"the valid eps_L = {eps_l:.4f} ({rule})"))
    return out


def _one_run_epsilon(result: dict) -> float | None:
    """eps_B, or None where K = 0 is possible (a tuning run may then cost less than one run)."""
    rounds = result.get("rounds") or {}
    return None if rounds.get("p_zero") else (result.get("base") or {}).get("epsilon")


def contradictions(result: dict) -> dict[str, str]:
    """{key: one-line reason} for each heuristic value below a valid lower value or eps_B."""
    eps_b = _one_run_epsilon(result)
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


def honesty_fields(result: dict) -> dict[str, Any]:
    """What result.json adds: `heuristic` (dotted paths) and `contradicted` ({key: reason})."""
    labels = result_labels(result)
    return {"heuristic": list(labels.heuristic), "contradicted": dict(labels.contradicted)}


@dataclass(frozen=True)
class AssumedValues:
    """Values that hold only under an assumption: one block, one line in every table.

    `section`: result.json's section ("monotone_score" or "reduced_game"); `assumption`: the
    assumption in one line; `values` {key: eps or None}; `rigour` {key: label}; `below`: the
    valid lower values for any score that some value of the block sits below (one phrase
    each; for `reduced_game` those values are also `ResultLabels.contradicted`)."""

    section: str
    assumption: str
    values: Mapping[str, float | None]
    rigour: Mapping[str, str]
    below: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResultLabels:
    """Every label of a result, computed once (`result_labels`); the writers (terminal table,
    report.md, result.json's `heuristic` and `contradicted`, sweep tables, plots) only read it.

    `upper` {key: (eps or None, rigour, theorem)}: the keys of `upper` that are not under an
    assumption (bounds for any score); `assumed`: the blocks under an assumption;
    `heuristic`: dotted paths of every heuristic number, `heuristic_keys` their registry keys
    (`heuristic_upper_keys`); `contradicted` {key: reason};
    `lower_values`: the valid lower values ((eps, phrase)); `interval`: result.json's
    interval (None before one is computed)."""

    upper: Mapping[str, tuple[float | None, str, str]]
    assumed: tuple[AssumedValues, ...]
    heuristic: tuple[str, ...]
    contradicted: Mapping[str, str]
    lower_values: tuple[tuple[float, str], ...]
    interval: Mapping[str, Any] | None
    heuristic_keys: tuple[str, ...] = ()
    monotone_keys: tuple[str, ...] = ()

    def block(self, section: str) -> AssumedValues | None:
        """The block of this result.json section, or None."""
        return next((b for b in self.assumed if b.section == section), None)


def _block(result, section, assumption, values, lows) -> AssumedValues:
    rigour = result.get("upper_rigour") or {}
    below = []
    eps_b = _one_run_epsilon(result)
    if section == "reduced_game" and eps_b is not None:  # contradicted too, as `contradictions`
        lows = (*lows, (float(eps_b), f"eps_B = {eps_b:.4f} of one run"))
    for low, why in lows:
        keys = [k for k, v in values.items() if v is not None and v < low]
        if keys:
            below.append(f"{', '.join(keys)} below {why}")
    labels = {k: rigour.get(k, "unlabelled") for k in values}
    return AssumedValues(section, assumption, dict(values), labels, tuple(below))


def result_labels(result: dict) -> ResultLabels:
    """The labels of a result document (module docstring; `ResultLabels`)."""
    rigour = result.get("upper_rigour") or {}
    sources = result.get("upper_sources") or {}
    lows = tuple(lower_values(result))
    monotone = _monotone(result)
    reduced = result.get("reduced_game") or {}
    assumed = []
    if monotone:
        line = (result.get("monotone_score") or {}).get("assumption") or "a monotone score"
        assumed.append(_block(result, "monotone_score", line, monotone, lows))
    if reduced:
        assumed.append(_block(result, "reduced_game", REDUCED_GAME_ASSUMPTION, reduced, lows))
    upper = {
        k: (v, rigour.get(k, "unlabelled"), sources.get(k) or "")
        for k, v in (result.get("upper") or {}).items()
        if k not in monotone and k not in reduced
    }
    return ResultLabels(
        upper=upper,
        assumed=tuple(assumed),
        heuristic=tuple(heuristic_fields(result)),
        contradicted=contradictions(result),
        lower_values=lows,
        interval=result.get("interval"),
        heuristic_keys=tuple(heuristic_upper_keys(result)),
        monotone_keys=tuple(monotone),
    )
