"""DP-SGD exactly as [XWW24] eq. 1, for many independent runs at once.

One run, from w_0, for i = 1..N::

    B_i  = Poisson sample of X' (each example, the canary included, kept with prob. tau)
    p_i  = sum_{(x,y) in B_i} CLP_C(grad_w l(w_{i-1}; x, y)) + R_i,   R_i ~ N(0, C^2 sigma^2 I_d)
    w_i  = w_{i-1} - lr * p_i                    CLP_C(u) = min(1, C / ||u||_2) u

tau = 1 is full-batch gradient descent. X' = X u {z} when the run's coin says so; the canary z
is either an input example (``ExampleCanary``) or the Dirac gradient canary Z_D
(``DiracCanary``) whose clipped gradient is C e_0 at every step ([XWW24] Sec. 4.1).

Batching: R runs (different seeds, coins and hyperparameters lr, C, sigma, tau) train together;
parameters are a tensor (R, d) (``models.ModelSpec``). Per-example gradients are taken either
with torch.func (``vmap`` over runs of ``vmap`` over examples of ``grad``: any model) or, for
dense models, with the ghost-norm identity ||a e^T||_F = ||a|| ||e|| per layer and an explicit
backward pass (the same gradients without materialising an (R, n, d) tensor). Both give the
same clipped sums; ``method`` picks one (``auto``: ghost for logreg/mlp, vmap otherwise).

Determinism: run r draws everything from its own key, the first word of ``SeedSequence(s_r)``
(numpy's hash of its seed), with the counter-based Philox4x32-10 generator of ``kernels.draw``:
w_0 from stream 0, the Poisson masks of step i (n + 1 uniforms: the examples, then the canary)
from stream 1, the noise of step i (d normals) from stream 2. Every number is a function of
(s_r, stream, step, index) alone, so a run's trajectory does not depend on which other runs
share its batch, how steps are grouped or how threads split the work: batched == one at a time.

What is kept of the trajectory y = {p_1..p_N, w_1..w_N} (which [XWW24] Sec. 4 releases in
full): w_0, w_N and, when a canary is given, the N per-step statistics <p_i^z, p_i> with
p_i^z = CLP_C(grad l(w_{i-1}; z)) (C e_0 for Z_D): a post-processing of y and the public z,
computed during training only so that the trajectory never has to be stored.

Dense models keep examples last, (R, features, n), so every product is one (batched) GEMM;
the output layer's softmax - onehot is ``kernels.softmax_grad_`` and the draws are
``kernels.draw``, with the same numbers bit for bit on CPU and GPU.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike

from auditsel.dpsgd import kernels
from auditsel.dpsgd.datasets import Dataset
from auditsel.dpsgd.models import ModelSpec
from auditsel.errors import ConfigError, shown
from auditsel.mechanisms import DpsgdBase

INIT, MASKS, NOISE = 0, 1, 2  # the per-run streams of `kernels.draw`


@dataclass(frozen=True)
class ExampleCanary:
    """An input-space canary z = (x, y): x has the shape of one training example."""

    x: np.ndarray
    y: int
    label: str = "input"


@dataclass(frozen=True)
class DiracCanary:
    """The Dirac gradient canary Z_D: its clipped gradient is C e_coordinate at every step.

    ``coordinate`` may also be a tuple of distinct coordinates: one Dirac canary per
    coordinate, all in X' (one-run audits).
    """

    coordinate: int | tuple = 0
    label: str = "dirac"

    @property
    def coordinates(self) -> list:
        return list(self.coordinate) if isinstance(self.coordinate, tuple) else [self.coordinate]


Canary = ExampleCanary | DiracCanary


@dataclass(frozen=True, kw_only=True)
class Execution:
    """How DP-SGD runs are computed, never what they compute: the device (None: the default),
    the weights' dtype, the clipping method ('auto', 'ghost' or 'vmap'), the floats a group of
    steps may hold (`memory_budget`) and, in a tuning protocol, the runs trained together."""

    device: str | torch.device | None = None
    dtype: torch.dtype = torch.float32
    method: str = "auto"
    memory_budget: int = 1 << 24
    max_batch_runs: int = 256

    def __post_init__(self) -> None:
        if self.max_batch_runs < 1:
            raise ConfigError("game.max_batch_runs", f"must be >= 1, got {self.max_batch_runs}")


@dataclass(frozen=True, kw_only=True, eq=False)
class TrainSettings:
    """What R runs of eq. 1 train with: `steps` N (one for all runs) and, each a scalar or an
    array of length R, the learning rate `lr`, the clipping norm `clip` C, the
    `noise_multiplier` sigma and the Poisson `sample_rate` tau (1: full batch); checked when
    made (`check_settings`)."""

    steps: int
    lr: ArrayLike
    clip: ArrayLike
    noise_multiplier: ArrayLike
    sample_rate: ArrayLike

    def __post_init__(self) -> None:
        check_settings(steps=np.int64(self.steps), **{k: getattr(self, k) for k in _RANGES})


@dataclass
class TrainResult:
    """What the protocol may release of R runs: w_0, w_N (R, d) and the per-step statistics
    <p_i^z, p_i> (R, N) float64 (zeros without a canary)."""

    w0: torch.Tensor
    wN: torch.Tensor
    canary_dots: torch.Tensor

    @property
    def canary_dot(self) -> torch.Tensor:
        """sum_i <p_i^z, p_i> (R,), summed step by step in float64."""
        total = torch.zeros(
            self.canary_dots.shape[0], dtype=torch.float64, device=self.canary_dots.device
        )
        for i in range(self.canary_dots.shape[1]):
            total += self.canary_dots[:, i]
        return total


def default_device() -> torch.device:
    """The GPU when there is one, else the CPU (nothing requires a GPU)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The device to train on: `device` (a name or torch.device) or `default_device()`; a CUDA
    device this torch build or machine cannot use is a ConfigError naming game.device."""
    if device is None:
        return default_device()
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError("game.device", f"must be cpu or cuda, got {shown(device)}") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        why = (
            "this torch build has no CUDA support"
            if torch.version.cuda is None
            else "no CUDA GPU is visible"
        )
        raise ConfigError(
            "game.device",
            f"cuda is not available ({why}); use device: cpu, or leave device out "
            f"(the GPU is used when there is one)",
        )
    return resolved


_RANGES = {  # argument: (config field, out of range, the allowed range)
    "lr": ("game.learning_rates", lambda a: a < 0, ">= 0"),
    "clip": ("game.clip", lambda a: a <= 0, "> 0"),
    "noise_multiplier": ("base.noise_multiplier", lambda a: a < 0, ">= 0"),
    "sample_rate": ("base.sample_rate", lambda a: (a <= 0) | (a > 1), "in (0, 1]"),
}


def check_settings(
    *,
    steps: ArrayLike | None = None,
    lr: ArrayLike | None = None,
    clip: ArrayLike | None = None,
    noise_multiplier: ArrayLike | None = None,
    sample_rate: ArrayLike | None = None,
) -> None:
    """Range checks of the trainer's settings; each failure is one ValueError line
    ``<field>: must be ..., got ...`` naming the config field."""
    if steps is not None:
        s = np.asarray(steps)
        if s.dtype.kind not in "iu" or np.any(s < 1):
            raise ConfigError("base.steps", f"must be an integer >= 1, got {shown(steps)}")
    given = dict(lr=lr, clip=clip, noise_multiplier=noise_multiplier, sample_rate=sample_rate)
    for name, value in given.items():
        if value is None:
            continue
        field, bad, allowed = _RANGES[name]
        a = np.asarray(value, dtype=float)
        if not np.all(np.isfinite(a)):
            raise ConfigError(field, f"must be finite, got {shown(value)}")
        if np.any(bad(a)):
            raise ConfigError(field, f"must be {allowed}, got {shown(value)}")


def dpsgd_epsilon(
    noise_multiplier: float, steps: int, sample_rate: float, delta: float, accountant: str = "rdp"
) -> float:
    """eps_B of one DP-SGD run (N Poisson-subsampled Gaussian steps) at delta
    (`auditsel.mechanisms.DpsgdBase`, i.e. dp_accounting's RDP or PLD accountant)."""
    return float(DpsgdBase(noise_multiplier, steps, sample_rate, accountant).epsilon(delta))


def calibrate_noise_multiplier(
    epsilon: float, delta: float, steps: int, sample_rate: float, accountant: str = "rdp"
) -> float:
    """The sigma with dpsgd_epsilon(sigma, ...) = epsilon (`DpsgdBase.from_epsilon`,
    dp_accounting's calibration)."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigError("base.epsilon", f"must be in (0, inf), got {shown(epsilon)}")
    if not (0 < delta < 1):
        raise ConfigError("delta", f"must be in (0, 1) to calibrate DP-SGD, got {shown(delta)}")
    check_settings(steps=steps, sample_rate=sample_rate)
    base = DpsgdBase.from_epsilon(
        epsilon, delta, steps=steps, sample_rate=sample_rate, accountant=accountant
    )
    return float(base.noise_multiplier)


def clip_factors(norms: torch.Tensor, clip: torch.Tensor) -> torch.Tensor:
    """min(1, C / ||u||) written as C / max(||u||, C): exact, and 1 at ||u|| = 0."""
    return clip / torch.maximum(norms, clip)


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


def _ghost_prep(x, y):
    """What the ghost sum needs of the examples alone: the inputs examples-last, xt (f + 1, n)
    shared by the runs with a last row of ones (the first bias) or (R, f, n) per run,
    ||a_0||^2 + 1 per example, and the labels."""
    if y.dim() == 1:
        xt = x.reshape(x.shape[0], -1).T  # (f, n), shared by the runs
        a_sq = (xt * xt).sum(-2) + 1.0
        xt = torch.cat([xt, torch.ones_like(xt[:1])])
    else:
        xt = x.reshape(*y.shape, -1).transpose(1, 2)  # (R, f, n)
        a_sq = (xt * xt).sum(-2) + 1.0
    return xt, a_sq, y


_BUFFERS = threading.local()


def _buffer(shape, like: torch.Tensor) -> torch.Tensor:
    """A scratch tensor of this shape, kept per thread and reused from call to call."""
    key = (tuple(shape), like.dtype, str(like.device))
    cache = _BUFFERS.__dict__.setdefault("cache", {})
    if key not in cache:
        if len(cache) > 8:
            cache.clear()
        cache[key] = torch.empty(shape, dtype=like.dtype, device=like.device)
    return cache[key]


def _ghost_clipped_sum(model: ModelSpec, w, x, y, clip, weight, prep=None):
    """The same sum for dense models without materialising per-example gradients.

    Per layer l with input a and output-gradient e (per example), grad W_l = e a^T and
    grad b_l = e, so ||grad||^2 = sum_l ||e_l||^2 (||a_l||^2 + 1); the clipped sum of layer l
    is sum_n c_n e_n a_n^T. The e_l come from an explicit backward pass of the cross-entropy
    (softmax - onehot, then through W and the ReLU masks), examples-last. weight None means
    all ones; prep is ``_ghost_prep(x, y)`` (computed here when not given).
    """
    R = w.shape[0]
    xt, a0_sq, labels = _ghost_prep(x, y) if prep is None else prep
    layers = model.dense_forward_t(
        w, xt, ones_row=y.dim() == 1, buffer=_buffer((R, model.dense_sizes[0][1], y.shape[-1]), w)
    )
    params = model.unflatten(w)
    e = layers[-1][1]  # logits (R, classes, n), fresh: in place
    if len(layers) == 1:  # one layer: its norm is the whole norm; the kernel also clips e
        kernels.softmax_grad_(e, labels, clip, a0_sq, weight)
        grads_out = [e]
    else:
        e_sq = kernels.softmax_grad_(e, labels)  # e = softmax - onehot; sum_k e_k^2 (R, n)
        grads_out = [None] * len(layers)
        for l in range(len(layers) - 1, -1, -1):
            grads_out[l] = e
            if l > 0:
                e = torch.bmm(params[2 * l].transpose(1, 2), e) * (layers[l - 1][1] > 0)
        sq = None
        for l, ((a, _), e) in enumerate(zip(layers, grads_out)):
            part = (e_sq if l == len(layers) - 1 else (e * e).sum(1)) * (
                a0_sq if l == 0 else (a * a).sum(-2) + 1.0
            )
            sq = part if sq is None else sq + part
        assert sq is not None  # two layers or more
        factors = clip_factors(torch.sqrt(sq), clip[:, None])  # (R, n)
        if weight is not None:
            factors *= weight
        for e in grads_out:
            e.mul_(factors[:, None, :])  # (R, out, n), in place
    parts = []
    for (a, _), ec in zip(layers, grads_out):
        if a.dim() == 2:  # shared input: one GEMM (R out, n) x (n, f)
            parts.append((ec.reshape(-1, ec.shape[-1]) @ a.T).reshape(R, -1))
        else:
            parts.append(torch.bmm(ec, a.transpose(1, 2)).reshape(R, -1))
        parts.append(ec.sum(2))
    return torch.cat(parts, dim=1)


def _clipped_sum(model, w, x, y, clip, weight, method, budget, full_batch=False, prep=None):
    """Chunk the examples so that at most ~budget numbers are alive at once. When the Poisson
    batches are sparse (under half the examples kept), each run's kept examples are gathered
    first (padded to the largest batch with weight 0), so the work scales with tau n, not n.
    At tau = 1 (full_batch) the weights are all ones and ``prep`` (``_ghost_prep`` of the whole
    set, for the ghost path) is reused while the examples fit in one chunk."""
    R, d = w.shape
    n = x.shape[0]
    fn = _ghost_clipped_sum if method == "ghost" else _vmap_clipped_sum
    width = d if method == "vmap" else sum(i + o for i, o in model.dense_sizes)
    if full_batch and max(1, budget // max(1, R * width)) >= n:  # one chunk, weights all 1
        if method == "ghost":
            return fn(model, w, x, y, clip, None, prep)
        return fn(model, w, x, y, clip, weight)
    kept = weight != 0
    counts = kept.sum(1)
    if n > 1 and int(counts.max()) * 2 <= n:
        b = max(1, int(counts.max()))
        idx = torch.argsort((~kept).to(torch.int8), dim=1, stable=True)[:, :b]  # kept first
        weight = torch.gather(weight, 1, idx)
        x, y = x[idx], y[idx]  # (R, b, ...), (R, b)
        n = b
    chunk = max(1, min(n, budget // max(1, R * width)))
    total = torch.zeros_like(w)
    per_run = y.dim() == 2
    for start in range(0, n, chunk):
        sl = slice(start, start + chunk)
        if torch.any(weight[:, sl] != 0):
            xs, ys = (x[:, sl], y[:, sl]) if per_run else (x[sl], y[sl])
            total += fn(model, w, xs, ys, clip, weight[:, sl])
    return total


def _canary_gradient(model: ModelSpec, canary: Canary, w, clip, xz, yz, prep=None):
    """p^z = CLP_C(grad l(w_r; z)) for each run (R, d); C e_coordinate for the Dirac canary.
    prep: ``_ghost_prep`` of z for a dense model (the ghost sum over z), else torch.func."""
    R, d = w.shape
    if isinstance(canary, DiracCanary):
        g = torch.zeros_like(w)
        g[:, canary.coordinates] = clip[:, None] if torch.is_tensor(clip) and clip.dim() else clip
        return g
    if prep is not None:
        return _ghost_clipped_sum(model, w, xz[None], yz[None], clip, None, prep)
    g = torch.func.vmap(torch.func.grad(model.loss), in_dims=(0, None, None))(w, xz, yz)
    return g * clip_factors(torch.linalg.vector_norm(g, dim=1), clip)[:, None]


def _as_runs(value, R, dtype, device):
    arr = np.array(np.broadcast_to(np.asarray(value, dtype=float), (R,)))
    return torch.as_tensor(arr, dtype=dtype, device=device)


@dataclass(frozen=True)
class _Examples:
    """What every step of `train_runs` reads: the training set and the canary as tensors."""

    x: torch.Tensor
    y: torch.Tensor
    n: int
    canary: Canary | None
    xz: torch.Tensor | None  # the canary example (ExampleCanary), else None
    yz: torch.Tensor | None
    cz: list[int] | slice | None  # the Dirac canary's coordinates (DiracCanary), else None
    prep: tuple | None  # `_ghost_prep` of the set and of the canary (ghost clipping)
    prep_z: tuple | None
    method: str
    memory_budget: int


def _check_runs(
    model: ModelSpec, train: Dataset, canary: Canary | None, method: str, include: np.ndarray
) -> str:
    """The clipping method `train_runs` uses ('auto' resolved), or a ConfigError."""
    if method == "auto":
        method = "ghost" if model.has_dense_path else "vmap"
    if method not in ("ghost", "vmap"):
        raise ConfigError("game.method", f"must be auto, ghost or vmap, got {method!r}")
    if method == "ghost" and not model.has_dense_path:
        raise ConfigError("game.method", f"ghost clipping needs a dense model, got {model.kind}")
    if train.shape != model.input_shape and len(train):
        raise ConfigError(
            "game.model", f"expects examples of shape {model.input_shape}, got {train.shape}"
        )
    d = model.num_params
    if isinstance(canary, DiracCanary) and not (
        all(0 <= c < d for c in canary.coordinates)
        and len(set(canary.coordinates)) == len(canary.coordinates)
    ):
        raise ConfigError(
            "game.canary", f"coordinates must be distinct and in [0, {d}), got {canary.coordinate}"
        )
    if include.any() and canary is None:
        raise ConfigError("game.canary", "runs on X' = X u {z} need a canary")
    return method


def _examples(
    model: ModelSpec,
    train: Dataset,
    canary: Canary | None,
    method: str,
    memory_budget: int,
    dtype: torch.dtype,
    device: torch.device,
) -> _Examples:
    x = torch.as_tensor(train.x, dtype=dtype, device=device)
    y = torch.as_tensor(train.y, dtype=torch.long, device=device)
    xz = yz = None
    cz: list[int] | slice | None = None
    if isinstance(canary, ExampleCanary):
        xz = torch.as_tensor(np.asarray(canary.x, dtype=np.float32), dtype=dtype, device=device)
        if tuple(xz.shape) != model.input_shape:
            raise ConfigError(
                "game.canary",
                f"example of shape {tuple(xz.shape)}, the model expects {model.input_shape}",
            )
        yz = torch.as_tensor(int(canary.y), dtype=torch.long, device=device)
    elif isinstance(canary, DiracCanary):
        # the canary's coordinates as a slice when they are contiguous (a view)
        cz = canary.coordinates
        c0 = cz[0]
        cz = slice(c0, c0 + len(cz)) if cz == list(range(c0, c0 + len(cz))) else cz
    ghost = method == "ghost"
    prep = _ghost_prep(x, y) if ghost and len(train) else None
    prep_z = (
        _ghost_prep(xz[None], yz[None]) if ghost and xz is not None and yz is not None else None
    )
    return _Examples(x, y, len(train), canary, xz, yz, cz, prep, prep_z, method, memory_budget)


def _add_canary(
    ex: _Examples,
    model: ModelSpec,
    w: torch.Tensor,
    clip_t: torch.Tensor,
    p: torch.Tensor,
    z_in: torch.Tensor,
) -> torch.Tensor | None:
    """Add the canary's clipped gradient to p where it is in (z_in); p^z (None: Dirac or none)."""
    if ex.cz is not None:
        p[:, ex.cz] += (clip_t * z_in)[:, None]
        return None
    if ex.canary is not None:
        pz = _canary_gradient(model, ex.canary, w, clip_t, ex.xz, ex.yz, ex.prep_z)
        p += pz * z_in[:, None]
        return pz
    return None


def _step(
    ex: _Examples,
    model: ModelSpec,
    w: torch.Tensor,
    clip_t: torch.Tensor,
    mask: torch.Tensor,
    z_in: torch.Tensor,
    noise: torch.Tensor,
    full_batch: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(p_i, p^z) of one step: the clipped sum (+ the canary's clipped gradient when it is in)
    + noise, in this order of additions."""
    if not ex.n:
        return noise, _add_canary(ex, model, w, clip_t, noise, z_in)
    weight, budget = mask[:, : ex.n], ex.memory_budget
    p = _clipped_sum(model, w, ex.x, ex.y, clip_t, weight, ex.method, budget, full_batch, ex.prep)
    pz = _add_canary(ex, model, w, clip_t, p, z_in)
    p += noise
    return p, pz


def train_runs(
    model: ModelSpec,
    train: Dataset,
    *,
    settings: TrainSettings,
    seeds: ArrayLike,
    canary: Canary | None = None,
    include_canary: ArrayLike | None = None,
    execution: Execution | None = None,
) -> TrainResult:
    """Train R = len(seeds) independent DP-SGD runs of eq. 1 together.

    include_canary (R,) bool: run r trains on X u {z} (needs ``canary``). Returns w_0, w_N
    and, with a canary, the per-step statistics <p_i^z, p_i> (float64).
    """
    run = execution if execution is not None else Execution()
    dtype, memory_budget = run.dtype, run.memory_budget
    seeds = np.asarray(seeds, dtype=np.uint64).reshape(-1)
    R, steps = len(seeds), int(settings.steps)
    lr, clip, sample_rate = settings.lr, settings.clip, settings.sample_rate
    include = np.asarray(
        np.zeros(R, dtype=bool) if include_canary is None else include_canary, dtype=bool
    ).reshape(-1)
    if len(include) != R:
        raise ValueError("include_canary must have one entry per run")
    method = _check_runs(model, train, canary, run.method, include)
    device = resolve_device(run.device)
    d = model.num_params
    if R == 0:  # no runs: nothing to train (the shapes are those of R runs)
        empty = torch.empty(0, d, dtype=dtype, device=device)
        zeros = torch.zeros(0, steps, dtype=torch.float64, device=device)
        return TrainResult(w0=empty, wN=empty.clone(), canary_dots=zeros)
    clip_t = _as_runs(clip, R, dtype, device)
    rate = np.broadcast_to(np.asarray(sample_rate, dtype=float), (R,))
    subsampled = rate < 1
    runs = _RunTensors(
        lr=_as_runs(lr, R, dtype, device),
        clip=clip_t,
        noise=_as_runs(settings.noise_multiplier, R, dtype, device) * clip_t,
        rate=torch.as_tensor(np.array(rate), dtype=dtype, device=device),
        keep_all=torch.as_tensor(~subsampled, device=device),
        include=torch.as_tensor(include, dtype=dtype, device=device),
        subsampled=bool(subsampled.any()),
    )
    ex = _examples(model, train, canary, method, memory_budget, dtype, device)
    return _train(model, ex, runs, seeds, steps)


@dataclass(frozen=True, eq=False)
class _RunTensors:
    """The R runs of `train_runs` on the device (noise: sigma C; keep_all: rate 1)."""

    lr: torch.Tensor
    clip: torch.Tensor
    noise: torch.Tensor
    rate: torch.Tensor
    keep_all: torch.Tensor
    include: torch.Tensor
    subsampled: bool


def _train(
    model: ModelSpec, ex: _Examples, runs: _RunTensors, seeds: np.ndarray, steps: int
) -> TrainResult:
    """The DP-SGD loop of eq. 1 over the runs, steps grouped as many as fit in the budget."""
    R, d, n = len(seeds), model.num_params, ex.n
    dtype, device, sub = runs.lr.dtype, runs.lr.device, runs.subsampled
    keys = kernels.seed_keys(seeds)
    group = max(1, min(steps, ex.memory_budget // max(1, R * (d + (n + 1) * sub))))
    dots = torch.zeros(R, steps, dtype=torch.float64, device=device)
    ones = torch.ones(R, n + 1, dtype=dtype, device=device)
    clip64 = runs.clip.double()
    with torch.no_grad():
        w = model.init_from_uniform(
            kernels.draw(keys, INIT, 0, 1, d, False, device)[:, 0].to(dtype)
        )
        w0 = w.clone()
        for first in range(0, steps, group):
            count = min(group, steps - first)
            noise = kernels.draw(keys, NOISE, first, count, d, True, device).to(dtype)
            noise *= runs.noise[:, None, None]  # R_i = sigma C N(0, I), per run
            masks = None
            if sub:
                u = kernels.draw(keys, MASKS, first, count, n + 1, False, device)
                u[runs.keep_all] = 0.0  # tau = 1 runs keep every example (u < 1 always)
                masks = (u < runs.rate[:, None, None]).to(dtype)  # (R, count, n + 1)
            for j in range(count):
                i = first + j
                mask = ones if masks is None else masks[:, j]
                z_in = runs.include if masks is None else runs.include * mask[:, n]
                p, pz = _step(ex, model, w, runs.clip, mask, z_in, noise[:, j], not sub)
                if ex.cz is not None:  # <p^z, p_i> = C sum_c p_i[c] over the coordinates
                    dots[:, i] = (clip64[:, None] * p[:, ex.cz].double()).sum(1)
                elif pz is not None:
                    dots[:, i] = (pz.double() * p.double()).sum(1)
                w -= runs.lr[:, None] * p
    return TrainResult(w0=w0, wN=w, canary_dots=dots)
