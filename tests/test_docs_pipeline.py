"""The pipeline tutorial and how-to run as written (docs/tutorials, docs/howto)."""

import shlex

import pytest
from docs_blocks import blocks, module_source, run_page

from auditsel.cli import build_parser

TUTORIAL = "docs/tutorials/audit-your-pipeline.md"
HOWTO = "docs/howto/audit-a-hand-written-dpsgd-loop.md"


def test_tutorial_runs_end_to_end_with_fewer_games(tmp_path, monkeypatch):
    """Every block of the Opacus tutorial, with 64 games instead of 2,000 and a pilot of 30
    instead of 100 (the slow test below runs the page as written)."""
    pytest.importorskip("opacus")
    monkeypatch.chdir(tmp_path)
    ns = run_page(TUTORIAL, {"GAMES = 2_000": "GAMES = 64", "pilot=100,": "pilot=30,"})
    audit, claim = ns["audit"], ns["claim"]
    assert audit.games == 64 and audit.refuted is not None
    assert claim.claimed_epsilon > 0 and claim.tuning_epsilon > claim.claimed_epsilon
    for name in ("scores.png", "tradeoff.png", "privacy_curve.png", "result.json", "report.md"):
        assert (tmp_path / "audit-opacus" / name).exists()


@pytest.mark.slow
def test_tutorial_runs_as_written(tmp_path, monkeypatch):
    pytest.importorskip("opacus")
    monkeypatch.chdir(tmp_path)
    ns = run_page(TUTORIAL)
    assert ns["audit"].games == 2000 and ns["audit"].refuted is False


def test_tutorial_module_is_the_pipeline_the_cli_audits(tmp_path):
    source = module_source(TUTORIAL, "tuning.py")
    compile(source, "tuning.py", "exec")
    assert "def tune(" in source and "def score(" in source and "train_data =" in source


def test_howto_runs_and_its_bound_holds(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    ns = run_page(HOWTO)
    assert 0 < ns["audit"].eps <= ns["base"].epsilon(1e-5)


def test_every_auditsel_command_of_the_pages_parses():
    parser = build_parser()
    commands = [
        line.strip()
        for page in (TUTORIAL, HOWTO)
        for block in blocks(page, "bash")
        for line in block.splitlines()
        if line.strip().startswith("auditsel ")
    ]
    assert len(commands) >= 2
    for command in commands:
        parser.parse_args(shlex.split(command)[1:])
