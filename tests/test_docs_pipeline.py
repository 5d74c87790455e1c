"""The pipeline tutorial end to end, its audit block and its commands included.

tests/test_docs.py runs every docs page; it skips the tutorial's `# not run` blocks (the audit
of 2,000 Opacus games, and the command-line block that needs tuning.py). This file runs them:
the whole page with 64 games and a pilot of 30 in the default run, and as written (2,000
games, then both commands of the page on the tutorial's tuning.py) in the slow run.
"""

import json
import shlex
import subprocess
import sys

import pytest
from test_docs import DOCS, _missing, blocks

TUTORIAL = DOCS / "tutorials" / "audit-your-pipeline.md"
FEW = {"GAMES = 2_000": "GAMES = 64", "pilot=100,": "pilot=30,"}


def run_tutorial(replace: dict[str, str] | None = None) -> dict:
    """Every python block of the tutorial in order in one namespace, `# not run` ones included,
    with `replace` applied (each key must occur exactly once in the page's code)."""
    code = [b for b in blocks(TUTORIAL, "python")]
    for old in replace or {}:
        assert sum(b.code.count(old) for b in code) == 1, f"{old!r} must occur once"
    namespace: dict = {"__name__": "__docs__"}
    for block in code:
        marker = block.marker
        if marker and marker[0] == "requires" and _missing(marker[1]):
            pytest.skip(f"the tutorial requires {marker[1]}")
        text = block.code
        for old, new in (replace or {}).items():
            text = text.replace(old, new)
        exec(compile("\n" * (block.line - 1) + text, str(TUTORIAL), "exec"), namespace)
    return namespace


def tutorial_module() -> str:
    """The blocks the page tells its reader to save as tuning.py (second line names it)."""
    return "\n".join(
        b.code for b in blocks(TUTORIAL, "python") if "tuning.py" in b.code.split("\n")[1]
    )


@pytest.mark.slow  # a page run (the pipeline tutorial)
def test_tutorial_runs_end_to_end_with_fewer_games(tmp_path, monkeypatch):
    pytest.importorskip("opacus")
    monkeypatch.chdir(tmp_path)
    ns = run_tutorial(FEW)
    audit, claim, plan = ns["audit"], ns["claim"], ns["plan"]
    assert audit.games == 64 and audit.refuted is not None
    assert claim.claimed_epsilon > 0 and claim.tuning_epsilon > claim.claimed_epsilon
    assert plan.pilot_games == 30 and plan.games == 64
    for name in ("scores.png", "tradeoff.png", "privacy_curve.png", "result.json", "report.md"):
        assert (tmp_path / "audit-opacus" / name).exists()


def test_tutorial_module_is_the_pipeline_the_cli_audits():
    source = tutorial_module()
    compile(source, "tuning.py", "exec")
    assert "def tune(" in source and "def score(" in source and "train_data =" in source


def _page_commands() -> list[list[str]]:
    found = []
    for block in blocks(TUTORIAL, "bash"):
        for line in block.code.splitlines():
            if line.strip().startswith("auditsel "):
                found.append(shlex.split(line)[1:])
    return found


def test_the_pages_commands_are_the_plan_and_the_audit():
    assert [argv[0] for argv in _page_commands()] == ["plan", "audit-pipeline"]


@pytest.mark.slow
def test_tutorial_as_written_and_its_commands(tmp_path, monkeypatch):
    """The page as written (2,000 games), then its two commands on tuning.py: the command line
    audits the same games as the Python API (the same seed: the same eps_L)."""
    pytest.importorskip("opacus")
    monkeypatch.chdir(tmp_path)
    ns = run_tutorial()
    assert ns["audit"].games == 2000 and ns["audit"].refuted is False
    (tmp_path / "tuning.py").write_text(tutorial_module())
    plan, audit = _page_commands()
    # as the reader runs them: each command in its own process, in the folder of tuning.py
    # (this process's worker pool was started by the page's audit, before tuning.py existed)
    for argv in (plan, [*audit, "--out", "cli-audit", "--quiet"]):
        done = subprocess.run([sys.executable, "-m", "auditsel", *argv], capture_output=True)
        assert done.returncode == 0, done.stderr.decode()
    result = json.loads((tmp_path / "cli-audit" / "result.json").read_text())
    assert result["lower"]["eps"] == ns["audit"].eps
