"""Data sets for the DP-SGD game: images/features X, integer labels y, a fixed train/validation split.

* ``digits`` and ``breast_cancer`` come bundled with scikit-learn (offline). Digits are 8x8
  grey images with values 0..16, scaled to [0, 1] and shaped (n, 1, 8, 8); breast-cancer
  features are standardised (mean 0, std 1 over the whole set, a fixed public transform).

* ``mnist``, ``fashion_mnist``, ``cifar10`` and ``svhn`` are read from a directory the user names
  (``data_dir``); nothing is downloaded. Accepted layouts, tried in this order::

      <data_dir>/<name>.npz                         keys x_train, y_train, x_test, y_test
                                                    (the Keras ``mnist.npz`` layout)
      mnist:          <data_dir>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
      fashion_mnist:  <data_dir>/FashionMNIST/raw/  (same idx files as MNIST)
      cifar10:        <data_dir>/cifar-10-batches-py/{data_batch_1..5,test_batch}
                      (pickles, read by a restricted unpickler: numbers, strings, lists,
                      dicts and numpy arrays only, so a planted pickle cannot run code)
      svhn:           <data_dir>/{train,test}_32x32.mat
                      (the torchvision layouts, so a torchvision download directory works)

  Images are scaled to [0, 1] and shaped (n, channels, height, width).

The split is data-independent: a permutation drawn from a fixed seed (``split_seed``) for the
bundled sets, and the official train/test split for the downloaded ones (``validation`` = test).
"""

from __future__ import annotations

import gzip
import os
import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditsel.errors import ConfigError

BUNDLED = ("digits", "breast_cancer")
LOCAL = ("mnist", "fashion_mnist", "cifar10", "svhn")
DATASETS = BUNDLED + LOCAL

_DOWNLOAD_HINT = {
    "mnist": "MNIST (e.g. torchvision.datasets.MNIST(data_dir, download=True), or keras mnist.npz)",
    "fashion_mnist": "FashionMNIST (e.g. torchvision.datasets.FashionMNIST(data_dir, download=True))",
    "cifar10": "CIFAR10 (e.g. torchvision.datasets.CIFAR10(data_dir, download=True))",
    "svhn": "SVHN train_32x32.mat / test_32x32.mat (e.g. torchvision.datasets.SVHN(data_dir, split=..., download=True))",
}


@dataclass(frozen=True)
class Dataset:
    """Examples ``x`` (float32, `(n, *shape)`) with labels ``y`` (int64, (n,)) in 0..num_classes-1."""

    name: str
    x: np.ndarray
    y: np.ndarray
    num_classes: int

    def __post_init__(self):
        if len(self.x) != len(self.y):
            raise ValueError(
                f"Dataset {self.name}: {len(self.x)} examples but {len(self.y)} labels"
            )

    def __len__(self) -> int:
        return len(self.x)

    @property
    def shape(self) -> tuple:
        """Shape of one example."""
        return tuple(self.x.shape[1:])

    def take(self, n: int | None) -> Dataset:
        """The first n examples (all when n is None)."""
        if n is None or n >= len(self):
            return self
        return Dataset(self.name, self.x[:n], self.y[:n], self.num_classes)

    @classmethod
    def empty_like(cls, other: Dataset) -> Dataset:
        """The empty training set X = {} of the ETCV threat model, with other's example shape."""
        return cls(other.name + "[empty]", other.x[:0], other.y[:0], other.num_classes)


def _bundled(name: str, split_seed: int):
    try:
        from sklearn import datasets as skd  # deferred: the dpsgd extra
    except ImportError as exc:  # pragma: no cover - dependency hint
        raise ConfigError(
            "game.dataset", f"{name} needs scikit-learn (pip install scikit-learn)"
        ) from exc
    if name == "digits":
        raw = skd.load_digits()
        x = (raw.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
        y, classes = raw.target.astype(np.int64), 10
    else:
        raw = skd.load_breast_cancer()
        x = raw.data.astype(np.float64)
        x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
        y, classes = raw.target.astype(np.int64), 2
    perm = np.random.default_rng(split_seed).permutation(len(x))
    n_val = len(x) // 4
    val, train = perm[:n_val], perm[n_val:]
    return (Dataset(name, x[train], y[train], classes), Dataset(name, x[val], y[val], classes))


def _read_idx(path: str) -> np.ndarray:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _find(path: str) -> str | None:
    return next((c for c in (path, path + ".gz") if os.path.exists(c)), None)


def _latin1(text, encoding="latin1"):
    """`_codecs.encode` as protocol-2 pickles use it for bytes, latin-1 only."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("only latin-1 byte strings are allowed")
    return text.encode("latin1")


#: what a CIFAR-10 batch pickle may name: numpy's array rebuilder under its numpy 1 and 2 module
#: names (resolved by pickle itself, as named in the file), ndarray, dtype, and latin-1 bytes
_CIFAR_GLOBALS = frozenset(
    {
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }
)


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that builds numbers, strings, lists, dicts and numpy arrays, nothing else:
    any other callable a pickle names is refused before it is called."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("_codecs", "encode"):
            return _latin1
        if (module, name) in _CIFAR_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a data file")


MAX_CIFAR_BATCH = 1 << 27  # a CIFAR-10 batch is 31 MB; refuse files over 128 MiB unread


def _cifar_batch(path: str):
    """(images (n, 3, 32, 32) uint8, labels (n,)) of one CIFAR-10 python batch, read with the
    restricted unpickler; anything else in the file is a ConfigError naming game.data_dir."""
    try:
        if os.path.getsize(path) > MAX_CIFAR_BATCH:
            raise ValueError(f"larger than {MAX_CIFAR_BATCH >> 20} MiB")
        with open(path, "rb") as f:
            d = _ArraysOnly(f, encoding="bytes").load()
        data, labels = np.asarray(d[b"data"]), np.asarray(d[b"labels"])
        if data.dtype.kind not in "ui" or labels.dtype.kind not in "ui" or data.size % 3072:
            raise ValueError("data and labels must be integer arrays of 3x32x32 images")
        return data.reshape(-1, 3, 32, 32), labels
    except Exception as err:  # any failure to read the batch: a bad data folder, exit 2
        raise ConfigError(
            "game.data_dir",
            f"{path} is not a CIFAR-10 python batch ({type(err).__name__}: "
            f"{str(err)[:120]}); download CIFAR-10 again or save it as cifar10.npz",
        ) from None


def _local_arrays(name: str, data_dir: str):
    """(x_train, y_train, x_test, y_test) as raw arrays, or None when no known layout is found."""
    npz = os.path.join(data_dir, f"{name}.npz")
    if os.path.exists(npz):
        with np.load(npz) as f:
            return f["x_train"], f["y_train"], f["x_test"], f["y_test"]
    if name in ("mnist", "fashion_mnist"):
        raw = os.path.join(data_dir, "MNIST" if name == "mnist" else "FashionMNIST", "raw")
        files = [
            _find(os.path.join(raw, f"{p}-{k}-ubyte"))
            for p in ("train", "t10k")
            for k in ("images-idx3", "labels-idx1")
        ]
        found = [f for f in files if f is not None]
        if len(found) == len(files):
            return tuple(_read_idx(f) for f in found)
    if name == "cifar10":
        root = os.path.join(data_dir, "cifar-10-batches-py")
        names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
        if all(os.path.exists(os.path.join(root, n)) for n in names):
            parts = [_cifar_batch(os.path.join(root, n)) for n in names]
            xs = np.concatenate([p[0] for p in parts[:-1]])
            ys = np.concatenate([p[1] for p in parts[:-1]])
            return xs, ys, parts[-1][0], parts[-1][1]
    if name == "svhn":
        mats = [os.path.join(data_dir, f"{s}_32x32.mat") for s in ("train", "test")]
        if all(os.path.exists(f) for f in mats):
            from scipy.io import loadmat  # deferred: SVHN only

            out = []
            for f in mats:
                m = loadmat(f)
                x = np.transpose(m["X"], (3, 2, 0, 1))  # (32, 32, 3, n) -> (n, 3, 32, 32)
                y = m["y"].reshape(-1).astype(np.int64) % 10  # label 10 means digit 0
                out += [x, y]
            return tuple(out)
    return None


def _local(name: str, data_dir: str | None):
    arrays = None
    if data_dir is None:
        why = f"must name a local directory holding {name}, got None"
    elif not os.path.isdir(data_dir):
        why = f"{data_dir} not found"
    else:
        arrays = _local_arrays(name, data_dir)
        why = f"{name} files not found in {data_dir}"
    if arrays is None:
        hint = _DOWNLOAD_HINT[name]
        raise ConfigError("game.data_dir", f"{why}; download {hint} and pass data_dir")
    xtr, ytr, xte, yte = arrays

    def prep(x):
        x = np.asarray(x, dtype=np.float32)
        if x.max() > 1.0:
            x = x / 255.0
        if x.ndim == 3:  # (n, h, w) grey
            x = x[:, None]
        elif x.ndim == 4 and x.shape[-1] in (1, 3) and x.shape[1] not in (1, 3):
            x = np.transpose(x, (0, 3, 1, 2))  # channels-last -> channels-first
        return np.ascontiguousarray(x)

    ytr, yte = np.asarray(ytr, np.int64).reshape(-1), np.asarray(yte, np.int64).reshape(-1)
    return (Dataset(name, prep(xtr), ytr, 10), Dataset(name, prep(xte), yte, 10))


def load_split(
    name: str, data_dir: str | None = None, split_seed: int = 0
) -> tuple[Dataset, Dataset]:
    """(train, validation) Datasets of ``name``; see the module docstring for sources."""
    if name not in DATASETS:
        raise ConfigError("game.dataset", f"must be one of {', '.join(DATASETS)}, got {name!r}")
    if name in BUNDLED:
        return _bundled(name, split_seed)
    return _local(name, data_dir)


def load_dataset(
    name: str,
    split: str = "train",
    n: int | None = None,
    data_dir: str | None = None,
    split_seed: int = 0,
) -> Dataset:
    """One split (``train`` or ``validation``) of ``name``, cut to its first n examples."""
    if split not in ("train", "validation"):
        raise ConfigError("game.split", f"must be train or validation, got {split!r}")
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0):
        raise ConfigError("game.train_size", f"must be an integer >= 0, got {n!r}")
    train, val = load_split(name, data_dir, split_seed)
    return (train if split == "train" else val).take(n)
