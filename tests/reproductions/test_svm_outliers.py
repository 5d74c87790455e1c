"""[PS22] Section 2 (`auditsel reproduce ps22-svm`, auditsel.reproductions.svm_outliers) and the
group canary it needs (`InputCanary(x, y, copies=k)`); its tutorial page runs in
tests/test_docs.py, and here against the reproduction's own code."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from test_docs import blocks

import auditsel
from auditsel.cli import main
from auditsel.errors import ConfigError
from auditsel.reproductions import REGISTRY, svm_outliers

ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/tutorials/a-hyperparameter-that-leaks.md"
COMMITTED = ROOT / "results" / "papers" / "ps22-svm" / "rows.json"


def _in(canary):
    return canary.for_game(True, np.random.default_rng(0))


def test_input_canary_copies_appends_k_rows_in_every_data_format():
    torch = pytest.importorskip("torch")
    canary = auditsel.InputCanary(np.array([1.0, 2.0]), 1.0, copies=3)
    X, y = np.zeros((5, 2)), np.zeros(5)
    grown = _in(canary).prepare((X, y))
    assert grown[0].shape == (8, 2) and grown[1].tolist() == [0] * 5 + [1] * 3
    assert np.all(grown[0][5:] == [1.0, 2.0])
    assert canary.for_game(False, np.random.default_rng(0)).prepare((X, y)) == (X, y)
    tensors = _in(canary).prepare((torch.zeros(5, 2), torch.zeros(5)))
    assert tensors[0].shape == (8, 2) and float(tensors[1].sum()) == 3.0
    dataset = _in(canary).prepare(torch.utils.data.TensorDataset(torch.zeros(5, 2), torch.zeros(5)))
    assert len(dataset) == 8 and float(dataset[7][0][1]) == 2.0

    class Plain(torch.utils.data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return torch.zeros(2), torch.tensor(0.0)

    concatenated = _in(canary).prepare(Plain())
    assert len(concatenated) == 8 and float(concatenated[6][0][0]) == 1.0
    assert (
        canary.describe()["copies"] == 3 and auditsel.InputCanary(X[0], 0).describe()["copies"] == 1
    )
    with pytest.raises(ConfigError, match="copies"):
        auditsel.InputCanary(X[0], 0, copies=0)


def test_without_outliers_tuning_keeps_the_smallest_alpha_and_with_them_a_larger_one():
    data = svm_outliers.DATA
    with_outliers = _in(svm_outliers.OUTLIERS).prepare(data)
    assert len(with_outliers[0]) == 48 and np.all(with_outliers[1][40:] == -1)
    released = [svm_outliers.tune(data, s, None)["alpha"] for s in range(20)]
    assert released == [svm_outliers.ALPHAS[0]] * 20
    accuracy = svm_outliers.training_accuracy(data, 0)
    assert accuracy[0] == 1.0  # D is separable at the smallest alpha
    larger = [svm_outliers.tune(with_outliers, s, None)["alpha"] > 0.5 for s in range(40)]
    assert np.mean(larger) >= 0.8


@pytest.mark.slow  # a regeneration of Figure 1's rows and an audit
def test_figure1_rows_and_a_small_audit():
    rows = svm_outliers.curve_rows(runs=20)
    assert [r["alpha"] for r in rows] == list(svm_outliers.ALPHAS)
    assert rows[0]["chosen_without"] == 1.0 and rows[0]["accuracy_without"] == 1.0
    assert sum(r["chosen_with"] for r in rows) == pytest.approx(1.0)
    best = max(rows, key=lambda r: r["accuracy_with"])
    assert best["alpha"] >= 4 and best["accuracy_with"] > rows[0]["accuracy_with"] + 0.02
    audit = svm_outliers.audit_rows(games=200)
    assert audit["eps"] > 1.5 and audit["p_alpha_above_min_without"] == 0.0


def test_the_tutorial_is_the_reproductions_pipeline(tmp_path, monkeypatch):
    """The page's code (60 games instead of 300: tests/test_docs.py runs it as written) makes
    the same data and the same releases as the reproduction's."""
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "tutorial"}
    for block in blocks(ROOT / PAGE, "python"):
        exec(block.code.replace("GAMES = 300", "GAMES = 60"), ns)
    assert ns["audit"].games == 60
    data = svm_outliers.DATA
    assert np.array_equal(ns["X"], data[0]) and np.array_equal(ns["y"], data[1])
    with_outliers = _in(svm_outliers.OUTLIERS).prepare(data)
    for seed in range(5):
        for d in (data, with_outliers):
            assert ns["tune"](d, seed, None) == svm_outliers.tune(d, seed, None)


def test_the_committed_result_and_the_pages_numbers_agree():
    committed = json.loads(COMMITTED.read_text())
    audit = committed["audit"]
    page = (ROOT / PAGE).read_text()
    assert f"valid eps_L is {audit['eps']:.3f}" in page
    assert f"{audit['p_alpha_above_min_with']:.1%} of the games with the outliers" in page
    assert audit["games"] == svm_outliers.GAMES and audit["p_alpha_above_min_without"] == 0.0
    table = (COMMITTED.parent / "table.md").read_text()
    assert f"valid eps_L = {audit['eps']:.3f}" in table
    assert re.search(r"\[PS\d\d\]", REGISTRY["ps22-svm"].title)


@pytest.mark.slow
def test_the_committed_result_regenerates(tmp_path):
    assert main(["reproduce", "ps22-svm", "--out", str(tmp_path)]) == 0
    fresh = json.loads((tmp_path / "ps22-svm" / "rows.json").read_text())
    committed = json.loads(COMMITTED.read_text())
    assert fresh["curve"] == committed["curve"]
    for key in ("games", "eps", "p_alpha_above_min_with", "p_alpha_above_min_without"):
        assert fresh["audit"][key] == committed["audit"][key]
