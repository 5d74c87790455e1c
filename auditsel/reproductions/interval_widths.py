"""`auditsel reproduce interval-widths`: the width of the tuning run's interval for any score, over
the accountants table's tuning cells and a realistic DP-SGD grid.

Contract. For each setting (a DP-SGD base with the PLD accountant, a law of K, delta = 1e-5) the
row holds `accounting.interval.tuning_interval`: the lower end the attack value over score
functions (`accounting.attack`, no sampling error), the upper end the tightest rigorous bound
for any score ([PS22]'s generic, [KRW24]'s profile); `width` = upper - lower and `width_pct` =
width / upper: how much a better proof (or a stronger attack) could still change. Beside them
the same with the monotone attack as the lower end (`monotone_attack`, `width_pct_monotone`:
`attack(..., scores="monotone")`), so the gain of the attack over score functions is read off
each row. No game is played (the accountants table adds a game's eps_L).

Groups (docs/findings/interval-widths.md): `accountants`, the tuning cells of `auditsel reproduce
accountants`; `realistic`, `REALISTIC`; `random`, `random_settings`. The summary reports the
median and the max of both widths per group and over all rows.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

from auditsel.accounting.interval import interval_attack, tuning_interval
from auditsel.mechanisms import DpsgdBase
from auditsel.reproductions import _law_name
from auditsel.reproductions.accountants_table import GRID
from auditsel.rounds import Point, Poisson, RoundsLaw

DELTA = 1e-5

#: (noise multiplier, steps, sample rate, E[K] of a Poisson law)
REALISTIC = (
    (1.0, 1200, 0.01, 10.0),
    (1.1, 2000, 0.01, 8.0),
    (1.5, 8400, 0.003, 19.0),
    (1.2, 3000, 0.005, 12.0),
    (0.9, 1500, 0.008, 15.0),
    (1.5, 1200, 0.045, 8.0),
    (1.3, 5000, 0.004, 10.0),
    (0.8, 1200, 0.003, 19.0),
    (1.0, 8400, 0.003, 8.0),
    (0.75, 2400, 0.003, 10.0),
)


#: the seed of `RANDOM`: 16 DP-SGD settings drawn uniformly (sample rate log-uniform in
#: [0.001, 0.05], steps in [1,000, 10,000] (rounded down to hundreds), noise multiplier in
#: [0.7, 1.5], E[K] in [5, 20] of a Poisson law): an independent check of the widths
RANDOM_SEED = 37


def random_settings(
    seed: int = RANDOM_SEED, count: int = 16
) -> list[tuple[float, int, float, float]]:
    """(noise multiplier, steps, sample rate, E[K]) of `count` settings drawn with `seed`."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        rate = float(np.round(10 ** rng.uniform(math.log10(0.001), math.log10(0.05)), 4))
        steps = int(rng.integers(1000, 10001) // 100 * 100)
        sigma = float(np.round(rng.uniform(0.7, 1.5), 2))
        mean = float(np.round(rng.uniform(5, 20), 1))
        out.append((sigma, steps, rate, mean))
    return out


def settings() -> list[tuple[str, DpsgdBase, RoundsLaw]]:
    """(group, base, law) of every row, in order."""
    out = [
        ("accountants", DpsgdBase(s.noise_multiplier, s.steps, s.sample_rate, "pld"), s.law)
        for s in GRID
        if not (isinstance(s.law, Point) and s.law.k == 1)
    ]
    out += [("realistic", DpsgdBase(s, n, q, "pld"), Poisson(m)) for s, n, q, m in REALISTIC]
    out += [("random", DpsgdBase(s, n, q, "pld"), Poisson(m)) for s, n, q, m in random_settings()]
    return out


def rows() -> list[dict]:
    """One row per setting (module docstring)."""
    out = []
    for group, base, law in settings():
        start = time.perf_counter()
        iv = tuning_interval(base, law, DELTA)
        mono = interval_attack(base, law, [DELTA], "monotone_score").epsilon
        out.append(
            {
                "group": group,
                "sigma": base.noise_multiplier,
                "N": base.steps,
                "tau": base.sample_rate,
                "K": _law_name(law),
                "delta": DELTA,
                "eps_B": float(base.epsilon(DELTA)),
                "attack": iv.lower,
                "lower_source": iv.lower_source.split(" (")[0].split(",")[0],
                "interval_upper": iv.upper,
                "upper_source": (iv.upper_source or "").split(" ")[0],
                "width": iv.width,
                "width_pct": 100 * iv.width / iv.upper,
                "monotone_attack": mono,
                "width_pct_monotone": 100 * (iv.upper - mono) / iv.upper,
                "seconds": round(time.perf_counter() - start, 2),
            }
        )
    return out


def _stats(rows: list[dict]) -> str:
    w = [r["width"] for r in rows]
    pct = [r["width_pct"] for r in rows]
    mono = [r["width_pct_monotone"] for r in rows]
    return (
        f"width median {statistics.median(w):.3f}, max {max(w):.3f}; as a share of the upper "
        f"end median {statistics.median(pct):.1f}%, max {max(pct):.1f}% (monotone attack as the "
        f"lower end: median {statistics.median(mono):.1f}%, max {max(mono):.1f}%)"
    )


def summary(rows: list[dict]) -> list[str]:
    """Median and max widths per group and overall (the numbers the docs and README quote)."""
    lines = []
    for group in dict.fromkeys(r["group"] for r in rows):
        sel = [r for r in rows if r["group"] == group]
        lines.append(f"- {group} ({len(sel)} settings): {_stats(sel)}.")
    lines.append(f"- all ({len(rows)} settings): {_stats(rows)}.")
    return lines
