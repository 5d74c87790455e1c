"""`auditsel audit-pipeline` and `auditsel plan` of a pipeline: outputs and exit codes."""

import importlib
import json
import subprocess
import sys
import textwrap

import pytest

from auditsel.cli import main

MODULE = """
import math

import numpy as np

from auditsel import GradientCanary

CANARY = GradientCanary(coordinate=0)


def tune(data, seed, canary):
    grads = [np.zeros(2)]
    canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
    return grads[0] + np.random.default_rng(seed).normal(0.0, 0.5, 2)


def raises(data, seed, canary):
    if seed % 3 == 0:
        return {}["missing key"]
    return np.zeros(2)


def fails_late(data, seed, canary):
    from auditsel.pipelines.game import game_seed

    if 40 <= (seed - game_seed(0, 0)) % 2**32 < 50:  # games 40 to 49: after the replay check
        return {}["missing key"]
    return np.zeros(2)


def nan(release, canary):
    return math.nan


def load_data():
    return None
"""


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    (tmp_path / "cli_pipe.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("cli_pipe", None)
    return tmp_path


def test_audit_pipeline_writes_the_report_and_exits_3_on_a_refuted_claim(folder, capsys):
    args = ["audit-pipeline", "cli_pipe:tune", "--canary", "cli_pipe:CANARY", "--games", "400"]
    assert main([*args, "--out", "a", "--claim", "50"]) == 0
    result = json.loads((folder / "a" / "result.json").read_text())
    assert result["claim"] == {"epsilon": 50.0, "refuted": False}
    assert result["pipeline"]["tune"] == "cli_pipe.tune" and result["lower"]["trials"] == 400
    assert "not refuted" in capsys.readouterr().out
    assert main([*args, "--out", "b", "--claim", "0.1", "--quiet"]) == 3
    assert json.loads((folder / "b" / "result.json").read_text())["claim"]["refuted"] is True
    # the same pipeline from a YAML file, the canary written inline, the data from a function
    (folder / "audit.yaml").write_text(
        "tune: cli_pipe:tune\ncanary: {kind: gradient, coordinate: 0}\ndata: cli_pipe:load_data\n"
        "games: 400\nclaimed_epsilon: 0.1\n"
    )
    assert main(["audit-pipeline", "audit.yaml", "--out", "c", "--quiet"]) == 3
    same = json.loads((folder / "c" / "result.json").read_text())
    assert (
        same["lower"]["eps"]
        == json.loads((folder / "b" / "result.json").read_text())["lower"]["eps"]
    )


def test_a_rerun_resumes_and_an_edited_tune_is_refused(folder, capsys):
    args = ["audit-pipeline", "cli_pipe:tune", "--canary", "cli_pipe:CANARY", "--games", "100"]
    assert main([*args, "--out", "o", "--quiet"]) == 0
    assert main([*args, "--out", "o", "--quiet"]) == 0
    assert "resumed 100 of 100 games" in capsys.readouterr().err
    source = (folder / "cli_pipe.py").read_text().replace("0.5, 2)", "0.6, 2)")
    (folder / "cli_pipe.py").write_text(source)
    sys.modules.pop("cli_pipe")  # the rerun imports the edited file, as a new process would
    importlib.invalidate_caches()
    assert main([*args, "--out", "o", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "`tune` (its code changed)" in err and "nothing was reused" in err


# reason: a new process with worker processes (6 CPU s); by default the CLI in this process
# (jobs 1) and a worker's exception: test_an_exception_on_a_worker_is_exit_2_naming_it
@pytest.mark.parametrize(
    "jobs,process", [("1", False), pytest.param("2", True, marks=pytest.mark.slow)]
)
def test_an_exception_in_the_users_pipeline_is_exit_2_naming_it(folder, capsys, jobs, process):
    args = ["audit-pipeline", "cli_pipe:raises", "--canary", "cli_pipe:CANARY", "--games", "50",
            "--out", "x", "--jobs", jobs]  # fmt: skip
    if process:
        proc = subprocess.run(
            [sys.executable, "-m", "auditsel", *args], cwd=folder, capture_output=True, text=True
        )
        code, err = proc.returncode, proc.stderr
    else:
        code, err = main(args), capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in err
    assert lines[0].startswith("auditsel: error: tune: cli_pipe.raises raised KeyError")
    assert "at cli_pipe.py:" in lines[0] and "in game " in lines[0] and "(seed " in lines[0]
    assert not (folder / "x").exists()  # nothing half-written


def test_an_exception_on_a_worker_is_exit_2_naming_it(folder, capsys):
    # --no-progress: off a terminal a progress line is printed now and then (the engine), which
    # a loaded machine reaches before game 40 fails
    args = ["audit-pipeline", "cli_pipe:fails_late", "--canary", "cli_pipe:CANARY", "--no-progress"]
    assert main([*args, "--games", "50", "--out", "x", "--jobs", "2"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in lines[0]
    assert lines[0].startswith("auditsel: error: tune: cli_pipe.fails_late raised KeyError")
    assert "at cli_pipe.py:" in lines[0] and "in game 4" in lines[0]  # game 40 to 49
    assert not (folder / "x").exists()  # nothing half-written


def test_bad_references_and_scores_are_exit_2(folder, capsys):
    cases = [
        (["cli_pipe:tune", "--canary", "cli_pipe:CANARY", "--score", "cli_pipe:nan"], "NaN"),
        (["cli_pipe:tune"], "canary: required"),
        (["no_such_module:tune", "--canary", "cli_pipe:CANARY"], "cannot import module"),
        (["cli_pipe:missing", "--canary", "cli_pipe:CANARY"], "has no attribute 'missing'"),
        (["cli_pipe:tune", "--canary", "{kind: dirac}"], "canary.kind: must be one of"),
        (["cli_pipe:tune", "--canary", "cli_pipe:tune"], "must name an InputCanary"),
    ]
    for args, message in cases:
        assert main(["audit-pipeline", *args, "--games", "20", "--out", "y"]) == 2, args
        assert message in capsys.readouterr().err
        assert not (folder / "y").exists()


def test_plan_sizes_a_pipeline_from_a_pilot(folder, capsys):
    args = ["plan", "cli_pipe:tune", "--canary", "cli_pipe:CANARY", "--pilot", "200"]
    assert main([*args, "--target-eps", "1.0", "--claim", "0.5", "--games", "1000", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["pilot_games"] == 200 and plan["games_for_target"] > 0
    assert plan["games_to_refute"] < plan["games_for_target"] and 0 < plan["prob_target"] <= 1
    assert main(args) == 2
    assert "--target-eps" in capsys.readouterr().err
