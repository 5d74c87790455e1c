"""Plots draw at most a few thousand points whatever the number of games (issue 10 item 5), and
the points they draw are exact: the ROC counts equal those of the audit's own threshold table."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from figure_records import record_saved_figures

from auditsel.auditing.sorted_scores import threshold_table
from auditsel.experiments.config import parse_config
from auditsel.experiments.experiment import ExperimentOutputs, run_experiment
from auditsel.results.plots import decade_label
from auditsel.results.report import roc_points, sorted_scores, write_plots


def _quickstart_game(name: str, trials: int):
    """The quickstart's setting (Gaussian mu = 0.5, TNB(0, 0.01)) with a reduced game."""
    return parse_config(
        {
            "name": name,
            "delta": 1e-5,
            "base": {"kind": "gaussian", "mu": 0.5},
            "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
            "game": {"kind": "reduced", "trials": trials, "seed": 0},
        }
    )


@pytest.mark.parametrize("n, ties", [(1000, False), (200_000, True), (7, True)])
def test_roc_points_are_exact_counts_over_every_decade(n, ties):
    rng = np.random.default_rng(n)
    member = rng.integers(0, 2, n)
    scores = rng.normal(member, 1.0)
    if ties:
        scores = np.round(scores, 1)
        scores[:3] = [np.inf, -np.inf, np.inf]
    t, fp, fn = roc_points(*sorted_scores(scores, member))
    t_all, fp_all, fn_all, n0, n1 = threshold_table(scores, member)
    idx = np.searchsorted(t_all, t, "right") - 1  # (a -inf score repeats t_all's leading -inf)
    assert np.array_equal(t_all[idx], t)  # every drawn threshold is a real one
    assert np.array_equal(fp, fp_all[idx]) and np.array_equal(fn, fn_all[idx])
    assert len(t) <= 4 * 1500 + 1
    # the extremes are drawn: everything guessed 1, nothing guessed 1, and single-game rates
    assert fp.max() == np.sum(scores[member == 0] > -np.inf) and fn.min() == np.sum(
        scores[member == 1] == -np.inf
    )
    assert fp.min() == 0 and fn.max() == n1
    if len(t_all) > 4 * 1500:
        assert len(t) < len(t_all)
        assert np.min(fp[fp > 0]) == np.min(fp_all[fp_all > 0])  # the smallest FP count
        assert np.min(fn[fn > 0]) == np.min(fn_all[fn_all > 0])


def test_plots_of_a_large_game_draw_a_few_thousand_points(tmp_path, monkeypatch):
    spec = _quickstart_game("big", 400_000)
    result, artefacts = run_experiment(
        spec, None, progress=False, outputs=ExperimentOutputs(curves=False)
    )
    drawn = {}

    def record(fig, path):
        drawn[str(path).rsplit("/", 1)[-1]] = sum(
            len(line.get_xdata()) for ax in fig.axes for line in ax.get_lines()
        )

    record_saved_figures(monkeypatch, record)
    names = write_plots(result, artefacts, tmp_path)
    assert set(names) == {"privacy_curve.png", "scores.png", "tradeoff.png"} == set(drawn)
    assert all(0 < count <= 15_000 for count in drawn.values()), drawn
    assert drawn["tradeoff.png"] < 400_000 / 20


def test_decade_labels_are_plain_text_powers_of_ten():
    back = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
    for k in range(-307, 309):  # the normal doubles (a subnormal 1e-320 is no exact decade)
        label = decade_label(10.0**k)
        assert label.startswith("10") and "$" not in label
        assert int(label[2:].translate(back)) == k  # read back, the label is the exponent
    for value in (2e-5, 0.5, 3.0, 0.0, -1.0, np.inf, np.nan):
        assert decade_label(value) == ""


def test_figures_build_no_mathtext(tmp_path, monkeypatch):
    """Log axes are labelled in plain text: matplotlib's mathtext parser (0.2 s of CPU to
    build in each process that draws) is never used by the run's figures."""
    import matplotlib.mathtext

    spec = _quickstart_game("text", 20_000)
    result, artefacts = run_experiment(spec, None, progress=False)
    parsed = []
    real_parse = matplotlib.mathtext.MathTextParser.parse
    monkeypatch.setattr(
        matplotlib.mathtext.MathTextParser,
        "parse",
        lambda self, s, *a, **k: parsed.append(s) or real_parse(self, s, *a, **k),
    )
    labels = []

    def record(fig, path):
        fig.canvas.draw()
        labels.extend(
            t.get_text()
            for ax in fig.axes
            for axis in (ax.xaxis, ax.yaxis)
            if axis.get_scale() == "log"
            for t in axis.get_ticklabels()
        )

    record_saved_figures(monkeypatch, record)
    assert len(write_plots(result, artefacts, tmp_path)) == 3
    assert parsed == []
    assert labels and any(label.startswith("10") for label in labels)
    assert not any("$" in label for label in labels)
