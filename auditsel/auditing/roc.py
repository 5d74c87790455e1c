"""ROC summaries of an attack's scores: the empirical curve and its convex hull.

The attack guesses "member" when score > t. Over all thresholds t its (FP, TP) counts trace the
empirical ROC staircase from (0, 0) (t above every score) to (n0, n1) (t below every score); at
a score held by games of both classes the step is a diagonal segment. Two curves, two
conventions, each with its own names:

* the empirical curve, linearly interpolated between neighbouring thresholds (the randomised
  test between two neighbouring thresholds): `auroc` is its area, the Mann-Whitney statistic
  P(S1 > S0) + P(S1 = S0) / 2 (sklearn's `roc_auc_score`), reported with DeLong's interval;
  `tpr_at_fpr(f)` is its height at FPR f (the largest TPR where the curve is vertical at f);

* its upper convex hull, the best randomised tests between any two thresholds, as jax_privacy
  computes it (`CanaryScoreAuditor.attack_auroc` and `tpr_at_given_fpr`, from
  `_get_tn_fn_counts`' Pareto frontier): `auroc_hull` and `tpr_at_fpr_hull`. The hull is never
  below the curve, so its area and heights are at least the empirical ones (equal when the
  curve is concave), and it is at least the diagonal (AUROC >= 1/2).

At FPR 1 both give TPR 1 (guess "member" always). Counts come from each class's sorted scores.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from auditsel.auditing.scores import check_scores
from auditsel.auditing.sorted_scores import sort_parts
from auditsel.errors import ConfigError


def _coins(scores, member) -> tuple[np.ndarray, np.ndarray]:
    s, m = check_scores(scores, member)
    s0, s1 = sort_parts(s, (m == 0, m == 1))
    return s0, s1


def placements(s0: np.ndarray, s1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(below, ties): for each class-1 score, #{s0 < s1[i]} and #{s0 == s1[i]}."""
    n0 = len(s0)
    below = np.searchsorted(s0, s1, side="left")
    ties = np.zeros(len(s1), dtype=np.int64)
    maybe = np.flatnonzero((below < n0) & (s0[np.minimum(below, n0 - 1)] == s1))
    if len(maybe):
        ties[maybe] = np.searchsorted(s0, s1[maybe], side="right") - below[maybe]
    return below, ties


def _at_or_below(below: np.ndarray, n0: int) -> np.ndarray:
    """#{s1 <= s0[j]} for each j: s1[i] <= s0[j] iff #{s0 < s1[i]} <= j."""
    return np.cumsum(np.bincount(below, minlength=n0 + 1))[:n0]


def _corners(
    s0: np.ndarray, s1: np.ndarray, place: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(FP, TP) counts, FP ascending, of (0, 0), the staircase's corners at each distinct
    class-0 score v (t = v: FP = #{s0 > v}, TP = #{s1 > v}) and (n0, n1)."""
    n0, n1 = len(s0), len(s1)
    below, _ = place if place is not None else placements(s0, s1)
    last = np.flatnonzero(np.append(s0[1:] != s0[:-1], True))  # last index of each value
    fp = n0 - (last + 1)
    tp = n1 - _at_or_below(below, n0)[last]
    fp = np.concatenate([[0], fp[::-1], [n0]]).astype(np.int64)
    tp = np.concatenate([[0], tp[::-1], [n1]]).astype(np.int64)
    return fp, tp


def _frontier(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the upper convex hull of points sorted by x: points on or below the chord of
    their neighbours are removed until none is (jax_privacy's `_pareto_frontier`, exact in
    int64 for counts below 2^31)."""
    idx = np.arange(len(x))
    while len(idx) > 2:
        dx, dy = np.diff(x[idx]), np.diff(y[idx])
        cross = dy[:-1] * dx[1:] - dy[1:] * dx[:-1]
        drop = cross <= 0
        if not drop.any():
            break
        idx = idx[np.concatenate([[True], ~drop, [True]])]
    return idx


def hull_sorted(
    s0: np.ndarray, s1: np.ndarray, place: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(FP, TP) counts of the hull's vertices from sorted class scores s0 (b = 0), s1 (b = 1)
    (`place`: their `placements`, if already computed)."""
    fp, tp = _corners(s0, s1, place)
    keep = _frontier(fp, tp)
    return fp[keep], tp[keep]


def tp_counts_sorted(
    s0: np.ndarray,
    s1: np.ndarray,
    fpr: ArrayLike,
    *,
    hull: bool = False,
    vertices: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
    """(TP, TP of the point before, TP of the point after) on either curve at each FPR, as
    counts (the first a float: interpolated), from sorted class scores s0 (b = 0), s1 (b = 1);
    `vertices`: the hull's, if already computed (`hull_sorted`)."""
    n0, n1 = len(s0), len(s1)
    target = np.asarray(fpr, dtype=float) * n0
    if hull:
        hx, hy = vertices if vertices is not None else hull_sorted(s0, s1)
        j = np.searchsorted(hx, target, side="right")
        end = j >= len(hx)
        i, jj = np.maximum(j - 1, 0), np.minimum(j, len(hx) - 1)
        left, right = hy[i], np.where(end, n1, hy[jj])
        q = np.where(end, 0.0, (target - hx[i]) / np.where(hx[jj] > hx[i], hx[jj] - hx[i], 1))
    else:
        # at FP = x < n0: between the top of the vertical run at the class-0 score v, the
        # (floor(x) + 1)-th largest, A = (#{s0 > v}, #{s1 > v}), and the point after crossing
        # v, B = (#{s0 >= v}, #{s1 >= v}); at x = n0, TP = n1
        end = target >= n0
        k = np.clip(np.floor(target).astype(np.int64), 0, n0 - 1)
        v = s0[n0 - 1 - k]
        ax = n0 - np.searchsorted(s0, v, side="right")
        bx = n0 - np.searchsorted(s0, v, side="left")
        left = np.where(end, n1, n1 - np.searchsorted(s1, v, side="right"))
        right = np.where(end, n1, n1 - np.searchsorted(s1, v, side="left"))
        q = np.where(end, 0.0, (target - ax) / np.maximum(bx - ax, 1))
    return left + q * (right - left), left, right


def check_fpr(fpr: ArrayLike) -> np.ndarray:
    """FPRs as a 1-D float array, each in [0, 1]."""
    try:
        arr = np.atleast_1d(np.asarray(fpr, dtype=float))
    except (TypeError, ValueError):
        arr = np.array([np.nan])
    if arr.ndim != 1 or not len(arr) or not np.all((arr >= 0) & (arr <= 1)):
        raise ConfigError("fpr", f"must be numbers in [0, 1], got {fpr!r}")
    return arr


def tpr_at_fpr(
    scores: ArrayLike, member: ArrayLike, fpr: ArrayLike, *, hull: bool = False
) -> np.ndarray:
    """TPR of the attack "member when score > t" at each FPR in `fpr`, on the empirical ROC
    curve (randomised between neighbouring thresholds) or, with `hull`, on its convex hull
    (randomised between any two thresholds: jax_privacy's `tpr_at_given_fpr`)."""
    f = check_fpr(fpr)
    s0, s1 = _coins(scores, member)
    return tp_counts_sorted(s0, s1, f, hull=hull)[0] / len(s1)


def roc_hull(scores: ArrayLike, member: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(FP counts, TP counts) of the vertices of the ROC curve's upper convex hull, FP
    ascending, from (0, 0) to (n0, n1): jax_privacy's frontier (as FP = n0 - TN, TP = n1 - FN)."""
    return hull_sorted(*_coins(scores, member))


def auroc(scores: ArrayLike, member: ArrayLike, *, hull: bool = False) -> float:
    """Area under the empirical ROC curve (the Mann-Whitney statistic, ties counted 1/2) or,
    with `hull`, under its convex hull (jax_privacy's `attack_auroc`)."""
    s0, s1 = _coins(scores, member)
    return auroc_hull_sorted(s0, s1) if hull else auroc_with_se(s0, s1)[0]


def auroc_hull_sorted(
    s0: np.ndarray, s1: np.ndarray, *, vertices: tuple[np.ndarray, np.ndarray] | None = None
) -> float:
    """Area under the convex hull of the ROC curve of sorted class scores s0, s1 (`vertices`:
    the hull's, if already computed)."""
    x, y = vertices if vertices is not None else hull_sorted(s0, s1)
    area = np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]).astype(float)) / 2
    return float(area / (len(s0) * len(s1)))


def auroc_with_se(
    s0: np.ndarray, s1: np.ndarray, place: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[float, float]:
    """(AUROC, DeLong's standard error) of sorted class scores s0 (b = 0) and s1 (b = 1)
    (`place`: their `placements`, if already computed)."""
    n0, n1 = len(s0), len(s1)
    below, ties = place if place is not None else placements(s0, s1)
    v10 = (below + 0.5 * ties) / n0  # each class-1 score's placement
    auc = float(np.mean(v10))
    # s1[i] <= s0[j] iff below[i] <= j, and s1[i] < s0[j] iff below[i] + ties[i] <= j
    le = _at_or_below(below, n0)
    lt = _at_or_below(below + ties, n0) if ties.any() else le
    v01 = (n1 - 0.5 * (le + lt)) / n1  # each class-0 score's placement: #{s1 > s0[j]} + ties/2
    var10 = float(np.sum((v10 - auc) ** 2)) / max(n1 - 1, 1)
    var01 = float(np.sum((v01 - auc) ** 2)) / max(n0 - 1, 1)
    return auc, math.sqrt(var10 / n1 + var01 / n0)
