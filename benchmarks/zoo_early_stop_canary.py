"""When the zoo's `early_stop_loss` stops, with the route's input canary in and out.

    python benchmarks/zoo_early_stop_canary.py --games 150 [--outlier 1000] [--side 0.5]

The InputCanary of `canary="both"` (`auditsel.pipelines.default_canaries.outlier_example`, with
its module's OUTLIER and SIDE replaced by `--outlier` and `--side`: `--side 0` is the far
feature alone, the canary of before issue 36's loss item), `--games` tuning runs in each world
(seeds 5000, 5001, ..., torch seeded alike), and the counts of the released winner's `steps`
(0: K = 0, no run; the earliest stop is PATIENCE + 1 = 3; 20 without the canary and 22 with it:
no stop, Opacus's loader taking ceil(rows / BATCH) steps an epoch, 401 rows with the canary).
About 30 CPU s per 200 games of both worlds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from auditsel.pipelines import default_canaries
from auditsel.reproductions.bugzoo import early_stop_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, default=150)
    parser.add_argument("--outlier", type=float, default=default_canaries.OUTLIER)
    parser.add_argument("--side", type=float, default=default_canaries.SIDE)
    args = parser.parse_args()
    default_canaries.OUTLIER, default_canaries.SIDE = args.outlier, args.side
    person = default_canaries.outlier_example(early_stop_loss.TRAIN)
    start = time.process_time()
    for member in (True, False):
        canary = person.for_game(member, np.random.default_rng(0))
        data = canary.prepare(early_stop_loss.TRAIN)
        steps = []
        for seed in range(5000, 5000 + args.games):
            torch.manual_seed(seed)
            steps.append(early_stop_loss.tune(data, seed, canary)["steps"])
        counts = np.bincount(steps, minlength=early_stop_loss.MAX_STEPS + 1)
        early = int(counts[1 : early_stop_loss.PATIENCE + 2].sum())
        print(
            f"canary {'in ' if member else 'out'} (outlier {args.outlier:g}, side {args.side:g}):"
            f" steps 0..{len(counts) - 1} {counts.tolist()}; stopped at the earliest"
            f" {early} of {args.games - int(counts[0])} with K >= 1",
            flush=True,
        )
    print(f"{time.process_time() - start:.0f} CPU s")


if __name__ == "__main__":
    main()
