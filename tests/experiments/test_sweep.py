"""Sweeps: expansion of the grid, validation of every point, combined outputs."""

import csv
import json

import pytest
import yaml

from auditsel.cli import main
from auditsel.experiments.config import ConfigError
from auditsel.experiments.sweep import expand_sweep

BASE = {
    "name": "sw",
    "delta": 1e-5,
    "base": {"kind": "gaussian", "epsilon": 1.0},
    "rounds": {"kind": "two_point", "L": 10, "s": 0.1},
    "game": {"kind": "reduced", "trials": 4000, "seed": 0},
}


def test_product_and_zipped_axes():
    raw = dict(
        BASE,
        sweep={
            "base.epsilon": [1, 2],
            "rounds.L,rounds.s": [[10, 0.1], [100, 0.01], [1000, 0.001]],
        },
    )
    points = expand_sweep(raw)
    assert len(points) == 6
    assert {(p.spec.rounds.L, p.spec.rounds.s) for p in points} == {
        (10, 0.1),
        (100, 0.01),
        (1000, 0.001),
    }
    assert len({p.label for p in points}) == 6
    assert points[0].assignments == {"base.epsilon": 1, "rounds.L": 10, "rounds.s": 0.1}


@pytest.mark.parametrize(
    "sweep, field",
    [
        ({"base.epsilon": [1, -2]}, "base.epsilon"),
        ({"base.epsilon": []}, "sweep.base.epsilon"),
        ({"nosection.x": [1]}, "sweep.nosection.x"),
        ({"rounds.L,rounds.s": [[10]]}, "sweep.rounds.L,rounds.s[0]"),
        ({"game.colour": ["red"]}, "game.colour"),
        ([], "sweep"),
    ],
)
def test_every_point_is_validated_before_work(sweep, field):
    with pytest.raises(ConfigError) as err:
        expand_sweep(dict(BASE, sweep=sweep))
    assert err.value.field == field


@pytest.mark.slow  # a whole sweep; tests/experiments/test_heuristics.py draws a sweep's tables and plot by default
def test_sweep_run_writes_points_and_combined_table(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump(dict(BASE, sweep={"base.epsilon": [0.5, 2.0], "rounds.s": [0.1, 0.01]}))
    )
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--jobs", "2", "--quiet"]) == 0
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert len(rows) == 4
    for row in rows:
        # the game plays a monotone score: eps_L is below the reduced game's exact value, which
        # sits in its own column (a monotone score assumed), never in the bound column `exact`
        exact = float(row["exact_monotone_score"])
        assert "exact" not in row and float(row["eps_L"]) <= exact and float(row["eps_B"]) <= exact
        assert float(row["interval_upper"]) >= float(row["attack"]) >= exact - 1e-9
        point = json.loads(
            (
                out
                / f"base.epsilon={float(row['base.epsilon']):g}__rounds.s={float(row['rounds.s']):g}"
                / "result.json"
            ).read_text()
        )
        assert point["monotone_score"]["exact"] == pytest.approx(exact, abs=1e-4)
    assert (out / "sweep.png").exists() and (out / "sweep.md").exists()
    # same numbers with one job
    out1 = tmp_path / "out1"
    assert main(["run", str(path), "--out", str(out1), "--jobs", "1", "--quiet"]) == 0
    a, b = (json.loads((d / "sweep.json").read_text())["points"] for d in (out, out1))
    strip = lambda pts: [{k: v for k, v in p.items() if k != "seconds"} for p in pts]
    assert strip(a) == strip(b)


def test_bad_sweep_in_cli_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(dict(BASE, sweep={"rounds.s": [0.5, 7]})))
    assert main(["run", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rounds.s" in err and "sweep point" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # plans every point of the papers' grids
def test_paper_sweep_configs_expand_to_the_papers_grids():
    from auditsel.experiments.config import default_config_path
    from auditsel.files.safe_yaml import read_yaml

    configs = default_config_path().parent
    table4 = expand_sweep(read_yaml(configs / "table4.yaml"))
    assert len(table4) == 45
    assert {(p.spec.rounds.L, p.spec.rounds.s) for p in table4} == {
        (10, 0.1),
        (10, 0.01),
        (100, 0.01),
        (100, 0.001),
        (1000, 0.001),
    }
    assert {p.spec.base.sample_rate for p in table4} == {1.0, 0.5, 0.1}
    assert all(p.spec.base.steps == 500 and p.spec.game is None for p in table4)
    figure6 = expand_sweep(read_yaml(configs / "figure6.yaml"))
    assert len(figure6) == 24 and all(p.spec.game.trials == 1_000_000 for p in figure6)
