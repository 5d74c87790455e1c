"""Small numerical kernels shared by the layers above (only `auditsel.errors` imported): the one
check of a delta argument (`check_deltas`: docs/explanation/architecture.md, "a delta outside
[0, 1) is a ConfigError in every function"); a scalar root, a golden-section minimum and
vectorised bracketed Newton roots (`bisect`, `golden_min`, `newton_bracketed`: the games'
inverse cdfs) for the code on the path of every `auditsel run`, where importing scipy.optimize
takes a third of a second; `logsumexp`, as scipy.special's but without its 0.2-0.4 ms of
overhead a call (the bounds call it on many small arrays: finite Renyi divergences).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from auditsel.errors import ConfigError, shown

#: a float array: what the vectorised functions return (numpy hands back a numpy scalar, which
#: behaves as a 0-d array, where the input was a scalar)
FloatArray: TypeAlias = NDArray[np.float64]
#: an integer array (draws of K, counts)
IntArray: TypeAlias = NDArray[np.int64]


def check_deltas(delta: object, field: str = "delta") -> FloatArray:
    """delta (scalar or array) as a 1-D float array, each in [0, 1), else a ConfigError naming
    `field` (nan, inf, strings and bools included)."""
    try:
        if isinstance(delta, (bool, str, bytes)) or delta is None:
            raise TypeError
        deltas = np.atleast_1d(np.asarray(delta, dtype=float)).ravel()
    except (TypeError, ValueError):
        raise ConfigError(field, f"must be a number in [0, 1), got {shown(delta)}") from None
    bad = ~((deltas >= 0) & (deltas < 1))
    if np.any(bad):
        raise ConfigError(field, f"must be in [0, 1), got {shown(deltas[bad][0])}")
    return deltas


def logsumexp(a: ArrayLike) -> FloatArray | float:
    """log(sum(exp(a), axis=-1)); -inf for a row of -inf values, +inf if any entry is +inf."""
    a = np.asarray(a, dtype=float)
    top = np.max(a, axis=-1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(a - safe), axis=-1)) + safe[..., 0]
    out = np.where(np.isposinf(top[..., 0]), np.inf, out)
    return out if out.ndim else float(out)


def bisect(
    f: Callable[[float], float],
    lo: float,
    hi: float,
    xtol: float = 1e-12,
    rtol: float = 1e-12,
    maxiter: int = 400,
) -> float:
    """A root of the scalar function f in [lo, hi], f(lo) and f(hi) of opposite signs (or 0).

    Bisection until the bracket is below xtol + rtol `|x|` (scipy's brentq criterion): ~50
    evaluations, no smoothness assumed, and no scipy.optimize import (a third of a second of
    start-up, which the command line pays on every run).
    """
    f_lo, f_hi = f(lo), f(hi)
    if f_lo == 0:
        return float(lo)
    if f_hi == 0:
        return float(hi)
    if (f_lo > 0) == (f_hi > 0):
        raise ValueError(f"bisect: f({lo}) = {f_lo} and f({hi}) = {f_hi} have the same sign")
    for _ in range(maxiter):
        mid = 0.5 * (lo + hi)
        if hi - lo <= xtol + rtol * abs(mid):
            return mid
        f_mid = f(mid)
        if f_mid == 0:
            return mid
        if (f_mid > 0) == (f_lo > 0):
            lo, f_lo = mid, f_mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def golden_min(
    f: Callable[[Any], Any],
    left: ArrayLike,
    right: ArrayLike,
    steps: int = 60,
    xtol: float = 0.0,
) -> tuple[Any, Any]:
    """(x, f(x)): golden-section search for a minimum of f on [left, right], `steps` shrinks of
    the bracket by 0.618 each (60 steps: a bracket 3e-13 of the original), or fewer: it stops
    once every bracket is at most `xtol` wide (xtol = 0: all `steps`).

    Floats `left`, `right`: f is a scalar function and (x, f(x)) are floats. Arrays: a batch of
    searches, entry i on [left_i, right_i], and f maps an array of points (entry i's point at i)
    to their values in one call; each entry follows the same steps as its own scalar search (the
    same arithmetic: the same x and f(x) bit for bit when f gives the same values). The value
    returned is a real evaluation of f, never an extrapolation."""
    if np.ndim(left) == 0 and np.ndim(right) == 0:
        x, fx = golden_min(
            lambda t: np.array([f(float(t[0]))], dtype=float),
            np.array([left], dtype=float),
            np.array([right], dtype=float),
            steps,
            xtol,
        )
        return float(x[0]), float(fx[0])
    g = (math.sqrt(5) - 1) / 2
    lo, hi = np.broadcast_arrays(np.asarray(left, dtype=float), np.asarray(right, dtype=float))
    lo, hi = lo.copy(), hi.copy()
    c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    fc, fd = (np.asarray(f(c), dtype=float), np.asarray(f(d), dtype=float))
    for _ in range(steps):
        if xtol > 0 and np.all(hi - lo <= xtol):
            break
        down = fc < fd  # the minimum is left of d: [lo, d] is kept, a new c is evaluated
        hi, lo = np.where(down, d, hi), np.where(down, lo, c)
        new = np.where(down, hi - g * (hi - lo), lo + g * (hi - lo))
        f_new = np.asarray(f(new), dtype=float)
        c, d, fc, fd = (
            np.where(down, new, d),
            np.where(down, c, new),
            np.where(down, f_new, fd),
            np.where(down, fc, f_new),
        )
    take_c = fc < fd
    return np.where(take_c, c, d), np.where(take_c, fc, fd)


def newton_bracketed(
    fun: Callable[[FloatArray], tuple[FloatArray, FloatArray]],
    lo: ArrayLike,
    hi: ArrayLike,
    *,
    increasing: bool,
    iterations: int = 60,
    xtol: float = 1e-13,
) -> FloatArray:
    """x in [lo, hi] (arrays) with f(x) = 0, entry by entry, where `fun(x) -> (f, df)` gives f
    and its derivative, f monotone (`increasing` or decreasing) with its root in [lo, hi].

    Each step keeps the bracket (lo moves up to x where f(x) is on the side of f(lo)) and takes the
    Newton step where it lands inside the bracket, else the bracket's midpoint; it stops when
    every bracket or every step is below `xtol (1 + |x|)`, or after `iterations` steps."""
    lo = np.array(lo, dtype=float)
    hi = np.array(hi, dtype=float)
    x = lo.copy()
    for _ in range(iterations):
        f, df = fun(x)
        left = (f < 0) if increasing else (f > 0)  # the root is above x
        lo = np.where(left, x, lo)
        hi = np.where(left, hi, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = -f / df
        nxt = x + step
        ok = np.isfinite(nxt) & (nxt >= lo) & (nxt <= hi)
        x = np.where(ok, nxt, 0.5 * (lo + hi))
        scale = xtol * (1 + np.abs(x))
        if np.all((hi - lo <= scale) | (ok & (np.abs(step) <= scale)) | (f == 0)):
            break
    return x
