"""The trainer's random numbers and its softmax pass: one definition, two implementations.

Contract (what every implementation computes, bit for bit):

* ``draw(keys, stream, step0, steps, width, normal)``: for run r with key (k0, k1) = keys[r]
  (two uint32 words), the j-th number of step i of `stream`, j = 64 c + 16 w + l
  (0 <= w < 4, 0 <= l < 16), is word w of the Philox4x32-10 block (Salmon, Moraes, Dror, Shaw, SC'11; the Random123 reference, checked
  against its known-answer vectors) with counter (16 c + l, i, stream, 0). A uniform is
  (x >> 8) 2^-24 in [0, 1) (24 bits, as torch's float uniforms); normals come in pairs from
  words (0, 1) and (2, 3) by Box-Muller: u1 = ((x0 >> 8) + 1) 2^-24 in (0, 1],
  u2 = (x1 >> 8) 2^-24, (sqrt(-2 log u1) cos 2 pi u2, sqrt(-2 log u1) sin 2 pi u2), with the
  Cephes single-precision log and sin/cos polynomials (|z| <= sqrt(2 ln 2^24) = 5.77, as for
  any 24-bit Box-Muller, torch's CPU normals included). Counter-based: any number is a function
  of (seed, stream, step, index) alone, so how runs are batched, how steps are grouped and how
  the work is split over threads cannot change a value.
* ``softmax_grad_(z, label, sq)``: z (R, K, n) logits, in place e = softmax over K - onehot(y),
  and sq (R, n) = sum_k e_k^2 summed in class order, with the Cephes expf polynomial
  (0 below ln 2^-126).

Implementations: ``kernels.c`` compiled once per machine with the system C compiler into a cache
directory ($AUDITSEL_CACHE, else ~/.cache/auditsel) and called through ctypes (the calls release
the GIL; runs are split over torch's threads), or, when there is no compiler, on a GPU, or with
AUDITSEL_KERNELS=torch, the same arithmetic as torch operations (slower on a CPU). Both are the
same fixed sequence of IEEE single-precision operations (no fused multiply-add), so they agree
bit for bit (tests/test_dpsgd_kernels.py compares them).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

__all__ = ["draw", "softmax_grad_", "backend", "philox_block"]

_SOURCE = Path(__file__).with_name("kernels.c")
_FLAGS = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-shared", "-fPIC"]
_LOCK = threading.Lock()
_LIB = None  # ctypes library, False when unavailable
_POOL = None

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
INV24 = 2.0**-24
LANES = 16  # as in kernels.c: numbers come in chunks of 4 LANES (see `draw`)


# ---------------------------------------------------------------------------------------------
# the compiled implementation
def _cache_dir() -> Path:
    root = os.environ.get("AUDITSEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "auditsel",
    )
    return Path(root) / "kernels"


def _compile() -> ctypes.CDLL | None:
    if os.environ.get("AUDITSEL_KERNELS", "").lower() == "torch":
        return None
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return _without("no C compiler found (set CC to one)")
    source = _SOURCE.read_bytes()
    tag = hashlib.sha256(
        source
        + " ".join([cc] + _FLAGS).encode()
        + sys.platform.encode()
        + os.uname().machine.encode()
    ).hexdigest()[:16]
    target = _cache_dir() / f"kernels-{tag}.so"
    try:
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                out = Path(tmp) / target.name
                try:  # OpenMP when the compiler has it, else one thread per call
                    subprocess.run(
                        [cc, *_FLAGS, "-fopenmp", str(_SOURCE), "-o", str(out), "-lm"],
                        check=True,
                        capture_output=True,
                        timeout=120,
                    )
                except subprocess.CalledProcessError:
                    subprocess.run(
                        [cc, *_FLAGS, str(_SOURCE), "-o", str(out), "-lm"],
                        check=True,
                        capture_output=True,
                        timeout=120,
                    )
                os.replace(out, target)  # atomic: concurrent workers see all or nothing
            for old in target.parent.glob("kernels-*.so"):  # builds of earlier sources
                if old != target:
                    try:
                        old.unlink()  # a process still using one keeps its mapping
                    except OSError:
                        pass
        lib = ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as err:
        detail = getattr(err, "stderr", b"") or b""
        return _without(
            f"{cc} could not build {_SOURCE.name}: "
            f"{(detail.decode(errors='replace').strip().splitlines() or [str(err)])[-1]}"
        )
    p, i64, u32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint32
    lib.philox_fill.argtypes = [p, i64, i64, u32, i64, i64, i64, ctypes.c_int, p]
    lib.softmax_grad.argtypes = [p, p, i64, p, i64, i64, i64, i64, p, p, i64, p]
    lib.philox_block.argtypes = [p, p, p]
    lib.kernels_scalar_only.argtypes = [ctypes.c_int]
    for fn in (lib.philox_fill, lib.softmax_grad, lib.philox_block, lib.kernels_scalar_only):
        fn.restype = None
    lib.openmp = bool(lib.kernels_openmp())
    return lib


def _without(reason: str) -> None:
    """No compiled kernels: say so once (the torch twin gives the same numbers, slower)."""
    warnings.warn(
        f"auditsel: {reason}; the DP-SGD trainer runs its kernels as torch operations "
        f"(the same numbers, several times slower on a CPU)",
        RuntimeWarning,
        stacklevel=3,
    )
    return None


def _library():
    global _LIB
    if _LIB is None:
        with _LOCK:
            if _LIB is None:
                _LIB = _compile() or False
    return _LIB or None


def backend(device="cpu") -> str:
    """'c' when the compiled kernels serve tensors on `device`, else 'torch'."""
    return "c" if torch.device(device).type == "cpu" and _library() is not None else "torch"


def _split(fn, R: int):
    """fn(r0, r1) over [0, R): one call when the library splits the runs over OpenMP threads
    itself, else torch.get_num_threads() parts on a thread pool (ctypes calls release the GIL);
    every part writes its own rows, so the split cannot change a value."""
    global _POOL
    workers = 1 if _LIB and _LIB.openmp else min(torch.get_num_threads(), R)
    if workers < 2:
        fn(0, R)
        return
    if _POOL is None or _POOL._max_workers < workers - 1:
        _POOL = ThreadPoolExecutor(workers - 1, thread_name_prefix="auditsel-kernels")
    bounds = np.linspace(0, R, workers + 1).astype(int)
    rest = [_POOL.submit(fn, int(bounds[k]), int(bounds[k + 1])) for k in range(1, workers)]
    fn(int(bounds[0]), int(bounds[1]))  # the first part on the calling thread
    for f in rest:
        f.result()


def _ptr(t: torch.Tensor):
    return ctypes.c_void_p(t.data_ptr())


# ---------------------------------------------------------------------------------------------
# the torch implementation (the same operations; any device)
def _f(value, like):
    return torch.tensor(value, dtype=torch.float32, device=like.device)


def _mulhilo_split(a: int, b: torch.Tensor):
    """(hi, lo) 32-bit words of a * b for a < 2^32, b int64 in [0, 2^32), without overflow."""
    p = a * (b >> 16)  # < 2^48
    q = a * (b & 0xFFFF)  # < 2^48
    hi = (p + (q >> 16)) >> 16
    lo = (((p & 0xFFFF) << 16) + q) & 0xFFFFFFFF
    return hi, lo


def _mulhilo_wrap(a: int, b: torch.Tensor):
    """The same from one int64 product that wraps modulo 2^64 (its low 64 bits are exact)."""
    p = b * a
    return (p >> 32) & 0xFFFFFFFF, p & 0xFFFFFFFF


_WRAPS: dict = {}


def _mulhilo(a: int, b: torch.Tensor):
    """`_mulhilo_wrap` where this device's int64 product is seen to wrap (checked once against
    Python's integers), else `_mulhilo_split`; the words are the same either way."""
    key = b.device.type
    if key not in _WRAPS:
        probe = torch.tensor([0xFFFFFFFF, 0x9E3779B9, 1], dtype=torch.int64, device=b.device)
        want = [(v * 0xD2511F53) >> 32 for v in (0xFFFFFFFF, 0x9E3779B9, 1)]
        _WRAPS[key] = _mulhilo_wrap(0xD2511F53, probe)[0].tolist() == want
    return (_mulhilo_wrap if _WRAPS[key] else _mulhilo_split)(a, b)


def _philox_torch(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on int64 tensors holding uint32 words (broadcasting)."""
    for _ in range(10):
        hi0, lo0 = _mulhilo(M0, c0)
        hi1, lo1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = (k0 + W0) & 0xFFFFFFFF
        k1 = (k1 + W1) & 0xFFFFFFFF
    return c0, c1, c2, c3


def _log_torch(x):
    b = x.view(torch.int32).to(torch.int64)
    e = ((b >> 23) & 0xFF) - 126
    m = ((b & 0x007FFFFF) | 0x3F000000).to(torch.int32).view(torch.float32)
    small = m < _f(0.707106781186547524, m)
    fe = torch.where(small, e - 1, e).to(torch.float32)
    t = torch.where(small, (m + m) - _f(1.0, m), m - _f(1.0, m))
    z = t * t
    y = torch.full_like(t, 7.0376836292e-2)
    for c in (
        -1.1514610310e-1,
        1.1676998740e-1,
        -1.2420140846e-1,
        1.4249322787e-1,
        -1.6668057665e-1,
        2.0000714765e-1,
        -2.4999993993e-1,
        3.3333331174e-1,
    ):
        y = y * t + _f(c, t) if c > 0 else y * t - _f(-c, t)
    y = (y * t) * z
    y = y + _f(-2.12194440e-4, t) * fe
    y = y - _f(0.5, t) * z
    t = t + y
    return t + _f(0.693359375, t) * fe


def _sincos_2pi_torch(u):
    t = u * _f(4.0, u)
    q = torch.floor(t)
    f = t - q
    hi = f > _f(0.5, f)
    g = torch.where(hi, _f(1.0, f) - f, f)
    x = g * _f(1.57079632679489662, g)
    z = x * x
    s = torch.full_like(z, -1.9515295891e-4)
    s = s * z + _f(8.3321608736e-3, z)
    s = s * z - _f(1.6666654611e-1, z)
    s = ((s * z) * x) + x
    c = torch.full_like(z, 2.443315711809948e-5)
    c = c * z - _f(1.388731625493765e-3, z)
    c = c * z + _f(4.166664568298827e-2, z)
    c = (((c * z) * z) - _f(0.5, z) * z) + _f(1.0, z)
    sa, ca = torch.where(hi, c, s), torch.where(hi, s, c)
    qi = q.to(torch.int64)
    sn = torch.where(qi == 0, sa, torch.where(qi == 1, ca, torch.where(qi == 2, -sa, -ca)))
    cs = torch.where(qi == 0, ca, torch.where(qi == 1, -sa, torch.where(qi == 2, -ca, sa)))
    return sn, cs


def _exp_torch(x):
    fx = torch.floor(x * _f(1.44269504088896341, x) + _f(0.5, x))
    r = x - fx * _f(0.693359375, x)
    r = r - fx * _f(-2.12194440e-4, x)
    z = r * r
    y = torch.full_like(r, 1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        y = y * r + _f(c, r)
    y = ((y * z) + r) + _f(1.0, r)
    n = torch.nan_to_num(fx, nan=0.0).clamp(-127, 128).to(torch.int32)
    scale = ((n + 127) << 23).view(torch.float32)
    return torch.where(x < _f(-87.33654475, x), _f(0.0, x), y * scale)


def _draw_torch(keys: torch.Tensor, stream, step0, steps, width, normal):
    device = keys.device
    chunks = -(-width // (4 * LANES))
    k0 = keys[:, 0].to(torch.int64)[:, None, None]
    k1 = keys[:, 1].to(torch.int64)[:, None, None]
    c0 = torch.arange(chunks * LANES, device=device, dtype=torch.int64)[None, None, :]
    c1 = torch.arange(step0, step0 + steps, device=device, dtype=torch.int64)[None, :, None]
    shape = (keys.shape[0], steps, chunks * LANES)
    c0, c1 = c0.expand(shape), c1.expand(shape)
    c2 = torch.full(shape, int(stream), dtype=torch.int64, device=device)
    c3 = torch.zeros(shape, dtype=torch.int64, device=device)
    words = _philox_torch(c0, c1, c2, c3, k0, k1)
    if normal:
        out = []
        for a, b in ((words[0], words[1]), (words[2], words[3])):
            u1 = ((a >> 8) + 1).to(torch.float32) * INV24
            u2 = (b >> 8).to(torch.float32) * INV24
            # torch's float32 sqrt is not always correctly rounded; float64 sqrt rounded to
            # float32 is (as C's sqrtf)
            rad = torch.sqrt((_f(-2.0, u1) * _log_torch(u1)).double()).float()
            s, c = _sincos_2pi_torch(u2)
            out += [rad * c, rad * s]
    else:
        out = [(w >> 8).to(torch.float32) * INV24 for w in words]
    # number 4 LANES c + LANES w + l = word w of block LANES c + l
    out = torch.stack([o.reshape(keys.shape[0], steps, chunks, LANES) for o in out], 3)
    return out.reshape(keys.shape[0], steps, chunks * 4 * LANES)[:, :, :width]


def _softmax_grad_torch(z, label, sq, clip=None, a_sq=None, weight=None):
    """Elementwise over the whole (R, K, n) tensor, sums over K in class order (as kernels.c)."""
    K = z.shape[1]
    m = z[:, 0].clone()
    for k in range(1, K):
        v = z[:, k]
        m = torch.where(v > m, v, m)
    z.copy_(_exp_torch(z - m[:, None, :]))
    s = z[:, 0].clone()
    for k in range(1, K):
        s = s + z[:, k]
    inv = _f(1.0, s) / s
    z *= inv[:, None, :]
    at_label = (
        label.expand(z.shape[0], -1)[:, None, :] == torch.arange(K, device=z.device)[None, :, None]
    )
    torch.where(at_label, z - _f(1.0, z), z, out=z)
    q = z[:, 0] * z[:, 0]
    for k in range(1, K):
        q = q + z[:, k] * z[:, k]
    sq.copy_(q)
    if clip is not None:
        cr = clip[:, None]
        norm = torch.sqrt((q * a_sq).double()).float()  # correctly rounded, as C's sqrtf
        c = cr / torch.where(norm > cr, norm, cr)
        if weight is not None:
            c = c * weight
        z *= c[:, None, :]


# ---------------------------------------------------------------------------------------------
# the interface
def keys_of(states: np.ndarray) -> np.ndarray:
    """(R, 2) uint32 Philox keys from 64-bit per-run states (low word, high word)."""
    s = np.asarray(states, dtype=np.uint64)
    return np.stack(
        [(s & np.uint64(0xFFFFFFFF)).astype(np.uint32), (s >> np.uint64(32)).astype(np.uint32)], 1
    )


def draw(
    keys: np.ndarray,
    stream: int,
    step0: int,
    steps: int,
    width: int,
    normal: bool,
    device="cpu",
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """(R, steps, width) float32: numbers of steps step0 .. step0 + steps - 1 of `stream` for the
    R runs with Philox keys ``keys`` (R, 2) uint32 (see the module docstring)."""
    keys = np.ascontiguousarray(keys, dtype=np.uint32)
    R = keys.shape[0]
    device = torch.device(device)
    lib = _library() if device.type == "cpu" else None
    if lib is None:
        res = _draw_torch(
            torch.as_tensor(keys.astype(np.int64), device=device),
            stream,
            step0,
            steps,
            width,
            normal,
        )
        if out is None:
            return res
        out.copy_(res)
        return out
    if out is None:
        out = torch.empty(R, steps, width, dtype=torch.float32)
    assert out.is_contiguous() and out.dtype == torch.float32
    base = _ptr(out)
    kp = keys.ctypes.data_as(ctypes.c_void_p)
    _split(
        lambda r0, r1: lib.philox_fill(
            kp, r0, r1, int(stream), int(step0), int(steps), int(width), int(bool(normal)), base
        ),
        R,
    )
    return out


def softmax_grad_(
    z: torch.Tensor,
    label: torch.Tensor,
    clip: torch.Tensor | None = None,
    a_sq: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
):
    """In place z (R, K, n) -> e = softmax(z) over K minus onehot(label) (label (n,) shared or
    (R, n) per run, int64); returns sq (R, n) = sum_k e_k^2. With clip (R,) and a_sq ((n,) or
    (R, n): ||a||^2 + 1 of a one-layer model's inputs), e is also scaled by the clip factor
    clip / max(sqrt(sq a_sq), clip) (times weight (R, n) when given): the clipped per-example
    output gradients of a one-layer model."""
    R, K, n = z.shape
    sq = torch.empty(R, n, dtype=z.dtype, device=z.device)
    lib = _library() if z.device.type == "cpu" and z.dtype == torch.float32 else None
    if lib is None or not z.is_contiguous():
        if z.dtype != torch.float32:  # float64 runs (tests): the same formula in float64
            _softmax_grad_reference(z, label, sq, clip, a_sq, weight)
        else:
            _softmax_grad_torch(z, label, sq, clip, a_sq, weight)
        return sq
    label = label.contiguous()
    args = [_ptr(z), _ptr(label), n if label.dim() == 2 else 0, _ptr(sq)]
    keep = [label]
    if clip is None:
        tail = [None, None, 0, None]
    else:
        clip, a_sq = clip.to(torch.float32).contiguous(), a_sq.to(torch.float32).contiguous()
        weight = None if weight is None else weight.to(torch.float32).contiguous()
        keep += [clip, a_sq, weight]
        tail = [
            _ptr(clip),
            _ptr(a_sq),
            n if a_sq.dim() == 2 else 0,
            None if weight is None else _ptr(weight),
        ]
    _split(lambda r0, r1: lib.softmax_grad(*args[:4], r0, r1, K, n, *tail), R)
    return sq


def _softmax_grad_reference(z, label, sq, clip=None, a_sq=None, weight=None):
    """Any dtype: torch's exp (float64 runs are for tests of the algebra, not of the kernel)."""
    z -= z.amax(1, keepdim=True)
    z.exp_()
    z /= z.sum(1, keepdim=True)
    idx = label.expand(z.shape[0], -1)[:, None, :]
    z.scatter_(1, idx, z.gather(1, idx) - 1.0)
    sq.copy_((z * z).sum(1))
    if clip is not None:
        norm = torch.sqrt(sq * a_sq)
        c = clip[:, None] / torch.maximum(norm, clip[:, None])
        z *= (c if weight is None else c * weight)[:, None, :]


def philox_block(counter, key, implementation: str = "c") -> list:
    """One Philox4x32-10 block (4 uint32 words) of `counter` (4 words) under `key` (2 words);
    implementation "c" (the vector rounds where the CPU has AVX2), "c-scalar" or "torch"."""
    if implementation in ("c", "c-scalar"):
        lib = _library()
        if lib is None:
            raise RuntimeError("the compiled kernels are not available here")
        lib.kernels_scalar_only(int(implementation == "c-scalar"))
        c = np.asarray(counter, np.uint32)
        k = np.asarray(key, np.uint32)
        o = np.zeros(4, np.uint32)
        try:
            lib.philox_block(
                c.ctypes.data_as(ctypes.c_void_p),
                k.ctypes.data_as(ctypes.c_void_p),
                o.ctypes.data_as(ctypes.c_void_p),
            )
        finally:
            lib.kernels_scalar_only(0)
        return [int(v) for v in o]
    t = [torch.tensor([int(v)], dtype=torch.int64) for v in counter]
    out = _philox_torch(*t, int(key[0]), int(key[1]))
    return [int(v) for v in out]
