"""The exact threshold searches (`search_rows`) against the walk before batching, in one process.

    python benchmarks/bench_threshold_search.py [--games 100000 10000000] [--mu 0.5] [--repeat 3]

For each n: n Gaussian scores (class 0 ~ N(0, 1), class 1 ~ N(mu, 1), coins fair), sorted once;
then, alternating the two searches (today's, and the walk of commit bd35971 pinned in
`baselines.search_sequential`, one vectorised pass per block opened), best of `--repeat`:

1. `audit_scores` on the sorted scores (the rule's searches, the best threshold and the GDP
   fit: what the CLI pays after the sort), the time spent inside `search_rows` alone, and
   its costliest call (at 10^7 Gaussian scores, the GDP mu_L search in '>', where the
   walk before opened about a thousand blocks one pass each);
2. below 200,000 games, `estimator_panel` after it (the panel the CLI runs by default there:
   its multisplits and GDP fit call the searches about 50 times).

It prints each time (CPU seconds of this process, `time.process_time`: the searches are
single-threaded, and CPU time moves less than wall time on a shared machine), the ratio
today / before, and checks that both return the same numbers.
`--mu 0` gives scores with no signal, where the GDP mu is flat over every threshold. Numbers
depend on the machine and its load: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from baselines import search_sequential

from auditsel.auditing import gdp_fitting, threshold_search
from auditsel.auditing.estimators import estimator_panel
from auditsel.auditing.lower import audit_scores
from auditsel.auditing.rules import Split
from auditsel.auditing.sorted_scores import SortedScores

SEARCHES = {"today": threshold_search.search_rows, "before": search_sequential.search_rows}
PANEL_BELOW = 200_000


class Timed:
    """search_rows of one version, timing each call and keeping its answers."""

    def __init__(self, search):
        self.search, self.seconds, self.answers, self.calls = search, 0.0, [], []

    def __call__(self, *args, **kwargs):
        start = time.process_time()
        out = self.search(*args, **kwargs)
        self.calls.append(time.process_time() - start)
        self.seconds += self.calls[-1]
        self.answers.append(out)
        return out


def _run(version: str, scores, member, ss: SortedScores, panel: bool) -> dict:
    timed = Timed(SEARCHES[version])
    threshold_search.search_rows = gdp_fitting.search_rows = timed
    ss._memo.clear()  # keep the sort, forget the rules' results (the panel reuses them)
    try:
        start = time.process_time()
        lb = audit_scores(scores, member, 1e-5, rule=Split(seed=3), sorted_scores=ss)
        audit = time.process_time() - start
        searches, per_call = timed.seconds, list(timed.calls)
        start = time.process_time()
        entries = estimator_panel(scores, member, 1e-5, seed=3, sorted_scores=ss) if panel else {}
        panel_s = time.process_time() - start if panel else math.nan
    finally:
        threshold_search.search_rows = gdp_fitting.search_rows = SEARCHES["today"]
    numbers = (lb.eps, lb.eps_best_threshold, lb.gdp_fit, lb.threshold)
    numbers += tuple(e.value for e in entries.values())
    return {
        "audit": audit,
        "searches": searches,
        "panel": panel_s,
        "calls": len(timed.answers),
        "per_call": per_call,
        "answers": timed.answers,
        "numbers": numbers,
    }


def _same(a, b) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(np.asarray(x, dtype=float), np.asarray(y, dtype=float), equal_nan=True)
        for x, y in zip(a, b)
    )


def bench(n: int, mu: float, repeat: int) -> None:
    rng = np.random.default_rng(1)
    member = rng.integers(0, 2, n).astype(np.int8)
    scores = rng.standard_normal(n) + mu * member
    ss = SortedScores(scores, member)
    ss.by_coin()
    panel = n < PANEL_BELOW
    best: dict[str, dict] = {}
    for _ in range(repeat):
        for version in ("before", "today"):  # alternating, best of repeat
            got = _run(version, scores, member, ss, panel)
            if version in best:
                assert _same(got["answers"], best[version]["answers"]), version
                for key in ("audit", "searches", "panel"):
                    got[key] = min(got[key], best[version][key])
                old = best[version]["per_call"]
                got["per_call"] = [min(a, b) for a, b in zip(old, got["per_call"])]
            best[version] = got
    same = _same(best["today"]["answers"], best["before"]["answers"])
    same = same and _same(best["today"]["numbers"], best["before"]["numbers"])
    print(f"n = {n:,}, mu = {mu}: {best['today']['calls']} search calls; same numbers: {same}")
    print("| CPU seconds | today | before | today / before |")
    print("|---|---:|---:|---:|")
    for key, label in (
        ("searches", "inside search_rows (audit)"),
        ("audit", "audit_scores after the sort"),
        ("panel", "estimator_panel after the audit"),
    ):
        t, b = best["today"][key], best["before"][key]
        if not math.isnan(t):
            print(f"| {label} | {t:.4f} | {b:.4f} | {t / b:.2f} |")
    j = int(np.argmax(best["before"]["per_call"]))  # the audit's costliest call before
    t, b = best["today"]["per_call"][j], best["before"]["per_call"][j]
    print(f"| the audit's costliest call (call {j + 1}) | {t:.4f} | {b:.4f} | {t / b:.2f} |")
    if not same:
        raise SystemExit("the two searches disagree")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=float, nargs="+", default=[1e5, 1e7])
    parser.add_argument("--mu", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for n in args.games:
        bench(int(n), args.mu, args.repeat)
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
