"""The audit's large sorts (`auditsel.auditing.score_sort`): the helper interpreter's sort is
np.sort's, value for value; anything that goes wrong in it falls back to np.sort; the CPU test
reads /proc/cpuinfo as documented."""

from __future__ import annotations

import os

import numpy as np
import pytest

from auditsel.auditing import score_sort
from auditsel.auditing.sorted_scores import SortedScores

needs_memfd = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd_create")


def _scores(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    member = rng.integers(0, 2, n).astype(bool)
    s = rng.standard_normal(n) + 0.5 * member
    s[rng.integers(0, n, n // 50)] = np.round(s[: n // 50], 1)  # ties
    s[rng.integers(0, n, 40)] = np.nan
    s[rng.integers(0, n, 40)] = np.inf
    s[rng.integers(0, n, 40)] = -np.inf
    s[rng.integers(0, n, 40)] = 0.0
    s[rng.integers(0, n, 40)] = -0.0
    return s, member


def _same(parts, s, masks) -> bool:
    return all(
        np.array_equal(p, np.sort(s[m]), equal_nan=True) for p, m in zip(parts, masks, strict=True)
    )


@needs_memfd
@pytest.mark.parametrize("disabled", [None, ()])
def test_the_helper_sorts_as_numpy_does(disabled):
    """With this machine's AVX-512 targets off (or none off), ties, NaNs, infinities, zeros."""
    s, m = _scores(300_000)
    masks = (~m, m)
    sizes = [int(np.count_nonzero(x)) for x in masks]
    with score_sort.SortHelper(sum(sizes) + 17, disabled=disabled) as helper:  # room to spare
        parts = helper.sort(s, masks, sizes)
    assert parts is not None
    assert [len(p) for p in parts] == sizes
    assert _same(parts, s, masks)


@needs_memfd
def test_a_part_written_to_leaves_the_others_and_the_scores_alone():
    """The parts are views of one private mapping: a write lands in the part written only."""
    s, m = _scores(50_000, seed=1)
    before = s.copy()
    parts = score_sort.SortHelper(len(s)).sort(s, (~m, m), [int((~m).sum()), int(m.sum())])
    assert parts is not None
    parts[0][:] = 7.0
    assert np.array_equal(parts[1], np.sort(s[m]), equal_nan=True)
    assert np.array_equal(s, before, equal_nan=True)


@needs_memfd
@pytest.mark.parametrize(
    "helper",
    [
        "import sys; sys.exit(3)",  # dies at start
        "import sys; sys.stdin.readline(); sys.stdout.write('sorted\\n')",  # says so, sorts nothing
        "import sys; sys.stdin.readline(); sys.stdout.write('no\\n')",  # a wrong answer
    ],
)
def test_a_helper_that_fails_falls_back_to_numpy(monkeypatch, helper):
    s, m = _scores(20_000, seed=2)
    masks = (~m, m)
    monkeypatch.setattr(score_sort, "_HELPER", helper)
    sizes = [int(x.sum()) for x in masks]
    assert score_sort.SortHelper(len(s), disabled=()).sort(s, masks, sizes) is None
    monkeypatch.setattr(score_sort, "avx512_sort_is_slow", lambda: True)
    monkeypatch.setattr(score_sort, "HELPER_ABOVE", 1000)
    assert _same(score_sort.sort_parts(s, masks), s, masks)


def test_large_sorts_go_to_the_helper_only_where_numpy_sorts_slowly(monkeypatch):
    s, m = _scores(5_000, seed=3)
    started = []

    class Spy(score_sort.SortHelper):
        def __init__(self, capacity, disabled=None):
            started.append(capacity)
            super().__init__(capacity, disabled=())

    monkeypatch.setattr(score_sort, "SortHelper", Spy)
    monkeypatch.setattr(score_sort, "HELPER_ABOVE", 4_000)
    monkeypatch.setattr(score_sort, "avx512_sort_is_slow", lambda: False)
    SortedScores(s, m).by_coin()
    assert score_sort.prepare_sort(5_000) is None
    assert started == []
    monkeypatch.setattr(score_sort, "avx512_sort_is_slow", lambda: True)
    SortedScores(s[:3_000], m[:3_000]).by_coin()  # too few to pay for a start-up
    assert score_sort.prepare_sort(3_000) is None
    assert started == []
    coins = SortedScores(s, m).by_coin()
    assert started == [5_000]
    assert _same(coins, s, (~m, m))


@needs_memfd
def test_a_helper_started_ahead_sorts_once_and_a_small_one_is_not_used(monkeypatch):
    """`prepare_sort` before the game, then the sort: the same values; a helper without
    room for the parts, or used a second time, answers None (the caller sorts)."""
    s, m = _scores(40_000, seed=4)
    masks = (~m, m)
    sizes = [int(x.sum()) for x in masks]
    monkeypatch.setattr(score_sort, "HELPER_ABOVE", 1_000)
    monkeypatch.setattr(score_sort, "avx512_sort_is_slow", lambda: True)
    helper = score_sort.prepare_sort(len(s))
    assert helper is not None
    coins = SortedScores(s, m, sort_helper=helper).by_coin()
    assert _same(coins, s, masks)
    assert helper.sort(s, masks, sizes) is None  # used once: ended
    with score_sort.SortHelper(len(s) - 1, disabled=()) as small:
        assert small.sort(s, masks, sizes) is None


def _cpuinfo(vendor: str, family: int, flags: str) -> str:
    one = f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nflags\t\t: {flags}\n"
    return one + "\n" + one.replace("processor\t: 0", "processor\t: 1")


@pytest.mark.parametrize(
    ("vendor", "family", "flags", "slow"),
    [
        ("AuthenticAMD", 25, "fpu sse2 avx2 avx512f avx512bw", True),  # Zen 4
        ("AuthenticAMD", 25, "fpu sse2 avx2", False),  # Zen 3: no AVX-512
        ("AuthenticAMD", 26, "fpu sse2 avx2 avx512f", False),  # Zen 5
        ("GenuineIntel", 6, "fpu sse2 avx2 avx512f", False),
        ("AuthenticAMD", 25, "fpu avx512fp16", False),  # a flag that only starts alike
    ],
)
def test_the_cpu_test_reads_vendor_family_and_flags(vendor, family, flags, slow):
    assert score_sort.slow_compress_store(_cpuinfo(vendor, family, flags)) is slow


def test_the_targets_turned_off_are_numpys_avx512_ones():
    found = np.show_config(mode="dicts")["SIMD Extensions"]["found"]
    targets = score_sort.avx512_targets()
    assert set(targets) <= set(found)
    assert all("512" in t or t == "X86_V4" for t in targets)
    assert {t for t in found if t.startswith("AVX512")} <= set(targets)
