"""Speed of the whole panel with its curves (every bound, the attack value and the interval:
what `auditsel run` computes for result.json `upper`, `attack`, `interval` and the curves),
against dp_accounting's RepeatAndSelectDpEvent on the same setting, in the same process.

    python benchmarks/bench_bounds.py                       # every case
    python benchmarks/bench_bounds.py --cases dpsgd-poisson # some cases
    python benchmarks/bench_bounds.py --repeat 3            # best of 3 fresh processes

How: each case runs in a fresh Python process (cold caches: the DP-SGD PLD and RDP curves are
built inside the timing, as a user meets them; imports, dp_accounting's included, are done
before any timing). In that process: `panel(pair, law, delta, curve_deltas=...)` at delta = 1e-5
and the six curve deltas (wall and CPU seconds, with the attack's own share), then
dp_accounting's `RdpAccountant` on `RepeatAndSelectDpEvent(SelfComposedDpEvent(
PoissonSampledDpEvent(tau, GaussianDpEvent(sigma)), N), E[K], shape)` at the same seven deltas
(its default orders: the generic RDP bound of [PS22] that dp_accounting implements; TNB and
Poisson laws only, "n/a" for the others). The ratio is ours / dp_accounting's wall time.
Target (issue 19): the attack value and the whole panel with curves under 2 s for any DP-SGD
base and law on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CURVE_DELTAS = (1e-10, 1e-8, 1e-6, 1e-4, 1e-3, 1e-2)
DELTA = 1e-5

CASES = {
    "gaussian-tnb": ("GaussianBase(0.2680511232112941)", "TruncatedNegativeBinomial(0.0, 0.01)"),
    "finite-example1": ("FiniteOutputBase.example1()", "TruncatedNegativeBinomial(1.0, 1e-3)"),
    "dpsgd-issue-row1": ("DpsgdBase(0.8, 3, 0.2, 'pld')", "Poisson(5.0)"),
    "dpsgd-issue-row2": ("DpsgdBase(1.0, 10, 0.1, 'pld')", "Poisson(10.0)"),
    "dpsgd-issue-row3": ("DpsgdBase(1.0, 100, 0.05, 'pld')", "TruncatedNegativeBinomial(1.0, 0.1)"),
    "dpsgd-pld-tnb": ("DpsgdBase(2.0, 500, 0.1, 'pld')", "TruncatedNegativeBinomial(0.0, 0.01)"),
    "dpsgd-poisson": ("DpsgdBase(1.0, 1000, 0.01)", "Poisson(10.0)"),
    "dpsgd-two-point": ("DpsgdBase(1.0, 1000, 0.01)", "TwoPoint(1000, 1e-3)"),
    "dpsgd-binomial": ("DpsgdBase(1.0, 1000, 0.01)", "Binomial(100, 0.1)"),
    "dpsgd-full-batch": ("DpsgdBase(1.0, 10, 1.0)", "Poisson(4.0)"),
}

CHILD = rf"""
import json, math, sys, time
import dp_accounting as dpa
from dp_accounting.dp_event import RepeatAndSelectDpEvent
from auditsel.accounting.panel import panel
from auditsel.mechanisms import DpsgdBase, FiniteOutputBase, GaussianBase
from auditsel.rounds import Binomial, Poisson, TruncatedNegativeBinomial, TwoPoint
deltas, delta = {CURVE_DELTAS!r}, {DELTA!r}
pair, law = eval(sys.argv[1]), eval(sys.argv[2])
w, c = time.perf_counter(), time.process_time()
out = panel(pair, law, delta, curve_deltas=deltas)
ours = {{"wall": time.perf_counter() - w, "cpu": time.process_time() - c,
        "attack": out.seconds.get("attack", 0.0), "interval": out.interval.to_dict(),
        "attack_eps": out.attack["epsilon"]}}
theirs = None
shape = {{"tnb": getattr(law, "eta", None), "poisson": math.inf}}.get(law.kind)
if isinstance(pair, DpsgdBase) and shape is not None:
    step = dpa.GaussianDpEvent(pair.noise_multiplier)
    if pair.sample_rate < 1:
        step = dpa.PoissonSampledDpEvent(pair.sample_rate, step)
    event = RepeatAndSelectDpEvent(dpa.SelfComposedDpEvent(step, pair.steps), law.mean, shape)
    w, c = time.perf_counter(), time.process_time()
    eps = [dpa.rdp.RdpAccountant().compose(event).get_epsilon(d) for d in (delta,) + deltas]
    theirs = {{"wall": time.perf_counter() - w, "cpu": time.process_time() - c, "eps": eps[0],
              "generic_rdp": out.upper["generic_rdp"]}}
print(json.dumps({{"ours": ours, "dp_accounting": theirs}}))
"""


def _child(case: str, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, *CASES[case]],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--repeat", type=int, default=1, help="fresh processes per case (best kept)")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args(argv)
    print(
        f"{'case':<18} {'panel wall':>10} {'cpu':>6} {'attack':>7} {'interval':>17} "
        f"{'dp_acc wall':>11} {'ratio':>7}  eps: dp_acc RDP / our generic_rdp"
    )
    for case in args.cases:
        runs = [_child(case, args.timeout) for _ in range(max(1, args.repeat))]
        best = min(runs, key=lambda r: r["ours"]["wall"])
        ours, theirs = best["ours"], best["dp_accounting"]
        iv = ours["interval"]
        upper = "inf" if iv["upper"] is None else f"{iv['upper']:.3f}"
        line = (
            f"{case:<18} {ours['wall']:9.2f}s {ours['cpu']:5.2f}s {ours['attack']:6.2f}s "
            f"[{iv['lower']:.3f}, {upper:>6}]"
        )
        if theirs is None:
            line += f" {'n/a':>11} {'n/a':>7}"
        else:
            their_wall = min(r["dp_accounting"]["wall"] for r in runs)
            line += (
                f" {their_wall:10.2f}s {ours['wall'] / their_wall:6.1f}x  "
                f"{theirs['eps']:.4f} / {theirs['generic_rdp']:.4f}"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
