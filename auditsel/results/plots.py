"""The run's three figures, drawn: privacy_curve.png, scores.png and tradeoff.png.

Contract. `draw_plots(result, artefacts, out_dir, labels)` draws from the result dict (the
numbers of result.json, read through its labels) and from small artefacts: the winner's curve,
the attack's curve, and what the game's figures draw of its scores
(`report.game_figure_data`: histogram bars, the ROC's exact counts and the pair's exact
trade-off curve). A pixel is never data. It imports numpy, matplotlib (on first use) and the
figures' file writer only (scipy not included). Heuristic values are drawn as
`auditsel.results.report` says. Log axes are labelled in plain text (`decade_label`).
"""

from __future__ import annotations

from collections.abc import Collection
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

from auditsel.executor import in_background
from auditsel.results.figures import new_figure, prepare_plotting, save_figure
from auditsel.results.heuristics import ResultLabels

_PREFETCH: list[Future[None]] = []  # the import started by prefetch_plotting


def prefetch_plotting() -> None:
    """Import matplotlib in a background thread (a third of a second), so that it is loaded by
    the time the plots are drawn; the game and the bounds run meanwhile. `draw_plots` waits
    for it (rather than importing twice)."""
    _PREFETCH.append(in_background(prepare_plotting))


def legend_label(
    label: str, key: str, heuristic: Collection[str], contradicted: Collection[str]
) -> str:
    """A plot legend entry: "heuristic" (and "CONTRADICTED") where the value is no bound."""
    if key not in heuristic:
        return label
    return f"{label}, heuristic" + (", CONTRADICTED" if key in contradicted else "")


_SUPERSCRIPT = str.maketrans(
    "-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
)


def decade_label(value: float, _position: object = None) -> str:
    """A log axis's tick label as plain text: 1e-5 -> "10⁻⁵" (superscript digits), "" for a
    value that is not a power of ten. Matplotlib's own labels are mathtext ("$10^{-5}$"), whose
    parser is built on first use: 0.2 s of CPU in each process that draws a figure."""
    if not value > 0 or not np.isfinite(value):
        return ""
    exponent = float(np.log10(value))
    decade = round(exponent)
    if abs(exponent - decade) > 1e-9:
        return ""
    return "10" + str(decade).translate(_SUPERSCRIPT)


def _finish(fig, ax, path: Path, titles: tuple[str, str, str], **legend: Any) -> str:
    """Label `ax` (x label, y label, title), add its legend (`legend`: the legend's options),
    set the figure's margins, save it to `path`; returns its file name."""
    ax.set_xlabel(titles[0])
    ax.set_ylabel(titles[1])
    ax.set_title(titles[2])
    ax.legend(**legend)
    _margins(fig)
    save_figure(fig, path)
    return path.name


def _margins(fig):
    """Fixed margins that fit the axis labels and log-scale tick labels of these small figures
    (tight_layout measured every text, drawing each figure twice: half the time of the plots).
    Log axes keep their decade ticks only (minor ticks cost more than the rest of a figure),
    labelled in plain text (`decade_label`: no mathtext parser to build)."""
    from matplotlib.ticker import FuncFormatter, NullLocator  # deferred: matplotlib is heavy

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                axis.set_minor_locator(NullLocator())
                axis.set_major_formatter(FuncFormatter(decade_label))
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=0.75 / width, right=1 - 0.15 / width, bottom=0.55 / height, top=1 - 0.35 / height
    )


def draw_plots(result: dict, artefacts: dict, out_dir: Path, labels: ResultLabels) -> list[str]:
    """Draw privacy_curve.png (where artefacts has the "curve") and, for a played game (its
    artefacts["game_data"], `report.game_figure_data`), scores.png and tradeoff.png into
    out_dir; returns the names written."""
    while _PREFETCH:  # the imports prefetch_plotting started
        _PREFETCH.pop().result()
    prepare_plotting()
    game = result.get("lower") is not None and "game_data" in artefacts
    draw = [_plot_privacy_curve] if "curve" in artefacts else []
    draw += [_plot_tradeoff, _plot_scores] if game else []
    names = [fn(result, artefacts, out_dir, labels) for fn in draw]
    order = ["privacy_curve.png", "scores.png", "tradeoff.png"]
    return sorted(names, key=order.index)


def _plot_privacy_curve(result: dict, artefacts: dict, out_dir: Path, labels) -> str:
    eps, delta = artefacts["curve"]
    heuristic = set(labels.heuristic_keys)
    contradicted = labels.contradicted
    reduced = "exact" in (result.get("reduced_game") or {})
    monotone = set(labels.monotone_keys)
    fig, ax = new_figure((6, 4))
    if delta is not None:  # None: no exact winner law for this base (a dp_accounting event)
        positive = delta > 0
        what = "mu of eq. 19" if reduced else "exact (monotone score assumed)"
        label = legend_label(f"reduced game, {what}", "exact", heuristic, contradicted)
        style = "--" if "exact" in heuristic or "exact" in monotone else "-"
        ax.semilogy(eps[positive], delta[positive], style, color="k", lw=1.8, label=label)
    attack_delta = artefacts.get("attack_curve")
    if attack_delta is not None and np.any(attack_delta > 0):
        keep, label = attack_delta > 0, "attack (certified lower delta(eps))"
        ax.semilogy(eps[keep], attack_delta[keep], "-", color="C3", lw=1.8, label=label)
    ax.axhline(result["delta"], color="grey", ls=":", label=f"delta = {result['delta']:g}")
    eps_b = result["base"].get("epsilon")
    if eps_b is not None:
        ax.plot([eps_b], [result["delta"]], "kx", ms=7, label=f"eps_B = {eps_b:.3f} (one run)")
    iv = result.get("interval") or {}
    if iv.get("lower") is not None and iv.get("upper") is not None:
        ax.plot(
            [iv["lower"], iv["upper"]],
            [result["delta"], result["delta"]],
            "-",
            color="C8",
            lw=5,
            alpha=0.5,
            solid_capstyle="butt",
            label=f"interval [{iv['lower']:.3f}, {iv['upper']:.3f}]",
        )
    curves = _plot_upper_curves(ax, result, heuristic, monotone, contradicted)
    low, claim = result.get("lower"), result.get("claim")  # the valid eps_L, the claimed eps
    if low:
        ax.axvline(low["eps"], color="C3", ls="-.", lw=0.8, label=f"eps_L = {low['eps']:.3f}")
    if claim:
        label = f"claimed eps = {claim['epsilon']:.3f}"
        ax.axvline(claim["epsilon"], color="C2", ls="--", lw=0.8, label=label)
    ax.set_ylim(max(min(curves.get("delta", [1e-10])), 1e-12) / 3, 1.0)
    titles = ("epsilon", "delta(epsilon)", f"{result['name']}: privacy curves")
    return _finish(fig, ax, out_dir / "privacy_curve.png", titles, fontsize=7, loc="lower left")


def _plot_upper_curves(ax, result: dict, heuristic: set, monotone: set, contradicted) -> dict:
    """The bounds' eps at each delta (the tuning bounds, the reduced game's values; dashed
    where heuristic or under the monotone-score assumption); returns the curves drawn."""
    curves = dict(result.get("upper_curves") or {})
    for section in ("reduced_game_curves", "monotone_score_curves"):
        curves.update((k, v) for k, v in (result.get(section) or {}).items() if k != "delta")
    styles = {
        "generic_rdp": ("C0", "generic RDP"),
        "profile": ("C1", "profile"),
        "improved_rdp": ("C2", "improved (UO)"),
        "improved_rdp_gdp": ("C4", "improved (UG)"),
    }
    for key, (color, name) in styles.items():
        values = curves.get(key)
        if values and any(v is not None for v in values):
            pairs = [(v, d) for v, d in zip(values, curves["delta"]) if v is not None]
            xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
            note = ", monotone score assumed" if key in monotone else ""
            label = legend_label(f"{name} (eps at each delta){note}", key, heuristic, contradicted)
            style = "o--" if key in heuristic or key in monotone else "o-"
            ax.semilogy(xs, ys, style, color=color, ms=3, lw=1, label=label)
    return curves


def _plot_scores(result: dict, artefacts: dict, out_dir: Path, labels) -> str:
    """scores.png: the proxy's histograms per coin, and the threshold."""
    low = result["lower"]  # a played game has its lower bound
    data = artefacts["game_data"]
    finite_outputs = data["finite_outputs"]
    fig, ax = new_figure((6, 4))
    for b, color in ((0, "C0"), (1, "C1")):
        label = f"b = {b} ({'X′' if b else 'X'})"
        x, y = data["bars"][b]
        if finite_outputs:  # frequencies per output, log scale
            width = 0.4 * (np.min(np.diff(x)) if len(x) > 1 else 1.0)
            ax.bar(x + (b - 0.5) * width, y, width=width, color=color, label=label, log=True)
        else:  # densities on the bins with edges x
            ax.stairs(y, x, fill=True, alpha=0.5, color=color, label=label)
    if low and low.get("threshold") is not None and np.isfinite(low["threshold"]):
        ax.axvline(low["threshold"], color="k", ls="--", lw=1, label="threshold")
    titles = (
        f"proxy score ({low['proxy']})",
        "frequency" if finite_outputs else "density",
        f"{result['name']}: scores of the distinguishing game",
    )
    return _finish(fig, ax, out_dir / "scores.png", titles, loc="upper right")


def _tradeoff_references(result: dict, data: dict, labels, dense: np.ndarray) -> list[tuple]:
    """The reference curves of tradeoff.png, each (name, x = FP, y = FN of "guess X'", dashed,
    colour): the pair's exact trade-off curve (when known) and the boundary a claimed
    (eps, delta) allows (when a claim was audited), the latter on the `dense` FP grid."""
    references = []
    if data.get("exact") is not None:  # the pair's exact trade-off curve
        exact_fp, exact_fn = data["exact"]
        heuristic = "exact" in labels.heuristic_keys
        reduced = "exact" in (result.get("reduced_game") or {})
        what = "reduced game" if reduced else "exact, monotone score"
        name = legend_label(what, "exact", labels.heuristic_keys, labels.contradicted)
        references.append((f"{name} (likelihood ratio)", exact_fp, exact_fn, heuristic, "k"))
    claim = result.get("claim")
    if claim:
        e, d = np.exp(claim["epsilon"]), result["delta"]
        claim_fn = np.maximum.reduce([np.zeros_like(dense), 1 - d - e * dense, (1 - d - dense) / e])
        references.append(
            (f"claimed eps = {claim['epsilon']:.3g}: no test above", dense, claim_fn, True, "C2")
        )
    return references


def _plot_tradeoff(result: dict, artefacts: dict, out_dir: Path, labels) -> str:
    """ROC on log axes (true-positive rate 1 - FN against FP, as in membership-inference
    audits): the game's exact (FP, TP) at a few thousand thresholds spread over every decade
    (`roc_points`), against the exact trade-off curve of the pair (when the pair is known) and
    the boundary that a claimed (eps, delta) allows (when a claim was audited)."""
    data = artefacts["game_data"]
    (fp, fn), (n0, n1) = data["roc"], data["n"]
    fp_rate, tp_rate = fp / n0, 1 - fn / n1
    dense = np.logspace(-9, 0, 500)  # the curves are linear between vertices (randomised tests)

    def branch(x, y):
        order = np.argsort(x)
        return dense, np.interp(dense, x[order], y[order])

    references = _tradeoff_references(result, data, labels, dense)
    once = {name for name, *_ in references if name.startswith("claimed")}  # one legend entry
    floor = 0.5 / max(n0, n1)
    fig, ax = new_figure((5, 5))
    # both kinds of test: "guess X' when the score is high" (x = FP, y = 1 - FN) and, with the
    # roles of X and X' swapped, "guess X when it is low" (x = FN, y = 1 - FP)
    for swapped, x_game, y_game, color, what in (
        (False, fp_rate, tp_rate, "C3", "guess X'"),
        (True, 1 - tp_rate, 1 - fp_rate, "C0", "guess X"),
    ):
        for name, ref_fp, ref_fn, dashed, ref_color in references:
            x, y = branch(ref_fn, 1 - ref_fp) if swapped else branch(ref_fp, 1 - ref_fn)
            ax.loglog(
                np.maximum(x, 1e-9),
                np.maximum(y, 1e-9),
                "--" if dashed else "-",
                color="grey" if swapped and ref_color == "k" else ref_color,
                lw=1.5,
                label=name if name in once else f"{name}, {what}",
            )
            if swapped and name in once:
                ax.lines[-1].set_label("_nolegend_")
        ax.loglog(
            np.maximum(x_game, floor),
            np.maximum(y_game, floor),
            ".",
            ms=2,
            color=color,
            label=f"game, {what}, proxy {result['lower']['proxy']}",
        )
    ax.loglog([floor, 1], [floor, 1], ":", color="grey", lw=1, label="chance")
    ax.set_xlim(floor, 1.05)
    ax.set_ylim(floor, 1.05)
    title = f"{result['name']}: trade-off (ROC, log scale)"
    titles = ("false positive rate", "true positive rate", title)
    return _finish(fig, ax, out_dir / "tradeoff.png", titles, fontsize=7, loc="lower right")
