"""Auditing your own pipeline: score files, a user protocol, and accountant regression tests."""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditsel.accounting.exact import exact_epsilon
from auditsel.accounting.registry import bound
from auditsel.auditing.scores import read_scores
from auditsel.cli import main
from auditsel.errors import ConfigError
from auditsel.mechanisms import GaussianBase, gaussian_epsilon
from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions
from auditsel.pipelines.own_protocol import audit_protocol
from auditsel.rounds import TwoPoint
from auditsel.selection import ScoredGaussianWinner
from auditsel.testing import RefutedClaim, assert_not_refuted, worst_case_tuning


# --- a user's own tuning loop: K ~ 1 + Poisson(3) runs of a noisy mean, release the best ------
def my_tuning_run(member, rng):
    k = 1 + rng.poisson(3)
    runs = rng.normal(loc=1.0 * member, scale=1.0, size=k)  # each run: Gaussian, mu = 1
    return {"best": runs.max(), "k": k}


def my_score(release):
    return release["best"]


def my_tuning_epsilon(delta):
    """The exact eps of my_tuning_run: the winner of K = 1 + Poisson(3) Gaussian runs (mu = 1).
    The pmf is cut at K = 80, whose tail (4e-84) is below double precision next to delta."""
    from scipy.stats import poisson

    from auditsel.rounds import FinitePmf
    from auditsel.selection import GaussianWinner

    law = FinitePmf({k: float(poisson.pmf(k - 1, 3)) for k in range(1, 81)})
    assert law.mean == pytest.approx(4.0)
    return exact_epsilon(GaussianWinner(GaussianBase(1.0), law), delta)


def test_audit_protocol_runs_a_user_function_and_respects_the_truth(tmp_path):
    bound = audit_protocol(
        my_tuning_run,
        my_score,
        delta=1e-5,
        trials=20_000,
        execution=ExecutionOptions(checkpoint_dir=tmp_path / "ck"),
        statistics=AuditOptions(seed=1),
    )
    # the exact epsilon of this protocol is computable (4.69): the valid eps_L stays below it
    # (at 95% confidence; the seed is fixed), the optimistic best threshold too here, and the
    # audit finds real leakage (one Gaussian run alone has eps 4.38 at this delta)
    exact = my_tuning_epsilon(1e-5)
    assert exact > gaussian_epsilon(1.0, 1e-5)
    assert 0.3 * exact < bound.eps <= exact
    assert bound.eps <= bound.eps_best_threshold <= exact
    again = audit_protocol(
        my_tuning_run,
        my_score,
        delta=1e-5,
        trials=20_000,
        execution=ExecutionOptions(checkpoint_dir=tmp_path / "ck"),
        statistics=AuditOptions(seed=1),
    )
    assert again == bound  # resumed from checkpoints: same numbers


def test_audit_protocol_is_the_same_for_any_number_of_jobs():
    a = audit_protocol(
        my_tuning_run, my_score, delta=1e-5, trials=6_000, statistics=AuditOptions(seed=2)
    )
    b = audit_protocol(
        my_tuning_run,
        my_score,
        delta=1e-5,
        trials=6_000,
        execution=ExecutionOptions(jobs=2),
        statistics=AuditOptions(seed=2),
    )
    assert a == b


GAME = worst_case_tuning(base_epsilon=1.0, delta=1e-5, rounds=TwoPoint(100, 0.01))


def test_a_wrong_accountant_is_caught():
    # the wrong accountant reports the single-run eps_B = 1 for the whole tuning run
    with pytest.raises(RefutedClaim) as err:
        assert_not_refuted(1.0, 1e-5, GAME, trials=50_000)
    assert "refuted" in str(err.value) and err.value.bound.eps > 1.0


def test_the_correct_bound_is_not_refuted():
    # the default game plays the worst score: the claim to survive is a rigorous bound for any
    # score ([KRW24]'s profile bound; `tuning_epsilon` takes the smallest of them)
    assert isinstance(GAME, ScoredGaussianWinner) and GAME.score.shape != "monotone"
    upper = float(bound("profile").curve(GAME.base, GAME.law, np.array([1e-5]))[0])
    assert assert_not_refuted(upper, 1e-5, GAME, trials=50_000).eps <= upper
    # [XWW24]'s monotone-score game: its exact epsilon survives its own game
    monotone = worst_case_tuning(1.0, 1e-5, TwoPoint(100, 0.01), score="monotone")
    exact = exact_epsilon(monotone, 1e-5)
    assert assert_not_refuted(exact, 1e-5, monotone, trials=200_000).eps <= exact


def write_csv(path, score, member, header="score,member"):
    lines = [header] + [f"{s},{m}" for s, m in zip(score, member)]
    path.write_text("\n".join(lines) + "\n")


def test_audit_scores_csv_and_npz_agree(tmp_path, capsys):
    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 5000)
    score = rng.normal(member, 1.0)
    write_csv(tmp_path / "s.csv", score, member)
    np.savez(tmp_path / "s.npz", score=score, member=member)
    assert main(["audit-scores", str(tmp_path / "s.csv"), "--json", "--seed", "5"]) == 0
    from_csv = json.loads(capsys.readouterr().out)
    assert main(["audit-scores", str(tmp_path / "s.npz"), "--json", "--seed", "5"]) == 0
    from_npz = json.loads(capsys.readouterr().out)
    assert from_csv["eps"] == pytest.approx(from_npz["eps"], rel=1e-12)
    assert {
        "eps",
        "method",
        "gdp_fit",
        "eps_best_threshold",
        "confidence",
        "threshold_rule",
        "threshold",
        "fp",
        "fn",
        "trials",
    } <= set(from_csv)
    assert main(["audit-scores", str(tmp_path / "s.csv")]) == 0
    text = capsys.readouterr().out
    assert all(
        rule in text
        for rule in ("split", "bonferroni", "bonferroni_all", "multisplit", "best", "GDP")
    )
    # without --threshold-range the bonferroni grid comes from a pilot that is left out
    assert "pilot" in text and "optimistic" in text


@pytest.mark.parametrize(
    "content, needle",
    [
        ("score,member\n1,1\n2,1\n3,1\n4,1\n", "member = 1"),
        ("score,member\n1,0\n2,0\n3,0\n4,0\n", "member = 0"),
        ("value,label\n1,0\n2,1\n", "no column 'score'"),
        ("score,member\n1,0\nx,1\n", "not numeric"),
        ("score,member\n1,0\n2,3\n3,1\n4,0\n", "0 or 1"),
        ("score,member\nnan,0\n2,1\n3,1\n4,0\n", "NaN"),
        ("", "no column"),
    ],
)
def test_bad_score_files(tmp_path, capsys, content, needle):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert main(["audit-scores", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_bad_npz_and_missing_file(tmp_path, capsys):
    np.savez(tmp_path / "x.npz", scores=np.zeros(3))
    assert main(["audit-scores", str(tmp_path / "x.npz")]) == 2
    assert "score" in capsys.readouterr().err
    (tmp_path / "broken.npz").write_bytes(b"garbage")
    assert main(["audit-scores", str(tmp_path / "broken.npz")]) == 2
    assert "npz" in capsys.readouterr().err
    assert main(["audit-scores", str(tmp_path / "missing.csv")]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--delta", "1.5"], "--delta"),
        (["--confidence", "0.2"], "--confidence"),
        (["--threshold", "max"], "--threshold"),
        (["--threshold-range", "3", "1"], "--threshold-range"),
    ],
)
def test_bad_audit_arguments(tmp_path, capsys, args, needle):
    write_csv(tmp_path / "s.csv", [0, 1, 2, 3], [0, 1, 0, 1])
    assert main(["audit-scores", str(tmp_path / "s.csv"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_read_scores_accepts_boolean_members(tmp_path):
    np.savez(tmp_path / "b.npz", score=np.arange(6.0), member=np.array([0, 1] * 3, dtype=bool))
    score, member = read_scores(tmp_path / "b.npz")
    assert member.tolist() == [0, 1] * 3


# --- score files: laid out by class, size-checked, messages that name the file --------------


def by_class_scores(n=4000, seed=11):
    """Members first, then the others (as jax_privacy's tests pass in- and out-scores)."""
    rng = np.random.default_rng(seed)
    member = np.r_[np.ones(n // 2), np.zeros(n - n // 2)].astype(int)
    return rng.normal(1.5 * member, 1.0), member


@pytest.mark.parametrize("rule", ["split", "bonferroni", "bonferroni_all", "multisplit"])
def test_score_files_laid_out_by_class_audit_as_shuffled_ones(tmp_path, capsys, rule):
    score, member = by_class_scores()
    write_csv(tmp_path / "by_class.csv", score, member)
    order = np.random.default_rng(0).permutation(len(score))
    write_csv(tmp_path / "shuffled.csv", score[order], member[order])
    payloads = []
    for name in ("by_class.csv", "shuffled.csv"):
        argv = ["audit-scores", str(tmp_path / name), "--threshold", rule, "--json", "--seed", "3"]
        assert main(argv) == 0
        payloads.append(json.loads(capsys.readouterr().out))
    assert payloads[0]["threshold_rule"] == rule and payloads[0]["eps"] > 0.5
    assert payloads[0]["eps"] == payloads[1]["eps"]
    assert payloads[0]["by_rule"] == payloads[1]["by_rule"]
    assert "skipped" not in payloads[0]


def test_score_file_that_is_not_a_regular_file_is_refused_before_reading(tmp_path, capsys):
    # /dev/zero (endless), a FIFO (blocks forever): refused at once, without reading. /dev/zero
    # in a process of its own (read, it would never end); the FIFO here, on a thread that a
    # read would block (the test then fails at the join's timeout)
    import os
    import subprocess
    import sys
    import threading

    proc = subprocess.run(
        [sys.executable, "-m", "auditsel", "audit-scores", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "regular file" in lines[0] and "/dev/zero" in lines[0]
    fifo = tmp_path / "scores.csv"
    os.mkfifo(fifo)
    codes = []
    thread = threading.Thread(
        target=lambda: codes.append(main(["audit-scores", str(fifo)])), daemon=True
    )
    thread.start()
    thread.join(timeout=60)
    assert codes == [2], "the FIFO was opened or read"
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "regular file" in lines[0] and str(fifo) in lines[0]


def test_oversized_score_files_are_refused_before_reading(tmp_path, capsys, monkeypatch):
    import auditsel.auditing.scores as scores

    write_csv(tmp_path / "s.csv", *by_class_scores(400))
    np.savez(tmp_path / "s.npz", score=np.zeros(400), member=np.arange(400) % 2)
    np.savez_compressed(tmp_path / "z.npz", score=np.zeros(10**6), member=np.arange(10**6) % 2)
    assert (tmp_path / "z.npz").stat().st_size < 100_000  # small on disk, 10^6 rows inside
    monkeypatch.setattr(scores, "MAX_FILE_BYTES", 5000)
    monkeypatch.setattr(scores, "MAX_ROWS", 1000)

    def never(*args):
        raise AssertionError("read before the size check")

    monkeypatch.setattr(scores, "_csv_columns", never)
    monkeypatch.setattr(scores, "_npz_arrays", never)
    for name in ("s.csv", "s.npz", "z.npz"):
        assert main(["audit-scores", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "too large" in err and name in err, err


def test_score_file_messages_name_the_file_not_a_placeholder(tmp_path, capsys):
    for content in ("score,member\n1,0\n2,3\n3,1\n4,0\n", "value,label\n1,0\n", ""):
        path = tmp_path / "bad.csv"
        path.write_text(content)
        assert main(["audit-scores", str(path)]) == 2
        err = capsys.readouterr().err
        assert "FILE" not in err and str(path) in err, err
    assert main(["audit-scores", str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err
    assert "FILE" not in err and "missing.csv" in err


@pytest.mark.parametrize(
    "text",
    [
        "score,member\n{rows}",
        "member,score\n{swapped}",
        "id,score,member,extra\n{wide}",
        "\ufeffscore,member\r\n{crlf}",
        "score , member\n{spaced}",
    ],
)
def test_csv_layouts_read_the_same_numbers(tmp_path, text):
    rng = np.random.default_rng(5)
    score = rng.normal(size=300)
    score[:3] = [np.inf, -np.inf, 0.1]
    member = np.arange(300) % 2
    cells = [(repr(float(s)), str(m)) for s, m in zip(score, member)]
    body = text.format(
        rows="".join(f"{s},{m}\n" for s, m in cells),
        swapped="".join(f"{m},{s}\n" for s, m in cells),
        wide="".join(f"{i},{s},{m},x\n" for i, (s, m) in enumerate(cells)),
        crlf="".join(f"{s},{m}\r\n" for s, m in cells),
        spaced="".join(f" {s} , {m}\n" for s, m in cells),
    )
    path = tmp_path / "s.csv"
    path.write_bytes(body.encode("utf-8"))
    got_score, got_member = read_scores(path)
    assert np.array_equal(got_score, score) and np.array_equal(got_member, member)


# --- the CSV reader: numpy's C parser where it agrees, the csv module where it does not -------

CELLS = st.one_of(
    st.floats(allow_nan=False).map(repr),
    st.sampled_from(["inf", "-Infinity", "1_000", "1e500", " 2 ", "x", "", "0x1", ".5", "+3."]),
    st.text(alphabet="0123456789.e-+ _", max_size=6),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    rows=st.lists(
        st.tuples(CELLS, st.sampled_from(["0", "1", " 1", "1.0", "2", "a"])),
        min_size=1,
        max_size=20,
    ),
    ragged=st.sampled_from([None, "short", ",9", ",9,9"]),
    at=st.integers(0, 19),
)
def test_csv_fast_path_reads_what_the_csv_module_reads(rows, ragged, at):
    """Every block numpy's reader accepts gives the numbers the csv module and `float` give
    line by line; every block one of them refuses, the other refuses too (same message)."""
    from auditsel.auditing import scores

    lines = [f"{s},{m}" for s, m in rows]
    if ragged is not None:  # one line with another number of columns than the header's two
        i = at % len(lines)
        lines[i] = rows[i][0] if ragged == "short" else lines[i] + ragged
    data = ("\n".join(lines) + "\n").encode()

    def outcome(read):
        try:
            return read()
        except scores.ScoreFileError as err:
            return str(err)

    fast = outcome(lambda: scores._csv_block(Path("f.csv"), data, (0, 1, 2), 2)[:2])
    slow = outcome(lambda: scores._csv_block_slow(Path("f.csv"), data, (0, 1, 2), 2))
    if isinstance(slow, str):
        assert fast == slow
        if ragged is not None:
            assert "ragged" in slow or "not numeric" in slow
    else:
        assert not isinstance(fast, str), fast
        assert ragged is None
        for a, b in zip(fast, slow):
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def test_ragged_row_in_a_later_block_is_named_by_its_line(tmp_path, monkeypatch):
    from auditsel.auditing import scores

    monkeypatch.setattr(scores, "CSV_BLOCK", 64)  # many blocks, the ragged line in a late one
    body = [f"{i / 7!r},{i % 2}" for i in range(200)]
    body[150] += ",5"
    path = tmp_path / "s.csv"
    path.write_text("score,member\n" + "\n".join(body) + "\n")
    with pytest.raises(scores.ScoreFileError, match=r"line 152 has 3 columns .* has 2"):
        read_scores(path)
    del body[150]
    path.write_text("score,member\n" + "\n".join(body) + "\n")
    score, member = read_scores(path)
    assert score.tolist() == [float(b.split(",")[0]) for b in body]


def test_audit_protocol_execution_options_and_the_old_keywords(tmp_path):
    """execution=ExecutionOptions(...) is honoured (chunks of chunk_size in checkpoint_dir);
    the flat keywords of 0.2 and an unknown keyword are refused, naming them."""
    options = dict(delta=1e-5, trials=3_000, statistics=AuditOptions(seed=4))
    ex = ExecutionOptions(chunk_size=700, checkpoint_dir=tmp_path / "new")
    new = audit_protocol(my_tuning_run, my_score, **options, execution=ex)
    assert len(list((tmp_path / "new").glob("chunk*"))) == -(-3_000 // 700) and new.eps > 0
    for flat in ("chunk_size", "checkpoint_dir", "jobs", "progress", "job", "seed", "rule"):
        with pytest.raises(TypeError, match=rf"unexpected keyword argument '{flat}'"):
            audit_protocol(my_tuning_run, my_score, **options, **{flat: 2})
    with pytest.raises(ConfigError, match=r"^execution: must be ExecutionOptions"):
        audit_protocol(my_tuning_run, my_score, **options, execution={"jobs": 2})
    with pytest.raises(TypeError):
        ExecutionOptions(2)  # type: ignore[misc]  # keyword-only
