"""Cost of the replay check of a pipeline audit (issue 26): its seconds against the whole audit.

    python benchmarks/bench_replay_check.py                       # tutorial pipeline, 1,000 games
    python benchmarks/bench_replay_check.py --games 1000 --jobs 2 --pipeline numpy

The tutorial's Opacus pipeline (docs/tutorials/audit-your-pipeline.md, saved as tuning.py from
the page's blocks) or a tiny numpy pipeline is audited through the CLI
(`auditsel audit-pipeline ... --games N --jobs J`) into a fresh folder; result.json records the
seconds of the replay check (`pipeline.reproducibility.seconds`: the digests of data and canary,
four games in the CLI's process and, with J > 1, two on the backend, whose start-up the games
then reuse) and of the whole audit (`seconds`). Prints both, their ratio and the load average.
Then the same command again into the same folder: it must resume every game.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--pipeline", choices=sorted(COMMANDS), default="opacus")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    source = tutorial_module() if args.pipeline == "opacus" else NUMPY
    (folder / "tuning.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "auditsel", "audit-pipeline", *COMMANDS[args.pipeline]]
    argv += ["--games", str(args.games), "--jobs", str(args.jobs), "--out", "out", "--quiet"]
    before = os.getloadavg()
    start = time.perf_counter()
    subprocess.run([*argv, "--no-progress"], cwd=folder, env=env, check=True)
    wall = time.perf_counter() - start
    after = os.getloadavg()
    result = json.loads((folder / "out" / "result.json").read_text())
    check = result["pipeline"]["reproducibility"]
    print(
        f"{args.pipeline} pipeline, {args.games:,} games, --jobs {args.jobs}: audit "
        f"{result['seconds']:.2f} s (command {wall:.2f} s wall), replay check "
        f"{check['seconds']:.3f} s ({check['plays']} plays) = "
        f"{check['seconds'] / result['seconds']:.2%} of the audit; eps_L "
        f"{result['lower']['eps']:.4f}; load average {before[0]:.2f} -> {after[0]:.2f}"
    )
    again = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, check=True)
    print("rerun into the same --out:", again.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
