"""The audit's large sorts, at NumPy's fast speed on CPUs where its AVX-512 sort is slow.

Contract. `sort_parts(s, masks)` returns `np.sort(s[m])` for each boolean mask m: the same
values in the same order (a sort's output is unique up to the order of equal values, which
no count read from it can tell apart), whichever way it is computed.

Why there are two ways. NumPy sorts with x86-simd-sort, dispatched to its AVX-512 version
wherever the CPU has AVX-512. On AMD Zen 4 (family 0x19 with AVX-512) that version's
partition step, a compress-store to memory (`vpcompressq` with a memory destination), is
microcoded and slow, so `np.sort` of float64 runs at 50-90 ns per value where NumPy's own
AVX2 version runs at about 10 (measured on this project's 2-core Zen 4 machine; upstream:
numpy/x86-simd-sort issue 6, and the discussion of numpy pull request 32690). NumPy picks its
targets once, at import, from the CPU and `NPY_DISABLE_CPU_FEATURES`, and has no way to
change them afterwards. So on such a CPU (`avx512_sort_is_slow`), the parts of a large sort
(at least `HELPER_ABOVE` values in all) are sorted by a helper interpreter started with
NumPy's AVX-512 targets disabled: the parent copies the parts into one anonymous shared
buffer (`os.memfd_create`), the helper sorts each part in place (one thread each) and
answers; the parent checks that every part is sorted and returns views of the buffer. The
helper starts while the parent copies the parts, so its start-up (an interpreter and NumPy,
about 0.1 s) is mostly hidden.

Everything else in the process keeps NumPy's AVX-512 code (the helper only sorts), so no
other number changes. If the helper cannot run (no `memfd_create`, a failed start, a crash,
a time-out, an answer that is not sorted), the parts are sorted here with `np.sort`: the same
numbers, at NumPy's speed.
"""

from __future__ import annotations

import functools
import mmap
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["sort_parts", "avx512_sort_is_slow"]

#: parts of at least this many values in all go to the helper on a CPU whose AVX-512 sort is
#: slow (below, the helper's start-up costs more than it saves: 2 x 2M values take 0.12 s)
HELPER_ABOVE = 1 << 22

#: each part in its own thread from here (numpy frees the GIL; the threads end with the sorts,
#: so no idle pool is left behind and the process can still fork safely)
THREADED_SORT_ABOVE = 1 << 20

#: seconds the parent waits for the helper: its start-up, plus a generous time per value
HELPER_TIMEOUT = 30.0
HELPER_SECONDS_PER_VALUE = 1e-6

# The helper: reads "n1 n2 ...\n" on stdin, sorts the parts of the shared buffer (fd argv[1])
# in place, one thread each, and answers "sorted\n". It imports numpy from the parent's
# folder (argv[2]), so both run the same NumPy.
_HELPER = r"""
import mmap, sys, threading
sys.path.insert(0, sys.argv[2])
import numpy as np
sizes = [int(k) for k in sys.stdin.readline().split()]
if sum(sizes):
    buf = np.frombuffer(mmap.mmap(int(sys.argv[1]), 8 * sum(sizes)), dtype=np.float64)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    parts = [buf[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    threads = [threading.Thread(target=p.sort) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
sys.stdout.write("sorted\n")
sys.stdout.flush()
"""


def _numpy_sort(s: NDArray[np.float64], masks: Sequence[NDArray[np.bool_]]) -> tuple:
    if len(s) < THREADED_SORT_ABOVE:
        return tuple(np.sort(s[m]) for m in masks)
    with ThreadPoolExecutor(len(masks), thread_name_prefix="auditsel-sort") as pool:
        return tuple(pool.map(lambda m: np.sort(s[m]), masks))


def sort_parts(s: NDArray[np.float64], masks: Sequence[NDArray[np.bool_]]) -> tuple:
    """np.sort(s[m]) for each mask m, in the module's fastest way here (module docstring)."""
    s = np.asarray(s, dtype=np.float64)
    sizes = [int(np.count_nonzero(m)) for m in masks]
    if sum(sizes) >= HELPER_ABOVE and avx512_sort_is_slow():
        parts = sort_in_helper(s, masks, sizes)
        if parts is not None:
            return parts
    return _numpy_sort(s, masks)


def sort_in_helper(
    s: NDArray[np.float64],
    masks: Sequence[NDArray[np.bool_]],
    sizes: Sequence[int],
    disabled: Sequence[str] | None = None,
) -> tuple | None:
    """The parts sorted by the helper interpreter (module docstring), or None where it could
    not: the caller then sorts them itself. The parts returned are views of a private
    copy-on-write mapping of the sorted buffer: writing to them (here or in a forked child)
    never reaches the buffer the helper wrote. `disabled`: the NumPy targets the helper turns
    off (default `avx512_targets()`)."""
    disabled = avx512_targets() if disabled is None else tuple(disabled)
    if not hasattr(os, "memfd_create"):
        return None
    total = int(sum(sizes))
    nbytes = 8 * max(total, 1)
    helper = None
    try:
        fd = os.memfd_create("auditsel-sort")
    except OSError:
        return None
    try:
        helper = subprocess.Popen(
            [sys.executable, "-c", _HELPER, str(fd), str(Path(np.__file__).parents[1])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            pass_fds=(fd,),
            env={**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(disabled)},
        )
        os.ftruncate(fd, nbytes)
        with mmap.mmap(fd, nbytes) as shared:  # copied in while the helper starts
            flat = np.frombuffer(shared, dtype=np.float64)[:total]
            bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
            for m, a, b in zip(masks, bounds[:-1], bounds[1:]):
                np.compress(m, s, out=flat[a:b])
            del flat  # no view may outlive the shared mapping
        answer, _ = helper.communicate(
            " ".join(map(str, sizes)).encode() + b"\n",
            timeout=HELPER_TIMEOUT + HELPER_SECONDS_PER_VALUE * total,
        )
        if answer != b"sorted\n":
            return None
        flat = np.frombuffer(mmap.mmap(fd, nbytes, flags=mmap.MAP_PRIVATE), dtype=np.float64)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    finally:
        if helper is not None and helper.poll() is None:
            helper.kill()
            helper.wait()
        os.close(fd)
    parts = tuple(flat[a:b] for a, b in zip(bounds[:-1], bounds[1:]))
    return parts if all(_is_sorted(p) for p in parts) else None


def _is_sorted(x: NDArray[np.float64]) -> bool:
    """Ascending as np.sort leaves it: the NaNs last."""
    nan = np.isnan(x)
    k = len(x) - int(np.count_nonzero(nan))
    return not nan[:k].any() and bool(np.all(x[1:k] >= x[: max(k - 1, 0)]))


@functools.cache
def avx512_sort_is_slow() -> bool:
    """Whether NumPy sorts with AVX-512 (`avx512_targets`) on a CPU whose compress-store to
    memory is microcoded (`slow_compress_store`, read from /proc/cpuinfo)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return slow_compress_store(text) and bool(avx512_targets())


def slow_compress_store(cpuinfo: str) -> bool:
    """Whether the first CPU of a /proc/cpuinfo text is AMD family 0x19 with AVX-512F: Zen 4
    (Zen 3, the same family, has no AVX-512; Zen 5, family 0x1A, compresses to memory fast)."""
    fields = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return (
        fields.get("vendor_id") == "AuthenticAMD"
        and fields.get("cpu family") == "25"
        and "avx512f" in fields.get("flags", "").split()
    )


@functools.cache
def avx512_targets() -> tuple[str, ...]:
    """NumPy's AVX-512 targets found on this CPU (names as this NumPy spells them: X86_V4,
    AVX512_ICL, ... in NumPy 2; AVX512F, AVX512_SKX, ... before), from its public
    `show_config`: what the helper's `NPY_DISABLE_CPU_FEATURES` lists."""
    simd = np.show_config(mode="dicts").get("SIMD Extensions", {})
    found = simd.get("found", []) if isinstance(simd, dict) else []
    return tuple(f for f in found if "512" in f or f == "X86_V4")
