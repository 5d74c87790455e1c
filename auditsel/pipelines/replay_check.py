"""Reproducibility is checked, not assumed: a few games replayed before an audit.

Contract. An audit's numbers are a function of (seed, game) only if `tune` and `score` are: a
game's release must depend on its data, its seed and its canary and on nothing else. Before the
games, `check_replay` tests that on the audit's own pipeline:

1. In this process, game 0 is played twice, and game 1 once, each from its seed exactly as the
   audit plays it (`PipelineGame.release_and_score`). The two plays of game 0 must give the same
   score and the same release (compared by `content_digest`; a release that cannot be
   digested is compared by its score). Between plays the content digests of `data` and of the
   canary must not change. Whether `tune` drew from a global generator (Python's `random`,
   NumPy's legacy `np.random`, torch's default generator) is read off the generators' states.
2. With more than one worker (`jobs` != 1), games 0 and 1 are played once more through the
   audit's backend (two workers at once: loky processes, threads, or the dask cluster) and
   must give the scores of step 1.

Each difference is a hazard, named with its usual cause and fix:

* `unseeded randomness`: the two plays of game 0 differ (a generator made without the seed
  `tune` receives, the clock, a process id, a dict of ids...);
* `in-place mutation`: `data` or the canary changed during a game (the next game would see
  other data);
* `global generators under threads`: `tune` draws from a global generator and the games run on
  threads at once: the generators are shared, so per-game seeding cannot hold (processes are
  fine: each has its own);
* `thread races` / `worker state`: the backend's plays differ from this process's.

A hazard is refused (`ReproducibilityError`, a ConfigError: exit 2) unless the caller accepts
non-determinism knowingly (`accept=True`; the CLI's `--accept-nondeterministic`); then the
audit runs, and `ReplayReport.to_dict()` (result.json's `pipeline.reproducibility`) records
the hazards and that they were accepted. After the games, `check_unchanged` compares the
digests of `data` and of the canary with those taken before (a mutation during the audit, in
this process or in its threads).

Cost: three games in this process and, with workers, two more in the backend: about five games
and the digests of data and canary, whatever the audit's size (the measurement is in
docs/benchmarks/).
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from auditsel.errors import ConfigError
from auditsel.games.engine import run_game
from auditsel.pipelines.content_digest import content_digest
from auditsel.pipelines.game import PipelineGame, function_name, game_seed, seed_globals

__all__ = [
    "ReplayReport",
    "ReproducibilityError",
    "check_backend",
    "check_replay",
    "check_unchanged",
]

ACCEPT_HINT = (
    "to audit it anyway, knowingly, pass --accept-nondeterministic "
    "(audit_pipeline(accept_nondeterminism=True)); result.json records it"
)
FIXES = {
    "unseeded randomness": (
        "derive every random draw from the seed tune receives (np.random.default_rng(seed), "
        "torch.Generator().manual_seed(seed)), and read no clock, process id or object address"
    ),
    "in-place mutation": (
        "do not change `data` or the canary in tune: copy them first (np.array(x), "
        "tensor.clone(), copy.deepcopy)"
    ),
    "global generators under threads": (
        "draw from a generator seeded with `seed` instead of np.random / random / torch's "
        "global one, or run the games in processes (--backend loky, the default)"
    ),
    "thread races": (
        "make tune thread-safe (no shared mutable state, no global generators), or run the "
        "games in processes (--backend loky, the default)"
    ),
    "worker state": (
        "make tune depend on its arguments only, not on state of the process that runs it "
        "(module-level caches, environment variables, files written by earlier games)"
    ),
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
    seconds: float
    data_digest: str
    canary_digest: str
    scores: tuple[float, ...] = ()  # games 0 and 1, played in this process

    def to_dict(self) -> dict:
        return {
            "checked": True,
            "games_replayed": list(self.games),
            "plays": self.plays,
            "hazards": list(self.hazards),
            "accepted_nondeterminism": self.accepted,
            "uses_global_generators": self.global_generators,
            "seconds": round(self.seconds, 3),
        }


def _global_states() -> tuple:
    torch = sys.modules.get("torch")
    torch_state = bytes(torch.default_generator.get_state().numpy()) if torch else b""
    state = np.random.get_state()  # noqa: NPY002 (the legacy global generator is the question)
    return random.getstate(), (state[1].tobytes(), state[2:]), torch_state


def _release_digest(release: Any) -> str | None:
    try:
        return content_digest(release, "release")
    except ConfigError:
        return None  # compared by its score only


@dataclass(frozen=True)
class _Play:
    score: float
    release: str | None
    global_draws: bool


def _play(game: PipelineGame, seed: int, index: int) -> _Play:
    """One game, as the audit plays it, and whether it drew from a global generator."""
    _, release, value = game.release_and_score(seed, index)
    after = _global_states()
    # the states right after seeding: replay the seeding alone (no draws between)
    seed_globals(game_seed(seed, index))
    fresh = _global_states()
    return _Play(value, _release_digest(release), after != fresh)


def _hazard(name: str, detail: str) -> str:
    return f"{name}: {detail}; fix: {FIXES[name]}"


def _in_process(game: PipelineGame, seed: int, digests: tuple[str, str]):
    """The hazards of two plays of game 0, whether they drew from a global generator, and
    game 0's score."""
    hazards = []
    first = _play(game, seed, 0)
    changed = [
        what
        for what, before, value in (
            ("data", digests[0], game.data),
            ("canary", digests[1], game.canary),
        )
        if content_digest(value, what) != before
    ]
    if changed:
        hazards.append(
            _hazard("in-place mutation", f"{' and '.join(changed)} changed during game 0")
        )
    second = _play(game, seed, 0)
    if (first.score, first.release) != (second.score, second.release):
        what = (
            f"scores {first.score!r} then {second.score!r}"
            if first.score != second.score
            else "the same score but different releases"
        )
        hazards.append(
            _hazard(
                "unseeded randomness",
                f"game 0 (seed {game_seed(seed, 0)}) played twice by {function_name(game.tune)} "
                f"gave {what}",
            )
        )
    return hazards, first.global_draws or second.global_draws, first.score


def check_replay(
    game: PipelineGame,
    seed: int,
    *,
    jobs: int = 1,
    backend: str | None = None,
    accept: bool = False,
) -> ReplayReport:
    """Step 1 of the module docstring (in this process); raises ReproducibilityError on a
    hazard unless `accept`. Step 2 is `check_backend`, inside the audit's backend."""
    start = time.perf_counter()
    digests = (content_digest(game.data, "data"), content_digest(game.canary, "canary"))
    hazards, global_draws, score0 = _in_process(game, seed, digests)
    score1 = _play(game, seed, 1).score
    if jobs != 1 and global_draws and backend == "threading":
        hazards.append(
            _hazard(
                "global generators under threads",
                f"{function_name(game.tune)} draws from a global generator (random, np.random "
                f"or torch) while several threads play games at once (--jobs {jobs})",
            )
        )
    report = ReplayReport(
        games=(0, 1),
        plays=3,
        hazards=tuple(hazards),
        accepted=bool(accept and hazards),
        global_generators=global_draws,
        seconds=time.perf_counter() - start,
        data_digest=digests[0],
        canary_digest=digests[1],
        scores=(score0, score1),
    )
    _refuse_unless(report, accept)
    return report


def check_backend(
    game: PipelineGame,
    seed: int,
    report: ReplayReport,
    *,
    jobs: int,
    backend: str | None,
    accept: bool = False,
) -> ReplayReport:
    """Step 2 of the module docstring: games 0 and 1 on two workers of the audit's backend
    (`backend`: what `auditsel.games.backends.execution_backend` yields), compared with this
    process's plays. Nothing to do with one worker."""
    if jobs == 1:
        return report
    start = time.perf_counter()
    one = replace(game, chunk_size=1)
    record = run_game(
        one, one.score, 2, seed, chunk_size=1, jobs=2, backend=backend, progress=False, unit="game"
    )
    assert record.scores is not None
    got = tuple(float(v) for v in record.scores[:, 0])
    hazards = list(report.hazards)
    if got != report.scores:
        name = "thread races" if backend == "threading" else "worker state"
        where = {"threading": "two threads"}.get(str(backend), f"two {backend or 'loky'} workers")
        hazards.append(
            _hazard(
                name,
                f"games 0 and 1 gave scores {list(report.scores)} in this process "
                f"and {list(got)} on {where}",
            )
        )
    report = replace(
        report,
        plays=report.plays + 2,
        hazards=tuple(hazards),
        accepted=bool(accept and hazards),
        seconds=report.seconds + time.perf_counter() - start,
    )
    _refuse_unless(report, accept)
    return report


def _refuse_unless(report: ReplayReport, accept: bool) -> None:
    if report.hazards and not accept:
        raise ReproducibilityError(
            "tune",
            "not reproducible, so the audit would not be a function of its seed: "
            + " | ".join(report.hazards)
            + f"; {ACCEPT_HINT}",
        )


def check_unchanged(game: PipelineGame, report: ReplayReport) -> list[str]:
    """The hazards of a `data` or canary changed during the audit (compared with the digests
    taken before the games)."""
    changed = [
        what
        for what, before, value in (
            ("data", report.data_digest, game.data),
            ("canary", report.canary_digest, game.canary),
        )
        if content_digest(value, what) != before
    ]
    if not changed:
        return []
    return [_hazard("in-place mutation", f"{' and '.join(changed)} changed during the audit")]
