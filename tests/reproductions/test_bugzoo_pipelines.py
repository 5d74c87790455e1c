"""The bug zoo's pipelines one by one: each new pipeline plays the documented route (a few
games), its claim is its author's accounting, its bug is where its docstring says, its correct
interval is above its claim where one is computed, and every torch or Opacus module hands its
objects to a static check (`pipeline_objects`). The correct pipelines' small audits are slow."""

import importlib
import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

import torch
import zoo_numbers

import auditsel
from auditsel.accounting.interval import tuning_epsilon
from auditsel.pipelines.pipeline import Pipeline
from auditsel.reproductions import bugzoo
from auditsel.reproductions.bugzoo import zoo_objects

DELTA = bugzoo.DELTA
NEW = [
    "correct_opacus_mlp",
    "noise_after_lr",
    "scaler_in_model",
    "early_stop_loss",
    "noise_before_clip",
    "per_tensor_clip",
    "leaderboard",
    "oversampled_class",
    "second_optimizer_head",
]
OPACUS = {"correct_opacus_mlp", "scaler_in_model", "early_stop_loss", "second_optimizer_head"}
OPACUS |= {"correct_opacus", "shuffled_batches", "noise_before_clip", "per_tensor_clip"}
# (the hand-written digits loops import correct_opacus_mlp's grid, hence opacus)


def module(name: str):
    if name in OPACUS:
        pytest.importorskip("opacus")
    return bugzoo.module(name)


def claim(name: str) -> float:
    """`module(name).claim(DELTA)` (opacus asked for first), once per session (zoo_numbers)."""
    module(name)
    return zoo_numbers.claim(name)


def correct_interval(name: str) -> tuple:
    """`module(name).correct_interval(DELTA)`, once per session (zoo_numbers)."""
    module(name)
    return zoo_numbers.correct_interval(name)


ROUTE = [
    pytest.param(
        name,
        marks=pytest.mark.xfail(
            raises=auditsel.ConfigError,
            strict=False,
            reason="the default every-field score refuses a list whose length varies with K "
            "(issue 36 item 1 aggregates it); results/bugzoo shows the refusal",
        ),
    )
    if name == "leaderboard"
    else name
    for name in NEW
]


@pytest.mark.slow  # the learned default score plays a 200-game pilot per canary first
@pytest.mark.parametrize("name", ROUTE)
def test_each_new_pipeline_plays_the_documented_route(name):
    """canary="both" and the default score on a few games (each canary's coins, seed 0, give
    both members): the route reads the release, and each canary plays its games (none
    refused, none raised)."""
    m = module(name)
    result = auditsel.audit_pipeline(
        Pipeline(m.tune, None, data=m.TRAIN, canary="both"),
        games=8,
        delta=DELTA,
        claimed_epsilon=claim(name),
        report=auditsel.ReportOptions(panel=False),
    )
    assert result.games == 16 and len(result.result["canaries"]) == 2
    assert result.eps >= 0


def test_the_claims_are_the_authors_accounting():
    pytest.importorskip("opacus")
    mlp = bugzoo.module("correct_opacus_mlp")
    base = auditsel.DpsgdBase(2.0, 5, 0.2)
    expected = tuning_epsilon(base, auditsel.TruncatedNegativeBinomial(1.0, 0.5), DELTA).epsilon
    assert claim("per_tensor_clip") == pytest.approx(expected, rel=1e-12)
    run = mlp.opacus_run(DELTA)  # Opacus reads the run: noise 2, 5 steps at rate 0.2
    assert (run.base.noise_multiplier, run.base.steps) == (2.0, 5)
    assert run.base.sample_rate == pytest.approx(0.2)
    assert claim("correct_opacus_mlp") == pytest.approx(expected, rel=1e-9)
    assert bugzoo.module("noise_after_lr").claim is bugzoo.module("correct_dpgd").claim
    # early_stop_loss is accounted for the most steps a run takes
    assert claim("early_stop_loss") > claim("correct_opacus")


@pytest.mark.parametrize(
    "name", ["per_tensor_clip", "oversampled_class", "scaler_in_model", "release_all"]
)
def test_a_bug_whose_correct_lower_end_is_computed_costs_more_than_its_claim(name):
    lower, upper, how = correct_interval(name)
    assert lower is not None and upper is not None and lower <= upper
    assert lower > claim(name) and how


def test_the_correct_pipelines_intervals():
    """The Opacus ones claim their interval's upper end; the hand-written one claims [XWW24]'s
    monotone-score value, below its any-score interval (issue 37: the interval is the correct
    eps for any score)."""
    pytest.importorskip("opacus")
    for name in ("correct_opacus", "correct_opacus_mlp"):
        lower, upper, _ = correct_interval(name)
        assert lower <= upper == pytest.approx(claim(name), rel=1e-9)
    lower, upper, _ = correct_interval("correct_dpgd")
    assert claim("correct_dpgd") < lower <= upper


def test_per_tensor_clipping_lets_an_example_through_at_c_sqrt5():
    m = module("per_tensor_clip")
    hand = importlib.import_module("auditsel.reproductions.bugzoo.hand_dpsgd")
    model = hand.fixed_mlp(**m.SHAPE)
    shapes = [p.shape for p in model.parameters()]
    assert len(shapes) == m.TENSORS == 5
    grads = [torch.full((1, *s), 10.0) for s in shapes]  # one example, large in every tensor
    noiseless = pytest.MonkeyPatch.context()
    with noiseless as mp:
        mp.setattr(hand, "NOISE", 0.0)
        summed = m.privatize(grads, 1.0, bugzoo.module("correct_opacus_mlp").NULL)
    norm = math.sqrt(sum(float((s**2).sum()) for s in summed))
    assert norm == pytest.approx(math.sqrt(5), rel=1e-5)  # flat clipping would give 1


def test_noise_before_clipping_is_mostly_clipped_away():
    m = module("noise_before_clip")
    hand = importlib.import_module("auditsel.reproductions.bugzoo.hand_dpsgd")
    model = hand.fixed_mlp(**m.SHAPE)
    torch.manual_seed(0)
    grads = [torch.zeros((200, *p.shape)) for p in model.parameters()]  # only the noise
    summed = m.privatize(grads, 1.0, bugzoo.module("correct_opacus_mlp").NULL)
    std = float(torch.cat([s.reshape(-1) for s in summed]).std())
    assert std < hand.NOISE / 2  # DP-SGD's sum would carry noise of std NOISE * C


def test_the_scaler_ships_the_private_rows_mean():
    m = module("scaler_in_model")
    X, y = m.TRAIN
    torch.manual_seed(0)
    release = m.tune((X, y), 3, m.NULL)
    assert torch.allclose(release["model"].mean, X.mean(0))
    row = torch.full((1, X.shape[1]), 5.0)
    other = m.tune((torch.cat([X, row]), torch.cat([y, torch.ones(1)])), 3, m.NULL)
    assert not torch.allclose(other["model"].mean, release["model"].mean)  # one row moves it


def test_the_rare_class_is_repeated_nine_times():
    m = module("oversampled_class")
    X, y = m.TRAIN
    labels, counts = y.unique(return_counts=True)
    rare = float(labels[counts.argmin()])  # the label with fewer rows, counted
    assert int((y == rare).sum()) < int((y != rare).sum())
    Xo, yo = m.oversample((X, y))
    assert int((yo == rare).sum()) == m.COPIES * int((y == rare).sum())
    assert int((yo != rare).sum()) == int((y != rare).sum()) and len(Xo) == len(yo)


def test_the_leaderboard_has_one_entry_per_trial():
    m = module("leaderboard")
    null = bugzoo.module("correct_dpgd").CANARY
    lengths = {len(m.tune(m.TRAIN, seed, null)["leaderboard"]) for seed in range(6)}
    assert len(lengths) > 1  # its length is K, which varies


def test_early_stopping_releases_the_step_it_stopped_at():
    m = module("early_stop_loss")
    torch.manual_seed(0)
    steps = [m.train(m.TRAIN, lr, m.NULL)[1] for lr in (0.25, 2.0, 2.0, 2.0)]
    assert all(1 <= s <= m.MAX_STEPS for s in steps) and min(steps) < m.MAX_STEPS


def test_the_second_optimizer_trains_the_head_without_noise():
    m = module("second_optimizer_head")
    mlp = bugzoo.module("correct_opacus_mlp")
    torch.manual_seed(0)
    model = mlp.train(m.TRAIN, 2.0, 1.0, m.NULL)[0]
    body = [p.detach().clone() for p in model[:-1].parameters()]
    before = {k: v.clone() for k, v in model[-1].state_dict().items()}
    heads = []
    for _ in range(2):
        m.calibrate_head(model, m.TRAIN)
        heads.append(model[-1].weight.detach().clone())
        model[-1].load_state_dict(before)
    assert torch.equal(heads[0], heads[1])  # deterministic: no noise
    assert not torch.equal(heads[0], before["weight"])  # and it moved the head
    assert all(torch.equal(a, b) for a, b in zip(body, model[:-1].parameters()))


def test_noise_after_the_step_does_not_scale_with_the_learning_rate():
    m = module("noise_after_lr")
    X, y = m.TRAIN
    zero = (torch.zeros_like(X), y)  # no feature: the weights move by the noise alone
    null = bugzoo.module("correct_dpgd").CANARY
    spread = {}
    for lr in (0.25, 4.0):
        ws = [m.train(zero, lr, torch.Generator().manual_seed(s), null)[0] for s in range(20)]
        spread[lr] = float(torch.stack(ws).std())
    assert spread[4.0] == pytest.approx(spread[0.25], rel=0.15)  # DP-GD's would be 16x


OBJECTS = [n for n in bugzoo.PIPELINES if n != "shuffled_batches"]


#: the Opacus pipelines over 2 CPU s each (issue 39's measurement) but one, correct_opacus,
#: in the slow tier: it and the numpy pipelines hold the same keys by default
SLOW_OBJECTS = {"correct_opacus_mlp", "scaler_in_model", "early_stop_loss", "second_optimizer_head"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_OBJECTS else n for n in OBJECTS]
)
def test_pipeline_objects_hold_the_checks_keys(name):
    m = module(name)
    objects = m.pipeline_objects(seed=0)
    assert tuple(objects) == zoo_objects.KEYS
    assert isinstance(objects["optimizers"], list) and objects["delta"] == DELTA
    assert isinstance(objects["rounds"], auditsel.RoundsLaw)
    assert objects["claim"] == pytest.approx(claim(name), rel=1e-9)
    assert objects["release"] is not None and objects["dataset"] is not None
    if name in OPACUS - {"noise_before_clip", "per_tensor_clip"}:
        from opacus import PrivacyEngine

        assert isinstance(objects["engine"], PrivacyEngine)
        assert isinstance(objects["model"], torch.nn.Module)
        assert objects["data_loader"] is not None and len(objects["optimizers"]) >= 1
    else:
        assert objects["engine"] is None and objects["data_loader"] is None
    if name == "second_optimizer_head":
        assert len(objects["optimizers"]) == 2  # the DP optimizer and the head's


@pytest.mark.slow  # statistical runs (audits of an Opacus pipeline)
@pytest.mark.parametrize("seed", [0, 1])
def test_the_correct_random_init_opacus_pipeline_is_not_refuted(seed):
    m = module("correct_opacus_mlp")
    result = auditsel.audit_pipeline(
        Pipeline(m.tune, None, data=m.TRAIN, canary="both"),
        games=100,
        delta=DELTA,
        claimed_epsilon=claim("correct_opacus_mlp"),
        statistics=auditsel.AuditOptions(seed=seed),
        report=auditsel.ReportOptions(panel=False),
    )
    assert result.refuted is False


def test_the_bugzoo_options_are_checked(capsys):
    from auditsel.cli import main

    assert main(["reproduce", "table4", "--budget", "100"]) == 2
    assert "--budget: only `auditsel reproduce bugzoo` takes it" in capsys.readouterr().err
    assert main(["reproduce", "bugzoo", "--pipelines", "nope"]) == 2
    assert "--pipelines: must name zoo pipelines" in capsys.readouterr().err
    assert main(["reproduce", "bugzoo", "--pilot", "5"]) == 2
    assert "--pilot: must be an integer >= 20, got 5" in capsys.readouterr().err


def test_the_oversampled_class_is_the_rare_one_and_the_routes_input_canary_is_in_it():
    """The bug balances the classes: the less frequent label's rows are the ones repeated
    COPIES times, and the route's outlier person carries that label, so its row is repeated
    with them (the bug's worst case: one person of the rare class is COPIES rows)."""
    import numpy as np

    from auditsel.pipelines.default_canaries import outlier_example

    m = module("oversampled_class")
    labels, counts = torch.unique(m.TRAIN[1], return_counts=True)
    rare = float(labels[counts.argmin()])
    _, y = m.oversample(m.TRAIN)
    assert int((y == rare).sum()) == m.COPIES * int(counts.min())
    assert int((y != rare).sum()) == int(counts.max())
    person = outlier_example(m.TRAIN)
    assert float(np.asarray(person.y)) == rare
    X, _ = m.oversample(person.for_game(True, np.random.default_rng(0)).prepare(m.TRAIN))
    far = float(np.max(np.abs(person.x))) / 2  # only the outlier's rows reach half its feature
    assert int((X.abs().max(dim=1).values > far).sum()) == m.COPIES
