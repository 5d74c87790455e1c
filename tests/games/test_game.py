"""The game engine: determinism across job counts, checkpoints and resume."""

import numpy as np
import pytest

from attacks.proxies import make_proxy
from auditsel.errors import ConfigError
from auditsel.executor import ExecutionOptions
from auditsel.games.engine import CheckpointError, run_game
from auditsel.mechanisms import GaussianBase
from auditsel.rounds import TruncatedNegativeBinomial
from auditsel.selection import GaussianWinner

WINNER = GaussianWinner(GaussianBase(0.5), TruncatedNegativeBinomial(0.0, 0.01))
PROXY = make_proxy("sample", WINNER)


class Interrupting:
    """Delegates to the real protocol, then fails on its n-th chunk (an interruption)."""

    def __init__(self, inner, fail_on):
        self.inner, self.fail_on, self.calls = inner, fail_on, 0

    def release(self, member, rng):
        self.calls += 1
        if self.calls == self.fail_on:
            raise KeyboardInterrupt
        return self.inner.release(member, rng)


def test_same_seed_same_scores_for_any_number_of_jobs():
    one = run_game(WINNER, PROXY, 50_000, 7, execution=ExecutionOptions(chunk_size=6_000, jobs=1))
    two = run_game(WINNER, PROXY, 50_000, 7, execution=ExecutionOptions(chunk_size=6_000, jobs=2))
    assert np.array_equal(one.scores, two.scores)
    assert np.array_equal(one.member, two.member)
    # the numpy games run on joblib threads by default; processes give the same numbers
    assert WINNER.parallel_prefer == "threads"
    procs = run_game(
        WINNER,
        PROXY,
        50_000,
        7,
        execution=ExecutionOptions(chunk_size=6_000, jobs=2, backend="loky"),
    )
    assert np.array_equal(one.scores, procs.scores) and np.array_equal(one.member, procs.member)
    other = run_game(WINNER, PROXY, 50_000, 8, execution=ExecutionOptions(chunk_size=6_000, jobs=1))
    assert not np.array_equal(one.scores, other.scores)


def test_default_jobs_play_the_numpy_games_on_every_core_with_the_same_numbers(monkeypatch):
    from auditsel import executor
    from auditsel.games import engine

    # threads for a protocol that frees the GIL, unless a backend is named; 1 for the others
    assert engine.default_jobs(WINNER) == -1
    assert engine.default_jobs(WINNER, "loky") == 1
    assert engine.default_jobs(Interrupting(WINNER, fail_on=0)) == 1
    seen = []
    real = executor._threaded
    monkeypatch.setattr(executor, "_threaded", lambda *a: seen.append(a[-1]) or real(*a))
    auto = run_game(
        WINNER,
        PROXY,
        50_000,
        7,
        execution=ExecutionOptions(chunk_size=6_000, jobs=engine.default_jobs(WINNER)),
    )
    assert seen == [executor.worker_count(-1)]  # every usable core's thread
    one = run_game(WINNER, PROXY, 50_000, 7, execution=ExecutionOptions(chunk_size=6_000, jobs=1))
    assert np.array_equal(auto.scores, one.scores) and np.array_equal(auto.member, one.member)


def test_the_record_is_each_chunk_in_trial_order_one_or_several_scores_per_game():
    from auditsel.games.engine import _chunk_sizes, play_chunk

    two_columns = lambda x: np.stack([x, -x], axis=1)  # a proxy with P = 2 scores per game
    for proxy, shape in ((PROXY, ()), (two_columns, (2,))):
        rec = run_game(
            WINNER, proxy, 10_000, 3, execution=ExecutionOptions(chunk_size=3_000, jobs=2)
        )
        chunks = [
            play_chunk(WINNER, proxy, 3, i, n)[1:]
            for i, n in enumerate(_chunk_sizes(10_000, 3_000))
        ]
        assert rec.scores.shape == (10_000, *shape) and rec.scores.dtype == np.float64
        assert np.array_equal(rec.scores, np.concatenate([c[0] for c in chunks]))
        assert np.array_equal(rec.member, np.concatenate([c[1] for c in chunks]))
    empty = run_game(WINNER, PROXY, 0, 3)
    assert empty.scores.shape == (0,) and empty.member.dtype == np.int8


def test_coins_are_fair_and_scores_follow_the_coin():
    rec = run_game(WINNER, PROXY, 200_000, 1)
    assert abs(rec.member.mean() - 0.5) < 0.005
    assert rec.scores[rec.member == 1].mean() - rec.scores[rec.member == 0].mean() == pytest.approx(
        0.5, abs=0.02
    )


def test_resume_after_interruption_neither_loses_nor_repeats_trials(tmp_path):
    full = run_game(WINNER, PROXY, 30_000, 3, execution=ExecutionOptions(chunk_size=4_000))
    flaky = Interrupting(WINNER, fail_on=5)
    with pytest.raises(KeyboardInterrupt):
        run_game(
            flaky,
            PROXY,
            30_000,
            3,
            fingerprint="f",
            execution=ExecutionOptions(chunk_size=4_000, checkpoint_dir=tmp_path),
        )
    assert len(list(tmp_path.glob("chunk_*.npz"))) == 4
    counting = Interrupting(WINNER, fail_on=-1)
    resumed = run_game(
        counting,
        PROXY,
        30_000,
        3,
        fingerprint="f",
        execution=ExecutionOptions(chunk_size=4_000, checkpoint_dir=tmp_path),
    )
    assert resumed.resumed_chunks == 4 and counting.calls == 8 - 4
    assert np.array_equal(resumed.scores, full.scores) and np.array_equal(
        resumed.member, full.member
    )


class Slow:
    """Delegates to the real protocol, each chunk taking `seconds` longer (a long game)."""

    def __init__(self, inner, seconds):
        self.inner, self.seconds = inner, seconds

    def release(self, member, rng):
        __import__("time").sleep(self.seconds)
        return self.inner.release(member, rng)


def _game(tmp_path, protocol=WINNER, in_memory=True, **kw):
    execution = ExecutionOptions(chunk_size=4_000, checkpoint_dir=tmp_path, **kw)
    return run_game(
        protocol, PROXY, 30_000, 3, execution=execution, fingerprint="f", in_memory=in_memory
    )


def test_a_short_game_writes_no_chunk_and_a_long_one_writes_every_chunk(tmp_path, monkeypatch):
    from auditsel.games import engine

    monkeypatch.setattr(engine, "CHECKPOINT_AFTER", 5.0)  # the default (conftest sets 0)
    assert engine.check_checkpoint_after(None) == 5.0
    full = run_game(WINNER, PROXY, 30_000, 3, execution=ExecutionOptions(chunk_size=4_000))
    short = _game(tmp_path / "short")
    assert list((tmp_path / "short").glob("chunk_*.npz")) == [] and short.chunks is None
    assert np.array_equal(short.scores, full.scores)
    # a long game (chunks of 0.05 s, chunks written after 0.12 s): the chunks finished before
    # are written then, the rest as they finish; a rerun reads every chunk back
    long = _game(tmp_path / "long", Slow(WINNER, 0.05), jobs=1, checkpoint_after=0.12)
    assert len(list((tmp_path / "long").glob("chunk_*.npz"))) == 8 and long.chunks is not None
    again = _game(tmp_path / "long", Interrupting(WINNER, fail_on=1))  # would fail if it played
    assert again.resumed_chunks == 8
    assert np.array_equal(again.scores, full.scores) and np.array_equal(long.scores, full.scores)
    # a streamed game keeps nothing in memory: it writes every chunk whatever the setting
    _game(tmp_path / "stream", in_memory=False, checkpoint_after=1000)
    assert len(list((tmp_path / "stream").glob("chunk_*.npz"))) == 8
    # an interrupt writes the chunks finished before it: the rerun resumes from them
    with pytest.raises(KeyboardInterrupt):
        _game(tmp_path / "stop", Interrupting(WINNER, fail_on=5), jobs=1)
    assert len(list((tmp_path / "stop").glob("chunk_*.npz"))) == 4
    assert _game(tmp_path / "stop").resumed_chunks == 4
    for bad in (-1, "soon", float("nan"), True):
        with pytest.raises(ConfigError, match="checkpoint_after: must be a number of seconds"):
            _game(tmp_path / "bad", checkpoint_after=bad)
        assert not (tmp_path / "bad").exists()  # refused before anything is written


def test_foreign_and_corrupted_checkpoints_are_reported(tmp_path):
    run_game(
        WINNER,
        PROXY,
        10_000,
        3,
        fingerprint="a",
        execution=ExecutionOptions(chunk_size=4_000, checkpoint_dir=tmp_path),
    )
    with pytest.raises(CheckpointError, match="another experiment"):
        run_game(
            WINNER,
            PROXY,
            10_000,
            3,
            fingerprint="b",
            execution=ExecutionOptions(chunk_size=4_000, checkpoint_dir=tmp_path),
        )
    (tmp_path / "chunk_0000001.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="corrupted"):
        run_game(
            WINNER,
            PROXY,
            10_000,
            3,
            fingerprint="a",
            execution=ExecutionOptions(chunk_size=4_000, checkpoint_dir=tmp_path),
        )


def test_a_checkpoint_copied_from_another_position_is_rejected(tmp_path):
    run_game(
        WINNER,
        PROXY,
        8_000,
        3,
        fingerprint="a",
        execution=ExecutionOptions(chunk_size=4_000, checkpoint_dir=tmp_path),
    )
    (tmp_path / "chunk_0000000.npz").write_bytes((tmp_path / "chunk_0000001.npz").read_bytes())
    with pytest.raises(CheckpointError):
        run_game(
            WINNER,
            PROXY,
            8_000,
            3,
            fingerprint="a",
            execution=ExecutionOptions(chunk_size=4_000, checkpoint_dir=tmp_path),
        )
