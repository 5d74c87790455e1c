"""Cold cost of the bounds beside a run (issue 29, fixed costs): `results.fields._upper_panel` (the
upper panel with the curves at the six curve deltas, the exact privacy curve and the attack
value with its curve: what `auditsel run` computes in a thread beside the game), in
this tree against a baseline commit, both cold.

    python benchmarks/bench_upper_panel.py                  # against main, best of 3
    python benchmarks/bench_upper_panel.py --baseline f88395f --repeat 5

How: each measurement is a fresh Python process (imports done first, outside the timing;
every cache cold), the baseline's and this tree's alternating, so that the machine's load hits
both alike (`baselines.commits`: the baseline commit's own files). In that process:
`_upper_panel` as `auditsel run` calls it (the attack in its thread beside the bounds: CPU
seconds of the process and wall seconds), then, in a second fresh process, its stages one
after another without threads (CPU seconds each: the bounds of the registry, the attack, the
attack's curve on the 60-point eps grid, the winner's exact curve). Two settings: the
quickstart (Gaussian base at eps_B = 1, delta = 1e-5, TNB(eta 0, nu 0.01), E[K] 21.5) and the
geometric law nu = 1e-3 (TNB(eta 1, nu 1e-3), E[K] 1000). Printed: the best of `--repeat` of
each number and the ratio baseline / this tree (above 1: this tree is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from baselines.commits import ROOT, checkout, run_in

SETTINGS = {
    "quickstart": "{'kind': 'tnb', 'eta': 0.0, 'nu': 0.01}",
    "geometric-1e-3": "{'kind': 'tnb', 'eta': 1.0, 'nu': 0.001}",
}

WHOLE = r"""
import json, sys, time, yaml
from auditsel.results import fields
from auditsel.experiments.config import parse_config
from auditsel.selection import winner_law
raw = yaml.safe_load(open(sys.argv[1]))
raw["rounds"] = eval(sys.argv[2])
spec = parse_config(raw)
winner = winner_law(spec.base.reduced(), spec.rounds)
import auditsel.accounting.panel  # the imports outside the timing (they load where it runs)
c, w = time.process_time(), time.perf_counter()
fields._upper_panel(spec.base, spec.rounds, spec.delta, True, winner)
print(json.dumps({"cpu": time.process_time() - c, "wall": time.perf_counter() - w}))
"""

STAGES = r"""
import json, sys, time, yaml
import numpy as np
from auditsel.results import fields
from auditsel.experiments.config import parse_config
from auditsel.selection import winner_law
from auditsel.accounting.attack import attack
from auditsel.accounting.exact import privacy_curve
from auditsel.accounting.profile import base_profile
from auditsel.accounting.registry import BOUNDS
raw = yaml.safe_load(open(sys.argv[1]))
raw["rounds"] = eval(sys.argv[2])
spec = parse_config(raw)
pair, law = spec.base, spec.rounds
winner = winner_law(pair.reduced(), law)
deltas = np.array((spec.delta,) + fields.CURVE_DELTAS)
out, T = {}, time.process_time
t = T(); prof = base_profile(pair); out["base profile"] = T() - t
for b in BOUNDS:
    if b.supports(pair, law):
        t = T(); b.curve(pair, law, deltas, prof); out[b.key] = T() - t
t = T(); hit = attack(pair, law, deltas); out["attack"] = T() - t
grid = np.linspace(0.0, 1.5 * max(hit.epsilons[0], 1.0), fields.CURVE_POINTS)
t = T(); hit.delta(grid); out["attack curve"] = T() - t
t = T(); privacy_curve(winner, grid); out["exact curve"] = T() - t
out["stages, summed"] = sum(out.values())
print(json.dumps(out))
"""


def _measure(tree: Path, script: str, rounds: str) -> dict[str, float]:
    config = tree / "auditsel" / "configs" / "quickstart.yaml"
    done = run_in(tree, [sys.executable, "-c", script, str(config), rounds])
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _best(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: min(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="main", help="commit to compare with (main)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=list(SETTINGS))
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at the start; baseline {args.baseline}")
    with checkout(args.baseline) as base:
        for name in args.settings:
            runs: dict[tuple[str, str], list[dict[str, float]]] = {}
            for _ in range(args.repeat):
                for label, tree in (("baseline", base), ("this tree", ROOT)):
                    for part, script in (("whole", WHOLE), ("stages", STAGES)):
                        got = _measure(tree, script, SETTINGS[name])
                        runs.setdefault((label, part), []).append(got)
            whole = {k: _best(runs[k, "whole"]) for k in ("baseline", "this tree")}
            stages = {k: _best(runs[k, "stages"]) for k in ("baseline", "this tree")}
            print(f"\n{name} (best of {args.repeat}; seconds; ratio = baseline / this tree)")
            print(f"{'':<28}{'baseline':>10}{'this tree':>11}{'ratio':>8}")
            for key in ("cpu", "wall"):
                a, b = whole["baseline"][key], whole["this tree"][key]
                print(f"{'_upper_panel ' + key:<28}{a:>10.3f}{b:>11.3f}{a / b:>7.2f}x")
            for key in stages["baseline"]:
                a, b = stages["baseline"][key], stages["this tree"].get(key, float("nan"))
                ratio = f"{a / b:>7.2f}x" if b > 0.0005 else "      -"
                print(f"{key + ' (CPU)':<28}{a:>10.3f}{b:>11.3f}{ratio}")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
