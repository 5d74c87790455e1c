"""Faults (issue 6 section 2): SIGKILL a long audit mid-run and resume; corrupted and foreign
checkpoints are reported (exit 2, one line), never mixed in.

The kill lands mid-run by construction: the run is started by `paused_run.paused_command`,
stops after saving its n-th new chunk and is killed there; the resumed run must
say how many chunks it read back and leave those files untouched."""

import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from paused_run import paused_command

ROOT = Path(__file__).resolve().parents[2]
CHUNK = re.compile(r"^chunk_\d+\.npz$")  # finished chunks (not the .tmp.npz being written)
TRIALS = 1_000_000
CHUNK_SIZE = 20_000  # 50 chunks of a few ms each


def config(tmp_path, seed=7, name="killme"):
    raw = {
        "name": name,
        "delta": 1e-5,
        "base": {"kind": "gaussian", "epsilon": 1.0},
        "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
        "game": {"kind": "reduced", "trials": TRIALS, "seed": seed, "chunk_size": CHUNK_SIZE},
    }
    path = tmp_path / f"{name}-{seed}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def command(cfg, out):
    return [
        sys.executable,
        "-m",
        "auditsel",
        "run",
        str(cfg),
        "--out",
        str(out),
        "--no-progress",
        "--quiet",
        "--checkpoint-after",
        "0",
    ]


def env():
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }


def run(cfg, out):
    proc = subprocess.run(
        command(cfg, out), capture_output=True, text=True, timeout=600, env=env(), cwd=ROOT
    )
    return proc.returncode, proc.stderr


def chunks(out):
    d = out / "checkpoints"
    return sorted(p for p in d.iterdir() if CHUNK.match(p.name)) if d.exists() else []


def kill_at(cfg, out, new_chunks):
    """Run with the pause hook (`paused_run`): the run stops right after saving
    `new_chunks` chunks and announces it; SIGKILL it there. A deterministic mid-run kill."""
    (out / "checkpoints" / "paused").unlink(missing_ok=True)
    proc = subprocess.Popen(
        paused_command(command(cfg, out)[3:], new_chunks),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env(),
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 300
        while not (out / "checkpoints" / "paused").exists():
            assert proc.poll() is None, (
                f"the run ended (rc {proc.returncode}) before the kill point: {proc.stderr.read()}"
            )
            assert time.monotonic() < deadline, "no kill point reached in 300 s"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stamps(paths):
    """(name, inode, mtime_ns) of each file: a rewritten checkpoint changes its stamp."""
    return [(p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in paths]


def check_resumed_equals_uninterrupted(tmp_path, kill_points):
    """Kill the run after each number of new chunks in `kill_points`, then let it finish; the
    resumed run must read every checkpoint left (not recompute it) and equal a run never killed."""
    cfg = config(tmp_path)
    ref, out = tmp_path / "reference", tmp_path / "killed"
    rc, err = run(cfg, ref)
    assert rc == 0, err
    total = len(chunks(ref))
    assert total == TRIALS // CHUNK_SIZE
    done = 0
    for new in kill_points:
        kill_at(cfg, out, new)
        done += new
        assert len(chunks(out)) == done  # killed exactly where asked: mid-run
        assert not (out / "result.json").exists()
    kept = stamps(chunks(out))
    proc = subprocess.run(
        command(cfg, out), capture_output=True, text=True, timeout=600, env=env(), cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert f"resumed {done} of {total} chunks" in proc.stderr  # the resume found the checkpoints
    after = {name: rest for name, *rest in stamps(chunks(out))}
    assert all(
        after[name] == [ino, mtime] for name, ino, mtime in kept
    )  # ... and used them, unrewritten
    a = json.loads((ref / "result.json").read_text())
    b = json.loads((out / "result.json").read_text())
    assert b["lower"] == a["lower"]
    assert b["upper"] == a["upper"]
    assert b["lower"]["trials"] == TRIALS  # every trial counted once
    # the checkpoints themselves hold exactly the reference run's trials, chunk by chunk
    assert [p.name for p in chunks(out)] == [p.name for p in chunks(ref)]
    for p, q in zip(chunks(out), chunks(ref)):
        with np.load(p) as x, np.load(q) as y:
            assert np.array_equal(x["scores"], y["scores"]) and np.array_equal(
                x["member"], y["member"]
            )


@pytest.mark.slow  # a real run killed and resumed (the corrupted-chunk tests stay by default)
def test_sigkill_mid_run_then_resume_gives_the_uninterrupted_result(tmp_path):
    check_resumed_equals_uninterrupted(tmp_path, kill_points=[17])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_several_random_sigkills_then_resume_slow(tmp_path, seed):
    rng = random.Random(seed)
    points = sorted(rng.sample(range(1, TRIALS // CHUNK_SIZE), 4))
    # kills after 'points' chunks in all: the new chunks of each run are the differences
    check_resumed_equals_uninterrupted(
        tmp_path, kill_points=[b - a for a, b in zip([0] + points, points)]
    )


# --- bad checkpoints -------------------------------------------------------------------------

SMALL = {"trials": 200_000, "chunk_size": 50_000}


def small_config(tmp_path, seed=7, name="small"):
    raw = {
        "name": name,
        "delta": 1e-5,
        "base": {"kind": "gaussian", "epsilon": 1.0},
        "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
        "game": {"kind": "reduced", "seed": seed, **SMALL},
    }
    path = tmp_path / f"{name}-{seed}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def run_in_process(cfg, out, capsys):
    from auditsel.cli import main

    capsys.readouterr()
    rc = main(["run", str(cfg), "--out", str(out), "--no-progress", "--quiet", "--no-plots"])
    return rc, capsys.readouterr().err


def assert_refused(rc, err, out, original_result):
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "checkpoint" in lines[0], err
    # nothing was mixed in: the result of the good run is untouched
    assert (out / "result.json").read_bytes() == original_result


@pytest.fixture(scope="module")
def _finished_once(tmp_path_factory):
    """The good run, in this process (what it checks is the refusal of its damaged chunks;
    the runs of a real process: the SIGKILL tests above)."""
    from auditsel.cli import main

    tmp = tmp_path_factory.mktemp("finished")
    cfg, out = small_config(tmp), tmp / "out"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["run", str(cfg), "--out", str(out), "--no-progress", "--quiet", "--no-plots"])
    assert rc == 0, err.getvalue()
    assert len(chunks(out)) == 4
    return cfg, out


@pytest.fixture
def finished_run(tmp_path, _finished_once):
    """A finished run's --out, copied per test (the damage stays local to the test)."""
    cfg, src = _finished_once
    out = tmp_path / "out"
    shutil.copytree(src, out)
    return cfg, out, (out / "result.json").read_bytes()


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param("truncate", marks=pytest.mark.slow),  # 5 CPU s; "flip" by default
        "flip",
        pytest.param("garbage", marks=pytest.mark.slow),
        pytest.param("empty", marks=pytest.mark.slow),
    ],
)
def test_corrupted_chunk_is_reported(finished_run, capsys, damage):
    cfg, out, result = finished_run
    victim = chunks(out)[2]
    data = victim.read_bytes()
    if damage == "truncate":
        victim.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        victim.write_bytes(os.urandom(len(data)))
    elif damage == "empty":
        victim.write_bytes(b"")
    else:  # one byte flipped inside the zip (crc check)
        i = len(data) // 2
        victim.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :])
    rc, err = run_in_process(cfg, out, capsys)
    assert_refused(rc, err, out, result)


@pytest.mark.slow  # reason: two runs (5 CPU s); a foreign checkpoint by default: tests/test_cli.py
def test_chunk_from_another_experiment_is_reported(tmp_path, finished_run, capsys):
    cfg, out, result = finished_run
    other_cfg, other = small_config(tmp_path, seed=8, name="other"), tmp_path / "other"
    rc, err = run_in_process(other_cfg, other, capsys)
    assert rc == 0, err
    shutil.copy(chunks(other)[1], chunks(out)[1])  # same file name, foreign content
    rc, err = run_in_process(cfg, out, capsys)
    assert_refused(rc, err, out, result)


@pytest.mark.slow
def test_chunk_moved_to_another_index_is_reported(finished_run, capsys):
    cfg, out, result = finished_run
    shutil.copy(chunks(out)[0], chunks(out)[3])  # same experiment, wrong position
    rc, err = run_in_process(cfg, out, capsys)
    assert_refused(rc, err, out, result)


def test_foreign_manifest_is_reported(tmp_path, finished_run, capsys):
    cfg, out, result = finished_run
    rc, err = run_in_process(
        small_config(tmp_path, seed=9), out, capsys
    )  # another seed, same --out
    assert_refused(rc, err, out, result)
