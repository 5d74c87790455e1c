"""The DP-SGD trainer as it was before the speed work of the real-data games (kept for
``benchmarks/bench_dpsgd_games.py`` only: it compares games/s of this path against
``auditsel.dpsgd.trainer`` in the same process; nothing in the package imports it).

Same contract and random streams as ``auditsel.dpsgd.trainer.train_runs``; the batched dense
forward/backward use per-run einsums with a broadcast input.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from auditsel.dpsgd.data import Dataset
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.protocol import CanaryLoss, FirstCoordinateShift, Score, ValidationLoss

BLOCK = 16  # steps of noise / masks drawn per call and run (the old streams)

from auditsel.dpsgd.trainer import (
    Canary,
    ExampleCanary,
    GradientCanary,
    TrainResult,
    check_settings,
    clip_factors,
    default_device,
)


def _dense_forward(model: ModelSpec, w, x):
    params = model.unflatten(w)
    a = x
    out = []
    layers = len(params) // 2
    for i in range(layers):
        weight, bias = params[2 * i], params[2 * i + 1]
        if a.dim() == 2:
            z = torch.einsum("ni,roi->rno", a, weight) + bias[:, None, :]
        else:
            z = torch.einsum("rni,roi->rno", a, weight) + bias[:, None, :]
        out.append((a, z))
        if i < layers - 1:
            a = F.relu(z)
    return out


def _vmap_clipped_sum(model: ModelSpec, w, x, y, clip, weight):
    """sum_n weight[r, n] CLP_C(grad l(w_r; x_n, y_n)) via torch.func: (R, d).
    x, y are shared by the runs ((n, ...), (n,)) or per run ((R, n, ...), (R, n))."""
    grad_one = torch.func.grad(model.loss)
    per_run = 0 if y.dim() == 2 else None
    per_example = torch.func.vmap(
        torch.func.vmap(grad_one, in_dims=(None, 0, 0)), in_dims=(0, per_run, per_run)
    )
    g = per_example(w, x, y)  # (R, n, d)
    factors = clip_factors(torch.linalg.vector_norm(g, dim=2), clip[:, None]) * weight
    return torch.einsum("rn,rnd->rd", factors, g)


def _ghost_clipped_sum(model: ModelSpec, w, x, y, clip, weight):
    """The same sum for dense models without materialising per-example gradients.

    Per layer l with input a and output-gradient e (per example), grad W_l = e a^T and
    grad b_l = e, so ||grad||^2 = sum_l ||e_l||^2 (||a_l||^2 + 1); the clipped sum of layer l
    is sum_n c_n e_n a_n^T. The e_l come from an explicit backward pass of the cross-entropy
    (softmax - onehot, then through W and the ReLU masks).
    """
    layers = _dense_forward(model, w, x.reshape(*y.shape, -1))
    params = model.unflatten(w)
    logits = layers[-1][1]
    e = torch.exp(logits - logits.amax(-1, keepdim=True))  # softmax, written out: torch.softmax
    e = e / e.sum(-1, keepdim=True)  # over a short last dim is slow on CPU
    e = e - F.one_hot(y, logits.shape[-1]).to(e.dtype)  # (R, n, classes)
    grads_out = [None] * len(layers)
    for l in range(len(layers) - 1, -1, -1):
        grads_out[l] = e
        if l > 0:
            e = torch.einsum("rno,roi->rni", e, params[2 * l]) * (layers[l - 1][1] > 0)
    sq = 0
    for (a, _), e in zip(layers, grads_out):
        a_sq = (a * a).sum(-1) + 1.0  # (n,) or (R, n)
        sq = sq + (e * e).sum(-1) * a_sq
    factors = clip_factors(torch.sqrt(sq), clip[:, None]) * weight  # (R, n)
    parts = []
    for (a, _), e in zip(layers, grads_out):
        ec = e * factors[..., None]
        if a.dim() == 2:
            parts.append(torch.einsum("rno,ni->roi", ec, a).reshape(w.shape[0], -1))
        else:
            parts.append(torch.einsum("rno,rni->roi", ec, a).reshape(w.shape[0], -1))
        parts.append(ec.sum(1))
    return torch.cat(parts, dim=1)


def _clipped_sum(model, w, x, y, clip, weight, method, budget):
    """Chunk the examples so that at most ~budget numbers are alive at once. When the Poisson
    batches are sparse (under half the examples kept), each run's kept examples are gathered
    first (padded to the largest batch with weight 0), so the work scales with tau n, not n."""
    R, d = w.shape
    n = x.shape[0]
    kept = weight != 0
    counts = kept.sum(1)
    if n > 1 and int(counts.max()) * 2 <= n:
        b = max(1, int(counts.max()))
        idx = torch.argsort((~kept).to(torch.int8), dim=1, stable=True)[:, :b]  # kept first
        weight = torch.gather(weight, 1, idx)
        x, y = x[idx], y[idx]  # (R, b, ...), (R, b)
        n = b
    fn = _ghost_clipped_sum if method == "ghost" else _vmap_clipped_sum
    width = d if method == "vmap" else sum(i + o for i, o in model.dense_sizes)
    chunk = max(1, min(n, budget // max(1, R * width)))
    total = torch.zeros_like(w)
    per_run = y.dim() == 2
    for start in range(0, n, chunk):
        sl = slice(start, start + chunk)
        if torch.any(weight[:, sl] != 0):
            xs, ys = (x[:, sl], y[:, sl]) if per_run else (x[sl], y[sl])
            total += fn(model, w, xs, ys, clip, weight[:, sl])
    return total


def _canary_gradient(model: ModelSpec, canary: Canary, w, clip, xz, yz):
    """p^z = CLP_C(grad l(w_r; z)) for each run (R, d); C e_coordinate for the Dirac canary."""
    R, d = w.shape
    if isinstance(canary, GradientCanary):
        g = torch.zeros_like(w)
        g[:, canary.coordinate] = clip
        return g
    g = torch.func.vmap(torch.func.grad(model.loss), in_dims=(0, None, None))(w, xz, yz)
    return g * clip_factors(torch.linalg.vector_norm(g, dim=1), clip)[:, None]


def _as_runs(value, R, dtype, device, field):
    arr = np.array(np.broadcast_to(np.asarray(value, dtype=float), (R,)))
    return torch.as_tensor(arr, dtype=dtype, device=device)


def train_runs(
    model: ModelSpec,
    train: Dataset,
    *,
    steps: int,
    lr,
    clip,
    noise_multiplier,
    sample_rate,
    seeds,
    canary: Canary | None = None,
    include_canary=None,
    device=None,
    dtype=torch.float32,
    method: str = "auto",
    memory_budget: int = 1 << 24,
) -> TrainResult:
    """Train R = len(seeds) independent DP-SGD runs of eq. 1 together.

    lr, clip, noise_multiplier, sample_rate: scalars or arrays of length R. include_canary (R,)
    bool: run r trains on X u {z} (needs ``canary``). Returns w_0, w_N and, with a canary, the
    statistic sum_i <p_i^z, p_i> (float64).
    """
    seeds = np.asarray(seeds, dtype=np.uint64).reshape(-1)
    R = len(seeds)
    steps = int(steps)
    check_settings(
        steps=np.int64(steps),
        lr=lr,
        clip=clip,
        noise_multiplier=noise_multiplier,
        sample_rate=sample_rate,
    )
    if method == "auto":
        method = "ghost" if model.has_dense_path else "vmap"
    if method not in ("ghost", "vmap"):
        raise ValueError(f"game.method: must be auto, ghost or vmap, got {method!r}")
    if method == "ghost" and not model.has_dense_path:
        raise ValueError(f"game.method: ghost clipping needs a dense model, got {model.kind}")
    if train.shape != model.input_shape and len(train):
        raise ValueError(
            f"game.model: expects examples of shape {model.input_shape}, got {train.shape}"
        )
    device = torch.device(device) if device is not None else default_device()
    d = model.num_params
    if isinstance(canary, GradientCanary) and not 0 <= canary.coordinate < d:
        raise ValueError(f"game.canary: coordinate must be in [0, {d}), got {canary.coordinate}")
    if include_canary is None:
        include_canary = np.zeros(R, dtype=bool)
    include = np.asarray(include_canary, dtype=bool).reshape(-1)
    if len(include) != R:
        raise ValueError("include_canary must have one entry per run")
    if include.any() and canary is None:
        raise ValueError("game.canary: runs on X' = X u {z} need a canary")

    lr_t = _as_runs(lr, R, dtype, device, "lr")
    clip_t = _as_runs(clip, R, dtype, device, "clip")
    noise_t = _as_runs(noise_multiplier, R, dtype, device, "sigma") * clip_t
    rate = np.broadcast_to(np.asarray(sample_rate, dtype=float), (R,))
    rate_t = torch.as_tensor(np.array(rate), dtype=dtype, device=device)
    subsampled = rate < 1
    inc_t = torch.as_tensor(include, dtype=dtype, device=device)

    x = torch.as_tensor(train.x, dtype=dtype, device=device)
    y = torch.as_tensor(train.y, dtype=torch.long, device=device)
    n = len(train)
    if isinstance(canary, ExampleCanary):
        xz = torch.as_tensor(np.asarray(canary.x, dtype=np.float32), dtype=dtype, device=device)
        if tuple(xz.shape) != model.input_shape:
            raise ValueError(
                f"game.canary: example of shape {tuple(xz.shape)}, the model "
                f"expects {model.input_shape}"
            )
        yz = torch.as_tensor(int(canary.y), dtype=torch.long, device=device)
    else:
        xz = yz = None

    # per-run streams: init, Poisson masks, noise
    gens = []
    for s in seeds:
        states = np.random.SeedSequence(int(s)).generate_state(3, dtype=np.uint64)
        gens.append(
            [torch.Generator(device=device).manual_seed(int(v) & ((1 << 63) - 1)) for v in states]
        )
    w = torch.stack([model.init(g[0], dtype=dtype, device=device) for g in gens])
    w0 = w.clone()
    dot = torch.zeros(R, dtype=torch.float64, device=device)
    ones = torch.ones(R, n + 1, dtype=dtype, device=device)

    with torch.no_grad():
        for block_start in range(0, steps, BLOCK):
            b = min(BLOCK, steps - block_start)
            noise = torch.stack(
                [torch.randn(BLOCK, d, generator=g[2], dtype=dtype, device=device) for g in gens]
            )  # (R, BLOCK, d)
            if subsampled.any():
                u = torch.stack(
                    [
                        torch.rand(BLOCK, n + 1, generator=g[1], dtype=dtype, device=device)
                        if sub
                        else torch.zeros(BLOCK, n + 1, dtype=dtype, device=device)
                        for g, sub in zip(gens, subsampled)
                    ]
                )
                masks = (u < rate_t[:, None, None]).to(dtype)  # (R, BLOCK, n + 1)
            for j in range(b):
                mask = masks[:, j] if subsampled.any() else ones
                if n:
                    p = _clipped_sum(model, w, x, y, clip_t, mask[:, :n], method, memory_budget)
                else:
                    p = torch.zeros_like(w)
                if canary is not None:
                    pz = _canary_gradient(model, canary, w, clip_t, xz, yz)
                    p += pz * (inc_t * mask[:, n])[:, None]
                p += noise[:, j] * noise_t[:, None]
                if canary is not None:
                    dot += (pz.double() * p.double()).sum(1)
                w = w - lr_t[:, None] * p
    return TrainResult(w0=w0, wN=w, canary_dots=dot[:, None])  # the sum, as one column


def _batched_logits(model: ModelSpec, w, x):
    if model.has_dense_path:
        return _dense_forward(model, w, x.reshape(x.shape[0], -1))[-1][1]
    return torch.func.vmap(model.logits, in_dims=(0, None))(w, x)


def evaluate_score(
    score: Score, model: ModelSpec, w0: torch.Tensor, wN: torch.Tensor, chunk: int = 1 << 22
) -> torch.Tensor:
    """g for each of R runs (R,), from (w_0, w_N) only."""
    R = wN.shape[0]
    if isinstance(score, FirstCoordinateShift):
        return (w0[:, score.coordinate] - wN[:, score.coordinate]).double()
    with torch.no_grad():
        if isinstance(score, CanaryLoss):
            x = torch.as_tensor(
                np.asarray(score.canary.x, np.float32)[None], dtype=wN.dtype, device=wN.device
            )
            y = torch.full((1,), int(score.canary.y), dtype=torch.long, device=wN.device)
            logits = _batched_logits(model, wN, x)  # (R, 1, classes)
            return -F.cross_entropy(logits[:, 0], y.expand(R), reduction="none").double()
        if isinstance(score, ValidationLoss):
            data = score.data
            if len(data) == 0:
                raise ValueError("game.validation_size: must be >= 1 for a validation-loss score")
            total = torch.zeros(R, dtype=torch.float64, device=wN.device)
            step = max(1, chunk // max(1, R * model.num_classes * 8))
            for s in range(0, len(data), step):
                x = torch.as_tensor(data.x[s : s + step], dtype=wN.dtype, device=wN.device)
                y = torch.as_tensor(data.y[s : s + step], dtype=torch.long, device=wN.device)
                logits = _batched_logits(model, wN, x)  # (R, n, classes)
                ce = F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), y.repeat(R), reduction="none"
                ).reshape(R, -1)
                total -= ce.double().sum(1)
            return total / len(data) if score.reduction == "mean" else total
    raise TypeError(f"unknown score {score!r}")
