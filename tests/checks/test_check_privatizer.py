"""The sensitivity probe of a hand-written loop's clip-and-noise step (`privatizer=`): flat
clipping is clean, per-tensor clipping of L tensors breaks a flat claim by sqrt(L), and a step
the probe cannot measure says so."""

import math
import re

import pytest
import torch

from auditsel import DpsgdBase, RunObjects, check_pipeline
from auditsel.errors import ConfigError
from auditsel.pipelines.checks import BREAKS, WARNING
from auditsel.pipelines.checks.privatizer import NOISE_SHORTFALL, RTOL, SHAPES, sensitivity

DELTA = 1e-5
NOISE = 2.0
BASE = DpsgdBase(NOISE, 5, 0.2)


def _norms(grads):
    return torch.sqrt(sum((g.reshape(len(g), -1) ** 2).sum(1) for g in grads))


def flat(grads, clip):
    """Correct DP-SGD: each example's whole gradient clipped to C, noise NOISE C on the sum."""
    factor = (clip / _norms(grads).clamp(min=1e-12)).clamp(max=1.0)
    summed = [(g * factor.reshape(-1, *[1] * (g.dim() - 1))).sum(0) for g in grads]
    return [s + torch.normal(0.0, NOISE * clip, s.shape) for s in summed]


def per_tensor(grads, clip):
    """The bug: each tensor clipped to C, the noise calibrated to C."""
    out = []
    for g in grads:
        factor = (clip / g.reshape(len(g), -1).norm(dim=1).clamp(min=1e-12)).clamp(max=1.0)
        out.append((g * factor.reshape(-1, *[1] * (g.dim() - 1))).sum(0))
    return [s + torch.normal(0.0, NOISE * clip, s.shape) for s in out]


def noise_per_example(grads, clip):
    """Noise drawn for each example (before clipping): the probe cannot cancel it."""
    noisy = [g + torch.normal(0.0, NOISE * clip, g.shape) for g in grads]
    return flat(noisy, clip)


def no_noise(grads, clip):
    factor = (clip / _norms(grads).clamp(min=1e-12)).clamp(max=1.0)
    return [(g * factor.reshape(-1, *[1] * (g.dim() - 1))).sum(0) for g in grads]


def unclipped(grads, clip):
    return [g.sum(0) + torch.normal(0.0, NOISE * clip, g.shape[1:]) for g in grads]


def _mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3, bias=False)
    )  # 3 tensors


def test_flat_clipping_is_clean_and_measured_at_c():
    assert check_pipeline(RunObjects(privatizer=flat, model=_mlp(), base=BASE, delta=DELTA)) == []
    found = sensitivity(flat, [(4, 6), (4,), (3, 4)])
    assert found["sensitivity"] == pytest.approx(1.0, rel=RTOL)
    assert found["repeat"] == 0 and found["zero_row"] < RTOL and found["seeds"] > 1


def test_per_tensor_clipping_breaks_a_flat_claim_by_sqrt_of_the_tensors():
    (finding,) = check_pipeline(
        RunObjects(privatizer=per_tensor, model=_mlp(), base=BASE, delta=DELTA)
    )
    assert (finding.check, finding.severity) == ("per_layer_clipping", BREAKS)
    assert finding.obj == "privatizer (per_tensor)" and "sqrt(3) C" in finding.message
    # the run is DP-SGD at noise NOISE / sqrt(3): the claim recomputed there
    effective = DpsgdBase(NOISE / math.sqrt(3), 5, 0.2)
    assert finding.effect == pytest.approx(effective.epsilon(DELTA), rel=1e-3)
    assert finding.effect > BASE.epsilon(DELTA)
    # without a model, the probe's own shapes (4 tensors): sqrt(4) C
    (alone,) = check_pipeline(RunObjects(privatizer=per_tensor))
    assert len(SHAPES) == 4 and "2 C" in alone.message
    assert alone.effect is None and "pass base=" in alone.effect_text


def test_the_torch_random_state_is_left_as_it_was():
    model = _mlp()
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    check_pipeline(RunObjects(privatizer=per_tensor, model=model))
    assert torch.equal(torch.rand(3), expected)


def test_a_step_the_probe_cannot_measure_is_a_warning_and_no_noise_breaks():
    (cannot,) = check_pipeline(RunObjects(privatizer=noise_per_example, model=_mlp()))
    assert (cannot.severity, cannot.effect) == (WARNING, None)
    assert "does not cancel" in cannot.message

    def broken(grads, clip):
        raise RuntimeError("shapes")

    (raised,) = check_pipeline(RunObjects(privatizer=broken))
    assert raised.severity == WARNING and "raised RuntimeError: shapes" in raised.message
    (silent,) = check_pipeline(
        RunObjects(privatizer=no_noise, model=_mlp(), base=BASE, delta=DELTA)
    )
    assert (silent.check, silent.severity, silent.effect) == ("settings", BREAKS, math.inf)
    assert "no noise" in silent.message
    (open_,) = check_pipeline(
        RunObjects(privatizer=unclipped, model=_mlp(), base=BASE, delta=DELTA)
    )
    assert (open_.severity, open_.effect) == (BREAKS, math.inf)
    assert "unclipped" in open_.message and "unclipped" in open_.effect_text


def test_a_privatizer_that_is_not_a_function_is_bad_input():
    with pytest.raises(ConfigError, match="privatizer"):
        check_pipeline(RunObjects(privatizer=3))


def _scaled_noise(factor):
    def step(grads, clip):
        return [
            s + (factor - 1) * (s - c) for s, c in zip(flat(grads, clip), no_noise(grads, clip))
        ]

    return step


def test_less_noise_than_the_claim_breaks_it_and_a_little_less_is_left_to_the_games():
    """The noise's spread, estimated from seeded differences, against the claim's NOISE x C."""
    found = sensitivity(flat, [(4, 6), (4,), (3, 4)])
    assert found["noise_std"] == pytest.approx(NOISE, rel=4 / math.sqrt(2 * found["numbers"]))
    (short,) = check_pipeline(
        RunObjects(privatizer=_scaled_noise(0.25), model=_mlp(), base=BASE, delta=DELTA)
    )
    assert (short.check, short.severity) == ("settings", BREAKS)
    estimate = float(re.search(r"standard deviation of about ([\d.]+) C", short.message)[1])
    assert estimate == pytest.approx(NOISE / 4, rel=0.1)
    # the claim at the estimated noise multiplier (about NOISE / 4 = 0.5)
    low, high = (DpsgdBase(NOISE / 4 * f, 5, 0.2).epsilon(DELTA) for f in (1.1, 0.9))
    assert low < short.effect < high
    # noise 400 times too small: below the accountants' range, no number, said so
    (tiny,) = check_pipeline(
        RunObjects(privatizer=_scaled_noise(1 / 400), model=_mlp(), base=BASE, delta=DELTA)
    )
    assert tiny.effect is None and "below the accountants' range" in tiny.effect_text
    # 80% of the claim's noise: above NOISE_SHORTFALL, not reported (the games can tell)
    assert 0.8 > NOISE_SHORTFALL
    assert (
        check_pipeline(
            RunObjects(privatizer=_scaled_noise(0.8), model=_mlp(), base=BASE, delta=DELTA)
        )
        == []
    )
    # without a base there is no claimed noise to compare
    assert check_pipeline(RunObjects(privatizer=_scaled_noise(0.25), model=_mlp())) == []
