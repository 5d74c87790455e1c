"""Which side of the any-score interval is wide, per setting (issue 37, the closing note's
evidence).

For each setting of `auditsel reproduce interval-widths` (the accountants table's tuning cells,
the realistic grid, the 16 drawn ones; delta 1e-5) and 16 more drawn with another seed
(`--new`): the lower end (the attack, `interval.interval_attack`, with one run's epsilon
charged with the K = 0 mass), each rigorous bound for any score (`generic_rdp`, [KRW24]'s
profile shift alone, the layered profile bound, the two-sided layered bound) and, with
`--fine`, the two-sided bound read on a PLD grid of 3e-5 (the finest dp_accounting grid this
machine affords; a pessimistic estimate, so still an upper bound), each with its seconds;
then the committed width (from results/papers/interval-widths/rows.json) against the width with
the default panel now, as shares of the upper end, and how much of the change came from each
end.

    PYTHONPATH=$PWD nice -n 5 python benchmarks/width_sides.py [--new] [--fine] [--rows a:b]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import auditsel.accounting.two_sided as two_sided_module
from auditsel.accounting.interval import interval_attack, tuning_interval
from auditsel.accounting.profile import base_profile, layered_epsilon, profile_epsilon
from auditsel.accounting.registry import bound
from auditsel.accounting.two_sided import two_sided_epsilon
from auditsel.mechanisms import DpsgdBase
from auditsel.reproductions.interval_widths import DELTA, _law_name, random_settings, settings
from auditsel.rounds import Poisson

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "results" / "papers" / "interval-widths" / "rows.json"
#: the seed of the 16 settings no committed result has seen (issue 37's "16 new")
NEW_SEED = 3737


@contextmanager
def fine_grid(step: float):
    """The two-sided bound's PLDs on `step` (patched for the measurement only)."""
    keep = two_sided_module.profile_step
    two_sided_module.profile_step = lambda *args: step
    try:
        yield
    finally:
        two_sided_module.profile_step = keep


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def measure(group: str, base: DpsgdBase, law, fine: bool) -> dict:
    row: dict = {"group": group, "sigma": base.noise_multiplier, "N": base.steps}
    row.update({"tau": base.sample_rate, "K": _law_name(law)})
    hit, row["s_attack"] = _timed(lambda: interval_attack(base, law, [DELTA]))
    row["attack"] = hit.epsilon
    profile, _ = _timed(lambda: base_profile(base))
    row["generic_rdp"] = float(bound("generic_rdp").curve(base, law, [DELTA], profile)[0])
    krw = profile_epsilon(base, law, [DELTA], profile)
    row["krw24"] = float(krw[0])
    row["layered"] = float(layered_epsilon(base, law, [DELTA], profile, start=krw)[0])
    two, row["s_two_sided"] = _timed(lambda: float(two_sided_epsilon(base, law, DELTA)[0]))
    row["two_sided"] = two
    if fine:
        with fine_grid(3e-5):
            row["two_sided_3e-5"] = float(two_sided_epsilon(base, law, DELTA)[0])
    iv, row["s_interval"] = _timed(lambda: tuning_interval(base, law, DELTA))
    _, row["s_interval_warm"] = _timed(lambda: tuning_interval(base, law, DELTA))
    row["lower"], row["upper"] = iv.lower, iv.upper
    row["upper_source"] = (iv.upper_source or "").split(" ")[0]
    row["width_pct"] = 100 * (iv.upper - iv.lower) / iv.upper
    return row


def _key(r: dict) -> tuple:
    return (r["sigma"], r["N"], r["tau"], r["K"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--new", action="store_true", help="the 16 settings drawn with NEW_SEED")
    ap.add_argument("--fine", action="store_true", help="also the two-sided bound at 3e-5")
    ap.add_argument("--rows", default=":", help="a slice a:b of the settings")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    if args.new:
        todo = [
            ("new", DpsgdBase(s, n, q, "pld"), Poisson(m))
            for s, n, q, m in random_settings(NEW_SEED)
        ]
    else:
        todo = settings()
    a, b = (int(x) if x else None for x in args.rows.split(":"))
    old = {_key(r): r for r in json.loads(COMMITTED.read_text())} if COMMITTED.exists() else {}
    rows = []
    cols = ["attack", "generic_rdp", "krw24", "layered", "two_sided"]
    cols += ["two_sided_3e-5"] if args.fine else []
    print(
        "| group | sigma | N | tau | K | "
        + " | ".join(cols)
        + " | upper (source) | width % | committed width % | from lower | from upper |"
        " s attack | s two_sided | s interval warm |"
    )
    print("|" + "---|" * (len(cols) + 14))
    for group, base, law in todo[a:b]:
        r = measure(group, base, law, args.fine)
        before = old.get(_key(r)) if group != "new" else None
        if before is not None:
            up0, lo0 = before["interval_upper"], before["attack"]
            r["committed_width_pct"] = 100 * (up0 - lo0) / up0
            # shares of the committed upper end closed by each end
            r["from_lower_pct"] = 100 * (r["lower"] - lo0) / up0
            r["from_upper_pct"] = 100 * (up0 - r["upper"]) / up0
        rows.append(r)
        f = lambda k: f"{r[k]:.2f}" if k in r else "-"
        print(
            f"| {group} | {r['sigma']:g} | {r['N']} | {r['tau']:g} | {r['K']} | "
            + " | ".join(f"{r[c]:.4f}" for c in cols)
            + f" | {r['upper']:.4f} ({r['upper_source']}) | {r['width_pct']:.2f} | "
            f"{f('committed_width_pct')} | {f('from_lower_pct')} | {f('from_upper_pct')} | "
            f"{r['s_attack']:.2f} | {r['s_two_sided']:.2f} | {r['s_interval_warm']:.2f} |",
            flush=True,
        )
    for group in dict.fromkeys(r["group"] for r in rows):
        w = [r["width_pct"] for r in rows if r["group"] == group]
        print(f"- {group} ({len(w)}): width median {statistics.median(w):.2f}%, max {max(w):.2f}%")
    w = [r["width_pct"] for r in rows]
    print(f"- all ({len(w)}): width median {statistics.median(w):.2f}%, max {max(w):.2f}%")
    t = [r["s_interval_warm"] for r in rows]
    print(f"- tuning_interval warm: median {statistics.median(t):.2f} s, max {max(t):.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    np.seterr(all="warn")


if __name__ == "__main__":
    main()
