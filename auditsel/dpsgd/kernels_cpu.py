"""The CPU implementation of ``kernels``: numba-compiled loops, the same IEEE single-precision
operations in the same order as the contract in ``auditsel.dpsgd.kernels`` states.

Bit-exactness: numba compiles without fast-math flags (no ``fastmath``), so LLVM neither
reassociates nor contracts a product and a sum into a fused multiply-add (LLVM fuses only
operations flagged ``contract``); float32 values stay float32 because every constant is a
``np.float32`` and every operation has float32 operands (a Python float would promote to
float64). ``tests/test_dpsgd_kernels.py`` checks the Random123 known answers, the torch
implementation bit for bit, and digests of today's streams; ``benchmarks/bench_kernels.py``
compares with the pinned C kernels of earlier versions.

The functions are plain Python until ``kernels`` compiles them (``compile_all``), so that no
cache file is read before ``kernel_cache`` has checked it.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, register_jitable

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
_N_MIN, _N_MAX, _BIAS = _F(-127.0), _F(128.0), np.int64(127)


@intrinsic
def _bits(typingctx, x):
    """The IEEE bits of a float32 as a uint32 (a bit cast, as C's memcpy)."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def _from_bits(typingctx, b):
    """The float32 whose IEEE bits are the uint32 ``b``."""
    if b != types.uint32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@register_jitable
def _log(x):
    """Cephes logf for x in [2^-24, 1] (normal, positive)."""
    b = np.uint64(_bits(x))
    e = np.int64((b >> _S23) & _EXP_MASK) - 126
    m = _from_bits(np.uint32((b & _MANT) | _HALF_EXP))  # [0.5, 1)
    if m < _SQRTH:
        fe = _F(e - 1)
        t = (m + m) - _ONE
    else:
        fe = _F(e)
        t = m - _ONE
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


@register_jitable
def _sincos_2pi(u):
    """(sin 2 pi u, cos 2 pi u) for u in [0, 1) on the 2^-24 grid: the quadrant, then Cephes
    sinf/cosf on [0, pi/4]."""
    t = u * _FOUR
    q = np.floor(t)
    f = t - q
    hi = f > _HALF
    g = _ONE - f if hi else f
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
    sa = c if hi else s
    ca = s if hi else c
    qi = np.int64(q)
    if qi == 0:
        return sa, ca
    if qi == 1:
        return ca, -sa
    if qi == 2:
        return -sa, -ca
    return -ca, sa


@register_jitable
def _exp(x):
    """Cephes expf for x <= 0 (0 below ln 2^-126; NaN stays NaN)."""
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
    # 2^fx from its bits; fx is clamped (NaN to the low end) only where the result is not used
    n = fx if fx > _N_MIN else _N_MIN
    n = n if n < _N_MAX else _N_MAX
    scale = _from_bits(np.uint32((np.int64(n) + _BIAS) << 23))
    return _ZERO if x < -_EXP_MIN else y * scale


@register_jitable
def _philox_lanes(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of LANES counters (c0[l], c1[l], c2[l], c3[l]) in place under the key
    (k0, k1) (uint32 arrays; 64-bit products of zero-extended words)."""
    for _ in range(10):
        for l in range(LANES):
            p0 = _M0 * np.uint64(c0[l])
            p1 = _M1 * np.uint64(c2[l])
            n0 = (p1 >> _S32) ^ np.uint64(c1[l]) ^ k0
            n2 = (p0 >> _S32) ^ np.uint64(c3[l]) ^ k1
            c0[l] = np.uint32(n0)
            c1[l] = np.uint32(p1 & _MASK)
            c2[l] = np.uint32(n2)
            c3[l] = np.uint32(p0 & _MASK)
        k0 = (k0 + _W0) & _MASK
        k1 = (k1 + _W1) & _MASK


def philox_block(counter, key, out):
    """One Philox4x32-10 block: out (4,) uint32 from counter (4,) and key (2,) uint32."""
    c = np.empty((4, LANES), np.uint32)
    for w in range(4):
        for l in range(LANES):
            c[w, l] = counter[w]
    _philox_lanes(c[0], c[1], c[2], c[3], np.uint64(key[0]), np.uint64(key[1]))
    for w in range(4):
        out[w] = c[w, 0]


def philox_fill(keys, r0, r1, stream, step0, normal, out):
    """out[r, i, j] for r0 <= r < r1 (out (R, steps, width) float32): number j of step
    step0 + i of `stream` of run r (keys (R, 2) uint32); see ``kernels.draw``."""
    steps, width = out.shape[1], out.shape[2]
    blocks = (width + 4 * LANES - 1) // (4 * LANES) * LANES
    c0 = np.empty(LANES, np.uint32)
    c1 = np.empty(LANES, np.uint32)
    c2 = np.empty(LANES, np.uint32)
    c3 = np.empty(LANES, np.uint32)
    v = np.empty((4, LANES), np.float32)
    for r in range(r0, r1):
        k0, k1 = np.uint64(keys[r, 0]), np.uint64(keys[r, 1])
        for i in range(steps):
            row = out[r, i]
            for b0 in range(0, blocks, LANES):
                for l in range(LANES):
                    c0[l] = np.uint32(b0 + l)
                    c1[l] = np.uint32(step0 + i)
                    c2[l] = np.uint32(stream)
                    c3[l] = np.uint32(0)
                _philox_lanes(c0, c1, c2, c3, k0, k1)
                if normal:
                    for l in range(LANES):
                        u1 = _F((np.uint64(c0[l]) >> _S8) + _ONE_U) * INV24
                        u2 = _F(np.uint64(c1[l]) >> _S8) * INV24
                        u3 = _F((np.uint64(c2[l]) >> _S8) + _ONE_U) * INV24
                        u4 = _F(np.uint64(c3[l]) >> _S8) * INV24
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
                        v[0, l] = _F(np.uint64(c0[l]) >> _S8) * INV24
                        v[1, l] = _F(np.uint64(c1[l]) >> _S8) * INV24
                        v[2, l] = _F(np.uint64(c2[l]) >> _S8) * INV24
                        v[3, l] = _F(np.uint64(c3[l]) >> _S8) * INV24
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


def softmax_grad(z, label, sq, r0, r1, clip, a_sq, weight, clipped, weighted):
    """z (R, K, n) float32 logits of runs r0..r1, in place -> e = softmax - onehot (p_k =
    exp(z_k - max) * (1 / sum), then p_y - 1), sq (R, n) = sum_k e_k^2 (k in order); label
    (R, n) int64 (a shared row may be broadcast with stride 0). ``clipped``: also scale e by
    c = clip[r] / max(sqrt(sq a_sq[r, j]), clip[r]) (times weight[r, j] when ``weighted``).
    Examples are taken CH at a time (all K classes of them stay in L1)."""
    K, n = z.shape[1], z.shape[2]
    m = np.empty(CH, np.float32)
    s = np.empty(CH, np.float32)
    q = np.empty(CH, np.float32)
    y = np.empty(CH, np.int64)
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
            lab = label[r, j0 : j0 + w]
            for j in range(w):
                s[j] = _ONE / s[j]
                y[j] = lab[j]
            # p_k = e_k * (1 / sum), minus 1 at the label, and q = sum_k p_k^2: one pass
            for k in range(K):
                b = z[r, k, j0 : j0 + w]
                for j in range(w):
                    p = b[j] * s[j]
                    p = p - _ONE if y[j] == k else p
                    b[j] = p
                    q[j] = p * p if k == 0 else q[j] + p * p
            sqr = sq[r, j0 : j0 + w]
            for j in range(w):
                sqr[j] = q[j]
            if clipped:
                cr = clip[r]
                a = a_sq[r, j0 : j0 + w]
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


def _array(dtype, ndim: int, layout: str = "A", readonly: bool = False) -> types.Array:
    return types.Array(dtype, ndim, layout, readonly=readonly)


# the argument types the kernels are compiled for (inputs read-only: broadcast views pass)
_U32, _F32, _I64 = types.uint32, types.float32, types.int64
SIGNATURES = [
    (
        philox_fill,
        [
            types.void(
                _array(_U32, 2, "C", readonly=True),
                _I64,
                _I64,
                _I64,
                _I64,
                types.boolean,
                _array(_F32, 3, "C"),
            )
        ],
    ),
    (
        softmax_grad,
        [
            types.void(
                _array(_F32, 3, "C"),
                _array(_I64, 2, readonly=True),
                _array(_F32, 2, "C"),
                _I64,
                _I64,
                _array(_F32, 1, readonly=True),
                _array(_F32, 2, readonly=True),
                _array(_F32, 2, readonly=True),
                types.boolean,
                types.boolean,
            )
        ],
    ),
    (
        philox_block,
        [
            types.void(
                _array(_U32, 1, "C", readonly=True),
                _array(_U32, 1, "C", readonly=True),
                _array(_U32, 1, "C"),
            )
        ],
    ),
]
