"""Sweeps: one config, a grid over any of its fields, one result per point plus a combined table.

What a sweep reads, runs and writes (docs/howto/sweeps.md): the `sweep:` section (the product
over its keys, zipped within a comma-joined key), every point validated before any work starts
and run through the executor with its own seeded chunks (the numbers do not depend on the
jobs), the outputs (DIR/<point>/, sweep.csv, sweep.md, sweep.json, sweep.png; a point's plots
only with `point_plots`) and the columns (bounds for any score; the reduced game's values under
`<key>_monotone_score`, heuristic ones under `<key>_heuristic`, `contradicted`, the interval
and the attack value).
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm  # the terminal bar (tqdm.auto also imports asyncio)

from auditsel.executor import run_tasks
from auditsel.experiments.config import ConfigError, ExperimentSpec, parse_config
from auditsel.experiments.experiment import ExperimentOutputs, run_experiment
from auditsel.files import atomic_write_text
from auditsel.results.figures import new_figure, save_figure
from auditsel.results.heuristics import result_labels
from auditsel.results.report import write_outputs

MAX_POINTS = 10_000


@dataclass(frozen=True)
class SweepPoint:
    label: str  # directory name, e.g. "base.epsilon=2__rounds.nu=0.01"
    assignments: dict  # dotted field -> value
    spec: ExperimentSpec


def _set(raw: dict, dotted: str, value, key: str) -> None:
    node = raw
    parts = dotted.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            raise ConfigError(
                f"sweep.{key}", f"{dotted}: the config has no section {part!r} to set it in"
            )
        node = node[part]
    node[parts[-1]] = value


def _axes(sweep) -> list[tuple[list[str], list[tuple]]]:
    if not isinstance(sweep, dict) or not sweep:
        raise ConfigError(
            "sweep", "must be a mapping of dotted fields to non-empty lists of values"
        )
    axes = []
    for key, values in sweep.items():
        fields = [f.strip() for f in str(key).split(",")]
        if any(not f or f.startswith("sweep") or f in ("name",) for f in fields):
            raise ConfigError(
                f"sweep.{key}", "must name config fields such as base.epsilon or rounds.nu"
            )
        if not isinstance(values, list) or not values:
            raise ConfigError(f"sweep.{key}", "must be a non-empty list of values")
        if len(fields) > 1:
            for i, v in enumerate(values):
                if not isinstance(v, list) or len(v) != len(fields):
                    raise ConfigError(
                        f"sweep.{key}[{i}]",
                        f"must be a list of {len(fields)} values, one per field",
                    )
            tuples = [tuple(v) for v in values]
        else:
            tuples = [(v,) for v in values]
        axes.append((fields, tuples))
    return axes


def _format(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


MAX_LABEL = 120  # characters of a point's folder name (file systems allow 255 bytes)


def _label(assignments: dict) -> str:
    """The point's folder name: field=value pairs joined by '__', characters other than
    letters, digits and . = + - _ replaced by '_'; a long label is cut and given a digest, so
    that it stays a plain, short name inside the sweep's folder."""
    text = "__".join(f"{k}={_format(v)}" for k, v in assignments.items())
    label = re.sub(r"[^A-Za-z0-9.=+_-]", "_", text)
    if len(label) > MAX_LABEL:
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        label = f"{label[: MAX_LABEL - 14]}__{digest}"
    return label


def expand_sweep(raw: dict, overrides: dict | None = None) -> list[SweepPoint]:
    """All points of a sweep config, each validated (a ConfigError names the point and field)."""
    axes = _axes(raw.get("sweep"))
    base = {k: v for k, v in raw.items() if k != "sweep"}
    combos = list(itertools.product(*[tuples for _, tuples in axes]))
    if len(combos) > MAX_POINTS:
        raise ConfigError("sweep", f"has {len(combos)} points; at most {MAX_POINTS} are allowed")
    points, labels = [], set()
    for combo in combos:
        point_raw = copy.deepcopy(base)
        assignments = {}
        for (fields, _), values in zip(axes, combo):
            for field_name, value in zip(fields, values):
                _set(point_raw, field_name, value, ",".join(fields))
                assignments[field_name] = value
        label = _label(assignments)
        if label in labels:
            raise ConfigError(
                "sweep",
                f"two points would share the folder {label} (values that differ only in "
                f"characters other than letters, digits and . = + - _); make them distinct",
            )
        labels.add(label)
        if overrides and isinstance(point_raw.get("game"), dict):
            point_raw["game"].update(overrides)
        try:
            spec = parse_config(point_raw)
        except ConfigError as err:
            raise ConfigError(
                err.field, f"{str(err).partition(': ')[2]} (sweep point {label})"
            ) from None
        points.append(SweepPoint(label, assignments, spec))
    return points


def _numbered_point(i: int, point: SweepPoint, out_dir: Path, plots: bool) -> tuple[int, dict]:
    """(i, the result) of point i, run into its folder."""
    directory = out_dir / point.label
    directory.mkdir(parents=True, exist_ok=True)
    result, artefacts = run_experiment(
        point.spec, directory, jobs=1, progress=False, outputs=ExperimentOutputs(curves=False)
    )
    write_outputs(directory, result, artefacts, plots=plots)
    return i, result


def run_sweep(
    points: list[SweepPoint],
    out_dir: Path,
    jobs: int = 1,
    progress: bool = True,
    backend: str | None = None,
    point_plots: bool = False,
) -> list[dict]:
    """Run every point (over points, on `backend`: loky, threading or dask as set up by
    `auditsel.executor.execution_backend`) and write the combined table and plot.
    `point_plots`: also draw each point's plots (privacy_curve.png, scores.png, tradeoff.png)
    beside its result.json and report.md; the numbers are the same either way."""
    done: dict[int, dict] = {}
    tasks = [(i, p, out_dir, point_plots) for i, p in enumerate(points)]
    with tqdm(total=len(points), unit="point", disable=not progress, delay=2.0, leave=False) as bar:
        for i, result in run_tasks(_numbered_point, tasks, jobs=jobs, backend=backend):
            done[i] = result
            bar.update(1)
    results = [done[i] for i in range(len(points))]
    rows = sweep_rows(points, results)
    _write_combined(out_dir, points, rows, results, point_plots)
    return results


UPPER_KEYS = ("generic_rdp", "profile", "improved_rdp", "improved_rdp_gdp", "exact")


def sweep_rows(points: list[SweepPoint], results: list[dict]) -> list[dict[str, Any]]:
    """One row per point. A bound column (`generic_rdp`, ...) holds a value only where it is a
    rigorous bound for any score; a reduced-game value under the monotone-score assumption goes
    to `<key>_monotone_score`, a heuristic one to `<key>_heuristic`; columns empty in every row
    are dropped."""
    rows = []
    for point, result in zip(points, results):
        low = result.get("lower") or {}
        labels = result_labels(result)
        blocks = [labels.block(section) for section in ("monotone_score", "reduced_game")]
        monotone, heuristic = ({} if b is None else b.values for b in blocks)
        interval = result.get("interval") or {}
        row = {
            **point.assignments,
            "E[K]": result["rounds"]["mean"],
            "eps_B": result["base"]["epsilon"],
            "mu": result["base"]["mu"],
            "attack": (result.get("attack") or {}).get("epsilon"),
            "interval_lower": interval.get("lower"),
            "interval_upper": interval.get("upper"),
            "width": interval.get("width"),
        }
        for key in UPPER_KEYS:
            bound = labels.upper.get(key)
            row[key] = None if bound is None or bound[1] != "rigorous" else bound[0]
            row[f"{key}_monotone_score"] = monotone.get(key)
            row[f"{key}_heuristic"] = heuristic.get(key)
        row.update(
            {
                "contradicted": " ".join(f"{k}_heuristic" for k in labels.contradicted),
                "eps_L": low.get("eps"),
                "eps_L_point": low.get("eps_point"),
                "eps_L_best": low.get("eps_best_threshold"),
                "eps_L_gdp_heuristic": low.get("gdp_fit", low.get("eps_gdp")),
                "trials": low.get("trials"),
                "seconds": result["seconds"],
            }
        )
        rows.append(row)
    columns = [f"{k}{end}" for end in ("", "_monotone_score", "_heuristic") for k in UPPER_KEYS]
    empty = [c for c in columns if all(r[c] is None for r in rows)]
    return [{k: v for k, v in r.items() if k not in empty} for r in rows]


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}" if math.isfinite(value) else str(value)
    return str(value)


def _write_combined(out_dir: Path, points, rows, results=None, point_plots=False) -> None:
    columns = list(rows[0])
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out_dir / "sweep.csv", buffer.getvalue())
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(r[c]) for c in columns) + " |" for r in rows]
    name = points[0].spec.name
    legend = (
        "Columns ending in `_monotone_score` hold the reduced game's values, which hold only "
        "under [XWW24]'s monotone-score assumption: they are not the tuning run's epsilon. "
        "Columns ending in `_heuristic` hold heuristic values: they are not bounds. "
        "`contradicted` names the heuristic values below the attack value, a valid eps_L or "
        "eps_B of one run. The tuning run's epsilon lies in [`interval_lower`, "
        "`interval_upper`] (the attack value or a valid eps_L, the tightest rigorous bound; "
        "`width` apart): report `interval_upper`."
    )
    warnings = [
        f"- **{p.label}: {r['contradicted'].replace(' ', ', ')} contradicted** (see its report.md)"
        for p, r in zip(points, rows)
        if r.get("contradicted")
    ]
    if warnings:
        warnings = [f"{len(warnings)} points contradict a heuristic:", "", *warnings, ""]
    md = [
        f"# Sweep {name}",
        "",
        f"{len(rows)} points; each has its own folder (named field=value__...) with result.json "
        f"and report.md{' and plots' if point_plots else ''}.",
        "",
        legend,
        "",
        *lines,
        "",
        *warnings,
        "![sweep](sweep.png)",
        "",
    ]
    atomic_write_text(out_dir / "sweep.md", "\n".join(md))
    found = zip(points, rows, results or [{}] * len(rows))
    entries = [dict(r, label=p.label, interval=res.get("interval")) for p, r, res in found]
    text = json.dumps({"name": name, "points": entries}, indent=2) + "\n"
    atomic_write_text(out_dir / "sweep.json", text)
    _plot(out_dir / "sweep.png", name, points, rows)


_SERIES = (
    ("eps_B", "eps_B (one run)", "k:"),
    ("attack", "attack (lower bound)", "C9-"),
    ("generic_rdp", "generic RDP", "C0-"),
    ("profile", "profile", "C1-"),
    ("improved_rdp", "improved (UO)", "C2-"),
    ("improved_rdp_gdp", "improved (UG)", "C5-"),
    ("exact", "exact", "C3-"),
)


def _plot_bounds(ax: Any, xs: list, rows: list[dict], idx: list[int]) -> None:
    """One panel's upper bounds (heuristic ones dashed) and the contradicted heuristics."""
    for col, label, style in _SERIES:
        for suffix, line, legend in (
            ("", style, label),
            ("_monotone_score", style[:2] + "-.", f"{label}, monotone score assumed"),
            ("_heuristic", style[:2] + "--", f"{label}, heuristic"),
        ):
            ys = [rows[i].get(col + suffix) for i in idx]
            if col in ("eps_B", "attack") and suffix:
                continue
            if any(y is not None for y in ys):
                ax.plot(
                    xs, [math.nan if y is None else y for y in ys], line, marker=".", label=legend
                )
    bad = [
        (x, rows[i][f"{k}_heuristic"])
        for x, i in zip(xs, idx)
        for k in rows[i].get("contradicted", "").replace("_heuristic", "").split()
        if k
    ]
    if bad:
        label = "heuristic, CONTRADICTED (below eps_B or eps_L)"
        ax.plot(*zip(*bad), "rx", ms=8, mew=1.5, ls="none", label=label)


def _plot_lower(ax: Any, xs: list, rows: list[dict], idx: list[int]) -> None:
    """One panel's interval (shaded) and eps_L with a bar up to its point estimate."""
    lows = [rows[i].get("interval_lower") for i in idx]
    ups = [rows[i].get("interval_upper") for i in idx]
    if all(v is not None for v in lows + ups):
        ax.fill_between(xs, lows, ups, color="C8", alpha=0.2, label="interval (report the top)")
    low = [rows[i]["eps_L"] for i in idx]
    if any(v is not None for v in low):
        point = [rows[i]["eps_L_point"] for i in idx]
        lo = [0 if v is None else v for v in low]
        up = [
            max((p if p is not None and math.isfinite(p) else v or 0) - (v or 0), 0)
            for p, v in zip(point, low)
        ]
        label = "eps_L (bar: point estimate)"
        ax.errorbar(xs, lo, yerr=[[0] * len(lo), up], fmt="o", color="C4", capsize=3, label=label)


def _plot(path: Path, name: str, points: list, rows: list[dict]) -> None:
    """epsilon against the first swept field, one line per bound, eps_L with its point estimate."""
    fields = list(points[0].assignments)
    x_field = next((f for f in fields if all(isinstance(r[f], (int, float)) for r in rows)), None)
    others = [f for f in fields if f != x_field]
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(tuple(r[f] for f in others), []).append(i)
    n = len(groups)
    cols = min(n, 3)
    nrows = math.ceil(n / cols)
    fig, axes = new_figure((4.6 * cols, 3.6 * nrows), grid=(nrows, cols))
    for ax, (key, idx) in zip(axes.flat, groups.items()):
        xs = [rows[i][x_field] if x_field else i for i in idx]
        order = sorted(range(len(idx)), key=lambda j: xs[j])
        xs = [xs[j] for j in order]
        idx = [idx[j] for j in order]
        _plot_bounds(ax, xs, rows, idx)
        _plot_lower(ax, xs, rows, idx)
        ax.set_xlabel(x_field or "point")
        ax.set_ylabel("epsilon")
        if others:
            ax.set_title(", ".join(f"{f}={_format(v)}" for f, v in zip(others, key)), fontsize=9)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    handles: dict[str, Any] = {}
    for ax in list(axes.flat)[:n]:  # one legend with every series drawn in any panel
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    axes.flat[0].legend(list(handles.values()), list(handles), fontsize=7)
    fig.suptitle(f"{name}: bounds per sweep point")
    fig.tight_layout()
    save_figure(fig, path)
