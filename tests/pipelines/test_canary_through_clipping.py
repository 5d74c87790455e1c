"""The gradient canary that enters before clipping (`GradientCanary.examples`): it is one more
example, so the pipeline's own clipping decides what it contributes ([NHSBTJCT23]'s Dirac
canary, spread over every parameter tensor for per-tensor clipping)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from auditsel.errors import ConfigError
from auditsel.pipelines.canaries import THROUGH, GradientCanary
from auditsel.pipelines.default_canaries import default_canaries

SHAPES = [(4, 3), (4,), (2, 4)]  # three parameter tensors: 12 + 4 + 8 coordinates
OFFSETS = [0, 12, 16]
CANARY = GradientCanary(coordinate=5, spread=(13, 19))  # one coordinate in each tensor
C = 0.7


def flat_clip_sum(grads: list[torch.Tensor], clip: float) -> list[torch.Tensor]:
    norms = torch.sqrt(sum((g.reshape(len(g), -1) ** 2).sum(1) for g in grads))
    factor = (clip / norms.clamp(min=1e-12)).clamp(max=1.0)
    return [(g * factor.reshape(-1, *[1] * (g.dim() - 1))).sum(0) for g in grads]


def tensor_clip_sum(grads: list[torch.Tensor], clip: float) -> list[torch.Tensor]:
    out = []
    for g in grads:
        norms = g.reshape(len(g), -1).norm(dim=1)
        factor = (clip / norms.clamp(min=1e-12)).clamp(max=1.0)
        out.append((g * factor.reshape(-1, *[1] * (g.dim() - 1))).sum(0))
    return out


def batch(rows: int = 6) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(rows, *s, generator=gen, dtype=torch.float64) for s in SHAPES]


def contribution(clip_sum, canary: GradientCanary) -> np.ndarray:
    """The canary's share of the clipped sum: with it in (taken) minus without."""
    grads = batch()
    bound = canary.for_game(True, np.random.default_rng(0))
    with_it = clip_sum(bound.examples(grads, sample_rate=1.0, max_grad_norm=C), C)
    without = clip_sum(grads, C)
    return np.concatenate([(a - b).reshape(-1).numpy() for a, b in zip(with_it, without)])


def test_flat_clipping_cuts_the_canary_to_norm_c_as_any_example():
    """Through flat clipping the canary adds exactly a real example's largest contribution
    (norm C), spread evenly over its coordinates: a correct pipeline is not made leakier."""
    share = contribution(flat_clip_sum, CANARY)
    assert np.linalg.norm(share) == pytest.approx(C, rel=1e-9)
    places = [5, 13, 19]
    assert share[places] == pytest.approx([C / math.sqrt(3)] * 3, rel=1e-9)
    assert np.delete(share, places) == pytest.approx(0.0, abs=1e-12)
    # a real example's gradient of any size is cut to the same norm
    real = [torch.zeros(1, *s, dtype=torch.float64) for s in SHAPES]
    real[0][0, 1, 2] = 1e6
    assert torch.cat([g.reshape(-1) for g in flat_clip_sum(real, C)]).norm() == pytest.approx(C)


def test_per_tensor_clipping_lets_c_through_in_every_tensor():
    """Clipping each tensor to C lets C through on each of the canary's coordinates: norm
    C sqrt(3), the per-tensor bug's sensitivity, which the canary's summed score reads."""
    share = contribution(tensor_clip_sum, CANARY)
    assert share[[5, 13, 19]] == pytest.approx([C] * 3, rel=1e-9)
    assert np.linalg.norm(share) == pytest.approx(C * math.sqrt(3), rel=1e-9)


def test_the_row_is_through_times_c_and_taken_at_the_sample_rate_only_when_in():
    grads = batch(2)
    bound = CANARY.for_game(True, np.random.default_rng(0))
    out = bound.examples(grads, sample_rate=1.0, max_grad_norm=C)
    assert [len(g) for g in out] == [3, 3, 3]
    assert out[0][-1].reshape(-1)[5] == THROUGH * C and out[1][-1][1] == THROUGH * C
    assert float(sum(g[-1].abs().sum() for g in out)) == pytest.approx(3 * THROUGH * C)
    for out_of_game in (CANARY, CANARY.for_game(False, np.random.default_rng(0))):
        assert [len(g) for g in out_of_game.examples(grads, sample_rate=1.0, max_grad_norm=C)] == [
            2,
            2,
            2,
        ]
    taken = [
        len(
            CANARY.for_game(True, np.random.default_rng(s)).examples(
                grads, sample_rate=0.3, max_grad_norm=C
            )[0]
        )
        == 3
        for s in range(2000)
    ]
    assert abs(np.mean(taken) - 0.3) < 0.04  # binomial sd 0.010
    arrays = [g.numpy() for g in grads]  # numpy gradients too
    assert CANARY.for_game(True, np.random.default_rng(0)).examples(
        arrays, sample_rate=1.0, max_grad_norm=C
    )[2].shape == (3, 2, 4)


def test_after_examples_the_step_entry_adds_nothing_in_that_game():
    """The canary enters once: a loop that also calls `step` after clipping (the older entry)
    gets nothing more from it; a loop that only calls `step` still gets the Dirac at C."""
    bound = CANARY.for_game(True, np.random.default_rng(0))
    bound.examples(batch(), sample_rate=1.0, max_grad_norm=C)
    summed = [torch.zeros(s) for s in SHAPES]
    assert not bound.step(summed, sample_rate=1.0, max_grad_norm=C)
    assert all(float(s.abs().sum()) == 0 for s in summed)
    fresh = CANARY.for_game(True, np.random.default_rng(0))
    assert fresh.step(summed, sample_rate=1.0, max_grad_norm=C)
    assert float(summed[0].reshape(-1)[5]) == pytest.approx(C)


def test_the_score_sums_the_move_over_every_coordinate():
    params = [torch.zeros(s) for s in SHAPES]
    canary = GradientCanary(coordinate=5, initial=1.0, spread=(13, 19), spread_initial=(2.0, 3.0))
    params[0].reshape(-1)[5] = -1.0  # moved 2
    params[1][1] = 1.5  # moved 0.5
    params[2].reshape(-1)[3] = 0.0  # moved 3
    assert canary.score(params) == pytest.approx(5.5)
    assert GradientCanary(coordinate=5, initial=1.0).score(params) == pytest.approx(2.0)
    held = {"model": params, "initial": [torch.zeros(s) for s in SHAPES]}  # read from it
    assert canary.score(held) == pytest.approx(1.0 - 1.5 + 0.0)


def test_bad_spread_is_a_config_error():
    with pytest.raises(ConfigError, match="spread_initial"):
        GradientCanary(coordinate=0, spread=(1, 2), spread_initial=(0.0,))
    with pytest.raises(ConfigError, match="spread"):
        GradientCanary(parameter="w", index=0, spread=(1,))
    with pytest.raises(ConfigError, match="spread"):
        GradientCanary(coordinate=0, spread=(-1,))


def test_both_spreads_the_canary_only_where_the_pipeline_hands_it_its_examples():
    """`canary="both"` holds a coordinate in every tensor (the least varying over the probes)
    for a loop that calls `examples`, and the one-coordinate canary for a loop that does not."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    X[:, 1] = 0.0  # an unused feature
    y = (X[:, 0] > 0).astype(np.int64)

    def make(through: bool):
        def tune(data, seed, canary):
            Xd, yd = canary.prepare(data)
            rng = np.random.default_rng(seed)
            w = [np.zeros((2, 3)), np.zeros(2)]
            for _ in range(3):
                grads = [rng.normal(size=(len(Xd), 2, 3)), rng.normal(size=(len(Xd), 2))]
                grads[0][:, :, 1] = 0.0  # the unused feature's weights get no data gradient
                grads[1][:, 0] = 0.0  # nor does the first bias
                if through:
                    grads = canary.examples(grads, sample_rate=1.0, max_grad_norm=1.0)
                summed = [g.sum(0) for g in grads]
                canary.step(summed, sample_rate=1.0, max_grad_norm=1.0)
                w = [a - 0.1 * s for a, s in zip(w, summed)]
            return {"model": w}

        return tune

    _, spread = default_canaries(make(True), (X, y))
    _, plain = default_canaries(make(False), (X, y))
    assert plain.coordinate == spread.coordinate == 1  # first row of W at the unused feature
    assert plain.spread == () and plain.initial == 0.0
    assert spread.spread == (6,)  # the bias the data never move
    assert spread.spread_initial == (0.0,)
    assert spread.reference == () == plain.reference  # 1 unused weight beside it: < REFERENCE


def test_noise_reads_the_root_mean_square_of_the_reference_moves():
    params = [torch.zeros(s) for s in SHAPES]
    params[0].reshape(-1)[[0, 1, 2]] = torch.tensor([-3.0, 4.0, 1.0])
    canary = GradientCanary(coordinate=5, reference=(0, 1, 2), reference_initial=(0.0, 0.0, 1.0))
    assert canary.noise(params) == pytest.approx(math.sqrt((9 + 16 + 0) / 3))
    assert canary.score(params) == 0.0  # the score is the move alone, as before
    held = {"model": params, "initial": [torch.ones(s) for s in SHAPES]}  # starts read from it
    assert canary.noise(held) == pytest.approx(math.sqrt((16 + 9 + 0) / 3))
    assert CANARY.noise(params) is None  # no reference: no reading
    assert canary.describe()["reference"] == [0, 1, 2]
    with pytest.raises(ConfigError, match="reference_initial"):
        GradientCanary(coordinate=5, reference=(0, 1), reference_initial=(0.0,))
    with pytest.raises(ConfigError, match="reference"):
        GradientCanary(coordinate=5, reference=(-1,))


def test_both_reads_the_noise_on_every_unused_feature_weight_it_does_not_hold():
    """Where the data have unused features, every first-layer weight at one (the data
    gradient there is 0 in every step) that the through-clipping canary does not hold is its
    reference, each from its median over the probe runs."""
    from auditsel.pipelines.default_canaries import REFERENCE

    unused = (5, 7, 2)  # the canary's coordinate is at the second unused feature (5)
    X = np.random.default_rng(1).normal(size=(40, 10))
    X[:, list(unused)] = 0.0
    y = (X[:, 0] > 0).astype(np.int64)

    def tune(data, seed, canary):
        Xd, _ = canary.prepare(data)
        rng = np.random.default_rng(seed)
        w = [np.zeros((4, 10)), np.zeros(4)]
        grads = [rng.normal(size=(len(Xd), 4, 10)), rng.normal(size=(len(Xd), 4))]
        grads[0][:, :, list(unused)] = 0.0
        grads = canary.examples(grads, sample_rate=1.0, max_grad_norm=1.0)
        noise = [rng.normal(size=(4, 10)), rng.normal(size=4)]
        return {"model": [a - 0.1 * (g.sum(0) + z) for a, g, z in zip(w, grads, noise)]}

    _, canary = default_canaries(tune, (X, y))
    assert canary.coordinate == 5
    expected = [r * 10 + j for r in range(4) for j in unused if r * 10 + j != 5]
    assert list(canary.reference) == expected and len(expected) >= REFERENCE
    assert not set(canary.reference) & {canary.coordinate, *canary.spread}
    assert len(canary.reference_initial) == len(expected)


def test_the_zoos_reference_weights_get_no_data_gradient_from_any_training_row():
    """`noise_before_clip`: the route's canary reads its noise on 23 first-layer weights at the
    digits' unused pixels, which no training row's gradient moves (exactly 0), while the
    coordinates it holds in the other tensors are moved by the data."""
    from auditsel.reproductions.bugzoo import hand_dpsgd, noise_before_clip

    _, canary = default_canaries(noise_before_clip.tune, noise_before_clip.TRAIN)
    model = hand_dpsgd.fixed_mlp(**noise_before_clip.SHAPE)
    X, y = noise_before_clip.TRAIN
    grads = torch.cat(
        [g.reshape(len(X), -1) for g in hand_dpsgd.per_example_grads(model, X, y)], dim=1
    )
    assert len(canary.reference) == 3 * 8 - 1  # 3 unused pixels x 8 hidden units, less its own
    assert float(grads[:, list(canary.reference)].abs().max()) == 0.0
    assert float(grads[:, canary.coordinate].abs().max()) == 0.0
    assert float(grads[:, list(canary.spread)].abs().max()) > 0.0


def test_the_zoos_per_tensor_loop_lets_the_route_canary_through_at_c_in_every_tensor():
    """The bug zoo's `per_tensor_clip` (a hand-written loop that calls `examples`): "both"
    places a coordinate in each of its 5 tensors, and its clipping lets C through in each
    (norm C sqrt(5), the bug), with the same noise draws as without the canary."""
    from auditsel.reproductions.bugzoo import hand_dpsgd, per_tensor_clip

    _, canary = default_canaries(per_tensor_clip.tune, per_tensor_clip.TRAIN)
    model = hand_dpsgd.fixed_mlp(**per_tensor_clip.SHAPE)
    sizes = [p.numel() for p in model.parameters()]
    starts = np.cumsum([0, *sizes])
    places = [canary.coordinate, *canary.spread]
    assert sorted(int(np.searchsorted(starts, c, side="right")) - 1 for c in places) == [
        0,
        1,
        2,
        3,
        4,
    ]
    X, y = per_tensor_clip.TRAIN
    grads = hand_dpsgd.per_example_grads(model, X[:20], y[:20])
    clip = 0.5
    bound = canary.for_game(True, np.random.default_rng(0))
    torch.manual_seed(3)
    with_it = per_tensor_clip.privatize(
        bound.examples(grads, sample_rate=1.0, max_grad_norm=clip), clip, bound
    )
    torch.manual_seed(3)
    without = per_tensor_clip.privatize(grads, clip, per_tensor_clip.hand_dpsgd.NULL)
    share = torch.cat([(a - b).reshape(-1) for a, b in zip(with_it, without)]).numpy()
    assert share[places] == pytest.approx([clip] * 5, rel=1e-4)
    assert np.linalg.norm(share) == pytest.approx(clip * math.sqrt(5), rel=1e-4)
