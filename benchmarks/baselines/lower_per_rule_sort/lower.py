"""Epsilon lower bounds from the scores of a distinguishing game ([XWW24] eq. 4, App. A.3).

Scores in, epsilons out; the threshold rule is an explicit argument.

A test "guess member = 1 when score > t" (direction '>') or "when score <= t" (direction '<=')
has false-positive rate FP (guess 1 when b = 0) and false-negative rate FN (guess 0 when
b = 1). Any (eps, delta)-DP protocol satisfies FP + e^eps FN >= 1 - delta and
FN + e^eps FP >= 1 - delta, hence (eq. 4)

    eps_L = max{ log((1 - delta - FP)/FN), log((1 - delta - FN)/FP), 0 }.

FP and FN are replaced by Clopper-Pearson upper limits (statsmodels, method="beta") taken as
two-sided intervals at level alpha each, so the two one-sided limits hold jointly with
probability >= 1 - alpha (union bound). With alpha = 1 - confidence, eps_L is a lower bound
with that confidence *for a threshold fixed in advance*. Threshold rules:

* split (default, valid): choose (t, direction) maximising eps_L on the first `split_fraction`
  of the trials, then bound with it on the rest.
* bonferroni (valid): a grid of m thresholds fixed before seeing the scores (from the spec's
  threshold range), both directions, each at alpha / (2 m).
* best (optimistic, for comparison with the papers): the max over all thresholds on all trials
  at level alpha each; not a valid confidence statement.

All n + 1 thresholds are scanned at once in O(n log n) (one sort and cumulative counts);
the exact Clopper-Pearson limit is evaluated only where an optimistic bound (the limit is at
least the empirical rate, for confidence >= 1/2) could beat the best value found.

GDP fit ([NHSBTJCT23]; heuristic): mu_L = Phi^-1(1 - FP) - Phi^-1(FN) from the limits
at the rule's threshold, converted to eps at delta with the Gaussian profile.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import ndtri
from statsmodels.stats.proportion import proportion_confint

from .gaussian import gaussian_epsilon

__all__ = [
    "LowerBound",
    "THRESHOLD_RULES",
    "epsilon_from_rates",
    "clopper_pearson_upper",
    "audit_chunks",
    "threshold_table",
    "audit_scores",
    "gdp_mu",
]

THRESHOLD_RULES = ("split", "bonferroni", "best")
PRUNE_BLOCK = 2048


@dataclass(frozen=True)
class LowerBound:
    eps: float
    eps_gdp: float
    eps_best_threshold: float
    mu_gdp: float
    confidence: float
    threshold_rule: str
    threshold: float
    direction: str
    fp: float
    fn: float
    fp_upper: float
    fn_upper: float
    trials: int
    evaluated_trials: int
    eps_point: float = math.nan  # eq. 4 with the empirical FP, FN at the same threshold (no CI)
    method: str = "clopper_pearson"

    def to_dict(self) -> dict:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = None
        return out


def epsilon_from_rates(fp, fn, delta: float):
    """Eq. 4 of [XWW24], vectorised; rates may be 0 (then that term is +inf unless the other
    rate makes its numerator non-positive)."""
    fp = np.asarray(fp, dtype=float)
    fn = np.asarray(fn, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1 - delta - fp, 0)) - np.log(fn)
        b = np.log(np.maximum(1 - delta - fn, 0)) - np.log(fp)
    a = np.where(np.isnan(a), -np.inf, a)
    b = np.where(np.isnan(b), -np.inf, b)
    return np.maximum(np.maximum(a, b), 0.0)


def clopper_pearson_upper(count, nobs, alpha: float):
    """Upper limit of the two-sided Clopper-Pearson interval at level alpha (statsmodels)."""
    count = np.asarray(count)
    if np.size(count) == 0:
        return np.zeros(np.shape(count))
    _, upper = proportion_confint(count, nobs, alpha=alpha, method="beta")
    return np.where(count >= nobs, 1.0, np.asarray(upper, dtype=float))


def threshold_table(scores, member):
    """All distinct thresholds with counts for direction '>' (guess 1 when score > t).

    Returns (t, fp_count, fn_count, n0, n1); t[0] = -inf (everything guessed 1).
    Direction '<=' has counts n0 - fp_count and n1 - fn_count.
    """
    scores = np.asarray(scores, dtype=float)
    member = np.asarray(member).astype(bool)
    order = np.argsort(scores)  # order within ties is irrelevant: counts are taken per value
    s, b = scores[order], member[order]
    n1 = int(b.sum())
    n0 = len(b) - n1
    cum1 = np.cumsum(b)
    cum0 = np.arange(1, len(b) + 1) - cum1
    last = np.nonzero(np.append(s[1:] != s[:-1], True))[0]  # last index of each distinct value
    t = np.concatenate([[-np.inf], s[last]])
    fn = np.concatenate([[0], cum1[last]])
    fp = n0 - np.concatenate([[0], cum0[last]])
    return t, fp, fn, n0, n1


def _counts_at(scores, member, thresholds):
    """fp/fn counts (direction '>') at given thresholds."""
    t_all, fp_all, fn_all, n0, n1 = threshold_table(scores, member)
    idx = np.searchsorted(t_all, thresholds, side="right") - 1  # largest t_all <= threshold
    return fp_all[idx], fn_all[idx], n0, n1


def _both_directions(fp, fn, n0, n1):
    """Stack counts for '>' and '<=' as (fp, fn, direction_flag)."""
    fp = np.asarray(fp)
    fn = np.asarray(fn)
    return (
        np.concatenate([fp, n0 - fp]),
        np.concatenate([fn, n1 - fn]),
        np.concatenate([np.zeros(len(fp), bool), np.ones(len(fp), bool)]),
    )


def _optimistic_upper(count, nobs, alpha):
    """A value <= the CP upper limit: the empirical rate, and the exact limit at count 0."""
    zero = 1 - (alpha / 2) ** (1 / max(nobs, 1))
    return np.where(count == 0, zero, count / max(nobs, 1))


def _maximise(fp, fn, n0, n1, alpha, delta):
    """argmax over candidates of eq. 4 with CP limits; returns (index, eps, fp_u, fn_u).

    The exact limit is computed first for the PRUNE_BLOCK candidates with the largest
    optimistic bound, then only for candidates whose optimistic bound beats the best so far.
    """
    bound = epsilon_from_rates(
        _optimistic_upper(fp, n0, alpha), _optimistic_upper(fn, n1, alpha), delta
    )
    best = (-1, -np.inf, 1.0, 1.0)
    k = min(PRUNE_BLOCK, len(bound))
    candidates = np.argpartition(-bound, k - 1)[:k] if k < len(bound) else np.arange(len(bound))
    while len(candidates):
        candidates = candidates[np.argsort(-bound[candidates], kind="stable")]
        for start in range(0, len(candidates), PRUNE_BLOCK):
            block = candidates[start : start + PRUNE_BLOCK]
            if bound[block[0]] <= best[1]:
                break
            fp_u = clopper_pearson_upper(fp[block], n0, alpha)
            fn_u = clopper_pearson_upper(fn[block], n1, alpha)
            eps = epsilon_from_rates(fp_u, fn_u, delta)
            j = int(np.argmax(eps))
            if eps[j] > best[1]:
                best = (int(block[j]), float(eps[j]), float(fp_u[j]), float(fn_u[j]))
        done = np.zeros(len(bound), bool)
        done[candidates] = True
        # anything not yet evaluated whose optimistic bound still beats the best
        candidates = np.nonzero((bound > best[1]) & ~done)[0]
        bound = np.where(done, -np.inf, bound) if len(candidates) else bound
    return best


def gdp_mu(fp_upper: float, fn_upper: float) -> float:
    """mu_L = Phi^-1(1 - FP) - Phi^-1(FN), clipped at 0 ([NHSBTJCT23])."""
    return max(float(ndtri(1 - fp_upper) - ndtri(fn_upper)), 0.0)


def _gdp_epsilon(mu: float, delta: float) -> float:
    if mu <= 0:
        return 0.0
    if not math.isfinite(mu):
        return math.inf
    return gaussian_epsilon(delta, mu) if delta > 0 else math.inf


def _pick(thresholds, fp, fn, n0, n1, alpha, delta):
    """The best (threshold, direction) among candidates with '>' counts fp, fn, at level alpha."""
    fp2, fn2, flip = _both_directions(fp, fn, n0, n1)
    i, eps, fp_u, fn_u = _maximise(fp2, fn2, n0, n1, alpha, delta)
    return dict(
        threshold=float(np.tile(thresholds, 2)[i]),
        flip=bool(flip[i]),
        eps=eps,
        fp_u=fp_u,
        fn_u=fn_u,
        fp=fp2[i] / max(n0, 1),
        fn=fn2[i] / max(n1, 1),
    )


def _best_over_all(scores, member, alpha, delta):
    return _pick(*threshold_table(scores, member), alpha, delta)


def _evaluate(scores, member, threshold, flip, alpha, delta):
    fp, fn, n0, n1 = _counts_at(scores, member, np.array([threshold]))
    fp, fn = (n0 - fp, n1 - fn) if flip else (fp, fn)
    fp_u = float(clopper_pearson_upper(fp, n0, alpha)[0])
    fn_u = float(clopper_pearson_upper(fn, n1, alpha)[0])
    return dict(
        threshold=threshold,
        flip=flip,
        eps=float(epsilon_from_rates(fp_u, fn_u, delta)),
        fp_u=fp_u,
        fn_u=fn_u,
        fp=float(fp[0]) / max(n0, 1),
        fn=float(fn[0]) / max(n1, 1),
    )


def audit_scores(
    scores,
    member,
    delta: float,
    confidence: float = 0.95,
    rule: str = "split",
    split_fraction: float = 0.5,
    grid_size: int = 100,
    threshold_grid=None,
) -> LowerBound:
    """eps lower bound from game scores (higher = guess member) under a threshold rule.

    `member` holds the true coins b. For `bonferroni`, `threshold_grid` must be fixed before
    seeing the scores (e.g. from the spec); without it `grid_size` thresholds span the range of
    the pooled scores, which makes the grid (mildly) data-dependent.
    """
    if rule not in THRESHOLD_RULES:
        raise ValueError(
            f"game.threshold: must be one of {', '.join(THRESHOLD_RULES)}, got {rule!r}"
        )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: must be in (0, 1), got {confidence}")
    if not 0 <= delta < 1:
        raise ValueError(f"delta: must be in [0, 1), got {delta}")
    scores = np.asarray(scores, dtype=float)
    member = np.asarray(member).astype(np.int8)
    if np.isnan(scores).any():
        raise ValueError("score: contains NaN; every score must be a number (+-inf allowed)")
    n1 = int(member.sum())
    if n1 == 0 or n1 == len(member):
        raise ValueError("member: needs trials with both member = 0 and member = 1")
    alpha = 1 - confidence
    best = _best_over_all(scores, member, alpha, delta)
    if rule == "best":
        chosen, evaluated = best, len(scores)
    elif rule == "split":
        if not 0 < split_fraction < 1:
            raise ValueError(f"game.split_fraction: must be in (0, 1), got {split_fraction}")
        cut = int(len(scores) * split_fraction)
        sel_s, sel_m = scores[:cut], member[:cut]
        ev_s, ev_m = scores[cut:], member[cut:]
        if min(sel_m.sum(), len(sel_m) - sel_m.sum(), ev_m.sum(), len(ev_m) - ev_m.sum()) == 0:
            raise ValueError("game.trials: too few trials to split (each part needs both coins)")
        pick = _best_over_all(sel_s, sel_m, alpha, delta)
        chosen = _evaluate(ev_s, ev_m, pick["threshold"], pick["flip"], alpha, delta)
        evaluated = len(ev_s)
    else:
        if threshold_grid is None:
            if grid_size < 1:
                raise ValueError(f"game.thresholds: must be an integer >= 1, got {grid_size}")
            finite = scores[np.isfinite(scores)]
            lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 0.0)
            threshold_grid = np.linspace(lo, hi, grid_size)
        grid = np.unique(np.asarray(threshold_grid, dtype=float))
        chosen = _pick(grid, *_counts_at(scores, member, grid), alpha / (2 * len(grid)), delta)
        evaluated = len(scores)
    mu = gdp_mu(chosen["fp_u"], chosen["fn_u"])
    return LowerBound(
        eps=chosen["eps"],
        eps_gdp=_gdp_epsilon(mu, delta),
        eps_best_threshold=best["eps"],
        mu_gdp=mu,
        confidence=confidence,
        threshold_rule=rule,
        threshold=chosen["threshold"],
        direction="<=" if chosen["flip"] else ">",
        fp=float(chosen["fp"]),
        fn=float(chosen["fn"]),
        fp_upper=chosen["fp_u"],
        fn_upper=chosen["fn_u"],
        trials=len(scores),
        evaluated_trials=evaluated,
        eps_point=float(epsilon_from_rates(chosen["fp"], chosen["fn"], delta)),
    )


# --- streamed audits: bounded memory for any number of trials --------------------------------

STREAM_CANDIDATES = 4096


def _chunk_counts(scores, member, thresholds):
    """fp (b = 0, score > t) and fn (b = 1, score <= t) counts of one chunk at each threshold."""
    s0 = np.sort(scores[member == 0])
    s1 = np.sort(scores[member == 1])
    fp = len(s0) - np.searchsorted(s0, thresholds, side="right")
    fn = np.searchsorted(s1, thresholds, side="right")
    return fp, fn, len(s0), len(s1)


def _stream_counts(source, indices, thresholds):
    fp = np.zeros(len(thresholds), dtype=np.int64)
    fn = np.zeros(len(thresholds), dtype=np.int64)
    n0 = n1 = 0
    for i in indices:
        scores, member = source.load(i)
        a, b, c0, c1 = _chunk_counts(scores, member, thresholds)
        fp += a
        fn += b
        n0 += c0
        n1 += c1
    return fp, fn, n0, n1


def audit_chunks(
    source,
    delta: float,
    confidence: float = 0.95,
    rule: str = "split",
    split_fraction: float = 0.5,
    threshold_grid=None,
    candidates: int = STREAM_CANDIDATES,
) -> LowerBound:
    """audit_scores for trials streamed chunk by chunk from `source` (auditsel.game.ChunkSource).

    Memory is bounded by one chunk plus the threshold counts. Candidate thresholds for `split`
    (selection) and `best` are `candidates` quantiles of chunk 0's scores, a part of the
    selection data, so `split` stays valid: the threshold is picked on the first
    `split_fraction` of the chunks and the bound computed on the others. `bonferroni` counts
    exactly at its fixed grid. `best` is the max over the candidate grid (optimistic).
    """
    if rule not in THRESHOLD_RULES:
        raise ValueError(
            f"game.threshold: must be one of {', '.join(THRESHOLD_RULES)}, got {rule!r}"
        )
    alpha = 1 - confidence
    n_chunks = len(source)
    first, _ = source.load(0)
    finite = np.unique(first[np.isfinite(first)])
    quantiles = np.quantile(finite, np.linspace(0, 1, candidates)) if len(finite) else np.zeros(1)
    grid = np.unique(np.concatenate([[-np.inf], quantiles]))
    fp, fn, n0, n1 = _stream_counts(source, range(n_chunks), grid)
    if n0 == 0 or n1 == 0:
        raise ValueError("member: needs trials with both member = 0 and member = 1")
    best = _pick(grid, fp, fn, n0, n1, alpha, delta)
    evaluated = n0 + n1
    if rule == "best":
        chosen = best
    elif rule == "split":
        cut = int(round(n_chunks * split_fraction))
        if not 0 < cut < n_chunks:
            raise ValueError(
                f"game.split_fraction: with {n_chunks} chunks the split leaves a part "
                f"empty; use more trials or a smaller game.chunk_size"
            )
        fa, fna, a0, a1 = _stream_counts(source, range(cut), grid)
        pick = _pick(grid, fa, fna, a0, a1, alpha, delta)
        fb, fnb, b0, b1 = _stream_counts(
            source, range(cut, n_chunks), np.array([pick["threshold"]])
        )
        fb, fnb = (b0 - fb, b1 - fnb) if pick["flip"] else (fb, fnb)
        fp_u = float(clopper_pearson_upper(fb, b0, alpha)[0])
        fn_u = float(clopper_pearson_upper(fnb, b1, alpha)[0])
        chosen = dict(
            threshold=pick["threshold"],
            flip=pick["flip"],
            eps=float(epsilon_from_rates(fp_u, fn_u, delta)),
            fp_u=fp_u,
            fn_u=fn_u,
            fp=float(fb[0]) / max(b0, 1),
            fn=float(fnb[0]) / max(b1, 1),
        )
        evaluated = b0 + b1
    else:
        fixed = np.unique(
            np.asarray(
                threshold_grid
                if threshold_grid is not None
                else quantiles[:: max(1, candidates // 100)],
                dtype=float,
            )
        )
        gf, gn, g0, g1 = _stream_counts(source, range(n_chunks), fixed)
        chosen = _pick(fixed, gf, gn, g0, g1, alpha / (2 * len(fixed)), delta)
    mu = gdp_mu(chosen["fp_u"], chosen["fn_u"])
    return LowerBound(
        eps=chosen["eps"],
        eps_gdp=_gdp_epsilon(mu, delta),
        eps_best_threshold=best["eps"],
        mu_gdp=mu,
        confidence=confidence,
        threshold_rule=rule,
        threshold=chosen["threshold"],
        direction="<=" if chosen["flip"] else ">",
        fp=float(chosen["fp"]),
        fn=float(chosen["fn"]),
        fp_upper=chosen["fp_u"],
        fn_upper=chosen["fn_u"],
        trials=source.trials,
        evaluated_trials=int(evaluated),
        eps_point=float(epsilon_from_rates(chosen["fp"], chosen["fn"], delta)),
    )
