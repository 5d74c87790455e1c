"""`auditsel reproduce NAME`: the papers' tables and the project's committed findings, recomputed.

A registry of reproductions, read by the CLI. Each entry names what it reproduces
(`example1`, `table4`, `figure6`, `table3`, `koskela-gaussian`, `dpsgd-factor`, ...) and points
at the function that computes its rows (a list of flat dicts); `reproduce(name, root)` writes
ROOT/NAME/table.md (with the provenance of every column and any summary lines), table.csv,
rows.json and the entry's plots. The paper's own values appear only in columns named paper_*.

To add a reproduction, register it here with one line (the module is imported only when the
reproduction runs, so `auditsel --help` stays light)::

    register("my-name", "[KEY] what it reproduces", "auditsel.reproductions.mymodule:rows",
             summary="auditsel.reproductions.mymodule:summary",   # optional: rows -> [lines]
             plot="auditsel.reproductions.mymodule:plot")         # optional: (rows, dir) -> [files]

where ``rows(jobs: int = 1) -> list[dict]``; the registrations below list the modules.
"""

from __future__ import annotations

import csv
import importlib
import inspect
import io
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditsel.files import atomic_write_text

__all__ = ["Reproduction", "REGISTRY", "register", "names", "reproduce", "render", "to_markdown"]


@dataclass(frozen=True)
class Reproduction:
    """One registered reproduction: `rows`, `summary` and `plot` are "module:function" paths."""

    name: str
    title: str
    rows: str
    summary: str | None = None
    plot: str | None = None
    render: str | None = None  # "module:function" (rows, seconds, out) -> out: own files
    root: str = "results/papers"  # default output root of `auditsel reproduce NAME`

    @staticmethod
    def resolve(path: str) -> Callable:
        module, _, attr = path.partition(":")
        return getattr(importlib.import_module(module), attr)

    def compute(self, jobs: int = 1, out: Path | None = None) -> list:
        fn = self.resolve(self.rows)
        params = inspect.signature(fn).parameters
        kwargs = {k: v for k, v in (("jobs", jobs), ("out", out)) if k in params}
        return fn(**kwargs)


REGISTRY: dict[str, Reproduction] = {}


def register(
    name: str,
    title: str,
    rows: str,
    *,
    summary: str | None = None,
    plot: str | None = None,
    render: str | None = None,
    root: str = "results/papers",
) -> Reproduction:
    """Add a reproduction under `name` (letters, digits and '-'; written to ROOT/name/)."""
    if not name or not all(c.isalnum() or c == "-" for c in name) or name == "all":
        raise ValueError(
            f"reproduction name: letters, digits and '-' only (not 'all'), got {name!r}"
        )
    if name in REGISTRY:
        raise ValueError(f"reproduction name: {name!r} is already registered")
    REGISTRY[name] = entry = Reproduction(name, title, rows, summary, plot, render, root)
    return entry


def names() -> list[str]:
    return list(REGISTRY)


_B = "auditsel.reproductions.paper_bounds"
register(
    "example1",
    "[XWW24] Example 1: exact epsilon of the released winner against the generic bounds",
    f"{_B}:example1_rows",
)
register(
    "table4",
    "[XWW24] Table 4: two-point xi, N = 500, delta = 1e-5 (eps_UG, eps_UO, exact; "
    "paper_* = the paper's values)",
    f"{_B}:table4_rows_with_exact",
    summary=f"{_B}:table4_lines",
)
register(
    "figure6",
    "[XWW24] Figure 6 as a table: TNB grid, N = 500, delta = 1e-5, with the lower bound "
    "of a 1,000,000-trial reduced audit (split rule)",
    "auditsel.reproductions.figure6:rows",
    plot="auditsel.reproductions.figure6:plot",
)
register(
    "table3",
    "[XWW24] Table 3 style grid on real DP-SGD (digits): threat x canary x eps_B, "
    "lambda_a and lambda_b on the same 1,000 games per cell",
    "auditsel.reproductions.table3:rows",
    summary="auditsel.reproductions.table3:findings",
)
register(
    "koskela-gaussian",
    "[KRW24]'s Gaussian settings (sigma = 4, delta = 1e-6)",
    f"{_B}:koskela_gaussian_rows",
)
register(
    "accountants",
    "Accountants' claims for DP-SGD with Poisson subsampling against the worst-case "
    "game (`game.kind: dpsgd_worst_case`)",
    "auditsel.reproductions.accountants:rows",
    render="auditsel.reproductions.accountants:render",
    root="results",
)
register(
    "ps22-svm",
    "[PS22] Section 2: a soft-margin SVM tuned without privacy (40 points, with and without 8 "
    "outliers); the released alpha audited with audit_pipeline",
    "auditsel.reproductions.svm_outliers:rows",
    render="auditsel.reproductions.svm_outliers:render",
)
register(
    "bugzoo",
    "The bug zoo: tuning pipelines with one realistic bug each (and correct ones), their "
    "authors' claims against a valid 95% eps_L from an audit of the pipeline as written",
    "auditsel.reproductions.bugzoo:rows",
    render="auditsel.reproductions.bugzoo:render",
    root="results",
)
register(
    "bugzoo-checks",
    "The checks before games (`auditsel check`) on every bug-zoo pipeline: findings, "
    "verdict and seconds",
    "auditsel.reproductions.bugzoo.zoo_checks:rows",
    render="auditsel.reproductions.bugzoo.zoo_checks:render",
    root="results",
)
register(
    "interval",
    "The honest interval on issue 19's DP-SGD settings: the attack value (a lower bound), the "
    "rigorous bounds, the width; the reduced game's heuristic values beside them",
    "auditsel.reproductions.interval_settings:rows",
    summary="auditsel.reproductions.interval_settings:summary",
)
register(
    "any-score",
    "Any score: [XWW24]'s monotone-score values against the attack value over score "
    "functions (a lower bound for any score) and the generic and profile bounds",
    "auditsel.reproductions.any_score:rows",
    summary="auditsel.reproductions.any_score:summary",
)
register(
    "interval-widths",
    "Interval widths for any score (attack value, tightest rigorous bound) over the "
    "accountants table's tuning cells and a realistic DP-SGD grid",
    "auditsel.reproductions.interval_widths:rows",
    summary="auditsel.reproductions.interval_widths:summary",
)
register(
    "dpsgd-factor",
    "[KRW24] Fig. 7: how many more models the profile bound allows than the RDP "
    "bound (q = 16384/50000, sigma = 21.1, T = 250)",
    f"{_B}:dpsgd_factor_rows",
)


# --- output -----------------------------------------------------------------------------------
#: decimals of a percentage column (a name with the word ``pct``) and of a width column (``width``:
#: upper end minus lower end) in `to_markdown`: few enough that the spread of the DP-SGD profile
#: bound between vector units stays below half a unit of the last digit (docs/howto/develop.md,
#: "Tests on other vector units"; `tests/reproductions/test_reproduce.py` checks the tables)
PCT_DIGITS = 2
WIDTH_DIGITS = 3


def to_markdown(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    digits: int = 3,
    cell: Callable[[Any], str] | None = None,
) -> str:
    """A GitHub markdown table of the rows (floats rounded to `digits`; percentage columns,
    named with the word ``pct``, to at most `PCT_DIGITS`; width columns, named with the word
    ``width``, to at most `WIDTH_DIGITS`; `cell`: each value written by it instead)."""
    if not rows:
        return ""
    columns = list(columns or dict.fromkeys(k for r in rows for k in r))

    def fmt(v, places):
        if cell is not None:
            return cell(v)
        if v is None:
            return "-"
        if isinstance(v, float):
            if not math.isfinite(v):
                return "inf"
            return f"{v:.{places}g}" if (abs(v) < 1e-3 and v != 0) else f"{v:.{places}f}"
        return str(v)

    places = {
        c: min(digits, PCT_DIGITS if "pct" in c.split("_") else WIDTH_DIGITS)
        if {"pct", "width"} & set(c.split("_"))
        else digits
        for c in columns
    }
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c), places[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _csv(rows, columns: Sequence[str] | None = None) -> str:
    columns = list(columns or dict.fromkeys(k for r in rows for k in r))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _law_name(law: Any) -> str:
    """A law of K as the tables write it: `kind(param=value, ...)`."""
    return f"{law.kind}({', '.join(f'{k}={v:g}' for k, v in law.params().items())})"


def _clean(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


def reproduce(name: str, out_root: Path, jobs: int = 1) -> Path:
    """Compute reproduction `name` and write it under out_root/name/ (see module docstring)."""
    entry = REGISTRY[name]
    out = Path(out_root) / name
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = [{k: _clean(v) for k, v in row.items()} for row in entry.compute(jobs, out)]
    if entry.render:
        return entry.resolve(entry.render)(rows, time.perf_counter() - start, out)
    return render(name, rows, time.perf_counter() - start, out)


def render(name: str, rows: list[dict], seconds: float, out: Path) -> Path:
    """Write table.md, table.csv and rows.json (and the entry's plots) for computed rows."""
    entry = REGISTRY[name]
    extra = []
    if entry.plot:
        files = entry.resolve(entry.plot)(rows, out)
        extra = [line for f in files for line in ("", f"![{Path(f).stem}]({Path(f).name})")]
    summary = ["", *entry.resolve(entry.summary)(rows)] if entry.summary else []
    computed = f"Computed by `auditsel reproduce {name}` in {seconds:.1f} s."
    lines = [to_markdown(rows, digits=4), *summary, "", computed, *extra]
    return _write(out, entry.title, lines, rows, rows)


def _write(
    out: Path, title: str, lines: list[str], document: Any, csv_rows: list[dict] | None = None
) -> Path:
    """out/table.md (the heading `title` over `lines`), out/rows.json (`document`) and, given
    `csv_rows`, out/table.csv: what every reproduction writes."""
    atomic_write_text(out / "table.md", "\n".join([f"# {title}", "", *lines, ""]))
    if csv_rows is not None:
        atomic_write_text(out / "table.csv", _csv(csv_rows))
    atomic_write_text(out / "rows.json", json.dumps(document, indent=1) + "\n")
    return out
