"""The InputCanary of `canary="both"` (`default_canaries.outlier_example`, issue 36): an outlier
built to dominate the loss a pipeline monitors, and to cost a correctly clipped one nothing.

On a small logistic regression trained with per-example clipping and noise (DP-GD), the
canary's loss rises at every step of training on the data alone (it sits on the other labels'
side of the mean row, along the direction the data move the weights, the wrong way for its
label), so that a pipeline that monitors its training loss
sees it rise from the first steps when the canary is in; its far feature is an unused one,
which nothing but the noise and the canary moves. Clipped, its gradient is C, mostly on that
far feature."""

import numpy as np

from auditsel.pipelines.default_canaries import OUTLIER, SIDE, outlier_example

N, D, CLIP, NOISE, LR, STEPS = 200, 5, 1.0, 1.0, 0.5, 8
_rng = np.random.default_rng(0)
X = np.concatenate([_rng.normal(0, 1, (N, D - 1)), np.zeros((N, 1))], axis=1)
Y = (X[:, 1] + 0.5 * _rng.normal(size=N) > 0.6).astype(float)  # label 1 the rarer, feature 1
DATA = (X, Y)


def _losses(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = X @ theta[:-1] + theta[-1]
    return np.logaddexp(0.0, z) - y * z


def _clipped(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each example's gradient (weights, then bias) clipped to norm CLIP."""
    z = X @ theta[:-1] + theta[-1]
    p = 0.5 * (1 + np.tanh(z / 2))  # the sigmoid, without overflow
    grads = (p - y)[:, None] * np.concatenate([X, np.ones((len(X), 1))], axis=1)
    norms = np.linalg.norm(grads, axis=1, keepdims=True)
    return grads * np.minimum(1.0, CLIP / np.maximum(norms, 1e-300))


def _train(X: np.ndarray, y: np.ndarray, seed: int) -> list[np.ndarray]:
    """DP-GD (full batch, clipped sum plus N(0, (NOISE CLIP)^2), divided by the batch): the
    parameters after each step."""
    rng = np.random.default_rng(seed)
    theta, path = np.zeros(X.shape[1] + 1), []
    for _ in range(STEPS):
        noisy = _clipped(theta, X, y).sum(axis=0) + rng.normal(0, NOISE * CLIP, theta.size)
        theta = theta - LR * noisy / len(X)
        path.append(theta)
    return path


def test_the_outlier_is_far_on_an_unused_feature_and_on_the_other_labels_side():
    person = outlier_example(DATA)
    x, label = np.asarray(person.x), float(np.asarray(person.y))
    assert label == 1.0 and Y.mean() < 0.5  # the least frequent label
    offset = x - X.mean(axis=0)
    far = OUTLIER * max(X.std(axis=0).max(), np.linalg.norm(X.mean(axis=0)))
    assert np.isclose(offset[D - 1], far)  # the unused feature
    # the rest: SIDE * far towards the mean row of label 0 from that of label 1
    gap = X[Y == 0].mean(axis=0) - X[Y == 1].mean(axis=0)
    assert np.allclose(offset[: D - 1], SIDE * far * gap[: D - 1] / np.linalg.norm(gap))
    assert offset[1] < -0.9 * SIDE * far  # feature 1 separates the labels: the most of it


def test_the_outliers_loss_rises_at_every_step_of_training_on_the_data():
    """Out (the data alone): the data move feature 1's weight up, so the canary's loss, on the
    low side (label 0's) with label 1, rises at every step, for every seed; in: the full training set's
    mean loss (the canary among the rows) rises from the first step, so that early stopping on
    it stops at its earliest, while the data's own mean loss falls."""
    person = outlier_example(DATA)
    x, y = np.asarray(person.x)[None], np.asarray(person.y, dtype=float).reshape(1)
    X_in, Y_in = np.concatenate([X, x]), np.concatenate([Y, y])
    for seed in range(20):
        canary_loss = [float(_losses(t, x, y)[0]) for t in _train(X, Y, seed)]
        assert np.all(np.diff(canary_loss) > 0), (seed, canary_loss)
        path = _train(X_in, Y_in, seed)
        mean_in = [float(_losses(t, X_in, Y_in).mean()) for t in path]
        assert np.all(np.diff(mean_in) > 0), (seed, mean_in)
        data_loss = [float(_losses(t, X, Y).mean()) for t in _train(X, Y, seed)]
        assert data_loss[-1] < data_loss[0] < np.log(2)


def test_clipped_its_gradient_is_c_and_mostly_on_the_unused_feature():
    """A correct pipeline clips the outlier's gradient to C whatever OUTLIER is; about
    1 / sqrt(1 + SIDE^2) of it (0.71 C; at least 99% of that here) is on the unused feature's
    weight, which only the noise and the canary move (a GradientCanary's signal there)."""
    person = outlier_example(DATA)
    x, y = np.asarray(person.x)[None], np.asarray(person.y, dtype=float).reshape(1)
    for theta in _train(X, Y, 0):
        g = _clipped(theta, x, y)[0]
        assert np.isclose(np.linalg.norm(g), CLIP)
        assert abs(g[D - 1]) >= 0.99 * CLIP / np.sqrt(1 + SIDE**2)
