"""Data sets: the bundled scikit-learn sets and local files in the torchvision / Keras layouts."""

import gzip
import pickle

import numpy as np
import pytest

from auditsel.dpsgd.datasets import Dataset, load_dataset, load_split


def test_digits_split_is_disjoint_fixed_and_scaled():
    train, val = load_split("digits")
    again, _ = load_split("digits")
    assert train.shape == (1, 8, 8) and train.num_classes == 10
    assert len(train) + len(val) == 1797
    np.testing.assert_array_equal(train.x, again.x)
    assert 0.0 <= train.x.min() and train.x.max() <= 1.0
    rows = {r.tobytes() for r in train.x}
    assert sum(r.tobytes() in rows for r in val.x) < 5  # digits has a few duplicate images


def test_breast_cancer_is_standardised_two_class():
    train, val = load_split("breast_cancer")
    assert train.shape == (30,) and train.num_classes == 2
    x = np.concatenate([train.x, val.x])
    np.testing.assert_allclose(x.mean(0), 0, atol=1e-5)


def test_take_and_empty():
    d = load_dataset("digits", n=7)
    assert len(d) == 7 and len(Dataset.empty_like(d)) == 0
    assert Dataset.empty_like(d).shape == d.shape


def _write_idx(path, arr):
    arr = np.asarray(arr, dtype=np.uint8)
    header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    with gzip.open(path + ".gz", "wb") as f:
        f.write(header + arr.tobytes())


def test_reads_mnist_idx_files(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(5, 28, 28))
    _write_idx(str(raw / "train-images-idx3-ubyte"), imgs)
    _write_idx(str(raw / "train-labels-idx1-ubyte"), [3, 1, 4, 1, 5])
    _write_idx(str(raw / "t10k-images-idx3-ubyte"), imgs[:2])
    _write_idx(str(raw / "t10k-labels-idx1-ubyte"), [9, 2])
    train, val = load_split("fashion_mnist", data_dir=str(tmp_path))
    assert train.shape == (1, 28, 28) and len(val) == 2
    np.testing.assert_allclose(train.x[2, 0], imgs[2] / 255.0, rtol=1e-6)
    assert list(train.y) == [3, 1, 4, 1, 5]


def test_reads_cifar_batches_and_keras_npz(tmp_path):
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    rng = np.random.default_rng(1)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        with open(root / name, "wb") as f:
            pickle.dump(
                {b"data": rng.integers(0, 256, (2, 3072), dtype=np.uint8), b"labels": [1, 7]}, f
            )
    train, val = load_split("cifar10", data_dir=str(tmp_path))
    assert train.shape == (3, 32, 32) and len(train) == 10 and len(val) == 2
    np.savez(
        tmp_path / "mnist.npz",
        x_train=np.zeros((4, 28, 28), np.uint8),
        y_train=np.arange(4),
        x_test=np.zeros((1, 28, 28), np.uint8),
        y_test=[0],
    )
    assert load_dataset("mnist", data_dir=str(tmp_path)).shape == (1, 28, 28)


def test_reads_svhn_mat(tmp_path):
    from scipy.io import savemat

    for split in ("train", "test"):
        savemat(
            tmp_path / f"{split}_32x32.mat",
            {"X": np.zeros((32, 32, 3, 3), np.uint8), "y": np.array([[10], [1], [2]])},
        )
    train = load_dataset("svhn", data_dir=str(tmp_path))
    assert train.shape == (3, 32, 32) and list(train.y) == [0, 1, 2]


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist", "cifar10", "svhn"])
def test_missing_local_files_are_one_clear_value_error(tmp_path, name):
    with pytest.raises(
        ValueError, match=r"^game.data_dir: .*not found.*download .* and pass data_dir"
    ):
        load_dataset(name, data_dir=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=r"^game.data_dir: .*not found"):
        load_dataset(name, data_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"^game.data_dir: must name a local directory"):
        load_dataset(name)


def test_unknown_dataset_is_a_value_error():
    with pytest.raises(ValueError, match=r"^game.dataset: must be one of digits, .*got 'imagenet'"):
        load_dataset("imagenet")
