"""The checks on plain torch loops (no Opacus): each bug found, each correct pipeline clean."""

import math

import numpy as np
import pytest
import torch
from plain_pipelines import (
    BASE,
    FEATURES,
    HandDP,
    Scaled,
    column_stats,
    constant_stats,
    data,
    loader,
    train,
)

from auditsel import DpsgdBase, Poisson, RunObjects, check_pipeline
from auditsel.errors import ConfigError
from auditsel.pipelines.checks import BREAKS, WARNING
from auditsel.pipelines.checks.data import MIN_CLASS_ROWS
from auditsel.pipelines.checks.release import released_runs_epsilon
from auditsel.reproductions.bugzoo.author_claims import released_runs_epsilon as exact_runs

DELTA = 1e-5


def _checks(findings):
    return [(f.check, f.severity) for f in findings]


def test_a_second_plain_optimizer_breaks_the_claim_and_one_dp_optimizer_does_not():
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 4), torch.nn.Linear(4, 1))
    body, head = model[0], model[1]
    dp, plain = HandDP(body.parameters()), torch.optim.SGD(head.parameters(), lr=0.1)
    train(model, [dp, plain], loader(data()))
    (finding,) = check_pipeline(RunObjects(model=model, optimizers=[dp, plain]))
    assert (finding.check, finding.severity) == ("parameters_outside_dp", BREAKS)
    assert finding.obj.startswith("optimizers[1]") and "1.weight" in finding.message
    assert finding.effect == math.inf
    whole = HandDP(model.parameters())
    assert check_pipeline(RunObjects(model=model, optimizers=[whole])) == []
    # no DP optimizer at all: nothing to compare against, nothing said
    assert check_pipeline(RunObjects(model=model, optimizers=[plain])) == []


def test_shuffled_batches_break_a_poisson_claim_and_full_batches_do_not():
    dataset = data()
    (finding,) = check_pipeline(RunObjects(data_loader=loader(dataset), base=BASE, delta=DELTA))
    assert (finding.check, finding.severity) == ("sampling", BREAKS)
    assert finding.effect is None and "not computed" in finding.effect_text
    assert "RandomSampler" in finding.obj
    in_order = loader(dataset, shuffle=False)
    assert _checks(check_pipeline(RunObjects(data_loader=in_order, base=BASE))) == [
        ("sampling", BREAKS)
    ]
    full = loader(dataset, batch=len(dataset))
    full_base = DpsgdBase(BASE.noise_multiplier, BASE.steps, 1.0, "pld")
    assert check_pipeline(RunObjects(data_loader=full, base=full_base, delta=DELTA)) == []


def test_optimizers_with_different_noise_break_the_claim():
    model = torch.nn.Linear(FEATURES, 1)
    weight, bias = HandDP([model.weight], noise_multiplier=1.0), HandDP([model.bias], 0.1, 0.5)
    (finding,) = check_pipeline(RunObjects(optimizers=[weight, bias], base=BASE, delta=DELTA))
    assert (finding.check, finding.severity) == ("settings", BREAKS)
    one_run = BASE.epsilon(DELTA)
    assert finding.effect == pytest.approx(
        DpsgdBase(0.5, BASE.steps, BASE.sample_rate, "pld").epsilon(DELTA)
    )
    assert finding.effect > one_run
    same = [HandDP([model.weight]), HandDP([model.bias])]
    assert check_pipeline(RunObjects(optimizers=same, base=BASE, delta=DELTA)) == []


def test_per_layer_clipping_with_a_flat_noise_breaks_the_claim():
    model = torch.nn.Linear(FEATURES, 1)
    per_layer = HandDP(model.parameters(), noise_multiplier=1.0, max_grad_norm=1.0)
    per_layer.max_grad_norms = [1.0, 1.0]  # each tensor clipped to 1: together up to sqrt(2)
    (finding,) = check_pipeline(RunObjects(optimizers=[per_layer], base=BASE, delta=DELTA))
    assert (finding.check, finding.severity) == ("per_layer_clipping", BREAKS)
    effective = DpsgdBase(1.0 / math.sqrt(2), BASE.steps, BASE.sample_rate, "pld")
    assert finding.effect == pytest.approx(effective.epsilon(DELTA))
    per_layer.max_grad_norm = math.sqrt(2)  # Opacus's calibration: the norm of the norms
    assert check_pipeline(RunObjects(optimizers=[per_layer], base=BASE, delta=DELTA)) == []


def test_batchnorm_statistics_are_found_by_the_probe_and_left_as_they_were():
    dataset = data()
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(FEATURES), torch.nn.Linear(FEATURES, 1))
    train(model, [HandDP(model.parameters())], loader(dataset))
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    (finding,) = check_pipeline(RunObjects(model=model, dataset=dataset))
    assert (finding.check, finding.severity) == ("data_dependent_state", BREAKS)
    assert "0.running_mean" in finding.message and "0.running_var" in finding.message
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before) and not model.training
    plain = torch.nn.Sequential(torch.nn.LayerNorm(FEATURES), torch.nn.Linear(FEATURES, 1))
    assert check_pipeline(RunObjects(model=plain, dataset=dataset)) == []


def test_a_scaler_fitted_on_the_data_is_found_and_fixed_constants_are_not():
    dataset = data()
    fitted = Scaled(*column_stats(dataset))
    (finding,) = check_pipeline(RunObjects(model=fitted, dataset=dataset))
    assert (finding.check, finding.severity) == ("data_dependent_state", BREAKS)
    assert "model.mean = the data's column mean" in finding.message
    assert check_pipeline(RunObjects(model=Scaled(*constant_stats()), dataset=dataset)) == []


def test_a_released_scikit_learn_scaler_is_found():
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    dataset = data()
    scaler = preprocessing.StandardScaler().fit(dataset.tensors[0].numpy())
    (finding,) = check_pipeline(RunObjects(dataset=dataset, release={"scaler": scaler, "lr": 0.5}))
    assert finding.check == "data_dependent_state" and "release['scaler'].mean_" in finding.message
    model = torch.nn.Linear(FEATURES, 1)
    model.scaler = scaler  # kept inside the released model
    (inside,) = check_pipeline(RunObjects(model=model, dataset=dataset))
    assert "model.scaler.mean_ = the data's column mean" in inside.message
    fixed = preprocessing.StandardScaler().fit(np.eye(FEATURES))
    assert check_pipeline(RunObjects(dataset=dataset, release={"scaler": fixed})) == []


def test_duplicate_rows_warn_with_the_group_privacy_epsilon():
    dataset, base = data(duplicate=3), DpsgdBase(4.0, 8, 0.25, "pld")
    (finding,) = check_pipeline(RunObjects(dataset=dataset, base=base, delta=DELTA))
    assert (finding.check, finding.severity) == ("duplicates", WARNING)
    assert "largest group: 3" in finding.message
    # 3 eps(delta_1) for a delta_1 < delta: at least 3 eps(delta), and finite
    assert 3 * base.epsilon(DELTA) <= finding.effect < math.inf
    # a run whose eps is too large for the conversion: no finite group eps, said so
    (weak,) = check_pipeline(RunObjects(dataset=dataset, base=BASE, delta=DELTA))
    assert weak.effect == math.inf and "no finite eps" in weak.effect_text
    (claimed,) = check_pipeline(RunObjects(dataset=dataset, claim=1.5, delta=DELTA))
    assert (
        claimed.effect == 3 * 1.5 and f"{3 * math.exp(2 * 1.5) * DELTA:.3g}" in claimed.effect_text
    )
    # from the claim alone, a claim too large for the conversion gives no guarantee
    (vacuous,) = check_pipeline(RunObjects(dataset=dataset, claim=8.0, delta=DELTA))
    assert vacuous.effect == math.inf and "no guarantee" in vacuous.effect_text
    # full batches: 3 rows move the clipped sum by 3 C, the claim at noise sigma / 3
    full = DpsgdBase(4.0, 8, 1.0, "pld")
    (grouped,) = check_pipeline(RunObjects(dataset=dataset, base=full, delta=DELTA))
    assert grouped.effect == pytest.approx(DpsgdBase(4.0 / 3, 8, 1.0, "pld").epsilon(DELTA))
    assert check_pipeline(RunObjects(dataset=data(), base=BASE, delta=DELTA)) == []


def _oversampled(copies: int, label: float = 1.0):
    """`data()` with every row of one label repeated `copies` times (balancing by copying)."""
    X, y = data().tensors
    repeats = torch.where(y == label, copies, 1)
    return torch.utils.data.TensorDataset(
        X.repeat_interleave(repeats, dim=0), y.repeat_interleave(repeats)
    )


def test_a_replicated_class_breaks_the_claim_and_incidental_duplicates_warn():
    """Systematic duplication (every row of a label at least twice) is certainly one person
    counted several times: breaks, with the group-privacy epsilon; a few copies warn."""
    full = DpsgdBase(4.0, 8, 1.0, "pld")
    (finding,) = check_pipeline(RunObjects(dataset=_oversampled(5), base=full, delta=DELTA))
    assert (finding.check, finding.severity) == ("duplicates", BREAKS)
    rare = int((data().tensors[1] == 1).sum())
    assert f"every one of the {rare} distinct rows with label 1 occurs 5 times" in finding.message
    assert finding.effect == pytest.approx(DpsgdBase(4.0 / 5, 8, 1.0, "pld").epsilon(DELTA))
    # the whole dataset copied twice: no label needed
    X, y = data().tensors
    twice = torch.utils.data.TensorDataset(torch.cat([X, X]), torch.cat([y, y]))
    (doubled,) = check_pipeline(RunObjects(dataset=twice, base=full, delta=DELTA))
    assert doubled.severity == BREAKS and "occurs 2 times" in doubled.message
    # a few incidental copies, or a replicated label of fewer than MIN_CLASS_ROWS rows: warnings
    (few,) = check_pipeline(RunObjects(dataset=data(duplicate=4), base=full, delta=DELTA))
    assert few.severity == WARNING
    k = MIN_CLASS_ROWS - 1  # a label 7 of k distinct rows, each twice: too few to say
    sevens = torch.full((2 * k,), 7.0)
    small = torch.utils.data.TensorDataset(torch.cat([X, X[:k], X[:k]]), torch.cat([y, sevens]))
    (tiny,) = check_pipeline(RunObjects(dataset=small, base=full, delta=DELTA))
    assert tiny.severity == WARNING and "largest group: 2" in tiny.message


def _weights():
    return [torch.zeros(FEATURES), torch.zeros(1)]


def test_a_release_of_every_run_breaks_the_claim_with_the_composed_epsilon():
    runs = [{"model": _weights(), "lr": lr, "accuracy": 0.9} for lr in (0.5, 1.0, 2.0)]
    full = DpsgdBase(4.0, 4, 1.0, "pld")  # full-batch DP-GD: Gaussian of mu = sqrt(4) / 4
    (finding,) = check_pipeline(
        RunObjects(release={"runs": runs, "best": 1}, base=full, rounds=Poisson(3), delta=DELTA)
    )
    assert (finding.check, finding.severity) == ("release_runs", BREAKS)
    assert finding.obj == "release['runs']" and "models of 3 runs" in finding.message
    exact = exact_runs(math.sqrt(4) / 4, Poisson(3), DELTA)
    # a grid of ratio 10^(6/480) above the exact value, PLD's pessimism included
    assert exact <= finding.effect <= exact * 1.05
    assert finding.effect == released_runs_epsilon(full, Poisson(3), DELTA)
    (scores,) = check_pipeline(
        RunObjects(release={"model": _weights(), "val_accuracies": [0.8, 0.9]})
    )
    assert scores.check == "release_runs" and "scores of 2 runs" in scores.message
    assert (
        check_pipeline(RunObjects(release={"model": _weights(), "lr": 0.5, "accuracy": 0.9})) == []
    )


def test_bad_arguments_name_the_field():
    with pytest.raises(ConfigError, match="delta"):
        check_pipeline(RunObjects(delta=2))
    with pytest.raises(ConfigError, match="rounds"):
        check_pipeline(RunObjects(rounds=3))
    with pytest.raises(ConfigError, match="claim"):
        check_pipeline(RunObjects(claim=-1))
    assert check_pipeline(RunObjects()) == []


def test_objects_of_other_kinds_are_read_as_nothing():
    """Not a model, an optimizer, a loader, a dataset or a release: no finding, no crash."""
    found = check_pipeline(
        RunObjects(
            model=object(),
            optimizers=[object(), "sgd"],
            data_loader="abc",
            dataset="abc",
            release={"runs": ["a", "b"]},
            delta=DELTA,
        )
    )
    assert found == []
    assert check_pipeline(RunObjects(dataset=[("a", 1), ("b", 2)])) == []


def test_the_probe_reads_rows_of_token_ids():
    tokens = torch.randint(0, 10, (32, 4), generator=torch.Generator().manual_seed(0))
    dataset = torch.utils.data.TensorDataset(tokens, torch.zeros(32))
    model = torch.nn.Sequential(
        torch.nn.Embedding(10, 2), torch.nn.Flatten(), torch.nn.BatchNorm1d(8)
    )
    (finding,) = check_pipeline(RunObjects(model=model, dataset=dataset))
    assert finding.check == "data_dependent_state" and "2.running_mean" in finding.message
    plain = torch.nn.Sequential(torch.nn.Embedding(10, 2), torch.nn.Flatten())
    assert check_pipeline(RunObjects(model=plain, dataset=dataset)) == []


def test_the_claim_under_tuning_is_the_panel_intervals_upper_end():
    # claim_epsilon reads the tightest rigorous bound alone; the panel (with the attack) is an
    # independent route to the same upper end, here at a changed noise and at another delta
    from auditsel.accounting.panel import panel
    from auditsel.pipelines.checks.finding import Context

    base, law = DpsgdBase(1.0, 60, 0.02), Poisson(4.0)
    ctx = Context(model=None, base=base, rounds=law, delta=DELTA)
    for changes, delta in (({}, DELTA), ({"noise_multiplier": 0.7}, DELTA), ({}, 1e-7)):
        expected = panel(DpsgdBase(changes.get("noise_multiplier", 1.0), 60, 0.02), law, delta)
        got = ctx.claim_epsilon(delta=delta, **changes)
        assert got == expected.interval.upper and math.isfinite(got)
