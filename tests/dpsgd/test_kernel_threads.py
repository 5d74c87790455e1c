"""How the CPU kernels use threads: the runs split over the calling thread and the executor's
pool (`executor.in_pieces`) by a fixed rule (at least `PIECES_PER_THREAD` runs per thread, up to torch's thread count), never changing
a single bit, and threads that sleep when no work comes."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from auditsel.dpsgd import kernels
from auditsel.executor import in_pieces


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def inputs(R=37, n=300, K=5):
    g = torch.Generator().manual_seed(3)
    z0 = torch.randn(R, K, n, generator=g) * 4
    label = torch.randint(0, K, (n,), generator=g)
    clip, a_sq = torch.rand(R, generator=g) + 0.5, torch.rand(n, generator=g) * 9 + 1
    weight = (torch.rand(R, n, generator=g) < 0.5).float()
    return kernels.seed_keys(range(R)), z0, label, clip, a_sq, weight


def every_kernel(keys, z0, label, clip, a_sq, weight) -> list[torch.Tensor]:
    """Both draws and the softmax pass plain, clipped and weighted: outputs and sq."""
    out = [kernels.draw(keys, 3, 5, 4, 333, normal) for normal in (True, False)]
    for kw in ({}, dict(clip=clip, a_sq=a_sq), dict(clip=clip, a_sq=a_sq, weight=weight)):
        z = z0.clone()
        out += [kernels.softmax_grad_(z, label, **kw), z]
    return out


def test_split_or_not_the_same_bits(two_threads):
    args = inputs()
    split = every_kernel(*args)  # 37 runs: two threads, pieces of 4 runs and more
    torch.set_num_threads(1)
    alone = every_kernel(*args)
    for a, b in zip(split, alone, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("runs, threads, split", [(37, 2, True), (7, 2, False), (37, 1, False)])
def test_the_runs_are_split_by_a_fixed_rule(monkeypatch, runs, threads, split):
    """Split where torch may use several threads and each gets PIECES_PER_THREAD runs."""
    calls = []
    pieces = kernels.in_pieces
    monkeypatch.setattr(kernels, "in_pieces", lambda *a: calls.append(a[1:3]) or pieces(*a))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        kernels.draw(kernels.seed_keys(range(runs)), 1, 0, 2, 16, True)
    finally:
        torch.set_num_threads(before)
    assert [(r, w) for r, w in calls if w >= 2] == ([(runs, 2)] if split else [])


def test_the_pool_sleeps_when_no_work_comes(two_threads):
    """After a split, the pool's threads wait for work without spinning: over half a second
    with no work, the whole process uses far less CPU time than one spinning thread would."""
    keys = kernels.seed_keys(range(64))
    for _ in range(3):
        kernels.draw(keys, 1, 0, 5, 300, True)
    cpu = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - cpu < 0.15


def test_softmax_arrays_of_the_wrong_rows_are_refused():
    z, label = torch.zeros(4, 3, 5), torch.zeros(5, dtype=torch.long)
    with pytest.raises(ValueError, match="weight: shape \\(4, 5\\)"):
        kernels.softmax_grad_(z, label, torch.ones(4), torch.ones(5), torch.ones(1, 5))
    with pytest.raises(ValueError, match="clip"):
        kernels.softmax_grad_(z, label, torch.ones(3), torch.ones(5))
    with pytest.raises(ValueError, match="a_sq"):
        kernels.softmax_grad_(z, label, torch.ones(4), torch.ones(2, 5))


def test_a_failing_piece_raises_in_the_caller(two_threads):
    seen = []

    def piece(r0, r1):
        seen.append((r0, r1))
        if r0 >= 8:
            raise RuntimeError("piece failed")

    with pytest.raises(RuntimeError, match="piece failed"):
        in_pieces(piece, 16, 2, 8)
    assert all(0 <= r0 < r1 <= 16 for r0, r1 in seen)
    cover = np.zeros(16, int)
    in_pieces(lambda r0, r1: cover.__setitem__(slice(r0, r1), cover[r0:r1] + 1), 16, 2, 8)
    assert cover.tolist() == [1] * 16  # every row once


def test_a_larger_pool_ends_the_smaller_one():
    """in_pieces keeps one pool for the next call; when a call needs more workers, the smaller
    pool it replaces is shut down (its threads end) instead of left idle until exit."""
    import auditsel.executor as ex

    cover = np.zeros(12, int)

    def mark(r0, r1):
        cover[r0:r1] += 1

    in_pieces(mark, 12, 2, 4)
    small = ex._PIECES_POOL
    if small is None or ex._PIECES_POOL_SIZE != 1:  # a larger pool from an earlier test: reset
        ex._PIECES_POOL, ex._PIECES_POOL_SIZE = None, 0
        in_pieces(mark, 12, 2, 4)
        small = ex._PIECES_POOL
    in_pieces(mark, 12, 3, 6)
    assert ex._PIECES_POOL is not small and ex._PIECES_POOL_SIZE == 2
    assert small is not None and small._shutdown  # ThreadPoolExecutor's flag, set by shutdown()
    assert set(cover.tolist()) == {cover[0]}  # every row as often as every other
