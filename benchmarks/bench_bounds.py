"""Speed of the upper-bound panel plus its six-delta curves (what `auditsel run` computes for
result.json `upper` and `upper_curves`), against the code before the bounds registry.

    python benchmarks/bench_bounds.py                 # every case, baseline included
    python benchmarks/bench_bounds.py --no-baseline   # this code only
    python benchmarks/bench_bounds.py --cases dpsgd-poisson

How: each case runs in a fresh Python process (cold caches: the DP-SGD PLD is built inside the
timing), once with this checkout and once with the baseline commit's code extracted by
`git archive BASELINE auditsel attacks` into a temporary folder. The baseline computes what it
computed then: the panel at delta, then the whole panel again at each of the six curve deltas
([PS22] Theorem 6 asking the PLD for delta one order at a time); this code computes each
bound's curve once, at all seven deltas together. Both times are wall-clock and CPU seconds of
the child (imports excluded); the ratio is baseline / this. Target: under 2 s for every
supported base and law on an idle machine (issue: "the bounds panel plus its six-delta curves").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "28bd174"  # main before the pairs/registry refactor
CURVE_DELTAS = (1e-10, 1e-8, 1e-6, 1e-4, 1e-3, 1e-2)
DELTA = 1e-5

CASES = {
    "gaussian-tnb": ("GaussianBase(0.2680511232112941)", "TruncatedNegativeBinomial(0.0, 0.01)"),
    "gaussian-two-point": ("GaussianBase(1.0)", "TwoPoint(1000, 1e-3)"),
    "finite-example1": ("FiniteOutputBase.example1()", "TruncatedNegativeBinomial(1.0, 1e-3)"),
    "dpsgd-pld-tnb": ("DpsgdBase(2.0, 500, 0.1, 'pld')", "TruncatedNegativeBinomial(0.0, 0.01)"),
    "dpsgd-poisson": ("DpsgdBase(1.0, 1000, 0.01)", "Poisson(10.0)"),
    "dpsgd-two-point": ("DpsgdBase(1.0, 1000, 0.01)", "TwoPoint(1000, 1e-3)"),
    "dpsgd-binomial": ("DpsgdBase(1.0, 1000, 0.01)", "Binomial(100, 0.1)"),
}

CHILD = rf"""
import json, sys, time
new = sys.argv[1] == "new"
base_expr, law_expr = sys.argv[2], sys.argv[3]
from auditsel.rounds import Binomial, TruncatedNegativeBinomial, Poisson, TwoPoint
from auditsel.accounting.panel import panel
if new:
    from auditsel.mechanisms import GaussianBase, FiniteOutputBase, DpsgdBase
else:
    from auditsel.mechanisms import GaussianBase, FiniteOutputBase
    from auditsel.accounting.base import DpsgdBase
deltas = {CURVE_DELTAS!r}
delta = {DELTA!r}
base, law = eval(base_expr), eval(law_expr)
w, c = time.perf_counter(), time.process_time()
if new:
    out = panel(base, law, delta, deltas)
    upper, curves = out["upper"], out["curves"]
else:
    upper = panel(base, law, delta)["upper"]
    rows = [panel(base, law, d)["upper"] for d in deltas]
    curves = {{"delta": list(deltas), **{{k: [r[k] for r in rows] for k in rows[0]}}}}
print(json.dumps({{"wall": time.perf_counter() - w, "cpu": time.process_time() - c,
                  "upper": upper, "curves": curves}}))
"""


def _child(code_root: Path, which: str, case: str, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, which, *CASES[case]],
        env=env,
        cwd=code_root,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{which} {case} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _baseline_tree(commit: str, into: Path) -> Path:
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "auditsel", "attacks"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def _max_digit_change(a: dict, b: dict) -> float:
    worst = 0.0
    for key, values in b.items():
        if key == "delta":
            continue
        for x, y in zip(a.get(key, []), values):
            if x is not None and y is not None:
                worst = max(worst, abs(x - y))
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--baseline", default=BASELINE, help="baseline commit (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args(argv)
    print(
        f"{'case':<20} {'this: wall':>11} {'cpu':>7} {'baseline: wall':>15} {'cpu':>7} "
        f"{'ratio (wall)':>12} {'max |change|':>13}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        old_root = None if args.no_baseline else _baseline_tree(args.baseline, Path(tmp))
        for case in args.cases:
            new = _child(ROOT, "new", case, args.timeout)
            line = f"{case:<20} {new['wall']:10.2f}s {new['cpu']:6.2f}s"
            if old_root is not None:
                old = _child(old_root, "old", case, args.timeout)
                change = max(
                    _max_digit_change(old["curves"], new["curves"]),
                    _max_digit_change(
                        {k: [v] for k, v in old["upper"].items()},
                        {k: [v] for k, v in new["upper"].items()},
                    ),
                )
                line += (
                    f" {old['wall']:14.2f}s {old['cpu']:6.2f}s {old['wall'] / new['wall']:11.1f}x"
                    f" {change:13.2e}"
                )
            print(line, flush=True)


if __name__ == "__main__":
    main()
