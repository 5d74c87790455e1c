"""The README's set-up commands are the first thing a reader sees, and CI runs the test one."""
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
