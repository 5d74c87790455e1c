"""The audit of a 10^7-game run: one sort for every rule, against a pinned baseline (same process).

    python benchmarks/bench_audit.py [--trials 10000000] [--repeat 1]

Plays the quickstart's reduced game ([XWW24] Figure 5: Gaussian base calibrated to eps_B = 1,
TNB(0, 0.01)) once, then times, on the same scores:
  before: `benchmarks/baselines/lower_per_rule_sort` (the audit at commit 28bd174, pinned with
          its own helpers: every rule and the best threshold sort their own copy of the
          scores; the split takes the first half of the trials);
  after:  `auditsel.auditing.lower.audit_scores` with `Split(seed=0)` (one `SortedScores` serves
          the split rule, the best threshold and the GDP fit; the split is a seeded half of each
          class), and the full set of valid rules (split, bonferroni, bonferroni_all) on that
          one sort.
The two splits pick different pilots, so their eps_L differ in the last digits; the best
threshold (every threshold on all trials, no split) is the same statistic in both and is
checked equal. Prints each time and the ratio before/after (ratios are what to compare across
machines; the absolute times depend on the machine's load).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from baselines.lower_per_rule_sort import lower as before

from auditsel.auditing.lower import audit_scores
from auditsel.auditing.rules import BonferroniAll, BonferroniGrid, Split
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.experiments.config import default_config_path, load_config
from auditsel.experiments.experiment import protocol_and_proxy
from auditsel.games.engine import run_game


def timed(fn, repeat):
    """(best wall seconds, best CPU seconds of this process, result) over `repeat` calls."""
    wall, cpu, out = np.inf, np.inf, None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = min(wall, time.perf_counter() - w), min(cpu, time.process_time() - c)
    return wall, cpu, out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    spec = load_config(default_config_path())
    protocol, proxy = protocol_and_proxy(spec)
    rec = run_game(protocol, proxy, args.trials, 0)
    s, m, d = rec.scores, rec.member, spec.delta
    t_before, c_before, b_old = timed(
        lambda: before.audit_scores(s, m, d, rule="split"), args.repeat
    )
    t_after, c_after, b_new = timed(lambda: audit_scores(s, m, d, rule=Split(seed=0)), args.repeat)
    assert b_old.eps_best_threshold == b_new.eps_best_threshold, (b_old, b_new)

    def all_rules():
        ss = SortedScores(s, m)
        return [
            audit_scores(s, m, d, rule=r, sorted_scores=ss).eps
            for r in (Split(seed=0), BonferroniGrid(seed=0), BonferroniAll())
        ]

    t_all, c_all, eps_all = timed(all_rules, args.repeat)
    print(
        f"{args.trials:,} games, eps_L (split) before {b_old.eps:.4f} after {b_new.eps:.4f}, "
        f"best threshold = {b_new.eps_best_threshold:.4f} (both)"
    )
    print(
        f"split + best threshold, wall   before {t_before:7.2f} s   after {t_after:7.2f} s   ratio {t_before / t_after:5.2f}x"
    )
    print(
        f"split + best threshold, CPU    before {c_before:7.2f} s   after {c_after:7.2f} s   ratio {c_before / c_after:5.2f}x"
    )
    print(
        f"three valid rules on one sort  {t_all:7.2f} s wall, {c_all:.2f} s CPU   (split, bonferroni, bonferroni_all = "
        f"{', '.join(f'{e:.4f}' for e in eps_all)})"
    )


if __name__ == "__main__":
    main()
