"""The layered profile bound read per direction: each direction's own privacy profile and the
pair's own post-processing region (proof in docs/explanation/bounds.md, "The two-sided layered
bound").

Contract. `two_sided_epsilon(pair, law, delta)` is an upper bound on the tuning run's eps at
delta for any score, assuming only the base pair's two directional privacy profiles: for a
`DpsgdBase`, dp_accounting's pessimistic (connect-the-dots) PLD of each direction (remove and
add, each the smaller of the 1e-3 grid's and the finer `mechanisms.profile_step` grid's); for a
`FiniteOutputBase`, the exact hockey sticks.

The layered bound (`profile.layered_delta`) reads one profile delta(e) = max over both
directions, for Psi and for the region of [KRW24] Theorem 4.1. Here the region is cut by
q <= e^e q' + delta_QP(e) (a set) and 1 - q' <= e^e (1 - q) + delta_PQ(e) (its complement), and
the direction Q over P reads dt_Q(e) = sup_T Q(T) - e^e P(T): delta_QP(e) for e >= 0 and
1 - e^e + e^e delta_PQ(-e) for e < 0. The proof is unchanged, so each direction is bounded with
its own pieces (never above the layered bound) and delta_A is the larger of the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np
from numpy.typing import ArrayLike

from auditsel.accounting.profile import (
    BaseProfile,
    Layers,
    envelope_region,
    layered_sum,
    layers,
    smallest_eps,
)
from auditsel.mechanisms import (
    PLD_DISCRETIZATION,
    DpsgdBase,
    FiniteOutputBase,
    hockey_stick_finite,
    pld_tails,
    profile_step,
)
from auditsel.numerics import FloatArray, check_deltas
from auditsel.roles import AccountedPair
from auditsel.rounds import RoundsLaw

Delta = Callable[[np.ndarray], np.ndarray]


def _pld_direction(sigma: float, steps: int, tau: float, which: int) -> Delta:
    """delta(e) of one direction of the pessimistic PLD (0 remove, 1 add), the smaller of the
    1e-3 grid's and the finer grid's (both upper bounds), e >= 0."""
    grids = {PLD_DISCRETIZATION, profile_step(sigma, steps, tau)}
    tails = [pld_tails(sigma, steps, tau, g) for g in sorted(grids)]

    def delta(e: np.ndarray) -> np.ndarray:
        e = np.asarray(e, dtype=float)
        best = np.full(e.shape, np.inf)
        for tail in tails:
            losses, upper, lower, inf_mass = tail[min(which, len(tail) - 1)]
            k = len(losses) - np.searchsorted(losses, e, side="right")
            with np.errstate(over="ignore", invalid="ignore"):
                d = upper[k] - np.exp(e) * lower[k]
            # no finite loss above e (k = 0): the +inf mass alone (e^e * 0 is nan for huge e)
            best = np.minimum(best, np.where(k == 0, inf_mass, d))
        return np.clip(best, 0.0, 1.0)

    return delta


def directional_profiles(pair: AccountedPair) -> tuple[Delta, Delta, np.ndarray]:
    """(delta_QP, delta_PQ, eps grid) of the pair: Q over P and P over Q, for e >= 0."""
    if isinstance(pair, DpsgdBase):
        args = (pair.noise_multiplier, pair.steps, pair.sample_rate)
        return _pld_direction(*args, 0), _pld_direction(*args, 1), pair.profile_grid()
    if isinstance(pair, FiniteOutputBase):
        p, q = pair.law(0), pair.law(1)
        return (
            lambda e: np.asarray(hockey_stick_finite(p, q, e), dtype=float),
            lambda e: np.asarray(hockey_stick_finite(q, p, e), dtype=float),
            pair.profile_grid(),
        )
    raise TypeError(f"two_sided supports DP-SGD and finite-output bases, not {type(pair)}")


def _tilde(d_this: Delta, d_other: Delta, e: np.ndarray) -> np.ndarray:
    """sup_T Q(T) - e^e P(T): d_this(e) for e >= 0, 1 - e^e + e^e d_other(-e) for e < 0."""
    e = np.asarray(e, dtype=float)
    pos = np.asarray(d_this(np.maximum(e, 0.0)), dtype=float)
    with np.errstate(over="ignore"):
        neg = -np.expm1(e) + np.exp(np.minimum(e, 0.0)) * np.asarray(
            d_other(np.maximum(-e, 0.0)), dtype=float
        )
    return np.clip(np.where(e >= 0, pos, neg), 0.0, 1.0)


def _setup(pair: AccountedPair, law: RoundsLaw) -> list[tuple[Layers, Delta, Delta]]:
    """Per direction, its layers (the region cut by its own set and complement profiles,
    `profile.envelope_region`) and its two profiles."""
    d_qp, d_pq, grid = directional_profiles(pair)
    out = []
    for d_this, d_other in ((d_qp, d_pq), (d_pq, d_qp)):
        region = envelope_region(grid, d_this(grid), d_other(grid))
        profile = BaseProfile(d_this, lambda d: math.inf, grid, region)
        out.append((layers(profile, law), d_this, d_other))
    return out


def two_sided_epsilon(
    pair: AccountedPair, law: RoundsLaw, delta: ArrayLike, *, hi: float = 1e3
) -> FloatArray:
    """The smallest eps (bisection to 1e-6 relative, the upper end kept) with the bound <=
    delta; inf at delta = 0 and where `hi` does not get there."""
    deltas = check_deltas(delta)
    out = np.full(deltas.shape, math.inf)
    if not np.any(deltas > 0):
        return out
    setup = _setup(pair, law)
    value = lambda e: max(layered_sum(lay, partial(_tilde, a, b), e) for lay, a, b in setup)
    for i, d in enumerate(deltas.tolist()):
        if d > 0 and value(hi) <= d:
            out[i] = smallest_eps(value, d, 0.0, hi)
    return out
