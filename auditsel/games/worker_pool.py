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

* Warm workers. `forked_chunks(play, indices, workers)` plays chunks in `workers` processes
  forked from this one (POSIX, the "fork" start method) after it has played a chunk itself,
  so each worker starts with the user's modules imported and their first-call costs paid
  (torch, Opacus: seconds of CPU per worker when started cold by loky), reads the game from
  memory (nothing pickled per chunk but the index and the scores), and plays chunks until
  none are left. A chunk's numbers depend on (seed, index) only, so they equal any other
  backend's.
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
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
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
    "forked_chunks",
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


_PLAYERS: dict[int, Callable[[int], Any]] = {}  # the chunk players forked workers inherit
_NEXT_PLAYER = iter(range(1, 2**62))  # keys: two audits in two threads never share one


def _worker_start(threads: int) -> None:
    global _DEPTH, _SAVED, _ACTIVE
    _DEPTH, _SAVED, _ACTIVE = 1, _apply(threads), threads  # held for the worker's life


def _play(player: int, index: int) -> Any:
    return _PLAYERS[player](index)  # KeyError: a worker not forked from the audit's process


def bounded(submit: Callable[[int], Future[T]], todo: Iterator[int], limit: int) -> Iterator[T]:
    """submit(i) for each i of `todo`, at most `limit` futures pending at once; their results
    in completion order, each handed over as it finishes (so a streamed run keeps its memory
    bound). If a result raises or the consumer stops, the futures not yet started are cancelled.
    The thread pool of `auditsel.games.engine` and the forked workers below both deal chunks so."""
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


def forked_chunks(
    play: Callable[[int], Any], indices: Iterable[int], workers: int, threads: int
) -> Iterator[Any]:
    """play(i) for every i, in `workers` processes forked from this one (each limited to
    `threads` threads), at most two chunks per worker in flight; results in completion order."""
    todo = iter(indices)
    key = next(_NEXT_PLAYER)
    _PLAYERS[key] = play  # registered before the fork: the workers find it under its key
    context = multiprocessing.get_context("fork")
    try:
        with ProcessPoolExecutor(
            workers, mp_context=context, initializer=_worker_start, initargs=(threads,)
        ) as pool:

            def submit(i: int) -> Future[Any]:
                return pool.submit(_play, key, i)

            yield from bounded(submit, todo, 2 * workers)
    finally:
        del _PLAYERS[key]


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
        self.forked = fork_available() and threading.active_count() == 1 and spare_core()
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
        self.forked = fork_available() and threading.active_count() == 1 and spare_core()
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
