"""The README's set-up commands are the first thing a reader sees, and CI runs the test one.

The README's other commands, and every page of docs/, are checked by tests/test_docs.py."""

import contextlib
import io
import re
from pathlib import Path

import pytest
from test_docs import _missing, blocks

ROOT = Path(__file__).resolve().parents[1]


def readme_setup_commands():
    text = (ROOT / "README.md").read_text()
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in first_block.splitlines() if line.strip()]


def test_readme_opens_with_the_two_setup_commands():
    head = (ROOT / "README.md").read_text().splitlines()
    assert head[0].startswith("# ") and head[2] == "```bash"
    install_run, install_test = readme_setup_commands()
    assert install_run.endswith("auditsel run")
    assert "[test]" in install_test and "pytest" in install_test


def test_ci_runs_exactly_the_readme_test_command():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert readme_setup_commands()[1] in ci


def test_readme_is_a_front_page():
    """Under 150 lines; the sections a user reads first, each with its link."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 150
    for heading, link in [
        ("## What epsilon to report", "docs/tutorials/honest-epsilon.md"),
        ("## Audit your own pipeline", "docs/tutorials/audit-your-pipeline.md"),
        ("## What it found", "docs/findings/interval-widths.md"),
    ]:
        section = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
        assert link in section, heading


FEWER = {"games=1000": "games=48", "pilot=100": "pilot=24"}  # the pipelines' blocks, small


@pytest.mark.slow  # a page run (the README's code blocks)
def test_readme_code_runs(tmp_path, monkeypatch):
    """Every python block of the README, in order in one namespace, with fewer games (each
    replaced string must occur): the SVM audit, then the Opacus pipeline end to end (skipped
    without Opacus): claim, plan, audit, verdict, report and plots."""
    monkeypatch.chdir(tmp_path)
    code = blocks(ROOT / "README.md", "python")
    assert len(code) >= 2
    namespace: dict = {"__name__": "__readme__"}
    for old in FEWER:
        assert sum(b.code.count(old) for b in code) >= 1, old
    for block in code:
        marker = block.marker
        if marker and marker[0] == "requires" and _missing(marker[1]):
            continue
        text = block.code
        for old, new in FEWER.items():
            text = text.replace(old, new)
        exec(compile("\n" * (block.line - 1) + text, "README.md", "exec"), namespace)
    svm = namespace["audit"] if "claim" not in namespace else None
    if "claim" in namespace:  # the Opacus block ran
        audit, claim, plan = namespace["audit"], namespace["claim"], namespace["plan"]
        assert audit.games == plan.games == 48 and audit.refuted is not None
        assert claim.interval.lower <= claim.tuning_epsilon == audit.claimed_epsilon
        for name in ("report.md", "result.json", "scores.png", "tradeoff.png"):
            assert (tmp_path / "my-audit" / name).exists(), name
    else:
        assert svm is not None and svm.eps > 0  # no privacy: 48 games already certify some


def test_readme_shows_the_committed_bug_zoo_and_interval_widths():
    text = (ROOT / "README.md").read_text()
    committed = (ROOT / "results" / "bugzoo" / "table.md").read_text()
    table = re.search(r"\| pipeline \|.*?\n\n", committed, flags=re.S).group(0)
    assert table.strip() in text
    widths = (ROOT / "results" / "papers" / "interval-widths" / "table.md").read_text()
    m = re.search(
        r"- all \(\d+ settings\): (width median [\d.]+, max [\d.]+); "
        r"(as a share of the upper end median [\d.]+%, max [\d.]+%)",
        widths,
    )
    flat = " ".join(text.split())
    assert f"{m.group(1)}; {m.group(2)}" in flat


def test_readme_first_screen_prints_what_it_shows():
    """The `tuning_epsilon` block's printout is the text block under it, as computed now."""
    first = blocks(ROOT / "README.md", "python")[0]
    shown = blocks(ROOT / "README.md", "text")[0]
    assert "tuning_epsilon" in first.code and shown.line > first.line
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(first.code, "README.md", "exec"), {"__name__": "__readme__"})
    assert out.getvalue().strip() == shown.code.strip()


def test_ci_builds_the_docs_as_the_readme_says_before_torch():
    """CI builds the site from the docs extra alone (no torch: a fresh `pip install -e
    ".[docs]"` as the README says), so a page that needs torch fails there, not at the user's."""
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    build = next(i for i, line in enumerate(ci) if line.startswith("sphinx-build -W"))
    installs = [i for i, line in enumerate(ci) if line.startswith("pip install")]
    docs = [i for i in installs if '".[docs]"' in ci[i]]
    assert docs and docs[0] < build and "torch" not in ci[docs[0]]
    assert all("torch" not in ci[i] for i in installs if i < build)
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert re.search(r"autodoc_mock_imports = \[[^\]]*\"torch\"", conf)
