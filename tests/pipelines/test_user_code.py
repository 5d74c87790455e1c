"""User code is hostile by default (issue 26): the boundary around the user's functions, their
files imported by path, fingerprints by content, the replay check, and the same numbers in
every backend. The hostile inputs themselves (exit codes and messages) are cases of
tests/test_hostile.py; these tests check the properties behind them."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from auditsel import (
    ExecutionOptions,
    GradientCanary,
    InputCanary,
    ReportOptions,
    audit_pipeline,
)
from auditsel.cli import main
from auditsel.errors import ConfigError
from auditsel.pipelines.content_digest import content_digest
from auditsel.pipelines.game import PipelineError, PipelineGame
from auditsel.pipelines.load import load_pipeline
from auditsel.pipelines.pipeline import Pipeline
from auditsel.pipelines.replay_check import ReproducibilityError, check_replay, replay_games
from auditsel.pipelines.user_code import describe_changes, import_file, user_files

ROOT = Path(__file__).resolve().parents[2]
NO_PANEL = ReportOptions(panel=False)
CANARY = "{kind: input, x: [1.0, 1.0], y: 1}"
PIPE = """import numpy as np

DATA = (np.zeros((4, 2)), np.zeros(4))


def tune(data, seed, canary):
    return float(np.random.default_rng(seed).normal() + SHIFT * (len(data[0]) > 4))


def score(release, canary):
    return SIGN * release
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(textwrap.dedent(text))
    return folder / name


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# --- 2. files imported by path, under names of their own ---------------------------------------


def test_same_stem_in_two_folders_and_a_stdlib_name(tmp_path, monkeypatch):
    """`--score b/pipe.py:score` with tune from a/pipe.py runs b's score (it used to run a's),
    and a file named json.py is the user's, not the standard library's."""
    write(tmp_path / "a", "pipe.py", "SHIFT, SIGN = 2.0, 1.0\n" + PIPE)
    write(tmp_path / "b", "pipe.py", "SHIFT, SIGN = 2.0, -1.0\n" + PIPE)
    write(tmp_path / "a", "json.py", "MARK = 'the user'\ndef loads(text):\n    return text\n")
    monkeypatch.chdir(tmp_path)
    spec = load_pipeline(
        "a/pipe.py:tune", score="b/pipe.py:score", data="a/pipe.py:DATA", canary=CANARY
    )
    p = spec.pipeline
    assert p.score(1.5, None) == -1.5 and p.tune.__module__ != p.score.__module__
    mine = import_file(tmp_path / "a" / "json.py", "tune")
    assert mine.MARK == "the user" and json.loads("[1]") == [1]  # both work
    audit = p.audit(games=64, delta=1e-5, report=NO_PANEL)
    a_score = import_file(tmp_path / "a" / "pipe.py", "score").score
    ours = audit_pipeline(
        Pipeline(p.tune, a_score, data=p.data, canary=p.canary), games=64, delta=1e-5
    )
    assert np.array_equal(audit.scores, -ours.scores)  # b's score: minus a's


PLAY = """
import pickle, sys
game = pickle.loads(sys.stdin.buffer.read())  # imports pipe.py by path, under its unique name
print(game.play_one(0, 3)[1])
"""


def test_functions_of_a_file_reach_worker_processes(tmp_path, monkeypatch):
    """A fresh process imports the user's file under the same unique name when it unpickles
    a game (what a loky or dask worker does)."""
    write(tmp_path, "pipe.py", "SHIFT, SIGN = 2.0, 1.0\n" + PIPE)
    monkeypatch.chdir(tmp_path)
    module = import_file(tmp_path / "pipe.py", "tune")
    game = PipelineGame(module.tune, module.score, module.DATA, InputCanary(np.ones(2), 1))
    done = subprocess.run(
        [sys.executable, "-c", PLAY],
        input=pickle.dumps(game),
        capture_output=True,
        env=_env(),
        cwd="/",
        check=True,
    )
    assert float(done.stdout) == game.play_one(0, 3)[1]


# --- 1. the boundary --------------------------------------------------------------------------


def test_exits_and_argparse_of_the_user_are_exit_2_with_their_traceback(
    tmp_path, monkeypatch, capsys
):
    write(
        tmp_path,
        "user.py",
        """
        import argparse
        import sys

        import numpy as np

        DATA = np.zeros((4, 2)), np.zeros(4)


        def exits(data, seed, canary):
            sys.exit(0)


        def parses(data, seed, canary):
            parser = argparse.ArgumentParser()
            parser.add_argument("--lr", required=True)
            return float(parser.parse_args().lr)


        def score(release, canary):
            return release
        """,
    )
    monkeypatch.chdir(tmp_path)
    for tune, pattern in (("exits", r"SystemExit\(0\)"), ("parses", r"SystemExit\(2\)")):
        argv = ["audit-pipeline", f"user.py:{tune}", "--score", "user.py:score"]
        argv += ["--data", "user.py:DATA", "--canary", CANARY, "--out", "out", "--games", "40"]
        assert main(argv) == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith(f"auditsel: error: tune: user.py:{tune} raised ")
        import re

        assert re.search(pattern, last), last
        path = last.rsplit("your traceback: ", 1)[1]
        text = Path(path).read_text()
        assert f"in {tune}" in text and "user.py" in text and "SystemExit" in text
        assert not (tmp_path / "out").exists()
        os.unlink(path)


@pytest.mark.parametrize(
    # reason: loky's workers (7 CPU s); on threads by default (and a worker's exception through
    # the CLI: tests/pipelines/test_pipeline_cli.py)
    "backend",
    [pytest.param("loky", marks=pytest.mark.slow), "threading"],
)
def test_exceptions_in_workers_come_back_as_the_users(backend):
    def tune(data, seed, canary):
        if seed % 3 == 0:
            raise SystemExit(5)
        return float(seed % 7)

    with pytest.raises(PipelineError) as err:
        audit_pipeline(
            Pipeline(tune, lambda r, c: r, data=None, canary=GradientCanary(coordinate=0)),
            games=200,
            delta=1e-5,
            execution=ExecutionOptions(jobs=2, backend=backend, chunk_size=8),
        )
    assert err.value.field == "tune" and "raised SystemExit(5)" in err.value.message
    assert "SystemExit: 5" in err.value.user_traceback  # the traceback survived the worker
    again = pickle.loads(pickle.dumps(err.value))
    assert again.user_traceback == err.value.user_traceback and str(again) == str(err.value)


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (None, "None"),
        ("0.5", "a str"),
        (np.ones(3), r"an array of shape \(3,\)"),
        ([1.0], "a list"),
    ],
)
def test_a_score_that_is_not_one_real_number_is_named(value, what):
    with pytest.raises(PipelineError, match=f"score: .* returned {what} in game"):
        audit_pipeline(
            Pipeline(
                lambda d, s, c: 0.0,
                lambda r, c: value,
                data=None,
                canary=GradientCanary(coordinate=0),
            ),
            games=40,
            delta=1e-5,
        )


def test_real_scalars_of_every_kind_are_scores():
    import torch

    for value in (True, 3, 2.5, np.float32(1.5), np.array(2.0), np.array([2.0]), torch.tensor(1.5)):
        audit = audit_pipeline(
            Pipeline(
                lambda d, s, c: 0.0,
                lambda r, c, v=value: v,
                data=None,
                canary=GradientCanary(coordinate=0),
            ),
            games=40,
            delta=1e-5,
            report=NO_PANEL,
        )
        assert np.all(audit.scores == np.asarray(value, dtype=float).item())


# --- 2. fingerprints by content ----------------------------------------------------------------


DIGEST_SCRIPT = """
import numpy as np, torch
from torch.utils.data import TensorDataset
from auditsel.pipelines.content_digest import content_digest
g = torch.Generator().manual_seed(0)
ds = TensorDataset(torch.randn(50, 3, generator=g), torch.randint(0, 2, (50,), generator=g))
torch.manual_seed(3)  # the module's initial weights
print(content_digest([ds, {"a": np.arange(4.0), "b": (1, "x", None)}, torch.nn.Linear(2, 1)]))
"""


@pytest.mark.slow  # fresh interpreters (3 CPU s); the digests' content rules run by default in this file
def test_content_digests_are_stable_across_processes_and_see_every_change():
    """joblib.hash of a torch tensor differs from process to process; the content digest of a
    TensorDataset, nested containers and a torch module does not."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import TensorDataset

    run = lambda: subprocess.run(
        [sys.executable, "-c", DIGEST_SCRIPT],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    ).stdout.strip()
    first, second = run(), run()
    assert first == second and len(first) == 64
    x = torch.arange(6.0).reshape(3, 2)
    base = content_digest(TensorDataset(x, torch.zeros(3)))
    y = x.clone()
    y[2, 1] = 5.5
    assert content_digest(TensorDataset(y, torch.zeros(3))) != base
    assert content_digest(TensorDataset(x.double(), torch.zeros(3))) != base  # dtype
    assert content_digest(TensorDataset(x.reshape(3, 2, 1), torch.zeros(3))) != base  # shape
    assert content_digest(TensorDataset(x.clone(), torch.zeros(3))) == base  # content only
    a = np.arange(5.0)
    assert content_digest({"k": [a, 1.0]}) == content_digest({"k": [a.copy(), 1.0]})
    assert content_digest({"k": [a, 1.0]}) != content_digest({"k": [a, 1.0 + 2**-40]})
    assert content_digest({1, 2, 3}) == content_digest({3, 2, 1})


def test_an_unpicklable_object_is_named_with_its_path():
    import threading

    with pytest.raises(ConfigError, match=r"data: data\['x'\]\[1\] \(lock\) cannot be"):
        content_digest({"x": [1, threading.Lock()]})


def test_an_edited_helper_module_is_refused_on_resume_naming_the_file(tmp_path, monkeypatch):
    """A helper imported by tune is edited between two runs into one checkpoint folder: the
    second is refused, naming the file (it used to mix 96 old with 104 new games)."""
    write(tmp_path, "helper.py", "SHIFT = 2.0\n")
    lazy = (
        "\n\ndef later():\n    import lazy_helper  # imported inside a function: still its code\n"
    )
    write(
        tmp_path,
        "pipe.py",
        "import helper\nSIGN = 1.0\n" + PIPE.replace("SHIFT", "helper.SHIFT") + lazy,
    )
    write(tmp_path, "lazy_helper.py", "VALUE = 1\n")
    write(tmp_path, "unrelated.py", "print('a script beside it that nothing imports')\n")
    monkeypatch.chdir(tmp_path)
    module = import_file(tmp_path / "pipe.py", "tune")
    options_on = dict(data=module.DATA, canary=InputCanary(np.ones(2), 1))
    options = dict(
        games=64,
        delta=1e-5,
        execution=ExecutionOptions(checkpoint_dir=tmp_path / "ck"),
        report=NO_PANEL,
    )
    first = audit_pipeline(Pipeline(module.tune, module.score, **options_on), **options)
    again = audit_pipeline(Pipeline(module.tune, module.score, **options_on), **options)
    assert again.resumed_games == 64 and np.array_equal(first.scores, again.scores)
    files = user_files(module.tune, module.score)
    assert sorted(Path(p).name for p in files) == ["helper.py", "lazy_helper.py", "pipe.py"]
    (tmp_path / "unrelated.py").write_text("print('edited, and another one added')\n")
    write(tmp_path, "another.py", "X = 1\n")
    assert (
        audit_pipeline(Pipeline(module.tune, module.score, **options_on), **options).resumed_games
        == 64
    )
    (tmp_path / "helper.py").write_text("SHIFT = 0.0\n")
    with pytest.raises(ConfigError, match=r"helper\.py changed.*nothing was reused"):
        audit_pipeline(Pipeline(module.tune, module.score, **options_on), **options)
    assert (
        describe_changes({"a.py": "1"}, {"a.py": "2", "b.py": "3"}) == "a.py changed; b.py is new"
    )


# --- 3. reproducibility, checked ---------------------------------------------------------------


def _game(tune, data=None):
    return PipelineGame(tune, lambda r, c: r, data, GradientCanary(coordinate=0))


def test_the_replay_refuses_each_hazard_and_passes_a_reproducible_tune():
    shared = {"calls": 0}

    def counter(data, seed, canary):  # state left by earlier games: not a function of its seed
        shared["calls"] += 1
        return float(shared["calls"])

    def mutates(data, seed, canary):
        data[0] += 1
        return 0.0

    def global_numpy(data, seed, canary):
        return float(np.random.normal())  # noqa: NPY002

    def seeded(data, seed, canary):
        return float(np.random.default_rng(seed).normal())

    with pytest.raises(ReproducibilityError, match="unseeded randomness"):
        check_replay(_game(counter), 0)
    with pytest.raises(ReproducibilityError, match="in-place mutation: data changed"):
        check_replay(_game(mutates, np.zeros(3)), 0)
    with pytest.raises(ReproducibilityError, match="global generators under threads"):
        check_replay(_game(global_numpy), 0, jobs=2, backend="threading")
    assert check_replay(_game(global_numpy), 0, jobs=2, backend="loky").global_generators
    accepted = check_replay(_game(counter), 0, accept=True)
    assert accepted.accepted and accepted.hazards[0].startswith("unseeded randomness")
    clean = check_replay(_game(seeded), 0)
    assert clean.hazards == () and not clean.global_generators and not clean.accepted
    coins = {
        int(np.random.default_rng(np.random.SeedSequence(0, spawn_key=(g,))).integers(0, 2))
        for g in replay_games(0)
    }
    assert coins == {0, 1}  # the replay plays one game of each coin


def test_accepted_nondeterminism_is_recorded_in_result_json(tmp_path):
    def global_numpy(data, seed, canary):
        return float(np.random.normal())  # noqa: NPY002

    audit = audit_pipeline(
        Pipeline(global_numpy, lambda r, c: r, data=None, canary=GradientCanary(coordinate=0)),
        games=64,
        delta=1e-5,
        execution=ExecutionOptions(jobs=2, backend="threading", accept_nondeterminism=True),
        report=ReportOptions(out_dir=tmp_path / "out", panel=False),
    )
    record = json.loads((tmp_path / "out" / "result.json").read_text())["pipeline"]
    assert record["reproducibility"]["accepted_nondeterminism"] is True
    assert record["reproducibility"]["hazards"][0].startswith("global generators under threads")
    assert audit.result["pipeline"]["reproducibility"]["plays"] == 6  # 4 here, 2 on the threads


LAZY = """
import sys
import numpy as np
from auditsel import GradientCanary, Pipeline, ReportOptions, audit_pipeline

def tune(data, seed, canary):
    import torch  # a lazy import: game 0 used to draw from an unseeded torch
    return float(torch.rand(1)) + 2.0 * canary.in_game

if sys.argv[1] == "early":
    import torch
pipeline = Pipeline(tune, lambda r, c: r, data=None, canary=GradientCanary(coordinate=0))
audit = audit_pipeline(pipeline, games=8, delta=1e-5, report=ReportOptions(panel=False))
print(list(audit.scores))
"""


@pytest.mark.slow  # two fresh interpreters importing torch (5 CPU s)
def test_a_lazy_torch_import_draws_from_the_games_seed():
    pytest.importorskip("torch")
    run = lambda when: (
        subprocess.run(
            [sys.executable, "-c", LAZY, when],
            capture_output=True,
            text=True,
            env=_env(),
            check=True,
        ).stdout
    )
    assert run("lazy") == run("early")


# --- 6. one contract-abiding pipeline, every backend --------------------------------------------


def _abiding(data, seed, canary):
    rng = np.random.default_rng(seed)
    x = np.asarray(canary.prepare(data)[0])
    return float(rng.normal() + x.sum() + 1.5 * canary.in_game)


@pytest.mark.parametrize(
    "jobs, backend",
    [
        # reason: worker processes importing the user's modules (13 to 20 CPU s each, issue 39's
        # measurement); on two threads and in one process by default
        pytest.param(2, None, marks=pytest.mark.slow),
        pytest.param(2, "loky", marks=pytest.mark.slow),
        (2, "threading"),
        (1, "threading"),
        pytest.param(2, "dask", marks=pytest.mark.slow),  # starts a dask cluster (3 CPU s)
    ],
)
def test_one_pipeline_gives_the_same_numbers_in_every_backend(jobs, backend):
    if backend == "dask":
        pytest.importorskip("distributed")
    options_on = dict(
        data=(np.arange(8.0).reshape(4, 2), np.zeros(4)), canary=InputCanary(np.ones(2), 1)
    )
    options = dict(games=96, delta=1e-5, report=NO_PANEL)
    run = lambda **ex: audit_pipeline(
        Pipeline(_abiding, lambda r, c: r, **options_on),
        execution=ExecutionOptions(chunk_size=16, **ex),
        **options,
    )
    serial, other = run(jobs=1), run(jobs=jobs, backend=backend)
    assert np.array_equal(serial.scores, other.scores)
    assert np.array_equal(serial.member, other.member) and serial.eps == other.eps
    assert other.result["pipeline"]["reproducibility"]["hazards"] == []


# --- 4. stdout that fails ----------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize(
    "argv,buffered",
    [
        # reason: a fresh interpreter each (1.2 CPU s); by default each path (the top level's
        # --version, a command's --help) once and each stdout (block-buffered: the error at the
        # final flush; unbuffered: at the write) once; a command's --help prints by the same
        # path as the top level's
        pytest.param(["--help"], "", marks=pytest.mark.slow),
        pytest.param(["--help"], "1", marks=pytest.mark.slow),
        (["--version"], ""),
        pytest.param(["--version"], "1", marks=pytest.mark.slow),
        pytest.param(["audit-pipeline", "--help"], "", marks=pytest.mark.slow),
        (["audit-pipeline", "--help"], "1"),
    ],
)
def test_a_full_stdout_is_exit_74_for_help_too(argv, buffered):
    env = {**_env(), "PYTHONUNBUFFERED": buffered}
    if not buffered:
        env.pop("PYTHONUNBUFFERED")
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "auditsel", *argv],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    assert done.returncode == 74, done.stderr
    assert done.stderr.strip() == (
        "auditsel: error: cannot write to standard output (No space left on device)"
    )


def test_a_full_disk_while_writing_plots_names_the_file(tmp_path, monkeypatch, figures):
    import errno

    from auditsel import files

    def full(path, data):  # the disk fills while a plot's bytes are written (atomically)
        with files.temporary_beside(path) as (handle, _):
            handle.write(data[:10])
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("auditsel.results.figures.atomic_write_bytes", full)
    with pytest.raises(OSError) as err:
        audit_pipeline(
            Pipeline(
                lambda d, s, c: float(s % 5),
                lambda r, c: r,
                data=None,
                canary=GradientCanary(coordinate=0),
            ),
            games=40,
            delta=1e-5,
            report=ReportOptions(panel=False, out_dir=tmp_path / "out"),
        )
    assert err.value.errno == errno.ENOSPC
    assert err.value.filename.startswith(str(tmp_path / "out")) and err.value.filename.endswith(
        ".png"
    )


# --- the tutorial's Opacus pipeline (TensorDataset data) resumes; an edited module is refused ---


@pytest.mark.slow
def test_the_tutorials_opacus_pipeline_resumes_and_refuses_an_edited_module(tmp_path):
    pytest.importorskip("opacus")
    sys.path.insert(0, str(ROOT / "tests"))
    from test_docs_pipeline import tutorial_module

    (tmp_path / "helpers.py").write_text("PADDING = 30\n")
    (tmp_path / "tuning.py").write_text("import helpers\n" + tutorial_module())
    argv = [sys.executable, "-m", "auditsel", "audit-pipeline", "tuning.py:tune"]
    argv += ["--score", "tuning.py:score", "--data", "tuning.py:train_data"]
    argv += ["--canary", "{kind: gradient, coordinate: 30}", "--games", "8", "--out", "out"]
    argv += ["--checkpoint-after", "0"]  # 8 games end before the default 5 s: checkpoint anyway
    run = lambda: subprocess.run(argv, cwd=tmp_path, env=_env(), capture_output=True, text=True)
    first = run()
    assert first.returncode == 0, first.stderr
    again = run()
    assert again.returncode == 0 and "resumed 8 of 8 games" in again.stderr, again.stderr
    (tmp_path / "helpers.py").write_text("PADDING = 29\n")
    edited = run()
    assert edited.returncode == 2
    assert f"{tmp_path / 'helpers.py'} changed" in edited.stderr and "nothing was reused" in (
        edited.stderr
    )
