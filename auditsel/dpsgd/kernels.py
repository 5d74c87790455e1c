"""The trainer's random numbers and its softmax pass: one definition, two implementations.

Contract (what every implementation computes, bit for bit):

* ``draw(keys, stream, step0, steps, width, normal)``: for run r with key (k0, k1) = keys[r]
  (two uint32 words), the j-th number of step i of `stream`, j = 64 c + 16 w + l
  (0 <= w < 4, 0 <= l < 16), is word w of the Philox4x32-10 block (Salmon, Moraes, Dror,
  Shaw, SC'11; the Random123 reference, checked against its known-answer vectors) with
  counter (16 c + l, i, stream, 0). A uniform is (x >> 8) 2^-24 in [0, 1) (24 bits, as
  torch's float uniforms); normals come in pairs from
  words (0, 1) and (2, 3) by Box-Muller: u1 = ((x0 >> 8) + 1) 2^-24 in (0, 1],
  u2 = (x1 >> 8) 2^-24, (sqrt(-2 log u1) cos 2 pi u2, sqrt(-2 log u1) sin 2 pi u2), with the
  Cephes single-precision log and sin/cos polynomials (`|z| <= sqrt(2 ln 2^24) = 5.77`, as for
  any 24-bit Box-Muller, torch's CPU normals included). Counter-based: any number is a function
  of (seed, stream, step, index) alone, so how runs are batched, how steps are grouped and how
  the work is split over threads cannot change a value.

* ``seed_keys(seeds)``: the key of the run with seed s is the first 64-bit word of numpy's
  ``SeedSequence(s).generate_state`` (low word k0, high word k1).

* ``softmax_grad_(z, label, sq)``: z (R, K, n) logits, in place e = softmax over K - onehot(y),
  and sq (R, n) = sum_k e_k^2 summed in class order, with the Cephes expf polynomial
  (0 below ln 2^-126).

Implementations: on the CPU ``kernels_cpu``, loops compiled by numba into its checked cache
(``kernel_cache``), the runs split over threads (each piece writes its own rows); on any other
device ``kernels_torch``. Both are the same fixed sequence of IEEE single-precision operations
(no fused multiply-add), so they agree bit for bit.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import torch
from numpy.typing import NDArray

from auditsel.dpsgd import kernel_cache, kernels_cpu, kernels_torch
from auditsel.executor import in_pieces

_LOCK = threading.Lock()
_CPU: SimpleNamespace | None = None
PIECES_PER_THREAD = 4


def _cpu() -> SimpleNamespace:
    """The compiled CPU kernels (compiled, or loaded from numba's checked cache, on first use)."""
    global _CPU
    if _CPU is None:
        with _LOCK:
            if _CPU is None:
                fill, softmax, block = kernel_cache.compile_cached(
                    kernels_cpu.SIGNATURES,
                    module="kernels_cpu",
                    nogil=True,
                    error_model=kernels_cpu.ERROR_MODEL,
                )
                _CPU = SimpleNamespace(philox_fill=fill, softmax_grad=softmax, philox_block=block)
    return _CPU


def _numba_serves(device: torch.device) -> bool:
    """The compiled CPU kernels serve CPU tensors; the torch kernels every other device."""
    return device.type == "cpu"


def backend(device: str | torch.device = "cpu") -> str:
    """'numba' where the compiled CPU kernels serve tensors on `device`, else 'torch'."""
    return "numba" if _numba_serves(torch.device(device)) else "torch"


def _split(fn, R: int) -> None:
    """fn(r0, r1) over [0, R): on the calling thread alone, or in pieces shared by up to
    torch.get_num_threads() threads where each gets `PIECES_PER_THREAD` runs or more."""
    workers = min(torch.get_num_threads(), R // PIECES_PER_THREAD)
    in_pieces(fn, R, workers, min(R, PIECES_PER_THREAD * workers))


def keys_of(states: np.ndarray) -> np.ndarray:
    """(R, 2) uint32 Philox keys from 64-bit per-run states (low word, high word)."""
    s = np.asarray(states, dtype=np.uint64)
    return np.stack(
        [(s & np.uint64(0xFFFFFFFF)).astype(np.uint32), (s >> np.uint64(32)).astype(np.uint32)], 1
    )


def seed_states(seeds: Sequence[int] | NDArray[np.integer], words: int = 1) -> np.ndarray:
    """(R, words) uint64: ``SeedSequence(int(s)).generate_state(words, np.uint64)`` for each
    seed s (numpy's hash of its seed)."""
    return np.array(
        [np.random.SeedSequence(int(s)).generate_state(words, np.uint64) for s in seeds],
        dtype=np.uint64,
    ).reshape(len(seeds), words)


def seed_keys(seeds: Sequence[int] | NDArray[np.integer]) -> np.ndarray:
    """(R, 2) uint32 Philox keys of the runs with these seeds: the first 64-bit word of
    numpy's ``SeedSequence(s)``."""
    return keys_of(seed_states(seeds)[:, 0])


def draw(
    keys: np.ndarray,
    stream: int,
    step0: int,
    steps: int,
    width: int,
    normal: bool,
    device: str | torch.device = "cpu",
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """(R, steps, width) float32: numbers of steps step0 .. step0 + steps - 1 of `stream` for the
    R runs with Philox keys ``keys`` (R, 2) uint32 (see the module docstring)."""
    keys = np.ascontiguousarray(keys, dtype=np.uint32).reshape(-1, 2)
    R = keys.shape[0]
    device = torch.device(device)
    if not _numba_serves(device):
        res = kernels_torch.draw(
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
    if not (out.is_contiguous() and out.dtype == torch.float32 and out.shape == (R, steps, width)):
        raise ValueError("out: must be a contiguous float32 tensor of shape (R, steps, width)")
    fill, view = _cpu().philox_fill, out.numpy()
    stream, step0, normal = int(stream), int(step0), bool(normal)
    _split(lambda r0, r1: fill(keys, r0, r1, stream, step0, normal, view), R)
    return out


def softmax_grad_(
    z: torch.Tensor,
    label: torch.Tensor,
    clip: torch.Tensor | None = None,
    a_sq: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """In place z (R, K, n) -> e = softmax(z) over K minus onehot(label) (label (n,) shared or
    (R, n) per run, int64); returns sq (R, n) = sum_k e_k^2. With clip (R,) and a_sq ((n,) or
    (R, n): ||a||^2 + 1 of a one-layer model's inputs), e is also scaled by the clip factor
    clip / max(sqrt(sq a_sq), clip) (times weight (R, n) when given): the clipped per-example
    output gradients of a one-layer model."""
    R, K, n = z.shape
    sq = torch.empty(R, n, dtype=z.dtype, device=z.device)
    if z.dtype != torch.float32:  # float64 runs (tests): the same formula in float64
        _softmax_grad_reference(z, label, sq, clip, a_sq, weight)
        return sq
    if not (_numba_serves(z.device) and z.is_contiguous()):
        kernels_torch.softmax_grad(z, label, sq, clip, a_sq, weight)
        return sq
    lab = _host(label, np.int64).reshape(-1, n)  # (1, n): for all runs
    if clip is None:
        c, a = _ones(1, R).reshape(R), _ones(1, n)
        w = a
    else:
        if a_sq is None:
            raise ValueError("a_sq: needed with clip (||a||^2 + 1 of each example)")
        c, a = _host(clip, np.float32), _host(a_sq, np.float32).reshape(-1, n)
        w = a if weight is None else _host(weight, np.float32)
    _check_rows(R, n, lab, c, a, w if weight is not None else None)
    run, zv, sv = _cpu().softmax_grad, z.numpy(), sq.numpy()
    clipped, weighted = clip is not None, weight is not None
    _split(lambda r0, r1: run(zv, lab, sv, r0, r1, c, a, w, clipped, weighted), R)
    return sq


def _host(t: torch.Tensor, dtype: type) -> np.ndarray:
    """A CPU tensor's values as a C-contiguous numpy array of `dtype` (no copy where it is)."""
    v = t.numpy()
    if v.dtype != dtype or not v.flags.c_contiguous:
        v = np.ascontiguousarray(v, dtype)
    return v


_ONES: dict[tuple[int, int], np.ndarray] = {}


def _ones(rows: int, cols: int) -> np.ndarray:
    """A read-only float32 (rows, cols) array of ones, kept per shape."""
    v = _ONES.get((rows, cols))
    if v is None:
        v = np.ones((rows, cols), np.float32)
        v.flags.writeable = False
        v = _ONES.setdefault((rows, cols), v)
    return v


def _check_rows(R: int, n: int, label, clip, a_sq, weight) -> None:
    """The compiled pass reads row r (or row 0 of a one-row array) of each (rows, n) array:
    clip must have R entries, weight R rows, label and a_sq 1 or R (and n columns)."""
    if clip.shape != (R,):
        raise ValueError(f"clip: shape ({R},) expected for {R} runs, got {clip.shape}")
    for name, arr, rows in (
        ("label", label, (1, R)),
        ("a_sq", a_sq, (1, R)),
        ("weight", weight, (R,)),
    ):
        if arr is not None and (arr.ndim != 2 or arr.shape[0] not in rows or arr.shape[1] != n):
            want = " or ".join(f"({r}, {n})" for r in rows)
            raise ValueError(f"{name}: shape {want} expected for {R} runs, got {arr.shape}")


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


def philox_block(
    counter: Sequence[int] | NDArray[np.uint32],
    key: Sequence[int] | NDArray[np.uint32],
    implementation: str = "cpu",
) -> list[int]:
    """One Philox4x32-10 block (4 uint32 words) of `counter` (4 words) under `key` (2 words),
    by the CPU kernels ("cpu") or the torch operations ("torch")."""
    if implementation == "cpu":
        out = np.zeros(4, np.uint32)
        _cpu().philox_block(np.asarray(counter, np.uint32), np.asarray(key, np.uint32), out)
        return [int(v) for v in out]
    if implementation != "torch":
        raise ValueError(f"implementation: must be 'cpu' or 'torch', got {implementation!r}")
    c = [torch.tensor([int(v)], dtype=torch.int64) for v in counter]
    words = kernels_torch.philox(c[0], c[1], c[2], c[3], int(key[0]), int(key[1]))
    return [int(v[0]) for v in words]
