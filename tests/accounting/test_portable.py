"""auditsel.accounting.portable: exp, log, expm1, log1p, logaddexp and logsumexp within the accuracy its
docstring states (against mpmath at 200 bits, inputs and results converted exactly), in float64
and longdouble, with numpy's special values; that they give the same bits on another vector
unit is tests/accounting/test_cpu_profiles.py's (slow) check."""

import math

import mpmath
import numpy as np
import pytest

from auditsel.accounting import portable as pm

mpmath.mp.prec = 200
DTYPES = [np.float64, np.longdouble]


def exact(v) -> mpmath.mpf:
    """A float64 or longdouble value as an mpf, exactly (hi + lo, both float64)."""
    hi = np.float64(v)
    return mpmath.mpf(float(hi)) + mpmath.mpf(float(np.float64(np.longdouble(v) - hi)))


def worst_ulps(fun, ref, xs) -> float:
    u = float(np.finfo(xs.dtype).eps) / 2
    tiny = float(np.finfo(xs.dtype).tiny)
    worst = 0.0
    for x, y in zip(xs, np.atleast_1d(fun(xs))):
        t = ref(exact(x))
        if abs(t) > tiny:
            worst = max(worst, float(abs((exact(y) - t) / t)) / u)
    return worst


def grid(dtype, lo, hi, n=300, log=False):
    rng = np.random.default_rng(7)
    x = 10.0 ** rng.uniform(lo, hi, n) if log else rng.uniform(lo, hi, n)
    if dtype is np.longdouble:  # bits below float64's
        x = x.astype(np.longdouble) * (1 + np.longdouble(rng.uniform(-1, 1, n)) * 2.0**-55)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_accuracy_against_mpmath(dtype):
    cases = [
        (pm.exp, mpmath.exp, grid(dtype, -700, 700), 4),
        (pm.exp, mpmath.exp, grid(dtype, -1, 1), 4),
        (pm.expm1, mpmath.expm1, grid(dtype, -0.5, 0.5), 8),
        (pm.expm1, mpmath.expm1, grid(dtype, -1e-9, 1e-9), 8),
        (pm.expm1, mpmath.expm1, grid(dtype, -30, 30), 8),
        (pm.log, mpmath.log, grid(dtype, -300, 300, log=True), 4),
        (pm.log, mpmath.log, grid(dtype, 0.5, 2), 4),
        (pm.log, mpmath.log, grid(dtype, 1 - 1e-6, 1 + 1e-6), 4),
        (pm.log1p, mpmath.log1p, grid(dtype, -0.999, 1), 8),
        (pm.log1p, mpmath.log1p, grid(dtype, -1e-9, 1e-9), 8),
        (pm.log1p, mpmath.log1p, grid(dtype, -20, 20, log=True), 8),
    ]
    for fun, ref, xs, limit in cases:
        assert fun(xs).dtype == dtype
        worst = worst_ulps(fun, ref, xs)
        assert worst <= limit, (fun.__name__, float(xs.min()), float(xs.max()), worst)


@pytest.mark.parametrize("dtype", DTYPES)
def test_logaddexp_and_logsumexp(dtype):
    rng = np.random.default_rng(3)
    a, b = (rng.uniform(-50, 50, 200).astype(dtype) for _ in range(2))
    u = float(np.finfo(dtype).eps) / 2
    for x, y, got in zip(a, b, pm.logaddexp(a, b)):
        t = mpmath.log(mpmath.exp(exact(x)) + mpmath.exp(exact(y)))
        assert abs(exact(got) - t) <= 8 * u * abs(t) + 4 * u
    rows = rng.uniform(-30, 30, (5, 40)).astype(dtype)
    rows[2] = -np.inf
    got = pm.logsumexp(rows, axis=1)
    assert got[2] == -np.inf
    for row, g in zip(rows[[0, 1, 3, 4]], got[[0, 1, 3, 4]]):
        t = mpmath.log(mpmath.fsum(mpmath.exp(exact(v)) for v in row))
        assert abs(exact(g) - t) <= 64 * u * abs(t)


def test_special_values_as_numpy():
    with np.errstate(all="ignore"):
        x = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, 710.0, -746.0, -1.0, -2.0, 5e-324])
        for name in ("exp", "log", "expm1", "log1p"):
            np.testing.assert_array_equal(getattr(pm, name)(x), getattr(np, name)(x), err_msg=name)
        np.testing.assert_array_equal(
            pm.logaddexp([-np.inf, 1.0, np.inf, -np.inf], [-np.inf, -np.inf, 3.0, np.inf]),
            np.logaddexp([-np.inf, 1.0, np.inf, -np.inf], [-np.inf, -np.inf, 3.0, np.inf]),
        )
    # scalars in, numpy scalars out (as numpy's ufuncs); subnormal results rounded once
    assert isinstance(pm.exp(1.0), np.float64)
    assert abs(pm.exp(1.0) - math.e) <= 4 * np.spacing(math.e)
    assert pm.exp(-740.0) == math.exp(-740.0)
