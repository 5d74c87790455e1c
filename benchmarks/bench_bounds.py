"""Timings of the upper-bound panel (issue 3 section 8). Run: python benchmarks/bench_bounds.py

Targets on the 2-core machine: one Gaussian-base panel < 1 s; one DP-SGD panel with PLD < 3 s;
the 90 values (eps_UG, eps_UO) of [XWW24] Table 4 < 30 s (sigma calibration included).
"""
import time

from auditsel.accounting.base import DpsgdBase
from auditsel.accounting.panel import panel
from auditsel.accounting.pld import dpsgd_epsilon_interval
from auditsel.mechanisms import GaussianBase
from auditsel.papers import table4_rows, table4_summary
from auditsel.rounds import TruncatedNegativeBinomial, TwoPoint


def timed(label, fn, target=None):
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    flag = "" if target is None else ("  OK" if dt < target else f"  SLOW (target {target} s)")
    print(f"{label:<70s} {dt:7.2f} s{flag}")
    return out, dt


def main():
    law = TruncatedNegativeBinomial(0.0, 1e-2)
    out, _ = timed("panel, Gaussian base mu=1, TNB(0, 1e-2), delta=1e-5",
                   lambda: panel(GaussianBase(1.0), law, 1e-5), 1.0)
    print("   ", {k: None if v is None else round(v, 3) for k, v in out["upper"].items()})
    timed("panel, Gaussian base mu=1, two-point (L=1000, s=1e-3)",
          lambda: panel(GaussianBase(1.0), TwoPoint(1000, 1e-3), 1e-5), 1.0)
    base = DpsgdBase(2.0, 500, 0.1, "pld")
    out, _ = timed("panel, DP-SGD sigma=2 N=500 tau=0.1 (PLD), TNB(0, 1e-2) (cold caches)",
                   lambda: panel(base, law, 1e-5), 3.0)
    print("   ", {k: None if v is None else round(v, 3) for k, v in out["upper"].items()},
          out["base"])
    timed("optimistic/pessimistic PLD interval for the same DP-SGD eps_B",
          lambda: print("   ", dpsgd_epsilon_interval(2.0, 500, 0.1, 1e-5)))
    rows, _ = timed("[XWW24] Table 4: 90 values (45 cells x UG/UO), calibration included",
                    lambda: table4_rows(), 30.0)
    print("   ", table4_summary(rows))


if __name__ == "__main__":
    main()
