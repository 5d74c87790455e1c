"""Faults (issue 20): several runs on one --out, the code changed between a kill and the resume,
a full disk (a small tmpfs where one can be mounted, and a simulated ENOSPC everywhere), a
closed pipe, and what a failed run may delete.

Two of the three code edits run only with the slow tests (`python -m pytest -m slow
tests/test_faults.py`); the random-stream edit runs by default."""

from __future__ import annotations

import errno
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from paused_run import paused_command

from auditsel.cli import main
from auditsel.errors import ConfigError
from auditsel.files import LOCK_NAME, claim_folder
from auditsel.games.engine import CheckpointError
from auditsel.pipelines.audit_options import ExecutionOptions
from auditsel.version import __version__

# these runs check exit codes, messages and files, never figures (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("no_figures")


ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("auditsel", "attacks")


def write_config(folder: Path, trials: int = 400_000, chunk: int = 20_000, name="faults") -> Path:
    raw = {
        "name": name,
        "delta": 1e-5,
        "base": {"kind": "gaussian", "epsilon": 1.0},
        "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
        "game": {"kind": "reduced", "trials": trials, "seed": 3, "chunk_size": chunk},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def env(pythonpath: Path = ROOT, **extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(pythonpath), **extra}


def command(cfg: Path, out: Path) -> list[str]:
    return [
        *(sys.executable, "-m", "auditsel", "run", str(cfg), "--out", str(out), "--quiet"),
        *("--checkpoint-after", "0"),
    ]


def leftovers(out: Path) -> list[str]:
    """Temporary or lock files left in a folder tree."""
    return sorted(
        str(p.relative_to(out))
        for p in out.rglob("*")
        if p.name.endswith((".tmp", ".new")) or p.name == LOCK_NAME
    )


def numbers(out: Path) -> dict:
    result = json.loads((out / "result.json").read_text())
    return {"lower": result["lower"], "upper": result["upper"]}


# --- several runs on one --out --------------------------------------------------------------


@pytest.mark.slow  # concurrent CLI processes (9 CPU s); the lock itself: tests/test_hostile.py's in-use cases
def test_concurrent_runs_on_one_out_never_mix_or_delete(tmp_path):
    """Six processes on one --out, started together (each waits for a go file after importing
    the CLI, so their chunks coincide): each either finishes (0) or is refused with the one-line
    "in use" message (2); the folder ends complete (manifest, every chunk, result.json equal to
    a run alone) with no temporary or lock file. Before the lock and the unique temporary
    names, 1-3 of 4 crashed (exit 1), deleted the folder under the others, and the survivors
    ended with missing chunks and no manifest."""
    cfg = write_config(tmp_path, trials=400_000, chunk=4_000)
    ref = tmp_path / "alone"
    assert subprocess.run(command(cfg, ref), env=env(), capture_output=True).returncode == 0
    out, go = tmp_path / "shared", tmp_path / "go"
    argv = command(cfg, out)[3:]
    starter = (
        "import os, sys, time\n"
        "from auditsel.cli import main\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    time.sleep(0.001)\n"
        f"sys.exit(main({argv!r}))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", starter], env=env(), stderr=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    time.sleep(3)  # every process has imported the CLI and waits
    go.write_text("go")
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    codes = [rc for rc, _ in results]
    assert set(codes) <= {0, 2} and 0 in codes, results
    for rc, err in results:
        if rc == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "is in use by another auditsel run (pid " in lines[0], err
    assert numbers(out) == numbers(ref)
    ckpt = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert ckpt == sorted(p.name for p in (ref / "checkpoints").iterdir())
    assert "manifest.json" in ckpt and len(ckpt) == 1 + 400_000 // 4_000
    assert leftovers(out) == []


def test_a_second_claim_is_refused_and_the_lock_goes_with_its_holder(tmp_path):
    folder = claim_folder(tmp_path / "out")
    with pytest.raises(ConfigError, match=r"is in use by another auditsel run \(pid \d+\)"):
        claim_folder(tmp_path / "out")
    folder.release()
    assert not (tmp_path / "out" / LOCK_NAME).exists()
    claim_folder(tmp_path / "out").release()  # free again
    # a holder killed with SIGKILL leaves no stale lock
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from auditsel.files import claim_folder; "
            f"held = claim_folder({str(tmp_path / 'k')!r}); print('held', flush=True); time.sleep(600)",
        ],
        env=env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(ConfigError, match=f"pid {holder.pid}"):
        claim_folder(tmp_path / "k")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    claim_folder(tmp_path / "k").release()


# --- what a failed run may delete -----------------------------------------------------------


def test_discard_removes_only_what_the_run_created(tmp_path):
    out = tmp_path / "existing"
    (out / "sub").mkdir(parents=True)
    (out / "mine.txt").write_text("the user's")
    (out / "sub" / "old.npz").write_text("old")
    folder = claim_folder(out)
    (out / "new.txt").write_text("new")
    (out / "sub" / "new.npz").write_text("new")
    (out / "fresh" / "deep").mkdir(parents=True)
    (out / "fresh" / "deep" / "x").write_text("x")
    folder.discard()
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        "mine.txt",
        "sub",
        "sub/old.npz",
    ]


def test_a_failed_run_leaves_no_parent_of_out_behind(tmp_path, monkeypatch, capsys):
    """--out a/b/c where none exists: a run failing after the folder was made (here: the memory
    check of an in-memory game of 10^10 trials) leaves neither c nor b nor a."""
    monkeypatch.chdir(tmp_path)
    cfg = write_config(tmp_path, trials=10**10)
    raw = yaml.safe_load(cfg.read_text())
    raw["game"]["stream"] = False
    cfg.write_text(yaml.safe_dump(raw))
    assert main(["run", str(cfg), "--out", "a/b/c", "--quiet"]) == 2
    assert "games audited in memory need at least" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == [cfg.name]


def test_a_failed_run_into_an_existing_folder_keeps_its_files(tmp_path, monkeypatch, capsys):
    """The review's data loss: `name: ..` made the default folder results/.. and the cleanup of
    a failed run removed the current directory. Now a folder that existed keeps every file it
    had, whatever the failure (here a run-time exit 2 on that folder)."""
    monkeypatch.chdir(tmp_path)
    cfg = write_config(tmp_path, trials=10**10)
    raw = yaml.safe_load(cfg.read_text())
    raw["game"]["stream"] = False
    cfg.write_text(yaml.safe_dump(raw))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    assert main(["run", str(cfg), "--out", "mine", "--quiet"]) == 2
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


# --- the code changed between kill and resume -----------------------------------------------


def package_copy(tmp_path: Path) -> Path:
    """A copy of the package that a test may edit (the resumed run imports the edited copy)."""
    copy = tmp_path / "code"
    for name in PACKAGES:
        shutil.copytree(
            ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.so")
        )
    return copy


def kill_after(cmd, environment, out: Path, chunks: int) -> None:
    """Run with the pause hook (`paused_run`); SIGKILL once `chunks` new chunks are saved."""
    assert cmd[1:3] == ["-m", "auditsel"]
    proc = subprocess.Popen(
        paused_command(cmd[3:], chunks),
        env=environment,
        cwd=out.parent,  # not the checkout: `python -m` would import the package from there
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 300
    while not (out / "checkpoints" / "paused").exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


NEXT = f"{__version__}.1"  # a version other than this one
EDITS = {
    "version": ("auditsel/version.py", f'__version__ = "{__version__}"', f'__version__ = "{NEXT}"'),
    "random-streams": ("auditsel/dpsgd/__init__.py", "RANDOM_STREAMS = 2", "RANDOM_STREAMS = 3"),
    "engine-source": ("auditsel/games/engine.py", "import hashlib\n", "import hashlib  # x\n"),
}
SAYS = {
    "version": f"auditsel {__version__}, now {NEXT}",
    "random-streams": "random streams version 2, now 3",
    "engine-source": "the auditsel source code changed",
}


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param("random-streams", marks=pytest.mark.slow),  # processes killed, resumed
        pytest.param("version", marks=pytest.mark.slow),
        pytest.param("engine-source", marks=pytest.mark.slow),
    ],
)
def test_a_code_change_between_kill_and_resume_is_refused(tmp_path, edit):
    """Killed under one version of the code, resumed under another: refused with a line that
    says what changed and how to start fresh; the checkpoints stay untouched; after deleting
    them the new code runs from scratch. Before, the resume printed "resumed 15 of 30 chunks"
    and a number matching neither version."""
    code = package_copy(tmp_path)
    cfg, out = write_config(tmp_path), tmp_path / "out"
    environment = env(code)
    kill_after(command(cfg, out), environment, out, chunks=5)
    kept = {p.name: p.stat().st_mtime_ns for p in (out / "checkpoints").glob("chunk_*.npz")}
    assert len(kept) == 5
    path, old, new = EDITS[edit]
    text = (code / path).read_text()
    assert old in text
    (code / path).write_text(text.replace(old, new, 1))
    proc = subprocess.run(
        command(cfg, out), env=environment, capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and "were computed by other code (" in line, line
    assert SAYS[edit] in line and "to start fresh" in line and "resumed" not in line, line
    now = {p.name: p.stat().st_mtime_ns for p in (out / "checkpoints").glob("chunk_*.npz")}
    assert now == kept and not (out / "result.json").exists()
    shutil.rmtree(out / "checkpoints")
    proc = subprocess.run(
        command(cfg, out), env=environment, capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0 and "resumed" not in proc.stderr, proc.stderr


def _module(folder: Path, body: str):
    (folder / "my_audit.py").write_text(textwrap.dedent(body))
    sys.path.insert(0, str(folder))
    try:
        importlib.invalidate_caches()
        sys.modules.pop("my_audit", None)
        return importlib.import_module("my_audit")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("my_audit", None)


def test_audit_protocol_refuses_checkpoints_of_an_edited_score_function(tmp_path):
    """Before, editing the score function and rerunning with the same checkpoint folder
    returned the old result."""
    from auditsel.pipelines.own_protocol import audit_protocol

    body = """
        def release(member, rng):
            return member * 2.0 + rng.normal()

        def score(y):
            return {sign}y
    """
    ckpt = tmp_path / "ckpt"
    first = _module(tmp_path, body.format(sign=""))
    options = dict(
        delta=1e-5, trials=2000, execution=ExecutionOptions(chunk_size=500, checkpoint_dir=ckpt)
    )
    a = audit_protocol(first.release, first.score, **options)
    again = _module(tmp_path, body.format(sign=""))  # the same code, reloaded: resumes
    assert audit_protocol(again.release, again.score, **options) == a
    edited = _module(tmp_path, body.format(sign="-"))
    with pytest.raises(CheckpointError, match=r"release/score functions changed.*start fresh"):
        audit_protocol(edited.release, edited.score, **options)
    shutil.rmtree(ckpt)
    b = audit_protocol(edited.release, edited.score, **options)
    assert b.eps != a.eps  # the edit changes the numbers: the refusal mattered


# --- a full disk, a closed pipe ---------------------------------------------------------------


def _can_mount_tmpfs(tmp_path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        proc = subprocess.run(
            [
                "unshare",
                "--user",
                "--map-root-user",
                "--mount",
                "sh",
                "-c",
                f"mount -t tmpfs -o size=64k tmpfs {probe}",
            ],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


@pytest.mark.slow  # mounts a tmpfs and fills it (the simulated full disk stays by default)
def test_a_full_disk_on_a_small_tmpfs_exits_74_and_resumes(tmp_path):
    """--out on a 400 KiB tmpfs: the run stops with exit 74 and one line saying the disk is
    full (not exit 1, "internal error"); no temporary file is left; after the file system is
    made larger, the same command resumes from the chunks that fit and equals a run on a
    disk with room."""
    if shutil.which("unshare") is None or not _can_mount_tmpfs(tmp_path):
        pytest.skip("no tmpfs can be mounted here (the simulated ENOSPC test covers this)")
    cfg = write_config(tmp_path)
    ref = tmp_path / "ref"
    assert subprocess.run(command(cfg, ref), env=env(), capture_output=True).returncode == 0
    disk = tmp_path / "disk"
    disk.mkdir()
    run = " ".join(command(cfg, disk / "out"))
    script = f"""
        mount -t tmpfs -o size=400k tmpfs {disk} || exit 99
        {run} 2> {tmp_path}/err1; echo "rc1=$?"
        find {disk} -name '*.tmp' | wc -l | sed 's/^/tmp=/'
        ls {disk}/out/checkpoints | grep -c '^chunk_' | sed 's/^/chunks=/'
        mount -o remount,size=64m {disk}
        {run} 2> {tmp_path}/err2; echo "rc2=$?"
        cp {disk}/out/result.json {tmp_path}/result.json
    """
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    facts = dict(line.split("=", 1) for line in proc.stdout.split() if "=" in line)
    err1 = (tmp_path / "err1").read_text().strip()
    assert facts["rc1"] == "74", (proc.stdout, proc.stderr, err1)
    assert len(err1.splitlines()) == 1 and "no space left on the device writing" in err1, err1
    assert facts["tmp"] == "0"
    assert 0 < int(facts["chunks"]) < 20
    assert facts["rc2"] == "0", (tmp_path / "err2").read_text()
    assert f"resumed {facts['chunks']} of 20 chunks" in (tmp_path / "err2").read_text()
    result = json.loads((tmp_path / "result.json").read_text())
    assert {"lower": result["lower"], "upper": result["upper"]} == numbers(ref)


def test_a_simulated_full_disk_exits_74_keeps_checkpoints_and_resumes(
    tmp_path, monkeypatch, capsys
):
    """ENOSPC from the 6th chunk write (monkeypatched numpy.savez): exit 74 with one line naming
    the checkpoint; the 5 chunks written stay; nothing temporary is left; the rerun resumes and
    equals a run that never failed."""
    from auditsel.games import engine

    monkeypatch.chdir(tmp_path)
    cfg = write_config(tmp_path)
    assert main(["run", str(cfg), "--out", "ref", "--quiet"]) == 0
    real, calls = np.savez, []

    def full_disk(handle, **arrays):
        calls.append(1)
        if len(calls) > 5:
            handle.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(handle, **arrays)

    monkeypatch.setattr(engine.np, "savez", full_disk)
    capsys.readouterr()
    # one job: the chunks finish (and are written) in order (threads may finish them out of it)
    assert main(["run", str(cfg), "--out", "out", "--quiet", "--jobs", "1"]) == 74
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "no space left on the device writing" in err and "chunk_0000005.npz" in err, err
    assert "internal error" not in err
    assert len(list((tmp_path / "out" / "checkpoints").glob("chunk_*.npz"))) == 5
    assert leftovers(tmp_path / "out") == []
    monkeypatch.setattr(engine.np, "savez", real)
    assert main(["run", str(cfg), "--out", "out", "--quiet"]) == 0
    assert "resumed 5 of 20 chunks" in capsys.readouterr().err
    assert numbers(tmp_path / "out") == numbers(tmp_path / "ref")


def _scores_file(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 2000)
    lines = "".join(f"{s:.6f},{m}\n" for s, m in zip(rng.normal(size=2000) + member, member))
    path = tmp_path / "scores.csv"
    path.write_text("score,member\n" + lines)
    return path


def test_stdout_on_a_full_device_exits_74_with_one_line(tmp_path):
    scores = _scores_file(tmp_path)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "auditsel", "audit-scores", str(scores)],
            env=env(),
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert proc.returncode == 74, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == ["auditsel: error: cannot write to standard output (No space left on device)"]


def test_a_closed_pipe_exits_quietly(tmp_path):
    """`auditsel audit-scores FILE --json | head -c 1`: the reader closes the pipe; auditsel
    stops quietly with 141 (128 + SIGPIPE, as `yes | head` does), not "internal error"."""
    scores = _scores_file(tmp_path)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    proc = subprocess.run(
        [sys.executable, "-m", "auditsel", "audit-scores", str(scores), "--json"],
        env=env(),
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == ""


# --- sweeps honour --backend and --scheduler --------------------------------------------------


@pytest.fixture
def _pid_in_result(monkeypatch):
    from auditsel.experiments import sweep

    original = sweep._numbered_point  # the task itself: a closure travels to loky's workers

    def with_pid(i, point, out_dir, plots):
        i, result = original(i, point, out_dir, plots)
        return i, {**result, "pid": os.getpid()}

    monkeypatch.setattr(sweep, "_numbered_point", with_pid)


@pytest.mark.slow  # sweeps on process backends
def test_sweeps_run_their_points_on_the_named_backend(tmp_path, _pid_in_result):
    """`run_sweep(..., backend=...)`: the points run where the backend puts them (threads in
    this process for threading, loky worker processes by default with jobs=2)."""
    from auditsel.experiments import sweep

    raw = yaml.safe_load(write_config(tmp_path, trials=2000).read_text())
    raw["sweep"] = {"base.epsilon": [1, 2]}
    points = sweep.expand_sweep(raw)
    pids = {}
    for backend in ("threading", None):
        out = tmp_path / f"sweep-{backend}"
        out.mkdir()
        results = sweep.run_sweep(points, out, jobs=2, progress=False, backend=backend)
        pids[backend] = {r["pid"] for r in results}
        assert (out / "sweep.csv").exists()
    assert pids["threading"] == {os.getpid()}
    assert os.getpid() not in pids[None]


def test_a_sweep_with_an_unreachable_scheduler_exits_2(tmp_path, capsys):
    """Before, a sweep ignored --backend/--scheduler and exited 0."""
    pytest.importorskip("distributed")
    cfg = write_config(tmp_path, trials=2000)
    raw = yaml.safe_load(cfg.read_text())
    raw["sweep"] = {"base.epsilon": [1, 2]}
    cfg.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    argv = ["run", str(cfg), "--out", str(out), "--backend", "dask", "--scheduler"]
    assert main([*argv, "tcp://127.0.0.1:1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("auditsel: error: --scheduler: cannot reach tcp://127.0.0.1:1"), err
    assert not out.exists()
