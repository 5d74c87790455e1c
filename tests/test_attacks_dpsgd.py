"""The adversary of the DP-SGD game: canaries, proxies of eq. 10, and the wall to the trainer."""
import ast
import pathlib

import numpy as np
import pytest
import torch

from attacks import canaries, threats
from attacks.dpsgd_proxies import LambdaA, LambdaB, make_dpsgd_proxy
from auditsel.dpsgd.data import Dataset, load_split
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.trainer import ExampleCanary, train_runs

ROOT = pathlib.Path(__file__).resolve().parents[1]
TRAIN, VAL = load_split("digits")


def obs(dot, steps, clip, score, released=None):
    n = len(dot)
    return {"canary_dot": np.asarray(dot, float), "steps": np.asarray(steps),
            "clip": np.asarray(clip, float), "score": np.asarray(score, float),
            "released": np.ones(n, bool) if released is None else np.asarray(released)}


def test_lambda_a_is_mean_inner_product_over_c_squared():
    o = obs([8.0, -2.0], [4, 2], [2.0, 0.5], [0.0, 0.0])
    np.testing.assert_allclose(LambdaA()(o), [8 / (4 * 4), -2 / (2 * 0.25)])


@pytest.mark.parametrize("threat,sign", [("ntnv", -1), ("ntcv", 1), ("etcv", 1)])
def test_lambda_b_adds_the_score_with_the_threat_models_sign(threat, sign):
    o = obs([4.0, 4.0], [1, 1], [1.0, 1.0], [0.5, -2.0])
    np.testing.assert_allclose(make_dpsgd_proxy("lambda_b", threat)(o),
                               4.0 + sign * np.array([0.5, -2.0]))


def test_fixed_output_scores_minus_infinity_and_unknown_proxy_errors():
    o = obs([-np.inf, 1.0], [0, 1], [0.0, 1.0], [0.0, 1.0], released=[False, True])
    assert LambdaA()(o)[0] == -np.inf and LambdaB(threats.NTNV)(o)[0] == -np.inf
    with pytest.raises(ValueError, match=r"^game.proxy: must be one of lambda_a, lambda_b"):
        make_dpsgd_proxy("loss")


def test_dirac_canary_writes_c_to_coordinate_zero_only():
    model = ModelSpec("mlp", TRAIN.shape, 10)
    res = train_runs(model, Dataset.empty_like(TRAIN), steps=3, lr=1.0, clip=0.7,
                     noise_multiplier=0.0, sample_rate=1.0, seeds=[0],
                     canary=canaries.dirac(), include_canary=[True], device="cpu",
                     dtype=torch.float64)
    delta = (res.w0 - res.wN)[0].numpy()
    assert delta[0] == pytest.approx(3 * 0.7) and np.all(delta[1:] == 0)
    assert res.canary_dot.item() == pytest.approx(3 * 0.7 ** 2)


def test_input_canaries_have_the_training_shape_and_are_out_of_distribution():
    for kind in canaries.OOD_KINDS:
        z = canaries.out_of_distribution(TRAIN, kind)
        assert isinstance(z, ExampleCanary) and z.x.shape == TRAIN.shape
        nearest = np.min(np.abs(TRAIN.x - z.x).reshape(len(TRAIN), -1).sum(1))
        assert nearest > 1.0  # no training image is close to it
    wrong = canaries.mislabelled(VAL, 3)
    assert wrong.y != VAL.y[3] and np.array_equal(wrong.x, VAL.x[3])


def test_canary_from_another_dataset_is_resized():
    big = Dataset("big", np.random.default_rng(0).random((2, 3, 32, 32)).astype(np.float32),
                  np.array([4, 12]), 13)
    z = canaries.from_dataset(big, 1, like=TRAIN)
    assert z.x.shape == (1, 8, 8) and z.y == 12 % 10
    np.testing.assert_allclose(z.x.mean(), big.x[1].mean(), rtol=1e-5)
    with pytest.raises(ValueError, match=r"^game.canary_index: must be in \[0, 2\)"):
        canaries.from_dataset(big, 5, like=TRAIN)
    with pytest.raises(ValueError, match=r"^game.canary: cannot place"):
        canaries.from_dataset(big, 0, like=load_split("breast_cancer")[0])


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_trainer_side_never_imports_the_adversary():
    files = list((ROOT / "auditsel" / "dpsgd").glob("*.py"))
    assert files
    for f in files:
        assert not any(m == "attacks" or m.startswith("attacks.") for m in _imports(f)), f


def test_release_holds_no_coin_and_proxies_read_only_the_release():
    proto = threats.tuning_game("etcv", canaries.dirac(), model=ModelSpec("logreg", TRAIN.shape, 10),
                                train=TRAIN, validation=VAL,
                                rounds=__import__("auditsel.rounds", fromlist=["Point"]).Point(2),
                                grid=[{"lr": 0.1}], steps=2, noise_multiplier=1.0, device="cpu")
    member = np.array([0, 1, 1, 0], np.int8)
    o = proto.release(member, np.random.default_rng(0))
    allowed = {"score", "canary_dot", "config", "w0", "wN", "released", "lr", "clip", "steps",
               "noise_multiplier", "sample_rate"}
    assert set(o) == allowed
    # the release is the same function of the randomness whatever the coins of OTHER trials
    o2 = proto.release(np.array([1, 1, 1, 1], np.int8), np.random.default_rng(0))
    np.testing.assert_array_equal(o["canary_dot"][1:3], o2["canary_dot"][1:3])
