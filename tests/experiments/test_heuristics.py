"""Heuristics never look like bounds (issue 9 item 2, issue 19 item 1): every output labels them,
draws them dashed, keeps the reduced-game values of tau < 1 out of `upper`, and says when one is
contradicted (below the attack value, a valid eps_L or eps_B of one run).

The case of the issue is [XWW24] Figure 6 at sample rate 0.1 and eps_B = 8 (results/figure6):
`exact` and `improved_rdp` use mu = tau sqrt(N)/sigma and come out below eps_B of a single run.
The live tests use a cheaper DP-SGD base with the same defect (sigma = 2, N = 50, tau = 0.1:
eps_B = 1.84, heuristic exact 1.60) so that the bounds take seconds, not a minute."""

import copy
import csv
import json

import matplotlib
import pytest
import yaml

matplotlib.use("Agg")

from figure_records import record_saved_figures

from auditsel.experiments.config import parse_config
from auditsel.experiments.experiment import ExperimentOutputs, run_experiment
from auditsel.results.heuristics import contradictions, heuristic_fields, heuristic_upper_keys
from auditsel.results.report import markdown_report, text_table, write_plots

FIG6 = {
    "name": "fig6",
    "delta": 1e-5,
    "base": {"kind": "dpsgd", "noise_multiplier": 2.0, "steps": 50, "sample_rate": 0.1},
    "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
    "game": {"kind": "reduced", "trials": 20_000, "seed": 0},
}


@pytest.fixture(scope="module")
def fig6():
    """result and artefacts of a DP-SGD point with tau = 0.1, computed, not stored."""
    spec = parse_config(copy.deepcopy(FIG6))
    return run_experiment(spec, None, progress=False, outputs=ExperimentOutputs(curves=False))


def fake(upper, rigour, eps_b=1.0, lower=None):
    return {"upper": upper, "upper_rigour": rigour, "base": {"epsilon": eps_b}, "lower": lower}


def test_contradiction_rules_on_hand_made_results():
    heur = {"exact": "heuristic", "profile": "rigorous"}
    assert contradictions(fake({"exact": 0.9, "profile": 2.0}, heur)).keys() == {"exact"}
    assert contradictions(fake({"exact": 1.1, "profile": 2.0}, heur)) == {}
    # a rigorous value below eps_B is not flagged as a contradicted heuristic (no heuristic there)
    assert (
        contradictions(
            fake({"exact": 0.9, "profile": 0.5}, {"exact": "rigorous", "profile": "rigorous"})
        )
        == {}
    )
    low = {"eps": 1.5, "threshold_rule": "split", "confidence": 0.95}
    assert (
        "valid eps_L"
        in contradictions(fake({"exact": 1.2}, {"exact": "heuristic"}, lower=low))["exact"]
    )
    # the optimistic rule, or a rule flagged not valid, refutes nothing
    assert (
        contradictions(
            fake({"exact": 1.2}, {"exact": "heuristic"}, lower={**low, "threshold_rule": "best"})
        )
        == {}
    )
    assert (
        contradictions(fake({"exact": 1.2}, {"exact": "heuristic"}, lower={**low, "valid": False}))
        == {}
    )
    assert contradictions(fake({"exact": None}, {"exact": "heuristic"}, eps_b=5.0)) == {}
    # K = 0 possible (Poisson, binomial): cheaper than one run is no contradiction
    assert contradictions({**fake({"exact": 0.9}, heur), "rounds": {"p_zero": 0.1}}) == {}
    # ... but below the attack value it is, whatever the law (mass at K = 0 included)
    with_attack = {
        **fake({"exact": 0.9}, heur),
        "rounds": {"p_zero": 0.1},
        "attack": {"epsilon": 1.3},
    }
    assert "the attack value 1.3000" in contradictions(with_attack)["exact"]
    # a value moved to reduced_game is read from there
    moved = {**fake({"exact": None}, heur), "reduced_game": {"exact": 0.5}}
    assert contradictions(moved)["exact"].startswith("heuristic reduced_game.exact = 0.5000")


def test_figure6_point_is_flagged_in_result_json(fig6):
    result, _ = fig6
    assert set(heuristic_upper_keys(result)) == {"exact", "improved_rdp", "improved_rdp_gdp"}
    # nothing called exact unless it is: the reduced game's values left `upper`
    assert all(result["upper"][k] is None for k in ("exact", "improved_rdp", "improved_rdp_gdp"))
    assert result["exact_curve"] is None and result["reduced_game_curve"]["delta"]
    reduced = result["reduced_game"]
    assert reduced["exact"] < result["base"]["epsilon"]  # the defect of issue 9
    assert reduced["exact"] < result["attack"]["epsilon"]  # and below a proven lower bound
    # every reduced-game value below the (worst-score) attack value is flagged
    below = {k for k, v in reduced.items() if v is not None and v < result["attack"]["epsilon"]}
    assert {"exact", "improved_rdp"} <= below <= set(result["contradicted"])
    assert "the attack value" in result["contradicted"]["exact"]
    assert result["heuristic"] == heuristic_fields(result)
    assert "reduced_game.exact" in result["heuristic"] and "lower.gdp_fit" in result["heuristic"]
    iv = result["interval"]
    assert iv["lower"] == result["attack"]["epsilon"] and iv["lower_source"].startswith("attack")
    assert iv["upper"] == min(v for v in result["upper"].values() if v is not None)
    assert iv["width"] == pytest.approx(iv["upper"] - iv["lower"])
    json.dumps(result, allow_nan=False)


def test_sample_rate_one_is_exact_under_the_assumption_and_flags_nothing():
    spec = parse_config({**copy.deepcopy(FIG6), "base": {**FIG6["base"], "sample_rate": 1.0}})
    result, _ = run_experiment(spec, None, progress=False, outputs=ExperimentOutputs(curves=False))
    assert heuristic_upper_keys(result) == ["improved_rdp_gdp"]
    assert result["heuristic"][0] == "monotone_score.improved_rdp_gdp"
    assert result["contradicted"] == {}
    # the reduction is exact: the reduced game's values are exact for a monotone score, and
    # stated with that assumption, not in upper
    mono = result["monotone_score"]
    assert result["upper"]["exact"] is None and mono["exact"] >= result["base"]["epsilon"]
    assert "monotone" in mono["assumption"]
    assert "reduced_game" not in result and result["exact_curve"]["delta"]
    # the interval holds for any score: the attack value is at least the monotone score's
    # exact epsilon (one of the scores), the upper end a rigorous bound above it
    assert result["attack"]["epsilon"] >= mono["exact"] - 1e-9
    assert result["interval"]["upper"] >= result["attack"]["epsilon"]
    assert result["interval"]["upper_source"].split(" ")[0] in ("generic_rdp", "profile")


@pytest.mark.parametrize(
    "render", [text_table, lambda r: markdown_report(r, [])], ids=["terminal", "report.md"]
)
def test_tables_label_every_heuristic_row_and_the_contradiction(fig6, render):
    """The heuristic values are one block under their assumption: one line in the terminal
    (issue 27: no row and no WARNING per value), a table in report.md whose rows say heuristic
    and CONTRADICTED; every contradicted key and why is named."""
    result, _ = fig6
    text = render(result)
    lines = text.splitlines()
    if render is text_table:
        block = [line for line in lines if line.startswith("heuristic (")]
        assert len(block) == 1 and "WARNING" not in text
        for key in heuristic_upper_keys(result):
            assert f"{key} {result['reduced_game'][key]:.4f}" in block[0]
        contradicted = block[0].split("CONTRADICTED: ", 1)[1]
        for key in result["contradicted"]:
            assert key in contradicted
    else:
        for key in heuristic_upper_keys(result):
            row = next(line for line in lines if line.startswith(f"| reduced_game.{key} |"))
            assert "heuristic" in row, row
            assert ("CONTRADICTED" in row) == (key in result["contradicted"]), row
    assert "below the attack value" in text
    # no row is named after a reduced-game key alone (exact, improved_rdp, ...) at tau < 1
    assert not any(line.strip("| ").startswith("exact") for line in lines)
    rigorous = next(line for line in lines if "profile" in line and "[KRW24]" in line)
    assert "heuristic" not in rigorous
    iv = result["interval"]
    assert f"lies in [{iv['lower']:.4f}, {iv['upper']:.4f}]" in text
    assert f"report {iv['upper']:.4f}" in text


PLOT_NAMES = {
    "exact": "reduced game",
    "improved_rdp": "improved (UO)",
    "improved_rdp_gdp": "improved (UG)",
}


def drawn_lines(monkeypatch, draw, file_name=None):
    """(label, linestyle) of every labelled line of every figure saved while `draw` runs (only
    figures saved as `file_name` if given)."""
    lines = []

    def record(fig, path):
        if file_name is None or str(path).endswith(file_name):
            for ax in fig.axes:
                lines.extend(
                    (ln.get_label(), ln.get_linestyle())
                    for ln in ax.get_lines()
                    if not ln.get_label().startswith("_")
                )

    record_saved_figures(monkeypatch, record)
    draw()
    return lines


def assert_heuristics_dashed(lines, heuristic, contradicted):
    seen = set()
    for label, style in lines:
        for key, name in PLOT_NAMES.items():
            if label.startswith(name):
                seen.add(key)
                assert ("heuristic" in label) == (key in heuristic), label
                assert (style == "--") == (key in heuristic), (label, style)
                assert ("CONTRADICTED" in label) == (key in contradicted), label
        if style == "-":
            assert "heuristic" not in label, label
    return seen


def test_privacy_curve_and_tradeoff_draw_heuristics_dashed(fig6, tmp_path, monkeypatch):
    result, artefacts = fig6
    curve = lambda v: [v and v + 1, v, v and v - 0.5]
    result = {
        **result,
        "upper_curves": {
            "delta": [1e-6, 1e-5, 1e-4],
            **{k: curve(v) for k, v in result["upper"].items()},
        },
        "reduced_game_curves": {
            "delta": [1e-6, 1e-5, 1e-4],
            **{k: curve(v) for k, v in result["reduced_game"].items()},
        },
    }
    lines = drawn_lines(monkeypatch, lambda: write_plots(result, artefacts, tmp_path))
    seen = assert_heuristics_dashed(
        lines, set(heuristic_upper_keys(result)), result["contradicted"]
    )
    assert seen == {"exact", "improved_rdp", "improved_rdp_gdp"}
    # the attack's certified lower curve (solid: a bound) and the interval are drawn
    assert any(lab.startswith("attack") and st == "-" for lab, st in lines)
    assert any(lab.startswith("interval [") for lab, _ in lines)
    tradeoff = [(lab, st) for lab, st in lines if "likelihood ratio" in lab]
    assert tradeoff and all("heuristic" in lab and st == "--" for lab, st in tradeoff)


def md_text(out) -> str:
    return (out / "sweep.md").read_text()


def test_sweep_tables_and_plot_separate_heuristics(tmp_path, monkeypatch, capsys):
    from auditsel.cli import main

    raw = {
        **copy.deepcopy(FIG6),
        "game": {**FIG6["game"], "trials": 4000},
        "sweep": {"base.sample_rate": [1.0, 0.1]},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    sweep_lines = drawn_lines(
        monkeypatch,
        lambda: main(["run", str(path), "--out", str(out), "--quiet", "--no-progress"]),
        "sweep.png",
    )
    rows = {float(r["base.sample_rate"]): r for r in csv.DictReader((out / "sweep.csv").open())}
    for rate, row in rows.items():
        point = json.loads((out / f"base.sample_rate={rate:g}" / "result.json").read_text())
        for key in ("exact", "improved_rdp", "improved_rdp_gdp"):
            # a bound column never holds a reduced-game value: at tau = 1 it is under its
            # assumption (`<key>_monotone_score`), at tau < 1 a heuristic (`<key>_heuristic`)
            assert row.get(key, "") == "" and point["upper"][key] is None
            reduced = (point.get("reduced_game") or {}).get(key)
            mono = (point.get("monotone_score") or {}).get(key)
            assert bool(row.get(f"{key}_heuristic")) == (reduced is not None)
            assert bool(row.get(f"{key}_monotone_score")) == (mono is not None)
            if reduced is not None:
                assert float(row[f"{key}_heuristic"]) == pytest.approx(reduced)
            if mono is not None:
                assert float(row[f"{key}_monotone_score"]) == pytest.approx(mono)
        assert set(row["contradicted"].split()) == {f"{k}_heuristic" for k in point["contradicted"]}
        iv = point["interval"]
        assert float(row["interval_lower"]) == pytest.approx(iv["lower"])
        assert float(row["interval_upper"]) == pytest.approx(iv["upper"])
        assert float(row["width"]) == pytest.approx(iv["width"])
        assert float(row["attack"]) == pytest.approx(point["attack"]["epsilon"])
    assert float(rows[1.0]["exact_monotone_score"]) >= float(rows[1.0]["eps_B"])
    assert "monotone-score assumption" in md_text(out) and rows[1.0]["contradicted"] == ""
    assert rows[0.1].get("exact", "") == "" and set(rows[0.1]["contradicted"].split()) >= {
        "exact_heuristic",
        "improved_rdp_heuristic",
    }
    md = (out / "sweep.md").read_text()
    assert "_heuristic` hold heuristic values" in md
    warning = [line for line in md.splitlines() if line.startswith("- **base.sample_rate=")]
    assert len(warning) == 1 and warning[0].startswith("- **base.sample_rate=0.1:")
    assert (
        "exact_heuristic" in warning[0]
        and "improved_rdp_heuristic" in warning[0]
        and "contradicted" in warning[0]
    )
    points = json.loads((out / "sweep.json").read_text())["points"]
    assert [p["contradicted"] for p in points] == [
        rows[1.0]["contradicted"],
        rows[0.1]["contradicted"],
    ]
    assert any("exact, heuristic" in lab and st == "--" for lab, st in sweep_lines)
    assert any("exact, monotone score assumed" in lab and st == "-." for lab, st in sweep_lines)
    assert any(lab.startswith("attack") and st == "-" for lab, st in sweep_lines)
    assert any("CONTRADICTED" in lab for lab, _ in sweep_lines)
    assert all("heuristic" not in lab for lab, st in sweep_lines if st == "-")


def test_committed_figure6_sweep_says_which_heuristics_are_contradicted():
    """results/figure6 (regenerated with this code): at tau = 0.1 and eps_B = 8 the heuristic
    exact lies below eps_B, and the table says so instead of showing it as a bound."""
    from pathlib import Path

    table = Path(__file__).resolve().parents[2] / "results" / "figure6" / "sweep.csv"
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 24
    # since 0.2.0 the reduced game's exact value at tau = 1 has its own column, under [XWW24]'s
    # monotone-score assumption; a table written before (no such column) kept it in `exact`
    labelled = "exact_monotone_score" in rows[0]
    for row in rows:
        heuristic_exact = row["exact_heuristic"] != ""
        assert heuristic_exact == (float(row["base.sample_rate"]) < 1)
        if labelled:
            assert row.get("exact", "") == ""
            assert (row["exact_monotone_score"] == "") == heuristic_exact
        else:
            assert (row["exact"] == "") == heuristic_exact
        floor = max(float(row["eps_B"]), float(row["attack"]))
        below = heuristic_exact and float(row["exact_heuristic"]) < floor
        assert below == ("exact_heuristic" in row["contradicted"].split()), row
    issue = [
        r
        for r in rows
        if float(r["base.epsilon"]) == 8
        and float(r["base.sample_rate"]) == 0.1
        and float(r["rounds.eta"]) == 0
    ]
    assert len(issue) == 1 and "exact_heuristic" in issue[0]["contradicted"].split()


def test_reproduce_figure6_plot_draws_heuristics_dashed(tmp_path, monkeypatch):
    """`auditsel reproduce figure6`'s plot, from its committed rows: at tau < 1 exact and UO are
    dashed and labelled heuristic (UG everywhere), and the points below eps_B are marked."""
    from pathlib import Path

    from auditsel.reproductions.figure6 import plot

    rows = json.loads(
        (
            Path(__file__).resolve().parents[2] / "results" / "papers" / "figure6" / "rows.json"
        ).read_text()
    )
    # the table's bound columns hold only bounds: at tau = 1 exact and UO sit in *_monotone_score
    # columns (values under [XWW24]'s assumption), at tau < 1 in *_heuristic columns
    assert all(("exact_monotone_score" in r) == (r["tau"] == 1) for r in rows)
    assert all(("exact_heuristic" in r) == (r["tau"] < 1) for r in rows)
    assert all("exact" not in r and "improved_rdp" not in r for r in rows)
    assert all("improved_rdp_gdp" not in r and "improved_rdp_gdp_heuristic" in r for r in rows)
    low = [r for r in rows if r["tau"] < 1 and r["exact_heuristic"] < r["attack"]]
    assert low and all("exact_heuristic" in r["contradicted"].split() for r in low)
    lines = drawn_lines(monkeypatch, lambda: plot(rows, tmp_path))
    for label, style in lines:
        if label.startswith(("exact", "improved U")):
            assert ("heuristic" in label) == (style == "--"), (label, style)
            assert ("monotone score assumed" in label) == (style == "-."), (label, style)
        if label.startswith("improved UG"):
            assert "heuristic" in label
    labels = [lab for lab, _ in lines]
    assert any(lab.startswith("exact, heuristic") for lab in labels)
    assert any(lab.startswith("exact, monotone score assumed") for lab in labels)
    assert any("CONTRADICTED" in lab for lab in labels)


def test_a_reduced_game_on_a_subsampled_base_is_no_lower_value_for_it():
    """The reduced game at tau < 1 audits the eq. 19 Gaussian, not the DP-SGD run: its eps_L
    neither contradicts a heuristic nor becomes the interval's lower end."""
    from auditsel.results.heuristics import audits_the_base, valid_lower

    low = {"eps": 5.0, "threshold_rule": "split", "confidence": 0.95, "game": "reduced"}
    sub = {"base": {"kind": "dpsgd", "sample_rate": 0.1}, "lower": low}
    full = {"base": {"kind": "dpsgd", "sample_rate": 1.0}, "lower": low}
    worst = {
        "base": {"kind": "dpsgd", "sample_rate": 0.1},
        "lower": {**low, "game": "dpsgd_worst_case"},
    }
    assert not audits_the_base(sub) and valid_lower(sub) is None
    assert valid_lower(full) == 5.0 and valid_lower(worst) == 5.0
    heur = {
        "upper": {"exact": None},
        "upper_rigour": {"exact": "heuristic"},
        "reduced_game": {"exact": 1.0},
    }
    assert contradictions({**sub, **heur}) == {}
    assert "valid eps_L" in contradictions({**worst, **heur})["exact"]
