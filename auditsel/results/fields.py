"""The result document's fields: what result.json says of the upper side, the lower side and
the interval, read by every writer (`auditsel run`, `audit_pipeline`, `audit_protocol`).

Contract: `upper_panel` (the bound `Panel` and the curves the figures draw, cached per
process), `upper_fields` (result.json's upper-side fields, docs/reference/result-json.md),
`lower_fields` (its `lower`) and `result_interval` (its `interval`), each as its docstring says;
ends of the interval that cross are an internal error in `auditsel.accounting.interval`, never
printed.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import replace
from typing import Any, TypeAlias

import numpy as np

from auditsel.accounting.exact import privacy_curve
from auditsel.accounting.interval import IntervalRecord, interval_from
from auditsel.accounting.panel import Panel, panel
from auditsel.accounting.registry import ASSUMPTION
from auditsel.auditing.lower import LowerBound
from auditsel.errors import percent
from auditsel.numerics import FloatArray
from auditsel.results.heuristics import valid_lower
from auditsel.roles import MechanismPair, Winner
from auditsel.rounds import RoundsLaw
from auditsel.selection import winner_law

#: (eps grid, delta of the released winner's curve there, the attack's certified lower curve
#: there): `upper_panel`'s second part (None where there is no such curve)
UpperCurve: TypeAlias = tuple[FloatArray, FloatArray | None, FloatArray | None]
CURVE_POINTS = 60
CURVE_DELTAS = (1e-10, 1e-8, 1e-6, 1e-4, 1e-3, 1e-2)
#: (base, rounds, delta, with_curves, winner) -> upper_panel's value, per process
_UPPER: dict[tuple[object, ...], tuple[Panel, UpperCurve]] = {}
_UPPER_LOCK = threading.Lock()


def upper_panel(
    base: MechanismPair,
    rounds: RoundsLaw,
    delta: float,
    with_curves: bool = True,
    winner: Winner | None = None,
) -> tuple[Panel, UpperCurve]:
    """(the bound `Panel` of `auditsel.accounting.panel`, with the curves at CURVE_DELTAS when
    with_curves; (eps grid, delta of the released winner's curve, the attack's certified lower
    curve or None)). The winner's curve is exact where the base's reduction is, else the
    heuristic reduced game's; None for a base with no reduced game (a dp_accounting event).

    Cached per setting (the pair and the law of K are frozen data; the bounds and the attack
    are functions of them and delta alone): a sweep over game fields, or a second run in the
    same process, computes them once. Each call gets its own deep copy."""
    reduced = base.reduced()
    if winner is None and reduced is not None:
        winner = winner_law(reduced, rounds)
    key = upper_key(base, rounds, delta, with_curves, winner)
    got = None if key is None else _UPPER.get(key)
    if got is None:
        got = remember(key, _upper_panel(base, rounds, delta, with_curves, winner))
    return copy.deepcopy(got)


def upper_key(
    base: MechanismPair, rounds: RoundsLaw, delta: float, with_curves: bool, winner: Winner | None
) -> tuple[object, ...] | None:
    """upper_panel's cache key, or None for a pair or law that is not hashable."""
    try:
        key = (base, rounds, float(delta), bool(with_curves), winner)
        hash(key)
    except TypeError:  # a pair or law that is not hashable: computed afresh
        return None
    return key


def remember(
    key: tuple[object, ...] | None, value: tuple[Panel, UpperCurve]
) -> tuple[Panel, UpperCurve]:
    if key is not None:
        with _UPPER_LOCK:
            if len(_UPPER) >= 64:
                _UPPER.clear()
            _UPPER[key] = value
    return value


def _upper_panel(
    base: MechanismPair, rounds: RoundsLaw, delta: float, with_curves: bool, winner: Winner | None
) -> tuple[Panel, UpperCurve]:
    bounds = panel(base, rounds, delta, curve_deltas=CURVE_DELTAS if with_curves else None)
    eps_max = max(
        v
        for v in [bounds.value("exact"), bounds.attack["epsilon"], bounds.base["epsilon"], 1.0]
        if v is not None
    )
    eps_grid = np.linspace(0.0, 1.5 * eps_max, CURVE_POINTS)
    attack_curve = None
    if bounds.attack_value is not None and bounds.attack_value.method != "exact":
        try:
            attack_curve = bounds.attack_value.delta(eps_grid)
        except ValueError:  # an attack value that keeps no certified curve
            attack_curve = None
    winner_delta = None if winner is None else privacy_curve(winner, eps_grid)
    return bounds, (eps_grid, winner_delta, attack_curve)


def upper_fields(
    base: MechanismPair,
    rounds: RoundsLaw,
    bounds: Panel,
    curve: UpperCurve,
    kind: str | None = None,
) -> dict[str, Any]:
    """result.json's fields of the upper side: base, rounds, upper (bounds for any score, with
    every key's rigour, sources, notes), lower (None: filled by the game), monotone_score (the
    reduced game's values where the reduction is exact, under [XWW24]'s monotone-score
    assumption, stated in its `assumption` line), reduced_game (heuristic values of a base
    whose reduction is not exact), attack, exact_curve (the reduced game's exact curve, also
    under the assumption; or reduced_game_curve), attack_curve and, when computed,
    upper_curves, monotone_score_curves."""
    fields: dict[str, Any] = {
        "base": {"kind": kind, **bounds.base},
        "rounds": rounds.describe(),
        "upper": bounds.upper,
        "lower": None,
        "upper_rigour": bounds.labels,
        "upper_sources": bounds.sources,
        "notes": list(bounds.notes),
    }
    if bounds.monotone_score:  # the reduced game's values: a monotone score assumed
        fields["monotone_score"] = {**bounds.monotone_score, "assumption": ASSUMPTION}
    if bounds.reduced_game:  # heuristic values of a base whose reduction is not exact
        fields["reduced_game"] = bounds.reduced_game
    fields["attack"] = {k: v for k, v in bounds.attack.items() if k != "curve"}
    if rounds.p_zero > 0:  # K = 0 possible: the release may be the fixed output
        fields["rounds"]["p_zero"] = rounds.p_zero
    fields["base"].update(base.describe())  # the pair's parameters (discrete: p, q)
    winner_curve = (
        None if curve[1] is None else {"eps": curve[0].tolist(), "delta": curve[1].tolist()}
    )
    if base.reduction_is_exact or winner_curve is None:
        fields["exact_curve"] = winner_curve
    else:  # the reduced game's curve is a heuristic here: not named exact
        fields["exact_curve"] = None
        fields["reduced_game_curve"] = winner_curve
    if curve[2] is not None:
        fields["attack_curve"] = {"eps": curve[0].tolist(), "delta": curve[2].tolist()}
    if bounds.curves is not None:
        fields["upper_curves"] = bounds.curves
        if bounds.reduced_game_curves and len(bounds.reduced_game_curves) > 1:
            fields["reduced_game_curves"] = bounds.reduced_game_curves
        if bounds.monotone_score_curves and len(bounds.monotone_score_curves) > 1:
            fields["monotone_score_curves"] = bounds.monotone_score_curves
        fields["attack"]["curve"] = {"delta": list(CURVE_DELTAS), "eps": bounds.attack["curve"]}
    return fields


def lower_fields(
    bound: LowerBound, game: str, proxy: str, seed: int, streamed: bool
) -> dict[str, Any]:
    """result.json's `lower`: the audit's LowerBound and what was played."""
    played = {"game": game, "proxy": proxy, "seed": seed, "streamed": bool(streamed)}
    return {**bound.to_dict(), **played}


def result_interval(result: dict[str, Any], bounds: Panel) -> IntervalRecord:
    """result.json's `interval`: [the attack value or a valid eps_L, the tightest rigorous
    bound] (`accounting.interval`)."""
    # the attack value, or 0
    lows: list[tuple[float | None, str]] = [(bounds.interval.lower, bounds.interval.lower_source)]
    eps_l = valid_lower(result)
    if eps_l is not None:
        low = result["lower"]
        source = (
            f"valid eps_L ({low['threshold_rule']} rule, {percent(low['confidence'])} "
            f"Clopper-Pearson, {low['trials']:,} games)"
        )
        lows.append((eps_l, source))
    return interval_from(lows, [(bounds.interval.upper, bounds.interval.upper_source)]).to_dict()


def is_cached(key: tuple[object, ...] | None) -> bool:
    """Whether upper_panel's value for `key` (`upper_key`) is already in this process."""
    return key is not None and key in _UPPER


def computed_upper(
    base: MechanismPair, rounds: RoundsLaw, delta: float, with_curves: bool, winner: Winner | None
) -> tuple[Panel, UpperCurve]:
    """upper_panel's value computed afresh (not cached), without the attack's `AttackValue`
    (`Panel.attack_value` None: its score search keeps tables of tens of MB that a run reads
    only to draw the attack's curve, which the value already holds): what a thread beside a
    game computes."""
    bounds, curve = _upper_panel(base, rounds, delta, with_curves, winner)
    return replace(bounds, attack_value=None), curve
