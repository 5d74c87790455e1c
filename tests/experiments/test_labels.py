"""Honest labels (issue 25 items 1 and 5): a tuning run's epsilon holds for every score function.

The reduced game's values (`exact`, `improved_rdp`, `improved_rdp_gdp`) hold only under [XWW24]'s
monotone-score assumption: they are never labelled rigorous for the tuning run, never in
result.json's `upper`, never the interval's end; they sit under `monotone_score` with the
assumption in one line, and `assume="monotone_score"` returns them on request, labelled."""

import copy
import math

import numpy as np
import pytest

from auditsel import DpsgdBase, GaussianBase, Poisson, TruncatedNegativeBinomial
from auditsel.accounting.attack import attack_epsilon
from auditsel.accounting.calibrate import CalibrationOptions, calibrate
from auditsel.accounting.exact import exact_epsilon
from auditsel.accounting.interval import (
    interval_attack,
    tightest_bound,
    tuning_epsilon,
    tuning_interval,
)
from auditsel.accounting.panel import panel
from auditsel.accounting.registry import ASSUMPTION, BOUNDS, MONOTONE_SCORE_KEYS
from auditsel.errors import ConfigError
from auditsel.events import LaplaceBase
from auditsel.experiments.config import default_config_path, load_config, parse_config
from auditsel.experiments.experiment import ExperimentOutputs, run_experiment
from auditsel.results.heuristics import result_labels
from auditsel.results.report import markdown_report, text_table
from auditsel.rounds import Binomial
from auditsel.selection import winner_law

TOL = 1e-6  # root finders of the bounds and of the attack, far below the digits reported


def random_settings(seed: int = 0, n: int = 3):
    """n random Gaussian, DP-SGD (tau = 1 and tau < 1) and Laplace settings with random laws of
    K and deltas (cheap: few steps, so each panel takes well under a second)."""
    rng = np.random.default_rng(seed)
    laws = [
        lambda: Poisson(float(rng.uniform(1, 20))),
        lambda: TruncatedNegativeBinomial(float(rng.choice([0.0, 0.5, 1.0])), 0.1),
        lambda: Binomial(int(rng.integers(2, 30)), float(rng.uniform(0.1, 0.9))),
    ]
    out = []
    for i in range(n):
        law = laws[i % len(laws)]()
        delta = float(10 ** rng.uniform(-8, -3))
        out.append((GaussianBase(mu=float(rng.uniform(0.2, 2.0))), law, delta))
        sigma, steps = float(rng.uniform(1.0, 3.0)), int(rng.integers(1, 20))
        out.append((DpsgdBase(sigma, steps, 1.0, "pld"), law, delta))
        out.append((DpsgdBase(sigma, steps, float(rng.uniform(0.05, 0.5)), "pld"), law, delta))
        out.append((LaplaceBase(float(rng.uniform(0.5, 3.0))), law, delta))
    return out


# the first four settings by default; the others (1 to 3 CPU s each) in the slow tier
@pytest.mark.parametrize(
    "index", [*range(4), *(pytest.param(i, marks=pytest.mark.slow) for i in range(4, 12))]
)
def test_no_rigorous_value_nor_upper_end_is_below_the_attack(index):
    """Property over random Gaussian, DP-SGD and Laplace settings: every value `upper` holds is
    labelled rigorous and is at least the attack value (a lower bound for ANY score: the
    interval's, with the split search and one run's epsilon, at least `attack_epsilon`'s), and
    so are the interval's upper end and `tuning_epsilon`; no reduced-game key is in `upper`."""
    base, law, delta = random_settings(n=3)[index]
    att = interval_attack(base, law, [delta]).epsilon
    assert att >= attack_epsilon(base, law, delta)
    p = panel(base, law, delta)
    for key, value in p.upper.items():
        if value is None:
            continue
        assert key not in MONOTONE_SCORE_KEYS, key
        assert p.labels[key] == "rigorous", key
        assert value >= att - TOL * max(1.0, att), (key, value, att)
    assert p.interval.upper >= att - TOL * max(1.0, att)
    assert p.interval.lower == pytest.approx(att, abs=1e-12)
    te = tuning_epsilon(base, law, delta)
    assert te.epsilon == pytest.approx(p.interval.upper, rel=1e-9)
    assert te.bound in ("generic_rdp", "profile") and te.assumption is None
    assert te.interval.contains(att, tol=TOL)
    # nothing labelled rigorous in the registry is a reduced-game value
    assert all(b.rigour(base) != "rigorous" for b in BOUNDS if b.key in MONOTONE_SCORE_KEYS)


def test_the_quickstarts_interval_holds_for_any_score():
    """`auditsel run`'s default config: its interval's upper end is a rigorous bound for any
    score, above the attack value, and no reduced-game value is in `upper`."""
    spec = load_config(default_config_path()).with_game(trials=20_000)
    result, _ = run_experiment(spec, None, progress=False, outputs=ExperimentOutputs(curves=False))
    iv, att = result["interval"], result["attack"]["epsilon"]
    assert all(result["upper"][k] is None for k in MONOTONE_SCORE_KEYS)
    assert iv["upper"] >= att - TOL and iv["upper_source"].split(" ")[0] in (
        "generic_rdp",
        "profile",
    )
    # the reduced game's exact value is no longer the upper end: it is the monotone score's
    assert result["monotone_score"]["exact"] == pytest.approx(
        exact_epsilon(winner_law(spec.base.reduced(), spec.rounds), spec.delta), rel=1e-12
    )
    assert iv["upper"] > result["monotone_score"]["exact"]


def gaussian_result(game=False):
    config = {
        "name": "gauss",
        "delta": 1e-5,
        "base": {"kind": "gaussian", "mu": 1.0},
        "rounds": {"kind": "poisson", "mean": 10.0},
    }
    if game:
        config["game"] = {"kind": "reduced", "trials": 20_000, "seed": 0}
    return run_experiment(parse_config(copy.deepcopy(config)), None, progress=False)


def test_result_json_puts_the_reduced_game_under_monotone_score():
    result, _ = gaussian_result()
    mono = result["monotone_score"]
    assert mono["assumption"] == ASSUMPTION and "monotone" in ASSUMPTION and "\n" not in ASSUMPTION
    law = Poisson(10.0)
    assert mono["exact"] == pytest.approx(
        exact_epsilon(winner_law(GaussianBase(1.0), law), 1e-5), rel=1e-12
    )
    assert all(result["upper"][k] is None for k in MONOTONE_SCORE_KEYS)
    assert {result["upper_rigour"][k] for k in ("exact", "improved_rdp")} == {"monotone_score"}
    assert result["upper_rigour"]["generic_rdp"] == "rigorous"
    # curves: the reduced game's keys are drawn from monotone_score_curves, not upper_curves
    assert all(v is None for v in result["upper_curves"]["exact"])
    assert any(v is not None for v in result["monotone_score_curves"]["exact"])
    # nothing under an assumption is "contradicted": the block says where it sits instead
    labels = result_labels(result)
    block = labels.block("monotone_score")
    assert block is not None and set(block.values) == set(MONOTONE_SCORE_KEYS)
    assert "exact" not in labels.upper and result["contradicted"] == {}


def test_tables_show_one_line_per_assumption_and_one_interval():
    result, _ = gaussian_result()
    table = text_table(result)
    lines = table.splitlines()
    assert sum(line.startswith("interval:") for line in lines) == 1
    mono = [line for line in lines if line.startswith("assuming a monotone score")]
    assert len(mono) == 1 and "exact" in mono[0]
    # no row of the table names a reduced-game key as a bound
    rows = [line.split()[0] for line in lines[2:] if line and not line.startswith(" ")]
    assert not set(rows) & set(MONOTONE_SCORE_KEYS)
    md = markdown_report(result, [])
    assert "`monotone_score` in result.json" in md and ASSUMPTION in md
    assert "| monotone_score.exact |" in md and "| exact |" not in md


def test_a_subsampled_dpsgd_table_is_short():
    """Issue 27: tau < 1 prints one interval and one line per assumption, no row or bold
    warning per contradicted heuristic."""
    config = {
        "name": "dpsgd",
        "delta": 1e-5,
        "base": {"kind": "dpsgd", "noise_multiplier": 2.0, "steps": 50, "sample_rate": 0.1},
        "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
    }
    result, _ = run_experiment(
        parse_config(config), None, progress=False, outputs=ExperimentOutputs(curves=False)
    )
    table = text_table(result)
    assert table.count("CONTRADICTED") == 1 and "WARNING" not in table
    heuristic = [line for line in table.splitlines() if line.startswith("heuristic (")]
    assert len(heuristic) == 1 and "below the attack value" in heuristic[0]
    assert sum(line.startswith("interval:") for line in table.splitlines()) == 1
    assert "WARNING" not in markdown_report(result, [])


def test_assume_monotone_score_returns_the_reduced_games_value_labelled():
    base, law, delta = GaussianBase(mu=1.0), Poisson(10), 1e-5
    exact = exact_epsilon(winner_law(base, law), delta)
    mono = tuning_epsilon(base, law, delta, assume="monotone_score")
    assert mono.epsilon == pytest.approx(exact, rel=1e-12) and mono.bound == "exact"
    assert mono.assumption == "monotone_score" and mono.interval.assumption == "monotone_score"
    assert "monotone-score assumption" in str(mono) and "any score" in str(mono)
    assert mono.to_dict()["assumption"] == ASSUMPTION
    assert mono.interval.to_dict()["assumption"] == ASSUMPTION
    anyscore = tuning_epsilon(base, law, delta)
    assert (
        anyscore.to_dict()["assumption"] is None and "assumption" not in anyscore.interval.to_dict()
    )
    # the generic bound for any score is far above: [PS22]'s bound of the issue, computed
    assert anyscore.epsilon > 1.5 * mono.epsilon and anyscore.bound in ("generic_rdp", "profile")
    assert tightest_bound(base, law, delta, assume="monotone_score").epsilon == mono.epsilon
    iv = tuning_interval(base, law, delta, assume="monotone_score")
    assert iv.upper == pytest.approx(exact, rel=1e-12) and iv.assumption == "monotone_score"
    p = panel(base, law, delta, assume="monotone_score")
    assert p.interval.upper == pytest.approx(exact, rel=1e-12)
    assert p.upper["exact"] is None and p.monotone_score["exact"] == pytest.approx(exact)
    # a subsampled DP-SGD base: the reduced game is heuristic, the assumption adds nothing
    dp = DpsgdBase(1.0, 20, 0.1, "pld")
    assert tuning_epsilon(dp, law, delta, assume="monotone_score").epsilon == pytest.approx(
        tuning_epsilon(dp, law, delta).epsilon
    )


@pytest.mark.parametrize("bad", ["monotone", "MONOTONE_SCORE", 1, ""])
def test_assume_names_its_field(bad):
    with pytest.raises(ConfigError, match="assume"):
        tuning_epsilon(GaussianBase(mu=1.0), Poisson(10), 1e-5, assume=bad)


def test_calibrate_answers_for_any_score_unless_asked():
    """A Gaussian calibrated to eps 3: for any score it needs more noise than [XWW24]'s
    reduced game says; the monotone-score answer is labelled."""
    law = Poisson(10)
    honest = calibrate(
        GaussianBase(1.0),
        law,
        target_epsilon=3.0,
        delta=1e-5,
        options=CalibrationOptions(baseline=False),
    )
    mono = calibrate(
        GaussianBase(1.0),
        law,
        target_epsilon=3.0,
        delta=1e-5,
        options=CalibrationOptions(baseline=False, assume="monotone_score"),
    )
    assert honest.bound in ("generic_rdp", "profile") and honest.assumption is None
    assert mono.bound == "exact" and mono.to_dict()["assumption"] == ASSUMPTION
    assert honest.value > mono.value  # noise multiplier: more noise for any score
    # at the monotone answer, the tuning run for any score is above the target
    assert attack_epsilon(GaussianBase(1 / mono.value), law, 1e-5) >= mono.epsilon - TOL
    assert tightest_bound(GaussianBase(1 / mono.value), law, 1e-5).epsilon > 3.0
    assert math.isclose(mono.epsilon, 3.0, rel_tol=2e-3) or mono.epsilon <= 3.0


def test_the_findings_page_shows_the_committed_any_score_rows():
    """docs/findings/any-score.md quotes results/papers/any-score (`auditsel reproduce
    any-score`): every row's numbers, and the reproduction's findings lines, as committed."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    rows = json.loads((root / "results" / "papers" / "any-score" / "rows.json").read_text())
    table = (root / "results" / "papers" / "any-score" / "table.md").read_text()
    page = (root / "docs" / "findings" / "any-score.md").read_text()
    for r in rows:
        head = f"| {r['setting']} | {r['K']} | {r['delta']:g} |"
        line = next(x for x in page.splitlines() if x.startswith(head))
        for key in ("attack", "generic_rdp", "profile", "interval_upper"):
            assert f"{r[key]:.4f}" in line, (key, line)
        assert r["monotone"] is None or f"{r['monotone']:.4f}" in line
        assert (
            r["interval_upper"] >= r["attack"] - TOL and r["attack"] >= r["monotone_attack"] - TOL
        )
    for finding in (x for x in table.splitlines() if x.startswith("- ")):
        assert finding in page


def test_the_widths_page_and_readme_show_the_committed_widths():
    """docs/findings/interval-widths.md quotes the summary of results/papers/interval-widths
    (`auditsel reproduce interval-widths`) as committed, and its rows are consistent: the lower
    end is the attack for any score, at least the monotone attack, below the upper end."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    folder = root / "results" / "papers" / "interval-widths"
    rows = json.loads((folder / "rows.json").read_text())
    groups = {"accountants": 9, "realistic": 10, "random": 16}
    assert {g: sum(r["group"] == g for r in rows) for g in groups} == groups
    assert len(rows) == sum(groups.values())
    for r in rows:
        assert r["monotone_attack"] - TOL <= r["attack"] <= r["interval_upper"] + TOL
        assert r["upper_source"] in ("generic_rdp", "profile")
        assert r["width_pct"] == pytest.approx(100 * r["width"] / r["interval_upper"])
    page = (root / "docs" / "findings" / "interval-widths.md").read_text()
    for line in (x for x in (folder / "table.md").read_text().splitlines() if x.startswith("- ")):
        assert line in page


def test_cli_answers_for_any_score_and_prints_the_assumed_value_on_request(tmp_path, capsys):
    import yaml

    from auditsel.cli import main

    config = tmp_path / "g.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "g",
                "delta": 1e-5,
                "base": {"kind": "gaussian", "mu": 1.0},
                "rounds": {"kind": "poisson", "mean": 10},
            }
        )
    )
    # the lines printed are checked, never the figures: none drawn
    run = ["run", str(config), "--no-progress", "--no-plots"]
    assert main([*run, "--out", str(tmp_path / "a")]) == 0
    plain = capsys.readouterr().out
    assert "for any score; report" in plain and "monotone-score assumption, in" not in plain
    assert main([*run, "--out", str(tmp_path / "b"), "--assume", "monotone_score"]) == 0
    out = capsys.readouterr().out
    exact = exact_epsilon(winner_law(GaussianBase(1.0), Poisson(10)), 1e-5)
    assumed = next(x for x in out.splitlines() if "monotone-score assumption, in" in x)
    assert f"eps <= {exact:.4f}" in assumed and "not the tuning run's eps for any score" in assumed
    cal = ["calibrate", str(config), "--target-eps", "3", "--no-baseline"]
    assert main([*cal, "--assume", "monotone_score"]) == 0
    assert "ASSUMED: a monotone score" in capsys.readouterr().out
    assert main(cal) == 0
    assert "ASSUMED" not in capsys.readouterr().out
    assert main([*cal, "--assume", "monotone"]) == 2
    assert "--assume" in capsys.readouterr().err


def test_the_readme_quotes_the_committed_gaussian_row():
    """The README's "What it found" numbers for Gaussian mu = 1, Poisson(10), delta 1e-5 are the
    first row of results/papers/any-score; the attack for any score exceeds the reduced game's
    exact value there and stays below [PS22]'s bound."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    first = json.loads((root / "results" / "papers" / "any-score" / "rows.json").read_text())[0]
    assert (first["setting"], first["K"], first["delta"]) == (
        "gaussian mu=1",
        "poisson(mean=10)",
        1e-5,
    )
    readme = " ".join((root / "README.md").read_text().split())
    for key in ("monotone", "attack", "generic_rdp", "interval_upper"):
        assert f"{first[key]:.4f}" in readme, key
    assert first["monotone"] < first["attack"] <= first["interval_upper"] <= first["generic_rdp"]


def test_a_coin_lower_end_names_its_assumption_on_the_interval_line():
    """Where the interval's lower end is the coin search's (a lower bound for the base with a
    released coin), the interval line itself says so, not only the lower end's source line."""
    from auditsel.results.report import interval_lines

    iv = {"lower": 2.9, "lower_source": "x", "upper": 3.0, "upper_source": "y", "width": 0.1}
    coin = interval_lines({"interval": iv, "attack": {"method": "coin_search"}})[0]
    plain = interval_lines({"interval": iv, "attack": {"method": "score_search"}})[0]
    assert "releases a coin with each run" in coin and "for any score; report" in plain
    assert "coin" not in plain
