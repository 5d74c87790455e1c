"""What the machine offers a run: the memory it can still use.

`available_memory()` is the smaller of the kernel's estimate of memory available without
swapping (`MemAvailable` in /proc/meminfo) and what the control group still allows
(cgroup v2 `memory.max` - `memory.current`); None when neither can be read (then no check
based on it is made). The configs' memory checks compare a lower estimate of what a run
needs against it, so a refusal means the run could not have fit.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["available_memory", "gib"]


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> int | None:
    """Bytes of memory this process may still use (see the module docstring), or None."""
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
                break
    except (OSError, ValueError, IndexError):
        pass
    cap, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if cap is not None and used is not None:
        limits.append(max(cap - used, 0))
    return min(limits) if limits else None


def gib(n: float) -> str:
    """Bytes as GiB, for messages."""
    return f"{n / 2**30:,.1f} GiB"
