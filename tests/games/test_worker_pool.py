"""Pipeline workers: BLAS, OpenMP and torch threads limited to each process's share while the
games play (in this process, in forked warm workers, in loky's), and given back afterwards;
the same numbers from warm workers as from every other backend (issue 26 item 5, issue 29)."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from auditsel import AuditOptions, ExecutionOptions, GradientCanary, ReportOptions, audit_pipeline
from auditsel.errors import ConfigError
from auditsel.games import worker_pool
from auditsel.games.worker_pool import fork_available, game_threads, limited_threads

DIRAC = GradientCanary(coordinate=0)


def blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info()}


def thread_census(data, seed, canary):
    """A pipeline whose release is the thread counts it runs under."""
    import torch

    rng = np.random.default_rng(seed)
    grads = [np.zeros(2)]
    canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
    return {
        "blas": blas_threads(),
        "torch": torch.get_num_threads(),
        "theta": grads[0] + rng.normal(size=2),
    }


def census_score(release, canary):
    """The one thread count every pool agreed on, else -1 (and the canary's score is unused)."""
    counts = release["blas"] | {release["torch"]}
    return float(counts.pop()) if len(counts) == 1 else -1.0


def test_game_threads_is_the_share_of_the_cores(monkeypatch):
    monkeypatch.delenv("AUDITSEL_GAME_THREADS", raising=False)
    monkeypatch.setattr(worker_pool, "usable_cores", lambda: 16)
    assert [game_threads(j) for j in (1, 2, 3, 16, 32, -1)] == [1, 8, 5, 1, 1, 1]
    monkeypatch.setenv("AUDITSEL_GAME_THREADS", "3")
    assert game_threads(1) == game_threads(8) == 3
    monkeypatch.setenv("AUDITSEL_GAME_THREADS", "zero")
    with pytest.raises(ConfigError, match="AUDITSEL_GAME_THREADS: must be a positive integer"):
        game_threads(1)


def test_limit_applies_to_every_pool_and_is_given_back():
    import torch

    before_blas, before_torch = blas_threads(), torch.get_num_threads()
    env_before = {k: os.environ.get(k) for k in worker_pool.THREAD_VARIABLES}
    with limited_threads(1) as n:
        assert n == 1 and blas_threads() == {1} and torch.get_num_threads() == 1
        assert all(os.environ.get(k) is not None for k in worker_pool.THREAD_VARIABLES)
        seen = []

        def nested():
            with limited_threads(3) as m:
                seen.append((m, blas_threads()))

        inner = threading.Thread(target=nested)
        inner.start()
        inner.join()
        assert seen == [(1, {1})]  # a nested use shares the first limit ...
        assert blas_threads() == {1}  # ... and its end does not lift it
    assert blas_threads() == before_blas and torch.get_num_threads() == before_torch
    assert {k: os.environ.get(k) for k in worker_pool.THREAD_VARIABLES} == env_before


@pytest.mark.parametrize("jobs, backend", [(1, None), (2, None), (2, "loky"), (2, "threading")])
def test_games_run_within_their_share_of_threads(jobs, backend, monkeypatch):
    if backend is None and jobs > 1 and not fork_available():
        pytest.skip("no fork here: the default workers are loky's")
    monkeypatch.delenv("AUDITSEL_GAME_THREADS", raising=False)
    audit = audit_pipeline(
        thread_census,
        census_score,
        data=None,
        canary=DIRAC,
        games=96,
        delta=0.0,
        execution=ExecutionOptions(jobs=jobs, backend=backend, chunk_size=16),
        report=ReportOptions(panel=False),
    )
    assert set(np.asarray(audit.scores).tolist()) == {float(game_threads(jobs))}


@pytest.mark.slow  # worker processes of three backends (2 CPU s); the same numbers in every backend: tests/pipelines/test_user_code.py and test_pipeline.py by default
def test_warm_workers_give_the_numbers_of_every_other_backend():
    from pipelines.test_pipeline import dpsgd_no_data, standardised

    kw = dict(data=None, canary=DIRAC, games=200, delta=1e-5, statistics=AuditOptions(seed=5))
    run = lambda **ex: audit_pipeline(
        dpsgd_no_data, standardised, execution=ExecutionOptions(chunk_size=16, **ex), **kw
    )
    audits = [
        run(jobs=1),
        run(jobs=2),  # forked, warm
        run(jobs=2, backend="loky"),
        run(jobs=2, backend="threading"),
    ]
    for other in audits[1:]:
        assert np.array_equal(audits[0].scores, other.scores)
        assert np.array_equal(audits[0].member, other.member) and audits[0].eps == other.eps


def test_two_audits_in_two_threads_each_fork_their_own_game():
    from concurrent.futures import ThreadPoolExecutor

    from pipelines.test_pipeline import dpsgd_best_of_three, dpsgd_no_data, standardised

    if not fork_available():
        pytest.skip("no fork here")
    kw = dict(data=None, canary=DIRAC, games=160, delta=1e-5, statistics=AuditOptions(seed=9))
    ex = lambda jobs: ExecutionOptions(jobs=jobs, chunk_size=16)
    tunes = (dpsgd_no_data, dpsgd_best_of_three)
    alone = [audit_pipeline(t, standardised, execution=ex(1), **kw) for t in tunes]
    with ThreadPoolExecutor(2) as pool:
        together = list(
            pool.map(lambda t: audit_pipeline(t, standardised, execution=ex(2), **kw), tunes)
        )
    for a, b in zip(alone, together):
        assert np.array_equal(a.scores, b.scores) and np.array_equal(a.member, b.member)
    assert not np.array_equal(alone[0].scores, alone[1].scores)


# Beside: work computed beside the caller (issue 29: the bounds and the estimator panel of
# `auditsel run` in a forked process, with their own core and GIL)


def _child_pid_and_square(x: int):
    return os.getpid(), x * x


@pytest.fixture
def spare(monkeypatch):
    """A free core, whatever the machine's load (the load decides only where work runs)."""
    monkeypatch.setattr(worker_pool, "spare_core", lambda: True)


def test_usable_cores_are_the_affinity_not_the_machine(monkeypatch):
    # a `taskset -c 2,3` on a 16-core machine, or a container's cpuset: two cores to use
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {2, 3}, raising=False)
    assert worker_pool.usable_cores() == 2
    monkeypatch.setattr(worker_pool, "_runnable_others", lambda: float("inf"))
    monkeypatch.setattr(os, "getloadavg", lambda: (8.0, 0.0, 0.0))
    assert not worker_pool.spare_core()  # a load of 8 on its two cores: none to spare
    assert game_threads(2) == 1
    monkeypatch.delattr(os, "sched_getaffinity")  # macOS: the machine's cores
    assert worker_pool.usable_cores() == 16


def test_spare_core_reads_the_load_average(monkeypatch):
    monkeypatch.setattr(worker_pool, "usable_cores", lambda: 2)
    monkeypatch.setattr(worker_pool, "_runnable_others", lambda: float("inf"))
    monkeypatch.setattr(os, "getloadavg", lambda: (1.4, 0.0, 0.0))
    assert worker_pool.spare_core()
    monkeypatch.setattr(os, "getloadavg", lambda: (1.6, 0.0, 0.0))
    assert not worker_pool.spare_core()
    # the average remembers a run that just ended; nothing else runnable now: a free core
    monkeypatch.setattr(worker_pool, "_runnable_others", lambda: 0)
    assert worker_pool.spare_core()
    monkeypatch.setattr(worker_pool, "_runnable_others", lambda: 3)
    assert not worker_pool.spare_core()
    monkeypatch.setattr(worker_pool, "spare_core", lambda: False)
    assert not worker_pool.Beside(lambda: 1).forked  # loaded: a thread, not a fork


def test_beside_returns_the_value_computed_in_a_forked_process(spare):
    parent = os.getpid()
    job = worker_pool.Beside(lambda: _child_pid_and_square(7))
    assert job.forked == (fork_available() and threading.active_count() == 1)
    pid, value = job.result()
    assert value == 49 and job.result() == (pid, 49)  # asked twice: the same value
    assert (pid != parent) == job.forked  # forked: computed in another process
    assert job.seconds >= 0.0


def test_beside_raises_the_error_of_the_call_with_its_field(spare):
    def bad():
        raise ConfigError("game.trials", "must be at least 2")

    job = worker_pool.Beside(bad)
    with pytest.raises(ConfigError) as err:
        job.result()
    assert err.value.field == "game.trials" and err.value.message == "must be at least 2"


def test_beside_computes_here_a_value_that_does_not_pickle(spare):
    calls = []

    def unpicklable():
        calls.append(os.getpid())
        return lambda: 3  # a lambda does not pickle: the parent calls fn itself

    job = worker_pool.Beside(unpicklable)
    assert job.result()() == 3
    assert calls[-1] == os.getpid()  # the value in hand was computed in this process


def test_beside_without_threads_runs_in_the_caller_when_it_cannot_fork():
    release = threading.Event()
    other = threading.Thread(target=release.wait)  # a running thread: no fork
    other.start()
    try:
        job = worker_pool.Beside(lambda: threading.get_ident(), thread=False)
        assert not job.forked
        assert job.result() == threading.get_ident()  # computed at result(), in this thread
        threaded = worker_pool.Beside(lambda: threading.get_ident())
        assert threaded.result() != threading.get_ident()  # the default: another thread
    finally:
        release.set()
        other.join()


def test_beside_cancel_stops_and_reaps_the_child(spare):
    job = worker_pool.Beside(lambda: __import__("time").sleep(60))
    if not job.forked:
        pytest.skip("no fork here")
    job.cancel()
    with pytest.raises(ChildProcessError):
        os.waitpid(job._pid, os.WNOHANG)  # already reaped: no such child any more


_PREPARED = []  # what prepare() did in the process that ran it


def _prepare():
    _PREPARED.append(os.getpid())


def _where_prepared(x):
    return os.getpid(), list(_PREPARED), x * x


def _fails(field):
    raise ConfigError(field, "must be at least 2")


def _dies_unless_in(parent):
    if os.getpid() != parent:
        os._exit(3)  # the prepared process dies: the call is made again in the caller
    return "here"


def test_prepared_runs_its_preparation_ahead_and_the_call_there(spare):
    parent = os.getpid()
    with worker_pool.Prepared(_prepare) as job:
        assert job.forked == (fork_available() and threading.active_count() == 1)
        pid, prepared, value = job.call(_where_prepared, 7)
    assert value == 49
    if job.forked:  # computed in the process that ran the preparation, not in this one
        assert pid != parent and prepared == [pid] and _PREPARED == []
        with pytest.raises(ChildProcessError):
            os.waitpid(job._pid, os.WNOHANG)  # reaped
    else:
        assert pid == parent
    assert worker_pool.Prepared(_prepare).call(_where_prepared, 3)[2] == 9


def test_prepared_raises_the_error_of_the_call_with_its_field(spare):
    with pytest.raises(ConfigError) as err:
        worker_pool.Prepared(_prepare).call(_fails, "game.trials")
    assert err.value.field == "game.trials" and err.value.message == "must be at least 2"


def test_prepared_computes_here_what_cannot_travel_or_when_it_died(spare):
    here = os.getpid()
    assert worker_pool.Prepared(_prepare).call(lambda x: (os.getpid(), x), 1) == (here, 1)
    assert worker_pool.Prepared(_prepare).call(_dies_unless_in, here) == "here"


def test_prepared_unused_is_stopped_and_reaped_and_a_loaded_machine_never_forks(spare, monkeypatch):
    job = worker_pool.Prepared(lambda: __import__("time").sleep(60))
    if job.forked:
        job.close()  # at once, not after the minute of preparation
        with pytest.raises(ChildProcessError):
            os.waitpid(job._pid, os.WNOHANG)
    monkeypatch.setattr(worker_pool, "spare_core", lambda: False)
    loaded = worker_pool.Prepared(_prepare)
    assert not loaded.forked and loaded.call(_where_prepared, 2)[0] == os.getpid()
