"""The adversary of the DP-SGD game: canaries, proxies of eq. 10, and the wall to the trainer."""

import ast
import pathlib
import typing

import numpy as np
import pytest
import torch

from attacks import dpsgd_canaries, threats
from attacks.dpsgd_proxies import LambdaA, LambdaB, make_dpsgd_proxy
from auditsel.dpsgd.datasets import Dataset, load_split
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.trainer import ExampleCanary, Execution, TrainSettings, train_runs

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAIN, VAL = load_split("digits")


def obs(dot, steps, clip, score, released=None):
    """A release whose per-step statistics sum to ``dot`` (spread over the run's steps)."""
    n = len(dot)
    steps_ = np.asarray(steps)
    dots = np.zeros((n, max(1, int(steps_.max()))))
    for t in range(n):
        if steps_[t] > 0:
            dots[t, : steps_[t]] = np.asarray(dot, float)[t] / steps_[t]
    return {
        "canary_dots": dots,
        "steps": steps_,
        "clip": np.asarray(clip, float),
        "score": np.asarray(score, float),
        "released": np.ones(n, bool) if released is None else np.asarray(released),
    }


def test_lambda_a_is_mean_inner_product_over_c_squared():
    o = obs([8.0, -2.0], [4, 2], [2.0, 0.5], [0.0, 0.0])
    np.testing.assert_allclose(LambdaA()(o), [8 / (4 * 4), -2 / (2 * 0.25)])


@pytest.mark.parametrize("threat,sign", [("ntnv", -1), ("ntcv", 1), ("etcv", 1)])
def test_lambda_b_adds_the_score_with_the_threat_models_sign(threat, sign):
    o = obs([4.0, 4.0], [1, 1], [1.0, 1.0], [0.5, -2.0])
    np.testing.assert_allclose(
        make_dpsgd_proxy("lambda_b", threat)(o), 4.0 + sign * np.array([0.5, -2.0])
    )


def test_fixed_output_scores_minus_infinity_and_unknown_proxy_errors():
    o = obs([-np.inf, 1.0], [0, 1], [0.0, 1.0], [0.0, 1.0], released=[False, True])
    assert LambdaA()(o)[0] == -np.inf and LambdaB(threats.NTNV)(o)[0] == -np.inf
    with pytest.raises(ValueError, match=r"^game.proxy: must be one of lambda_a, lambda_b"):
        make_dpsgd_proxy("loss")


@pytest.mark.slow  # DP-SGD training runs (tests/dpsgd/test_dpsgd_trainer.py checks the Dirac canary's sum by default)
def test_dirac_canary_writes_c_to_coordinate_zero_only():
    model = ModelSpec("mlp", TRAIN.shape, 10)
    res = train_runs(
        model,
        Dataset.empty_like(TRAIN),
        seeds=[0],
        canary=dpsgd_canaries.dirac(),
        include_canary=[True],
        execution=Execution(device="cpu", dtype=torch.float64),
        settings=TrainSettings(steps=3, lr=1.0, clip=0.7, noise_multiplier=0.0, sample_rate=1.0),
    )
    delta = (res.w0 - res.wN)[0].numpy()
    assert delta[0] == pytest.approx(3 * 0.7) and np.all(delta[1:] == 0)
    assert res.canary_dot.item() == pytest.approx(3 * 0.7**2)


def test_input_canaries_have_the_training_shape_and_are_out_of_distribution():
    for kind in dpsgd_canaries.OOD_KINDS:
        z = dpsgd_canaries.out_of_distribution(TRAIN, kind)
        assert isinstance(z, ExampleCanary) and z.x.shape == TRAIN.shape
        nearest = np.min(np.abs(TRAIN.x - z.x).reshape(len(TRAIN), -1).sum(1))
        assert nearest > 1.0  # no training image is close to it
    wrong = dpsgd_canaries.mislabelled(VAL, 3)
    assert wrong.y != VAL.y[3] and np.array_equal(wrong.x, VAL.x[3])


def test_canary_from_another_dataset_is_resized():
    big = Dataset(
        "big",
        np.random.default_rng(0).random((2, 3, 32, 32)).astype(np.float32),
        np.array([4, 12]),
        13,
    )
    z = dpsgd_canaries.from_dataset(big, 1, like=TRAIN)
    assert z.x.shape == (1, 8, 8) and z.y == 12 % 10
    np.testing.assert_allclose(z.x.mean(), big.x[1].mean(), rtol=1e-5)
    with pytest.raises(ValueError, match=r"^game.canary_index: must be in \[0, 2\)"):
        dpsgd_canaries.from_dataset(big, 5, like=TRAIN)
    with pytest.raises(ValueError, match=r"^game.canary: cannot place"):
        dpsgd_canaries.from_dataset(big, 0, like=load_split("breast_cancer")[0])


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


class RecordingRelease(dict):
    """A release that records which fields a proxy reads."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def _release(member, seed=0, threat="etcv"):
    from auditsel.rounds import Point

    proto = threats.tuning_game(
        threat,
        dpsgd_canaries.dirac(),
        model=ModelSpec("logreg", TRAIN.shape, 10),
        train=TRAIN.take(30),
        validation=VAL.take(20),
        rounds=Point(2),
        grid=[{"lr": 0.1}, {"lr": 0.2, "steps": 3}],
        steps=2,
        noise_multiplier=1.0,
        execution=Execution(device="cpu"),
    )
    return proto.release(np.asarray(member, np.int8), np.random.default_rng(seed))


def test_release_holds_exactly_the_documented_fields_and_no_coin():
    from auditsel.dpsgd.tuning_protocol import GRID_KEYS, RELEASE_FIELDS, DpsgdRelease

    o = _release([0, 1, 1, 0])
    assert list(o) == list(RELEASE_FIELDS) and set(GRID_KEYS) < set(RELEASE_FIELDS)
    assert RELEASE_FIELDS == ("score", "canary_dots", "config", "w0", "wN", "released", *GRID_KEYS)
    # each field has the dtype its type (DpsgdRelease) declares
    for key, hint in typing.get_type_hints(DpsgdRelease).items():
        (dtype,) = typing.get_args(typing.get_args(hint)[1])
        assert o[key].dtype == dtype and len(o[key]) == 4, (key, o[key].dtype, dtype)
    assert not set(RELEASE_FIELDS) & {"member", "coin", "b", "k", "runs", "seeds", "losing"}
    assert o["canary_dots"].shape == (4, 3)  # N_max = 3 steps; 2-step runs end in a 0
    # the release of a trial is the same function of the randomness whatever the coins of
    # OTHER trials: nothing of another trial's coin leaks into it
    o2 = _release([1, 1, 1, 1])
    for key in RELEASE_FIELDS:
        np.testing.assert_array_equal(o[key][1:3], o2[key][1:3])
    assert not np.array_equal(o["canary_dots"][0], o2["canary_dots"][0])  # its own coin does


@pytest.mark.parametrize("threat", ["ntnv", "ntcv", "etcv"])
def test_proxies_read_only_released_fields(threat):
    """Adversary side of the wall: every DP-SGD proxy, run on a real release, reads only fields
    of RELEASE_FIELDS (never the coin, k or a losing run), and the source of attacks/ reads no
    other field and calls nothing that would hand it the protocol's internal randomness."""
    from attacks.dpsgd_proxies import DPSGD_PROXIES
    from auditsel.dpsgd.tuning_protocol import RELEASE_FIELDS
    from auditsel.mechanisms import DpsgdBase
    from auditsel.rounds import Point

    o = RecordingRelease(_release([0, 1, 1, 0], threat=threat))
    for name in DPSGD_PROXIES:
        o.read.clear()
        scores = make_dpsgd_proxy(name, threat, base=DpsgdBase(1.0, 2), rounds=Point(2))(o)
        assert scores.shape == (4,) and o.read and o.read <= set(RELEASE_FIELDS), (name, o.read)
    for f in (ROOT / "attacks").glob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                assert node.attr not in {"plan", "_update", "member", "configs"}, (f, node.attr)
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id in {"obs", "observations", "release"}
                and isinstance(node.slice, ast.Constant)
            ):
                assert node.slice.value in RELEASE_FIELDS, (f, node.slice.value)


def test_likelihood_ratio_proxy_reads_the_reduced_games_winner_on_etcv_dirac():
    """ETCV, Z_D, tau = 1, one learning rate, K = 3: s = lambda_a sqrt(N)/sigma of the released
    run is the best of 3 draws of N(b mu, 1), i.e. its cdf is Phi(x - b mu)^3 (KS test per coin),
    and the proxy is the reduced game's log-likelihood ratio at s."""
    from scipy import stats

    from attacks.dpsgd_game import DpsgdGameSpec, build_protocol, make_scorer
    from auditsel.mechanisms import DpsgdBase
    from auditsel.rounds import Point

    base, rounds = DpsgdBase(noise_multiplier=2.0, steps=4), Point(3)
    spec = DpsgdGameSpec(
        threat="etcv", canary="dirac", dataset="breast_cancer", learning_rates=(0.05,), device="cpu"
    )
    proto = build_protocol(spec, base, rounds)
    member = np.repeat([0, 1], 300).astype(np.int8)
    o = proto.release(member, np.random.default_rng(1))
    proxy = make_dpsgd_proxy("likelihood_ratio", "etcv", base=base, rounds=rounds)
    s = LambdaA()(o) * np.sqrt(base.steps) / base.noise_multiplier
    mu = np.sqrt(base.steps) / base.noise_multiplier
    for b in (0, 1):
        cdf = lambda x, b=b: stats.norm.cdf(x - b * mu) ** 3
        assert stats.kstest(s[member == b], cdf).pvalue > 1e-3
    np.testing.assert_allclose(proxy(o), proxy.winner.log_likelihood_ratio(s))
    assert make_scorer(spec, ("lambda_a", "likelihood_ratio"), base, rounds)(o).shape == (600, 2)
