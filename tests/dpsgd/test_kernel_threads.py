"""How the CPU kernels use threads (issue 29): the split over threads chosen by measuring both
ways, pieces shared with the calling thread (on torch's OpenMP threads, or our pool), neither
changing a single bit, and threads that sleep when no work comes."""

from __future__ import annotations

import multiprocessing
import sys
import time

import numpy as np
import pytest
import torch

from auditsel.dpsgd import kernels


def test_chooser_measures_both_ways_then_keeps_the_cheaper_and_probes_the_other():
    c = kernels._Chooser()
    warm = []
    for i in range(2 * (c.WINDOW + 1)):  # both ways alternately, the split first
        way = c.split()
        warm.append(way)
        # the first timing of each way is a warm-up: dropped (else the split would lose)
        c.record(way, (1.0 if i < 2 else (0.010 if way else 0.002)), 100)
    assert warm == [True, False] * (c.WINDOW + 1)
    assert (c.cost(True), c.cost(False)) == (0.010 / 100, 0.002 / 100)
    assert c.split() is False
    picks = [c.split() for _ in range(3 * c.PROBE)]  # no timings recorded: a probe each PROBE
    probes = [i for i, p in enumerate(picks) if p]
    assert len(probes) == 3 and np.all(np.diff(probes) == c.PROBE)


def test_one_slow_timing_does_not_switch_but_two_cheaper_probes_do():
    c = kernels._Chooser()
    play(c, 2 * (c.WINDOW + 1), {True: 0.001, False: 0.002})  # idle cores: the split pays
    assert c.split() is True
    c.record(True, 0.060, 100)  # one split that waited for the scheduler (a heavy tail)
    assert c.best() is True  # the median shrugs it off (a running mean switched here)
    picks = play(c, 200, {True: 0.004, False: 0.002})  # the load comes: the split costs more
    assert picks[-50:].count(True) <= 1  # followed within a few calls, then probes only
    picks = play(c, 300, {True: 0.001, False: 0.002})  # and goes
    first = picks.index(True)
    assert first <= c.MAX_PROBE and picks[first : first + 3] == [True] * 3  # probed twice
    assert picks[first:].count(False) <= 5  # then one thread only at the (rarer) probes


def play(c: kernels._Chooser, calls: int, cost: dict) -> list[bool]:
    """`calls` calls through the chooser, each way taking cost[way] seconds per 100 rows."""
    picks = []
    for _ in range(calls):
        way = c.split()
        c.record(way, cost[way], 100)
        picks.append(way)
    return picks


def test_probes_that_confirm_the_choice_come_less_often_and_a_change_is_followed():
    c = kernels._Chooser()
    slow_split = {True: 0.020, False: 0.002}  # a loaded machine: the split waits
    picks = play(c, 600, slow_split)
    probes = [i for i, p in enumerate(picks) if p][c.WINDOW + 1 :]  # after the warm-up
    gaps = np.diff(probes)
    assert list(gaps[:4]) == [32, 64, 128, 128]  # each confirming probe doubles the wait
    assert len(probes) <= 8  # 600 calls: at most 8 calls paid the slow way
    picks = play(c, 300, {True: 0.001, False: 0.002})  # the load is gone: the split is cheaper
    assert picks[-100:].count(False) <= 2  # followed: one thread only at the (rarer) probes


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture(params=["openmp", "pool"])
def split_way(request, monkeypatch):
    """A split on torch's OpenMP threads (skipped where that runtime is not found) or on our
    Python pool."""
    if request.param == "pool":
        monkeypatch.setattr(kernels, "_OPENMP", [None])
    elif kernels._openmp() is None:
        pytest.skip("torch's OpenMP runtime (GOMP_parallel) is not found here")
    return request.param


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


def test_split_or_not_the_same_bits(two_threads, monkeypatch, split_way):
    args = inputs()
    out = {}
    for split in (True, False):
        monkeypatch.setattr(kernels._Chooser, "split", lambda self, s=split: s)
        out[split] = every_kernel(*args)
    for a, b in zip(out[True], out[False], strict=True):
        assert torch.equal(a, b)


def test_a_job_is_made_for_a_split_only(two_threads, monkeypatch, split_way):
    """The split's job (the call's addresses, for ``kernels_cpu.split_body``) is made when a
    call is split on torch's OpenMP threads, and not for a call on one thread or on the pool
    (each `.ctypes` address costs the call a microsecond or two)."""
    made = []
    job = kernels._job
    monkeypatch.setattr(kernels, "_job", lambda *a: made.append(a[0]) or job(*a))
    args = inputs()
    for split in (False, True):
        monkeypatch.setattr(kernels._Chooser, "split", lambda self, s=split: s)
        every_kernel(*args)
    assert made == ([0, 0, 1, 1, 1] if split_way == "openmp" else [])  # 2 draws, 3 passes


def test_the_openmp_split_runs_every_piece_once_on_the_team(two_threads, monkeypatch):
    """Each piece of runs is taken once (a piece that ran twice or never would leave a row
    not filled, or counted twice), by at most torch.get_num_threads() threads."""
    if kernels._openmp() is None:
        pytest.skip("torch's OpenMP runtime (GOMP_parallel) is not found here")
    from auditsel.dpsgd import kernels_cpu

    jobs = []
    run_split = kernels._run_split
    monkeypatch.setattr(kernels._Chooser, "split", lambda self: True)
    monkeypatch.setattr(  # the job each split ran (made only for a split)
        kernels, "_run_split", lambda *a: jobs.append(run_split(*a)) or jobs[-1]
    )
    keys = kernels.seed_keys(range(50))
    out = torch.full((50, 3, 70), float("nan"))
    kernels.draw(keys, 1, 0, 3, 70, False, out=out)
    assert not out.isnan().any()  # every row written
    (job,) = jobs
    pieces = job[kernels_cpu.JOB_PIECES]
    assert pieces == kernels.PIECES_PER_THREAD * 2
    assert job[kernels_cpu.JOB_DONE] == pieces and job[kernels_cpu.JOB_NEXT] >= pieces
    assert 1 <= job[kernels_cpu.JOB_BUSY] <= 2


def test_the_team_sleeps_after_its_spin_when_no_work_comes(two_threads, monkeypatch, split_way):
    """After a split, the other threads spin-wait for the next one only for a bounded time
    (libgomp's spin count for torch's OpenMP threads), then sleep: over half a second with no
    work, the whole process uses far less CPU time than one spinning thread would (0.5 s).
    (Measured on 2 cores at a load of 2: 7.5 ms; with OMP_WAIT_POLICY=active, where libgomp's
    threads spin for ever, 0.40 to 0.50 s.)"""
    monkeypatch.setattr(kernels._Chooser, "split", lambda self: True)
    keys = kernels.seed_keys(range(64))
    for _ in range(3):
        kernels.draw(keys, 1, 0, 5, 300, True)
    cpu = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - cpu < 0.15


def _draw_in_child(queue, keys):
    queue.put(kernels.draw(keys, 1, 0, 5, 300, True).numpy())  # numpy: torch.equal would fork


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the fork start method (Linux) is what is checked"
)
def test_a_child_forked_after_a_split_splits_on_its_own_pool(two_threads, monkeypatch):
    """libgomp blocks for ever in a child forked after the parent ran a parallel region (as
    torch's own operations do): a forked child splits on a pool of its own, same bits."""
    monkeypatch.setattr(kernels._Chooser, "split", lambda self: True)
    keys = kernels.seed_keys(range(64))
    want = kernels.draw(keys, 1, 0, 5, 300, True).numpy()  # on the OpenMP threads, if found
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_draw_in_child, args=(queue, keys))
    child.start()
    try:
        got = queue.get(timeout=60)
    finally:
        child.join(5)
        if child.exitcode is None:
            child.kill()
    assert np.array_equal(got, want)


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
        kernels._split_pieces(piece, 16, 2)
    assert all(0 <= r0 < r1 <= 16 for r0, r1 in seen)
    cover = np.zeros(16, int)
    kernels._split_pieces(lambda r0, r1: cover.__setitem__(slice(r0, r1), cover[r0:r1] + 1), 16, 2)
    assert cover.tolist() == [1] * 16  # every row once
