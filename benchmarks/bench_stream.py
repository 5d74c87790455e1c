"""A 10^8-trial reduced audit in bounded memory: chunks streamed from disk, peak RSS printed.

    python benchmarks/bench_stream.py [--trials 100000000] [--jobs 2] [--out DIR]

Runs the quickstart game with `game.stream: true` (the default above 2^25 trials) and samples
the resident memory of this process and its workers every 0.2 s (Linux /proc). Prints the wall
time, trials per second, the peak RSS of the whole process tree (target: under 2 GiB) and the
result's lower bound. Checkpoints take 9 bytes a trial on disk (0.9 GB for 10^8).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from auditsel.experiments.config import default_config_path, load_config
from auditsel.experiments.experiment import run_experiment


def tree_rss_bytes(root: int) -> int:
    """Sum of VmRSS over `root` and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=100_000_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", help="checkpoint folder (default: a temporary one, removed after)")
    args = parser.parse_args()
    spec = load_config(default_config_path())
    spec = spec.with_game(trials=args.trials, stream=True)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="auditsel-stream-"))
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss_bytes(os.getpid()))
            time.sleep(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    start = time.perf_counter()
    try:
        result, _ = run_experiment(spec, out, jobs=args.jobs, progress=True)
    finally:
        done.set()
        thread.join()
        if not args.out:
            shutil.rmtree(out, ignore_errors=True)
    seconds = time.perf_counter() - start
    low = result["lower"]
    print(
        f"{args.trials:,} trials, jobs={args.jobs}: {seconds:.1f} s ({args.trials / seconds:,.0f} trials/s)"
    )
    print(f"peak RSS of the process tree: {peak[0] / 2**30:.2f} GiB")
    print(
        f"eps_L (split) = {low['eps']:.4f}, best threshold = {low['eps_best_threshold']:.4f}, "
        f"exact = {result['upper']['exact']:.4f}, streamed = {low['streamed']}"
    )


if __name__ == "__main__":
    main()
