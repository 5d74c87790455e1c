"""The score-order dual (`accounting.score_dual`, issue 37 item 4) against the current upper end.

For each setting: the current upper end (the smallest default rigorous bound, [PS22] or
[KRW24]/layered), the attack value, and the dual's bound on the tuning run's delta AT the
current upper end's eps (the dual is tighter there only if that is <= delta), with its time.
Finite pairs: random (seed 5, 3 to 5 outputs), the brute-force truth's delta at the same eps
beside it. DP-SGD: the five widest rows of results/papers/interval-widths/rows.json (their
committed ends; nothing is regenerated).

    PYTHONPATH=$PWD python benchmarks/bench_score_dual.py [--dpsgd] [--finite] [--pure] [--two-sided]
    PYTHONPATH=$PWD python benchmarks/bench_score_dual.py --coin   # the coin search's lower end
"""

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "accounting"))

from brute_force import brute_force_delta, random_pairs

from auditsel import DpsgdBase, FiniteOutputBase, Poisson, TruncatedNegativeBinomial, TwoPoint
from auditsel.accounting.attack import attack_epsilon
from auditsel.accounting.registry import bound
from auditsel.accounting.score_dual import score_dual_delta
from auditsel.rounds import RoundsLaw

DELTA = 1e-5
#: the laws of the finite pairs, in turn
LAWS = (Poisson(10.0), Poisson(3.0), TruncatedNegativeBinomial(1.0, 0.1))
ROWS = Path(__file__).resolve().parents[1] / "results/papers/interval-widths/rows.json"


def _finite_settings(
    count: int, max_outputs: int
) -> Iterator[tuple[int, FiniteOutputBase, RoundsLaw, float, str, float]]:
    """(n, pair, law, upper end, its source, attack value) for `count` random finite pairs
    (seed 5, 3 to `max_outputs` outputs; `LAWS` in turn)."""
    pairs = random_pairs(count, seed=5, sizes=(3, max_outputs + 1), concentration=0.8)
    for n, pair in enumerate(pairs):
        law = LAWS[n % 3]
        ends = {key: bound(key).epsilon(pair, law, DELTA) for key in ("generic_rdp", "profile")}
        source = min(ends, key=ends.__getitem__)
        yield n, pair, law, ends[source], source, attack_epsilon(pair, law, DELTA)


def _law(kind: str) -> RoundsLaw:
    """The law of K of a row of rows.json from its label."""
    if kind.startswith("tnb"):
        eta = float(kind.split("eta=")[1].split(",")[0])
        nu = float(kind.split("nu=")[1].rstrip(")"))
        return TruncatedNegativeBinomial(eta, nu)
    if kind == "two_point(L=10, s=0.5)":
        return TwoPoint(10, 0.5)
    return Poisson(float(kind.split("=")[1].rstrip(")")))


def finite() -> None:
    print("| pair | K | attack | upper (source) | truth delta at upper | dual delta at upper | s |")
    print("|---|---|---|---|---|---|---|")
    for n, pair, law, upper, source, hit in _finite_settings(10, 5):
        k = len(pair.p)
        truth = brute_force_delta(pair, law, upper)
        start = time.perf_counter()
        dual = score_dual_delta(pair, law, upper)
        took = time.perf_counter() - start
        print(
            f"| {n} ({k} outputs) | {law.kind}({law.mean:.3g}) | {hit:.4f} | {upper:.4f} "
            f"({source}) | {truth:.2e} | {dual:.2e} | {took:.1f} |",
            flush=True,
        )


def pure() -> None:
    """The region pure bound against the current upper end on 24 random finite pairs (3 to 6
    outputs; Poisson(10), Poisson(3), TNB(1, 0.1) in turn; seed 5), widths as % of the upper
    end before and after taking the smaller."""
    from auditsel.accounting.score_dual import region_pure_epsilon
    from auditsel.accounting.two_sided import two_sided_epsilon

    print(
        "| pair | K | attack | upper (source) | region_pure (s) | two_sided (s) | width before "
        "| after |"
    )
    print("|---|---|---|---|---|---|---|---|")
    before, after = [], []
    for n, pair, law, upper, source, hit in _finite_settings(24, 6):
        k = len(pair.p)
        start = time.perf_counter()
        value = region_pure_epsilon(pair, law)
        took = time.perf_counter() - start
        start = time.perf_counter()
        sided = float(two_sided_epsilon(pair, law, DELTA)[0])
        took_sided = time.perf_counter() - start
        new = min(upper, value, sided)
        before.append(100 * (upper - hit) / upper)
        after.append(100 * (new - hit) / new)
        print(
            f"| {n} ({k} outputs) | {law.kind}({law.mean:.3g}) | {hit:.4f} | {upper:.4f} "
            f"({source}) | {value:.4f} ({took:.2f}) | {sided:.4f} ({took_sided:.1f}) | "
            f"{before[-1]:.1f}% | {after[-1]:.1f}% |",
            flush=True,
        )
    for name, w in (("before", before), ("after", after)):
        print(f"{name}: width median {np.median(w):.1f}%, max {np.max(w):.1f}%")


def coin() -> None:
    """The interval's ends on the same 24 random finite pairs as `pure`, before and after the
    coin search (`accounting.coin_search`: its lower end is for the base with a coin released
    with each run, the pair's privacy profile), per side, and `tuning_interval`'s warm time
    (second call; CPU seconds)."""
    from auditsel.accounting.attack import attack, with_one_run
    from auditsel.accounting.interval import tuning_interval

    print(
        "| pair | K | lower before (no coin) | lower after (coin) | upper | width before | after "
        "| warm interval s (CPU) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    before, after, seconds = [], [], []
    pairs = random_pairs(24, seed=5, sizes=(3, 7), concentration=0.8)
    for n, pair in enumerate(pairs):
        law = LAWS[n % 3]
        old = with_one_run(attack(pair, law, DELTA, scores="deterministic")).epsilon
        tuning_interval(pair, law, DELTA)
        start = time.process_time()
        iv = tuning_interval(pair, law, DELTA)
        seconds.append(time.process_time() - start)
        before.append(100 * (iv.upper - old) / iv.upper)
        after.append(100 * iv.width / iv.upper)
        print(
            f"| {n} ({len(pair.p)} outputs) | {law.kind}({law.mean:.3g}) | {old:.4f} | "
            f"{iv.lower:.4f} | {iv.upper:.4f} | {before[-1]:.1f}% | {after[-1]:.2f}% | "
            f"{seconds[-1]:.2f} |",
            flush=True,
        )
    for name, w in (("before", before), ("after", after)):
        print(f"{name}: width median {np.median(w):.2f}%, max {np.max(w):.2f}%")
    print(f"warm tuning_interval CPU s: median {np.median(seconds):.2f}, max {np.max(seconds):.2f}")


def two_sided() -> None:
    """The two-sided layered bound on every row of results/papers/interval-widths/rows.json:
    the committed upper end and attack, the new bound, widths as % of the upper end before and
    after taking the smaller, per group."""
    from auditsel.accounting.two_sided import two_sided_epsilon

    rows = json.loads(ROWS.read_text())
    print("| group | sigma | N | tau | K | attack | upper | two_sided (s) | width before | after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    widths: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        kind, law = r["K"], _law(r["K"])
        pair = DpsgdBase(noise_multiplier=r["sigma"], steps=r["N"], sample_rate=r["tau"])
        start = time.perf_counter()
        value = float(two_sided_epsilon(pair, law, r["delta"])[0])
        took = time.perf_counter() - start
        upper, hit = r["interval_upper"], r["attack"]
        new = min(upper, value)
        pair_w = (100 * (upper - hit) / upper, 100 * (new - hit) / new)
        for g in (r["group"], "all"):
            widths.setdefault(g, []).append(pair_w)
        print(
            f"| {r['group']} | {r['sigma']} | {r['N']} | {r['tau']} | {kind} | {hit:.4f} | "
            f"{upper:.4f} | {value:.4f} ({took:.1f}) | {pair_w[0]:.1f}% | {pair_w[1]:.1f}% |",
            flush=True,
        )
    for g, w in widths.items():
        b, a = np.array(w).T
        print(
            f"{g} ({len(w)}): width median {np.median(b):.1f}% -> {np.median(a):.1f}%, "
            f"max {b.max():.1f}% -> {a.max():.1f}%"
        )


def dpsgd() -> None:
    rows = sorted(json.loads(ROWS.read_text()), key=lambda r: -r["width_pct"])[:5]
    print("| sigma | N | tau | K | attack | upper | dual delta at upper | s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        kind, law = r["K"], _law(r["K"])
        pair = DpsgdBase(noise_multiplier=r["sigma"], steps=r["N"], sample_rate=r["tau"])
        start = time.perf_counter()
        dual = score_dual_delta(pair, law, r["interval_upper"])
        took = time.perf_counter() - start
        print(
            f"| {r['sigma']} | {r['N']} | {r['tau']} | {kind} | {r['attack']:.4f} | "
            f"{r['interval_upper']:.4f} | {dual:.2e} | {took:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    args = set(sys.argv[1:]) or {"--finite", "--dpsgd", "--pure", "--two-sided"}
    if "--coin" in args:
        coin()
    if "--two-sided" in args:
        two_sided()
    if "--pure" in args:
        pure()
    if "--finite" in args:
        finite()
    if "--dpsgd" in args:
        dpsgd()
