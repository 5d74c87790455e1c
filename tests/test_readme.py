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


import re
import shlex

from auditsel.cli import build_parser

# README commands too long for the default test run: they are covered by the tests named here
COVERED_ELSEWHERE = {
    "auditsel reproduce table4": "test_reproduce.py (one cell, and the slow full table)",
    "auditsel reproduce figure6": "test_reproduce.py (a reduced grid)",
    "auditsel reproduce dpsgd-factor": "test_reproduce.py (slow)",
    "auditsel reproduce table3": "test_dpsgd_table3.py (reduced cells of the grid, its findings)",
    "auditsel run configs/table4.yaml --jobs 2": "test_sweep.py (expansion of every point)",
    "auditsel run configs/figure6.yaml --jobs 2": "test_sweep.py (expansion of every point)",
    "auditsel run configs/one_run_dpsgd.yaml": "test_one_run.py (the config with fewer canaries and audits)",
    "auditsel run configs/worst_case_dpsgd.yaml --jobs 2": "test_dpsgd_worst_case.py (a config through the CLI)",
    "auditsel reproduce accountants --jobs 2": "test_dpsgd_worst_case.py (one cell through the reproduction)",
    "auditsel run configs/dpsgd_leak.yaml --jobs 2 --out results/dpsgd_leak/dpsgd": "test_dpsgd_leak.py (the setting, and the committed result)",
    "auditsel run configs/dpsgd_leak_reduced.yaml --out results/dpsgd_leak/reduced": "test_dpsgd_leak.py (the setting, and the committed result)",
    "auditsel plan configs/table3_etcv_eps1.yaml --games 2000 --target-eps 1.17": "test_plan.py (the planner)",
    "auditsel plan configs/table3_etcv_eps4.yaml --games 2000 --target-eps 4.28": "test_plan.py (the planner)",
}


def readme_blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def readme_auditsel_commands():
    commands = []
    for block in readme_blocks("bash"):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("auditsel "):
                    commands.append(part)
    return commands


def test_every_readme_command_parses():
    commands = readme_auditsel_commands()
    assert len(commands) >= 8
    parser = build_parser()
    for command in commands:
        argv = shlex.split(command)[1:]
        argv = [a.replace("HOST", "127.0.0.1") for a in argv]
        parser.parse_args(argv)  # raises on an option the CLI does not have


def test_cheap_readme_commands_run(tmp_path, monkeypatch):
    import numpy as np

    from auditsel.cli import main

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 2000)
    np.savez("scores.npz", score=rng.normal(member, 1.0), member=member)
    (tmp_path / "scores.csv").write_text(
        "score,member\n"
        + "\n".join(f"{s},{m}" for s, m in zip(rng.normal(member, 1.0), member))
        + "\n"
    )
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    ran = 0
    for command in readme_auditsel_commands():
        argv = shlex.split(command)[1:]
        if command in COVERED_ELSEWHERE or "--scheduler" in argv or "--backend" in argv:
            continue
        if argv[0] == "run" and "configs/sweep_eps_nu.yaml" not in argv:
            argv += ["--trials", "20000"]
        if "configs/sweep_eps_nu.yaml" in argv:
            argv += ["--trials", "2000"]
        assert main(argv) == 0, command
        ran += 1
    assert ran >= 5


def test_readme_python_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = readme_blocks("python")
    assert len(blocks) >= 2
    for block in blocks:
        if "opacus" in block:
            continue  # needs the accountants extra: run by test_dpsgd_worst_case.py
        namespace = {}
        exec(compile(block, "README.md", "exec"), namespace)
        for name, value in namespace.items():
            if name.startswith("test_") and callable(value):
                value()
