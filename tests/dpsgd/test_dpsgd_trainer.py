"""DP-SGD of [XWW24] eq. 1: clipping, noise, Poisson subsampling, batching and seeding."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy import stats

from auditsel.dpsgd.datasets import Dataset, load_dataset
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.trainer import (
    DiracCanary,
    ExampleCanary,
    Execution,
    TrainSettings,
    calibrate_noise_multiplier,
    clip_factors,
    dpsgd_epsilon,
    train_runs,
)

F64_RUN = Execution(dtype=torch.float64, device="cpu")
F64 = dict(execution=F64_RUN)


def tiny(n=3, features=2, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32) * 2
    y = rng.integers(0, classes, size=n)
    return Dataset("tiny", x, y, classes)


def hand_logreg_step(w, x, y, classes, clip, sample=None):
    """Sum of clipped per-example gradients of softmax regression, in numpy by hand."""
    W = w[: classes * x.shape[1]].reshape(classes, x.shape[1])
    b = w[classes * x.shape[1] :]
    total = np.zeros_like(w)
    for j in range(len(x)):
        if sample is not None and not sample[j]:
            continue
        z = W @ x[j] + b
        p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        e = p - np.eye(classes)[y[j]]
        g = np.concatenate([np.outer(e, x[j]).ravel(), e])
        total += g * min(1.0, clip / np.linalg.norm(g))
    return total


def test_clip_factors_match_min_formula():
    norms = torch.tensor([0.0, 0.5, 1.0, 2.0, 8.0])
    got = clip_factors(norms, torch.tensor(1.0))
    want = [1.0, 1.0, 1.0, 0.5, 0.125]
    assert torch.allclose(got, torch.tensor(want))


@pytest.mark.parametrize("clip", [0.05, 0.7, 100.0])
def test_one_noiseless_step_is_minus_lr_times_sum_of_clipped_gradients(clip):
    data = tiny(n=4, features=3, classes=3)
    model = ModelSpec("logreg", data.shape, 3)
    res = train_runs(
        model,
        data,
        seeds=[7],
        **F64,
        settings=TrainSettings(steps=1, lr=0.3, clip=clip, noise_multiplier=0.0, sample_rate=1.0),
    )
    w0 = res.w0[0].numpy()
    want = w0 - 0.3 * hand_logreg_step(w0, data.x.astype(float), data.y, 3, clip)
    np.testing.assert_allclose(res.wN[0].numpy(), want, rtol=1e-10, atol=1e-12)


def test_several_noiseless_steps_follow_the_recursion():
    data = tiny(n=5, features=2, classes=2, seed=3)
    model = ModelSpec("logreg", data.shape, 2)
    res = train_runs(
        model,
        data,
        seeds=[1],
        **F64,
        settings=TrainSettings(steps=4, lr=0.5, clip=0.4, noise_multiplier=0.0, sample_rate=1.0),
    )
    w = res.w0[0].numpy()
    for _ in range(4):
        w = w - 0.5 * hand_logreg_step(w, data.x.astype(float), data.y, 2, 0.4)
    np.testing.assert_allclose(res.wN[0].numpy(), w, rtol=1e-10, atol=1e-12)


def test_noise_is_gaussian_with_std_clip_times_sigma():
    """Empty X, one step, lr 1: w_1 - w_0 = -R_1 with R_1 ~ N(0, C^2 sigma^2 I)."""
    data = tiny(n=0, features=4, classes=3)
    model = ModelSpec("logreg", (4,), 3)
    res = train_runs(
        model,
        data,
        seeds=np.arange(400),
        **F64,
        settings=TrainSettings(steps=1, lr=1.0, clip=3.0, noise_multiplier=2.0, sample_rate=1.0),
    )
    r = (res.w0 - res.wN).numpy().ravel() / 6.0
    assert stats.kstest(r, "norm").pvalue > 1e-3
    assert abs(r.std() - 1) < 0.05


def test_dirac_canary_clipped_gradient_is_c_e0_and_counts_sampled_steps():
    """Empty X, sigma = 0: p_i = [C, 0, ...] when the canary is sampled, so
    sum_i <p_i^z, p_i> / C^2 = number of sampled steps ~ Binomial(N, tau)."""
    model = ModelSpec("logreg", (3,), 2)
    data = Dataset("none", np.zeros((0, 3), np.float32), np.zeros(0, np.int64), 2)
    N, tau, C = 24, 0.3, 2.5
    res = train_runs(
        model,
        data,
        seeds=np.arange(600),
        canary=DiracCanary(),
        include_canary=np.ones(600, bool),
        **F64,
        settings=TrainSettings(steps=N, lr=1.0, clip=C, noise_multiplier=0.0, sample_rate=tau),
    )
    counts = res.canary_dot.numpy() / C**2
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    delta = (res.w0 - res.wN).numpy()
    np.testing.assert_allclose(delta[:, 0], C * counts, rtol=1e-12)
    np.testing.assert_allclose(delta[:, 1:], 0.0, atol=1e-12)
    # the counts follow Binomial(N, tau): chi-square of mean and variance
    assert abs(counts.mean() - N * tau) < 4 * np.sqrt(N * tau * (1 - tau) / 600)
    assert 0.8 < counts.var() / (N * tau * (1 - tau)) < 1.25


def test_poisson_subsampling_keeps_each_example_with_prob_tau():
    """One example, sigma = 0, one step: w_1 = w_0 - lr g with prob. tau, else w_0."""
    data = tiny(n=1, features=2, classes=2)
    model = ModelSpec("logreg", data.shape, 2)
    tau = 0.25
    res = train_runs(
        model,
        data,
        seeds=np.arange(2000),
        **F64,
        settings=TrainSettings(steps=1, lr=1.0, clip=1.0, noise_multiplier=0.0, sample_rate=tau),
    )
    moved = (res.w0 - res.wN).abs().sum(1).numpy() > 0
    assert stats.binomtest(int(moved.sum()), 2000, tau).pvalue > 1e-3
    for r in np.flatnonzero(moved)[:5]:
        w0 = res.w0[r].numpy()
        want = w0 - hand_logreg_step(w0, data.x.astype(float), data.y, 2, 1.0)
        np.testing.assert_allclose(res.wN[r].numpy(), want, rtol=1e-10)


def test_input_canary_joins_the_batch_only_on_x_prime():
    data = tiny(n=3, features=2, classes=2, seed=5)
    z = ExampleCanary(np.array([3.0, -1.0], np.float32), 1)
    model = ModelSpec("logreg", data.shape, 2)
    res = train_runs(
        model,
        data,
        seeds=[4, 4],
        canary=z,
        include_canary=[False, True],
        **F64,
        settings=TrainSettings(steps=1, lr=1.0, clip=0.8, noise_multiplier=0.0, sample_rate=1.0),
    )
    w0 = res.w0[0].numpy()
    x_prime = np.vstack([data.x, z.x[None]]).astype(float)
    y_prime = np.append(data.y, z.y)
    np.testing.assert_allclose(
        res.wN[0].numpy(), w0 - hand_logreg_step(w0, data.x.astype(float), data.y, 2, 0.8)
    )
    np.testing.assert_allclose(
        res.wN[1].numpy(), w0 - hand_logreg_step(w0, x_prime, y_prime, 2, 0.8)
    )
    # canary statistic: <p^z, p_1> with p^z the canary's clipped gradient at w_0
    pz = hand_logreg_step(w0, z.x[None].astype(float), [z.y], 2, 0.8)
    np.testing.assert_allclose(res.canary_dot[1].item(), pz @ (w0 - res.wN[1].numpy()))


@pytest.mark.parametrize("kind", ["logreg", "mlp"])
def test_sparse_poisson_batches_gathered_or_not_give_the_same_runs(kind):
    """tau = 0.2 gathers each run's kept examples; a tau = 1 run in the same batch (so that
    nothing is gathered) must not change the tau = 0.2 runs."""
    data = load_dataset("digits", n=50)
    model = ModelSpec(kind, data.shape, 10, hidden=(6,))
    kw = dict(canary=DiracCanary(), **F64)
    at = dict(steps=4, lr=0.05, clip=0.5, noise_multiplier=0.5)
    sparse = train_runs(
        model,
        data,
        seeds=[1, 2, 3],
        include_canary=[1, 0, 1],
        **kw,
        settings=TrainSettings(**at, sample_rate=0.2),
    )
    mixed = train_runs(
        model,
        data,
        seeds=[1, 2, 3, 4],
        include_canary=[1, 0, 1, 0],
        **kw,
        settings=TrainSettings(**at, sample_rate=[0.2, 0.2, 0.2, 1.0]),
    )
    torch.testing.assert_close(sparse.wN, mixed.wN[:3], rtol=1e-9, atol=1e-11)
    via_vmap = train_runs(
        model,
        data,
        seeds=[1, 2, 3],
        include_canary=[1, 0, 1],
        **{**kw, "execution": replace(F64_RUN, method="vmap")},
        settings=TrainSettings(**at, sample_rate=0.2),
    )
    torch.testing.assert_close(sparse.wN, via_vmap.wN, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("kind", ["logreg", "mlp"])
def test_ghost_norm_path_equals_torch_func_per_example_gradients(kind):
    data = load_dataset("digits", n=40)
    model = ModelSpec(kind, data.shape, 10, hidden=(6,))
    z = ExampleCanary(1 - data.x[0], 3)
    kw = dict(
        settings=TrainSettings(steps=3, lr=0.05, clip=0.5, noise_multiplier=0.7, sample_rate=0.6),
        seeds=np.arange(5),
        canary=z,
        include_canary=[0, 1, 0, 1, 1],
        **F64,
    )
    a = train_runs(model, data, **{**kw, "execution": replace(F64_RUN, method="ghost")})
    b = train_runs(model, data, **{**kw, "execution": replace(F64_RUN, method="vmap")})
    torch.testing.assert_close(a.wN, b.wN, rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(a.canary_dot, b.canary_dot, rtol=1e-9, atol=1e-9)


# reason: the CNN's runs (7 CPU s) in the slow tier; the logistic regression and the MLP by default
@pytest.mark.parametrize("kind", ["logreg", "mlp", pytest.param("cnn", marks=pytest.mark.slow)])
def test_batched_runs_equal_runs_one_at_a_time(kind):
    data = load_dataset("digits", n=30)
    model = ModelSpec(kind, data.shape, 10, hidden=(8,), channels=2)
    seeds = np.array([11, 12, 13, 14])
    lrs, clips, taus = [0.1, 0.02, 0.05, 0.1], [1.0, 0.5, 2.0, 1.0], [1.0, 0.5, 0.3, 1.0]
    inc = [True, False, True, True]
    kw = dict(canary=DiracCanary(), **F64)
    at = dict(steps=MANY_STEPS, noise_multiplier=1.1)
    batch = train_runs(
        model,
        data,
        seeds=seeds,
        include_canary=inc,
        **kw,
        settings=TrainSettings(**at, lr=lrs, clip=clips, sample_rate=taus),
    )
    for r in range(4):
        one = train_runs(
            model,
            data,
            seeds=seeds[r : r + 1],
            include_canary=inc[r : r + 1],
            **kw,
            settings=TrainSettings(**at, lr=lrs[r], clip=clips[r], sample_rate=taus[r]),
        )
        torch.testing.assert_close(batch.wN[r : r + 1], one.wN, rtol=1e-9, atol=1e-10)
        torch.testing.assert_close(batch.canary_dot[r : r + 1], one.canary_dot)


MANY_STEPS = 18


def test_same_seed_same_run_and_different_seeds_differ():
    data = load_dataset("digits", n=20)
    model = ModelSpec("mlp", data.shape, 10)
    kw = dict(
        settings=TrainSettings(steps=5, lr=0.1, clip=1.0, noise_multiplier=1.0, sample_rate=0.5),
        canary=DiracCanary(),
        include_canary=[1, 1, 0],
    )
    a = train_runs(model, data, seeds=[1, 2, 3], **kw)
    b = train_runs(model, data, seeds=[1, 2, 3], **kw)
    assert torch.equal(a.wN, b.wN) and torch.equal(a.canary_dot, b.canary_dot)
    assert not torch.equal(a.wN[0], a.wN[1])


def test_per_run_streams_are_philox_keyed_by_seed_sequence():
    from auditsel.dpsgd import kernels
    from auditsel.dpsgd.trainer import INIT, NOISE

    seeds = np.concatenate(
        [np.random.default_rng(0).integers(0, 2**63 - 1, 2000), [0, 1, 2**32 - 1, 2**32, 2**63 - 1]]
    ).astype(np.uint64)
    want = [np.random.SeedSequence(int(s)).generate_state(3, dtype=np.uint64) for s in seeds]
    np.testing.assert_array_equal(kernels.seed_states(seeds, 3), np.array(want))
    # w_0 of run r is init_from_uniform of stream 0 under the key of SeedSequence(s_r); with
    # lr = 0 and no data, w_N = w_0 and with lr = 1, w_0 - w_N is the summed stream-2 noise
    data = load_dataset("digits", n=10)
    model = ModelSpec("logreg", data.shape, 10)
    key = kernels.keys_of(np.array(want)[:3, 0])
    res = train_runs(
        model,
        data,
        seeds=seeds[:3],
        execution=Execution(device="cpu"),
        settings=TrainSettings(steps=1, lr=0.1, clip=1.0, noise_multiplier=1.0, sample_rate=1.0),
    )
    u = kernels.draw(key, INIT, 0, 1, model.num_params, False)[:, 0]
    assert torch.equal(res.w0, model.init_from_uniform(u))
    empty = data.take(0)
    noisy = train_runs(
        model,
        empty,
        seeds=seeds[:3],
        execution=F64_RUN,
        settings=TrainSettings(steps=3, lr=1.0, clip=1.0, noise_multiplier=2.0, sample_rate=1.0),
    )
    noise = kernels.draw(key, NOISE, 0, 3, model.num_params, True).double() * 2.0
    torch.testing.assert_close(noisy.w0 - noisy.wN, noise.sum(1), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "field,kwargs",
    [
        ("game.clip", dict(clip=0.0)),
        ("game.clip", dict(clip=-1.0)),
        ("base.noise_multiplier", dict(noise_multiplier=-0.1)),
        ("base.sample_rate", dict(sample_rate=0.0)),
        ("base.sample_rate", dict(sample_rate=1.5)),
        ("base.steps", dict(steps=0)),
        ("game.learning_rates", dict(lr=float("nan"))),
    ],
)
def test_bad_settings_raise_one_line_value_error(field, kwargs):
    data = tiny()
    model = ModelSpec("logreg", data.shape, 2)
    settings = dict(steps=1, lr=0.1, clip=1.0, noise_multiplier=1.0, sample_rate=1.0)
    settings.update(kwargs)
    with pytest.raises(ValueError, match=rf"^{field}: must be .*, got ") as info:
        train_runs(model, data, seeds=[0], settings=TrainSettings(**settings))
    assert "\n" not in str(info.value)


def test_calibrated_sigma_gives_the_target_epsilon():
    sigma = calibrate_noise_multiplier(2.0, 1e-5, steps=50, sample_rate=1.0)
    assert dpsgd_epsilon(sigma, 50, 1.0, 1e-5) == pytest.approx(2.0, rel=1e-3)
    assert dpsgd_epsilon(sigma * 1.1, 50, 1.0, 1e-5) < 2.0


@pytest.mark.parametrize("steps", [1, 5, 20])
def test_memory_budget_groups_steps_without_changing_a_run(monkeypatch, steps):
    """The draws of as many steps as fit the budget are made at once; a budget of one step at a
    time gives the same runs bit for bit, subsampled or not (the gradient sums keep their
    chunking, which the budget also sets)."""
    import auditsel.dpsgd.trainer as trainer

    clipped_sum = trainer._clipped_sum
    monkeypatch.setattr(
        trainer, "_clipped_sum", lambda *a, **k: clipped_sum(*a[:7], 1 << 24, *a[8:], **k)
    )
    data = load_dataset("digits", n=40)
    model = ModelSpec("logreg", data.shape, 10)
    kw = dict(
        settings=TrainSettings(
            steps=steps, lr=0.05, clip=1.0, noise_multiplier=1.0, sample_rate=[1.0, 0.3, 0.7]
        ),
        seeds=[5, 6, 7],
        canary=DiracCanary(),
        include_canary=[1, 0, 1],
    )
    whole = train_runs(model, data, execution=Execution(device="cpu"), **kw)
    small = train_runs(model, data, execution=Execution(device="cpu", memory_budget=1), **kw)
    assert torch.equal(whole.wN, small.wN) and torch.equal(whole.canary_dots, small.canary_dots)


def test_no_runs_give_empty_results():
    data = load_dataset("digits", n=5)
    model = ModelSpec("logreg", data.shape, 10)
    res = train_runs(
        model,
        data,
        seeds=np.zeros(0, np.int64),
        canary=DiracCanary(),
        settings=TrainSettings(steps=3, lr=0.1, clip=1.0, noise_multiplier=1.0, sample_rate=1.0),
    )
    assert res.w0.shape == res.wN.shape == (0, model.num_params)
    assert res.canary_dots.shape == (0, 3)
