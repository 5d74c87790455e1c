"""The Table-3-style grid runner: both proxies on the same games, the engine's trial seeding."""
import numpy as np
import pytest

from auditsel.rounds import TruncatedNegativeBinomial
from auditsel.table3 import Table3Settings, format_rows, play_games, run_table3_grid, table3_protocol

TINY = Table3Settings(train_size=40, validation_size=30, steps=3, trials=60,
                      rounds=TruncatedNegativeBinomial(1.0, 0.5), epsilons=(2.0,),
                      learning_rates=(0.01, 0.05), device="cpu")


def test_grid_rows_cover_every_cell_and_proxy_with_upper_bounds():
    rows = run_table3_grid(TINY, cells=[("etcv", "dirac", 2.0), ("ntnv", "input", 2.0)], log=None)
    assert [(r["threat"], r["canary"], r["proxy"]) for r in rows] == [
        ("etcv", "dirac", "lambda_a"), ("etcv", "dirac", "lambda_b"),
        ("ntnv", "input", "lambda_a"), ("ntnv", "input", "lambda_b")]
    for r in rows:
        assert r["trials"] == 60 and 0 <= r["eps_split"] and r["eps_split"] <= r["eps_best"] + 1e-9
        assert r["sigma"] > 0
    assert "| etcv | dirac | 2 | lambda_a |" in format_rows(rows)


def test_play_games_matches_the_game_engine_trial_for_trial():
    game = pytest.importorskip("auditsel.game")
    from attacks.dpsgd_proxies import make_dpsgd_proxy
    proto, _ = table3_protocol("etcv", "dirac", 2.0, TINY)
    proxy = make_dpsgd_proxy("lambda_a")
    member, scores = play_games(proto, {"a": proxy, "b": make_dpsgd_proxy("lambda_b", "etcv")},
                                25, seed=3, chunk_size=10)
    rec = game.run_game(proto, proxy, 25, 3, chunk_size=10, progress=False)
    np.testing.assert_array_equal(rec.member, member)
    np.testing.assert_array_equal(rec.scores, scores["a"])
    assert not np.array_equal(scores["a"], scores["b"])
