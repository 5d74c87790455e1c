"""How the CPU kernels use threads (issue 29): the split over threads chosen by measuring both
ways, pieces shared with the calling thread, and neither changing a single bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from auditsel.dpsgd import kernels


def test_chooser_measures_both_ways_then_keeps_the_cheaper_and_probes_the_other():
    c = kernels._Chooser()
    assert c.split() is True  # nothing measured: the split first
    c.record(True, 1.0, 100)  # the first timing of each way is a warm-up: dropped
    assert c.split() is True
    c.record(True, 0.010, 100)
    assert c.split() is False  # then one thread, its first timing dropped too
    c.record(False, 5.0, 100)
    assert c.split() is False
    c.record(False, 0.002, 100)
    assert c.cost == {True: 0.010 / 100, False: 0.002 / 100}
    picks = [c.split() for _ in range(3 * c.PROBE)]  # no timings recorded: a probe each PROBE
    probes = [i for i, p in enumerate(picks) if p]
    assert len(probes) == 3 and all((i + 5) % c.PROBE == 0 for i in probes)
    for _ in range(40):  # the split becomes the cheaper way: the running mean follows
        c.record(True, 0.0005, 100)
    assert c.cost[True] < c.cost[False]
    assert sum(c.split() for _ in range(c.PROBE)) == c.PROBE - 1


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
    probes = [i for i, p in enumerate(picks) if p][2:]  # after the two warm-up splits
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
