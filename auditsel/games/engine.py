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
spread over workers. Finished chunks are written atomically to `checkpoint_dir` once the game
has played `checkpoint_after` seconds (default `CHECKPOINT_AFTER`; 0 = from the first chunk):
a shorter game writes none, an interrupt writes the finished chunks first, and a streamed game
(`in_memory=False`) writes every chunk. Each chunk records the experiment's fingerprint and
the code's identity (`auditsel.games.fingerprint.code_identity`); a rerun with both the same
resumes with only the missing chunks. A chunk of another experiment or other code, or an
unreadable one, is a `CheckpointError` (exit 2), and so is a second run on a locked folder.
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
from tqdm import tqdm

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

DEFAULT_CHUNK_SIZE = 1 << 18
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 1 << 20  # a manifest is read at most this far
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
        reaching = int(np.searchsorted(np.cumsum(self.sizes), max_trials)) + 1
        parts = [self.load(i) for i in range(min(reaching, len(self)))]
        return np.concatenate([s for s, _ in parts]), np.concatenate([m for _, m in parts])


def chunk_rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


def _chunk_sizes(trials: int, chunk_size: int) -> list[int]:
    full, rest = divmod(trials, chunk_size)
    return [chunk_size] * full + ([rest] if rest else [])


def play_chunk(
    protocol: GameProtocol, proxy: Proxy, seed: int, index: int, size: int
) -> tuple[int, np.ndarray, np.ndarray]:
    """One chunk of trials: coins, releases, scores (runs inside a worker); a protocol with a
    `play(seed, index, size) -> (scores, member)` method plays the chunk itself."""
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
    """Finished chunks on disk: chunk_NNNNNNN.npz (scores, member, stamp, index) and a
    manifest (fingerprint, chunk size, code identity) that refuses a folder of another
    experiment or other code. While open, the folder is locked (a second writer is refused)."""

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
        same = {"fingerprint": self.fingerprint, "chunk_size": self.chunk_size}
        expected = {**same, "code": self.code}
        if not manifest.exists():
            _create_exclusive(manifest, json.dumps(expected, sort_keys=True).encode())
        try:  # a ConfigError is a ValueError
            found = json.loads(read_regular(manifest, "checkpoints", MAX_MANIFEST_BYTES))
            if not isinstance(found, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as err:
            raise CheckpointError(
                f"checkpoint manifest {manifest} is unreadable ({type(err).__name__}); "
                f"delete {self.dir} to start over"
            ) from None
        if {k: found.get(k) for k in same} != same:
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
            handle = open_regular(path, "checkpoints")
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
        with temporary_beside(self.path(index)) as (handle, _):
            np.savez(
                handle,
                scores=scores,
                member=member,
                fingerprint=np.array(self.stamp),
                index=np.array(index),
            )


#: what a checkpoint folder holds of auditsel's (`delete_checkpoints` removes these only)
_CHECKPOINT_FILES = ("chunk_*.npz", MANIFEST, MANIFEST + ".new", "pipeline.json", "paused")
#: the subfolders of several canaries' checkpoints (`auditsel.pipelines.pipeline`)
_CANARY_FOLDERS = "canary-*"


def delete_checkpoints(directory: str | Path, field: str = "--fresh") -> list[Path]:
    """Delete auditsel's checkpoint files (and their temporaries) in `directory` and its
    `canary-*` subfolders, each under its lock (a folder in use: ConfigError naming `field`);
    other files stay, and a folder left empty is removed unless a symbolic link. Returns the
    files deleted."""
    root = Path(directory)
    if not root.is_dir():
        return []
    folders = [root] + sorted(
        p for p in root.glob(_CANARY_FOLDERS) if p.is_dir() and not p.is_symlink()
    )
    deleted: list[Path] = []
    for folder in folders:
        with folder_lock(folder, field):
            for entry in sorted(folder.iterdir()):
                if entry.is_symlink() or not entry.is_file():
                    continue
                name = entry.name
                if any(entry.match(pattern) for pattern in _CHECKPOINT_FILES) or (
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

    `execution` (None: `ExecutionOptions()`): `chunk_size` (None: `DEFAULT_CHUNK_SIZE`),
    `jobs`, `backend`, `checkpoint_dir`, `progress`, `checkpoint_after`; the numbers are the
    same for any of them. Checkpoints come from `checkpoint_dir` (recording `fingerprint` and
    `code_identity()`) or `checkpoints` (not both). With in_memory=False (needs checkpoints)
    nothing is kept: the record's `chunks` reads the chunks back one at a time. Inside
    `saving_every_chunk()`, every finished chunk is written at once.
    """
    ex = execution if execution is not None else ExecutionOptions()
    if checkpoints is not None and ex.checkpoint_dir is not None:
        raise ValueError("run_game: give execution.checkpoint_dir or checkpoints, not both")
    chunk_size = ex.chunk_size if ex.chunk_size is not None else DEFAULT_CHUNK_SIZE
    sizes = _chunk_sizes(int(trials), int(chunk_size))
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
    jobs = 1 if ex.backend is None and len(tasks) <= 1 else ex.jobs
    _play(tasks, (jobs, ex.backend, prefer), results, saving, bar, store)
    # the chunks on disk (every one, unless a short game held them: then none is read back)
    source = ChunkSource(store, tuple(sizes)) if store is not None and not saving.held else None
    scores, member = results.arrays() if in_memory else (None, None)
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
    saved and counted as it finishes; an interrupt keeps what finished."""
    jobs, backend, prefer = where
    try:
        for index, scores, member in run_tasks(
            play_chunk, tasks, jobs=jobs, backend=backend, prefer=prefer
        ):
            results.put(index, scores, member)
            saving.finished(index, scores, member)
            bar.update(len(scores))
    except KeyboardInterrupt:
        saving.flush()
        raise
    finally:
        bar.close()
        if store is not None:
            store.close()


_EVERY_CHUNK: ContextVar[bool] = ContextVar("auditsel_every_chunk", default=False)


@contextmanager
def saving_every_chunk(on: bool = True) -> Iterator[None]:
    """Within the block (when `on`), `run_game` writes each chunk as soon as it finishes."""
    token = _EVERY_CHUNK.set(on)
    try:
        yield
    finally:
        _EVERY_CHUNK.reset(token)


#: seconds between two progress lines where stderr is no terminal (a log file, nohup, CI)
_PROGRESS_EVERY = 30.0
PROGRESS_FIRST = 2.0


def _progress(protocol: GameProtocol, total: int, done: int, on: bool) -> tqdm | _Lines:
    """The progress of `run_game`: tqdm's bar on a terminal, else `_Lines`."""
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
    """Progress as lines on stderr: one at the first chunk that ends PROGRESS_FIRST seconds
    in, then at most one every _PROGRESS_EVERY seconds."""

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
        if since < (PROGRESS_FIRST if self.last is None else _PROGRESS_EVERY):
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
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not (math.isfinite(seconds) and seconds >= 0)
    ):
        raise ConfigError("checkpoint_after", f"must be a number of seconds >= 0, got {seconds!r}")
    return float(seconds)


class _Saving:
    """Finished chunks held (in `_Gathered`) until the game has played `after` seconds, then
    written, those held first."""

    def __init__(self, store: Checkpoints | None, results: _Gathered, after: float) -> None:
        self.store, self.results, self.after = store, results, after
        self.start = time.perf_counter()
        self.held: list[int] = []

    def finished(self, index: int, scores: np.ndarray, member: np.ndarray) -> None:
        if self.store is None:
            return
        if time.perf_counter() - self.start < self.after:
            self.held.append(index)
            return
        self.flush()
        self.store.save(index, scores, member)

    def flush(self) -> None:
        if self.store is not None:
            for index in self.held:
                self.store.save(index, *self.results.chunk(index))
        self.held.clear()


class _Gathered:
    """The finished chunks' scores and coins, copied into one array each (in trial order) as
    they arrive; `keep=False` (a streamed game) records which chunks are done, nothing else."""

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
        assert self.scores is not None and self.member is not None
        a, b = int(self.starts[index]), int(self.starts[index + 1])
        return self.scores[a:b], self.member[a:b]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        assert len(self.done) == len(self.starts) - 1
        if self.scores is None or self.member is None:  # no chunk: no trial
            return np.empty(0), np.empty(0, np.int8)
        return self.scores, self.member


def default_jobs(protocol: GameProtocol, backend: str | None = None) -> int:
    """The jobs of a game when none are given: -1 (every core) for a protocol that plays in
    threads when no backend is named, else 1."""
    threads = backend is None and getattr(protocol, "parallel_prefer", None) == "threads"
    return -1 if threads else 1
