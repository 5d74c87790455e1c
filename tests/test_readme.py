"""The README's set-up commands are the first thing a reader sees, and CI runs the test one.

The README's other commands, and every page of docs/, are checked by tests/test_docs.py."""

from pathlib import Path

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
    """Under 150 lines, and the placeholders the lead fills in are there, each with its link."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 150
    for heading, link in [
        ("## Audit your own pipeline", "docs/tutorials/audit-your-pipeline.md"),
        ("## What epsilon to report", "docs/tutorials/honest-epsilon.md"),
    ]:
        section = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
        assert link in section and 3 <= len(section.strip().splitlines()) <= 6
