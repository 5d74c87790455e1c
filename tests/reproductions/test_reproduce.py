"""`auditsel reproduce`: the registry, the paper tables' files on reduced grids (full grids are
slow), and the claims of docs/findings/papers.md checked against the computed rows."""

import json
import re
from pathlib import Path

import pytest

from auditsel import reproductions
from auditsel.cli import main
from auditsel.reproductions import figure6, paper_bounds

FINDINGS = (Path(__file__).resolve().parents[2] / "docs" / "findings" / "papers.md").read_text()


def test_registry_names_say_what_they_reproduce_and_the_cli_reads_them(capsys):
    papers = ["example1", "table4", "figure6", "table3", "koskela-gaussian", "dpsgd-factor"]
    assert set(papers) <= set(reproductions.names())
    for entry in reproductions.REGISTRY.values():
        assert callable(entry.resolve(entry.rows))  # every path resolves
        if entry.name in papers:
            assert re.search(r"\[[A-Z]+\d\d\]", entry.title), (
                entry.title
            )  # cites an author-year key
    with pytest.raises(ValueError, match="already registered"):
        reproductions.register("table3", "x", "auditsel.reproductions.table3:rows")
    assert main(["reproduce", "no-such-reproduction"]) == 2  # argparse choices: the registry
    assert "'dpsgd-factor'" in capsys.readouterr().err


def test_figure6_rows_and_plot(tmp_path):
    cells = paper_bounds.figure6_rows(eps_bs=(1, 4), taus=(1.0,), laws=[(0.0, 1e-2)])
    rows = figure6.rows(50_000, 1, cells)
    out = reproductions.render("figure6", rows, 0.0, tmp_path)
    assert len(rows) == 2 and (out / "figure6.png").exists() and (out / "table.csv").exists()
    for row in rows:
        # tau = 1: the reduced game's values, under [XWW24]'s monotone-score assumption, in
        # columns that say so; the bound columns hold bounds for any score only
        exact, uo = row["exact_monotone_score"], row["improved_rdp_monotone_score"]
        assert "exact" not in row and "improved_rdp" not in row
        assert 0 < row["eps_L"] <= exact <= uo <= row["generic_rdp"]
        assert exact <= row["profile"] and exact <= row["attack"] + 1e-9
        assert row["attack"] <= row["interval_upper"] == min(row["profile"], row["generic_rdp"])


def test_table4_cell_beside_the_paper():
    base = paper_bounds._calibrated(1.0, 1.0, 1e-5)
    from auditsel.accounting.improved import improved_epsilon
    from auditsel.rounds import TwoPoint

    ours = improved_epsilon(base.mu, TwoPoint(10, 0.1), 1e-5)
    paper_ug, paper_uo = paper_bounds.TABLE4_PAPER[(1, 1.0)][0]
    assert ours == pytest.approx(paper_uo, abs=0.1)  # agreement to a few tenths, not digits


@pytest.mark.slow  # regenerations through the CLI
def test_example1_and_koskela_gaussian_through_the_cli(tmp_path, capsys):
    assert main(["reproduce", "example1", "--out", str(tmp_path)]) == 0
    assert main(["reproduce", "koskela-gaussian", "--out", str(tmp_path)]) == 0
    assert "2.9645" in (tmp_path / "example1" / "table.md").read_text()
    assert (tmp_path / "koskela-gaussian" / "rows.json").exists()


def _readme_factors():
    """docs/findings/papers.md's '2.8x (E[K] = 10), 3.5x (100) and 4.0x (1000)' as {E[K]: factor}."""
    m = re.search(
        r"allows\s+([\d.]+)x \(E\[K\] = (\d+)\),\s+([\d.]+)x \((\d+)\) and ([\d.]+)x \((\d+)\)",
        FINDINGS,
    )
    assert m, "the dpsgd-factor sentence of docs/findings/papers.md moved; update this pattern"
    g = m.groups()
    return {int(g[i + 1]): float(g[i]) for i in (0, 2, 4)}


def _check_factor_row(row):
    """The factor is what docs/findings/papers.md prints, and E[K](profile) is where the profile bound
    reaches the RDP bound's eps: just below it at that mean, above it 0.5% further."""
    from auditsel.accounting.profile import base_profile, profile_epsilon, tnb_shift
    from auditsel.mechanisms import DpsgdBase
    from auditsel.rounds import TruncatedNegativeBinomial

    m = row["E[K] (RDP)"]
    assert round(row["factor"], 1) == _readme_factors()[m]
    assert row["factor (Thm 4.1 recipe)"] >= row["factor"]  # the recipe's shift is never larger
    base = DpsgdBase(21.1, 250, 16384 / 50000)
    prof = base_profile(base)
    thm52 = lambda profile, law: tnb_shift(profile, law.eta, law.nu)
    at = lambda mean: profile_epsilon(
        base, TruncatedNegativeBinomial(1.0, 1.0 / mean), 1e-5, prof, shift=thm52
    )
    target = row["eps (RDP, PS22 Thm 2)"]
    assert at(row["E[K] (profile) at the same eps"]) <= target + 1e-9
    assert at(1.005 * row["E[K] (profile) at the same eps"]) > target
    assert row["eps (profile, Thm 5.2) at same E[K]"] < target  # tighter at the same E[K]


@pytest.mark.slow  # reason: a reproduction at ten models (4.5 CPU s)
def test_dpsgd_factor_at_ten_models_is_the_findings():
    _check_factor_row(paper_bounds.dpsgd_factor_rows(means=(10,))[0])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["table4", "dpsgd-factor", "figure6"])
def test_full_reproductions(tmp_path, name):
    assert main(["reproduce", name, "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / name / "rows.json").read_text())
    if name == "dpsgd-factor":
        assert [r["E[K] (RDP)"] for r in rows] == sorted(_readme_factors())
        for row in rows:
            _check_factor_row(row)
    if name == "table4":
        assert paper_bounds.table4_summary(rows)["max_abs_diff"] < 0.5


def test_committed_interval_reproduction_holds_its_invariants_and_recomputes():
    """results/papers/interval (`auditsel reproduce interval`): lower <= every rigorous bound,
    the reduced game's exact below the attack value, the narrowing for TNB laws; one row is
    recomputed to its printed digits."""
    from auditsel.reproductions import interval_settings

    path = Path(__file__).resolve().parents[2] / "results" / "papers" / "interval" / "rows.json"
    rows = json.loads(path.read_text())
    assert len(rows) == len(interval_settings.SETTINGS)
    for r in rows:
        assert r["attack"] <= min(r["generic_rdp"], r["profile"]) == r["interval_upper"]
        assert r["width"] == pytest.approx(r["interval_upper"] - r["attack"])
        assert r["reduced_exact"] < r["attack"]
        if "width_thm52" in r:
            assert r["width"] <= r["width_thm52"] and r["profile"] <= r["profile_thm52"]
    first = rows[0]
    from auditsel.accounting.panel import panel
    from auditsel.mechanisms import DpsgdBase
    from auditsel.rounds import Poisson

    p = panel(DpsgdBase(first["sigma"], first["N"], first["tau"], "pld"), Poisson(5.0), 1e-5)
    assert f"{p.attack['epsilon']:.4f}" == f"{first['attack']:.4f}"
    assert f"{p.interval.upper:.4f}" == f"{first['interval_upper']:.4f}"
