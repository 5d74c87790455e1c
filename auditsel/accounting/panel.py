"""The upper-bound panel: every registered upper bound (`accounting.bounds.BOUNDS`) for one
setting, as a loop over the registry.

    panel(base, law, delta, curve_deltas=None)
                                   -> {"base": base_info, "upper": {key: eps or None},
                                       "labels": per-key rigour for this pair, "sources": ...,
                                       "notes": [...], "seconds": {...},
                                       "curves": as panel_curves, when curve_deltas is given}
    panel_curves(base, law, deltas) -> {"delta": [...], key: [eps or None per delta]}: each
                                       bound's privacy curve from one computation per bound
    upper_bounds(base, law, delta) -> panel(...)["upper"]
    base_info(base, delta)         -> {"epsilon": eps_B, "mu": mu or None, "mu_gdp": ... or None}

`base` is any mechanism pair of `auditsel.mechanisms` (Gaussian, finite-output, DP-SGD) or
`auditsel.events` (LaplaceBase, EventBase), or a dp_accounting DpEvent (`events.as_pair`); what
a bound needs from it, it asks the pair (docs/explanation/architecture.md). Keys, results,
rigour and
citations: `accounting.bounds` (stated there once).
"""

from __future__ import annotations

import math
import time

import numpy as np

from auditsel.accounting.bounds import BOUND_KEYS, BOUNDS
from auditsel.accounting.profile import base_profile
from auditsel.events import as_pair
from auditsel.numerics import check_deltas
from auditsel.protocols import MechanismPair
from auditsel.rounds import RoundsLaw

__all__ = [
    "BOUND_KEYS",
    "BOUND_LABELS",
    "upper_bounds",
    "base_info",
    "bound_labels",
    "panel",
    "panel_curves",
]

#: key -> {"rigour": the default rigour, "citation": the result it implements} (from the registry)
BOUND_LABELS = {b.key: {"rigour": b.rigour_default, "citation": b.citation} for b in BOUNDS}


def bound_labels(base) -> dict:
    """Per-key rigour for this pair ('rigorous' or 'heuristic')."""
    base = as_pair(base)
    return {b.key: b.rigour(base) for b in BOUNDS}


def _finite_or_none(x):
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def base_info(base, delta: float) -> dict:
    """eps_B of one run at delta, mu (reduced game) and mu_GDP where they exist."""
    base = as_pair(base)
    return {"epsilon": _finite_or_none(base.epsilon(delta)), "mu": base.mu, "mu_gdp": base.mu_gdp}


def panel(base: MechanismPair, law: RoundsLaw, delta: float, *, curve_deltas=None) -> dict:
    """All bounds for one setting, with base info, per-pair labels, sources and timings; with
    `curve_deltas`, also "curves": each bound's eps at those deltas (`panel_curves`), from the
    same single computation per bound as the value at `delta`."""
    base = as_pair(base)
    delta = float(check_deltas(delta)[0])
    extra = [] if curve_deltas is None else check_deltas(curve_deltas, "curve_deltas").tolist()
    deltas = np.array([delta] + extra)
    notes: list[str] = []
    seconds: dict[str, float] = {}

    def timed(key, fn):
        t = time.perf_counter()
        try:
            return fn()
        finally:
            seconds[key] = time.perf_counter() - t

    info = timed("base", lambda: base_info(base, delta))
    prof = timed("base_profile", lambda: base_profile(base))
    upper: dict[str, float | None] = {}
    sources: dict[str, str | None] = {}
    curves: dict[str, list] = {"delta": extra}
    for b in BOUNDS:
        if not b.supports(base, law):
            upper[b.key], sources[b.key], curves[b.key] = None, None, [None] * len(extra)
            continue
        values = timed(b.key, lambda b=b: b.curve(base, law, deltas, prof))
        curves[b.key] = [
            None if b.not_applicable(base, law, d) else _finite_or_none(v)
            for d, v in zip(extra, values[1:])
        ]
        why = b.not_applicable(base, law, delta)
        if why:
            upper[b.key], sources[b.key] = None, None
            notes.append(why)
            continue
        upper[b.key] = float(values[0])
        sources[b.key] = b.source(base, law, delta)
    if base.reduced() is None:
        notes.append(
            "exact and improved_rdp: no reduced game for this base (a dp_accounting event): "
            "the generic and profile bounds come from dp_accounting's RDP and PLD accountants"
        )
    elif not base.reduction_is_exact:
        notes.append(
            "improved_rdp and exact use mu = tau sqrt(N)/sigma ([XWW24] eq. 19), "
            "a large-N approximation when tau < 1: heuristic"
        )
    for k in BOUND_KEYS:
        v = upper[k]
        if v is not None and not math.isfinite(v):
            notes.append(f"{k}: the bound is vacuous (infinite) for this setting")
        upper[k] = _finite_or_none(v)
    out = {
        "base": info,
        "upper": upper,
        "labels": bound_labels(base),
        "sources": sources,
        "notes": notes,
        "seconds": seconds,
    }
    if curve_deltas is not None:
        out["curves"] = curves
    return out


def panel_curves(base, law: RoundsLaw, deltas) -> dict:
    """{"delta": deltas, key: eps of each bound at each delta}: one curve computation per bound
    (None where the bound does not apply or is vacuous)."""
    deltas = check_deltas(deltas, "deltas").tolist()
    return panel(base, law, deltas[0], curve_deltas=deltas)["curves"]


def upper_bounds(base, law: RoundsLaw, delta: float) -> dict:
    """The five bounds of result.json `upper` (None where not applicable or vacuous)."""
    return panel(base, law, delta)["upper"]
