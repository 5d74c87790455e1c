"""How far the route's gradient canary moves a hand-written zoo loop's release, game by game.

    python benchmarks/zoo_canary_separation.py per_tensor_clip noise_before_clip --games 400

For each pipeline of `auditsel.reproductions.bugzoo` whose loop calls `canary.examples`: the
GradientCanary of `canary="both"` (`auditsel.pipelines.default_canaries`), `--games` games
(seeds 1000, 1001, ...; the canary in every other one), and the separation d' (the difference of
the means in units of the standard deviation without the canary) of three scores: the canary's
own score (its move summed over every coordinate) and its first coordinate's move alone, per
unit of the released lr x clip, and the canary's own score per unit of lr; with each, the tail
of the games without the canary (excess kurtosis, and the fraction more than 3 standard
deviations above their mean: 0.0013 for a normal law), which a large audit's thresholds read.
Where the canary reads the release's noise (`GradientCanary.noise`: reference coordinates),
the standard deviation of the log of that reading per unit of lr, clip and lr x clip over the
games: the learned score keeps the canary's score in the units where it is least
(`auditsel.pipelines.learned_scores`). About 30 CPU s per pipeline at 400 games.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from scipy import stats

from auditsel.pipelines.canaries import GradientCanary
from auditsel.pipelines.default_canaries import default_canaries
from auditsel.reproductions import bugzoo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pipelines", nargs="+", choices=bugzoo.PIPELINES)
    parser.add_argument("--games", type=int, default=400)
    args = parser.parse_args()
    for name in args.pipelines:
        m = bugzoo.module(name)
        start = time.process_time()
        _, canary = default_canaries(m.tune, m.TRAIN)
        first = GradientCanary(coordinate=canary.coordinate, initial=canary.initial)
        rows = []
        for i in range(args.games):
            seed = 1000 + i
            torch.manual_seed(seed)
            release = m.tune(
                m.TRAIN, seed, canary.for_game(i % 2 == 0, np.random.default_rng(seed))
            )
            if "model" in release:
                lr, clip = release["lr"], release["clip"]
                own = canary.score(release)
                noise = canary.noise(release) or np.nan
                rows.append(
                    (
                        i % 2 == 0,
                        own / (lr * clip),
                        first.score(release) / (lr * clip),
                        own / lr,
                        noise / lr,
                        noise / clip,
                        noise / (lr * clip),
                    )
                )
        table = np.array(rows)
        member = table[:, 0] == 1
        for column, what in (
            (1, "summed score / (lr x clip)"),
            (2, "first coordinate's score / (lr x clip)"),
            (3, "summed score / lr"),
        ):
            a, o = table[member, column], table[~member, column]
            z = (o - o.mean()) / o.std()
            print(
                f"{name}: {what}: d' {(a.mean() - o.mean()) / o.std():.2f}, without the canary "
                f"excess kurtosis {stats.kurtosis(z):.2f}, P(z > 3) {np.mean(z > 3):.4f}"
            )
        if np.all(np.isfinite(table[:, 4:])):
            spreads = ", ".join(
                f"/ {unit} {np.log(table[:, column]).std():.3f}"
                for column, unit in ((4, "lr"), (5, "clip"), (6, "(lr x clip)"))
            )
            print(f"{name}: the noise reading's log standard deviation {spreads}")
        print(f"{name}: {canary.describe()}, {time.process_time() - start:.0f} CPU s", flush=True)


if __name__ == "__main__":
    main()
