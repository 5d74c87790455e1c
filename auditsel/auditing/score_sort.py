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
answers; the parent checks that every part is sorted and returns views of a private
copy-on-write mapping of the buffer. A caller that knows a large sort is coming starts the
helper ahead (`prepare_sort`: `auditsel run` does so before it plays 4M+ games in memory), so
the helper's start-up (an interpreter and NumPy, about 0.1 s) and the allocation of the
buffer's pages happen beside the game; otherwise it starts while the parent copies the parts.

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

__all__ = ["sort_parts", "prepare_sort", "SortHelper", "avx512_sort_is_slow"]

#: parts of at least this many values in all go to the helper on a CPU whose AVX-512 sort is
#: slow (below, the helper's start-up costs more than it saves: 2 x 2M values take 0.12 s)
HELPER_ABOVE = 1 << 22

#: each part in its own thread from here (numpy frees the GIL; the threads end with the sorts,
#: so no idle pool is left behind and the process can still fork safely)
THREADED_SORT_ABOVE = 1 << 20

#: seconds the parent waits for the helper: its start-up, plus a generous time per value
HELPER_TIMEOUT = 30.0
HELPER_SECONDS_PER_VALUE = 1e-6

# The helper: allocates the shared buffer's pages (fd argv[1], argv[3] values) while the
# parent works, reads "n1 n2 ...\n" on stdin, sorts those parts of the buffer in place, one
# thread each, and answers "sorted\n". It imports numpy from the parent's folder (argv[2]), so
# both run the same NumPy.
_HELPER = r"""
import mmap, os, sys, threading
sys.path.insert(0, sys.argv[2])
import numpy as np
fd, capacity = int(sys.argv[1]), int(sys.argv[3])
try:
    os.posix_fallocate(fd, 0, 8 * capacity)
except OSError:
    pass
sizes = [int(k) for k in sys.stdin.readline().split()]
if sum(sizes):
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
    buf = np.frombuffer(mmap.mmap(fd, 8 * sum(sizes), flags=flags), dtype=np.float64)
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


def _numpy_sort(
    s: NDArray[np.float64], masks: Sequence[NDArray[np.bool_]]
) -> tuple[NDArray[np.float64], ...]:
    if len(s) < THREADED_SORT_ABOVE:
        return tuple(np.sort(s[m]) for m in masks)
    with ThreadPoolExecutor(len(masks), thread_name_prefix="auditsel-sort") as pool:
        return tuple(pool.map(lambda m: np.sort(s[m]), masks))


def sort_parts(
    s: NDArray[np.float64],
    masks: Sequence[NDArray[np.bool_]],
    helper: SortHelper | None = None,
) -> tuple[NDArray[np.float64], ...]:
    """np.sort(s[m]) for each mask m, in the module's fastest way here (module docstring):
    by `helper` (a `SortHelper` started ahead, `prepare_sort`; used once) where it is given,
    else by one started now where that pays, else by np.sort."""
    s = np.asarray(s, dtype=np.float64)
    sizes = [int(np.count_nonzero(m)) for m in masks]
    total = sum(sizes)
    if helper is None and total >= HELPER_ABOVE and avx512_sort_is_slow():
        helper = SortHelper(total)
    if helper is not None:
        with helper:
            parts = helper.sort(s, masks, sizes)
        if parts is not None:
            return parts
    return _numpy_sort(s, masks)


def prepare_sort(values: int) -> SortHelper | None:
    """A `SortHelper` started now for a sort of `values` values to come, where one pays
    (`avx512_sort_is_slow`, at least `HELPER_ABOVE` values), else None: its start-up and the
    allocation of its buffer then happen beside the caller's work (the game)."""
    if values >= HELPER_ABOVE and avx512_sort_is_slow():
        return SortHelper(values)
    return None


class SortHelper:
    """A helper interpreter that sorts up to `capacity` values once (module docstring),
    started at construction; `sort` hands it the parts, `close` (or leaving its context) ends
    it. `disabled`: the NumPy targets it turns off (default `avx512_targets()`). Where it
    cannot start (no `memfd_create`, a failed start) `sort` answers None."""

    def __init__(self, capacity: int, disabled: Sequence[str] | None = None) -> None:
        self.capacity = int(capacity)
        self._nbytes = 8 * max(self.capacity, 1)
        self._fd: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        off = avx512_targets() if disabled is None else tuple(disabled)
        try:
            self._fd = os.memfd_create("auditsel-sort")
            os.ftruncate(self._fd, self._nbytes)
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _HELPER, str(self._fd), _NUMPY_HOME, str(self.capacity)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                pass_fds=(self._fd,),
                env={**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(off)},
            )
        except (AttributeError, OSError, ValueError, subprocess.SubprocessError):
            self.close()

    def __enter__(self) -> SortHelper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the helper (killed if still running) and release the buffer's descriptor."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            for pipe in (self._proc.stdin, self._proc.stdout):
                if pipe is not None:
                    pipe.close()
            self._proc = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def sort(
        self, s: NDArray[np.float64], masks: Sequence[NDArray[np.bool_]], sizes: Sequence[int]
    ) -> tuple[NDArray[np.float64], ...] | None:
        """np.sort(s[m]) for each mask m (of `sizes` values), or None where the helper could
        not sort them: the caller then sorts them itself. The parts are views of a private
        copy-on-write mapping of the sorted buffer: writing to them (here or in a forked
        child) never reaches the buffer the helper wrote. Once only: the helper then ends."""
        total = int(sum(sizes))
        proc, fd = self._proc, self._fd
        if proc is None or fd is None or total > self.capacity:
            return None
        bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        try:
            populate = getattr(mmap, "MAP_POPULATE", 0)
            with mmap.mmap(fd, self._nbytes, flags=mmap.MAP_SHARED | populate) as shared:
                flat = np.frombuffer(shared, dtype=np.float64)
                # each part gathered on its own thread (NumPy frees the GIL: 2x at 10^7)
                with ThreadPoolExecutor(len(masks), thread_name_prefix="auditsel-gather") as pool:
                    jobs = zip(masks, bounds[:-1], bounds[1:])
                    list(
                        pool.map(
                            lambda job: np.compress(job[0], s, out=flat[job[1] : job[2]]), jobs
                        )
                    )
                del flat  # no view may outlive the shared mapping
            answer, _ = proc.communicate(
                " ".join(map(str, sizes)).encode() + b"\n",
                timeout=HELPER_TIMEOUT + HELPER_SECONDS_PER_VALUE * total,
            )
            if answer != b"sorted\n":
                return None
            private = mmap.mmap(fd, self._nbytes, flags=mmap.MAP_PRIVATE)
        except (OSError, ValueError, subprocess.SubprocessError):
            return None
        finally:
            self.close()
        flat = np.frombuffer(private, dtype=np.float64)
        parts = tuple(flat[a:b] for a, b in zip(bounds[:-1], bounds[1:]))
        return parts if all(_is_sorted(p) for p in parts) else None


#: the folder NumPy was imported from: the helper imports the same NumPy
_NUMPY_HOME = str(Path(np.__file__).parents[1])


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
