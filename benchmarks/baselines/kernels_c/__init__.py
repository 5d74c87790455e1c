"""The DP-SGD kernels as they were before numba (auditsel 0.1, commit c97d10a): ``kernels.c``
and a loader, pinned here as the benchmark baseline and never imported by the package.

Self-contained (numpy, torch, ctypes and a C compiler only; nothing from ``auditsel``), so
the baseline cannot drift with today's code. The library is compiled once per process into a
private temporary folder (no cache to trust). ``seed_states`` is the vectorised copy of
numpy's ``SeedSequence`` hash that the trainer used then.

    from baselines import kernels_c
    kernels_c.available()              # False without a C compiler (or a prebuilt library)
    kernels_c.build(folder)            # compile into folder, return the library's path
    kernels_c.draw(keys, stream, step0, steps, width, normal)
    kernels_c.softmax_grad_(z, label, clip=None, a_sq=None, weight=None)
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

SOURCE = Path(__file__).with_name("kernels.c")
FLAGS = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-shared", "-fPIC"]
_LIB = None
_POOL = None
_POOL_SIZE = 0  # the workers of _POOL (ThreadPoolExecutor keeps its own count private)


def build(folder: str | Path) -> Path | None:
    """Compile kernels.c into `folder` (OpenMP when the compiler has it); the library's path,
    or None without a working C compiler ($CC, else cc, gcc or clang on PATH)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None
    out = Path(folder) / "kernels.so"
    for extra in (["-fopenmp"], []):
        try:
            subprocess.run(
                [cc, *FLAGS, *extra, str(SOURCE), "-o", str(out), "-lm"],
                check=True,
                capture_output=True,
                timeout=120,
            )
            return out
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def _build():
    """The library at $AUDITSEL_BASELINE_LIB (built earlier, e.g. before the compiler was
    hidden), else built now in a private temporary folder."""
    path = os.environ.get("AUDITSEL_BASELINE_LIB")
    if not path:
        folder = tempfile.mkdtemp(prefix="auditsel-baseline-")
        atexit.register(shutil.rmtree, folder, True)
        path = build(folder)
        if path is None:
            return False
    lib = ctypes.CDLL(str(path))
    p, i64, u32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint32
    lib.philox_fill.argtypes = [p, i64, i64, u32, i64, i64, i64, ctypes.c_int, p]
    lib.softmax_grad.argtypes = [p, p, i64, p, i64, i64, i64, i64, p, p, i64, p]
    lib.philox_block.argtypes = [p, p, p]
    lib.kernels_scalar_only.argtypes = [ctypes.c_int]
    for fn in (lib.philox_fill, lib.softmax_grad, lib.philox_block, lib.kernels_scalar_only):
        fn.restype = None
    lib.openmp = bool(lib.kernels_openmp())
    return lib


def library():
    """The compiled baseline library (ctypes), or None without a working C compiler."""
    global _LIB
    if _LIB is None:
        _LIB = _build()
    return _LIB or None


def available() -> bool:
    return library() is not None


def _split(fn, R: int):
    global _POOL, _POOL_SIZE
    lib = library()
    workers = 1 if lib.openmp else min(torch.get_num_threads(), R)
    if workers < 2:
        fn(0, R)
        return
    if _POOL is None or _POOL_SIZE < workers - 1:
        _POOL, _POOL_SIZE = ThreadPoolExecutor(workers - 1), workers - 1
    bounds = np.linspace(0, R, workers + 1).astype(int)
    rest = [_POOL.submit(fn, int(bounds[k]), int(bounds[k + 1])) for k in range(1, workers)]
    fn(int(bounds[0]), int(bounds[1]))
    for f in rest:
        f.result()


def _ptr(t: torch.Tensor):
    return ctypes.c_void_p(t.data_ptr())


def keys_of(states: np.ndarray) -> np.ndarray:
    s = np.asarray(states, dtype=np.uint64)
    return np.stack(
        [(s & np.uint64(0xFFFFFFFF)).astype(np.uint32), (s >> np.uint64(32)).astype(np.uint32)], 1
    )


def draw(keys, stream, step0, steps, width, normal, device="cpu", out=None) -> torch.Tensor:
    lib = library()
    keys = np.ascontiguousarray(keys, dtype=np.uint32)
    R = keys.shape[0]
    if out is None:
        out = torch.empty(R, steps, width, dtype=torch.float32)
    base, kp = _ptr(out), keys.ctypes.data_as(ctypes.c_void_p)
    _split(
        lambda r0, r1: lib.philox_fill(
            kp, r0, r1, int(stream), int(step0), int(steps), int(width), int(bool(normal)), base
        ),
        R,
    )
    return out


def softmax_grad_(z, label, clip=None, a_sq=None, weight=None) -> torch.Tensor:
    lib = library()
    R, K, n = z.shape
    sq = torch.empty(R, n, dtype=z.dtype, device=z.device)
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
    del keep
    return sq


def seed_keys(seeds) -> np.ndarray:
    """The Philox keys of the runs with these seeds, as the trainer of 0.1 derived them."""
    return keys_of(seed_states(seeds)[:, 0])


def seed_states(seeds: np.ndarray, words: int = 1) -> np.ndarray:
    """The hand-vectorised copy of ``SeedSequence(s).generate_state(words, np.uint64)``."""
    mask = 0xFFFFFFFF
    s = np.asarray(seeds, dtype=np.uint64)
    zero = np.zeros(len(s), np.uint32)
    pool = [(s & np.uint64(mask)).astype(np.uint32), (s >> np.uint64(32)).astype(np.uint32)]
    pool += [zero, zero]
    h = 0x43B0D7E5

    def hashmix(v):
        nonlocal h
        v = v ^ np.uint32(h)
        h = (h * 0x931E8875) & mask
        v = v * np.uint32(h)
        return v ^ (v >> np.uint32(16))

    def mix(x, y):
        r = np.uint32(0xCA01F9DD) * x - np.uint32(0x4973F715) * y
        return r ^ (r >> np.uint32(16))

    pool = [hashmix(v) for v in pool]
    for i in range(4):
        for j in range(4):
            if i != j:
                pool[j] = mix(pool[j], hashmix(pool[i]))
    h, out = 0x8B51F9DD, []
    for i in range(2 * words):
        v = pool[i % 4] ^ np.uint32(h)
        h = (h * 0x58F38DED) & mask
        v = v * np.uint32(h)
        out.append((v ^ (v >> np.uint32(16))).astype(np.uint64))
    return np.stack(out[0::2], 1) | (np.stack(out[1::2], 1) << np.uint64(32))
