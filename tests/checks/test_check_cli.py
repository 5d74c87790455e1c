"""`auditsel check` and `audit-pipeline --opacus --accept`: the lines, the exit codes, result.json."""

import json
import sys
import textwrap

import pytest

from auditsel.cli import main

# these runs check exit codes, messages and files, never figures (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("no_figures")


PIPE = """
import numpy as np
import torch

from auditsel import DpsgdBase


class HandDP(torch.optim.SGD):
    def __init__(self, params):
        super().__init__(params, lr=0.1)
        self.noise_multiplier, self.max_grad_norm = 1.0, 1.0


X = torch.randn(32, 2, generator=torch.Generator().manual_seed(0))
DATA = torch.utils.data.TensorDataset(X, (X[:, 0] > 0).float())


def broken():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    optimizers = [HandDP(model[0].parameters()), torch.optim.SGD(model[1].parameters(), lr=0.1)]
    return {"model": model, "optimizers": optimizers, "dataset": DATA}


def correct():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    loader = torch.utils.data.DataLoader(DATA, batch_size=32)
    base = DpsgdBase(1.0, 10, 1.0, "pld")
    return {"model": model, "optimizers": [HandDP(model.parameters())], "data_loader": loader,
            "base": base, "delta": 1e-5}


def a_list():
    return [1, 2]


def unknown_key():
    return {"modle": None}


def raises():
    raise RuntimeError("no data today")


def tune(data, seed, canary):
    '''one Gaussian step of sensitivity 1'''
    grads = [np.zeros(2)]
    canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
    return [grads[0] + np.random.default_rng(seed).normal(0.0, 1.0, 2)]


def shuffled_opacus_run():
    import warnings

    from opacus import PrivacyEngine

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = torch.utils.data.DataLoader(DATA, batch_size=8, shuffle=True)
    engine = PrivacyEngine()
    model, optimizer, loader = engine.make_private(
        module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=1.0,
        max_grad_norm=1.0, poisson_sampling=False,
    )
    loss = torch.nn.BCEWithLogitsLoss()
    for xb, yb in loader:
        optimizer.zero_grad()
        loss(model(xb).squeeze(-1), yb).backward()
        optimizer.step()
    return engine, optimizer, loader
"""


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    (tmp_path / "check_pipe.py").write_text(textwrap.dedent(PIPE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("check_pipe", None)
    return tmp_path


def test_a_broken_pipeline_exits_3_with_one_line_per_finding(folder, capsys):
    assert main(["check", "check_pipe:broken"]) == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("breaks the claim: optimizers[1] (SGD): updates 2 parameter")
    assert "; effect: unbounded (inf)" in lines[0] and "; fix: train every parameter" in lines[0]
    assert lines[-1].startswith("1 finding(s), 1 breaking the claim")
    assert main(["check", "check_pipe:broken", "--json"]) == 3
    found = json.loads(capsys.readouterr().out)
    assert found["breaks"] == 1 and found["findings"][0]["check"] == "parameters_outside_dp"
    assert found["findings"][0]["effect"] is None and found["findings"][0]["effect_unbounded"]


def test_a_correct_pipeline_exits_0(folder, capsys):
    assert main(["check", "check_pipe:correct"]) == 0
    assert capsys.readouterr().out.startswith("0 finding(s), 0 breaking the claim")


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("check_pipe", "target: must be MODULE:FUNCTION"),
        ("check_pipe:a_list", "must return a mapping with keys among model, optimizers"),
        ("check_pipe:unknown_key", "unknown key(s) modle"),
        ("check_pipe:raises", "RuntimeError: no data today"),
        ("check_pipe:nothing", "has no attribute 'nothing'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(folder, capsys, target, says):
    assert main(["check", target]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_the_bug_zoo_shuffled_batches_is_reported_as_breaking_the_claim(capsys):
    pytest.importorskip("opacus")
    target = "auditsel.reproductions.bugzoo.shuffled_batches:pipeline_objects"
    assert main(["check", target]) == 3
    out = capsys.readouterr().out
    assert out.startswith("breaks the claim: data_loader (DataLoader, RandomSampler")


def test_the_bug_zoo_per_tensor_clip_hand_loop_is_reported_through_its_privatizer(capsys):
    target = "auditsel.reproductions.bugzoo.per_tensor_clip:pipeline_objects"
    assert main(["check", target, "--json"]) == 3
    (finding,) = json.loads(capsys.readouterr().out)["findings"]
    assert finding["object"] == "privatizer (per_tensor_clip.privatize)"
    assert (finding["check"], finding["severity"]) == ("per_layer_clipping", "breaks")


def test_audit_pipeline_refuses_a_broken_opacus_run_unless_accepted(folder, capsys):
    pytest.importorskip("opacus")
    args = ["audit-pipeline", "check_pipe:tune", "--canary", "{kind: gradient, coordinate: 0}",
            "--games", "8", "--out", "acc", "--opacus", "check_pipe:shuffled_opacus_run",
            "--rounds", "{kind: poisson, mean: 2}", "--no-progress"]  # fmt: skip
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("breaks the claim: data_loader (DataLoader, RandomSampler")
    assert "--opacus: 1 check(s) before the games find that the run breaks the claim" in (
        captured.err
    )
    assert "pass --accept" in captured.err and not (folder / "acc").exists()
    assert main([*args, "--accept"]) in (0, 3)
    out = capsys.readouterr().out
    assert out.index("breaks the claim: data_loader") < out.index("eps_L")
    checks = json.loads((folder / "acc" / "result.json").read_text())["checks"]
    assert checks["accepted"] is True and checks["findings"][0]["check"] == "sampling"


def test_the_cli_reads_the_keywords_of_check_pipeline():
    """`auditsel check` lists the fields of check_pipeline's RunObjects without importing it
    (fast --help)."""
    import dataclasses

    from auditsel.cli.command_check import KEYS
    from auditsel.pipelines.checks import RunObjects

    assert KEYS == tuple(f.name for f in dataclasses.fields(RunObjects))
