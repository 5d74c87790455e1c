"""The estimator panel: every estimator the field uses, on one game's scores, each labelled.

Input: scores (higher = "member") and the coins b of n games; one sort
(`auditsel.auditing.lower.SortedScores`) serves every entry. Labels:

* valid (frequentist, at `confidence`): Clopper-Pearson eq. 4 of [XWW24] under the threshold
  rules of `auditsel.auditing.lower` (split, multisplit, bonferroni on a grid fixed in advance or from
  a left-out pilot, bonferroni_all over every threshold);
* bayesian (credible level `confidence`): [ZB+23]'s posterior of eps from the joint posterior
  of (FP, FN): independent Jeffreys Beta(1/2, 1/2) priors, the counts of the evaluation part
  at the threshold the split rule chose on the selection part, eps = eq. 4 of each posterior
  draw; the reported value is the (1 - confidence) quantile (a credible lower bound);
* heuristic: a model fit whose number holds only if the model does.
  - `gdp_fit`: the Gaussian-DP fit ([NHSBTJCT23]; [DRS22] Corollary 2.13 for eps) maximised
    over thresholds: mu_L = max_t Phi^-1(1 - FP_u(t)) - Phi^-1(FN_u(t)), with limits that hold
    at every threshold at once (two-sided level alpha / (2 n): 4 n one-sided events of the
    order-statistic argument of `auditsel.auditing.lower`, upper and lower limits). Goodness of fit:
    under a mu-GDP trade-off, every threshold's interval [mu_lo(t), mu_hi(t)] (mu_hi from the
    lower limits) contains mu, so `gdp_fit_ok` is false, and the number is printed as rejected,
    when max_t mu_lo(t) > min_t mu_hi(t) (the model is rejected at level alpha).
  - `selection_fit` (the law of K known): the family "winner of K Gaussian runs N(0, 1) vs
    N(mu, 1)" ([XWW24] Figure 5). mu_L is the largest mu whose exact trade-off curve has some
    (FP_u, FN_u) point strictly below it (impossible for that mu), converted with the exact
    privacy curve of that winner (`auditsel.accounting.exact`). It is the selection-aware
    analogue of the GDP fit: heuristic (it holds when the released score behaves like that
    family), and on a tuning release it does not over-claim as the GDP fit does.
* optimistic: `best_threshold`, the max over all thresholds at alpha each (no confidence).
* descriptive: AUROC with a DeLong (asymptotic normal) interval; TPR at fixed FPR (the
  randomised classifier between neighbouring thresholds, as jax_privacy computes it) with a
  Clopper-Pearson interval on the TP count at the threshold below.

Maxima and minima over thresholds visit thresholds in the order of a cheap optimistic bound
(the empirical rates) and stop when no threshold left can change the answer, so they are
exact over every threshold at the cost of a few hundred Clopper-Pearson limits.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.special import ndtri
from scipy.stats import norm

from auditsel.accounting.exact import exact_epsilon
from auditsel.auditing.lower import (
    MULTISPLITS,
    SortedScores,
    _gdp_epsilon,
    _pick_table,
    apply_rule,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_from_rates,
)
from auditsel.errors import ConfigError
from auditsel.mechanisms import GaussianBase
from auditsel.numerics import check_deltas
from auditsel.selection import GaussianWinner

__all__ = ["Estimate", "estimator_panel", "LABELS", "winner_tradeoff", "selection_fit_mu"]

LABELS = ("valid", "bayesian", "heuristic", "optimistic", "descriptive")
POSTERIOR_DRAWS = 20_000
DEFAULT_FPR = (0.001, 0.01, 0.1)


@dataclass(frozen=True)
class Estimate:
    name: str
    value: float  # eps, or the AUROC / TPR for the descriptive entries
    label: str  # one of LABELS
    level: float | None  # confidence (valid, descriptive) or credible level (bayesian)
    source: str  # method and citation
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["value"] = _finite(self.value)
        out["detail"] = {
            k: _finite(v) if isinstance(v, float) else v for k, v in self.detail.items()
        }
        return out


def _finite(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def _rule_estimate(ss, name, rule, alpha, delta, source, **kw) -> Estimate:
    chosen = apply_rule(ss, rule, alpha, delta, **kw)
    detail = {
        "threshold": float(chosen["threshold"]),
        "direction": "<=" if chosen["flip"] else ">",
        "fp_upper": chosen["fp_u"],
        "fn_upper": chosen["fn_u"],
        "evaluated_trials": int(chosen["n"]),
    }
    if chosen.get("grid_source"):
        detail["grid_source"] = chosen["grid_source"]
    return Estimate(name, float(chosen["eps"]), "valid", 1 - alpha, source, detail)


def _rate_low(count, nobs, a):
    """A value <= the CP upper limit at level a: the empirical rate, the exact limit at count 0."""
    return np.where(count == 0, 1 - (a / 2) ** (1 / max(nobs, 1)), count / max(nobs, 1))


def _directions(c):
    return ((False, c.fp, c.fn), (True, c.n0 - c.fp, c.n1 - c.fn))


def _max_mu_low(f, g, n0, n1, a, block=256):
    """max over thresholds of Phi^-1(1 - FP_u) - Phi^-1(FN_u), visiting thresholds in decreasing
    order of the same with the optimistic rates (an upper bound) until none can win."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ub = ndtri(1 - _rate_low(f, n0, a)) - ndtri(_rate_low(g, n1, a))
    ub = np.nan_to_num(ub, nan=np.inf, posinf=np.inf, neginf=-np.inf)
    order = np.argsort(-ub, kind="stable")
    best, arg = -np.inf, -1
    for start in range(0, len(order), block):
        idx = order[start : start + block]
        if ub[idx[0]] <= best:
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            mu = ndtri(1 - clopper_pearson_upper(f[idx], n0, a)) - ndtri(
                clopper_pearson_upper(g[idx], n1, a)
            )
        mu = np.nan_to_num(mu, nan=-np.inf, posinf=np.inf, neginf=-np.inf)
        j = int(np.argmax(mu))
        if mu[j] > best:
            best, arg = float(mu[j]), int(idx[j])
    return best, arg


def _min_mu_high(f, g, n0, n1, a, below, block=256):
    """min over thresholds of Phi^-1(1 - FP_l) - Phi^-1(FN_l), searched only where it can fall
    below `below` (the empirical mu is a lower bound of it); returns (min found, count checked)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lb = ndtri(1 - f / max(n0, 1)) - ndtri(g / max(n1, 1))
    lb = np.nan_to_num(lb, nan=-np.inf, posinf=np.inf, neginf=-np.inf)
    cand = np.nonzero(lb < below)[0]
    cand = cand[np.argsort(lb[cand], kind="stable")]
    low = np.inf
    for start in range(0, len(cand), block):
        idx = cand[start : start + block]
        with np.errstate(divide="ignore", invalid="ignore"):
            mu = ndtri(1 - clopper_pearson_lower(f[idx], n0, a)) - ndtri(
                clopper_pearson_lower(g[idx], n1, a)
            )
        mu = np.nan_to_num(mu, nan=np.inf, posinf=np.inf, neginf=-np.inf)
        low = min(low, float(np.min(mu)))
        if low < below:
            break
    return low, len(cand)


def _gdp_fit(c, n, alpha, delta) -> Estimate:
    a = alpha / (2 * n)  # upper and lower limits at every threshold, both directions: 4 n events
    fits = [(_max_mu_low(f, g, c.n0, c.n1, a), flip, f, g) for flip, f, g in _directions(c)]
    (lo, arg), flip, f, g = max(fits, key=lambda x: x[0][0])
    mu = max(lo, 0.0)
    hi, _ = _min_mu_high(f, g, c.n0, c.n1, a, lo)
    ok = bool(hi >= lo)
    eps = _gdp_epsilon(mu, delta)
    return Estimate(
        "gdp_fit",
        eps,
        "heuristic",
        1 - alpha,
        "GDP fit maximised over thresholds, Bonferroni over all of them ([NHSBTJCT23], [DRS22])",
        {
            "mu": mu,
            "gdp_fit_ok": ok,
            "mu_interval_max_low": lo,
            "mu_interval_min_high": hi,
            "direction": "<=" if flip else ">",
            "threshold": float(c.t[arg]) if arg >= 0 else None,
            "note": "model fits"
            if ok
            else "rejected: the Gaussian trade-off model does not fit "
            "these scores (mu intervals do not overlap)",
        },
    )


def winner_tradeoff(mu: float, law, cells: int = 8_000):
    """The Neyman-Pearson trade-off (FP ascending, FN descending) of the winner of K ~ law runs
    of N(0, 1) vs N(mu, 1), on `cells` cells of the real line plus the K = 0 atom (a test on the
    cells: its curve lies on or just above the exact one)."""
    w = GaussianWinner(GaussianBase(mu), law)
    lo, hi = w.quantile_range(1e-12)
    edges = np.linspace(lo, hi, cells + 1)
    edges[0], edges[-1] = -np.inf, np.inf
    p0 = np.append(w.mass(edges[:-1], edges[1:], 0), w.atom)
    p1 = np.append(w.mass(edges[:-1], edges[1:], 1), w.atom)
    with np.errstate(divide="ignore", invalid="ignore"):
        llr = np.log(p1) - np.log(p0)
    llr = np.nan_to_num(llr, nan=0.0, posinf=np.inf, neginf=-np.inf)
    order = np.argsort(-llr, kind="stable")
    fp = np.concatenate([[0.0], np.cumsum(p0[order])])
    fn = 1 - np.concatenate([[0.0], np.cumsum(p1[order])])
    return np.clip(fp, 0, 1), np.clip(fn, 0, 1)


def selection_fit_mu(fp_u, fn_u, law, mu_max: float = 30.0, steps: int = 32) -> float:
    """Largest mu (bisection) such that some point (fp_u, fn_u) lies strictly below the winner
    family's trade-off curve at mu (impossible for that mu); 0 if none lies below at mu ~ 0."""
    fp_u, fn_u = np.asarray(fp_u, float), np.asarray(fn_u, float)

    def below(mu):
        fp, fn = winner_tradeoff(mu, law)
        return bool(np.any(fn_u < np.interp(fp_u, fp, fn) - 1e-12))

    lo, hi = 1e-6, mu_max
    if not below(lo):
        return 0.0
    if below(hi):
        return hi
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if below(mid) else (lo, mid)
    return lo


def _selection_fit(c, n, alpha, delta, law, rounds: int = 6) -> Estimate:
    """mu_L over every threshold: a coarse pass, then the thresholds whose optimistic point
    (empirical rates; never above the CP point) lies below the fitted curve are evaluated
    exactly and the fit repeated, until no unevaluated threshold could raise it."""
    a = alpha / n  # upper limits at every threshold, both directions: 2 n events
    m = len(c.t)
    fs = [f for _, f, _ in _directions(c)]
    gs = [g for _, _, g in _directions(c)]
    opt_f = np.concatenate([_rate_low(f, c.n0, a) for f in fs])
    opt_g = np.concatenate([_rate_low(g, c.n1, a) for g in gs])
    all_f, all_g = np.concatenate(fs), np.concatenate(gs)
    done = np.zeros(2 * m, bool)
    start = np.unique(np.round(np.linspace(0, 2 * m - 1, min(2 * m, 2000))).astype(int))
    pts_f, pts_g = np.empty(0), np.empty(0)
    new, mu = start, 0.0
    for _ in range(rounds):
        done[new] = True
        pts_f = np.concatenate([pts_f, clopper_pearson_upper(all_f[new], c.n0, a)])
        pts_g = np.concatenate([pts_g, clopper_pearson_upper(all_g[new], c.n1, a)])
        keep = (pts_f < 1) & (pts_g < 1)
        mu = selection_fit_mu(pts_f[keep], pts_g[keep], law) if keep.any() else 0.0
        fp, fn = winner_tradeoff(max(mu, 1e-6), law)
        could = (opt_g < np.interp(opt_f, fp, fn) - 1e-12) & ~done
        new = np.nonzero(could)[0]
        if not len(new):
            break
        new = new[:50_000]
    eps = exact_epsilon(GaussianWinner(GaussianBase(mu), law), delta) if mu > 0 else 0.0
    return Estimate(
        "selection_fit",
        float(eps),
        "heuristic",
        1 - alpha,
        "fit of the reduced tuning game (winner of K Gaussian runs, [XWW24] Figure 5) through "
        "the whole empirical trade-off, Bonferroni over all thresholds; exact curve",
        {
            "mu": float(mu),
            "rounds": law.describe() if hasattr(law, "describe") else str(law),
            "thresholds_evaluated": int(done.sum()),
        },
    )


def _bayesian(ss, alpha, delta, split_fraction, seed, draws) -> Estimate:
    cut = int(ss.n * split_fraction)
    head, tail = ss.first(cut)
    sel = ss.counts(head)
    p = _pick_table(sel, alpha, delta)
    ev = ss.counts_at(tail, [p["threshold"]])
    fp, fn = ev.at(np.array([p["threshold"]]))
    fp, fn = (ev.n0 - fp[0], ev.n1 - fn[0]) if p["flip"] else (fp[0], fn[0])
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x7A62,)))
    fp_s = rng.beta(fp + 0.5, ev.n0 - fp + 0.5, draws)
    fn_s = rng.beta(fn + 0.5, ev.n1 - fn + 0.5, draws)
    eps = epsilon_from_rates(fp_s, fn_s, delta)
    low = float(np.quantile(eps, alpha))
    return Estimate(
        "bayesian",
        low,
        "bayesian",
        1 - alpha,
        "[ZB+23] posterior of eps from the joint posterior of (FP, FN), Jeffreys priors; "
        "credible lower bound",
        {
            "posterior_median": float(np.median(eps)),
            "threshold": float(p["threshold"]),
            "direction": "<=" if p["flip"] else ">",
            "evaluated_trials": int(ev.n0 + ev.n1),
            "fp_count": int(fp),
            "fn_count": int(fn),
        },
    )


def _auroc(c, alpha) -> Estimate:
    """AUROC = P(S1 > S0) + P(S1 = S0)/2 with DeLong's variance, from the count table."""
    c0 = (c.fp[:-1] - c.fp[1:]).astype(float)  # class-0 scores at each distinct value t[1:]
    c1 = (c.fn[1:] - c.fn[:-1]).astype(float)  # class-1 scores there
    below0 = (c.n0 - c.fp[:-1]).astype(float)  # class-0 scores < t
    above1 = (c.n1 - c.fn[1:]).astype(float)  # class-1 scores > t
    v10 = (below0 + 0.5 * c0) / c.n0  # each class-1 score's placement
    v01 = (above1 + 0.5 * c1) / c.n1  # each class-0 score's placement
    auc = float(np.sum(c1 * v10) / c.n1)
    var10 = np.sum(c1 * (v10 - auc) ** 2) / max(c.n1 - 1, 1)
    var01 = np.sum(c0 * (v01 - auc) ** 2) / max(c.n0 - 1, 1)
    se = math.sqrt(var10 / c.n1 + var01 / c.n0)
    z = norm.ppf(1 - alpha / 2)
    return Estimate(
        "auroc",
        auc,
        "descriptive",
        1 - alpha,
        "area under the ROC curve, DeLong interval",
        {"low": max(auc - z * se, 0.0), "high": min(auc + z * se, 1.0), "se": se},
    )


def _tpr_at_fpr(c, alpha, targets) -> Estimate:
    tp = (c.n1 - c.fn)[::-1].astype(float)  # increasing along decreasing thresholds
    fp = c.fp[::-1].astype(float)
    out = {}
    for f in targets:
        target = c.n0 * f
        j = min(int(np.searchsorted(fp, target, side="right")), len(fp) - 1)
        i = max(j - 1, 0)
        q = 0.0 if fp[j] == fp[i] else (target - fp[i]) / (fp[j] - fp[i])
        tpr = float((tp[i] + q * (tp[j] - tp[i])) / c.n1)
        lo = float(clopper_pearson_lower(tp[i], c.n1, alpha)) if tp[i] > 0 else 0.0
        hi = float(clopper_pearson_upper(tp[j], c.n1, alpha))
        out[f"{f:g}"] = {"tpr": tpr, "low": min(lo, tpr), "high": max(hi, tpr)}
    first = out[f"{targets[0]:g}"]
    return Estimate(
        "tpr_at_fpr",
        first["tpr"],
        "descriptive",
        1 - alpha,
        "TPR at fixed FPR (randomised between neighbouring thresholds); Clopper-Pearson "
        "interval on the TP count, given the threshold",
        {"by_fpr": out},
    )


def estimator_panel(
    scores,
    member,
    delta: float,
    confidence: float = 0.95,
    *,
    law=None,
    threshold_grid=None,
    grid_size: int = 100,
    split_fraction: float = 0.5,
    splits: int = MULTISPLITS,
    seed: int = 0,
    fpr=DEFAULT_FPR,
    posterior_draws: int = POSTERIOR_DRAWS,
    sorted_scores: SortedScores | None = None,
) -> dict[str, Estimate]:
    """Every estimator on one game's scores, labelled (see the module docstring).

    `law` (a RoundsLaw) adds the selection-aware fit; `threshold_grid` is a bonferroni grid
    fixed in advance (None: a pilot grid from the first `split_fraction` of the games)."""
    delta = float(check_deltas(delta)[0])
    scores = np.asarray(scores, dtype=float)
    member = np.asarray(member).astype(np.int8)
    ss = sorted_scores if sorted_scores is not None else SortedScores(scores, member)
    alpha = 1 - confidence
    n = ss.n
    c = ss.counts()
    if c.n0 == 0 or c.n1 == 0:
        raise ConfigError("member", "needs trials with both member = 0 and member = 1")
    kw = dict(split_fraction=split_fraction)
    out = {
        "cp_split": _rule_estimate(
            ss,
            "cp_split",
            "split",
            alpha,
            delta,
            "Clopper-Pearson, threshold chosen on a split ([XWW24] eq. 4)",
            **kw,
        ),
        "cp_multisplit": _rule_estimate(
            ss,
            "cp_multisplit",
            "multisplit",
            alpha,
            delta,
            f"Clopper-Pearson, lower median of {splits} splits at alpha/2 ([MMB09])",
            splits=splits,
            seed=seed,
            **kw,
        ),
        "cp_bonferroni": _rule_estimate(
            ss,
            "cp_bonferroni",
            "bonferroni",
            alpha,
            delta,
            "Clopper-Pearson, Bonferroni over a grid fixed in advance or from a left-out pilot",
            threshold_grid=threshold_grid,
            grid_size=grid_size,
            **kw,
        ),
        "cp_bonferroni_all": _rule_estimate(
            ss,
            "cp_bonferroni_all",
            "bonferroni_all",
            alpha,
            delta,
            "Clopper-Pearson, Bonferroni over every threshold (alpha / n)",
        ),
    }
    best = _pick_table(c, alpha, delta)
    out["best_threshold"] = Estimate(
        "best_threshold",
        float(best["eps"]),
        "optimistic",
        None,
        "max over all thresholds at alpha each: no confidence statement",
        {"threshold": float(best["threshold"])},
    )
    out["bayesian"] = _bayesian(ss, alpha, delta, split_fraction, seed, posterior_draws)
    out["gdp_fit"] = _gdp_fit(c, n, alpha, delta)
    if law is not None:
        out["selection_fit"] = _selection_fit(c, n, alpha, delta, law)
    out["auroc"] = _auroc(c, alpha)
    out["tpr_at_fpr"] = _tpr_at_fpr(c, alpha, tuple(fpr))
    return out


def panel_dict(panel: dict[str, Estimate]) -> dict:
    return {name: est.to_dict() for name, est in panel.items()}
