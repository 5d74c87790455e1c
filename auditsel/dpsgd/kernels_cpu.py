"""The CPU implementation of ``kernels``: numba-compiled loops, the same IEEE single-precision
operations in the same order as the contract in ``auditsel.dpsgd.kernels`` states.

Bit-exactness: numba compiles without fast-math flags (no ``fastmath``), so LLVM neither
reassociates nor contracts a product and a sum into a fused multiply-add (LLVM fuses only
operations flagged ``contract``); float32 values stay float32 because every constant is a
``np.float32`` and every operation has float32 operands (a Python float would promote to
float64).

Division: the kernels are compiled with numba's ``error_model="numpy"`` (``ERROR_MODEL``): a
float division is IEEE's (x / 0 is +-inf or NaN, as in C and torch).

The functions are plain Python until ``kernels`` compiles them (``compile_cached``), so that
no cache file is read before ``kernel_cache`` has checked it.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, register_jitable
from numpy.typing import NDArray

# numba's error model of every kernel here (``kernel_cache.compile_cached`` passes it on; kept in
# this file so that a change of it changes the file numba's cache is keyed on)
ERROR_MODEL: Final = "numpy"
LANES = 16  # numbers come in chunks of 4 LANES: one Philox block per lane and word
CH = 256  # examples per chunk of the softmax pass (all classes of a chunk stay in cache)

_MASK = np.uint64(0xFFFFFFFF)
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_S8, _S16, _S23, _S32 = np.uint64(8), np.uint64(16), np.uint64(23), np.uint64(32)
_ONE_U, _EXP_MASK, _MANT, _HALF_EXP = (
    np.uint64(1),
    np.uint64(0xFF),
    np.uint64(0x007FFFFF),
    np.uint64(0x3F000000),
)
_F = np.float32
INV24 = _F(5.9604644775390625e-8)  # 2^-24
_ZERO, _HALF, _ONE, _TWO, _FOUR = _F(0.0), _F(0.5), _F(1.0), _F(2.0), _F(4.0)
_SQRTH = _F(0.707106781186547524)
_LOG_P = (
    _F(7.0376836292e-2),
    _F(-1.1514610310e-1),
    _F(1.1676998740e-1),
    _F(-1.2420140846e-1),
    _F(1.4249322787e-1),
    _F(-1.6668057665e-1),
    _F(2.0000714765e-1),
    _F(-2.4999993993e-1),
    _F(3.3333331174e-1),
)
_LN2_LO, _LN2_HI = _F(2.12194440e-4), _F(0.693359375)
_PIO2 = _F(1.57079632679489662)
_SIN_P = (_F(1.9515295891e-4), _F(8.3321608736e-3), _F(1.6666654611e-1))
_COS_P = (_F(2.443315711809948e-5), _F(1.388731625493765e-3), _F(4.166664568298827e-2))
_LOG2E, _EXP_MIN = _F(1.44269504088896341), _F(87.33654475)
_EXP_P = (
    _F(1.9875691500e-4),
    _F(1.3981999507e-3),
    _F(8.3334519073e-3),
    _F(4.1665795894e-2),
    _F(1.6666665459e-1),
    _F(5.0000001201e-1),
)
_MAGIC = _F(12582912.0)  # 1.5 2^23: n + _MAGIC holds an integer n, |n| < 2^22, in its low bits


@intrinsic
def _bitcast(typingctx, x):
    """The IEEE bits of a float32 as a uint32, or the float32 of a uint32's bits (a bit cast,
    as C's memcpy)."""
    if x == types.float32:
        sig, target = types.uint32(types.float32), ir.IntType(32)
    elif x == types.uint32:
        sig, target = types.float32(types.uint32), ir.FloatType()
    else:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], target)

    return sig, codegen


@intrinsic
def _select(typingctx, c, a, b):
    """c ? a : b for float32 a, b, without a branch: LLVM's `select` (a blend in vector code),
    so the helpers below, inlined into the loops, stay straight-line code that vectorises in
    32-bit lanes."""
    if c != types.boolean or a != types.float32 or b != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.select(args[0], args[1], args[2])

    return types.float32(types.boolean, types.float32, types.float32), codegen


@intrinsic
def _pow2(typingctx, t):
    """2^n as a float32 from its bits, for t = n + 1.5 2^23 (float32) with n an integer in
    [-127, 128]: (bits(t) + 127) << 23 in 32-bit integers. t is exact (|n| < 2^22) and its low
    23 bits are n + 2^22, so the shift leaves ((n + 127) mod 2^9) << 23, C's
    ((uint32_t)(int32_t) n + 127) << 23. For any other t (n out of range, inf, NaN) it is some
    float with a zero mantissa, never a NaN (integer arithmetic, no float-to-int conversion)."""
    if t != types.float32:
        return None

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        k = builder.bitcast(args[0], i32)
        k = builder.shl(builder.add(k, ir.Constant(i32, 127)), ir.Constant(i32, 23))
        return builder.bitcast(k, ir.FloatType())

    return types.float32(types.float32), codegen


@register_jitable(inline="always")
def _log(x):
    """Cephes logf for x in [2^-24, 1] (normal, positive)."""
    b = np.uint64(_bitcast(x))
    e = np.int64((b >> _S23) & _EXP_MASK) - 126
    m = _bitcast(np.uint32((b & _MANT) | _HALF_EXP))  # [0.5, 1)
    small = m < _SQRTH
    fe = _F(e - np.int64(small))
    t = _select(small, m + m, m) - _ONE
    z = t * t
    y = _LOG_P[0]
    y = y * t + _LOG_P[1]
    y = y * t + _LOG_P[2]
    y = y * t + _LOG_P[3]
    y = y * t + _LOG_P[4]
    y = y * t + _LOG_P[5]
    y = y * t + _LOG_P[6]
    y = y * t + _LOG_P[7]
    y = y * t + _LOG_P[8]
    y = (y * t) * z
    y = y + -_LN2_LO * fe
    y = y - _HALF * z
    t = t + y
    return t + _LN2_HI * fe


@register_jitable(inline="always")
def _sincos_2pi(u):
    """(sin 2 pi u, cos 2 pi u) for u in [0, 1) on the 2^-24 grid: the quadrant, then Cephes
    sinf/cosf on [0, pi/4]."""
    t = u * _FOUR
    q = np.floor(t)
    f = t - q
    hi = f > _HALF
    g = _select(hi, _ONE - f, f)
    x = g * _PIO2
    z = x * x
    s = -_SIN_P[0]
    s = s * z + _SIN_P[1]
    s = s * z - _SIN_P[2]
    s = ((s * z) * x) + x
    c = _COS_P[0]
    c = c * z - _COS_P[1]
    c = c * z + _COS_P[2]
    c = (((c * z) * z) - _HALF * z) + _ONE
    sa = _select(hi, c, s)
    ca = _select(hi, s, c)
    sn = _select(q == _ZERO, sa, _select(q == _ONE, ca, _select(q == _TWO, -sa, -ca)))
    cs = _select(q == _ZERO, ca, _select(q == _ONE, -sa, _select(q == _TWO, -ca, sa)))
    return sn, cs


@register_jitable(inline="always")
def _exp(x):
    """Cephes expf for x <= 0 (0 below ln 2^-126; NaN stays NaN). Where the value is used
    (x >= -87.34: fx in [-126, 0]; x NaN: y is NaN, and y times a non-NaN scale is y's NaN) the
    scale is exactly 2^fx, as C's; below, the select gives 0 whatever the scale."""
    fx = np.floor(x * _LOG2E + _HALF)
    r = x - fx * _LN2_HI
    r = r - fx * -_LN2_LO
    z = r * r
    y = _EXP_P[0]
    y = y * r + _EXP_P[1]
    y = y * r + _EXP_P[2]
    y = y * r + _EXP_P[3]
    y = y * r + _EXP_P[4]
    y = y * r + _EXP_P[5]
    y = ((y * z) + r) + _ONE
    scale = _pow2(fx + _MAGIC)  # 2^fx from its bits (fx + _MAGIC exact for |fx| < 2^22)
    return _select(x < -_EXP_MIN, _ZERO, y * scale)


@register_jitable(inline="always")
def _round(x0, x1, x2, x3, k0, k1):
    """One Philox4x32 round on uint32 words held in uint64s (64-bit products)."""
    p0 = _M0 * x0
    p1 = _M1 * x2
    return (p1 >> _S32) ^ x1 ^ k0, p1 & _MASK, (p0 >> _S32) ^ x3 ^ k1, p0 & _MASK


@register_jitable(inline="always")
def _round_keys(k0, k1, ks):
    """ks (10, 2) uint64: the key of each of the 10 rounds (the Weyl sequence of the key)."""
    for t in range(10):
        ks[t, 0] = k0
        ks[t, 1] = k1
        k0 = (k0 + _W0) & _MASK
        k1 = (k1 + _W1) & _MASK


@register_jitable(inline="always")
def _philox(x0, x1, x2, x3, ks):
    """Philox4x32-10 of the counter (x0, x1, x2, x3) under the round keys ks (straight-line
    code, so that a loop over counters vectorises)."""
    x0, x1, x2, x3 = _round(x0, x1, x2, x3, ks[0, 0], ks[0, 1])
    x0, x1, x2, x3 = _round(x0, x1, x2, x3, ks[1, 0], ks[1, 1])
    x0, x1, x2, x3 = _round(x0, x1, x2, x3, ks[2, 0], ks[2, 1])
    x0, x1, x2, x3 = _round(x0, x1, x2, x3, ks[3, 0], ks[3, 1])
    x0, x1, x2, x3 = _round(x0, x1, x2, x3, ks[4, 0], ks[4, 1])
    x0, x1, x2, x3 = _round(x0, x1, x2, x3, ks[5, 0], ks[5, 1])
    x0, x1, x2, x3 = _round(x0, x1, x2, x3, ks[6, 0], ks[6, 1])
    x0, x1, x2, x3 = _round(x0, x1, x2, x3, ks[7, 0], ks[7, 1])
    x0, x1, x2, x3 = _round(x0, x1, x2, x3, ks[8, 0], ks[8, 1])
    return _round(x0, x1, x2, x3, ks[9, 0], ks[9, 1])


def philox_block(
    counter: NDArray[np.uint32], key: NDArray[np.uint32], out: NDArray[np.uint32]
) -> None:
    """One Philox4x32-10 block: out (4,) uint32 from counter (4,) and key (2,) uint32."""
    ks = np.empty((10, 2), np.uint64)
    _round_keys(np.uint64(key[0]), np.uint64(key[1]), ks)
    x = _philox(
        np.uint64(counter[0]),
        np.uint64(counter[1]),
        np.uint64(counter[2]),
        np.uint64(counter[3]),
        ks,
    )
    for w in range(4):
        out[w] = np.uint32(x[w])


@register_jitable
def philox_fill(
    keys: NDArray[np.uint32],
    r0: int,
    r1: int,
    stream: int,
    step0: int,
    normal: bool,
    out: NDArray[np.float32],
) -> None:
    """out[r, i, j] for r0 <= r < r1 (out (R, steps, width) float32): number j of step
    step0 + i of `stream` of run r (keys (R, 2) uint32); number j = 4 LANES c + LANES w + l is
    word w of the block with counter (LANES c + l, step0 + i, stream, 0), or the Box-Muller
    normal of words (0, 1) (w = 0, 1) or (2, 3) (w = 2, 3) of that block."""
    steps, width = out.shape[1], out.shape[2]
    blocks = (width + 4 * LANES - 1) // (4 * LANES) * LANES
    v = np.empty((4, LANES), np.float32)
    ks = np.empty((10, 2), np.uint64)
    c2, c3 = np.uint64(stream), np.uint64(0)
    for r in range(r0, r1):
        _round_keys(np.uint64(keys[r, 0]), np.uint64(keys[r, 1]), ks)
        for i in range(steps):
            row = out[r, i]
            c1 = np.uint64(step0 + i)
            for b0 in range(0, blocks, LANES):
                if normal:
                    for l in range(LANES):
                        x0, x1, x2, x3 = _philox(np.uint64(b0 + l), c1, c2, c3, ks)
                        u1 = _F((x0 >> _S8) + _ONE_U) * INV24
                        u2 = _F(x1 >> _S8) * INV24
                        u3 = _F((x2 >> _S8) + _ONE_U) * INV24
                        u4 = _F(x3 >> _S8) * INV24
                        ra = np.sqrt(-_TWO * _log(u1))
                        rb = np.sqrt(-_TWO * _log(u3))
                        sa, ca = _sincos_2pi(u2)
                        sb, cb = _sincos_2pi(u4)
                        v[0, l] = ra * ca
                        v[1, l] = ra * sa
                        v[2, l] = rb * cb
                        v[3, l] = rb * sb
                else:
                    for l in range(LANES):
                        x0, x1, x2, x3 = _philox(np.uint64(b0 + l), c1, c2, c3, ks)
                        v[0, l] = _F(x0 >> _S8) * INV24
                        v[1, l] = _F(x1 >> _S8) * INV24
                        v[2, l] = _F(x2 >> _S8) * INV24
                        v[3, l] = _F(x3 >> _S8) * INV24
                j0 = 4 * b0
                if j0 + 4 * LANES <= width:
                    for w in range(4):
                        for l in range(LANES):
                            row[j0 + w * LANES + l] = v[w, l]
                else:
                    for w in range(4):
                        for l in range(LANES):
                            if j0 + w * LANES + l < width:
                                row[j0 + w * LANES + l] = v[w, l]


@register_jitable
def softmax_grad(
    z: NDArray[np.float32],
    label: NDArray[np.int64],
    sq: NDArray[np.float32],
    r0: int,
    r1: int,
    clip: NDArray[np.float32],
    a_sq: NDArray[np.float32],
    weight: NDArray[np.float32],
    clipped: bool,
    weighted: bool,
) -> None:
    """z (R, K, n) float32 logits of runs r0..r1, in place -> e = softmax - onehot (p_k =
    exp(z_k - max) * (1 / sum), then p_y - 1), sq (R, n) = sum_k e_k^2 (k in order); label
    (R or 1, n) int64 (one row: shared by all runs). ``clipped``: also scale e by
    c = clip[r] / max(sqrt(sq a_sq[r, j]), clip[r]) (a_sq (R or 1, n)), times weight[r, j]
    when ``weighted``. Examples are taken CH at a time (all K classes of them stay in L1)."""
    K, n = z.shape[1], z.shape[2]
    m = np.empty(CH, np.float32)
    s = np.empty(CH, np.float32)
    q = np.empty(CH, np.float32)
    y = np.empty(CH, np.int32)  # 32-bit lanes, as the C (labels are class indices < K)
    for r in range(r0, r1):
        for j0 in range(0, n, CH):
            w = min(CH, n - j0)
            b = z[r, 0, j0 : j0 + w]
            for j in range(w):
                m[j] = b[j]
            for k in range(1, K):
                b = z[r, k, j0 : j0 + w]
                for j in range(w):
                    m[j] = b[j] if b[j] > m[j] else m[j]
            b = z[r, 0, j0 : j0 + w]
            for j in range(w):
                e = _exp(b[j] - m[j])
                b[j] = e
                s[j] = e
            for k in range(1, K):
                b = z[r, k, j0 : j0 + w]
                for j in range(w):
                    e = _exp(b[j] - m[j])
                    b[j] = e
                    s[j] = s[j] + e
            lab = label[r if label.shape[0] > 1 else 0, j0 : j0 + w]
            for j in range(w):
                s[j] = _ONE / s[j]
                y[j] = np.int32(lab[j])
            # p_k = e_k * (1 / sum), minus 1 at the label, and q = sum_k p_k^2: one pass
            for k in range(K):
                b = z[r, k, j0 : j0 + w]
                kk = np.int32(k)
                for j in range(w):
                    p = b[j] * s[j]
                    p = p - _ONE if y[j] == kk else p
                    b[j] = p
                    q[j] = p * p if k == 0 else q[j] + p * p
            sqr = sq[r, j0 : j0 + w]
            for j in range(w):
                sqr[j] = q[j]
            if clipped:
                cr = clip[r]
                a = a_sq[r if a_sq.shape[0] > 1 else 0, j0 : j0 + w]
                for j in range(w):
                    norm = np.sqrt(q[j] * a[j])
                    s[j] = cr / (norm if norm > cr else cr)
                if weighted:
                    wt = weight[r, j0 : j0 + w]
                    for j in range(w):
                        s[j] = s[j] * wt[j]
                for k in range(K):
                    b = z[r, k, j0 : j0 + w]
                    for j in range(w):
                        b[j] = b[j] * s[j]


def _c(dtype: Any, ndim: int, readonly: bool = False) -> Any:
    """A C-contiguous array type (inputs read-only: broadcast views pass)."""
    return types.Array(dtype, ndim, "C", readonly=readonly)


# the argument types the kernels are compiled for
_U32, _F32, _I64, _B = types.uint32, types.float32, types.int64, types.boolean
SIGNATURES: list[tuple[Any, list[Any]]] = [
    (philox_fill, [types.void(_c(_U32, 2, True), _I64, _I64, _I64, _I64, _B, _c(_F32, 3))]),
    (
        softmax_grad,
        [
            types.void(
                _c(_F32, 3),
                _c(_I64, 2, True),
                _c(_F32, 2),
                _I64,
                _I64,
                _c(_F32, 1, True),
                _c(_F32, 2, True),
                _c(_F32, 2, True),
                _B,
                _B,
            )
        ],
    ),
    (philox_block, [types.void(_c(_U32, 1, True), _c(_U32, 1, True), _c(_U32, 1))]),
]
