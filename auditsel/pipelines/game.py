"""One game around a user pipeline, and what it needs in a worker process (light imports).

Contract. Game g of an audit with seed `seed` draws everything from its own stream
rng_g = Generator(SeedSequence(seed, spawn_key=(g,))): first its coin b (member = 1: the canary
is in), then the canary's own draws. `tune` gets the seed s_g = game_seed(seed, g), distinct
for every game of an audit (< 2^32, so that any library accepts it), and the global generators
of Python, NumPy and torch are seeded with s_g first: torch when it is loaded, and, when `tune`
imports it during the game (a lazy import), as soon as the import finishes (an import hook),
so that no game draws from an unseeded torch. Under threads the global generators are shared
by the games that run at once: `auditsel.pipelines.replay_check` refuses a `tune` that draws
from them there. One game is ::

    release = tune(canary.prepare(data), s_g, canary.for_game(b, rng_g))
    score_g = score(release, canary)        # the unbound canary: the attack never sees b

`PipelineGame.play(seed, index, size)` plays one chunk of the game engine
(`auditsel.games.engine`). Anything raised by `tune` or `score` (SystemExit included; only
KeyboardInterrupt passes) becomes a `PipelineError` (a ConfigError) naming the function, the
exception, the line, the game, its seed and its coin, carrying the user's traceback (which
survives pickling from a worker). A score must be a real number (a bool, int, float, or a
NumPy/torch scalar); None, a string, a longer array and NaN are refused (+-inf allowed). A
worker process imports only this module's light dependencies to play.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import importlib.util
import math
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from auditsel.errors import ConfigError
from auditsel.executor import in_game_thread
from auditsel.pipelines.canaries import Canary
from auditsel.pipelines.content_digest import content_digest

CHUNK_SIZE = 32  # games per checkpoint file and per task sent to a worker
#: tune(data, seed, canary) -> release: the user's whole tuning run, returning what it publishes
TuneFn = Callable[[Any, int, Canary], Any]
#: score(release, canary) -> a real number (a float, or a NumPy/torch scalar: `is_real_score`)
ScoreFn = Callable[[Any, Canary], Any]
#: module name -> file of the user's files imported by path (auditsel.pipelines.user_code),
#: under names a worker process cannot import by itself: a PipelineGame sent to a worker
#: carries them, and unpickling imports them there before the functions that live in them
USER_MODULES: dict[str, str] = {}


def import_by_path(name: str, path: str) -> Any:
    """Import the file `path` as the module `name` (once per process; one that fails to import
    leaves no trace in sys.modules or USER_MODULES)."""
    USER_MODULES[name] = path
    if name in sys.modules:
        return sys.modules[name]
    folder = str(Path(path).parent)
    if folder not in sys.path:
        sys.path.append(folder)  # last: a json.py there never shadows the standard library
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        USER_MODULES.pop(name, None)
        raise
    return module


def _import_files(pairs: tuple[tuple[str, str], ...]) -> None:
    for name, path in pairs:
        import_by_path(name, path)


class _ImportFiles:
    """Unpickled before the game's functions: imports the user's files in the worker."""

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        self.pairs = pairs

    def __reduce__(self) -> tuple[Any, ...]:
        return (_import_files, (self.pairs,))


def _rebuild_game(_imported: Any, *fields: Any) -> PipelineGame:
    return PipelineGame(*fields)


class PipelineError(ConfigError):
    """An exception raised by the user's `tune` or `score` (or a score that is not a number):
    the user's error, not auditsel's; the message names the function, the line and the game,
    and `user_traceback` holds the traceback of the user's exception ('' when there is none)."""

    def __init__(self, field: str, message: str, user_traceback: str = ""):
        super().__init__(field, message)
        self.user_traceback = user_traceback

    def __reduce__(self) -> tuple[Any, ...]:  # the traceback travels back from a worker too
        return (type(self), (self.field, self.message, self.user_traceback))


class DataChanged(PipelineError):
    """`data` or the canary changed during the games (`PipelineGame.digests`): refused as the
    replay check refuses it (`auditsel.pipelines.pipeline` raises its ReproducibilityError)."""


def function_name(fn: Any) -> str:
    """module.qualname of a function (or of a callable object's class); FILE.py:qualname for
    one of a file imported by path (as the user named it)."""
    target = fn if hasattr(fn, "__qualname__") else type(fn)
    module = getattr(target, "__module__", "?")
    name = getattr(target, "__qualname__", repr(fn))
    if module in USER_MODULES:
        return f"{Path(USER_MODULES[module]).name}:{name}"
    return f"{module}.{name}"


def no_proxy(observations: Any, /) -> NDArray[np.float64]:
    """The engine's proxy for a `PipelineGame`: never called (the game plays and scores its
    chunks itself, `PipelineGame.play`; `auditsel.games.engine.play_chunk`)."""
    raise NotImplementedError("a PipelineGame scores its own games: see PipelineGame.play")


def score_label(score: ScoreFn | None, canary: Canary) -> str:
    """How reports name the attack: the user's function, or the canary's default score."""
    return function_name(score) if score is not None else f"{type(canary).__name__} default score"


def game_seed(seed: int, game: int) -> int:
    """The seed handed to `tune` in game `game`: distinct for every game of an audit (< 2^32)."""
    start = int(np.random.SeedSequence(seed).generate_state(1, np.uint32)[0])
    return (start + game) % 2**32


_GAME_SEED = [0]  # the seed of the game this process plays now (for the import hook)


def _seed_torch(torch: Any, seed: int) -> None:
    # the CPU generator directly: torch.manual_seed also visits every device type (0.3 ms)
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


class _SeedTorchOnImport(importlib.abc.MetaPathFinder):
    """Seeds torch's generators with the current game's seed as soon as `import torch` ends
    (a `tune` that imports torch lazily draws from seeded generators in its first game too)."""

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch" or "torch" in sys.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _seed_torch(module, _GAME_SEED[0])

        loader.exec_module = exec_module
        return spec


_TORCH_HOOK = _SeedTorchOnImport()


def seed_globals(seed: int) -> None:
    """Seed the global generators of Python, NumPy and torch (loaded now, or when it is)."""
    _GAME_SEED[0] = seed
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 (the legacy global generator user code may draw from)
    torch = sys.modules.get("torch")
    if torch is not None:
        _seed_torch(torch, seed)
    elif _TORCH_HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _TORCH_HOOK)


def is_real_score(value: Any) -> str:
    """'' when `value` is a real number a score may be (see the module docstring), else what
    it is instead ('None', 'a str', 'an array of shape (3,)')."""
    if isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_)):
        return ""
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        size = int(np.prod(tuple(shape))) if len(shape) else 1
        kind = str(value.dtype)
        if size != 1:
            return f"an array of shape {tuple(shape)}"
        if "complex" in kind or not any(t in kind for t in ("float", "int", "bool")):
            return f"an array of dtype {kind}"
        return ""
    if value is None:
        return "None"
    return f"a {type(value).__name__}"


def shown_number(value: Any) -> str:
    """A number as the message shows it: a huge int by its digits' count, not all of them."""
    if isinstance(value, int) and abs(value) > 10**30:  # str() of 10**5000 itself raises
        return f"an int of about 10^{math.log10(abs(value)):.0f}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _where(err: BaseException) -> str:
    """file:line (function) of the innermost frame of the traceback in the user's code: outside
    auditsel and outside installed packages; the innermost frame when there is none."""
    frames = traceback.extract_tb(err.__traceback__)
    here = str(Path(__file__).resolve().parents[1])
    user = [
        f
        for f in frames
        if not str(Path(f.filename).resolve()).startswith(here)
        and "site-packages" not in f.filename
        and "dist-packages" not in f.filename
        and not f.filename.startswith("<frozen")
    ]
    if not frames:
        return "?"
    frame = (user or frames)[-1]
    return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"


def describe_exception(err: BaseException) -> str:
    """The exception as one short line: `SystemExit(3)` says it exited, with its code."""
    if isinstance(err, SystemExit):
        return (
            f"SystemExit({err.code!r}) (it called sys.exit or exit(), e.g. through argparse "
            f"parsing auditsel's command line: a function to audit must return, not exit)"
        )
    text = " ".join(str(err).split())
    text = text if len(text) <= 300 else text[:297] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def user_traceback(err: BaseException) -> str:
    """The traceback of an exception raised in the user's code, as text."""
    return "".join(traceback.format_exception(type(err), err, err.__traceback__))


def probe_call(role: str, fn: Callable[..., Any], what: str, *args: Any) -> Any:
    """`fn(*args)` outside the games (a probe run): anything it raises, SystemExit included
    (a user's sys.exit is an exception in their code, never auditsel's exit), becomes a
    PipelineError naming the function, where it raised and `what` the run was; only
    KeyboardInterrupt passes. A child the function forked that leaves it ends there
    (`_leave_forked_child`)."""
    pid = os.getpid()
    try:
        value = fn(*args)
    except KeyboardInterrupt:
        raise
    except BaseException as err:
        _leave_forked_child(pid, err)
        raise PipelineError(
            role,
            f"{function_name(fn)} raised {describe_exception(err)} at {_where(err)} in {what}",
            user_traceback(err),
        ) from None
    _leave_forked_child(pid, None)
    return value


def _leave_forked_child(pid: int, err: BaseException | None) -> None:
    """In a process the user's code forked (its pid is not `pid`, the caller's), returning or
    raising out of their function: the child exits here, at once (`os._exit`, with the code of
    its sys.exit, else 0, or 1 for an exception), so that it never runs the audit's code, its
    cleanup above all (which would delete the parent's folders)."""
    if os.getpid() == pid:
        return
    code = 0
    if isinstance(err, SystemExit):
        code = err.code if isinstance(err.code, int) else (0 if err.code is None else 1)
    elif err is not None:
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


class _Clock:
    """CPU seconds of the games played in this process (so that each game counts once)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds


LOCAL_CPU = _Clock()


@dataclass(frozen=True, eq=False)
class PipelineGame:
    """The distinguishing game around a user pipeline, as a protocol of the game engine: it
    plays whole chunks itself (`play`), one stream per game (module docstring)."""

    tune: TuneFn
    score: ScoreFn
    data: Any
    canary: Canary
    chunk_size: int = CHUNK_SIZE
    fields: tuple[str, ...] = ()  # score() returns one number per field (release_scores)
    #: (data's, canary's) content digests, which every chunk must leave unchanged, wherever it
    #: plays (a worker's copy too); () checks nothing (accept_nondeterminism)
    digests: tuple[str, ...] = ()
    parallel_prefer = None  # joblib's default: loky processes (user code holds the GIL)
    progress_unit = "game"  # what the engine's progress bar counts

    @property
    def columns(self) -> int:
        """Columns of a chunk's scores: the (first) score, the CPU seconds, the other fields."""
        return 2 + max(len(self.fields) - 1, 0)

    def __reduce__(self) -> tuple[Any, ...]:  # to a worker: the user's files are imported first
        values = (getattr(self, f.name) for f in dataclasses.fields(self))
        return (_rebuild_game, (_ImportFiles(tuple(USER_MODULES.items())), *values))

    def play_one(self, seed: int, game: int) -> tuple[int, Any, float]:
        """(coin, score, CPU seconds) of one game (the score: an array, one entry per field,
        when the game scores fields)."""
        start = time.process_time()
        member, release, value = self.release_and_score(seed, game)
        del release
        cpu = time.process_time() - start
        LOCAL_CPU.add(cpu)
        return member, value, cpu

    def release_and_score(self, seed: int, game: int) -> tuple[int, Any, Any]:
        """The coin, the release and the score of game `game` (what `play_one` plays; the
        replay check compares releases and scores)."""
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(game,)))
        member = int(rng.integers(0, 2))
        user_seed = game_seed(seed, game)
        bound = self.canary.for_game(member == 1, rng)
        data = bound.prepare(self.data)
        seed_globals(user_seed)
        where = f"game {game} (seed {user_seed}, canary {'in' if member else 'out'})"
        release = probe_call("tune", self.tune, where, data, user_seed, bound)
        raw = probe_call("score", self.score, where, release, self.canary)
        return member, release, self._checked(raw, f"in game {game} (seed {user_seed})")

    def _checked(self, raw: Any, where: str) -> Any:
        """The score `raw` as a float (an array, one per field), or a PipelineError."""
        returned = f"{function_name(self.score)} returned"
        if self.fields:  # one number per released field (release_scores.FieldScores)
            try:
                array = np.asarray(raw, dtype=np.float64)
            except (OverflowError, TypeError, ValueError) as err:
                raise PipelineError(
                    "score", f"{returned} no float64 numbers {where}: {describe_exception(err)}"
                ) from None
            if np.any(np.isnan(array)):
                bad = self.fields[int(np.flatnonzero(np.isnan(array))[0])]
                raise PipelineError(
                    "score",
                    f"the released field {bad!r} is NaN {where}; "
                    f"a field scored by default must be a number (or pass your own score)",
                )
            return array
        what = is_real_score(raw)
        if what:
            raise PipelineError(
                "score",
                f"{returned} {what} {where}; a score must be one real number (+-inf allowed)",
            )
        try:
            value = float(raw.item() if hasattr(raw, "item") else raw)  # an array of one number
        except (OverflowError, TypeError, ValueError):  # an int past float64 (10**400)
            raise PipelineError(
                "score",
                f"{returned} {shown_number(raw)} {where}, beyond float64 (about 1.8e308); a score "
                f"must be one real number (+-inf allowed)",
            ) from None
        if math.isnan(value):
            raise PipelineError(
                "score", f"{returned} NaN {where}; a score must be a number (+-inf allowed)"
            )
        return value

    def release(self, member: np.ndarray, rng: np.random.Generator, /) -> Any:
        """Not used: the engine calls `play`, so that each game draws its own coin."""
        raise NotImplementedError("PipelineGame plays whole chunks: see play()")

    def play(self, seed: int, index: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Games index * chunk_size, ... of one chunk: scores (size, 2): the score and the CPU
        seconds of each game, and the coins."""
        out = np.empty((size, self.columns), dtype=np.float64)
        member = np.empty(size, dtype=np.int8)
        start = index * self.chunk_size
        in_game_thread()  # this thread's OpenMP and torch threads within the audit's limit
        for j in range(size):
            member[j], value, out[j, 1] = self.play_one(seed, start + j)
            if self.fields:
                out[j, 0], out[j, 2:] = value[0], value[1:]
            else:
                out[j, 0] = value
        self._check_unchanged(start, start + size - 1)
        return out, member

    def _check_unchanged(self, first: int, last: int) -> None:
        """`DataChanged` when `data` or the canary no longer has its digest after games
        first..last: a `tune` that changes them in place, caught in whichever process played
        (a worker changes only its own copy, which the audit's process never sees)."""
        changed = changed_inputs(self, self.digests)
        if changed:
            raise DataChanged(
                "tune",
                f"in-place mutation: {' and '.join(changed)} changed during games {first}-{last} "
                f"of the audit; fix: copy `data` or the canary before changing them",
            )


def changed_inputs(game: PipelineGame, digests: tuple[str, ...]) -> list[str]:
    """Which of the game's data and canary no longer have their content digests `digests`
    (none checked when `digests` is ())."""
    pairs = zip(("data", "canary"), digests, (game.data, game.canary))
    return [what for what, before, value in pairs if content_digest(value, what) != before]


def field_columns(scores: np.ndarray) -> np.ndarray:
    """The field scores of a chunk table (games, columns): column 0, then columns 2.. (column
    1 holds the CPU seconds)."""
    return np.concatenate([scores[:, :1], scores[:, 2:]], axis=1)
