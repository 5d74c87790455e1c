"""exp, log, expm1, log1p, logaddexp and logsumexp with the same bits on every x86-64 machine
(numpy and `auditsel.numerics` imported).

numpy's float64 exp and log dispatch on the CPU: with AVX-512 they run numpy's own vectorised
kernels, without it the C library's scalar ones, and the two round differently in the last
bit. The attack value (`accounting.attack`) computes with these instead: they use only
IEEE-754 basic operations (``+``, ``-``, ``*``, ``/``, each one ufunc call, so no fused
multiply-add), exact scalings (`frexp`, `ldexp`) and `rint`, all correctly rounded or exact, so
their result is the same bits whatever the vector unit, the BLAS or the thread count, in
float64 and in numpy's longdouble (x87 extended precision). They are 10 to 30 times slower than
numpy's exp: meant for the attack's arrays, not for sampling games.

Accuracy (relative, tested against mpmath): exp and log within 4 units in the last place (u)
of the working precision, expm1 and log1p within 8, logaddexp and logsumexp as their parts;
the error budgets that use them (`attack.STEP_REL`, `score_search.LAW_REL`) allow hundreds. Range reduction: exp(x) = 2^k exp(r), r = x - k ln 2 with ln 2 in two parts (the
first with 32 significant bits, so k ln2_hi is exact for abs(k) < 2^21), abs(r) <= ln 2 / 2, and a
Taylor polynomial whose truncation is below u / 8; log(x) = e ln 2 + log(m), m in [1/sqrt 2,
sqrt 2), log(1 + f) = f - s (f - R(s^2)), s = f / (2 + f) (fdlibm's form: the correction is
small against f, so its rounding hardly reaches the result).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache, wraps
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from auditsel.numerics import FloatArray

_LD = np.dtype(np.longdouble)
#: ln 2 to 36 digits (the longdouble split is computed from it)
_LN2_TEXT = "0.693147180559945309417232121458176568"
#: the high part of ln 2 with 32 significant bits (fdlibm's ln2_hi): k ln2_hi is exact
_LN2_HI = math.ldexp(math.floor(math.ldexp(math.log(2.0), 32)), -32)


@lru_cache(maxsize=4)
def _constants(dtype: np.dtype) -> tuple[np.generic, np.generic, np.generic, list, list]:
    """(ln2_hi, ln2_lo, 1/ln2, exp's Taylor coefficients from the top, log's R coefficients
    from the top) in `dtype`: each a correctly rounded quotient of exact integers."""
    t = dtype.type
    hi = t(_LN2_HI)
    # ln 2 - ln2_hi from the decimal digits, rounded once (ln 2 rounded first would put its
    # rounding error, times k, into exp's reduced argument)
    rest = Fraction(Decimal(_LN2_TEXT)) - Fraction(_LN2_HI)
    lo = t(str(Decimal(rest.numerator) / Decimal(rest.denominator)))
    inv = t(1) / (hi + lo)
    terms = 17 if dtype == _LD else 14  # r^n / n! < u / 8 at |r| = ln 2 / 2
    exp_c = [t(1) / t(math.factorial(j)) for j in range(terms, -1, -1)]
    n_log = 15 if dtype == _LD else 12  # z^n / (2n + 1) < u / 8 at z = (3 - 2 sqrt 2)^2
    log_c = [t(2) / t(2 * j + 1) for j in range(n_log, 0, -1)]
    return hi, lo, inv, exp_c, log_c


def _quiet(fun: Callable[..., FloatArray]) -> Callable[..., FloatArray]:
    """Run `fun` with numpy's floating-point warnings off: the special values (overflow to
    inf, underflow to 0, nan in, log of 0 or of a negative) are set explicitly."""

    @wraps(fun)
    def quiet(*args: ArrayLike, **kwargs: int) -> FloatArray:
        with np.errstate(all="ignore"):
            return fun(*args, **kwargs)

    return quiet


def _prepare(x: ArrayLike) -> tuple[np.ndarray, np.dtype]:
    a = np.asarray(x)
    if a.dtype != _LD:
        a = a.astype(np.float64)
    return a, a.dtype


def _done(out: np.ndarray) -> FloatArray:
    """A numpy scalar for a 0-d result (as numpy's ufuncs return), else the array (float64, or
    longdouble for longdouble input: typed FloatArray as numpy's own functions are)."""
    return cast("FloatArray", out[()] if out.ndim == 0 else out)


def _horner(coef: list, x: np.ndarray) -> np.ndarray:
    acc = np.full_like(x, coef[0])
    for c in coef[1:]:
        acc = acc * x
        acc = acc + c
    return acc


def _exp_core(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """exp(a) for finite a in range (no special cases)."""
    hi, lo, inv, exp_c, _ = _constants(dtype)
    k = np.rint(a * inv)
    r = (a - k * hi) - k * lo
    p = _horner(exp_c, r)
    k_int = k.astype(np.int64)
    # two ldexp steps: 2^k alone may leave the range where p 2^k does not (subnormal results)
    half = k_int // 2
    return np.ldexp(np.ldexp(p, half), k_int - half)


@_quiet
def exp(x: ArrayLike) -> FloatArray:
    """e^x elementwise (float64, or longdouble for longdouble input); same bits everywhere."""
    a, dtype = _prepare(x)
    info = np.finfo(dtype)
    big = float(np.log(info.max)) if dtype == _LD else 709.782712893384
    tiny = -big - float(info.nmant) * math.log(2.0) - 2.0
    safe = np.where(np.isfinite(a), np.clip(a, tiny, big), 0.0).astype(dtype)
    out = _exp_core(safe, dtype)
    out = np.where(a > big, np.inf, out)
    out = np.where(a < tiny, 0.0, out)
    out = np.where(np.isnan(a), np.nan, out).astype(dtype)
    return _done(out)


def _log_core(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """log(a) for finite a > 0."""
    hi, lo, _, _, log_c = _constants(dtype)
    m, e = np.frexp(a)
    low = m < np.sqrt(dtype.type(0.5))
    m = np.where(low, m * 2, m)
    e = (e - low).astype(dtype)
    f = m - 1  # exact (Sterbenz)
    s = f / (f + 2)
    z = s * s
    big_r = _horner(log_c, z) * z  # 2 z / 3 + 2 z^2 / 5 + ...
    log_m = f - s * (f - big_r)
    return (e * lo + log_m) + e * hi


@_quiet
def log(x: ArrayLike) -> FloatArray:
    """log(x) elementwise (-inf at 0, nan below); same bits everywhere."""
    a, dtype = _prepare(x)
    ok = np.isfinite(a) & (a > 0)
    out = _log_core(np.where(ok, a, 1.0).astype(dtype), dtype)
    out = np.where(a == 0, -np.inf, out)
    out = np.where(a == np.inf, np.inf, out)
    out = np.where((a < 0) | np.isnan(a), np.nan, out).astype(dtype)
    return _done(out)


@_quiet
def expm1(x: ArrayLike) -> FloatArray:
    """e^x - 1 elementwise, accurate near 0 (the Taylor series on abs(x) <= ln 2 / 2)."""
    a, dtype = _prepare(x)
    _, _, _, exp_c, _ = _constants(dtype)
    small = np.abs(a) <= 0.34657359027997264
    r = np.where(small, a, 0.0).astype(dtype)
    near = _horner(exp_c[:-1], r) * r  # x (1 + x/2 + x^2/6 + ...)
    far = np.asarray(exp(np.where(small, 0.0, a).astype(dtype))) - 1
    out = np.where(small, near, far).astype(dtype)
    return _done(out)


@_quiet
def log1p(x: ArrayLike) -> FloatArray:
    """log(1 + x) elementwise, accurate near 0: log(w) x / (w - 1) with w = 1 + x rounded
    (the correction for w's rounding; x itself where w = 1)."""
    a, dtype = _prepare(x)
    w = a + 1
    keep = (w != 1) & np.isfinite(a) & (a > -1)
    ws = np.where(keep, w, 2.0).astype(dtype)
    xs = np.where(keep, a, 1.0).astype(dtype)
    out = np.asarray(log(ws)) * (xs / (ws - 1))
    out = np.where(w == 1, a, out)
    out = np.where(a == -1, -np.inf, out)
    out = np.where(a == np.inf, np.inf, out)
    out = np.where((a < -1) | np.isnan(a), np.nan, out).astype(dtype)
    return _done(out)


@_quiet
def logaddexp(x: ArrayLike, y: ArrayLike) -> FloatArray:
    """log(e^x + e^y) elementwise: max + log1p(e^-abs(x - y)), exact at -inf."""
    a, dtype = _prepare(x)
    b = np.asarray(y).astype(dtype)
    a, b = np.broadcast_arrays(a, b)
    m = np.maximum(a, b)
    with np.errstate(invalid="ignore"):
        d = np.where(np.isfinite(a) & np.isfinite(b), -np.abs(a - b), -np.inf)
    out = m + np.asarray(log1p(np.asarray(exp(d))))
    out = np.where(np.isneginf(a), b, np.where(np.isneginf(b), a, out))
    out = np.where(np.isposinf(m), np.inf, out).astype(dtype)
    return _done(out)


@_quiet
def logsumexp(a: ArrayLike, axis: int = -1) -> FloatArray:
    """log(sum(e^a)) along `axis` (-inf for an all -inf row): the largest entry out, the rest
    summed in numpy's fixed pairwise order."""
    x, dtype = _prepare(a)
    top = np.max(x, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(top), top, 0.0).astype(dtype)
    total = np.sum(np.asarray(exp(x - shift)), axis=axis, keepdims=True)
    out = np.squeeze(np.asarray(log(total)) + shift, axis=axis)
    return _done(np.asarray(out))
