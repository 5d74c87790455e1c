"""The trainer's kernels: Philox4x32-10 against the Random123 known answers, the compiled C and
the torch implementation bit for bit, the draws' laws, and the softmax pass against float64."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from auditsel.dpsgd import kernels
from auditsel.dpsgd.data import load_dataset
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.trainer import ExampleCanary, GradientCanary, train_runs

HAVE_C = kernels.backend("cpu") == "c"
needs_c = pytest.mark.skipif(not HAVE_C, reason="no C compiler here: the torch kernels only")

# Random123 tests/kat_vectors, "philox4x32 10" lines: counter, key, expected output words
KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    (
        [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
        [0xA4093822, 0x299F31D0],
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1],
    ),
]


def keys(R, seed=0):
    return kernels.keys_of(np.random.default_rng(seed).integers(0, 2**63, R, dtype=np.int64))


def torch_draw(k, *args):
    return kernels._draw_torch(torch.as_tensor(k.astype(np.int64)), *args)


@pytest.mark.parametrize("implementation", ["torch", "c", "c-scalar"])
@pytest.mark.parametrize("counter,key,want", KAT)
def test_philox_matches_the_random123_known_answers(implementation, counter, key, want):
    if implementation != "torch" and not HAVE_C:
        pytest.skip("no C compiler here")
    assert kernels.philox_block(counter, key, implementation) == want


@needs_c
@pytest.mark.parametrize("normal", [True, False])
@pytest.mark.parametrize(
    "width,steps,step0,stream",
    [(650, 7, 3, 2), (1, 5, 0, 0), (64, 2, 9, 1), (65, 3, 1, 2), (501, 4, 19, 1)],
)
def test_compiled_draws_equal_the_torch_draws_bit_for_bit(normal, width, steps, step0, stream):
    k = keys(37, width)
    a = kernels.draw(k, stream, step0, steps, width, normal)
    assert torch.equal(a, torch_draw(k, stream, step0, steps, width, normal))
    kernels._library().kernels_scalar_only(1)  # the portable rounds give the same words
    try:
        assert torch.equal(a, kernels.draw(k, stream, step0, steps, width, normal))
    finally:
        kernels._library().kernels_scalar_only(0)


def test_draws_are_counter_based():
    """A number depends on (key, stream, step, index) only: steps drawn in two groups, runs
    drawn alone and a narrower width give the same numbers."""
    k = keys(9, 1)
    whole = kernels.draw(k, 2, 0, 10, 300, True)
    parts = torch.cat([kernels.draw(k, 2, 0, 4, 300, True), kernels.draw(k, 2, 4, 6, 300, True)], 1)
    assert torch.equal(whole, parts)
    assert torch.equal(whole[3:4], kernels.draw(k[3:4], 2, 0, 10, 300, True))
    assert torch.equal(whole[:, :, :77], kernels.draw(k, 2, 0, 10, 77, True))
    assert not torch.equal(whole, kernels.draw(k, 1, 0, 10, 300, True))  # streams differ


def test_normals_and_uniforms_have_their_laws():
    k = keys(64, 2)
    z = kernels.draw(k, 2, 0, 50, 400, True).double().flatten().numpy()  # 1.28e6 normals
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / math.sqrt(z.size) and abs(z.var() - 1) < 5 * math.sqrt(2 / z.size)
    # pairs (cos, sin) of one block are independent: their correlation is ~ 0
    pairs = kernels.draw(k, 2, 0, 50, 64, True).reshape(-1, 4, 16).double().numpy()
    assert abs(np.corrcoef(pairs[:, 0].ravel(), pairs[:, 1].ravel())[0, 1]) < 5 / math.sqrt(
        pairs[:, 0].size
    )
    u = kernels.draw(k, 1, 0, 50, 400, False).double().flatten().numpy()
    assert u.min() >= 0 and u.max() < 1 and np.all(u * 2**24 == np.floor(u * 2**24))
    assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_single_precision_polynomials_are_accurate():
    x = torch.linspace(-87.3, 0, 200001)
    rel = (kernels._exp_torch(x).double() - torch.exp(x.double())) / torch.exp(x.double())
    assert rel.abs().max() < 3e-7
    assert kernels._exp_torch(torch.tensor([-100.0, float("-inf")])).tolist() == [0.0, 0.0]
    assert math.isnan(kernels._exp_torch(torch.tensor([float("nan")])).item())
    u = torch.arange(1, 2**24 + 1, 97, dtype=torch.float64) / 2**24
    assert (kernels._log_torch(u.float()).double() - torch.log(u)).abs().max() < 1e-6
    t = torch.arange(0, 2**24, 89, dtype=torch.float64) / 2**24
    s, c = kernels._sincos_2pi_torch(t.float())
    assert (s.double() - torch.sin(2 * math.pi * t)).abs().max() < 2e-7
    assert (c.double() - torch.cos(2 * math.pi * t)).abs().max() < 2e-7


def softmax_cases():
    g = torch.Generator().manual_seed(0)
    for R, K, n in [(37, 10, 500), (5, 3, 13), (8, 10, 1), (3, 10, 300)]:
        z = torch.randn(R, K, n, generator=g) * 5
        for per_run in (False, True):
            label = torch.randint(0, K, (R, n) if per_run else (n,), generator=g)
            clip = torch.rand(R, generator=g) + 0.5
            a_sq = torch.rand(R, n, generator=g) * 60 + 1
            weight = (torch.rand(R, n, generator=g) < 0.5).float()
            yield z, label, {}
            yield z, label, dict(clip=clip, a_sq=a_sq if per_run else a_sq[0])
            yield z, label, dict(clip=clip, a_sq=a_sq[0], weight=weight)


def test_softmax_pass_is_the_clipped_output_gradient():
    for z, label, kw in softmax_cases():
        got = z.clone()
        sq = kernels.softmax_grad_(got, label, **kw)
        # float64, written out: softmax - onehot, its squared norm, the clip factor
        p = (
            torch.softmax(z.double(), 1)
            - torch.nn.functional.one_hot(label.expand(z.shape[0], -1), z.shape[1])
            .permute(0, 2, 1)
            .double()
        )
        want_sq = (p * p).sum(1)
        if "clip" in kw:
            c = kw["clip"].double()[:, None]
            p = p * (c / torch.maximum(torch.sqrt(want_sq * kw["a_sq"].double()), c))[:, None]
            if "weight" in kw:
                p = p * kw["weight"].double()[:, None]
        assert (got.double() - p).abs().max() < 1e-6
        assert (sq.double() - want_sq).abs().max() < 1e-6 * want_sq.abs().max()


@needs_c
def test_compiled_softmax_pass_equals_the_torch_one_bit_for_bit():
    for z, label, kw in softmax_cases():
        a, b = z.clone(), z.clone()
        sq_a = kernels.softmax_grad_(a, label, **kw)
        sq_b = torch.empty_like(sq_a)
        kernels._softmax_grad_torch(
            b, label, sq_b, kw.get("clip"), kw.get("a_sq"), kw.get("weight")
        )
        assert torch.equal(a, b) and torch.equal(sq_a, sq_b)


@needs_c
@pytest.mark.parametrize(
    "kind,canary", [("logreg", "dirac"), ("logreg", "input"), ("mlp", "input")]
)
def test_training_runs_are_the_same_with_either_implementation(monkeypatch, kind, canary):
    data = load_dataset("digits", n=60)
    model = ModelSpec(kind, data.shape, 10, hidden=(8,))
    z = GradientCanary() if canary == "dirac" else ExampleCanary(1 - data.x[0], 3)
    kw = dict(
        steps=6,
        lr=[0.05, 0.1, 0.02],
        clip=1.0,
        noise_multiplier=0.8,
        sample_rate=[1.0, 0.4, 1.0],
        seeds=[3, 4, 5],
        canary=z,
        include_canary=[1, 0, 1],
        device="cpu",
    )
    compiled = train_runs(model, data, **kw)
    monkeypatch.setattr(kernels, "_LIB", False)  # as on a machine without a compiler
    assert kernels.backend("cpu") == "torch"
    plain = train_runs(model, data, **kw)
    assert torch.equal(compiled.w0, plain.w0) and torch.equal(compiled.wN, plain.wN)
    assert torch.equal(compiled.canary_dots, plain.canary_dots)


def test_no_compiler_means_the_torch_kernels(monkeypatch, tmp_path):
    monkeypatch.setenv("AUDITSEL_KERNELS", "torch")
    assert kernels._compile() is None
    monkeypatch.delenv("AUDITSEL_KERNELS")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("AUDITSEL_CACHE", str(tmp_path / "cache"))
    with pytest.warns(RuntimeWarning, match="could not build kernels.c.*same numbers"):
        assert kernels._compile() is None


@pytest.mark.parametrize("wraps", [True, False])
def test_both_ways_of_the_torch_products_give_the_known_answers(monkeypatch, wraps):
    monkeypatch.setattr(kernels, "_WRAPS", {"cpu": wraps})
    for counter, key, want in KAT:
        assert kernels.philox_block(counter, key, "torch") == want
    k = keys(5, 3)
    a = torch_draw(k, 2, 0, 3, 100, True)
    monkeypatch.setattr(kernels, "_WRAPS", {"cpu": not wraps})
    assert torch.equal(a, torch_draw(k, 2, 0, 3, 100, True))
