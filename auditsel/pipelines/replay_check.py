"""Reproducibility is checked, not assumed: a few games replayed before an audit.

Contract. An audit's numbers are a function of (seed, game) only if `tune` and `score` are: a
game's release must depend on its data, its seed and its canary and on nothing else. Before the
games, `check_replay` tests that on the audit's own pipeline:

1. Two games (the first whose coin puts the canary in and the first that leaves it out:
   `replay_games`) are played twice each, exactly as the audit plays them
   (`PipelineGame.release_and_score`), where the audit's games run (this process with one job
   or threads, a worker with loky or dask). The two plays of a game must give the same score
   and release (by `content_digest`; an undigestible release by its score), and the digests of
   `data` and the canary must not change. Draws from a global generator (Python's `random`,
   NumPy's legacy `np.random`, torch's default generator) are read off the generators' states.

2. With more than one worker (`jobs` != 1), the two games are played once more elsewhere at the
   same time (two threads, or a second worker) and must give the scores of step 1.

Each difference is a hazard, named with its usual cause and fix (`FIXES`): `unseeded
randomness` (the two plays differ), `in-place mutation` (`data` or the canary changed),
`global generators under threads` (shared by the games that run at once: per-game seeding
cannot hold; processes each have their own), `thread races` / `worker state` (the backend's
plays differ from this process's).

A hazard is refused (`ReproducibilityError`, a ConfigError: exit 2) unless the caller accepts
non-determinism knowingly (`accept=True`; the CLI's `--accept-nondeterministic`); then the
audit runs, and `ReplayReport.to_dict()` (result.json's `pipeline.reproducibility`) records
the hazards. After the games, `check_unchanged` compares the digests of `data` and the canary
with those taken before. Cost: four plays (six with workers) and the digests, whatever the
audit's size.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditsel.errors import ConfigError
from auditsel.executor import in_game_thread, run_ordered
from auditsel.pipelines.content_digest import content_digest
from auditsel.pipelines.game import PipelineGame, changed_inputs, game_seed, seed_globals
from auditsel.pipelines.pipeline_result import ReproducibilityEntry

ACCEPT_HINT = (
    "to audit it anyway, knowingly: --accept-nondeterministic "
    "(ExecutionOptions(accept_nondeterminism=True)), recorded in result.json"
)
FIXES = {
    "unseeded randomness": "draw only from generators seeded with `seed` "
    "(np.random.default_rng(seed)); read no clock or process id",
    "in-place mutation": "copy `data` or the canary before changing them",
    "global generators under threads": "draw from np.random.default_rng(seed), not np.random/"
    "random/torch's global generator, or use processes (--backend loky)",
    "thread races": "share no mutable state between games, or use processes (--backend loky)",
    "worker state": "make tune depend on its arguments only (no module caches, files or "
    "environment left by earlier games)",
}


class ReproducibilityError(ConfigError):
    """The pipeline gave different numbers for the same game: the audit would not be a
    function of its seed. The message names the hazard and the fix."""


@dataclass(frozen=True)
class ReplayReport:
    """What `check_replay` found (result.json's `pipeline.reproducibility`)."""

    games: tuple[int, ...]
    plays: int  # games played by the check (in this process and in the backend)
    hazards: tuple[str, ...]  # one line per hazard found ('' none)
    accepted: bool  # hazards were accepted by the caller
    global_generators: bool  # tune drew from a global generator
    seconds: float  # wall, start-up of the workers included (the games reuse them)
    data_digest: str
    canary_digest: str
    scores: tuple[float, ...] = ()  # the replayed games' scores (step 1)
    play_cpu_seconds: float = 0.0  # CPU of the replay's plays (where they ran; no start-up)

    def to_dict(self) -> ReproducibilityEntry:
        """result.json's `pipeline.reproducibility`."""
        return ReproducibilityEntry(
            checked=True,
            games_replayed=list(self.games),
            plays=self.plays,
            hazards=list(self.hazards),
            accepted_nondeterminism=self.accepted,
            uses_global_generators=self.global_generators,
            seconds=round(self.seconds, 3),
            play_cpu_seconds=round(self.play_cpu_seconds, 3),
        )


def _global_states() -> tuple[Any, ...]:
    torch = sys.modules.get("torch")
    torch_state = bytes(torch.default_generator.get_state().numpy()) if torch else b""
    state: Any = np.random.get_state()  # noqa: NPY002 (the legacy global generator is the question)
    return random.getstate(), (state[1].tobytes(), state[2:]), torch_state


def _release_digest(release: Any) -> str | None:
    try:
        return content_digest(release, "release")
    except ConfigError:
        return None  # compared by its score only


@dataclass(frozen=True)
class _Play:
    score: Any  # a float, or a tuple of floats (one per released field)
    release: str | None
    global_draws: bool


def _comparable(value: Any) -> Any:
    """A score as compared between plays: an array (one per field) as a tuple of floats."""
    if isinstance(value, np.ndarray):
        return tuple(value.tolist())
    return value


def _play(game: PipelineGame, seed: int, index: int) -> _Play:
    """One game, as the audit plays it, and whether it drew from a global generator."""
    _, release, value = game.release_and_score(seed, index)
    after = _global_states()
    # the states right after seeding: replay the seeding alone (no draws between)
    seed_globals(game_seed(seed, index))
    fresh = _global_states()
    return _Play(_comparable(value), _release_digest(release), after != fresh)


def _hazard(name: str, detail: str) -> str:
    return f"{name}: {detail}; fix: {FIXES[name]}"


def replay_games(seed: int, count: int = 64) -> tuple[int, ...]:
    """The games the check replays: the first whose coin puts the canary in and the first
    whose coin leaves it out (game 0 and 1 when among the first `count` there is one coin
    only)."""
    coins = [
        int(np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(g,))).integers(0, 2))
        for g in range(count)
    ]
    if 0 in coins and 1 in coins:
        return tuple(sorted((coins.index(1), coins.index(0))))
    return (0, 1)


def _serial(
    game: PipelineGame, seed: int, games: tuple[int, ...], digests: tuple[str, str]
) -> tuple[list[str], bool, tuple[Any, ...], float]:
    """Step 1, in whichever process runs it (this one, or a worker): the hazards of two plays of
    each game, whether a play drew from a global generator, the scores and the CPU seconds."""
    in_game_thread()  # the threads the games get (auditsel.executor)
    start = time.process_time()
    hazards: list[str] = []
    scores: list[Any] = []
    global_draws = False
    for index in games:
        first, second = _play(game, seed, index), _play(game, seed, index)
        global_draws = global_draws or first.global_draws or second.global_draws
        scores.append(first.score)
        if (first.score, first.release) != (second.score, second.release) and not hazards:
            what = (
                f"scores {first.score!r} then {second.score!r}"
                if first.score != second.score
                else "one score but two different releases"
            )
            hazards.append(
                _hazard(
                    "unseeded randomness",
                    f"game {index} (seed {game_seed(seed, index)}) played twice gave {what}",
                )
            )
    changed = changed_inputs(game, digests)
    if changed:
        hazards.insert(
            0, _hazard("in-place mutation", f"{' and '.join(changed)} changed during a game")
        )
    return hazards, global_draws, tuple(scores), time.process_time() - start


def _once(game: PipelineGame, seed: int, games: tuple[int, ...]) -> tuple[tuple[Any, ...], float]:
    """The scores of `games`, each played once (step 2), and the CPU seconds."""
    in_game_thread()
    start = time.process_time()
    scores = tuple(_comparable(game.release_and_score(seed, g)[2]) for g in games)
    return scores, time.process_time() - start


def check_replay(
    game: PipelineGame,
    seed: int,
    *,
    jobs: int = 1,
    backend: str | None = None,
    accept: bool = False,
) -> ReplayReport:
    """The replay check of the module docstring; raises ReproducibilityError on a hazard
    unless `accept`. `backend` is what `auditsel.executor.execution_backend` yields: with loky
    or dask workers step 1 runs on a worker (this process never pays the pipeline's start-up)
    while a second worker plays step 2."""
    start = time.perf_counter()
    digests = (content_digest(game.data, "data"), content_digest(game.canary, "canary"))
    games = replay_games(seed)
    other: tuple[float, ...] | None = None
    if jobs == 1 or backend == "threading":
        hazards, global_draws, scores, cpu = _serial(game, seed, games, digests)
        if jobs != 1:  # two threads at once, one game each (CPU: this process's, above)
            parts = run_ordered(
                [(_once, (game, seed, (g,))) for g in games], jobs=2, backend=backend
            )
            other = tuple(v for part, _ in parts for v in part)
    else:
        first, (other, other_cpu) = run_ordered(
            [(_serial, (game, seed, games, digests)), (_once, (game, seed, games))],
            jobs=2,
            backend=backend,
        )
        hazards, global_draws, scores, cpu = first
        cpu += other_cpu
    hazards = [*hazards, *_parallel_hazards(games, (scores, other), jobs, backend, global_draws)]
    report = ReplayReport(
        games=games,
        plays=2 * len(games) + (len(games) if other is not None else 0),
        hazards=tuple(hazards),
        accepted=bool(accept and hazards),
        global_generators=global_draws,
        seconds=time.perf_counter() - start,
        data_digest=digests[0],
        canary_digest=digests[1],
        scores=scores,
        play_cpu_seconds=cpu,
    )
    if hazards and not accept:
        more = f" (and {len(hazards) - 1} more)" if len(hazards) > 1 else ""
        raise ReproducibilityError("tune", f"not reproducible: {hazards[0]}{more}; {ACCEPT_HINT}")
    return report


def _parallel_hazards(
    games: tuple[int, ...],
    plays: tuple[tuple[Any, ...], tuple[Any, ...] | None],
    jobs: int,
    backend: str | None,
    global_draws: bool,
) -> list[str]:
    """The hazards of playing in parallel: the games scored otherwise by a second thread or
    worker (`plays`: the scores of step 1 and of step 2, None when not played), and a global
    generator drawn from under threads."""
    scores, other = plays
    hazards = []
    if other is not None and other != scores:
        name = "thread races" if backend == "threading" else "worker state"
        where = "two threads" if backend == "threading" else f"two {backend or 'loky'} workers"
        hazards.append(
            _hazard(name, f"games {list(games)} scored {list(scores)} and {list(other)} on {where}")
        )
    if jobs != 1 and global_draws and backend == "threading":
        hazards.append(
            _hazard(
                "global generators under threads",
                f"tune draws from a global generator while {jobs} threads play games at once",
            )
        )
    return hazards


def check_unchanged(game: PipelineGame, report: ReplayReport) -> list[str]:
    """The hazards of a `data` or canary changed during the audit (compared with the digests
    taken before the games)."""
    changed = changed_inputs(game, (report.data_digest, report.canary_digest))
    if not changed:
        return []
    return [_hazard("in-place mutation", f"{' and '.join(changed)} changed during the audit")]
