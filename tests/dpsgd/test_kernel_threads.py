"""How the CPU kernels use threads (issue 29): the split over threads chosen by measuring both
ways, pieces shared with the calling thread, and neither changing a single bit."""

from __future__ import annotations

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


@pytest.mark.parametrize("normal", [True, False])
def test_split_or_not_the_same_bits(two_threads, monkeypatch, normal):
    keys = kernels.seed_keys(range(37))
    g = torch.Generator().manual_seed(3)
    z0 = torch.randn(37, 5, 300, generator=g) * 4
    label = torch.randint(0, 5, (300,), generator=g)
    clip, a_sq = torch.rand(37) + 0.5, torch.rand(300, generator=g) * 9 + 1
    out = {}
    for split in (True, False):
        monkeypatch.setattr(kernels._Chooser, "split", lambda self, s=split: s)
        draws = kernels.draw(keys, 3, 5, 4, 333, normal)
        z = z0.clone()
        sq = kernels.softmax_grad_(z, label, clip=clip, a_sq=a_sq)
        out[split] = (draws, z, sq)
    for a, b in zip(out[True], out[False]):
        assert torch.equal(a, b)


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
