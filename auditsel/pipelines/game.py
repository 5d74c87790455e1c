"""One game around a user pipeline, and what it needs in a worker process (light imports).

Contract. Game g of an audit with seed `seed` draws everything from its own stream
rng_g = Generator(SeedSequence(seed, spawn_key=(g,))): first its coin b (member = 1: the canary
is in), then the canary's own draws. `tune` gets the seed s_g = game_seed(seed, g), distinct
for every game of an audit (< 2^32, so that any library accepts it), and the global generators
of Python, NumPy and torch (when loaded) are seeded with s_g first. One game is

    release = tune(canary.prepare(data), s_g, canary.for_game(b, rng_g))
    score_g = score(release, canary)        # the unbound canary: the attack never sees b

`PipelineGame.play(seed, index, size)` plays the games index * chunk_size, ... of one chunk of
the game engine (`auditsel.games.engine`) and returns their scores, CPU seconds and coins.
An exception raised by `tune` or `score` becomes a `PipelineError` (a ConfigError) naming the
function, the line where it raised, the game, its seed and its coin.

This module is what a worker process imports to play: numpy, the canaries and the thread
limits (`auditsel.games.worker_pool`) only.
"""

from __future__ import annotations

import math
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

from auditsel.errors import ConfigError
from auditsel.games.worker_pool import in_game_thread
from auditsel.pipelines.canaries import Canary

__all__ = [
    "CHUNK_SIZE",
    "LOCAL_CPU",
    "PipelineError",
    "PipelineGame",
    "function_name",
    "game_seed",
    "score_label",
]

CHUNK_SIZE = 32  # games per checkpoint file and per task sent to a worker


class PipelineError(ConfigError):
    """An exception raised by the user's `tune` or `score` (or a score that is not a number):
    the user's error, not auditsel's; the message names the function, the line and the game."""


def function_name(fn: Any) -> str:
    """module.qualname of a function (or of a callable object's class)."""
    target = fn if hasattr(fn, "__qualname__") else type(fn)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(fn))}"


def score_label(score: Callable | None, canary: Canary) -> str:
    """How reports name the attack: the user's function, or the canary's default score."""
    return function_name(score) if score is not None else f"{type(canary).__name__} default score"


def game_seed(seed: int, game: int) -> int:
    """The seed handed to `tune` in game `game`: distinct for every game of an audit (< 2^32)."""
    start = int(np.random.SeedSequence(seed).generate_state(1, np.uint32)[0])
    return (start + game) % 2**32


def _seed_globals(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 (the legacy global generator user code may draw from)
    torch = sys.modules.get("torch")  # seeded only when the pipeline has loaded it
    if torch is not None:
        # the CPU generator directly: torch.manual_seed also visits every device type (0.3 ms)
        torch.default_generator.manual_seed(seed)
        if torch.cuda.is_initialized():
            torch.cuda.manual_seed_all(seed)


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


def _user_error(role: str, fn: Any, game: int, seed: int, member: int, err: BaseException):
    text = " ".join(str(err).split())
    text = text if len(text) <= 300 else text[:297] + "..."
    return PipelineError(
        role,
        f"{function_name(fn)} raised {type(err).__name__} at {_where(err)} in game {game} "
        f"(seed {seed}, canary {'in' if member else 'out'}): {text}",
    )


class _Clock:
    """CPU seconds of the games played in this process (the audit's own process, or a worker):
    so that the audit counts each game's CPU once."""

    def __init__(self):
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

    tune: Callable
    score: Callable
    data: Any
    canary: Canary
    chunk_size: int = CHUNK_SIZE
    parallel_prefer = None  # joblib's default: loky processes (user code holds the GIL)
    fork_workers = True  # default backend on Linux: warm workers (auditsel.games.worker_pool)

    def play_one(self, seed: int, game: int) -> tuple[int, float, float]:
        """(coin, score, CPU seconds) of one game."""
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(game,)))
        member = int(rng.integers(0, 2))
        user_seed = game_seed(seed, game)
        bound = self.canary.for_game(member == 1, rng)
        data = bound.prepare(self.data)
        _seed_globals(user_seed)
        start = time.process_time()
        try:
            release = self.tune(data, user_seed, bound)
        except Exception as err:
            raise _user_error("tune", self.tune, game, user_seed, member, err) from None
        try:
            value = float(self.score(release, self.canary))
        except Exception as err:
            raise _user_error("score", self.score, game, user_seed, member, err) from None
        del release
        if math.isnan(value):
            raise PipelineError(
                "score",
                f"{function_name(self.score)} returned NaN in game {game} (seed {user_seed}); "
                f"a score must be a number (+-inf allowed)",
            )
        cpu = time.process_time() - start
        LOCAL_CPU.add(cpu)
        return member, value, cpu

    def release(self, member: np.ndarray, rng: np.random.Generator, /) -> Any:
        """Not used: the engine calls `play`, so that each game draws its own coin."""
        raise NotImplementedError("PipelineGame plays whole chunks: see play()")

    def play(self, seed: int, index: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Games index * chunk_size, ... of one chunk: scores (size, 2): the score and the CPU
        seconds of each game, and the coins."""
        out = np.empty((size, 2), dtype=np.float64)
        member = np.empty(size, dtype=np.int8)
        start = index * self.chunk_size
        in_game_thread()  # this thread's OpenMP and torch threads within the audit's limit
        for j in range(size):
            member[j], out[j, 0], out[j, 1] = self.play_one(seed, start + j)
        return out, member
