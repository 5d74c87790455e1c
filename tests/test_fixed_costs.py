"""What a run pays whatever its number of games (issue 29): the bounds and the attack cached per
setting (identical values, a fresh copy each call), `--no-plots` (no figure, no matplotlib,
the same numbers), and the work done beside the run (the same numbers and figures)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from auditsel.cli import main
from auditsel.experiments import experiment
from auditsel.experiments.config import default_config_path, load_config
from auditsel.experiments.experiment import run_config, upper_fields, upper_panel
from auditsel.games import worker_pool


def test_upper_panel_is_cached_per_setting_and_each_call_gets_its_own_copy():
    spec = load_config(default_config_path())
    experiment._UPPER.clear()
    fresh = upper_panel(spec.base, spec.rounds, spec.delta)
    assert len(experiment._UPPER) == 1
    cached = upper_panel(spec.base, spec.rounds, spec.delta)
    assert len(experiment._UPPER) == 1  # served from the cache
    as_json = lambda value: json.dumps(upper_fields(spec.base, spec.rounds, *value))
    assert as_json(cached) == as_json(fresh)
    assert cached[0] is not fresh[0] and cached[1][0] is not fresh[1][0]
    cached[0].upper.clear()  # a caller changing its copy changes nobody else's
    assert as_json(upper_panel(spec.base, spec.rounds, spec.delta)) == as_json(fresh)
    other = upper_panel(spec.base, spec.rounds, 1e-6)  # another setting: computed, not reused
    assert len(experiment._UPPER) == 2 and other[0].upper != fresh[0].upper


def test_no_plots_writes_the_same_numbers_without_figures(tmp_path, capsys):
    argv = ["run", "--trials", "4000", "--quiet", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    assert main([*argv, "--out", str(tmp_path / "b"), "--no-plots"]) == 0
    with_plots = sorted(p.name for p in (tmp_path / "a").glob("*.png"))
    assert with_plots and not list((tmp_path / "b").glob("*.png"))
    assert "![" not in (tmp_path / "b" / "report.md").read_text()
    a, b = (json.loads((tmp_path / d / "result.json").read_text()) for d in "ab")
    for key in ("upper", "lower", "interval", "attack"):
        assert a[key] == b[key], key


def test_no_plots_never_imports_matplotlib(tmp_path):
    code = (
        "import sys; from auditsel.cli import main; "
        f"rc = main(['run', '--trials', '2000', '--quiet', '--no-progress', '--no-plots', "
        f"'--out', {str(tmp_path / 'o')!r}]); "
        "print(rc, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "False"], out.stderr


def _run_folder(folder):
    result = json.loads((folder / "result.json").read_text())
    result.pop("seconds")  # wall time
    pngs = {p.name: p.read_bytes() for p in sorted(folder.glob("*.png"))}
    return result, pngs


def test_work_beside_the_run_changes_nothing(tmp_path, monkeypatch):
    """The bounds, the estimator panel and the figures computed beside the run (forked
    processes: `worker_pool.Beside`, and the `Prepared` one that imports matplotlib from the
    start and draws the figures) give the result.json and the figures, byte for byte, of the
    run with every part computed in this process; the panel's place in result.json is the one
    `run_config` gives it."""
    argv = ["run", "--trials", "4000", "--quiet", "--no-progress"]
    experiment._UPPER.clear()
    forked, prepared = [], []
    init, prepare = worker_pool.Beside.__init__, worker_pool.Prepared.__init__

    def counted(self, fn, **kw):
        init(self, fn, **kw)
        forked.append(self.forked)

    def counted_prepared(self, fn):
        prepare(self, fn)
        prepared.append(self.forked)

    alone = threading.active_count() == 1  # other tests may leave threads: then no fork
    with monkeypatch.context() as m:
        m.setattr(worker_pool.Beside, "__init__", counted)
        m.setattr(worker_pool.Prepared, "__init__", counted_prepared)
        m.setattr(worker_pool, "spare_core", lambda: True)  # forked whatever the load
        assert main([*argv, "--out", str(tmp_path / "beside")]) == 0
    if worker_pool.fork_available() and alone:  # bounds, panel: forked; the figures drawn by
        assert forked == [True, True]  # the process forked at the start, matplotlib imported
        assert prepared == [True]  # there (it forks the game's figures from itself)
    experiment._UPPER.clear()
    with monkeypatch.context() as m:
        m.setattr(worker_pool, "fork_available", lambda: False)
        assert main([*argv, "--out", str(tmp_path / "here")]) == 0
    beside, here = _run_folder(tmp_path / "beside"), _run_folder(tmp_path / "here")
    assert beside[0] == here[0]
    assert set(beside[1]) == {"privacy_curve.png", "scores.png", "tradeoff.png"}
    assert beside[1] == here[1]
    assert (
        "estimators" in beside[0]["lower"] and "selection_fit" in beside[0]["lower"]["estimators"]
    )
    experiment._UPPER.clear()
    run_config(default_config_path(), tmp_path / "api", trials=4000)
    api = _run_folder(tmp_path / "api")[0]
    assert list(api["lower"]) == list(beside[0]["lower"])  # the same keys in the same order
    assert api["lower"] == beside[0]["lower"]


def test_the_run_process_never_imports_the_attacks_modules(tmp_path):
    """With the bounds computed beside the game (a forked process), the run's own process
    reads their Panel back without importing the attack's modules (its score search and
    scipy.fft: 0.06 s on the path to the figures)."""
    if not worker_pool.fork_available():
        pytest.skip("no fork here: the bounds are computed in the run's process")
    code = (
        "import sys\nimport auditsel.games.worker_pool as wp\nwp.spare_core = lambda: True\n"
        "from auditsel.cli import main\n"
        f"rc = main(['run', '--trials', '2000', '--out', {str(tmp_path / 'o')!r}, '--quiet',"
        " '--no-progress', '--no-plots'])\n"
        "print(rc, sorted(m for m in ('auditsel.accounting.attack', "
        "'auditsel.accounting.score_search', 'scipy.fft') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[-2] == "0 []", out.stdout + out.stderr


def test_the_trade_off_curve_is_computed_beside_the_game_with_the_same_numbers(
    tmp_path, monkeypatch
):
    """With figure_data, the pair's exact trade-off curve that tradeoff.png draws comes back
    from the bounds' process, bit for bit `tradeoff_curve(winner)`, and the run's own process
    never computes it (the report's copy of the function raises); the figures are the bytes of
    a run that computed it in the run's own process."""
    import numpy as np

    from auditsel.accounting.exact import tradeoff_curve
    from auditsel.experiments import report

    spec = load_config(default_config_path()).with_game(trials=2000)
    experiment._UPPER.clear()
    with monkeypatch.context() as m:
        m.setattr(worker_pool, "spare_core", lambda: True)  # forked whatever the load
        _, artefacts = experiment.run_experiment(spec, None, progress=False, figure_data=True)
    fp, fn = artefacts["exact_tradeoff"]
    want_fp, want_fn = tradeoff_curve(artefacts["winner"])
    assert np.array_equal(fp, want_fp) and np.array_equal(fn, want_fn)
    experiment._UPPER.clear()
    _, artefacts = experiment.run_experiment(spec, None, progress=False)
    assert "exact_tradeoff" not in artefacts  # not asked for: not computed

    def not_here(winner):
        raise AssertionError("the trade-off curve was computed in the run's own process")

    argv = ["run", "--trials", "2000", "--quiet", "--no-progress"]
    experiment._UPPER.clear()
    with monkeypatch.context() as m:
        m.setattr(report, "tradeoff_curve", not_here)
        assert main([*argv, "--out", str(tmp_path / "beside")]) == 0
    experiment._UPPER.clear()
    with monkeypatch.context() as m:  # the old way: computed by the report, in this process
        m.setattr(experiment, "tradeoff_curve", lambda winner: None)
        assert main([*argv, "--out", str(tmp_path / "here")]) == 0
    assert _run_folder(tmp_path / "beside") == _run_folder(tmp_path / "here")


def test_git_fields_asked_ahead_equal_the_plain_git_answer(tmp_path):
    from auditsel import version

    root = version._root()
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True)
    commit = git("rev-parse", "HEAD").stdout.strip()
    dirty = bool(git("status", "--porcelain", "--", "auditsel", "attacks").stdout.strip())
    version.source_commit.cache_clear()
    version.start_source_commit()
    assert len(version._STARTED) == 1
    assert version.source_commit() == (commit, dirty)
    assert version._STARTED == {}
    version.start_source_commit()  # known already: nothing started
    assert version._STARTED == {}
    version.source_commit.cache_clear()  # not started ahead: the same answer
    assert version.source_commit() == (commit, dirty)


def test_the_cli_sets_openblas_idle_threads_to_sleep_unless_told_otherwise():
    probe = (
        "import os, sys; from auditsel.cli import main; main(['--version']); "
        "import numpy; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), file=sys.stderr)"
    )
    run = lambda env: subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    ).stderr.strip()
    base = {k: v for k, v in __import__("os").environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    assert run(base) == "4"
    assert run({**base, "OPENBLAS_THREAD_TIMEOUT": "20"}) == "20"  # the user's choice stays
    # once numpy is loaded the variable would be read too late: left alone
    late = probe.replace("import os, sys;", "import os, sys, numpy;")
    late_run = subprocess.run(
        [sys.executable, "-c", late], capture_output=True, text=True, env=base, check=True
    )
    assert late_run.stderr.strip() == "None"
