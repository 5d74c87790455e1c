"""Streamed (bounded-memory) audits: chunks read back from disk one at a time."""

import json

import numpy as np
import pytest
import yaml

from attacks.proxies import make_proxy
from auditsel.accounting.exact import exact_epsilon
from auditsel.auditing.lower import audit_scores
from auditsel.auditing.rules import BonferroniGrid, Split, threshold_rule
from auditsel.auditing.streamed_audit import audit_chunks
from auditsel.cli import main
from auditsel.executor import ExecutionOptions
from auditsel.games.engine import run_game
from auditsel.mechanisms import GaussianBase
from auditsel.rounds import TruncatedNegativeBinomial
from auditsel.selection import GaussianWinner

WINNER = GaussianWinner(GaussianBase.from_epsilon(2.0, 1e-5), TruncatedNegativeBinomial(0.0, 0.01))
PROXY = make_proxy("sample", WINNER)


def play(tmp_path, in_memory):
    return run_game(
        WINNER,
        PROXY,
        400_000,
        3,
        fingerprint="s",
        in_memory=in_memory,
        execution=ExecutionOptions(chunk_size=50_000, checkpoint_dir=tmp_path),
    )


def test_streamed_record_keeps_nothing_in_memory(tmp_path):
    streamed = play(tmp_path, in_memory=False)
    assert (
        streamed.scores is None and len(streamed.chunks) == 8 and streamed.chunks.trials == 400_000
    )
    full = play(tmp_path, in_memory=True)
    assert np.array_equal(
        np.concatenate([streamed.chunks.load(i)[0] for i in range(8)]), full.scores
    )


def test_bonferroni_is_exactly_the_in_memory_value(tmp_path):
    full, streamed = play(tmp_path, True), play(tmp_path, False)
    grid = np.linspace(-2, 6, 50)
    a = audit_scores(full.scores, full.member, 1e-5, rule=BonferroniGrid(grid=grid))
    b = audit_chunks(streamed.chunks, 1e-5, rule=BonferroniGrid(grid=grid))
    assert a.eps == b.eps and a.threshold == b.threshold


def test_streamed_rules_are_valid_and_close(tmp_path):
    full, streamed = play(tmp_path, True), play(tmp_path, False)
    exact = exact_epsilon(WINNER, 1e-5)
    for rule in ("split", "bonferroni", "bonferroni_all"):
        a = audit_scores(full.scores, full.member, 1e-5, rule=threshold_rule(rule, seed=0))
        b = audit_chunks(streamed.chunks, 1e-5, rule=rule)
        assert b.valid and b.eps <= exact
        if rule == "split":  # the chunks are one random split, in memory a seeded one per class
            seeds = [
                audit_scores(full.scores, full.member, 1e-5, rule=Split(seed=k)).eps
                for k in range(8)
            ]
            assert min(seeds) - 0.1 <= b.eps <= max(seeds) + 0.1
        else:
            assert b.eps == pytest.approx(a.eps, abs=0.15)
        # the candidate grid is a subset of all thresholds: never above the exhaustive maximum
        assert b.eps_best_threshold <= a.eps_best_threshold + 1e-12


def test_streamed_bonferroni_without_a_grid_leaves_its_pilot_out(tmp_path):
    # the pilot grid comes from chunk 0, one of the first half of the chunks; only the other
    # half is evaluated (before, chunk 0 set the grid and was evaluated too)
    streamed = play(tmp_path, False)
    b = audit_chunks(streamed.chunks, 1e-5, rule="bonferroni")
    assert b.grid_source == "pilot" and b.evaluated_trials == 200_000
    spec = audit_chunks(streamed.chunks, 1e-5, rule=BonferroniGrid(grid=np.linspace(-2, 6, 50)))
    assert spec.grid_source == "spec" and spec.evaluated_trials == 400_000
    with pytest.raises(ValueError, match="multisplit"):
        audit_chunks(streamed.chunks, 1e-5, rule="multisplit")


def test_cli_stream_option(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "st",
                "delta": 1e-5,
                "base": {"kind": "gaussian", "epsilon": 1.0},
                "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
                "game": {
                    "kind": "reduced",
                    "trials": 200_000,
                    "chunk_size": 20_000,
                    "stream": True,
                },
            }
        )
    )
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    low = json.loads((tmp_path / "o" / "result.json").read_text())["lower"]
    assert (
        low["streamed"] is True and low["trials"] == 200_000 and low["evaluated_trials"] == 100_000
    )
    assert (tmp_path / "o" / "scores.png").exists()


def test_stream_needs_two_chunks_to_split(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "st",
                "delta": 1e-5,
                "base": {"kind": "gaussian", "epsilon": 1.0},
                "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
                "game": {"kind": "reduced", "trials": 1000, "stream": True},
            }
        )
    )
    assert main(["run", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "game.split_fraction" in capsys.readouterr().err
