"""The two routes to result.json, followed call by call (issue 39): `auditsel run` on its embedded
default and `audit_pipeline` on a small pipeline with its bounds, traced with `sys.setprofile`.

A call runs *up* when the callee's module sits in a higher layer than the caller's
(docs/explanation/architecture.md's table, read by tests/test_layers.py). The only upward calls
allowed are the callbacks the layers are built around: a function handed down as an argument
and called there (the game engine calls the game's `play` and the adversary's score; a root
finder of `numerics` calls the function it solves; the executor calls the tasks it is given). A new upward call fails the test with the
caller and the callee named; the counts are printed (`pytest -s`) for the closing notes."""

from __future__ import annotations

import collections
import fnmatch
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

import auditsel
from auditsel.cli import main
from auditsel.pipelines.pipeline import Pipeline
from tests.test_layers import layer_table

TABLE = layer_table()

#: (caller module, caller function, callee module): the callbacks the route may make upward.
CALLBACKS = {
    ("auditsel.games.engine", "play_chunk", "attacks.proxies"),  # the adversary's score
    ("auditsel.games.engine", "play_chunk", "auditsel.pipelines.game"),  # the game's play
    ("auditsel.numerics", "<lambda>", "auditsel.accounting.profile"),  # a root finder's f
    ("auditsel.executor", "run_tasks", "auditsel.games.engine"),  # the executor runs a task
}


def layer(module: str) -> int | None:
    hits = [level for level, pattern in TABLE if fnmatch.fnmatchcase(module, pattern)]
    return max(hits) if hits else None


def ours(module: str) -> bool:
    return module.split(".")[0] in ("auditsel", "attacks")


@contextmanager
def traced() -> Iterator[list[tuple[str, str, str, str]]]:
    """Every call from a package module into a package module: (caller module, caller
    function, callee module, callee function)."""
    calls: list[tuple[str, str, str, str]] = []

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = (
            frame.f_globals.get("__name__", ""),
            frame.f_back.f_globals.get("__name__", ""),
        )
        if ours(callee) and ours(caller):
            calls.append((caller, frame.f_back.f_code.co_name, callee, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(None)


def upward(calls: list[tuple[str, str, str, str]]) -> collections.Counter:
    out: collections.Counter = collections.Counter()
    for caller, function, callee, name in calls:
        low, high = layer(caller), layer(callee)
        if low is not None and high is not None and low < high and not name.startswith("<"):
            out[(caller, function, callee)] += 1
    return out


def summary(route: str, calls: list[tuple[str, str, str, str]]) -> None:
    modules = {c for _, _, c, _ in calls}
    print(f"{route}: {len(calls)} calls, {len(modules)} modules, upward: {dict(upward(calls))}")


def check(route: str, run: Callable[[], None]) -> None:
    with traced() as calls:
        run()
    summary(route, calls)
    extra = set(upward(calls)) - CALLBACKS
    assert not extra, f"{route}: calls that run up a layer and are no callback: {sorted(extra)}"


def test_auditsel_run_reaches_result_json_without_running_up(tmp_path):
    out = tmp_path / "run"
    check(
        "auditsel run",
        lambda: main(["run", "--out", str(out), "--trials", "2000", "--quiet", "--no-plots"]),
    )
    assert (out / "result.json").exists()


def tune(data, seed, canary):
    grads = [np.zeros(2)]
    canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
    return grads[0] + np.random.default_rng(seed).normal(size=2)


def score(release, canary):
    return float(release[0])


def test_audit_pipeline_reaches_result_json_without_running_up(tmp_path, monkeypatch, no_figures):
    report = auditsel.ReportOptions(
        out_dir=tmp_path / "audit", base=auditsel.GaussianBase(1.0), rounds=auditsel.Poisson(3.0)
    )
    canary = auditsel.GradientCanary(coordinate=0)
    check(
        "audit_pipeline",
        lambda: auditsel.audit_pipeline(
            Pipeline(tune, score, data=None, canary=canary), games=200, delta=1e-5, report=report
        ),
    )
    assert (tmp_path / "audit" / "result.json").exists()
