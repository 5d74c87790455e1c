"""Execution backends for the game: joblib's own (loky, threading) or a dask cluster.

Chunks are independent and seeded by (seed, chunk index) (see auditsel.games.engine), so every backend
gives the same numbers. `dask` runs the chunks on a dask.distributed cluster through joblib's
dask backend: the one at `scheduler` (e.g. tcp://10.0.0.5:8786), or a LocalCluster on loopback
started for the run. Dask is an optional extra: pip install "auditsel[dask]".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from auditsel.errors import ConfigError

__all__ = ["BACKENDS", "BackendError", "execution_backend"]

BACKENDS = ("loky", "threading", "dask")


class BackendError(ConfigError):
    """A backend that cannot be used here; the message says how to fix it."""

    def __init__(self, message: str):
        super().__init__("", message)


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
            client = Client(scheduler, timeout="10s")
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
