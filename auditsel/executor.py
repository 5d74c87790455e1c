"""The executor: every parallel piece of auditsel runs through this module.

Contract (which backend `run_tasks` and `run_ordered` run on, and who calls `in_background`
and `in_pieces`: docs/explanation/architecture.md, "One executor"). `ExecutionOptions` is
the request's execution (workers, backend, chunks, checkpoints, progress, threads): defined
here, the lowest layer that reads it (the game engine and the pipelines take it whole;
`auditsel.pipelines.audit_options` re-exports it), it never changes a number: tasks are seeded
by their own arguments (a chunk by (seed, index): `auditsel.games.engine`), so every backend
and every number of jobs gives the same numbers.

Threads. While games play, the BLAS and OpenMP pools that threadpoolctl finds and torch's
intra-op pool are limited to `game_threads(jobs)` threads in this process (`limited_threads`);
each thread that plays games applies OpenMP's and torch's per-thread settings when it starts
(`in_game_thread`). Why: a tuning run's steps are small products, where a second BLAS thread
gains little on an idle machine and spins waiting for a descheduled partner on a loaded one.
loky's workers are limited by joblib itself (``cores // jobs`` threads each).

`dask` runs the tasks on a dask.distributed cluster through joblib's dask backend: the one at
`scheduler` (e.g. tcp://10.0.0.5:8786), or a LocalCluster on loopback started for the run.
Dask is an optional extra: pip install "auditsel[dask]".
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from threadpoolctl import ThreadpoolController

from auditsel.errors import ConfigError, shown

T = TypeVar("T")

BACKENDS = ("loky", "threading", "dask")
SCHEDULER_TIMEOUT = "10s"  # how long a dask Client tries to reach a named scheduler
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class BackendError(ConfigError):
    """A backend that cannot be used here; the message says how to fix it."""

    def __init__(self, message: str):
        super().__init__("", message)


@dataclass(frozen=True, kw_only=True)
class ExecutionOptions:
    """Where and how the games play; never what they compute.

    `jobs`: worker processes (joblib's convention: -1 all cores); `backend`: loky, threading or
    dask (None: the function's default); `scheduler`: a dask scheduler address (backend dask);
    `chunk_size`: games per chunk, the unit of work and of checkpoints (None: the function's
    default); `checkpoint_dir`: finished chunks are kept there and an interrupted audit resumes
    from them; `stream`: audit chunk by chunk from disk, in bounded memory (True, False or
    "auto": above 2^20 games with a checkpoint folder); `progress`: a progress bar on stderr
    (progress lines where stderr is no terminal); `game_threads`: BLAS, OpenMP and torch
    threads of the process playing the games (None: 1 with one job, else cores // jobs;
    `auditsel.executor`); `checkpoint_after`: seconds a game plays before its chunks are
    written (None: 5; 0: from the first chunk); `fresh`: start over: delete the checkpoints
    first (once the output folder is locked and every other option checked), resume nothing;
    `accept_nondeterminism`: play a pipeline whose replay check fails (recorded in
    result.json's pipeline.reproducibility) instead of refusing it."""

    jobs: int = 1
    backend: str | None = None
    scheduler: str | None = None
    chunk_size: int | None = None
    checkpoint_dir: str | Path | None = None
    stream: bool | str = "auto"
    progress: bool = False
    game_threads: int | None = None
    checkpoint_after: float | None = None
    fresh: bool = False
    accept_nondeterminism: bool = False

    def __post_init__(self) -> None:
        folder_option(self.checkpoint_dir, "checkpoint_dir")


def folder_option(value: object, field: str) -> None:
    """A ConfigError naming `field` unless `value` is None or a path (str or os.PathLike)."""
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise ConfigError(field, f"must be a folder (a str or a Path) or None, got {shown(value)}")


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system tells it (a
    `taskset`, a container's cpuset), else every core of the machine."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity here (macOS)
        return os.cpu_count() or 1


def worker_count(jobs: int) -> int:
    """joblib's n_jobs convention: -1 all cores, -2 all but one, ..."""
    return max(1, jobs if jobs > 0 else usable_cores() + 1 + jobs)


def run_tasks(
    fn: Callable[..., T],
    tasks: Iterable[tuple[Any, ...]],
    *,
    jobs: int = 1,
    backend: str | None = None,
    prefer: str | None = None,
) -> Iterator[T]:
    """``fn(*task)`` for each task, in completion order, on the backend (module docstring). At
    most two tasks per worker are in flight on threads, so that a caller that drops each value
    once used keeps its memory bound."""
    if backend is None and jobs == 1:
        for task in tasks:
            yield fn(*task)
        return
    if backend == "threading" or (backend is None and prefer == "threads"):
        yield from _threaded(fn, iter(tasks), worker_count(jobs))
        return
    from joblib import Parallel, delayed, parallel_config  # deferred: joblib is heavy

    with parallel_config(backend=backend) if backend else nullcontext():
        parallel = Parallel(
            n_jobs=-1 if backend == "dask" else jobs, return_as="generator_unordered"
        )
        yield from parallel(delayed(fn)(*task) for task in tasks)


def _threaded(fn: Callable[..., T], todo: Iterator[tuple[Any, ...]], size: int) -> Iterator[T]:
    with ThreadPoolExecutor(size, thread_name_prefix="auditsel") as pool:
        running: set[Future[T]] = {pool.submit(fn, *t) for _, t in zip(range(2 * size), todo)}
        try:
            while running:
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    yield future.result()
                    nxt = next(todo, None)
                    if nxt is not None:
                        running.add(pool.submit(fn, *nxt))
        except BaseException:
            for future in running:
                future.cancel()
            raise


def _numbered(i: int, fn: Callable[..., T], args: tuple[Any, ...]) -> tuple[int, T]:
    return i, fn(*args)


def run_ordered(
    calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]],
    *,
    jobs: int = 1,
    backend: str | None = None,
) -> list[Any]:
    """``fn(*args)`` for each (fn, args) of `calls`, on the backend, the values in call order."""
    tasks = [(i, fn, args) for i, (fn, args) in enumerate(calls)]
    values = dict(run_tasks(_numbered, tasks, jobs=jobs, backend=backend))
    return [values[i] for i in range(len(calls))]


def in_background(fn: Callable[[], T]) -> Future[T]:
    """fn() computed in a thread of its own while the caller goes on; `.result()` is its value
    (or raises its exception)."""
    future: Future[T] = Future()

    def target() -> None:
        try:
            future.set_result(fn())
        except BaseException as err:  # raised by result()
            future.set_exception(err)

    threading.Thread(target=target, name="auditsel-background", daemon=True).start()
    return future


_PIECES_POOL: ThreadPoolExecutor | None = None
_PIECES_POOL_SIZE = 0  # the workers _PIECES_POOL was made with (the executor keeps it private)


def in_pieces(fn: Callable[[int, int], None], size: int, workers: int, pieces: int) -> None:
    """fn(a, b) for each of `pieces` consecutive pieces [a, b) of [0, size) (np.linspace's
    bounds), taken in turn by the calling thread and `workers - 1` threads of a pool kept for the
    next call; all of [0, size) on the caller when `workers` < 2. Returns when every piece is
    done; a piece's exception stops the handing out and is raised here. fn must write only its
    own piece, so how the pieces fall on threads cannot change a value."""
    global _PIECES_POOL, _PIECES_POOL_SIZE
    if workers < 2:
        fn(0, size)
        return
    if _PIECES_POOL is None or _PIECES_POOL_SIZE < workers - 1:
        if _PIECES_POOL is not None:  # a smaller pool: its idle threads end, not leak
            _PIECES_POOL.shutdown(wait=False)
        _PIECES_POOL = ThreadPoolExecutor(workers - 1, thread_name_prefix="auditsel-pieces")
        _PIECES_POOL_SIZE = workers - 1
    bounds = np.linspace(0, size, pieces + 1).astype(int).tolist()
    state = _Pieces(pieces)

    def drain() -> None:
        while (k := state.take()) is not None:
            try:
                fn(bounds[k], bounds[k + 1])
            except BaseException as err:
                state.fail(err)
                return
            state.finish()

    for _ in range(workers - 1):
        _PIECES_POOL.submit(drain)
    drain()
    state.wait()


class _Pieces:
    """The pieces of one `in_pieces`: handed out in order, counted when done."""

    def __init__(self, pieces: int):
        self.pieces, self.next, self.done = pieces, 0, 0
        self.error: BaseException | None = None
        self.lock, self.finished = threading.Lock(), threading.Event()

    def take(self) -> int | None:
        with self.lock:
            if self.next >= self.pieces or self.error is not None:
                return None
            self.next += 1
            return self.next - 1

    def finish(self) -> None:
        with self.lock:
            self.done += 1
            if self.done == self.pieces:
                self.finished.set()

    def fail(self, err: BaseException) -> None:
        with self.lock:
            self.error = err
            self.finished.set()

    def wait(self) -> None:
        self.finished.wait()
        if self.error is not None:
            raise self.error


@contextmanager
def fresh_processes(backend: str | None) -> Iterator[None]:
    """loky's reusable worker processes ended before and after the block (where `backend`
    runs on them): a worker kept from an earlier run holds the modules it imported then (a
    user's pipeline, since edited or gone), which its next tasks would run."""
    if backend in (None, "loky"):
        end_loky_workers()
    try:
        yield
    finally:
        if backend in (None, "loky"):
            end_loky_workers()


def end_loky_workers(kill: bool = False) -> None:
    """Shut joblib's reusable loky executor down, where one was started (reading it starts
    none): waiting for it, or (`kill`, after an interrupt) killing its workers, best effort."""
    reusable = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(reusable, "_executor", None)
    if executor is None:
        return
    try:
        executor.shutdown(wait=not kill, kill_workers=kill)
    except Exception:
        if not kill:
            raise


@contextmanager
def execution_backend(
    name: str | None, scheduler: str | None = None, workers: int = 2
) -> Iterator[str | None]:
    """Yields the joblib backend name to pass to auditsel.games.engine.run_game (None = default)."""
    if name in (None, "loky", "threading"):
        if scheduler:
            raise BackendError("--scheduler: only used with --backend dask")
        yield name
        return
    if name != "dask":
        raise BackendError(f"--backend: must be one of {', '.join(BACKENDS)}, got {name!r}")
    try:
        # deferred: dask.distributed is the optional dask extra
        from distributed import Client, LocalCluster
    except ImportError:
        raise BackendError(
            "--backend dask: dask.distributed is not installed; pip install 'auditsel[dask]'"
        ) from None
    if scheduler:
        try:
            client = Client(scheduler, timeout=SCHEDULER_TIMEOUT)
        except OSError as err:
            raise BackendError(f"--scheduler: cannot reach {scheduler} ({err})") from None
        cluster = None
    else:
        cluster = LocalCluster(
            n_workers=max(workers, 1),
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )
        client = Client(cluster)
    try:
        yield "dask"
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


_LOCK = threading.Lock()
_DEPTH = 0
_ACTIVE = 0  # the active limit (threads), 0 when none
_GENERATION = 0  # counts the limits begun: a thread limited under an older one is redone
_THREAD = threading.local()
_SAVED: list[Callable[[], object]] = []  # how to undo the active limit, in order


def game_threads(jobs: int, given: int | None = None) -> int:
    """Threads per game-playing process: `given` (the request's `game_threads`) if set, else 1
    for ``jobs = 1`` and ``cores // jobs`` (at least 1) for more jobs."""
    if given is not None:
        return given
    return 1 if abs(jobs) <= 1 else max(1, usable_cores() // abs(jobs))


def _apply(threads: int) -> list[Callable[[], object]]:
    """Limit every pool to `threads`; returns the undo steps."""
    undo: list[Callable[[], object]] = []
    for name in THREAD_VARIABLES:
        if name not in os.environ:
            os.environ[name] = str(threads)
            undo.append(functools.partial(os.environ.pop, name, None))
    undo.append(ThreadpoolController().limit(limits=threads).restore_original_limits)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_num_threads"):
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        undo.append(lambda: torch.set_num_threads(before))
    return undo


def in_game_thread() -> None:
    """Called where games start, in whichever thread plays them: under a limit, this thread's
    OpenMP setting (per thread in OpenMP) and torch's pool (per thread as well, and possibly
    loaded since the limit began) get the limit's size. Cheap when nothing changed."""
    torch = sys.modules.get("torch")
    if not _ACTIVE or getattr(_THREAD, "generation", None) == _GENERATION:
        if _ACTIVE and torch is not None and hasattr(torch, "get_num_threads"):
            if torch.get_num_threads() != _ACTIVE:
                torch.set_num_threads(_ACTIVE)
        return
    ThreadpoolController().limit(limits=_ACTIVE, user_api="openmp")  # this thread's ICV
    if torch is not None and hasattr(torch, "get_num_threads"):
        torch.set_num_threads(_ACTIVE)
    _THREAD.generation = _GENERATION


@contextmanager
def limited_threads(threads: int) -> Iterator[int]:
    """BLAS, OpenMP and torch threads limited to `threads` in this process while the context
    lasts (module docstring); nested and concurrent uses share one limit, the first one's."""
    global _DEPTH, _SAVED, _ACTIVE, _GENERATION
    with _LOCK:
        if _DEPTH == 0:
            _SAVED, _ACTIVE = _apply(threads), threads
            _GENERATION += 1
            _THREAD.generation = _GENERATION
        _DEPTH += 1
    try:
        in_game_thread()
        yield _ACTIVE
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                for step in reversed(_SAVED):
                    step()
                _SAVED, _ACTIVE = [], 0
