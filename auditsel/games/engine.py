"""The distinguishing game engine ([XWW24] Algorithm 1), chunked, seeded and resumable.

Each trial: the trainer flips a fair coin b, runs the protocol on X (b = 0) or X' (b = 1) and
releases an observation y; the adversary maps y to a real score (higher = "b = 1"). The engine
only records (score, b); turning those into epsilon is `auditsel.auditing.lower`'s job.

Contracts:

* protocol.release(member, rng) -> observations for a vector of coins (trainer side);

* proxy(observations) -> float scores (adversary side: it never sees the coins): one per trial
  (n,), or one row per trial of P proxies evaluated on the same releases (n, P).

Trials are cut into chunks of `chunk_size`; chunk i draws everything from
Generator(SeedSequence(seed, spawn_key=(i,))), so the scores do not depend on how chunks are
spread over joblib workers (or a dask/ray backend). Finished chunks are written atomically
(unique temporary names, then a rename) to `checkpoint_dir` once the game has played for
`checkpoint_after` seconds (`run_game`'s `execution.checkpoint_after`, default
`CHECKPOINT_AFTER` = 5; 0 = from the first chunk): then the chunks finished before, and every chunk after. A game shorter
than that writes none (a 10^7-game reduced game would write 90 MB to replay 0.3 s), so a kill
loses at most those first seconds; an interrupt (Ctrl-C, KeyboardInterrupt) writes the finished
chunks first, and a streamed game (`in_memory=False`) writes every chunk. Each chunk records
the experiment's fingerprint
and the identity of the code that computed them (`auditsel.games.fingerprint.code_identity`:
version, source digest, random-stream version); a rerun with the same fingerprint and code
loads them and runs only the missing ones, so an interrupted run resumes without losing or
repeating a trial. A chunk of another experiment or other code, or one that cannot be read, is
an error (`CheckpointError`, exit 2), and so is a second run on a folder in use (locked).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm  # the terminal bar (tqdm.auto also imports asyncio: 0.1 s)

from auditsel.errors import ConfigError
from auditsel.executor import ExecutionOptions, run_tasks
from auditsel.files import (
    FolderLock,
    atomic_write_bytes,
    folder_lock,
    open_regular,
    read_regular,
    temporary_beside,
)
from auditsel.games.fingerprint import code_identity, describe_change
from auditsel.roles import GameProtocol, Proxy

__all__ = [
    "GameRecord",
    "ChunkSource",
    "CheckpointError",
    "Checkpoints",
    "run_game",
    "chunk_rng",
    "default_jobs",
    "delete_checkpoints",
    "saving_every_chunk",
    "DEFAULT_CHUNK_SIZE",
]

DEFAULT_CHUNK_SIZE = 1 << 18  # 262,144 trials: ~2.4 MB of scores and coins per chunk
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 1 << 20  # a manifest is read at most this far (never /dev/zero to its end)
#: seconds a game plays before its chunks are written (see the module docstring)
CHECKPOINT_AFTER = 5.0


class CheckpointError(ConfigError):
    """A checkpoint that belongs to another experiment or cannot be read."""

    def __init__(self, message: str):
        super().__init__("", message)


@dataclass(frozen=True)
class GameRecord:
    scores: np.ndarray | None  # float64, one per trial, in trial order (None when streamed)
    member: np.ndarray | None  # int8 coins b
    resumed_chunks: int = 0
    chunks: ChunkSource | None = None  # the checkpointed chunks, read back one at a time


@dataclass(frozen=True)
class ChunkSource:
    """Finished chunks on disk, in trial order: what a streamed (bounded-memory) audit reads."""

    store: Checkpoints
    sizes: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def trials(self) -> int:
        return int(sum(self.sizes))

    def load(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        loaded = self.store.load(index, self.sizes[index])
        if loaded is None:
            raise CheckpointError(f"checkpoint {self.store.path(index)} disappeared during the run")
        return loaded

    def head(self, max_trials: int) -> tuple[np.ndarray, np.ndarray]:
        """The first chunks, up to about max_trials trials (for plots of a streamed run)."""
        scores, member, total = [], [], 0
        for i in range(len(self)):
            s, m = self.load(i)
            scores.append(s)
            member.append(m)
            total += len(s)
            if total >= max_trials:
                break
        return np.concatenate(scores), np.concatenate(member)


def chunk_rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


def _chunk_sizes(trials: int, chunk_size: int) -> list[int]:
    full, rest = divmod(trials, chunk_size)
    return [chunk_size] * full + ([rest] if rest else [])


def play_chunk(
    protocol: GameProtocol, proxy: Proxy, seed: int, index: int, size: int
) -> tuple[int, np.ndarray, np.ndarray]:
    """One chunk of trials: coins, releases, scores (runs inside a worker).

    A protocol with a `play(seed, index, size) -> (scores, member)` method plays the chunk
    itself (`auditsel.pipelines`: each game draws its coin from its own stream, so the numbers
    do not depend on the chunk size either); `proxy` is then unused."""
    play = getattr(protocol, "play", None)
    if play is not None:
        scores, member = play(seed, index, size)
        scores = np.asarray(scores, dtype=np.float64)
        member = np.asarray(member, dtype=np.int8)
    else:
        rng = chunk_rng(seed, index)
        member = rng.integers(0, 2, size=size, dtype=np.int8)
        observations = protocol.release(member, rng)
        scores = np.asarray(proxy(observations), dtype=np.float64)
    if scores.ndim not in (1, 2) or scores.shape[0] != size:
        raise RuntimeError(
            f"proxy returned shape {scores.shape}, expected ({size},) or ({size}, P)"
        )
    return index, scores, member


class Checkpoints:
    """Finished chunks on disk: chunk_NNNNNNN.npz (scores, member, the experiment's fingerprint,
    the index), written atomically under unique temporary names, and a manifest (fingerprint,
    chunk size, the code identity of `auditsel.games.fingerprint.code_identity`) that refuses a
    folder of another experiment or of other code. While open, the folder is locked
    (`auditsel.files.folder_lock`): a second writer is refused, not mixed in. `run_game` and
    the one-run audits resume from it."""

    def __init__(
        self,
        directory: Path,
        fingerprint: str,
        chunk_size: int,
        code: Mapping[str, str] | None = None,
    ):
        self.dir = directory
        self.fingerprint = fingerprint
        self.chunk_size = chunk_size
        self.code = dict(code) if code is not None else code_identity()
        # what each chunk records: the experiment and the code that computed it
        self.stamp = hashlib.sha256(
            json.dumps([fingerprint, self.code], sort_keys=True).encode()
        ).hexdigest()[:32]
        self._lock: FolderLock | None = None

    def open(self) -> None:
        """Create (or check) the folder and its manifest, and lock it until `close()`."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self._lock is None:
            self._lock = folder_lock(self.dir, "checkpoints")
        try:
            self._check_manifest()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _check_manifest(self) -> None:
        manifest = self.dir / MANIFEST
        expected = {
            "fingerprint": self.fingerprint,
            "chunk_size": self.chunk_size,
            "code": self.code,
        }
        if not manifest.exists():
            _create_exclusive(manifest, json.dumps(expected, sort_keys=True).encode())
        try:  # bounded, and never a FIFO or a device (a ConfigError is a ValueError)
            found = json.loads(read_regular(manifest, "checkpoints", MAX_MANIFEST_BYTES))
            if not isinstance(found, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as err:
            raise CheckpointError(
                f"checkpoint manifest {manifest} is unreadable ({type(err).__name__}); "
                f"delete {self.dir} to start over"
            ) from None
        if {k: found.get(k) for k in ("fingerprint", "chunk_size")} != {
            "fingerprint": self.fingerprint,
            "chunk_size": self.chunk_size,
        }:
            raise CheckpointError(
                f"checkpoints in {self.dir} belong to another experiment "
                f"(different config, seed or chunk size); use another --out "
                f"or delete {self.dir}"
            )
        if found.get("code") != self.code:
            raise CheckpointError(
                f"checkpoints in {self.dir} were computed by other code "
                f"({describe_change(found.get('code'), self.code)}); resuming would mix "
                f"the numbers of two versions: delete {self.dir} (or use another --out) "
                f"to start fresh"
            )

    def path(self, index: int) -> Path:
        return self.dir / f"chunk_{index:07d}.npz"

    def load(self, index: int, size: int) -> tuple[np.ndarray, np.ndarray] | None:
        path = self.path(index)
        if not path.exists():
            return None
        try:
            handle = open_regular(path, "checkpoints")  # a FIFO named chunk_*.npz: refused
        except (OSError, ConfigError) as err:
            raise CheckpointError(
                f"checkpoint {path} cannot be read ({err}); delete it to recompute that chunk"
            ) from None
        try:
            with handle, np.load(handle, allow_pickle=False) as data:
                scores, member = data["scores"], data["member"]
                fingerprint = str(data["fingerprint"])
                stored_index = int(data["index"])
        except Exception as err:
            raise CheckpointError(
                f"checkpoint {path} is corrupted ({type(err).__name__}); "
                f"delete it to recompute that chunk"
            ) from None
        if fingerprint != self.stamp or stored_index != index or scores.shape[:1] != member.shape:
            raise CheckpointError(
                f"checkpoint {path} does not belong to this experiment and code; "
                f"delete {self.dir} or use another --out"
            )
        if scores.shape[0] != size:
            return None  # the last, partial chunk of a run with another trial count: recompute
        return scores, member

    def save(self, index: int, scores: np.ndarray, member: np.ndarray) -> None:
        # a unique temporary name (two writers never share one), then an atomic rename
        with temporary_beside(self.path(index)) as (handle, _):
            np.savez(
                handle,
                scores=scores,
                member=member,
                fingerprint=np.array(self.stamp),
                index=np.array(index),
            )


#: what a checkpoint folder holds of auditsel's (`delete_checkpoints` removes these only)
CHECKPOINT_FILES = ("chunk_*.npz", MANIFEST, MANIFEST + ".new", "pipeline.json", "paused")
#: the subfolders of several canaries' checkpoints (`auditsel.pipelines.pipeline`)
CANARY_FOLDERS = "canary-*"


def delete_checkpoints(directory: str | Path, field: str = "--fresh") -> list[Path]:
    """Delete the checkpoints of `directory` (start over): its chunks, manifest and fingerprint
    files and their temporaries, also in its `canary-*` subfolders, while holding its lock (a
    folder in use by another run is a ConfigError naming `field`, and nothing is deleted).
    Only auditsel's own files go: anything else stays, and with it the folder; a folder left
    empty is removed unless it is a symbolic link (the link and its target folder stay).
    Returns the files deleted."""
    root = Path(directory)
    if not root.is_dir():
        return []
    folders = [root] + sorted(
        p for p in root.glob(CANARY_FOLDERS) if p.is_dir() and not p.is_symlink()
    )
    deleted: list[Path] = []
    for folder in folders:
        with folder_lock(folder, field):
            for entry in sorted(folder.iterdir()):
                if entry.is_symlink() or not entry.is_file():
                    continue
                name = entry.name
                if any(entry.match(pattern) for pattern in CHECKPOINT_FILES) or (
                    name.startswith(".") and name.endswith(".tmp")  # a killed writer's temporary
                ):
                    entry.unlink()
                    deleted.append(entry)
    for folder in reversed(folders):
        if not folder.is_symlink():
            with suppress(OSError):
                folder.rmdir()  # only when empty
    return deleted


def _create_exclusive(path: Path, data: bytes) -> None:
    """Write path once: the first of several concurrent writers wins, the others read it."""
    link = path.with_name(path.name + ".new")
    with suppress(FileNotFoundError):
        os.unlink(link)  # ours, left by a run killed here (the folder is locked)
    atomic_write_bytes(link, data)
    try:
        os.link(link, path)  # atomic, and fails when the file exists
    except FileExistsError:
        pass
    finally:
        with suppress(FileNotFoundError):
            os.unlink(link)


def run_game(
    protocol: GameProtocol,
    proxy: Proxy,
    trials: int,
    seed: int,
    *,
    execution: ExecutionOptions | None = None,
    checkpoints: Checkpoints | None = None,
    fingerprint: str = "",
    in_memory: bool = True,
) -> GameRecord:
    """Play `trials` games; returns scores and coins in trial order (deterministic in seed).

    `execution` (None: `ExecutionOptions()`) says where and how: its `chunk_size` (None:
    `DEFAULT_CHUNK_SIZE`), `jobs`, `backend`, `checkpoint_dir`, `progress` and
    `checkpoint_after`; the numbers are the same for any of them.
    With in_memory=False (needs checkpoints) nothing is kept: finished chunks stay on disk
    and the record's `chunks` reads them back one at a time, so memory is bounded by a chunk.
    `jobs` (joblib's convention, -1 all cores; `default_jobs(protocol)` is the CLI's choice
    when none is given). `checkpoint_dir`: a folder,
    whose checkpoints record `fingerprint` and the code the numbers depend on
    (`code_identity()`); or `checkpoints`, a `Checkpoints` naming its own fingerprint and code
    (not both); checkpoints of other code are refused (`CheckpointError`). The progress bar
    counts trials, named by the protocol's `progress_unit` ("trial" where it has none; a
    pipeline's games say "game"), advancing as each chunk finishes. `checkpoint_after`:
    the seconds a game plays before its chunks are written (None: `CHECKPOINT_AFTER`); inside
    `saving_every_chunk()`, every finished chunk is written at once.
    """
    ex = execution if execution is not None else ExecutionOptions()
    if checkpoints is not None and ex.checkpoint_dir is not None:
        raise ValueError("run_game: give execution.checkpoint_dir or checkpoints, not both")
    chunk_size = ex.chunk_size if ex.chunk_size is not None else DEFAULT_CHUNK_SIZE
    backend = ex.backend
    sizes = _chunk_sizes(int(trials), int(chunk_size))
    jobs = ex.jobs
    after = check_checkpoint_after(ex.checkpoint_after)  # refused before anything is written
    after = 0.0 if _EVERY_CHUNK.get() else after
    results = _Gathered(sizes, keep=in_memory)
    folder = checkpoints if checkpoints is not None else ex.checkpoint_dir
    store = _resumed(folder, fingerprint, int(chunk_size), sizes, results)
    if store is None and not in_memory:
        raise ValueError("run_game: in_memory=False needs checkpoints to stream chunks from")
    resumed = len(results.done)
    pending = [i for i in range(len(sizes)) if i not in results.done]

    bar = _progress(protocol, int(trials), sum(sizes[i] for i in results.done), ex.progress)
    saving = _Saving(store, results, after if in_memory else 0.0)
    prefer = getattr(protocol, "parallel_prefer", None)
    tasks = [(protocol, proxy, seed, i, sizes[i]) for i in pending]
    jobs = 1 if backend is None and len(tasks) <= 1 else jobs
    _play(tasks, (jobs, backend, prefer), results, saving, bar, store)
    # the chunks on disk (every one, unless a short game held them: then none is read back)
    source = ChunkSource(store, tuple(sizes)) if store is not None and not saving.held else None
    if not in_memory:
        return GameRecord(scores=None, member=None, resumed_chunks=resumed, chunks=source)
    scores, member = results.arrays()
    return GameRecord(scores=scores, member=member, resumed_chunks=resumed, chunks=source)


def _resumed(
    checkpoint_dir: str | Path | Checkpoints | None,
    fingerprint: str,
    chunk_size: int,
    sizes: list[int],
    results: _Gathered,
) -> Checkpoints | None:
    """The game's checkpoints (a folder's, under `fingerprint`, or the `Checkpoints` given),
    opened, with the chunks they hold put into `results`; None without a folder."""
    store = checkpoint_dir if isinstance(checkpoint_dir, Checkpoints) else None
    if isinstance(checkpoint_dir, (str, Path)):
        store = Checkpoints(Path(checkpoint_dir), fingerprint, chunk_size)
    if store is None:
        return None
    if store.chunk_size != chunk_size:
        raise ValueError("run_game: the Checkpoints' chunk size is not the game's")
    store.open()
    try:
        for index, size in enumerate(sizes):
            loaded = store.load(index, size)
            if loaded is not None:
                results.put(index, *loaded)
    except BaseException:
        store.close()
        raise
    return store


def _play(
    tasks: list[tuple[Any, ...]],
    where: tuple[int, str | None, str | None],
    results: _Gathered,
    saving: _Saving,
    bar: tqdm | _Lines,
    store: Checkpoints | None,
) -> None:
    """Play the pending chunks (`where`: jobs, backend, prefer), each put into `results`,
    saved and counted as it finishes; an interrupt keeps what finished; the bar and the
    checkpoints are closed after."""
    jobs, backend, prefer = where
    try:
        for index, scores, member in run_tasks(
            play_chunk, tasks, jobs=jobs, backend=backend, prefer=prefer
        ):
            results.put(index, scores, member)
            saving.finished(index, scores, member)
            bar.update(len(scores))
    except KeyboardInterrupt:
        saving.flush()  # an interrupt keeps what finished: the rerun resumes from there
        raise
    finally:
        bar.close()
        if store is not None:
            store.close()


_EVERY_CHUNK: ContextVar[bool] = ContextVar("auditsel_every_chunk", default=False)


@contextmanager
def saving_every_chunk(on: bool = True) -> Iterator[None]:
    """Within the block (when `on`), `run_game` writes each chunk to its checkpoint folder as
    soon as it finishes (an early-stopped audit's looks reuse every chunk of the earlier
    looks), not only once the game has played `CHECKPOINT_AFTER` seconds."""
    token = _EVERY_CHUNK.set(on)
    try:
        yield
    finally:
        _EVERY_CHUNK.reset(token)


#: seconds between two progress lines where stderr is no terminal (a log file, nohup, CI)
PROGRESS_EVERY = 30.0
PROGRESS_FIRST = 2.0  # the first line: after a chunk that ends past this (as the bar's delay)


def _progress(protocol: GameProtocol, total: int, done: int, on: bool) -> tqdm | _Lines:
    """The progress of `run_game`: tqdm's bar on a terminal; elsewhere (a log file, nohup, CI)
    a plain line at the first chunk past PROGRESS_FIRST seconds, then at most every
    PROGRESS_EVERY seconds."""
    unit = getattr(protocol, "progress_unit", "trial")
    if on and not _is_terminal(sys.stderr):
        return _Lines(total, done, unit)
    return tqdm(
        total=total,
        initial=done,
        unit=unit,
        unit_scale=True,
        delay=2.0,
        disable=not on,
        leave=False,
    )


def _is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):  # closed or replaced
        return False


class _Lines:
    """Progress as lines on stderr ("auditsel: 96 of 1,000 games, 12 s, about 110 s left"):
    one at the first chunk that ends PROGRESS_FIRST seconds in, then at most one every
    PROGRESS_EVERY seconds."""

    def __init__(self, total: int, done: int, unit: str) -> None:
        self.total, self.done, self.unit = total, done, unit
        self.start = time.perf_counter()
        self.last: float | None = None
        self.played = 0

    def update(self, n: int) -> None:
        self.done += n
        self.played += n
        now = time.perf_counter()
        since = now - (self.start if self.last is None else self.last)
        if since < (PROGRESS_FIRST if self.last is None else PROGRESS_EVERY):
            return
        self.last = now
        elapsed = now - self.start
        left = (self.total - self.done) * elapsed / self.played if self.played else 0.0
        print(
            f"auditsel: {self.done:,} of {self.total:,} {self.unit}s, {elapsed:.0f} s, about "
            f"{left:.0f} s left",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        pass


def check_checkpoint_after(seconds: float | None) -> float:
    """`CHECKPOINT_AFTER` for None, else `seconds` checked (a number >= 0)."""
    if seconds is None:
        return CHECKPOINT_AFTER
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ConfigError("checkpoint_after", f"must be a number of seconds >= 0, got {seconds!r}")
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ConfigError("checkpoint_after", f"must be a number of seconds >= 0, got {seconds!r}")
    return float(seconds)


class _Saving:
    """When `run_game` writes its finished chunks: held (in `_Gathered`) until the game has
    played `after` seconds, then written, those held first (see the module docstring)."""

    def __init__(self, store: Checkpoints | None, results: _Gathered, after: float) -> None:
        self.store, self.results, self.after = store, results, after
        self.start = time.perf_counter()
        self.held: list[int] = []

    def finished(self, index: int, scores: np.ndarray, member: np.ndarray) -> None:
        """A finished chunk (put in the results): held or written."""
        if self.store is None:
            return
        if time.perf_counter() - self.start < self.after:
            self.held.append(index)
            return
        self.flush()
        self.store.save(index, scores, member)

    def flush(self) -> None:
        """Write every chunk held."""
        if self.store is not None:
            for index in self.held:
                self.store.save(index, *self.results.chunk(index))
        self.held.clear()


class _Gathered:
    """The finished chunks' scores and coins, copied into one array each (in trial order) as
    they arrive: a chunk's own arrays are freed at once and their memory serves the next
    chunks, so the game touches fresh memory for its result alone (no list of chunks and no
    concatenation: 90 MB less of fresh pages at 10^7 games). `keep=False` (a streamed game)
    records which chunks are done and keeps nothing."""

    def __init__(self, sizes: Sequence[int], keep: bool) -> None:
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.keep = keep
        self.done: set[int] = set()
        self.scores: np.ndarray | None = None
        self.member: np.ndarray | None = None

    def put(self, index: int, scores: np.ndarray, member: np.ndarray) -> None:
        self.done.add(index)
        if not self.keep:
            return
        if self.scores is None or self.member is None:
            total = int(self.starts[-1])
            self.scores = np.empty((total, *np.shape(scores)[1:]), dtype=np.float64)
            self.member = np.empty(total, dtype=np.int8)
        a, b = int(self.starts[index]), int(self.starts[index + 1])
        self.scores[a:b] = scores
        self.member[a:b] = member

    def chunk(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, member) of a chunk put while keeping (views of the gathered arrays)."""
        assert self.scores is not None and self.member is not None
        a, b = int(self.starts[index]), int(self.starts[index + 1])
        return self.scores[a:b], self.member[a:b]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(scores, member) of every chunk (in memory: each chunk was put)."""
        assert len(self.done) == len(self.starts) - 1  # in memory: every chunk is kept
        if self.scores is None or self.member is None:  # no chunk: no trial
            return np.empty(0), np.empty(0, np.int8)
        return self.scores, self.member


def default_jobs(protocol: GameProtocol, backend: str | None = None) -> int:
    """The jobs of a game when none are given (`auditsel run` without --jobs): -1 (every
    usable core) for a protocol that plays in threads (its release is vectorised numpy, which
    frees the GIL: no process to start, nothing to pickle) when no backend is named, else 1 (a DP-SGD game's workers are
    processes, which pay only past some games)."""
    threads = backend is None and getattr(protocol, "parallel_prefer", None) == "threads"
    return -1 if threads else 1
