"""Nothing lost, fourth round (issue 40): `--fresh` and early stop that delete only what they
should, user code that cannot end or erase an audit, every documented value answered or
refused by name, and an audit that says what it is doing (progress and looks in a log file,
SIGTERM, the combined report of several canaries)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from auditsel import GradientCanary, InputCanary
from auditsel.cli import main
from auditsel.errors import ConfigError, percent
from auditsel.files import claim_folder
from auditsel.pipelines.pipeline import Pipeline

PIPE = """
import os
import sys

import numpy as np

DATA = (np.random.default_rng(0).normal(size=(20, 3)), np.arange(20) % 2)
DICT_DATA = (np.zeros((8, 3)), np.arange(8) % 2)
CALLS = [0]


def tune(data, seed, canary):
    X, y = data
    return float(len(X) > 20) + np.random.default_rng(seed).normal()


def tune_dict(data, seed, canary):
    X, y = data
    w = np.random.default_rng(seed).normal(scale=0.05, size=3) + (len(X) > 8)
    return {"model": w, "lr": 0.1}


def score(release, canary):
    return float(release)


def exits(data, seed, canary):
    sys.exit(0)


def forker(data, seed, canary):
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # the child: its exit must not clean up the parent's audit
    os.waitpid(pid, 0)
    return tune(data, seed, canary)


def huge(release, canary):
    return 10**400


def mutates(data, seed, canary):
    CALLS[0] += 1
    if CALLS[0] > 6:
        data[0][0, 0] += 1.0
    return float(data[0][0, 0]) + np.random.default_rng(seed).normal()


def raises_late(data, seed, canary):
    if seed % 97 == 5 and CALLS[0] > 40:
        raise RuntimeError("the user's late bug")
    CALLS[0] += 1
    return tune(data, seed, canary)


def slow(data, seed, canary):
    import time

    time.sleep(0.02)
    return tune(data, seed, canary)
"""
CANARY = "{kind: input, x: [1.0, 1.0, 1.0], y: 1}"


@pytest.fixture
def world(tmp_path, monkeypatch, no_figures):
    # the audits here check folders, checkpoints and messages, never figures
    (tmp_path / "pipe.py").write_text(PIPE)
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("pipe", None)
    return tmp_path


def audit(*extra: str, tune: str = "tune", score: str | None = "score", canary=CANARY) -> list:
    argv = ["audit-pipeline", f"pipe.py:{tune}", "--data", "pipe.py:DATA", "--no-progress"]
    argv += ["--canary", canary, "--quiet", *extra]
    if score is not None:
        argv += ["--score", f"pipe.py:{score}"]
    return argv


def one_line(err: str, pattern: str, *, after: str = "auditsel: look ") -> None:
    """One error line (after the lines of the looks, `after`, an early stop prints)."""
    lines = [line for line in err.strip().splitlines() if not line.startswith(after)]
    assert len(lines) == 1 and lines[0].startswith("auditsel: error: "), err
    assert re.search(pattern, lines[0]), (pattern, lines[0])


def tree(folder: Path) -> dict:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
        for p in sorted(folder.rglob("*"))
        if p.name != ".auditsel.lock"
    }


@pytest.fixture
def every_chunk(monkeypatch):
    from auditsel.games import engine

    monkeypatch.setattr(engine, "CHECKPOINT_AFTER", 0.0)  # chunks written from the first


# --- --fresh -------------------------------------------------------------------------------


def test_fresh_on_a_folder_in_use_deletes_nothing(world, capsys, every_chunk):
    assert main(audit("--games", "64", "--out", "o")) == 0
    before = tree(world / "o")
    assert any("chunk_" in k for k in before)
    held = claim_folder(world / "o")  # another run holds it
    try:
        capsys.readouterr()
        assert main(audit("--games", "64", "--out", "o", "--fresh")) == 2
        one_line(capsys.readouterr().err, r"--out: .* is in use by another auditsel run")
    finally:
        held.release()
    assert tree(world / "o") == before


@pytest.mark.parametrize(
    "extra, pattern",
    [
        (["--rule", "splitt"], r"rule: must be one of"),
        (["--early-stop"], r"--early-stop: .*give --claim"),
    ],
    ids=["rule-typo", "early-stop-no-claim"],
)
def test_fresh_with_a_mistake_elsewhere_deletes_nothing(world, capsys, every_chunk, extra, pattern):
    assert main(audit("--games", "64", "--out", "o")) == 0
    before = tree(world / "o")
    capsys.readouterr()
    assert main(audit("--games", "64", "--out", "o", "--fresh", *extra)) == 2
    one_line(capsys.readouterr().err, pattern)
    assert tree(world / "o") == before


def test_fresh_starts_every_canary_over(world, capsys, every_chunk):
    argv = audit("--games", "32", "--out", "o", tune="tune_dict", score=None, canary="both")
    argv[3] = "pipe.py:DICT_DATA"
    assert main(argv) == 0
    chunks = sorted((world / "o").glob("canary-*/checkpoints/chunk_*.npz"))
    assert len(chunks) == 2  # two canaries, one chunk each
    stamps = {c: c.stat().st_mtime_ns for c in chunks}
    capsys.readouterr()
    assert main(argv) == 0  # a rerun resumes, and says where from (a folder that exists)
    said = capsys.readouterr().err
    assert re.search(r"resumed 64 of 64 games from o/canary-\*/checkpoints", said), said
    assert main([*argv, "--fresh"]) == 0
    said = capsys.readouterr().err
    assert said.count("--fresh: deleted") == 2 and "resumed" not in said, said
    assert all(c.stat().st_mtime_ns != stamps[c] for c in chunks)  # recomputed


def test_fresh_through_a_symlinked_checkpoint_folder(world, capsys, every_chunk):
    elsewhere = world / "disk" / "ckpt"
    elsewhere.mkdir(parents=True)
    (elsewhere / "notes.txt").write_text("the user's own file\n")
    (world / "o").mkdir()
    (world / "o" / "checkpoints").symlink_to(elsewhere)
    assert main(audit("--games", "32", "--out", "o")) == 0
    assert len(list(elsewhere.glob("chunk_*.npz"))) == 1
    capsys.readouterr()
    assert main(audit("--games", "32", "--out", "o", "--fresh")) == 0
    assert "--fresh: deleted" in capsys.readouterr().err
    assert (world / "o" / "checkpoints").is_symlink()  # the link and the user's file stay
    assert (elsewhere / "notes.txt").read_text() == "the user's own file\n"
    assert len(list(elsewhere.glob("chunk_*.npz"))) == 1  # written again


# --- user code that forks or exits ------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_that_exits_deletes_nothing(world, capsys, every_chunk):
    assert main(audit("--games", "8", "--out", "o", tune="forker")) == 0
    assert (world / "o" / "result.json").exists()
    assert len(list((world / "o" / "checkpoints").glob("chunk_*.npz"))) == 1
    assert json.loads((world / "o" / "result.json").read_text())["pipeline"]["games"] == 8


EXITS = ["pipe.py:exits", "--data", "pipe.py:DATA"]


@pytest.mark.parametrize(
    "argv",
    [
        ["audit-pipeline", *EXITS, "--canary", "both", "--games", "64", "--out", "o"],
        ["audit-pipeline", *EXITS, "--canary", CANARY, "--games", "64", "--out", "o"],
        ["plan", *EXITS, "--canary", "both", "--target-eps", "1"],
    ],
    ids=["both", "every-field-score", "plan-both"],
)
def test_sys_exit_in_a_probe_run_is_exit_2_naming_the_function(world, capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    one_line(
        err.split("; your traceback")[0],
        r"tune: pipe.py:exits raised SystemExit\(0\).* in the probe run",
    )
    assert not (world / "o").exists()


def test_a_mutating_tune_is_refused_alike_on_every_backend(world, capsys):
    messages = []
    for extra in (["--jobs", "1"], ["--backend", "loky", "--jobs", "2"]):
        sys.modules.pop("pipe", None)
        assert main(audit("--games", "64", "--out", "o", *extra, tune="mutates")) == 2
        err = capsys.readouterr().err
        one_line(err, r"tune: in-place mutation: data changed")
        messages.append(err)
        assert not (world / "o").exists()


def test_a_score_past_float64_is_exit_2_naming_it(world, capsys):
    assert main(audit("--games", "64", "--out", "o", score="huge")) == 2
    one_line(
        capsys.readouterr().err,
        r"score: pipe.py:huge returned an int of about 10\^400 .*beyond float64",
    )


# --- the API's values ---------------------------------------------------------------------


def test_tuning_epsilon_refuses_several_deltas_by_name():
    from auditsel import GaussianBase, Poisson, tuning_epsilon

    one = tuning_epsilon(GaussianBase(1.0), Poisson(3), [1e-5])
    assert one.epsilon == tuning_epsilon(GaussianBase(1.0), Poisson(3), 1e-5).epsilon
    with pytest.raises(ConfigError, match=r"delta: must be one number .* got 2 values"):
        tuning_epsilon(GaussianBase(1.0), Poisson(3), [1e-5, 1e-3])


@pytest.mark.parametrize("index", [True, (1, False), np.bool_(True)])
def test_a_bool_is_no_gradient_canary_index(index):
    with pytest.raises(ConfigError, match=r"index: must be an int or a tuple of ints"):
        GradientCanary(parameter="w", index=index)
    assert GradientCanary(parameter="w", index=1).index == (1,)


def test_a_score_file_with_two_score_columns_is_refused(tmp_path, capsys):
    rows = "".join(f"{i % 2},{i / 10},{i % 2}\n" for i in range(40))
    (tmp_path / "s.csv").write_text("score,score,member\n" + rows)
    assert main(["audit-scores", str(tmp_path / "s.csv")]) == 2
    one_line(capsys.readouterr().err, r"has 2 columns named 'score'")


def test_a_percentage_is_never_rounded_to_100():
    assert [percent(c) for c in (0.95, 0.975, 0.999, 0.9875, 0.5)] == [
        "95%",
        "97.5%",
        "99.9%",
        "98.75%",
        "50%",
    ]


def test_confidence_0999_prints_999_percent(world, capsys):
    argv = audit("--games", "64", "--out", "o", "--confidence", "0.999", "--claim", "5")
    assert main([a for a in argv if a != "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "99.9% CP" in out and "not refuted at 99.9%" in out and "100%" not in out, out


# --- early stop ------------------------------------------------------------------------------


def test_early_stop_into_an_unwritable_out_is_exit_2(world, capsys):
    (world / "a_file").write_text("x\n")
    argv = audit("--games", "64", "--out", "a_file/o", "--claim", "5", "--early-stop")
    assert main(argv) == 2
    one_line(capsys.readouterr().err, r"--out")


def test_early_stop_that_fails_in_a_later_look_leaves_nothing(world, capsys, every_chunk):
    argv = audit(
        "--games", "256", "--out", "o", "--claim", "50", "--early-stop", tune="raises_late"
    )
    assert main(argv) == 2
    one_line(
        capsys.readouterr().err.split("; your traceback")[0], r"raises_late raised RuntimeError"
    )
    assert not (world / "o").exists()


def test_early_stop_replays_no_earlier_look(tmp_path, monkeypatch, no_figures):
    from auditsel.pipelines.audit_options import ReportOptions
    from auditsel.pipelines.sequential import audit_until_refuted

    calls = []

    def tune(data, seed, canary):
        calls.append(seed)
        return float(np.random.default_rng(seed).normal())

    audit_until_refuted(
        Pipeline(
            tune,
            lambda release, canary: release,
            data=(np.zeros((4, 2)), np.zeros(4)),
            canary=InputCanary(np.ones(2), 1),
        ),
        games=256,
        looks=4,
        delta=1e-5,
        claimed_epsilon=50.0,
        report=ReportOptions(out_dir=tmp_path / "o"),
    )
    games = set(calls)
    assert len(games) >= 256
    # each game once, plus the replay check's three plays per look and the report's call
    assert len(calls) <= 256 + 3 * 5 + 8, len(calls)


def test_early_stop_prints_each_look_and_its_real_seconds(world, capsys):
    argv = audit("--games", "256", "--out", "o", "--claim", "50", "--early-stop", tune="slow")
    start = time.perf_counter()
    assert main([a for a in argv if a != "--quiet"]) == 0
    elapsed = time.perf_counter() - start
    captured = capsys.readouterr()
    looks = re.findall(
        r"auditsel: look (\d): ([\d,]+) games, eps_L [\d.]+ at confidence", captured.err
    )
    assert [int(j) for j, _ in looks] == [1, 2, 3, 4], captured.err
    wall = float(re.search(r"games, [\d.]+ CPU s, ([\d.]+) s wall", captured.out).group(1))
    assert wall >= 0.5 * elapsed  # the whole sequence (256 games of 20 ms), not the last call
    assert "not refuted at 95%" in captured.out


# --- output folders ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "audit-pipeline"])
def test_out_through_a_symlink_loop_is_exit_2(world, capsys, command):
    os.symlink("loop2", world / "loop1")
    os.symlink("loop1", world / "loop2")
    if command == "run":
        config = Path(__file__).parents[1] / "auditsel" / "configs" / "quickstart.yaml"
        argv = ["run", str(config), "--out", "loop1/x", "--quiet", "--no-progress"]
    else:
        argv = audit("--games", "64", "--out", "loop1/x")
    assert main(argv) == 2
    one_line(capsys.readouterr().err, r"--out: loop1/x cannot be resolved .*symbolic link loop")


def test_several_canaries_write_a_combined_report_in_out(world, capsys):
    argv = audit("--games", "64", "--out", "o", "--claim", "5", canary="both")
    argv[1], argv[3] = "pipe.py:tune_dict", "pipe.py:DICT_DATA"
    argv.remove("--score")
    argv.remove("pipe.py:score")
    assert main([a for a in argv if a != "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "97.5% CP" in out and "not refuted at 95%" in out, out
    result = json.loads((world / "o" / "result.json").read_text())
    assert [c["canary"]["kind"] for c in result["canaries"]] == ["input", "gradient"]
    assert result["claim"] == {"epsilon": 5.0, "refuted": False, "confidence": 0.95}
    report = (world / "o" / "report.md").read_text()
    assert "canary 0 (input)" in report and "canary 1 (gradient)" in report


# --- a run without a terminal -----------------------------------------------------------------


def test_progress_lines_without_a_terminal(monkeypatch, capsys):
    from auditsel.games import engine

    monkeypatch.setattr(engine, "PROGRESS_FIRST", 0.0)
    lines = engine._Lines(100, 0, "game")
    for _ in range(4):
        lines.update(25)  # the first line at once, the others within 30 s: none
    err = capsys.readouterr().err
    assert err.splitlines() == [err.splitlines()[0]] and "25 of 100 games" in err, err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_ends_an_audit_like_ctrl_c_with_its_log(world):
    """A nohup-style run (stdout and stderr to a file): progress lines and each look in the
    log; SIGTERM ends it with exit 143 and one line, finished chunks kept."""
    log = world / "log.txt"
    argv = audit("--games", "1024", "--out", "o", "--claim", "50", "--early-stop", tune="slow")
    argv.remove("--no-progress")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    with open(log, "wb") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-m", "auditsel", *argv], stdout=handle, stderr=handle, env=env
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "auditsel: look 1" not in log.read_text():
            time.sleep(0.1)  # look 1: 128 games of 20 ms, a progress line after 2 s
        proc.send_signal(signal.SIGTERM)  # in look 2
        code = proc.wait(timeout=60)
    text = log.read_text()
    assert code == 128 + signal.SIGTERM, text
    assert re.search(r"auditsel: look 1: [\d,]+ games, eps_L", text), text
    assert re.search(r"auditsel: [\d,]+ of [\d,]+ games, \d+ s", text), text
    assert "auditsel: terminated (SIGTERM); finished chunks are kept" in text, text
    assert "Traceback" not in text
    assert list((world / "o" / "checkpoints").glob("chunk_*.npz"))


# --- options objects: checked by name before any game -------------------------------------------


def _pipeline_call(calls: list, **options):
    from auditsel import audit_pipeline

    def tune(data, seed, canary):
        calls.append(seed)
        return float(np.random.default_rng(seed).normal())

    return audit_pipeline(
        Pipeline(
            tune,
            lambda release, canary: release,
            data=(np.zeros((4, 2)), np.zeros(4)),
            canary=InputCanary(np.ones(2), 1),
        ),
        games=40,
        delta=1e-5,
        **options,
    )


def _options_cases():
    from auditsel import Poisson
    from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions, ReportOptions

    return [
        ("statistics-wrong-class", lambda: {"statistics": ExecutionOptions()}, r"^statistics: must be AuditOptions"),
        ("statistics-dict", lambda: {"statistics": {"seed": 1}}, r"^statistics: must be AuditOptions"),
        ("execution-wrong-class", lambda: {"execution": AuditOptions()}, r"^execution: must be ExecutionOptions"),
        ("report-dict", lambda: {"report": {"out_dir": "x"}}, r"^report: must be ReportOptions"),
        ("seed-float", lambda: {"statistics": AuditOptions(seed=7.0)}, r"^seed: must be an integer"),
        ("checkpoint_dir-int", lambda: {"execution": ExecutionOptions(checkpoint_dir=5)}, r"^checkpoint_dir: must be a folder"),
        ("out_dir-int", lambda: {"report": ReportOptions(out_dir=5)}, r"^out_dir: must be a folder"),
        ("base-dict", lambda: {"report": ReportOptions(base={"kind": "dpsgd"}, rounds=Poisson(3))}, r"^base: must be a mechanism pair"),
        ("base-object", lambda: {"report": ReportOptions(base=object(), rounds=Poisson(3))}, r"^base: must be a mechanism pair"),
        ("rounds-text", lambda: {"report": ReportOptions(base=_gaussian(), rounds="poisson")}, r"^rounds: must be a law of K"),
    ]  # fmt: skip


def _gaussian():
    from auditsel import GaussianBase

    return GaussianBase(1.0)


@pytest.mark.parametrize("case", _options_cases(), ids=lambda c: c[0])
def test_options_objects_are_checked_by_name_before_any_game(case):
    _, options, pattern = case
    calls: list = []
    with pytest.raises(ConfigError, match=pattern):
        _pipeline_call(calls, **options())
    assert calls == []


def test_a_numpy_integer_seed_is_a_seed():
    from auditsel.pipelines.audit_options import AuditOptions

    assert (
        AuditOptions(seed=np.int64(7)).seed == 7
        and type(AuditOptions(seed=np.int64(7)).seed) is int
    )
    a = _pipeline_call([], statistics=AuditOptions(seed=np.int64(7)))
    b = _pipeline_call([], statistics=AuditOptions(seed=7))
    assert a.eps == b.eps and a.to_dict()["lower"] == b.to_dict()["lower"]


def test_a_forked_child_never_cleans_up_the_parents_folder(tmp_path):
    folder = claim_folder(tmp_path / "o")
    (tmp_path / "o" / "made.txt").write_text("the parent's output\n")
    pid = os.fork()
    if pid == 0:  # the child: its cleanup must be a no-op
        folder.discard()
        os._exit(0)
    os.waitpid(pid, 0)
    assert (tmp_path / "o" / "made.txt").exists()
    with pytest.raises(ConfigError, match="in use"):  # the lock is still the parent's
        claim_folder(tmp_path / "o")
    folder.discard()
    assert not (tmp_path / "o").exists()


OPACUS_RUN = """
import warnings

import torch


def opacus_run():
    from opacus import PrivacyEngine

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    data = torch.utils.data.TensorDataset(torch.randn(16, 2), torch.ones(16))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    engine = PrivacyEngine()
    model, optimizer, loader = engine.make_private(
        module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    for xb, yb in loader:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(xb).squeeze(-1), yb).backward()
        optimizer.step()
    return engine, optimizer, loader
"""


@pytest.mark.slow  # reason: Opacus trains in every game (7 CPU s); --opacus: tests/pipelines
def test_opacus_with_rounds_and_no_claim_tests_the_tuning_epsilon(world, capsys):
    pytest.importorskip("opacus")
    (world / "opacus_run.py").write_text(OPACUS_RUN)
    rounds = "{kind: poisson, mean: 3}"
    argv = audit("--games", "8", "--out", "o", "--opacus", "opacus_run.py:opacus_run")
    assert main([*argv, "--rounds", rounds]) in (0, 3)
    note = capsys.readouterr().err
    result = json.loads((world / "o" / "result.json").read_text())
    from auditsel import Poisson, from_opacus
    from auditsel.pipelines.load import load_object

    engine, optimizer, loader = load_object("opacus_run.py:opacus_run", "--opacus", call=True)
    run = from_opacus(
        engine, optimizer=optimizer, data_loader=loader, delta=1e-5, rounds=Poisson(3)
    )
    assert result["claim"]["epsilon"] == pytest.approx(run.tuning_epsilon, rel=1e-12)
    assert run.tuning_epsilon > run.claimed_epsilon  # K runs: more than one run's epsilon
    assert f"the claim is the tuning run's epsilon {run.tuning_epsilon:.4g}" in note, note


def test_a_full_standard_output_is_named(tmp_path, monkeypatch):
    """`auditsel run` whose standard output is /dev/full: exit 74, one line naming standard
    output, and the outputs stay. In this process (sys.stdout a file on /dev/full, as a
    redirected stdout is; the real binary's full stdout: tests/test_faults.py)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    config = Path(__file__).parents[1] / "auditsel" / "configs" / "quickstart.yaml"
    argv = ["run", str(config), "--trials", "200", "--out", str(tmp_path / "o"), "--no-progress"]
    err = io.StringIO()
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        monkeypatch.setattr(sys, "stderr", err)
        # --no-plots: the figures (matplotlib, 1 CPU s) are not what is checked here
        code = main([*argv, "--no-plots"])
        monkeypatch.undo()
    assert code == 74, err.getvalue()
    assert err.getvalue().strip().splitlines() == [
        "auditsel: error: cannot write to standard output (No space left on device)"
    ]
    assert (tmp_path / "o" / "result.json").exists()  # the outputs stay


# --- documented values: answered, or refused naming the field and the range that computes ----

RANGE_CASES = [
    ("dpsgd-steps-1e9", {"kind": "dpsgd", "noise_multiplier": 1.0, "steps": 10**9, "sample_rate": 0.01}, r"base\.steps: must be an integer in \[1, 10000000\]"),
    ("dpsgd-sigma-1e-300", {"kind": "dpsgd", "noise_multiplier": 1e-300, "steps": 10, "sample_rate": 0.01}, r"base\.noise_multiplier: must be in \[0\.1, 1e\+06\]"),
    ("dpsgd-rate-5e-324", {"kind": "dpsgd", "noise_multiplier": 1.0, "steps": 10, "sample_rate": 5e-324}, r"base\.sample_rate: must be in \[1e-09, 1\]"),
    ("dpsgd-epsilon-100", {"kind": "dpsgd", "epsilon": 100, "steps": 1, "sample_rate": 1.0}, r"base\.epsilon: calibrates to a noise multiplier below 0\.1.* at most [\d.]+ .*got 100"),
    ("laplace-b-1e-300", {"kind": "laplace", "noise_multiplier": 1e-300}, r"base\.noise_multiplier: must be in \[0\.1,"),
    ("laplace-steps-1e9", {"kind": "laplace", "noise_multiplier": 1.0, "steps": 10**9}, r"base\.steps: must be an integer in \[1, 10000000\]"),
]  # fmt: skip


@pytest.mark.parametrize("case", RANGE_CASES, ids=lambda c: c[0])
def test_base_values_outside_what_computes_are_refused_by_name(tmp_path, capsys, case):
    import yaml

    _, base, pattern = case
    config = {
        "name": "ranges",
        "delta": 1e-5,
        "base": base,
        "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
        "game": {"kind": "reduced", "trials": 2000, "seed": 0},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    argv = ["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "o"), "--quiet"]
    assert main([*argv, "--no-progress"]) == 2
    one_line(capsys.readouterr().err, pattern)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (
            {"noise_multiplier": 1e300, "steps": 10},
            r"noise_multiplier: must be in \[0\.1, 1e\+06\]",
        ),
        (
            {"noise_multiplier": 1.0, "steps": 2**70},
            r"steps: must be an integer in \[1, 10000000\]",
        ),
        ({"noise_multiplier": 1.0, "steps": 10, "sample_rate": 5e-324}, r"sample_rate: must be in"),
    ],
)
def test_the_api_refuses_the_same_values(kwargs, pattern):
    from auditsel import DpsgdBase, LaplaceBase

    with pytest.raises(ConfigError, match=pattern):
        DpsgdBase(**kwargs)
    with pytest.raises(ConfigError, match=pattern):
        LaplaceBase(**kwargs)


def test_the_gdp_limit_of_a_tiny_noise_is_infinite():
    import math

    from auditsel.mechanisms import gdp_mu_dpsgd

    assert gdp_mu_dpsgd(0.01, 10, 0.01) == math.inf
    assert math.isfinite(gdp_mu_dpsgd(0.1, 10, 0.01))


# --- plan ---------------------------------------------------------------------------------------


def test_plan_names_each_canary_by_kind(world, capsys):
    argv = ["plan", "pipe.py:tune", "--score", "pipe.py:score", "--data", "pipe.py:DATA"]
    assert main([*argv, "--canary", "both", "--target-eps", "1"]) == 0
    out = capsys.readouterr().out
    assert "canary 0 (input): " in out and "canary 1 (gradient): " in out, out


def test_plan_with_base_and_rounds_plans_the_tuning_claim(world, capsys):
    from auditsel import GaussianBase, Poisson, tuning_epsilon

    argv = ["plan", "pipe.py:tune", "--score", "pipe.py:score", "--data", "pipe.py:DATA"]
    argv += ["--canary", CANARY, "--base", "{kind: gaussian, mu: 1.0}"]
    assert main([*argv, "--rounds", "{kind: poisson, mean: 3}", "--json"]) == 0
    captured = capsys.readouterr()
    claim = json.loads(captured.out)["claimed_epsilon"]
    assert claim == tuning_epsilon(GaussianBase(1.0), Poisson(3), 1e-5).epsilon
    assert "the claim planned is the tuning run's epsilon" in captured.err


def test_the_tutorial_plans_with_planned_games():
    """The fast part of the test below: the tutorial names `planned_games`, not its module."""
    page = (Path(__file__).parents[1] / "docs" / "tutorials" / "regression-tests.md").read_text()
    assert "config_plan" not in page and "planned_games(CONFIG" in page


@pytest.mark.slow  # reason: three plans of a config (31 CPU s); the tutorial's part: above
def test_planned_games_is_the_plan_of_the_config_and_the_tutorial_uses_it():
    from auditsel.experiments.config import parse_config
    from auditsel.experiments.config_plan import plan_spec
    from auditsel.testing import planned_games

    config = {
        "name": "planned",
        "delta": 1e-5,
        "base": {"kind": "gaussian", "epsilon": 2.0},
        "rounds": {"kind": "poisson", "mean": 3},
        "game": {"kind": "reduced", "trials": 2000},
    }
    games = planned_games(config, target_eps=1.0)
    assert games == plan_spec(parse_config(config), 1.0).games and games > 0
    with pytest.raises(ConfigError, match=r"target_eps: no number of games reaches"):
        planned_games(config, target_eps=50.0)
    page = (Path(__file__).parents[1] / "docs" / "tutorials" / "regression-tests.md").read_text()
    assert "config_plan" not in page and "planned_games(CONFIG" in page


@pytest.mark.slow  # two plans of a numerical trade-off curve: about 12 s
def test_a_far_center_plans_like_a_near_one():
    """`plan` of a farthest-from-C game: the same mechanism with C = 1000 or C = 8 (both far
    beyond the outputs) plays the same game up to the floating point of C, and plans alike
    (issue 40: C = 1000 planned "more than 10^12 games" where C = 8 planned thousands)."""
    from auditsel.testing import planned_games

    def config(center: float) -> dict:
        return {
            "name": "far",
            "delta": 1e-2,
            "base": {"kind": "gaussian", "mu": 1.0},
            "rounds": {"kind": "poisson", "mean": 10},
            "game": {
                "kind": "reduced",
                "trials": 1000,
                "score": {"kind": "farthest", "center": center},
            },
        }

    near, far = planned_games(config(8.0), 3.0), planned_games(config(1000.0), 3.0)
    assert 0 < near < 10**6 and abs(far - near) <= 0.01 * near, (near, far)
