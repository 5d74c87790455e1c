"""[PS22] Section 2: tuning a soft-margin SVM without privacy reveals whether 8 outliers were in.

Setting ([PS22] Sec. 2, Figure 1). D: 40 points in R^2, 20 per class, from isotropic Gaussians
of standard deviation 1 centred at (7.86, -3.36) (label -1) and (6.42, -9.17) (label +1), drawn
once (seed 0). D' = D plus 8 copies of the outlier (7.9, -8.0) labelled -1. The SVM minimises
the per-example objective ||w||^2 + alpha max(0, 1 - y (w.x + b)) by SGD: EPOCHS epochs, one
permutation per epoch from the run's seed, step STEP / sqrt(t) at the t-th update, from w = 0,
b = 0. Tuning: the training accuracy of every alpha of ALPHAS, the first best alpha released.

* `curve_rows(runs)`: Figure 1 as a table: per alpha the mean training accuracy over `runs`
  seeds on D and on D', and how often tuning releases that alpha on each.

* `audit_rows(games)`: the tuning run audited as a pipeline (`auditsel.audit_pipeline`):
  `tune(data, seed, canary)` above, the canary `InputCanary(outlier, -1, copies=8)` (the 8
  outliers, appended when in), the score the released alpha. Nothing in the tuning is private,
  so the valid eps_L is limited only by the number of games.

`auditsel reproduce ps22-svm` writes results/papers/ps22-svm/ (table.md, rows.json, the plot).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from auditsel.pipelines.audit_options import ExecutionOptions
from auditsel.pipelines.canaries import Canary, InputCanary
from auditsel.pipelines.pipeline import Pipeline, audit_pipeline
from auditsel.reproductions import REGISTRY, _write, to_markdown
from auditsel.results.figures import new_figure, save_figure

NEGATIVE_MEAN, POSITIVE_MEAN = (7.86, -3.36), (6.42, -9.17)
OUTLIER = (7.9, -8.0)
ALPHAS = (0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 16.0, 24.0, 32.0)
EPOCHS, STEP = 20, 0.01
RUNS = 200  # seeds per point of the curve
GAMES = 1000
DELTA = 1e-5


def sample_data(seed: int = 0, per_class: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """D: (X, y), `per_class` points of each class, labels -1 then +1."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(m, 1.0, (per_class, 2)) for m in (NEGATIVE_MEAN, POSITIVE_MEAN)])
    return X, np.r_[-np.ones(per_class), np.ones(per_class)]


DATA = sample_data()
OUTLIERS = InputCanary(np.array(OUTLIER), -1.0, copies=8)


def training_accuracy(
    data: tuple[NDArray[np.float64], NDArray[np.float64]], seed: int
) -> np.ndarray:
    """The training accuracy of the SVM trained by SGD with every alpha of ALPHAS (one run
    each, all with the same order of examples)."""
    X, y = data
    rng = np.random.default_rng(seed)
    alphas = np.asarray(ALPHAS)
    w, b = np.zeros((len(alphas), 2)), np.zeros(len(alphas))
    t = 0
    for _ in range(EPOCHS):
        for i in rng.permutation(len(X)):
            t += 1
            step = STEP / np.sqrt(t)
            violated = y[i] * (w @ X[i] + b) < 1  # the hinge term's subgradient is on
            pull = alphas * violated * y[i]
            w -= step * (2 * w - pull[:, None] * X[i])
            b += step * pull
    return (np.sign(w @ X.T + b[:, None]) == y).mean(axis=1)


def tune(
    data: tuple[NDArray[np.float64], NDArray[np.float64]], seed: int, canary: Canary
) -> dict[str, float]:
    """Non-private tuning: the alpha with the best training accuracy (the first, on ties)."""
    return {"alpha": ALPHAS[int(np.argmax(training_accuracy(data, seed)))]}


def score(release: Mapping[str, float], canary: Canary) -> float:
    """The released alpha: large when the outliers were in."""
    return release["alpha"]


def curve_rows(runs: int = RUNS) -> list[dict]:
    """Figure 1: mean training accuracy per alpha on D and D', and how often each is chosen."""
    with_outliers = OUTLIERS.for_game(True, np.random.default_rng(0)).prepare(DATA)
    stats = {}
    for name, data in (("without", DATA), ("with", with_outliers)):
        accuracy = np.array([training_accuracy(data, seed) for seed in range(runs)])
        stats[f"accuracy_{name}"] = accuracy.mean(axis=0)
        stats[f"chosen_{name}"] = np.bincount(accuracy.argmax(axis=1), minlength=len(ALPHAS)) / runs
    keys = ("accuracy_without", "accuracy_with", "chosen_without", "chosen_with")
    return [{"alpha": a, **{k: float(stats[k][i]) for k in keys}} for i, a in enumerate(ALPHAS)]


def audit_rows(games: int = GAMES, jobs: int = 1) -> dict:
    """The tuning run audited with audit_pipeline: eps_L at 95%, games, CPU seconds."""
    result = audit_pipeline(
        Pipeline(tune, score, data=DATA, canary=OUTLIERS),
        games=games,
        delta=DELTA,
        execution=ExecutionOptions(jobs=jobs),
    )
    assert result.scores is not None and result.member is not None  # played in memory
    scores, member = result.scores, result.member == 1
    return {
        "games": games,
        "delta": DELTA,
        "eps": result.eps,
        "rule": result.rule,
        "confidence": result.confidence,
        "p_alpha_above_min_without": float(np.mean(scores[~member] > ALPHAS[0])),
        "p_alpha_above_min_with": float(np.mean(scores[member] > ALPHAS[0])),
        "cpu_seconds": round(result.cpu_seconds, 2),
    }


def rows(jobs: int = 1) -> list[dict]:
    """The curve's rows, then one row holding the audit (`kind` tells them apart)."""
    curve = [{"kind": "curve", **r} for r in curve_rows()]
    return [*curve, {"kind": "audit", **audit_rows(jobs=jobs)}]


def plot(curve: list[dict], path: Path) -> Path:
    fig, ax = new_figure((6, 3.8))
    alphas = [r["alpha"] for r in curve]
    ax.plot(alphas, [r["accuracy_without"] for r in curve], "o-", label="D (without outliers)")
    ax.plot(alphas, [r["accuracy_with"] for r in curve], "s-", label="D' (with the 8 outliers)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("alpha (weight of the hinge loss)")
    ax.set_ylabel(f"training accuracy (mean of {RUNS} SGD runs)")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)
    return path


def render(rows: list[dict], seconds: float, out: Path) -> Path:
    """table.md (the curve, the audit), rows.json ({"curve": [...], "audit": {...}}), the plot."""
    curve = [{k: v for k, v in r.items() if k != "kind"} for r in rows if r["kind"] == "curve"]
    (audit,) = [{k: v for k, v in r.items() if k != "kind"} for r in rows if r["kind"] == "audit"]
    plot(curve, out / "svm_outliers.png")
    best_with = max(curve, key=lambda r: r["accuracy_with"])
    lines = [
        f"Training accuracy per alpha (mean of {RUNS} SGD runs) and how often non-private tuning "
        "releases each alpha:",
        "",
        to_markdown(curve, digits=3),
        "",
        f"- With the outliers the best mean accuracy is at alpha = {best_with['alpha']:g} "
        f"({best_with['accuracy_with']:.3f}); without them tuning releases alpha = "
        f"{ALPHAS[0]:g} in {curve[0]['chosen_without']:.0%} of runs.",
        f"- The audit (`auditsel.audit_pipeline`, {audit['games']:,} games, canary = the 8 "
        f"outliers, score = the released alpha): valid eps_L = {audit['eps']:.3f} at "
        f"{audit['confidence']:.0%} ({audit['rule']} rule, delta = {audit['delta']:g}), "
        f"{audit['cpu_seconds']:.0f} CPU s. The released alpha exceeds {ALPHAS[0]:g} in "
        f"{audit['p_alpha_above_min_with']:.1%} of the games with the outliers and "
        f"{audit['p_alpha_above_min_without']:.1%} without: eps_L is limited by the number of "
        "games only.",
        "",
        f"Computed by `auditsel reproduce ps22-svm` in {seconds:.0f} s.",
        "",
        "![accuracy against alpha](svm_outliers.png)",
    ]
    return _write(out, REGISTRY["ps22-svm"].title, lines, {"curve": curve, "audit": audit})
