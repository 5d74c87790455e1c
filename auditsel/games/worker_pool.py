"""Game workers that pay off: each game-playing process limited to its share of the cores'
threads, and pipeline workers forked from the warm audit process instead of started cold.

Contract.

* Threads. While games play, the BLAS and OpenMP pools that threadpoolctl finds (OpenBLAS, MKL,
  BLIS, libgomp/libomp: numpy's, scipy's, torch's) and torch's intra-op pool are limited to
  `game_threads(jobs)` threads: one per process with ``jobs = 1``, ``cores // jobs`` (at least
  one) per worker with ``jobs > 1``; ``AUDITSEL_GAME_THREADS=N`` sets N instead. Libraries
  loaded during the games (a `tune` that imports torch lazily) start with that many threads
  (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS are set while the limit holds, where
  unset). The limit is process-wide and nested uses share it; OpenMP's and torch's settings
  are per thread, so each thread that plays games applies them when it starts a chunk
  (`in_game_thread`). When the last use ends, the pools and variables of the thread that began
  it are as they were (a library first loaded during the games keeps its size; a pool thread
  of the threading backend ends with the audit). Why: a tuning run's steps are small products, where a second BLAS thread gains little
  on an idle machine and, on a loaded one, spins waiting for a descheduled partner (a hand-
  written NumPy pipeline ran ~30x slower in an audit; a 200 x 200 matmul 20x slower with
  two OpenBLAS threads than with one under a load of 8 on 2 cores).

* Warm workers. `WarmWorkers(target, threads=...)` forks its workers from this process when
  `start(n)` is called (POSIX, the "fork" start method): where this process is warm (the
  user's modules imported, their first-call costs paid: torch, Opacus), so the workers need
  neither (loky's cold workers paid seconds of CPU each), and each reads `target` (the game)
  from memory: nothing is pickled per task but a function's name, an index and the result.
  `deal(indices, fn, args)` plays `fn(target, *args(i))` once for every index: each worker one
  task at a time, and this process plays the next index itself meanwhile (with n workers,
  n + 1 processes play). A task's numbers depend on its arguments only (a chunk's on (seed,
  index)), so they equal any other backend's, whichever process played it.
  `workers_that_pay(most, tasks, seconds)` sizes the pool from the work left and its measured
  cost per task: a worker only where every process gets at least `FORK_PAYS` CPU seconds of
  work, so that a fork's own cost stays a small share of what it saves.
* Work beside. `Beside(fn)` computes fn() while the caller goes on: in a process forked from
  this one where that is safe (`fork_available()` and no other Python thread running, since a
  forked child of a threaded process may block forever on a lock another thread held) and
  pays (`spare_core()`: the load average leaves a core free), else in a thread. `result()` is fn's value, or raises its exception. A forked fn runs on its own
  core with its own GIL (a thread would contend with the caller's Python for one GIL); its
  value comes back pickled, and where it does not (the child died, an object that does not
  pickle) fn() is called again in this process: the same function of the same inputs, so
  the same value.
* Work prepared ahead. `Prepared(prepare)` forks a process that runs prepare() (an import of
  matplotlib, say) at once and then waits for one call `call(fn, *args)`, whose arguments and
  value travel pickled: the preparation runs on a free core beside the caller's own start-up
  instead of after it. Forked only where `Beside` would fork; else fn runs in the caller.
"""

from __future__ import annotations

import functools
import gc
import itertools
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager, suppress
from typing import Any, TypeVar, cast

from threadpoolctl import ThreadpoolController

from auditsel.errors import ConfigError

__all__ = [
    "game_threads",
    "limited_threads",
    "in_game_thread",
    "fork_available",
    "WarmWorkers",
    "warm_workers_for",
    "workers_that_pay",
    "bounded",
    "Beside",
    "Prepared",
    "spare_core",
    "usable_cores",
]

T = TypeVar("T")

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

_LOCK = threading.Lock()
_DEPTH = 0
_ACTIVE = 0  # the active limit (threads), 0 when none
_GENERATION = 0  # counts the limits begun: a thread limited under an older one is redone
_THREAD = threading.local()
_SAVED: list[Callable[[], None]] = []  # how to undo the active limit, in order


def game_threads(jobs: int) -> int:
    """Threads per game-playing process: ``AUDITSEL_GAME_THREADS`` if set (a positive integer),
    else 1 for ``jobs = 1`` and ``cores // jobs`` (at least 1) for more jobs."""
    raw = os.environ.get("AUDITSEL_GAME_THREADS", "").strip()
    if raw:
        if raw.isdigit() and int(raw) > 0:
            return int(raw)
        raise ConfigError("AUDITSEL_GAME_THREADS", f"must be a positive integer, got {raw!r}")
    cores = usable_cores()
    return 1 if abs(jobs) <= 1 else max(1, cores // abs(jobs))


def _unset(name: str) -> None:
    os.environ.pop(name, None)


def _apply(threads: int) -> list[Callable[[], None]]:
    """Limit every pool to `threads`; returns the undo steps."""
    undo: list[Callable[[], None]] = []
    for name in THREAD_VARIABLES:
        if name not in os.environ:
            os.environ[name] = str(threads)
            undo.append(functools.partial(_unset, name))
    limiter = ThreadpoolController().limit(limits=threads)
    undo.append(limiter.restore_original_limits)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_num_threads"):
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        undo.append(lambda: torch.set_num_threads(before))
    return undo


def in_game_thread() -> None:
    """Called where games start, in whichever thread plays them: under a limit, this thread's
    OpenMP setting (per thread in OpenMP: a pool thread starts with the library's default)
    and torch's pool (per thread as well, and possibly loaded since the limit began: a lazy
    import in `tune`) get the limit's size. Cheap when nothing changed."""
    if not _ACTIVE or getattr(_THREAD, "generation", None) == _GENERATION:
        torch = sys.modules.get("torch")
        if _ACTIVE and torch is not None and hasattr(torch, "get_num_threads"):
            if torch.get_num_threads() != _ACTIVE:
                torch.set_num_threads(_ACTIVE)
        return
    ThreadpoolController().limit(limits=_ACTIVE, user_api="openmp")  # this thread's ICV
    torch = sys.modules.get("torch")
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


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system tells it (a
    `taskset`, a container's cpuset), else every core of the machine."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity here (macOS)
        return os.cpu_count() or 1


def fork_available() -> bool:
    """Whether warm workers can be forked here (Linux and other POSIX systems with "fork";
    macOS is left out: its system libraries are not safe to use in a forked child)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


_TARGETS: dict[int, Any] = {}  # what forked workers inherit, by key (registered before the fork)
_NEXT_KEY = itertools.count(1)  # keys: two audits in two threads never share one
_OPEN: dict[int, WarmWorkers] = {}  # id(target) -> its open pool (`warm_workers_for`)
_OPEN_LOCK = threading.Lock()
#: CPU seconds of work each process (this one and every forked worker) must have at least for a
#: worker to be forked. A warm worker forked and ended with no work costs about 0.05 CPU s for
#: the tutorial's torch pipeline (`benchmarks/bench_pipeline.py --fork-cost`,
#: docs/benchmarks/pipeline-audit.md): under a fifth of the least share a worker gets. The bar
#: is low on purpose: the cost per game comes from two games of the replay check (a law of K
#: makes them vary), and a worker not forked costs half the games' wall time
FORK_PAYS = 0.25


def _worker_start(threads: int) -> None:
    global _DEPTH, _SAVED, _ACTIVE
    # the inherited objects leave the garbage collector's view (as in `Beside`): a full pass
    # would write to every one of them and copy the audit process's pages for nothing
    gc.freeze()
    _DEPTH, _SAVED, _ACTIVE = 1, _apply(threads), threads  # held for the worker's life


def _call(key: int, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    return fn(_TARGETS[key], *args)  # KeyError: a worker not forked from the pool's process


def _ready(_target: object) -> None:
    """The task that forks the workers (the fork context starts them all at the first task)."""


def bounded(submit: Callable[[int], Future[T]], todo: Iterator[int], limit: int) -> Iterator[T]:
    """submit(i) for each i of `todo`, at most `limit` futures pending at once; their results
    in completion order, each handed over as it finishes (so a streamed run keeps its memory
    bound). If a result raises or the consumer stops, the futures not yet started are cancelled.
    The engine's thread pool (`auditsel.games.engine`) deals chunks so."""
    running = {submit(i) for _, i in zip(range(limit), todo)}
    try:
        while running:
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
                nxt = next(todo, None)
                if nxt is not None:
                    running.add(submit(nxt))
    except BaseException:
        for future in running:
            future.cancel()
        raise


def workers_that_pay(most: int, tasks: int, seconds_per_task: float) -> int:
    """Workers worth forking beside this process (which plays tasks too) for `tasks` tasks of
    about `seconds_per_task` CPU seconds each: as many as leave every process at least
    `FORK_PAYS` seconds of work, at most `most` and `tasks - 1` (0: play them all here)."""
    if most < 1 or tasks < 2:
        return 0
    if FORK_PAYS <= 0:  # every worker pays (a test's setting)
        return min(most, tasks - 1)
    by_work = int(tasks * max(seconds_per_task, 0.0) / FORK_PAYS) - 1
    return max(0, min(most, tasks - 1, by_work))


def warm_workers_for(target: object) -> WarmWorkers | None:
    """The open `WarmWorkers` holding `target` (opened as a context in this process), or None."""
    with _OPEN_LOCK:
        return _OPEN.get(id(target))


class WarmWorkers:
    """Worker processes forked from this one by `start`, each holding `target` as this process
    held it then (never pickled): `submit(fn, *args)` runs `fn(target, *args)` in one of them, and
    `deal` plays indexed tasks there and here at once. Opened as a context, the pool is found
    by `warm_workers_for(target)` until it closes; closing waits for the tasks in flight."""

    def __init__(
        self, target: object, *, threads: int, idle: Callable[[], object] | None = None
    ) -> None:
        self.target = target
        self.threads = threads  # each worker's BLAS, OpenMP and torch threads
        self.idle = idle  # called once by `deal` when this process has nothing left to play
        self.workers = 0
        self.decided = False  # `start` was called (with 0 workers: every task plays here)
        self._key = next(_NEXT_KEY)
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> WarmWorkers:
        with _OPEN_LOCK:
            _OPEN[id(self.target)] = self
        return self

    def __exit__(self, *exc: object) -> None:
        with _OPEN_LOCK:
            if _OPEN.get(id(self.target)) is self:
                del _OPEN[id(self.target)]
        self.close()

    def start(self, workers: int) -> int:
        """Fork `workers` processes now, from the calling thread (once: later calls keep the
        first size); returns the pool's size. Call it where this process is warm and no other
        thread holds a lock the children would need."""
        if not self.decided:
            self.decided = True
            if workers >= 1 and fork_available():
                _TARGETS[self._key] = self.target  # before the fork: the workers inherit it
                self._pool = ProcessPoolExecutor(
                    workers,
                    mp_context=multiprocessing.get_context("fork"),
                    initializer=_worker_start,
                    initargs=(self.threads,),
                )
                self._pool.submit(_call, self._key, _ready, ())  # forks them all, now
                self.workers = workers
        return self.workers

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """`fn(target, *args)` in a worker (fn and args are pickled: a module-level function)."""
        if self._pool is None:
            raise RuntimeError("WarmWorkers.submit: no worker started")
        return self._pool.submit(_call, self._key, fn, args)

    def close(self) -> None:
        """Wait for the tasks in flight, then end the workers."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        _TARGETS.pop(self._key, None)

    def deal(
        self,
        indices: Sequence[int],
        fn: Callable[..., T],
        args: Callable[[int], tuple[Any, ...]],
        *,
        size: Callable[[float, int], int] | None = None,
    ) -> Iterator[T]:
        """`fn(target, *args(i))` once for every i, in completion order: each worker plays one
        task at a time (a thread of this process per worker hands it the next index as it
        finishes), and this process plays the next index itself meanwhile. If the pool was not
        started, this process plays the first task alone and `size(its CPU seconds, tasks
        left)` says how many workers to start for the rest. Once this process has nothing
        left to play, `idle` is called while the workers finish. The first exception raised
        (here or in a worker) stops the dealing and is raised here once the tasks in flight
        have finished."""
        dealer = _Dealer(self, list(indices), fn, args)
        try:
            dealer.launch()
            while (i := dealer.take(here=True)) is not None:
                start = time.process_time()
                value = fn(self.target, *args(i))
                if size is not None and not self.decided:
                    self.start(size(time.process_time() - start, dealer.left()))
                    dealer.launch()
                yield value
                yield from dealer.finished(wait=False)
            if self.idle is not None and dealer.pending() and not dealer.stopped():
                self.idle()
            yield from dealer.finished(wait=True)
        finally:
            dealer.stop()


class _Dealer:
    """The indices of one `WarmWorkers.deal`, shared by this process's thread and one thread
    per worker; the workers' results (or the first exception) queued for the caller."""

    def __init__(
        self,
        pool: WarmWorkers,
        todo: list[int],
        fn: Callable[..., Any],
        args: Callable[[int], tuple[Any, ...]],
    ) -> None:
        self.pool, self.fn, self.args = pool, fn, args
        self._todo = iter(todo)
        self._left = len(todo)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._results: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self._sent = self._received = 0
        self._threads: list[threading.Thread] = []

    def take(self, here: bool = False) -> int | None:
        with self._lock:
            if self._stop.is_set():
                return None
            i = next(self._todo, None)
            if i is not None:
                self._left -= 1
                self._sent += not here
            return i

    def left(self) -> int:
        with self._lock:
            return self._left

    def pending(self) -> bool:
        return self._sent > self._received

    def stopped(self) -> bool:
        return self._stop.is_set()

    def launch(self) -> None:
        """One thread per worker not yet served (the pool may have started since)."""
        while len(self._threads) < self.pool.workers:
            thread = threading.Thread(target=self._serve, name="auditsel-deal", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self) -> None:
        while (i := self.take()) is not None:
            try:
                value = self.pool.submit(self.fn, *self.args(i)).result()
            except BaseException as err:  # raised in the caller's thread (`finished`)
                self._stop.set()
                self._results.put((False, err))
                return
            self._results.put((True, value))

    def finished(self, *, wait: bool) -> Iterator[Any]:
        """The workers' results received so far (wait: all of them), in completion order."""
        while self.pending():
            try:
                ok, value = self._results.get(block=wait)
            except queue.Empty:
                return
            self._received += 1
            if not ok:
                raise value
            yield value

    def stop(self) -> None:
        """No more tasks dealt; the tasks in flight finish (their threads end)."""
        self._stop.set()
        for thread in self._threads:
            thread.join()


def spare_core() -> bool:
    """Whether a core is free for work beside the caller: fewer than the number of cores less
    a half are busy by the 1-minute load average or, where Linux tells it, by the processes
    runnable right now other than this one (the average remembers a run that just ended, a
    benchmark's previous repeat say). On a loaded machine a forked process gains no core, and
    its copied pages and second set of warm caches cost CPU (about a tenth more for a
    10^5-game `auditsel run` under a load of 9 on 2 cores), so `Beside` computes in a thread
    then."""
    try:
        busy = os.getloadavg()[0]
    except OSError:  # no load average here: assume a free core
        return True
    busy = min(busy, _runnable_others())
    return busy < usable_cores() - 0.5


def _runnable_others() -> float:
    """Processes runnable now other than this one (/proc/loadavg's fourth field, Linux), or
    infinity where that cannot be read."""
    try:
        with open("/proc/loadavg") as f:
            return max(int(f.read().split()[3].split("/")[0]) - 1, 0)
    except (OSError, ValueError, IndexError):
        return float("inf")


def fork_pays() -> bool:
    """Whether work beside the caller goes to a forked process: fork is available, no other
    Python thread is running (a forked child of a threaded process may block forever on a lock
    another thread held) and a core is free (`spare_core`)."""
    return fork_available() and threading.active_count() == 1 and spare_core()


class Beside:
    """fn() computed beside the caller (module docstring): in a forked process where that is
    safe, else in a thread, or with `thread=False` (fn is not thread-safe: matplotlib's pyplot)
    in the caller's thread when `result()` is called. `seconds` is fn's own time once
    `result()` has returned; `forked` says where it ran."""

    def __init__(self, fn: Callable[[], Any], *, thread: bool = True) -> None:
        self._fn = fn
        self.seconds = 0.0
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.forked = fork_pays()
        if self.forked:
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: compute, send, and leave without any cleanup of the parent's
                os.close(read)
                self._child(write)
            os.close(write)
            self._pid, self._read = pid, read
        elif thread:
            self._thread = threading.Thread(target=self._run, name="auditsel-beside", daemon=True)
            self._thread.start()

    def _child(self, write: int) -> None:
        # the inherited objects leave the garbage collector's view: its passes would touch
        # every one of them and copy their pages from the parent (copy-on-write) for nothing
        gc.freeze()
        status = 1
        try:
            start = time.perf_counter()
            try:
                payload = (True, self._fn(), time.perf_counter() - start)
            except BaseException as err:  # sent to the parent, which raises it
                payload = (False, err, time.perf_counter() - start)
            data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write, "wb") as pipe:
                pipe.write(data)
            status = 0
        finally:
            os._exit(status)

    def _run(self) -> None:
        start = time.perf_counter()
        try:
            self._value = self._fn()
        except BaseException as err:  # raised by result()
            self._error = err
        self.seconds = time.perf_counter() - start

    def _receive(self) -> None:
        with os.fdopen(self._read, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(self._pid, 0)
        try:
            if status != 0 or not data:
                raise EOFError("no value from the forked process")
            ok, value, self.seconds = pickle.loads(data)
        except Exception:  # died, or a value that does not pickle: the same call, here
            self._run()
            return
        if ok:
            self._value = value
        else:
            self._error = value

    def cancel(self) -> None:
        """Give up on the value (the caller failed): a forked process is stopped and reaped, a
        thread is left to finish on its own (a daemon)."""
        if self.forked and not self._done:
            self._done = True
            with suppress(OSError):
                os.kill(self._pid, signal.SIGKILL)
            with suppress(OSError):
                os.close(self._read)
            with suppress(ChildProcessError):
                os.waitpid(self._pid, 0)

    def result(self) -> Any:
        """fn's value (waiting for it), or its exception raised here."""
        if not self._done:
            if self.forked:
                self._receive()
            elif self._thread is not None:
                self._thread.join()
            else:  # thread=False and no fork: computed now, in the caller's thread
                self._run()
            self._done = True
        if self._error is not None:
            raise self._error
        return self._value


def _write_framed(pipe: Any, data: bytes) -> None:
    """data, preceded by its length (8 bytes): the reader needs no end of file, which a pipe
    does not see while a process forked meanwhile still holds a copy of its writing end."""
    pipe.write(len(data).to_bytes(8, "little") + data)
    pipe.flush()


def _read_framed(pipe: Any) -> bytes:
    """What `_write_framed` wrote, or b"" where the writer left first."""
    head = pipe.read(8)
    if len(head) < 8:
        return b""
    data: bytes = pipe.read(int.from_bytes(head, "little"))
    return data


class Prepared:
    """A process forked now, which runs `prepare()` at once (imports that take a third of a
    second, say) on its own core while the caller goes on, then waits for one call:
    `call(fn, *args)` sends a module-level fn and its arguments (pickled), and ``fn(*args)``
    runs there with whatever `prepare` loaded and comes back pickled. Forked only where `Beside`
    would fork; elsewhere, or where fn, its arguments or its value do not pickle, or the
    process died, ``fn(*args)`` runs in the caller: the same function of the same inputs, so the
    same value. An exception fn raises there is raised here. `close()` (also by a with-block)
    lets an unused process go; it leaves by itself when the caller ends."""

    def __init__(self, prepare: Callable[[], object]) -> None:
        self.forked = fork_pays()
        self._open = self.forked
        if not self.forked:
            return
        ask_read, self._ask = os.pipe()
        self._answer, answer_write = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:  # the child: prepare, answer one call, leave without cleanup
            os.close(self._ask)
            os.close(self._answer)
            self._serve(prepare, ask_read, answer_write)
        os.close(ask_read)
        os.close(answer_write)

    @staticmethod
    def _serve(prepare: Callable[[], object], ask: int, answer: int) -> None:
        gc.freeze()  # as in Beside: the inherited objects stay out of the collector's passes
        status = 1
        try:
            with suppress(Exception):  # a failed preparation only costs the call its head start
                prepare()
            with os.fdopen(ask, "rb") as pipe:
                request = _read_framed(pipe)
            if request:  # empty: closed unused
                fn, args = pickle.loads(request)
                try:
                    payload = (True, fn(*args))
                except BaseException as err:  # sent to the caller, which raises it
                    payload = (False, err)
                with os.fdopen(answer, "wb") as pipe:
                    _write_framed(pipe, pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
            status = 0
        finally:  # Ctrl-C included: leave quietly, the caller reports
            os._exit(status)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, computed in the prepared process where it was forked (class
        docstring)."""
        if not self._open:
            return fn(*args)
        self._open = False
        try:
            request = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # cannot be sent: computed here
            self._release()
            return fn(*args)
        try:
            with os.fdopen(self._ask, "wb") as pipe:
                _write_framed(pipe, request)
            with os.fdopen(self._answer, "rb") as pipe:
                data = _read_framed(pipe)
        except OSError:  # the process died while being asked: the call is made here
            data = b""
        finally:
            with suppress(ChildProcessError):
                os.waitpid(self._pid, 0)
        try:
            ok, value = pickle.loads(data)
        except Exception:  # died, or a value that does not pickle: the same call, here
            return fn(*args)
        if not ok:
            raise value
        return cast(T, value)

    def _release(self) -> None:
        with suppress(OSError):
            os.kill(self._pid, signal.SIGKILL)  # unused: its preparation need not finish
        with suppress(OSError):
            os.close(self._ask)
        with suppress(OSError):
            os.close(self._answer)
        with suppress(ChildProcessError):
            os.waitpid(self._pid, 0)

    def close(self) -> None:
        """Let an unused prepared process go (stopped and reaped at once)."""
        if self._open:
            self._open = False
            self._release()

    def __enter__(self) -> Prepared:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
