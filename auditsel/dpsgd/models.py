"""Small classifiers for the DP-SGD game, written for many runs at once.

A model is plain data (``ModelSpec``); its parameters are one flat vector w in R^d per run, so a
batch of R independent runs is a tensor of shape (R, d). The flat layout is fixed and public:
layer by layer, the weight matrix (out, in) row-major, then the bias. Coordinate 0 (the one the
Dirac canary of [XWW24] Sec. 4.1 writes to) is the first weight of the first layer.

* ``logreg``: multinomial logistic regression, logits = W x + b on the flattened input.

* ``mlp``:    dense layers with ReLU between them (``hidden`` sizes, default one layer of 32).

* ``cnn``:    conv 3x3 (``channels`` filters, padding 1) -> ReLU -> 2x2 average pool -> dense.

``logits(w, x)`` is the single-run function (w: `(d,)`, x: `(n, *shape)`) that torch.func
transforms; ``dense_forward_t`` is the explicit batched forward of the dense models that the
trainer's ghost-norm path differentiates (``has_dense_path``). The loss is the cross-entropy of
the logits, per example.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from auditsel.errors import ConfigError

MODELS = ("logreg", "mlp", "cnn")


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of one classifier; ``init_scale`` multiplies the default uniform init."""

    kind: str
    input_shape: tuple
    num_classes: int
    hidden: tuple = (32,)
    channels: int = 8
    init_scale: float = 1.0

    def __post_init__(self):
        if self.kind not in MODELS:
            raise ConfigError(
                "game.model", f"must be one of {', '.join(MODELS)}, got {self.kind!r}"
            )
        object.__setattr__(self, "input_shape", tuple(int(s) for s in self.input_shape))
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        if self.kind == "cnn" and len(self.input_shape) != 3:
            raise ConfigError(
                "game.model",
                f"cnn needs image inputs (channels, height, width), got "
                f"examples of shape {self.input_shape}",
            )
        if self.num_classes < 2:
            raise ConfigError(
                "game.dataset", f"must have at least 2 classes, got {self.num_classes}"
            )
        if any(h < 1 for h in self.hidden) or self.channels < 1:
            raise ConfigError("game.hidden", f"must be positive sizes, got {self.hidden}")
        if not (self.init_scale >= 0 and math.isfinite(self.init_scale)):
            raise ConfigError("game.init_scale", f"must be >= 0, got {self.init_scale}")

    @property
    def num_features(self) -> int:
        return int(math.prod(self.input_shape))

    @property
    def dense_sizes(self) -> list:
        """(in, out) of each dense layer."""
        if self.kind == "cnn":
            c, h, w = self.input_shape
            sizes = [self.channels * (h // 2) * (w // 2), self.num_classes]
        elif self.kind == "logreg":
            sizes = [self.num_features, self.num_classes]
        else:
            sizes = [self.num_features, *self.hidden, self.num_classes]
        return list(zip(sizes[:-1], sizes[1:]))

    @property
    def param_shapes(self) -> list:
        """[(name, shape, fan_in)] in flat order."""
        out = []
        if self.kind == "cnn":
            c = self.input_shape[0]
            out += [
                ("conv.weight", (self.channels, c, 3, 3), c * 9),
                ("conv.bias", (self.channels,), c * 9),
            ]
        for i, (fan_in, fan_out) in enumerate(self.dense_sizes):
            out += [
                (f"dense{i}.weight", (fan_out, fan_in), fan_in),
                (f"dense{i}.bias", (fan_out,), fan_in),
            ]
        return out

    @property
    def num_params(self) -> int:
        return sum(math.prod(s) for _, s, _ in self.param_shapes)

    @property
    def has_dense_path(self) -> bool:
        return self.kind in ("logreg", "mlp")

    def unflatten(self, w: torch.Tensor) -> list:
        """Views of w `(..., d)` as the parameter tensors `(..., *shape)`, in flat order."""
        views, start = [], 0
        lead = w.shape[:-1]
        for _, shape, _ in self.param_shapes:
            size = math.prod(shape)
            views.append(w[..., start : start + size].reshape(*lead, *shape))
            start += size
        return views

    def init_from_uniform(self, u: torch.Tensor) -> torch.Tensor:
        """w_0 (..., d) from U(0, 1) draws u (..., d): U(-s/sqrt(fan_in), s/sqrt(fan_in)) per
        parameter (PyTorch's default for Linear/Conv2d with s = init_scale)."""
        return (2 * u - 1) * self._init_bounds(u.dtype, u.device)

    def _init_bounds(self, dtype, device) -> torch.Tensor:
        key = (dtype, str(device))
        cache = self.__dict__.setdefault("_bounds_cache", {})
        if key not in cache:
            cache[key] = torch.cat(
                [
                    torch.full(
                        (math.prod(shape),),
                        self.init_scale / math.sqrt(fan_in),
                        dtype=dtype,
                        device=device,
                    )
                    for _, shape, fan_in in self.param_shapes
                ]
            )
        return cache[key]

    def logits(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Logits (n, classes) of one run with flat parameters w (d,) on examples x `(n, *shape)`."""
        params = self.unflatten(w)
        if self.kind == "cnn":
            cw, cb = params[0], params[1]
            h = F.avg_pool2d(F.relu(F.conv2d(x, cw, cb, padding=1)), 2)
            h = h.reshape(h.shape[0], -1)
            params = params[2:]
        else:
            h = x.reshape(x.shape[0], -1)
        layers = len(params) // 2
        for i in range(layers):
            h = h @ params[2 * i].T + params[2 * i + 1]
            if i < layers - 1:
                h = F.relu(h)
        return h

    def loss(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of one example (x: `(*shape)`, y: `()`) under one run's parameters w (d,)."""
        return F.cross_entropy(self.logits(w, x.unsqueeze(0)), y.unsqueeze(0))

    def batched_logits(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Logits (R, n, classes) of R runs w (R, d) on shared examples x `(n, *shape)`."""
        if self.has_dense_path:
            return self.dense_forward_t(w, x.reshape(x.shape[0], -1).T)[-1][1].transpose(1, 2)
        return torch.func.vmap(self.logits, in_dims=(0, None))(w, x)

    def dense_forward_t(
        self,
        w: torch.Tensor,
        xt: torch.Tensor,
        ones_row: bool = False,
        buffer: torch.Tensor | None = None,
    ) -> list:
        """The dense layers of runs w (R, d) in the examples-last layout: inputs xt (f, n) shared
        by the runs or (R, f, n) per run; returns [(a_{l-1}, z_l)] with z_l of shape
        (R, out, n): a_0 = x, z_l = W_l a_{l-1} + b_l, a_l = relu(z_l), z_L the logits.
        ones_row: the shared xt is (f + 1, n) with a last row of ones, so the first bias is
        added inside its GEMM (a_0 is xt without that row). buffer: a tensor (R, out, n) for the
        first layer's z."""
        params = self.unflatten(w)
        a = xt
        out = []
        layers = len(params) // 2
        for i in range(layers):
            weight, bias = params[2 * i], params[2 * i + 1]
            R, o, fan_in = weight.shape
            if i == 0 and ones_row:
                wb = torch.cat([weight, bias[:, :, None]], 2).reshape(R * o, fan_in + 1)
                if buffer is not None and buffer.shape == (R, o, a.shape[-1]):
                    z = torch.mm(wb, a, out=buffer.view(R * o, a.shape[-1])).view(R, o, a.shape[-1])
                else:
                    z = (wb @ a).reshape(R, o, -1)
                a = a[:-1]
            else:
                if a.dim() == 2:
                    z = (weight.reshape(R * o, fan_in) @ a).reshape(R, o, -1)
                else:
                    z = torch.bmm(weight, a)
                z += bias[:, :, None]
            out.append((a, z))
            if i < layers - 1:
                a = F.relu(z)
        return out
