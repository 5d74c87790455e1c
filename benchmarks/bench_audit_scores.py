"""`auditsel audit-scores` end to end on a large score file, against np.sort of the same scores.

    python benchmarks/bench_audit_scores.py [--games 10000000] [--mu 1.0] [--repeat 1]

Writes n Gaussian scores (class 0 ~ N(0, 1), class 1 ~ N(mu, 1), coins fair) as a CSV and as
an .npz in a temporary folder, then in this one process:

1. baselines: `np.sort` of the same n scores (the one sort no audit can avoid), best of 3; and
   for the CSV, the plain NumPy audit of it: `np.loadtxt` (numpy's C reader) + a sort + one
   scan of the counts above every threshold + one Clopper-Pearson limit at the best threshold;
2. for each file: the command `auditsel audit-scores FILE --json` in a fresh interpreter,
   wall-clock (start-up, imports, reading, the four rules, the estimator panel, printing: what
   the user waits for), and the child's peak memory (ru_maxrss);
3. phases, in this process: reading the file (`read_scores`), the four rules
   (`audit_scores`, one sort shared), the estimator panel (`estimator_panel` on that sort).

It prints each time and its ratio to the baselines (for the CSV: the command, and reading +
rules + panel in this process, over the plain NumPy audit). `--mu 0` audits scores with no signal (every
eps_L 0: the searches must prove that no threshold certifies anything).

Numbers depend on the machine and its load: compare the ratios, measured in one process, not
absolute times from different runs.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def write_files(folder: Path, games: int, mu: float) -> tuple[np.ndarray, Path, Path]:
    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, games).astype(np.int8)
    score = rng.normal(mu * member, 1.0)
    npz = folder / "scores.npz"
    np.savez(npz, score=score, member=member)
    csv = folder / "scores.csv"
    with csv.open("w") as handle:
        handle.write("score,member\n")
        step = 1_000_000
        for i in range(0, games, step):
            rows = zip(score[i : i + step].tolist(), member[i : i + step].tolist())
            handle.write("".join(f"{s!r},{m}\n" for s, m in rows))
    return score, csv, npz


def command(path: Path) -> tuple[float, dict, float]:
    """(seconds, the JSON it printed, peak resident memory of the children so far in GiB)."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "auditsel", "audit-scores", str(path), "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB -> GiB
    return seconds, json.loads(out.stdout), peak


def numpy_audit(path: Path) -> float:
    """The plain NumPy audit of a CSV: load, sort, scan, one Clopper-Pearson limit; eps."""
    from scipy.stats import beta

    table = np.loadtxt(path, delimiter=",", skiprows=1)
    score, member = table[:, 0], table[:, 1]
    m = member[np.argsort(score, kind="stable")]
    ones = np.cumsum(m[::-1])[::-1]  # members at or above each threshold
    zeros = np.arange(len(m), 0, -1) - ones
    i = int(np.argmax(ones / ones[0] - zeros / zeros[0]))
    tpr = beta.ppf(0.025, ones[i], ones[0] - ones[i] + 1) if ones[i] > 0 else 0.0
    fpr = beta.ppf(0.975, zeros[i] + 1, zeros[0] - zeros[i]) if zeros[i] < zeros[0] else 1.0
    return float(np.log(max(tpr, 1e-300) / fpr))


def phases(path: Path) -> dict[str, float]:
    from auditsel.auditing.estimators import estimator_panel
    from auditsel.auditing.lower import audit_scores
    from auditsel.auditing.rules import THRESHOLD_RULES
    from auditsel.auditing.scores import read_scores
    from auditsel.auditing.sorted_scores import SortedScores

    t = {}
    start = time.perf_counter()
    score, member = read_scores(path)
    t["read"] = time.perf_counter() - start
    start = time.perf_counter()
    ss = SortedScores(score, member)
    for rule in THRESHOLD_RULES:
        audit_scores(score, member, 1e-5, rule=rule, sorted_scores=ss)
    t["rules"] = time.perf_counter() - start
    start = time.perf_counter()
    estimator_panel(score, member, 1e-5, sorted_scores=ss)
    t["panel"] = time.perf_counter() - start
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=10_000_000)
    parser.add_argument("--mu", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-audit-scores-") as tmp:
        score, csv, npz = write_files(Path(tmp), args.games, args.mu)
        base = best_of(lambda: np.sort(score), 3)
        plain = best_of(lambda: numpy_audit(csv), 1)
        print(
            f"{args.games:,} games, mu = {args.mu:g}; baselines: np.sort {base:.2f} s, "
            f"np.loadtxt + sort + scan + one CP of the CSV {plain:.2f} s"
        )
        for path in (npz, csv):
            for _ in range(args.repeat):
                seconds, payload, peak = command(path)
                vs_plain = f"  {seconds / plain:4.2f} x loadtxt+sort+scan" if path == csv else ""
                print(
                    f"  auditsel audit-scores {path.name:<11} {seconds:7.2f} s  "
                    f"{seconds / base:6.1f} x np.sort{vs_plain}   peak memory {peak:.2f} GiB   "
                    f"eps_L {payload['eps']:.4f}, gdp_fit {payload['gdp_fit']:.4f}"
                )
        for path in (npz, csv):
            t = phases(path)
            print(
                f"  phases ({path.name}): "
                + ", ".join(f"{k} {v:.2f} s ({v / base:.1f} x)" for k, v in t.items())
            )
            if path == csv:
                total = sum(t.values())
                print(
                    f"  CSV in this process: read + rules + panel {total:.2f} s = "
                    f"{total / plain:.2f} x np.loadtxt + sort + scan + one CP ({plain:.2f} s); "
                    f"reading alone {t['read'] / best_of(lambda: np.loadtxt(csv, delimiter=',', skiprows=1), 1):.2f} x np.loadtxt"
                )


if __name__ == "__main__":
    main()
