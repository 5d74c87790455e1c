"""Tables and plots of a result: the terminal table, report.md and PNG figures (drawn by
`auditsel.results.plots` from what `write_plots` hands it: `game_figure_data`).

Everything shown is read from the result dict (the same numbers as result.json) through its
labels, computed once (`auditsel.results.heuristics.result_labels`). The bounds for any
score are the table's rows; the interval follows (`accounting.interval`): the tuning run's
epsilon lies in [lower, upper] for any score, the number to report is the upper end. Values
under an assumption (the reduced game's, [XWW24]'s monotone score; the eq. 19 heuristic for
tau < 1) come after it, one line per assumption in the terminal and one small table each in
report.md, naming the assumption and the valid lower values they sit below. A heuristic value
carries the word "heuristic" in every row and plot legend, is drawn dashed, never as a solid
bound line, and one that the result contradicts (below the attack value, a valid eps_L or eps_B
of one run) is flagged "CONTRADICTED" with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from auditsel.accounting.exact import tradeoff_curve
from auditsel.auditing.sorted_scores import SortedScores
from auditsel.errors import percent
from auditsel.files import atomic_write_text as atomic_write_text
from auditsel.results.heuristics import ResultLabels, result_labels
from auditsel.results.plots import draw_plots


def _fmt(x, digits=4):
    return "n/a" if x is None else f"{x:.{digits}f}"


def summary_rows(result: dict, labels: ResultLabels) -> list[tuple[str, str, str, str]]:
    """(quantity, value, rigour, source) rows, lower bound first, then the base and the bounds
    for any score (`labels`: the result's `ResultLabels`)."""
    low, one, claim, att = (result.get(k) for k in ("lower", "one_run", "claim", "attack"))
    rows = (_lower_rows(low) if low else []) + (_one_run_rows(one) if one else [])
    if claim:  # its eps and its verdict against the valid eps_L
        verdict = {True: "REFUTED", False: "not refuted"}[claim["refuted"]]
        source = claim.get("source", "")
        if low:
            level = percent(claim.get("confidence", low["confidence"]))
            source = f"{verdict} at {level} (valid eps_L {'>' if claim['refuted'] else '<='} claim)"
        rows.append(("claimed eps", _fmt(claim["epsilon"]), f"claim, {verdict}", source))
    if att:
        source = att["source"].removeprefix("attack: ")
        rows.append(("attack value", _fmt(att["epsilon"]), "lower bound", source))
    if result.get("base"):
        rows.append(
            ("eps_B (one run)", _fmt(result["base"]["epsilon"]), "rigorous", "base mechanism")
        )
    for key, (value, rigour, source) in labels.upper.items():
        if key in labels.contradicted:
            rigour = "heuristic, CONTRADICTED"
        rows.append((key, _fmt(value), rigour, source or _absent(value)))
    return rows


def _lower_rows(low: dict) -> list[tuple[str, str, str, str]]:
    """The rows of result.json's `lower`: the rule's eps_L, the best threshold's, the GDP fit's."""
    rule = low["threshold_rule"]
    rows = [
        (
            f"eps_L ({rule}, {percent(low['confidence'])} CP)",
            _fmt(low["eps"]),
            "empirical" + (" (optimistic)" if rule == "best" else ""),
            f"{low['trials']:,} games, proxy {low['proxy']}",
        ),
        (
            "eps_L (best threshold)",
            _fmt(low["eps_best_threshold"]),
            "empirical (optimistic)",
            "max over all thresholds",
        ),
    ]
    gdp = low.get("gdp_fit", low.get("eps_gdp"))  # eps_gdp: result.json of earlier releases
    fit_ok: Any = low.get("gdp_fit_ok")  # True, False or None (no fit)
    fits = {True: "model fits", False: "model REJECTED by the data"}.get(fit_ok)
    source = "[NHSBTJCT23], every threshold" + (f"; {fits}" if fits else "")
    rows.append(("eps_L (gdp_fit)", _fmt(gdp), "heuristic", source))
    return rows


def _one_run_rows(one: dict) -> list[tuple[str, str, str, str]]:
    """The rows of result.json's `one_run`: [SNJ23]'s and [MMC24]'s eps_L, the exact value."""
    spread = lambda v: (
        f"audit 0 of {len(v)}: mean {np.mean(v):.4g}, min {min(v):.4g}, max {max(v):.4g}"
        if len(v) > 1
        else "one audit"
    )
    return [
        (
            f"eps_L one-run ({percent(one['confidence'])}) [SNJ23]",
            _fmt(one["eps_snj23"]),
            "empirical",
            f"{one['canaries']:,} canaries in one tuning run; {spread(one['eps_snj23_runs'])}",
        ),
        (
            f"eps_L one-run [MMC24] ({one['family']})",
            _fmt(one["eps_mmc24"]),
            "empirical",
            f"valid if the trade-off is in the family; {spread(one['eps_mmc24_runs'])}",
        ),
        (
            f"exact, one canary of {one['canaries']:,}",
            _fmt(one["exact_per_canary"]),
            one["exact_rigour"],
            "reduced one-run game (auditsel.games.one_run_reduced): "
            + one.get("exact_scope", "exact for this game's own score"),
        ),
    ]


def _absent(value) -> str:
    return "does not apply to this base" if value is None else ""


#: the short name of each block under an assumption (its line in the terminal table)
_BLOCK_TITLES = {
    "monotone_score": "assuming a monotone score ([XWW24]; not the tuning run's eps)",
    "reduced_game": "heuristic ([XWW24] eq. 19, tau < 1, monotone score; not bounds)",
}


def _assumption_lines(result: dict, labels: ResultLabels) -> list[str]:
    """One line per block of values under an assumption (`heuristics.ResultLabels.assumed`):
    the values, and the valid lower values for any score they sit below (for a heuristic
    block: CONTRADICTED)."""
    lines = []
    for block in labels.assumed:
        values = ", ".join(f"{k} {_fmt(v)}" for k, v in block.values.items() if v is not None)
        line = f"{_BLOCK_TITLES.get(block.section, block.section)}: {values or 'n/a'}"
        if block.below:
            flag = "CONTRADICTED: " if block.section == "reduced_game" else ""
            line += f"; {flag}{'; '.join(block.below)}"
        lines.append(line)
    return lines


def interval_lines(result: dict) -> list[str]:
    """The interval in words (empty when the result has none)."""
    iv = result.get("interval")
    if not iv:
        return []
    upper = "inf (no rigorous bound applies)" if iv["upper"] is None else _fmt(iv["upper"])
    width = "inf" if iv["width"] is None else _fmt(iv["width"])
    scores = "any score"
    if (result.get("attack") or {}).get("method") == "coin_search":  # the lower end's assumption
        scores += " (the lower end for a base that releases a coin with each run)"
    return [
        f"interval: the tuning run's epsilon lies in [{_fmt(iv['lower'])}, {upper}] "
        f"(width {width}) for {scores}; report {upper}.",
        f"  lower: {iv['lower_source']}",
        f"  upper: {iv['upper_source'] or 'none'}",
    ]


def _warning_lines(result: dict, labels: ResultLabels) -> list[str]:
    """One line per contradicted heuristic that no assumption line already names (empty when
    none): printed under every table."""
    named = {k for b in labels.assumed for k in b.values}
    return [f"WARNING: {why}." for k, why in labels.contradicted.items() if k not in named]


def _setting(result: dict) -> str:
    """The setting in one line: the law of K and the base when known, else what was played."""
    rounds, base = result.get("rounds"), result.get("base")
    if rounds and base:
        return f"xi = {rounds['kind']} (E[K] = {rounds['mean']:.4g}), base mu = {_fmt(base['mu'])}"
    low = result.get("lower") or {}
    return f"{low.get('game', 'game')} audit, score {low.get('proxy', 'n/a')}"


def text_table(result: dict, labels: ResultLabels | None = None) -> str:
    """The terminal table: the rows, the interval, one line per assumption."""
    labels = labels or result_labels(result)
    rows = summary_rows(result, labels)
    w0, w1, w2 = (max(len(r[i]) for r in rows) for i in range(3))
    head = f"{result['name']}: delta = {result['delta']:g}, {_setting(result)}"
    lines = [head, "-" * len(head)]
    lines += [f"{a:<{w0}}  {b:>{w1}}  {c:<{w2}}  {d}".rstrip() for a, b, c, d in rows]
    tail = (
        interval_lines(result) + _assumption_lines(result, labels) + _warning_lines(result, labels)
    )
    return "\n".join(lines + tail)


_TABLE_HEAD = ("| quantity | epsilon | rigour | source |", "|---|---:|---|---|")


def _assumed_tables(result: dict, labels: ResultLabels) -> list[str]:
    """report.md's block of each assumption: its one-line statement and a table of its values
    (empty when the result has none)."""
    sources = result.get("upper_sources") or {}
    lines: list[str] = []
    for block in labels.assumed:
        lines += [
            "",
            f"**{_BLOCK_TITLES.get(block.section, block.section)}** (`{block.section}` in "
            f"result.json): {block.assumption}.",
            "",
            *_TABLE_HEAD,
        ]
        lines += [
            f"| {block.section}.{k} | {_fmt(v)} | {block.rigour[k]}"
            f"{', CONTRADICTED' if k in labels.contradicted else ''} | "
            f"{sources.get(k) or _absent(v)} |"
            for k, v in block.values.items()
        ]
        if block.below:
            lines += ["", f"For any score: {'; '.join(block.below)}."]
    return lines


def markdown_report(result: dict, plots: list[str], labels: ResultLabels | None = None) -> str:
    """report.md: the setting, the table, the interval, the blocks under an assumption."""
    labels = labels or result_labels(result)
    rounds, base = result.get("rounds"), result.get("base")
    if rounds and base:
        params = ", ".join(f"{k} = {v}" for k, v in rounds.items() if k not in ("kind", "mean"))
        setting = (
            f"delta = {result['delta']:g}; number of runs xi = {rounds['kind']} ({params}), "
            f"E[K] = {rounds['mean']:.6g}; base: {base['kind']}, eps_B = "
            f"{_fmt(base['epsilon'])}, mu = {_fmt(base['mu'])}."
        )
    else:
        setting = f"delta = {result['delta']:g}; {_setting(result)}."
    lines = [
        f"# {result['name']}",
        "",
        setting,
        "",
        *_TABLE_HEAD,
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in summary_rows(result, labels)]
    iv = interval_lines(result)
    if iv:
        lines += ["", f"**{iv[0]}**", "", *[f"- {line.strip()}" for line in iv[1:]]]
    lines += _assumed_tables(result, labels)
    warnings = _warning_lines(result, labels)
    if warnings:
        lines += [""] + [f"**{w}**" for w in warnings]
    if result.get("notes"):
        lines += ["", "Notes:", *[f"- {note}" for note in result["notes"]]]
    low = result.get("lower")
    if low:
        lines += [
            "",
            f"Lower bound: threshold rule `{low['threshold_rule']}`, guess member when score "
            f"{low['direction']} {'-inf' if low['threshold'] is None else format(low['threshold'], '.6g')}; FP = {low['fp']:.4g} (upper limit "
            f"{low['fp_upper']:.4g}), FN = {low['fn']:.4g} (upper limit {low['fn_upper']:.4g}), "
            f"on {low['evaluated_trials']:,} of {low['trials']:,} trials; seed {low['seed']}.",
        ]
        if low.get("score"):
            lines += [
                "",
                f"The tuner's score: {low['score']['describe']} (game.score: "
                f"{low['score']['configured']}); the adversary thresholds its statistic.",
            ]
    lines += ["", f"Wall time: {result['seconds']:.2f} s.", ""]
    lines += [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def write_plots(
    result: dict,
    artefacts: dict,
    out_dir: Path,
    labels: ResultLabels | None = None,
) -> list[str]:
    """privacy_curve.png (the winner's delta(eps): exact, or the heuristic reduced game with the
    attack's certified lower curve; the bounds; the interval at delta) where the pair and the law
    of K are known and, for a game, scores.png (proxy histograms) and tradeoff.png (ROC)."""
    labels = labels or result_labels(result)
    inputs = {k: artefacts[k] for k in ("curve", "attack_curve") if k in artefacts}
    by_coin, record = artefacts.get("by_coin"), artefacts.get("record")  # the audit's sort
    if result.get("lower") is not None and (by_coin is not None or record is not None):
        if by_coin is None:  # a streamed audit kept no sort: the record's scores, sorted here
            by_coin = sorted_scores(artefacts["record"].scores, artefacts["record"].member)
        # a played game: what its figures draw, not the scores
        inputs["game_data"] = game_figure_data(
            result, by_coin, artefacts.get("winner"), exact=artefacts.get("exact_tradeoff")
        )
    return draw_plots(result, inputs, out_dir, labels)


def game_figure_data(
    result: dict,
    by_coin: tuple[np.ndarray, np.ndarray],
    winner: Any = None,
    *,
    exact: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """What scores.png and tradeoff.png draw, read from each coin's sorted scores: the
    histogram bars (frequencies per output of a finite game, else densities on 79 bins between
    the 0.05% and 99.95% quantiles and the threshold) and the ROC's exact counts
    (`roc_points`), and the exact trade-off curve of the `winner`'s pair where it is known: a
    few thousand numbers whatever the number of games, sent to the process that draws them
    (`plots.draw_plots`) instead of the scores. `exact`: that curve, `tradeoff_curve(winner)`,
    where it was computed already (beside the game: `ExperimentOutputs(figure_data=True)`)."""
    low = result["lower"]  # a played game has its lower bound
    finite = [s[np.searchsorted(s, -np.inf, "right") : np.searchsorted(s, np.inf)] for s in by_coin]
    if any(len(f) for f in finite):
        lo = min(_at_quantile(f, 0.0005) for f in finite if len(f))
        hi = max(_at_quantile(f, 0.9995) for f in finite if len(f))
    else:
        lo, hi = 0, 1
    if low and low.get("threshold") is not None and np.isfinite(low["threshold"]):
        lo, hi = min(lo, low["threshold"]), max(hi, low["threshold"])
    values = _distinct(finite, limit=50)
    bars = []
    for b in (0, 1):
        if values is not None:  # a finite-output game: frequencies per output
            s = finite[b]
            counts = np.searchsorted(s, values, "right") - np.searchsorted(s, values, "left")
            bars.append((values, counts / max(len(s), 1)))
        else:  # a density histogram from the sorted scores: counts by binary search
            edges = np.linspace(lo, hi, 80)
            counts = np.diff(np.searchsorted(finite[b], edges, "right"))
            bars.append((edges, counts / max(len(finite[b]), 1) / np.diff(edges)))
    _, fp, fn = roc_points(*by_coin)
    return {
        "exact": exact if exact is not None or winner is None else tradeoff_curve(winner),
        "finite_outputs": values is not None,
        "bars": bars,
        "roc": (fp, fn),
        "n": (len(by_coin[0]), len(by_coin[1])),
    }


def sorted_scores(scores: ArrayLike, member: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The scores of the b = 0 and the b = 1 games, each sorted: the audit's own per-coin sort
    (`auditsel.auditing.sorted_scores.SortedScores.by_coin`), for plots of games audited without it (streamed)."""
    return SortedScores(scores, member).by_coin()


def _at_quantile(sorted_values: np.ndarray, q: float) -> float:
    return float(sorted_values[int(q * (len(sorted_values) - 1))])


def _distinct(sorted_parts, limit: int):
    """The distinct values of the sorted arrays if there are at most `limit`, else None."""
    values = []
    for part in sorted_parts:
        if len(part) and np.count_nonzero(part[1:] != part[:-1]) + 1 > limit:
            return None
        values.append(np.unique(part))
    merged = np.unique(np.concatenate(values)) if values else np.empty(0)
    return merged if len(merged) <= limit else None


def roc_points(
    s0: np.ndarray, s1: np.ndarray, points: int = 1500
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact (FP count, FN count) of "guess 1 when score > t" at a few thousand thresholds t:
    order statistics at ranks log-spaced from each end of both coins' sorted scores, so that
    every decade of FP and FN down to one game is drawn. Counts by binary search: O(points log n).

    Returns (t, fp, fn) with t ascending, -inf first (everything guessed 1)."""
    picks = [np.array([-np.inf])]
    for s in (s0, s1):
        if len(s):
            ranks = np.unique(np.geomspace(1, len(s), points).astype(np.int64)) - 1
            picks += [s[ranks], s[len(s) - 1 - ranks]]
    t = np.unique(np.concatenate(picks))
    fp = len(s0) - np.searchsorted(s0, t, "right")
    fn = np.searchsorted(s1, t, "right")
    return t, fp, fn


def write_outputs(
    out_dir: Path,
    result: dict,
    artefacts: dict,
    *,
    plots: bool = True,
) -> list[Path]:
    """Write result.json, report.md and (unless `plots` is false: no matplotlib at all) the
    plots to a staging folder, then move them in place. An estimator panel still being
    computed (artefacts["estimators"], `ExperimentOutputs(defer_panel=True)`) is waited for after
    the plots and put in result["lower"]["estimators"]."""
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=out_dir))
    pending = artefacts.pop("estimators", None)  # the panel, computed beside the plots
    try:
        labels = result_labels(result)  # once: every writer below reads it
        drawn = write_plots(result, artefacts, staging, labels) if plots else []
        if pending is not None:
            result["lower"]["estimators"] = pending.result()
            pending = None
        (staging / "report.md").write_text(markdown_report(result, drawn, labels))
        (staging / "result.json").write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
        names = drawn + ["report.md", "result.json"]  # result.json last: its presence means done
        for name in names:
            os.replace(staging / name, out_dir / name)
        return [out_dir / n for n in names]
    except OSError as err:
        if err.filename is not None or err.errno is None:
            raise
        # a full disk inside matplotlib or a write: name the file written last
        files = [p for p in staging.iterdir() if p.is_file()]
        newest = max(files, key=lambda p: p.stat().st_mtime_ns).name if files else ""
        raise OSError(err.errno, err.strerror, str(out_dir / newest)) from err
    finally:
        if pending is not None:  # the plots failed: the panel is not waited for
            pending.cancel()
        shutil.rmtree(staging, ignore_errors=True)
