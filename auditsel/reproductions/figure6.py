"""[XWW24] Figure 6 as a table with an audited lower bound per cell, and its plot.

Rows: `paper_bounds.figure6_rows()` (its grid and columns: `auditsel.reproductions.paper_bounds`)
plus eps_L of a `TRIALS`-game audit of the reduced game at the cell's mu (sample proxy, split
rule, 95% Clopper-Pearson, seed 0) and its best-threshold value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attacks.proxies import make_proxy
from auditsel.auditing.lower import audit_scores
from auditsel.auditing.rules import Split
from auditsel.executor import ExecutionOptions
from auditsel.games.engine import run_game
from auditsel.mechanisms import GaussianBase
from auditsel.reproductions.paper_bounds import contradicted_columns, figure6_rows
from auditsel.results.figures import new_figure, save_figure
from auditsel.rounds import TruncatedNegativeBinomial
from auditsel.selection import GaussianWinner

TRIALS = 1_000_000


def rows(
    trials: int = TRIALS, jobs: int = 1, cells: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Figure 6 rows with the audited eps_L (cells: rows of bounds.figure6_rows, for a subset)."""
    out = figure6_rows() if cells is None else cells
    for row in out:
        winner = GaussianWinner(
            GaussianBase(row["mu"]), TruncatedNegativeBinomial(row["eta"], row["nu"])
        )
        record = run_game(
            winner, make_proxy("sample", winner), trials, 0, execution=ExecutionOptions(jobs=jobs)
        )
        assert record.scores is not None and record.member is not None  # played in memory
        bound = audit_scores(record.scores, record.member, 1e-5, rule=Split(seed=0))
        row["eps_L"] = bound.eps
        row["eps_L_best"] = bound.eps_best_threshold
        row["contradicted"] = contradicted_columns(
            row, max(row["eps_B"], bound.eps, row.get("attack") or 0.0)
        )
    return out


#: figure6.png's curves: (row key, legend label, matplotlib style)
_SERIES = (
    ("eps_B", "eps_B", "k:"),
    ("attack", "attack (lower bound)", "C9-"),
    ("generic_rdp", "generic RDP", "C0-"),
    ("profile", "profile", "C1-"),
    ("improved_rdp", "improved UO", "C2-"),
    ("improved_rdp_gdp", "improved UG", "C5-"),
    ("exact", "exact", "C3-"),
    ("eps_L", "eps_L (split)", "C4o"),
)


def _plot_panel(
    ax: Any, sel: list[Mapping[str, Any]], series: Sequence[tuple[str, str, str]], tau: float
) -> None:
    """One panel of figure6.png: each series of the rows `sel` against eps_B, heuristic ones
    (`auditsel.results.heuristics`: UG always, exact and UO when tau < 1, mu of eq. 19) dashed
    with a red cross where contradicted (the CONTRADICTED legend entry once)."""
    xs = [r["eps_B"] for r in sel]
    heuristic = {"improved_rdp_gdp"} | ({"exact", "improved_rdp"} if tau < 1 else set())
    marked = False
    for key, label, style in series:
        ys = [r.get(key, r.get(f"{key}_monotone_score", r.get(f"{key}_heuristic"))) for r in sel]
        if any(y is not None for y in ys):
            if key in heuristic:
                style, label = style[:2] + "--", f"{label}, heuristic"
            elif any(f"{key}_monotone_score" in r for r in sel):
                style, label = style[:2] + "-.", f"{label}, monotone score assumed"
            ax.plot(xs, [math.nan if y is None else y for y in ys], style, label=label, ms=4)
            bad = [
                (r["eps_B"], y)
                for r, y in zip(sel, ys)
                if key in heuristic
                and y is not None
                and f"{key}_heuristic" in r.get("contradicted", "").split()
            ]
            if bad:
                label = "_nolegend_" if marked else "heuristic, CONTRADICTED (below eps_B or eps_L)"
                ax.plot(*zip(*bad), "rx", ms=8, mew=1.5, ls="none", label=label)
                marked = True


def plot(rows: Sequence[Mapping[str, Any]], out: Path) -> list[Path]:
    """figure6.png in out: every bound and eps_L against eps_B, one panel per (law, tau)."""
    panels = sorted({(r["eta"], r["nu"], r["tau"]) for r in rows})
    cols = 3
    n_rows = math.ceil(len(panels) / cols)
    fig, axes = new_figure((4.4 * cols, 3.4 * n_rows), grid=(n_rows, cols))
    for ax, (eta, nu, tau) in zip(axes.flat, panels):
        sel = sorted(
            (r for r in rows if (r["eta"], r["nu"], r["tau"]) == (eta, nu, tau)),
            key=lambda r: r["eps_B"],
        )
        _plot_panel(ax, sel, _SERIES, tau)
        ax.set_title(f"TNB(eta={eta:g}, nu={nu:g}), tau={tau:g}", fontsize=9)
        ax.set_xlabel("eps_B")
        ax.set_ylabel("epsilon of the tuning run")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("[XWW24] Figure 6 setting: bounds and the audited lower bound")
    fig.tight_layout()
    path = Path(out) / "figure6.png"
    save_figure(fig, path)
    return [path]
