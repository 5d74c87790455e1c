"""The papers' upper-bound numbers reproduced, as lists of flat row dicts (registered in
`auditsel.reproductions`; `auditsel reproduce NAME` writes them).

Values resting on [XWW24]'s reduced game (eps_UO, eps_UG, the exact curve of the released
winner) hold only under its monotone-score assumption (`registry.ASSUMPTION`): they keep the
papers' numbers in columns that say so (`*_monotone_score`, or the paper's names eps_UG /
eps_UO), beside the tuning run's interval for any score (`attack`: the attack value, a lower
bound; `interval_upper`: the tightest rigorous bound, generic or profile).

* `example1_rows()`: [XWW24] Example 1, the exact (2.96, 0) / (2.92, 1e-5) of the released
  winner under the listed score order against the generic (2 + eta) eps = 3 ([PS22] Cor. 3)
  and the generic RDP bound at delta = 1e-5 (paper: 3.11), with the order grid that explains
  the difference.
* `table4_rows()`: [XWW24] Table 4 (two-point xi, eq. 21; N = 500, delta = 1e-5, tau in
  {1, 0.5, 0.1}, eps_B in {1, 2, 4}): eps_UG, eps_UO (Algorithm 3), optionally the reduced
  game's exact eps, beside the paper's values (typed in, columns `paper_*`).
* `figure6_rows()`: [XWW24] Figure 6 as a table (TNB grid, N = 500, delta = 1e-5, eps_B in
  {1, 2, 4, 8}; the panels' (eta, nu) are not in the text: `FIGURE6_LAWS`).
* `koskela_gaussian_rows()`: [KRW24]'s Gaussian settings (sigma = 4, delta = 1e-6):
  geometric K with m in {30, 300, 3000}; Bin(n, 10/n) against Poisson(10); Report Noisy Max.
* `dpsgd_factor_rows()`: [KRW24] Fig. 7 (q = 16384/50000, sigma = 21.1, T = 250): how many
  more models (E[K]) the profile bound (Thm 5.2) allows than the RDP bound ([PS22] Thm 2).

eps_B -> sigma calibration uses dp_accounting's RDP accountant (the paper: "an RDP accountant
as in TensorFlow Privacy"), orders `mechanisms.RDP_ORDERS`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from auditsel.accounting.attack import attack_epsilon
from auditsel.accounting.exact import exact_epsilon
from auditsel.accounting.generic import generic_epsilon, pure_dp_generic_epsilon, tnb_rdp
from auditsel.accounting.improved import finite_improved_epsilon, improved_epsilon
from auditsel.accounting.interval import tightest_bound
from auditsel.accounting.panel import Panel, panel
from auditsel.accounting.profile import (
    base_profile,
    profile_epsilon,
    rnm_epsilon,
    rnm_gaussian_closed_form,
    rnm_gaussian_rdp,
    tnb_shift,
)
from auditsel.accounting.rdp import ORDERS, finite_rdp, gaussian_rdp, pure_dp_rdp, rdp_to_epsilon
from auditsel.mechanisms import (
    RDP_ORDERS,
    DpsgdBase,
    FiniteOutputBase,
    GaussianBase,
    gaussian_epsilon,
)
from auditsel.reproductions import to_markdown as to_markdown
from auditsel.rounds import Binomial, Poisson, TruncatedNegativeBinomial, TwoPoint
from auditsel.selection import FiniteWinner, GaussianWinner

# --- [XWW24] Table 4, typed in from the paper: (eps_B, tau) -> [(eps_UG, eps_UO)] per law ----
TABLE4_LAWS = [(10, 0.1), (10, 0.01), (100, 0.01), (100, 1e-3), (1000, 1e-3)]
TABLE4_PAPER = {
    (1, 1.0): [(1.13, 1.12), (1.29, 1.28), (2.58, 2.57), (3.34, 3.33), (5.42, 5.40)],
    (1, 0.5): [(1.13, 1.12), (1.30, 1.28), (2.59, 2.57), (3.36, 3.33), (5.43, 5.40)],
    (1, 0.1): [(1.13, 1.08), (1.30, 1.24), (2.59, 2.49), (3.36, 3.23), (5.44, 5.25)],
    (2, 1.0): [(2.23, 2.21), (2.39, 2.38), (4.28, 4.25), (5.56, 5.53), (8.27, 8.23)],
    (2, 0.5): [(2.25, 2.21), (2.41, 2.38), (4.30, 4.25), (5.59, 5.53), (8.31, 8.23)],
    (2, 0.1): [(2.40, 2.19), (2.56, 2.36), (4.48, 4.23), (5.83, 5.50), (8.57, 8.20)],
    (4, 1.0): [(4.51, 4.43), (4.52, 4.44), (5.93, 5.90), (7.85, 7.80), (10.22, 10.20)],
    (4, 0.5): [(4.51, 4.35), (4.52, 4.37), (5.93, 5.88), (7.85, 7.76), (10.22, 10.18)],
    (4, 0.1): [(4.96, 4.15), (4.98, 4.16), (6.15, 5.79), (8.05, 7.63), (10.27, 10.12)],
}

#: (eta, nu) of our Figure 6 table (the paper's panels are not specified in its text)
FIGURE6_LAWS = [(0.0, 1e-2), (1.0, 1e-2), (1.0, 1e-3)]

# [XWW24] eq. 8 (Example 1 winner laws on {A, B, C})
_EXAMPLE1_PAPER_PMF = {0: (8.66e-3, 2.60e-4, 9.91e-1), 1: (2.66e-3, 1.34e-5, 9.97e-1)}


def example1_rows() -> list[dict]:
    """[XWW24] Example 1 (b = 1e-3, d = 1e2, eps = 1, geometric xi with nu = 1e-3)."""
    base = FiniteOutputBase.example1()
    law = TruncatedNegativeBinomial(1.0, 1e-3)
    winner = FiniteWinner(base, law)
    rows = [*_example1_exact_rows(base, law, winner), *_example1_generic_rows(base, law)]
    for member in (0, 1):
        side = "X" if member == 0 else "X'"
        paper = _EXAMPLE1_PAPER_PMF[member]
        rows += _rows(
            [
                (f"winner P({n}) on {side}", float(o), p)
                for n, o, p in zip("ABC", winner.pmf(member), paper)
            ]
        )
    for r in rows:
        r["difference"] = None if r["paper"] is None else r["ours"] - r["paper"]
    return rows


def _rows(quantities: Sequence[tuple[str, Any, float | None]]) -> list[dict[str, Any]]:
    return [{"quantity": q, "ours": ours, "paper": paper} for q, ours, paper in quantities]


def _example1_exact_rows(
    base: FiniteOutputBase, law: TruncatedNegativeBinomial, winner: FiniteWinner
) -> list[dict[str, Any]]:
    """Example 1's exact eps (monotone score) and its bounds for any score."""
    monotone = "(listed score order: monotone score assumed)"
    return _rows(
        [
            (f"exact eps, delta = 0 {monotone}", exact_epsilon(winner, 0.0), 2.96),
            (f"exact eps, delta = 1e-5 {monotone}", exact_epsilon(winner, 1e-5), 2.92),
            (
                "any score: attack value over score functions (a lower bound), delta = 1e-5",
                attack_epsilon(base, law, 1e-5),
                None,
            ),
            (
                "any score: tightest rigorous bound, delta = 1e-5",
                tightest_bound(base, law, 1e-5).epsilon,
                None,
            ),
        ]
    )


def _example1_generic_rows(
    base: FiniteOutputBase, law: TruncatedNegativeBinomial
) -> list[dict[str, Any]]:
    """Example 1's generic bounds ([PS22]'s pure DP and RDP ones) and Algorithm 3's."""
    integer = np.arange(2.0, 200.0)
    rdp = "generic RDP, delta = 1e-5,"
    return _rows(
        [
            (
                "generic pure DP (2 + eta) eps ([PS22] Cor. 3)",
                pure_dp_generic_epsilon(1.0, law),
                3.0,
            ),
            (
                f"{rdp} exact base RDP curve, panel orders",
                generic_epsilon(ORDERS, finite_rdp(base.law(0), base.law(1), ORDERS), law, 1e-5),
                3.11,
            ),
            (
                f"{rdp} pure-DP (randomized response) curve, panel orders",
                generic_epsilon(ORDERS, pure_dp_rdp(1.0, ORDERS), law, 1e-5),
                3.11,
            ),
            (
                f"{rdp} pure-DP curve, integer orders 2..199",
                rdp_to_epsilon(
                    integer, tnb_rdp(integer, pure_dp_rdp(1.0, integer), 1.0, 1e-3), 1e-5
                ),
                3.11,
            ),
            (
                "Algorithm 3 recipe on the exact winner (Renyi, converted), delta = 1e-5",
                finite_improved_epsilon(base, law, 1e-5),
                None,
            ),
        ]
    )


def _calibrated(eps_b: float, tau: float, delta: float, steps: int = 500) -> DpsgdBase:
    return DpsgdBase.from_epsilon(eps_b, delta, steps, tau, "rdp")


def table4_rows(with_exact: bool = False, delta: float = 1e-5) -> list[dict]:
    """[XWW24] Table 4: 45 cells, eps_UG and eps_UO (90 values, [XWW24]'s, a monotone score
    assumed) beside the paper's; with_exact: also the reduced game's exact epsilon
    (`exact_monotone_score` at tau = 1, `exact_heuristic` at tau < 1) and the tuning run's
    interval for any score (`attack`, a lower bound; `interval_upper`, the tightest rigorous
    bound)."""
    rows = []
    for (eps_b, tau), paper in TABLE4_PAPER.items():
        base = _calibrated(eps_b, tau, delta)
        for (L, s), (p_ug, p_uo) in zip(TABLE4_LAWS, paper):
            law = TwoPoint(L, s)
            ug = improved_epsilon(base.mu_gdp, law, delta)
            uo = improved_epsilon(base.mu, law, delta)
            row = {
                "eps_B": eps_b,
                "tau": tau,
                "L": L,
                "s": s,
                "sigma": base.noise_multiplier,
                "mu": base.mu,
                "mu_gdp": base.mu_gdp,
                "eps_UG": ug,
                "eps_UO": uo,
                "paper_eps_UG": p_ug,
                "paper_eps_UO": p_uo,
                "diff_UG": ug - p_ug,
                "diff_UO": uo - p_uo,
            }
            if with_exact:  # the reduced game: exact only at tau = 1 (eq. 19), monotone score
                reduced = exact_epsilon(GaussianWinner(GaussianBase(base.mu), law), delta)
                key = "exact_monotone_score" if base.reduction_is_exact else "exact_heuristic"
                row[key] = reduced
                row["attack"] = attack_epsilon(base, law, delta)
                row["interval_upper"] = tightest_bound(base, law, delta).epsilon
            rows.append(row)
    return rows


def figure6_rows(
    eps_bs: Sequence[float] = (1, 2, 4, 8),
    taus: Sequence[float] = (1.0, 0.5, 0.1),
    laws: Sequence[tuple[float, float]] = FIGURE6_LAWS,
    delta: float = 1e-5,
    steps: int = 500,
) -> list[dict]:
    """[XWW24] Figure 6 as a table: the full upper-bound panel on a TNB grid."""
    rows = []
    for tau in taus:
        for eta, nu in laws:
            law = TruncatedNegativeBinomial(eta, nu)
            for eps_b in eps_bs:
                base = _calibrated(eps_b, tau, delta, steps)
                p = panel(base, law, delta)
                up = labelled_upper(p)
                rows.append(
                    {
                        "tau": tau,
                        "eta": eta,
                        "nu": nu,
                        "E[K]": law.mean,
                        "eps_B": eps_b,
                        "sigma": base.noise_multiplier,
                        "mu": base.mu,
                        "mu_gdp": base.mu_gdp,
                        **up,
                        "attack": p.attack["epsilon"],
                        "interval_upper": p.interval.upper,
                        "width": p.interval.width,
                        "contradicted": contradicted_columns(
                            up, max(eps_b, p.attack["epsilon"] or 0.0)
                        ),
                    }
                )
    return rows


def labelled_upper(p: Panel) -> dict[str, float | None]:
    """The panel's upper values, each in a column that says what it is: the key of a bound for
    any score, `<key>_monotone_score` or `<key>_heuristic` for the reduced game's."""
    label = {k: p.labels.get(k) for k in p.upper}
    return {k if label[k] in (None, "rigorous") else f"{k}_{label[k]}": p.value(k) for k in p.upper}


def contradicted_columns(row: dict, floor: float) -> str:
    """The `*_heuristic` columns of a row whose value lies below `floor` (eps_B of one run, the
    attack value or a valid eps_L): heuristic upper values contradicted by a number they must
    not be below."""
    return " ".join(
        k for k, v in row.items() if k.endswith("_heuristic") and v is not None and v < floor
    )


def koskela_gaussian_rows(sigma: float = 4.0, delta: float = 1e-6) -> list[dict]:
    """[KRW24] Gaussian settings: geometric m in {30, 300, 3000}; Bin(n, 10/n) vs Poisson(10);
    Report Noisy Max (Fig. 1). Beside the bounds: the reduced game's exact value under
    [XWW24]'s monotone-score assumption (`exact_monotone_score`) and the attack value over
    score functions (`attack`, a lower bound for any score)."""
    base = GaussianBase(1.0 / sigma)
    prof = base_profile(base)
    r = gaussian_rdp(base.mu, ORDERS)
    laws: list[tuple[str, Any, Any]] = [
        (f"geometric, m = {m}", TruncatedNegativeBinomial(1.0, 1.0 / m), prof)
        for m in (30, 300, 3000)
    ]
    laws.append(("Poisson(10)", Poisson(10.0), None))
    laws += [(f"Bin({n}, 10/{n})", Binomial(n, 10.0 / n), prof) for n in (20, 50, 100, 1000)]
    rows: list[dict[str, Any]] = [
        {
            "setting": setting,
            "profile": profile_epsilon(base, law, delta, prof),
            "generic_rdp": generic_epsilon(ORDERS, r, law, delta, generic_profile),
            "exact_monotone_score": exact_epsilon(GaussianWinner(base, law), delta),
            "attack": attack_epsilon(base, law, delta),
        }
        for setting, law, generic_profile in laws
    ]
    for m in (10, 100, 1000):
        rows.append(
            {
                "setting": f"Report Noisy Max, m = {m} (sensitivity 2)",
                "profile": rnm_epsilon(lambda d: gaussian_epsilon(2.0 / sigma, d), m, delta),
                "generic_rdp": rnm_gaussian_rdp(sigma, m, delta),
                "exact_monotone_score": None,
                "attack": None,
                "closed_form_cor_3_4": rnm_gaussian_closed_form(sigma, m, delta),
            }
        )
    return rows


def _max_mean(bound, target: float, lo: float = 1.0, hi: float = 1e7) -> float:
    """Largest E[K] (geometric) with bound(law) <= target, by bisection in log(E[K])."""
    if bound(TruncatedNegativeBinomial(1.0, 1.0 / (lo + 1e-9))) > target:
        return lo
    a, b = math.log(lo + 1e-9), math.log(hi)
    for _ in range(40):
        mid = 0.5 * (a + b)
        if bound(TruncatedNegativeBinomial(1.0, math.exp(-mid))) <= target:
            a = mid
        else:
            b = mid
    return math.exp(a)


def dpsgd_factor_rows(delta: float = 1e-5, means: Sequence[int] = (10, 100, 1000)) -> list[dict]:
    """[KRW24] Fig. 7: E[K] allowed by Thm 5.2 over E[K] allowed by PS22 Thm 2 at equal eps;
    beside it the same with auditsel's profile bound (the Theorem 4.1 recipe's shift where it
    is smaller, `accounting.profile.profile_shift`)."""
    base = DpsgdBase(21.1, 250, 16384 / 50000)
    prof = base_profile(base)
    orders = np.asarray(RDP_ORDERS, dtype=float)
    rdp = base.rdp(orders)
    rdp_bound = lambda law: generic_epsilon(orders, rdp, law, delta)
    thm52 = lambda profile, law: tnb_shift(profile, law.eta, law.nu)
    prof_bound = lambda law: profile_epsilon(base, law, delta, prof, shift=thm52)
    ours_bound = lambda law: profile_epsilon(base, law, delta, prof)
    rows = []
    for m in means:
        law = TruncatedNegativeBinomial(1.0, 1.0 / m)
        eps_rdp = rdp_bound(law)
        m_prof = _max_mean(prof_bound, eps_rdp)
        rows.append(
            {
                "E[K] (RDP)": m,
                "eps (RDP, PS22 Thm 2)": eps_rdp,
                "eps (profile, Thm 5.2) at same E[K]": prof_bound(law),
                "E[K] (profile) at the same eps": m_prof,
                "factor": m_prof / m,
                "factor (Thm 4.1 recipe)": _max_mean(ours_bound, eps_rdp) / m,
                "eps_B (PLD)": base.epsilon(delta, "pld"),
            }
        )
    return rows


def table4_summary(rows: list[dict]) -> dict:
    """Max / mean absolute difference to the paper, overall and per tau."""
    d = np.array([[abs(r["diff_UG"]), abs(r["diff_UO"])] for r in rows])
    out = {"max_abs_diff": float(d.max()), "mean_abs_diff": float(d.mean())}
    for tau in sorted({r["tau"] for r in rows}, reverse=True):
        sel = np.array([r["tau"] == tau for r in rows])
        out[f"max_abs_diff_tau_{tau:g}"] = float(d[sel].max())
    return out


def table4_rows_with_exact() -> list[dict]:
    """Table 4 with the exact reduced-game column (what `auditsel reproduce table4` writes)."""
    return table4_rows(with_exact=True)


def table4_lines(rows: list[dict]) -> list[str]:
    """The summary line of the Table 4 reproduction."""
    return ["Agreement with the paper: " + json.dumps(table4_summary(rows))]
