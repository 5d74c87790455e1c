"""Cost of the replay check of a pipeline audit (issue 26), against the same audit without it.

    python benchmarks/bench_replay_check.py                       # tutorial pipeline, 1,000 games
    python benchmarks/bench_replay_check.py --games 1000 --jobs 2 --pipeline numpy --repeats 3

The tutorial's Opacus pipeline (docs/tutorials/audit-your-pipeline.md, saved as tuning.py from
the page's blocks) or a cheap numpy pipeline is audited with `audit_pipeline` (the file imported
by path as the CLI does, `out_dir` written: checkpoints, panel, report, plots), each run in a
fresh process: with the replay check, and with the check replaced by a stub (the harness does
this; there is no option to skip the check). Prints the wall seconds the check itself took
(`pipeline.reproducibility.seconds`: the digests of data and canary, four plays and, with
J > 1, two more on a second worker, the workers' start-up included, which the games then
reuse), the CPU seconds of its plays against the games' (`play_cpu_seconds`, no start-up),
the audits' wall
seconds (the least of --repeats runs each), the difference and its share of the audit, and the
load average. Then the CLI reruns the audit into a folder it wrote: it must resume every game.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from test_docs_pipeline import tutorial_module  # the page, as the tests run it

NUMPY = """import numpy as np

DATA = (np.random.default_rng(0).normal(size=(400, 30)), np.zeros(400))


def tune(data, seed, canary):
    x = np.asarray(data[0])
    rng = np.random.default_rng(seed)
    return float(rng.normal() + x[-1].sum() / 10)


def score(release, canary):
    return release
"""
COMMANDS = {
    "opacus": [
        "tuning.py:tune",
        "--score",
        "tuning.py:score",
        "--data",
        "tuning.py:train_data",
        "--canary",
        "{kind: gradient, coordinate: 30}",
    ],
    "numpy": [
        "tuning.py:tune",
        "--score",
        "tuning.py:score",
        "--data",
        "tuning.py:DATA",
        "--canary",
        "{kind: input, x: [" + ", ".join(["1.0"] * 30) + "], y: 1}",
    ],
}


RUNNER = """
import json, sys, time
from auditsel import GradientCanary, InputCanary, audit_pipeline
from auditsel.pipelines import pipeline
from auditsel.pipelines.load import load_canary
from auditsel.pipelines.replay_check import ReplayReport
from auditsel.pipelines.user_code import import_file

games, jobs, data_name, canary_text, check = sys.argv[1:6]
if check == "off":  # the harness's stub: the audit without the replay check
    stub = ReplayReport((), 0, (), False, False, 0.0, "", "")
    pipeline.check_replay = lambda *a, **k: stub
    pipeline.check_backend = lambda game, seed, report, **k: report
    pipeline.check_unchanged = lambda game, report: []
module = import_file("tuning.py", "tune")
start = time.perf_counter()
audit = audit_pipeline(module.tune, module.score, data=getattr(module, data_name),
                       canary=load_canary(canary_text), games=int(games), delta=1e-5,
                       jobs=int(jobs), out_dir="out-" + check)
wall = time.perf_counter() - start
record = audit.result["pipeline"]
print(json.dumps({"wall": wall, "check": record["reproducibility"]["seconds"],
                  "check_cpu": record["reproducibility"]["play_cpu_seconds"],
                  "game_cpu": record["game_cpu_seconds"], "eps": audit.eps}))
"""


def _run(folder: Path, env: dict, args, check: str) -> dict:
    command = COMMANDS[args.pipeline]
    argv = [sys.executable, "-c", RUNNER, str(args.games), str(args.jobs)]
    argv += [command[4].split(":")[1], command[6], check]
    shutil.rmtree(folder / f"out-{check}", ignore_errors=True)
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--pipeline", choices=sorted(COMMANDS), default="opacus")
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI resume check")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    source = tutorial_module() if args.pipeline == "opacus" else NUMPY
    (folder / "tuning.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = os.getloadavg()
    runs: dict[str, list[dict]] = {"on": [], "off": []}
    for _ in range(args.repeats):
        for check in ("on", "off"):  # interleaved: both see the same load
            runs[check].append(_run(folder, env, args, check))
    after = os.getloadavg()
    on = min(r["wall"] for r in runs["on"])
    off = min(r["wall"] for r in runs["off"])
    check = min(r["check"] for r in runs["on"])
    check_cpu = min(r["check_cpu"] for r in runs["on"])
    game_cpu = min(r["game_cpu"] for r in runs["on"])
    # a worker's first game pays the pipeline's start-up (imports, first calls): with the
    # check, the check pays it; the CPU it adds is what the audit with it spends beyond the
    # audit without it
    added = min(r["game_cpu"] + r["check_cpu"] for r in runs["on"]) - min(
        r["game_cpu"] for r in runs["off"]
    )
    assert runs["on"][0]["eps"] == runs["off"][0]["eps"]  # the check changes no number
    print(
        f"{args.pipeline} pipeline, {args.games:,} games, jobs={args.jobs}, least of "
        f"{args.repeats}: audit {on:.2f} s with the check, {off:.2f} s without "
        f"(difference {on - off:+.2f} s = {(on - off) / off:+.1%}); the check itself "
        f"{check:.3f} s wall = {check / on:.2%} of the audit (workers' start-up included), its "
        f"plays {check_cpu:.3f} CPU s = {check_cpu / game_cpu:.2%} of the games' "
        f"{game_cpu:.2f} CPU s; CPU added by the check (games + check, with it, minus games "
        f"without it) {added:+.3f} s = {added / game_cpu:+.2%}; eps_L {runs['on'][0]['eps']:.4f}; "
        f"load average {before[0]:.2f} -> {after[0]:.2f}"
    )
    if args.no_cli:
        return
    argv = [sys.executable, "-m", "auditsel", "audit-pipeline", *COMMANDS[args.pipeline]]
    argv += ["--games", str(args.games), "--jobs", str(args.jobs), "--out", "cli", "--quiet"]
    subprocess.run([*argv, "--no-progress"], cwd=folder, env=env, check=True)
    again = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, check=True)
    print("CLI rerun into the same --out:", again.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
