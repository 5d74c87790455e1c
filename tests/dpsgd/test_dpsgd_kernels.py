"""The trainer's kernels: Philox4x32-10 against the Random123 known answers, today's streams
against digests taken from the C kernels of auditsel 0.1 (the streams every committed DP-SGD
result was made with), the numba and torch implementations bit for bit, the draws' laws, the
softmax pass against float64, and no fused multiply-add in the compiled code."""

import hashlib
import math
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest
import torch
from scipy import stats

from auditsel.dpsgd import RANDOM_STREAMS, kernels, kernels_cpu, kernels_torch
from auditsel.dpsgd.datasets import load_dataset
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.trainer import (
    NOISE,
    DiracCanary,
    ExampleCanary,
    Execution,
    TrainSettings,
    train_runs,
)

ROOT = Path(__file__).resolve().parents[2]

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

# sha256 (first 32 hex digits) of the arrays of `stream_digests`, computed with the C kernels
# and the trainer of auditsel 0.1 (commit c97d10a, kernels.c built with gcc 12): the numbers
# of every committed DP-SGD result: version 2 of the streams (auditsel.dpsgd.RANDOM_STREAMS).
# The "softmax-..." entries are the same C kernels' softmax passes (benchmarks/baselines/kernels_c,
# built with gcc 12.2) on the inputs of `softmax_inputs`, the same bits on every vector unit.
# A change here is a change of the streams: it needs a new version (checkpoint fingerprints).
STREAMS_0_1 = {
    "draw-0-1-5-0-0": "f31662efe99bb76c132583d89265c599",
    "draw-0-1000-40-123-1": "1b7e8962d065a6a325fc789dbc0035fd",
    "draw-0-65-3-1-2": "8685c1328af89c373c610acb589f9e82",
    "draw-0-650-7-3-2": "367e86db05adf9e0bf07e4d2f144410a",
    "draw-1-1-5-0-0": "57446eb0f719bbd2ac3499d6fed9dd10",
    "draw-1-1000-40-123-1": "290dd61a26e2322e3b692d95ec06e38e",
    "draw-1-65-3-1-2": "8181055f995506807a3ec81eada28ab3",
    "draw-1-650-7-3-2": "3b010e5b2c1302010b8e16990f5a814f",
    "softmax-300-10-300-clip": "07427e5eec29148f4772a608535e4db6",
    "softmax-300-10-300-plain": "e8755e6fbdcec2c6513f9615ec84e648",
    "softmax-300-10-300-weight": "d584bee8905544d429dc2721a5e0ffae",
    "softmax-37-10-500-clip": "0137bf319055acca6cb65904928a1fee",
    "softmax-37-10-500-plain": "713c5756e40e3224e6fa72b894c45488",
    "softmax-37-10-500-weight": "ba802657a63f163fbc5a4e396b6cc31e",
    "softmax-5-3-13-clip": "f493fd61d2446e7a33205113a16404dc",
    "softmax-5-3-13-plain": "95868825e18d75438621144c1448fc85",
    "softmax-5-3-13-weight": "988e57f16b4e56a36ddb9794d05efc3c",
    "train-logreg-dirac-1.0": "117ac73f1838b04da2a98d774f9cdf4b",
    "train-logreg-input-0.3": "4b5155a0ac5bac238c640f069aae04e8",
    "train-mlp-dirac-0.5": "6d033af4d5909d032675cb99950c8e46",
    "train-mlp-input-1.0": "be4894eee276b061572682bf067627cf",
}


def _h(*arrays) -> str:
    d = hashlib.sha256()
    for a in arrays:
        a = a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
        d.update(np.ascontiguousarray(a).tobytes())
    return d.hexdigest()[:32]


TRAINING_RUNS = [
    ("logreg", "dirac", 1.0),
    ("logreg", "input", 0.3),
    ("mlp", "input", 1.0),
    ("mlp", "dirac", 0.5),
]
# the arrays (w0, wN, canary_dots) of those four training runs as the 0.1 C kernels made them:
# their digests are the "train-..." entries of STREAMS_0_1 (checked below), so the file is 0.1's
TRAINING_0_1 = ROOT / "tests" / "data" / "training_runs_0_1.npz"
# the settings of those runs
TRAINING_STEPS, TRAINING_SIGMA, TRAINING_CLIP = 12, 0.8, 1.0
TRAINING_LR = [0.05, 0.1, 0.02, 0.2]
TRAINING_SEEDS = [3, 4, 5, 2**40 + 1]
# Trained weights and the canary's dot products are compared with a tolerance, per run and in
# units of the run's own size (the root mean square of 0.1's array): the products of a step are
# torch's MKL sgemm calls, whose summation order is MKL's choice for the machine (its AVX-512,
# AVX2 and SSE4.2 paths, MKL_CBWR's), so their last bits differ from machine to machine, and 12
# full-batch steps at learning rates up to 0.2 amplify them hundreds of times (run 3 of the
# Dirac logistic regression: one ulp more in each weight of w_1 moves w_12 by hundreds of
# ulps); the random streams and the softmax pass are ours and compared exactly. The tolerances
# are several times the largest deviation from 0.1's arrays measured under MKL's paths
# emulated on one machine (``test_the_tolerance_covers_the_blas_paths`` re-measures it wherever
# it runs), and one step's noise alone moves a run by far more (checked in the test).
TRAINING_TOL, DOTS_TOL = 5e-3, 1e-4


def softmax_inputs(R: int, K: int, n: int, seed: int = 0) -> tuple:
    """Logits uniform in [-15, 15), labels, clipping norms, squared input norms and weights of a
    softmax pass, the same bits on every machine: numpy's float32 uniforms and exactly rounded
    float32 products and sums (torch.randn is not: its Box-Muller runs vectorised on AVX2 and
    AVX-512 and scalar otherwise, and the last bits differ)."""
    rng = np.random.default_rng([seed, R, K, n])
    u = lambda *shape: rng.random(shape, dtype=np.float32)
    z = (u(R, K, n) * np.float32(2) - np.float32(1)) * np.float32(15)
    label = rng.integers(0, K, n)
    clip = u(R) + np.float32(0.5)
    a_sq = u(n) * np.float32(60) + np.float32(1)
    weight = (u(R, n) < 0.5).astype(np.float32)
    return tuple(torch.from_numpy(a) for a in (z, label, clip, a_sq, weight))


def stream_digests() -> dict:
    """Digests of draws and softmax passes (seeds past 2^32 included): the streams, bit for bit."""
    out = {}
    k = kernels.keys_of(np.random.default_rng(7).integers(0, 2**63, 300, dtype=np.int64))
    for normal in (True, False):
        for width, steps, step0, stream in [
            (650, 7, 3, 2),
            (1, 5, 0, 0),
            (65, 3, 1, 2),
            (1000, 40, 123, 1),
        ]:
            out[f"draw-{int(normal)}-{width}-{steps}-{step0}-{stream}"] = _h(
                kernels.draw(k, stream, step0, steps, width, normal)
            )
    for R, K, n in [(37, 10, 500), (5, 3, 13), (300, 10, 300)]:
        z, label, clip, a_sq, weight = softmax_inputs(R, K, n)
        for name, kw in (
            ("plain", {}),
            ("clip", dict(clip=clip, a_sq=a_sq)),
            ("weight", dict(clip=clip, a_sq=a_sq, weight=weight)),
        ):
            x = z.clone()
            sq = kernels.softmax_grad_(x, label, **kw)
            out[f"softmax-{R}-{K}-{n}-{name}"] = _h(x, sq)
    return out


def training_runs() -> dict:
    """(w0, wN, canary_dots) of four short training runs (seeds past 2^32 included)."""
    out = {}
    data = load_dataset("digits", n=200)
    for kind, canary, rate in TRAINING_RUNS:
        model = ModelSpec(kind, data.shape, 10, hidden=(16,))
        zc = DiracCanary() if canary == "dirac" else ExampleCanary(1 - data.x[0], 3)
        res = train_runs(
            model,
            data,
            seeds=TRAINING_SEEDS,
            canary=zc,
            include_canary=[1, 0, 1, 1],
            execution=Execution(device="cpu"),
            settings=TrainSettings(
                steps=TRAINING_STEPS,
                lr=TRAINING_LR,
                clip=TRAINING_CLIP,
                noise_multiplier=TRAINING_SIGMA,
                sample_rate=rate,
            ),
        )
        out[f"train-{kind}-{canary}-{rate}"] = tuple(
            np.asarray(a.numpy() if isinstance(a, torch.Tensor) else a)
            for a in (res.w0, res.wN, res.canary_dots)
        )
    return out


def keys(R, seed=0):
    return kernels.keys_of(np.random.default_rng(seed).integers(0, 2**63, R, dtype=np.int64))


def torch_draw(k, *args):
    return kernels_torch.draw(torch.as_tensor(k.astype(np.int64)), *args)


@pytest.mark.parametrize("implementation", ["cpu", "torch"])
@pytest.mark.parametrize("counter,key,want", KAT)
def test_philox_matches_the_random123_known_answers(implementation, counter, key, want):
    assert kernels.philox_block(counter, key, implementation) == want


def test_streams_are_those_of_the_c_kernels_of_auditsel_0_1():
    assert RANDOM_STREAMS == 2  # the version these digests belong to
    got = stream_digests()
    assert {k: v for k, v in got.items() if STREAMS_0_1[k] != v} == {}
    assert set(got) | {k for k in STREAMS_0_1 if k.startswith("train-")} == set(STREAMS_0_1)


@pytest.mark.parametrize("threads", [2, 1])
def test_the_streams_are_the_same_whichever_way_the_runs_are_split(monkeypatch, threads):
    """The digests above, with every call split over two threads (one piece per thread at
    least), or on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    monkeypatch.setattr(kernels, "PIECES_PER_THREAD", 1)
    try:
        got = stream_digests()
    finally:
        torch.set_num_threads(before)
    assert {k: v for k, v in got.items() if STREAMS_0_1[k] != v} == {}


def _reference_runs() -> dict:
    with np.load(TRAINING_0_1) as f:
        return {
            name: tuple(f[f"{name}/{part}"] for part in ("w0", "wN", "canary_dots"))
            for name in (f"train-{k}-{c}-{r}" for k, c, r in TRAINING_RUNS)
        }


def test_the_reference_training_runs_are_those_of_auditsel_0_1():
    """The stored arrays are the 0.1 C kernels' own: their digests are 0.1's, bit for bit."""
    ref = _reference_runs()
    assert {k: _h(*v) for k, v in ref.items()} == {
        k: v for k, v in STREAMS_0_1.items() if k.startswith("train-")
    }


def _rms(a: np.ndarray) -> np.ndarray:
    """Root mean square of each run's row (R, 1), in float64."""
    return np.sqrt(np.mean(np.square(a, dtype=np.float64), axis=1, keepdims=True))


def _deviations(got: dict, ref: dict) -> dict:
    """Per training, the largest |got - ref| of each run in units of the run's rms in ref:
    (weights (R,), canary dot products (R,))."""
    return {
        name: tuple(
            (np.abs(g.astype(np.float64) - r) / _rms(r)).max(1)
            for g, r in ((got[name][1], wn), (got[name][2], dots))
        )
        for name, (_, wn, dots) in ref.items()
    }


def test_training_runs_are_those_of_auditsel_0_1_to_rounding():
    """Same seeds, same draws, same steps: the initial weights equal 0.1's exactly (drawn, not
    computed), the trained weights and the canary's dot products up to the BLAS's summation
    order, amplified by training (``TRAINING_TOL``, ``DOTS_TOL``: per run, in units of the
    run's rms). The tolerance is tight: the last step's noise alone (lr sigma C z, drawn here)
    moves the median coordinate of every run by more than 10 times it, and the Dirac canary's
    step (C lr at its coordinate) moves that coordinate by more than 10 times it, so a changed
    stream, a step more or less or a changed canary (or, for an input canary, other dot
    products) fails."""
    ref = _reference_runs()
    got = training_runs()
    keys = kernels.seed_keys(np.asarray(TRAINING_SEEDS, dtype=np.uint64))
    lr = np.asarray(TRAINING_LR)[:, None]
    for name, (w0, wn, _) in ref.items():
        assert np.array_equal(got[name][0], w0), name
        z = kernels.draw(keys, NOISE, TRAINING_STEPS - 1, 1, wn.shape[1], True)[:, 0].numpy()
        one_step = np.median(lr * TRAINING_SIGMA * TRAINING_CLIP * np.abs(z), 1)
        assert np.all(one_step > 10 * TRAINING_TOL * _rms(wn)[:, 0]), name
        assert np.all(lr * TRAINING_CLIP > 10 * TRAINING_TOL * _rms(wn)), name
    for name, (dw, dd) in _deviations(got, ref).items():
        assert np.all(dw <= TRAINING_TOL) and np.all(dd <= DOTS_TOL), (name, dw, dd)


# MKL's other summation paths, chosen by environment variables read when MKL loads: the
# vector units below this machine's (a machine without AVX-512, or older still) and MKL's
# conditional-numerical-reproducibility modes
BLAS_PATHS = [
    {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    {"MKL_CBWR": "COMPATIBLE"},
    {"MKL_CBWR": "AVX2,STRICT"},
]


@pytest.mark.slow  # four fresh interpreters, each training the four runs
def test_the_tolerance_covers_the_blas_paths(tmp_path):
    """The runs trained in fresh processes on MKL's other paths (``BLAS_PATHS``) deviate from
    0.1's arrays by at most half of ``TRAINING_TOL`` and ``DOTS_TOL``: the tolerances keep a
    margin over the BLAS's own spread (the first two paths equal the default one on a machine
    whose vector unit they name or one below it)."""
    ref = _reference_runs()
    code = (
        "import sys, numpy as np; sys.path.insert(0, sys.argv[1]); import test_dpsgd_kernels as t;"
        "np.savez(sys.argv[2], **{f'{k}/{i}': a for k, v in t.training_runs().items()"
        " for i, a in enumerate(v)})"
    )
    for j, env in enumerate(BLAS_PATHS):
        out = tmp_path / f"runs{j}.npz"
        subprocess.run(
            [sys.executable, "-c", code, str(Path(__file__).parent), str(out)],
            env={**os.environ, **env},
            check=True,
        )
        with np.load(out) as f:
            got = {k: tuple(f[f"{k}/{i}"] for i in range(3)) for k in ref}
        for name, (dw, dd) in _deviations(got, ref).items():
            assert np.array_equal(got[name][0], ref[name][0]), (env, name)
            assert np.all(dw <= TRAINING_TOL / 2) and np.all(dd <= DOTS_TOL / 2), (
                env,
                name,
                dw,
                dd,
            )


@pytest.mark.parametrize("normal", [True, False])
@pytest.mark.parametrize(
    "width,steps,step0,stream",
    [(650, 7, 3, 2), (1, 5, 0, 0), (64, 2, 9, 1), (65, 3, 1, 2), (501, 4, 19, 1)],
)
def test_cpu_draws_equal_the_torch_draws_bit_for_bit(normal, width, steps, step0, stream):
    k = keys(37, width)
    a = kernels.draw(k, stream, step0, steps, width, normal)
    assert torch.equal(a, torch_draw(k, stream, step0, steps, width, normal))


def test_draws_are_counter_based_and_split_free(monkeypatch):
    """A number depends on (key, stream, step, index) only: steps drawn in two groups, runs
    drawn alone, a narrower width and another number of threads give the same numbers."""
    k = keys(9, 1)
    whole = kernels.draw(k, 2, 0, 10, 300, True)
    parts = torch.cat([kernels.draw(k, 2, 0, 4, 300, True), kernels.draw(k, 2, 4, 6, 300, True)], 1)
    assert torch.equal(whole, parts)
    assert torch.equal(whole[3:4], kernels.draw(k[3:4], 2, 0, 10, 300, True))
    assert torch.equal(whole[:, :, :77], kernels.draw(k, 2, 0, 10, 77, True))
    assert not torch.equal(whole, kernels.draw(k, 1, 0, 10, 300, True))  # streams differ
    for threads in (1, 3, 9):
        monkeypatch.setattr(torch, "get_num_threads", lambda t=threads: t)
        assert torch.equal(whole, kernels.draw(k, 2, 0, 10, 300, True))


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
    rel = (kernels_torch.exp(x).double() - torch.exp(x.double())) / torch.exp(x.double())
    assert rel.abs().max() < 3e-7
    assert kernels_torch.exp(torch.tensor([-100.0, float("-inf")])).tolist() == [0.0, 0.0]
    assert math.isnan(kernels_torch.exp(torch.tensor([float("nan")])).item())
    u = torch.arange(1, 2**24 + 1, 97, dtype=torch.float64) / 2**24
    assert (kernels_torch.log(u.float()).double() - torch.log(u)).abs().max() < 1e-6
    t = torch.arange(0, 2**24, 89, dtype=torch.float64) / 2**24
    s, c = kernels_torch.sincos_2pi(t.float())
    assert (s.double() - torch.sin(2 * math.pi * t)).abs().max() < 2e-7
    assert (c.double() - torch.cos(2 * math.pi * t)).abs().max() < 2e-7


def test_cpu_exp_is_the_torch_exp_at_the_edges():
    """The softmax pass at logits gaps down to -inf and NaN (exp's clamp and its 0 below
    ln 2^-126): the compiled CPU pass and the torch one agree bit for bit."""
    gaps = torch.tensor([0.0, -1e-30, -87.0, -87.33654, -87.3366, -88.0, -1e4, -float("inf")])
    z = torch.zeros(1, 2, len(gaps) + 1)
    z[0, 1, : len(gaps)] = gaps
    z[0, 0, -1], z[0, 1, -1] = float("nan"), 0.0
    a, b = z.clone(), z.clone()
    sq_a = kernels.softmax_grad_(a, torch.zeros(z.shape[2], dtype=torch.int64))
    sq_b = torch.empty_like(sq_a)
    kernels_torch.softmax_grad(b, torch.zeros(z.shape[2], dtype=torch.int64), sq_b)
    assert torch.equal(a[..., :-1], b[..., :-1]) and torch.equal(sq_a[:, :-1], sq_b[:, :-1])
    assert a[..., -1].isnan().all() and b[..., -1].isnan().all()


def _exp_of(x: np.ndarray) -> np.ndarray:
    """The compiled softmax pass's exp (``kernels_cpu._exp``, inlined into a loop as in the
    pass, compiled with the kernels' options) of each float32 of x."""

    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = kernels_cpu._exp(x[i])

    fn = numba.njit(nogil=True, error_model=kernels_cpu.ERROR_MODEL)(loop)
    out = np.empty_like(x)
    fn(x, out)
    return out


def test_cpu_exp_is_the_torch_exp_on_every_binade():
    """2^n of the compiled exp is built from n + 1.5 2^23 (no clamp of n): over every 2048th
    float32 <= 0 (each binade from -0 to -inf: all n from 0 to -126 and the flush to 0), every
    float32 in [-87.5, -87.25] (the cut at ln 2^-126) and NaN, the same bits as the torch exp
    (which clamps n and turns NaN into 0 before it converts n to an integer)."""
    bits = np.concatenate(
        [
            np.arange(0x80000000, 0xFF800001, 2048, dtype=np.uint64),  # -0 ... -inf
            np.arange(
                np.float32(-87.25).view(np.uint32), np.float32(-87.5).view(np.uint32) + 1
            ).astype(np.uint64),
            [0x7FC00000, 0xFFC00000, 0x7F800001],  # NaNs
        ]
    ).astype(np.uint32)
    x = bits.view(np.float32)
    got = _exp_of(x)
    want = kernels_torch.exp(torch.from_numpy(x)).numpy()
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan) and nan.sum() == 3
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
    assert got[x < np.float32(-87.33654475)].max() == 0 and got[x == 0].tolist() == [1.0]


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


def test_cpu_softmax_pass_equals_the_torch_one_bit_for_bit():
    for z, label, kw in softmax_cases():
        a, b = z.clone(), z.clone()
        sq_a = kernels.softmax_grad_(a, label, **kw)
        sq_b = torch.empty_like(sq_a)
        kernels_torch.softmax_grad(b, label, sq_b, kw.get("clip"), kw.get("a_sq"), kw.get("weight"))
        assert torch.equal(a, b) and torch.equal(sq_a, sq_b)


def test_a_zero_clip_gives_the_torch_and_c_passes_nan_not_an_exception(monkeypatch):
    """A clip of 0 with a zero norm is 0 / 0 in the clip factor: NaN, as in the torch pass and
    the C kernels (the compiled pass raised ZeroDivisionError before it took IEEE division);
    the other runs are untouched. On one thread and split over two."""
    z = torch.randn(4, 3, 7, generator=torch.Generator().manual_seed(4))
    label, a_sq = torch.zeros(7, dtype=torch.int64), torch.zeros(7)
    clip = torch.tensor([0.0, 1.0, 0.0, 0.5])
    want, want_sq = z.clone(), torch.empty(4, 7)
    kernels_torch.softmax_grad(want, label, want_sq, clip, a_sq, None)
    before = torch.get_num_threads()
    monkeypatch.setattr(kernels, "PIECES_PER_THREAD", 1)
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            got = z.clone()
            sq = kernels.softmax_grad_(got, label, clip=clip, a_sq=a_sq)
            assert torch.equal(sq, want_sq)  # before the clip: no NaN
            assert got[[0, 2]].isnan().all() and want[[0, 2]].isnan().all()
            assert torch.equal(got[[1, 3]], want[[1, 3]]) and not got[[1, 3]].isnan().any()
    finally:
        torch.set_num_threads(before)


def test_the_softmax_pass_takes_other_dtypes_and_strides_to_the_same_bits():
    """Inputs that are not int64 / float32 or not contiguous are converted (the same values),
    those that are are used as they are: the same bits either way."""
    z, label, clip, a_sq, weight = softmax_inputs(6, 10, 40)
    kw = dict(clip=clip, a_sq=a_sq, weight=weight)
    want = z.clone()
    want_sq = kernels.softmax_grad_(want, label, **kw)
    odd = dict(
        clip=clip.double(),
        a_sq=torch.stack([a_sq, a_sq], 1)[:, 0],  # strided
        weight=weight.t().contiguous().t(),  # column-major
    )
    for lab in (label.int(), torch.stack([label, label], 1)[:, 1]):
        got = z.clone()
        assert torch.equal(kernels.softmax_grad_(got, lab, **odd), want_sq)
        assert torch.equal(got, want)


@pytest.mark.parametrize(
    "kind,canary", [("logreg", "dirac"), ("logreg", "input"), ("mlp", "input")]
)
def test_training_runs_are_the_same_with_the_torch_kernels(monkeypatch, kind, canary):
    """What a GPU runs (the torch kernels), here on CPU tensors, trains the same runs."""
    data = load_dataset("digits", n=60)
    model = ModelSpec(kind, data.shape, 10, hidden=(8,))
    z = DiracCanary() if canary == "dirac" else ExampleCanary(1 - data.x[0], 3)
    kw = dict(
        settings=TrainSettings(
            steps=6,
            lr=[0.05, 0.1, 0.02],
            clip=1.0,
            noise_multiplier=0.8,
            sample_rate=[1.0, 0.4, 1.0],
        ),
        seeds=[3, 4, 5],
        canary=z,
        include_canary=[1, 0, 1],
        execution=Execution(device="cpu"),
    )
    compiled = train_runs(model, data, **kw)
    monkeypatch.setattr(kernels, "_numba_serves", lambda device: False)
    assert kernels.backend("cpu") == "torch"
    plain = train_runs(model, data, **kw)
    assert torch.equal(compiled.w0, plain.w0) and torch.equal(compiled.wN, plain.wN)
    assert torch.equal(compiled.canary_dots, plain.canary_dots)


@pytest.mark.parametrize("wraps", [True, False])
def test_both_ways_of_the_torch_products_give_the_known_answers(monkeypatch, wraps):
    monkeypatch.setattr(kernels_torch, "_WRAPS", {"cpu": wraps})
    for counter, key, want in KAT:
        assert kernels.philox_block(counter, key, "torch") == want
    k = keys(5, 3)
    a = torch_draw(k, 2, 0, 3, 100, True)
    monkeypatch.setattr(kernels_torch, "_WRAPS", {"cpu": not wraps})
    assert torch.equal(a, torch_draw(k, 2, 0, 3, 100, True))


@pytest.mark.slow  # inspects every compiled kernel's machine code
def test_the_compiled_code_has_no_fused_multiply_add():
    """numba compiles without fast-math flags: no LLVM instruction may be contracted, and on
    x86-64 no FMA instruction appears in the machine code (an FMA rounds once where the
    streams round twice). Compiled afresh here: numba does not show cached code."""
    opts = dict(nogil=True, error_model=kernels_cpu.ERROR_MODEL)  # as kernels compiles them
    for py_func, sigs in kernels_cpu.SIGNATURES[:2]:
        fn = numba.njit(sigs, **opts)(py_func)
        llvm = "\n".join(fn.inspect_llvm().values())
        assert not re.search(r"\b(fast|contract|reassoc|afn)\b", llvm)
        assert "fmuladd" not in llvm and "llvm.fma" not in llvm
        assert "ZeroDivisionError" not in llvm  # IEEE division: no check, no branch
        if platform.machine() in ("x86_64", "AMD64"):
            asm = "\n".join(fn.inspect_asm().values())
            assert not re.search(r"\bv?fn?m(add|sub)\d", asm)
            assert re.search(r"\bv?mulps\b", asm)  # vectorised (so the search above can see it)
            if py_func is kernels_cpu.softmax_grad:  # 1 / sum and the clip factor vectorised too
                assert re.search(r"\bv?divps\b", asm) and re.search(r"\bv?sqrtps\b", asm)


def test_seed_keys_are_numpys_seed_sequence():
    seeds = [0, 1, 2**32 - 1, 2**32, 2**63 - 1, 123456789]
    want = [np.random.SeedSequence(s).generate_state(2, np.uint32) for s in seeds]
    assert kernels.seed_keys(seeds).tolist() == [list(map(int, w)) for w in want]
    with pytest.raises(ValueError, match="implementation"):
        kernels.philox_block([0] * 4, [0, 0], "c")


needs_cc = pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler here"
)


@needs_cc
def test_cpu_kernels_equal_the_pinned_c_kernels_on_many_numbers():
    """4.8e6 normals, 1.2e6 uniforms and a softmax pass of 3e5 logits: the numba kernels and
    the C kernels of auditsel 0.1 (benchmarks/baselines/kernels_c, built here) agree."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from baselines import kernels_c
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    if not kernels_c.available():
        pytest.skip("the C compiler here cannot build the baseline")
    k = keys(300, 11)
    for normal, width in ((True, 1000), (False, 250)):
        a = kernels.draw(k, 2, 5, 16, width, normal)
        assert torch.equal(a, kernels_c.draw(k, 2, 5, 16, width, normal))
    z = torch.randn(100, 10, 300, generator=torch.Generator().manual_seed(1)) * 8
    label = torch.randint(0, 10, (300,), generator=torch.Generator().manual_seed(2))
    a, b = z.clone(), z.clone()
    kw = dict(clip=torch.full((100,), 0.7), a_sq=torch.rand(300) * 30 + 1)
    assert torch.equal(
        kernels.softmax_grad_(a, label, **kw), kernels_c.softmax_grad_(b, label, **kw)
    )
    assert torch.equal(a, b)
    s = np.random.default_rng(3).integers(0, 2**63, 500).astype(np.uint64)
    assert np.array_equal(kernels.seed_states(s, 3), kernels_c.seed_states(s, 3))
