"""What a run pays whatever its number of games (issue 29): the bounds and the attack cached per
setting (identical values, a fresh copy each call), `--no-plots` (no figure, no matplotlib,
the same numbers), and the work done in background threads (the same numbers and figures)."""

from __future__ import annotations

import contextlib
import importlib.abc
import json
import subprocess
import sys
from concurrent.futures import Future

import pytest

from auditsel.cli import main
from auditsel.experiments import experiment
from auditsel.experiments.config import default_config_path, load_config
from auditsel.experiments.experiment import run_config
from auditsel.results import fields, plots
from auditsel.results.fields import upper_fields, upper_panel


def test_upper_panel_is_cached_per_setting_and_each_call_gets_its_own_copy():
    spec = load_config(default_config_path())
    fields._UPPER.clear()
    fresh = upper_panel(spec.base, spec.rounds, spec.delta)
    assert len(fields._UPPER) == 1
    cached = upper_panel(spec.base, spec.rounds, spec.delta)
    assert len(fields._UPPER) == 1  # served from the cache
    as_json = lambda value: json.dumps(upper_fields(spec.base, spec.rounds, *value))
    assert as_json(cached) == as_json(fresh)
    assert cached[0] is not fresh[0] and cached[1][0] is not fresh[1][0]
    cached[0].upper.clear()  # a caller changing its copy changes nobody else's
    assert as_json(upper_panel(spec.base, spec.rounds, spec.delta)) == as_json(fresh)
    other = upper_panel(spec.base, spec.rounds, 1e-6)  # another setting: computed, not reused
    assert len(fields._UPPER) == 2 and other[0].upper != fresh[0].upper


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


class _RefuseMatplotlib(importlib.abc.MetaPathFinder):
    """A finder, first on sys.meta_path, that records and refuses any import of matplotlib."""

    def __init__(self) -> None:
        self.tried: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "matplotlib":
            self.tried.append(name)
            raise ImportError(f"{name}: refused by the test (--no-plots imports no matplotlib)")
        return None


def test_no_plots_never_imports_matplotlib(tmp_path, monkeypatch):
    """In this process, with matplotlib's modules hidden from sys.modules and its import
    refused (recorded) while the run runs: every deferred import of matplotlib goes through
    the import system, so none is tried, and none is loaded after (the imports started in
    the background settled first)."""
    for name in [n for n in sys.modules if n.split(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, name)
    refuse = _RefuseMatplotlib()
    monkeypatch.setattr(sys, "meta_path", [refuse, *sys.meta_path])
    argv = ["run", "--trials", "2000", "--quiet", "--no-progress", "--no-plots"]
    rc = main([*argv, "--out", str(tmp_path / "o")])
    while plots._PREFETCH:  # an import started beside the run would show here
        with contextlib.suppress(ImportError):
            plots._PREFETCH.pop().result()
    assert rc == 0 and refuse.tried == []
    assert not [n for n in sys.modules if n.split(".")[0] == "matplotlib"]


def _run_folder(folder):
    result = json.loads((folder / "result.json").read_text())
    result.pop("seconds")  # wall time
    pngs = {p.name: p.read_bytes() for p in sorted(folder.glob("*.png"))}
    return result, pngs


def _at_once(fn):
    """`executor.in_background` computed in the caller, before it goes on."""
    future = Future()
    future.set_result(fn())
    return future


def test_work_beside_the_run_changes_nothing(tmp_path, monkeypatch):
    """The bounds, the estimator panel and matplotlib's import computed in background threads
    (`executor.in_background`) give the result.json and the figures, byte for byte, of the run
    with every part computed in turn in the caller; the panel's place in result.json is the
    one `run_config` gives it."""
    from auditsel.results import report

    argv = ["run", "--trials", "4000", "--quiet", "--no-progress"]
    fields._UPPER.clear()
    assert main([*argv, "--out", str(tmp_path / "beside")]) == 0
    fields._UPPER.clear()
    with monkeypatch.context() as m:
        m.setattr(experiment, "in_background", _at_once)
        m.setattr(plots, "in_background", _at_once)
        assert main([*argv, "--out", str(tmp_path / "here")]) == 0
    beside, here = _run_folder(tmp_path / "beside"), _run_folder(tmp_path / "here")
    assert beside[0] == here[0]
    assert set(beside[1]) == {"privacy_curve.png", "scores.png", "tradeoff.png"}
    assert beside[1] == here[1]
    assert (
        "estimators" in beside[0]["lower"] and "selection_fit" in beside[0]["lower"]["estimators"]
    )
    # the API's run: its result.json only (figures are not what is compared), its bounds
    # served from the cache (`upper` is not what is compared either)
    monkeypatch.setattr(report, "write_plots", lambda *args, **kwargs: [])
    run_config(default_config_path(), tmp_path / "api", trials=4000)
    api = _run_folder(tmp_path / "api")[0]
    assert list(api["lower"]) == list(beside[0]["lower"])  # the same keys in the same order
    assert api["lower"] == beside[0]["lower"]


def test_the_trade_off_curve_is_computed_beside_the_game_with_the_same_numbers(
    tmp_path, monkeypatch
):
    """With figure_data, the pair's exact trade-off curve that tradeoff.png draws comes back
    with the bounds, bit for bit `tradeoff_curve(winner)`, and the report never computes it
    (the report's copy of the function raises); the figures are the bytes of a run whose
    report computed it."""
    import numpy as np

    from auditsel.accounting.exact import tradeoff_curve
    from auditsel.results import report

    def not_here(winner):
        raise AssertionError("the trade-off curve was computed in the run's own process")

    real_run, kept = experiment.run_experiment, []

    def keeping(*args, **kwargs):  # the run's artefacts, as run_experiment returns them
        result, artefacts = real_run(*args, **kwargs)
        kept.append(dict(artefacts))
        return result, artefacts

    argv = ["run", "--trials", "2000", "--quiet", "--no-progress"]
    fields._UPPER.clear()
    with monkeypatch.context() as m:
        m.setattr(report, "tradeoff_curve", not_here)
        m.setattr(experiment, "run_experiment", keeping)
        assert main([*argv, "--out", str(tmp_path / "beside")]) == 0
    fp, fn = kept[0]["exact_tradeoff"]  # the CLI asks for figure_data
    want_fp, want_fn = tradeoff_curve(kept[0]["winner"])
    assert np.array_equal(fp, want_fp) and np.array_equal(fn, want_fn)
    # the other way: computed by the report (the bounds now served from the cache, which
    # holds no trade-off curve)
    with monkeypatch.context() as m:
        m.setattr(experiment, "tradeoff_curve", lambda winner: None)
        assert main([*argv, "--out", str(tmp_path / "here")]) == 0
    assert _run_folder(tmp_path / "beside") == _run_folder(tmp_path / "here")
    spec = load_config(default_config_path()).with_game(trials=2000)
    fields._UPPER.clear()  # the bounds computed beside the game again, without figure_data
    _, artefacts = experiment.run_experiment(spec, None, progress=False)
    assert "exact_tradeoff" not in artefacts  # not asked for: not computed


def test_git_fields_equal_the_plain_git_answer():
    from pathlib import Path

    from auditsel import version

    root = Path(version.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True)
    commit = git("rev-parse", "HEAD").stdout.strip()
    dirty = bool(git("status", "--porcelain", "--", "auditsel", "attacks").stdout.strip())
    version.source_commit.cache_clear()
    assert version.source_commit() == (commit, dirty)
