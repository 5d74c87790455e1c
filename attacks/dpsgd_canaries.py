"""Canaries z: the one record the adversary adds to X to form X' = X u {z} ([XWW24] Sec. 4.1).

* ``dirac()``: the gradient canary Z_D of [NHSBTJCT23] / [XWW24]: its gradient is
  [C, 0, ..., 0] at every step (already of norm C, so clipping leaves it as is). The worst case:
  by Sec. 5.1 every adversary-chosen z is equivalent to it up to a rotation.

* input-space canaries, real examples from another distribution than X (the practical case):

  - ``from_dataset(source, index, like)``: example ``index`` of another data set (the paper's
    MNIST image in FASHION, SVHN image in CIFAR10, ...), resized / re-channelled to X's shape;

  - ``out_of_distribution(like, kind)``: a synthetic input no training example resembles
    (``inverted``: 1 - x of an example, ``constant``: all ones, ``noise``: uniform noise from a
    fixed seed, ``checkerboard``);

  - ``mislabelled(data, index)``: a real example with a wrong label (y + shift mod classes);
    take it from the validation split so that it is not already in X.

Every constructor returns the trainer's plain canary data (auditsel.dpsgd.trainer), so the
trainer never imports this package: the adversary hands z over, the trainer runs.
"""

from __future__ import annotations

import numpy as np

from auditsel.dpsgd.datasets import Dataset
from auditsel.dpsgd.trainer import DiracCanary, ExampleCanary
from auditsel.errors import ConfigError

__all__ = ["dirac", "from_dataset", "out_of_distribution", "mislabelled", "CANARIES", "OOD_KINDS"]

CANARIES = ("dirac", "input")
OOD_KINDS = ("inverted", "constant", "noise", "checkerboard")


def dirac(coordinate: int = 0) -> DiracCanary:
    """Z_D: clipped gradient C e_coordinate at every step (coordinate 0 in the paper)."""
    if (
        isinstance(coordinate, bool)
        or not isinstance(coordinate, (int, np.integer))
        or coordinate < 0
    ):
        raise ConfigError("game.canary_coordinate", f"must be an integer >= 0, got {coordinate!r}")
    return DiracCanary(coordinate=int(coordinate))


def _resize(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Fit one example to ``shape``: channels (mean / repeat) and area resampling of images."""
    x = np.asarray(x, dtype=np.float32)
    if x.shape == tuple(shape):
        return x
    if x.ndim == 3 and len(shape) == 3:
        # deferred: torch (the dpsgd extra, about 2 s to import) loads only when a DP-SGD game runs
        import torch
        import torch.nn.functional as F

        c, h, w = shape
        if x.shape[0] != c:
            x = x.mean(0, keepdims=True) if c == 1 else np.repeat(x.mean(0, keepdims=True), c, 0)
        t = F.interpolate(torch.as_tensor(x)[None], size=(h, w), mode="area")
        return t[0].numpy().astype(np.float32)
    if x.size == int(np.prod(shape)):
        return x.reshape(shape)
    raise ConfigError(
        "game.canary",
        f"cannot place an example of shape {x.shape} into inputs of shape {tuple(shape)}",
    )


def _check_index(data: Dataset, index: object) -> int:
    if (
        isinstance(index, bool)
        or not isinstance(index, (int, np.integer))
        or not 0 <= index < len(data)
    ):
        raise ConfigError("game.canary_index", f"must be in [0, {len(data)}), got {index!r}")
    return int(index)


def from_dataset(
    source: Dataset, index: int, like: Dataset, label: int | None = None
) -> ExampleCanary:
    """Example ``index`` of ``source`` placed into ``like``'s input space; label: its own label
    mod like.num_classes unless given."""
    i = _check_index(source, index)
    y = int(source.y[i]) % like.num_classes if label is None else int(label)
    return ExampleCanary(_resize(source.x[i], like.shape), y, label=f"{source.name}[{i}]")


def out_of_distribution(
    like: Dataset, kind: str = "inverted", index: int = 0, label: int = 0, seed: int = 0
) -> ExampleCanary:
    """A synthetic out-of-distribution input with X's shape (see module docstring)."""
    if kind not in OOD_KINDS:
        raise ConfigError(
            "game.canary_kind", f"must be one of {', '.join(OOD_KINDS)}, got {kind!r}"
        )
    if not 0 <= int(label) < like.num_classes:
        raise ConfigError("game.canary_label", f"must be in [0, {like.num_classes}), got {label!r}")
    shape = like.shape
    if kind == "inverted":
        i = _check_index(like, index)
        x = like.x[i].max() + like.x[i].min() - like.x[i]
    elif kind == "constant":
        x = np.full(shape, float(like.x.max()) if len(like) else 1.0, dtype=np.float32)
    elif kind == "noise":
        lo, hi = (float(like.x.min()), float(like.x.max())) if len(like) else (0.0, 1.0)
        x = np.random.default_rng(seed).uniform(lo, hi, size=shape)
    else:
        grid = np.indices(shape).sum(0) % 2
        x = grid * (float(like.x.max()) if len(like) else 1.0)
    return ExampleCanary(np.asarray(x, dtype=np.float32), int(label), label=f"ood-{kind}")


def mislabelled(data: Dataset, index: int = 0, shift: int = 1) -> ExampleCanary:
    """Example ``index`` of ``data`` with label (y + shift) mod classes (shift not 0 mod classes)."""
    i = _check_index(data, index)
    if shift % data.num_classes == 0:
        raise ConfigError(
            "game.canary_shift", f"must not be a multiple of {data.num_classes}, got {shift}"
        )
    y = (int(data.y[i]) + shift) % data.num_classes
    return ExampleCanary(
        np.asarray(data.x[i], dtype=np.float32), y, label=f"{data.name}[{i}]-mislabelled"
    )
