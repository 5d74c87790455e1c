"""The estimator panel: every estimator the field uses, on one game's scores, each labelled.

Input: scores (higher = "member") and the coins b of n games. Labels:

* valid (frequentist, at `confidence`): Clopper-Pearson eq. 4 of [XWW24] under each threshold
  rule of `auditsel.auditing.lower`;

* bayesian (credible level `confidence`): [ZB+23]'s posterior of eps from the joint posterior
  of (FP, FN): independent Jeffreys Beta(1/2, 1/2) priors, the counts of the evaluation part
  at the threshold the split rule chose on the selection part, eps = eq. 4 of each posterior
  draw; the reported value is the (1 - confidence) quantile (a credible lower bound);

* heuristic: a model fit whose number holds only if the model does.

  - `gdp_fit`: the Gaussian-DP fit ([NHSBTJCT23]; [DRS22] Corollary 2.13) maximised over
    thresholds, with its goodness-of-fit flag `gdp_fit_ok` (`auditsel.auditing.gdp_fitting`).

  - `selection_fit` (the law of K known): the family "winner of K Gaussian runs N(0, 1) vs
    N(mu, 1)" ([XWW24] Figure 5). mu_L is the largest mu whose exact trade-off curve has some
    (FP_u, FN_u) point strictly below it, converted with the exact privacy curve of that
    winner (`auditsel.accounting.exact`): the selection-aware analogue of the GDP fit.

* optimistic: `best_threshold`, the max over all thresholds at alpha each (no confidence).

* descriptive (`auditsel.auditing.roc`): `auroc` with a DeLong interval, `tpr_at_fpr` with a
  Clopper-Pearson interval on the TP counts of the two thresholds around each FPR, and
  `auroc_hull`, `tpr_at_fpr_hull` on the ROC's convex hull as jax_privacy computes them.

Everything is read from one `SortedScores`, which keeps what the audit computed on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, cast

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtri

from auditsel.accounting.exact import exact_epsilon
from auditsel.auditing.clopper_pearson import CpLimits, clopper_pearson_lower, clopper_pearson_upper
from auditsel.auditing.gdp_fitting import gdp_fit
from auditsel.auditing.lower import apply_rule, check_levels
from auditsel.auditing.roc import (
    auroc_hull_sorted,
    auroc_with_se,
    check_fpr,
    hull_sorted,
    placements,
    tp_counts_sorted,
)
from auditsel.auditing.rules import (
    MULTISPLITS,
    BonferroniAll,
    BonferroniGrid,
    MultiSplit,
    Split,
    ThresholdRule,
    fresh_seed,
)
from auditsel.auditing.scores import check_scores
from auditsel.auditing.sorted_scores import Counts, SortedScores
from auditsel.auditing.threshold_search import best_threshold, epsilon_from_rates
from auditsel.errors import ConfigError
from auditsel.mechanisms import GaussianBase
from auditsel.rounds import RoundsLaw
from auditsel.selection import GaussianWinner

#: what an estimate is (module docstring)
EstimateLabel = Literal["valid", "bayesian", "heuristic", "optimistic", "descriptive"]
LABELS: tuple[EstimateLabel, ...] = ("valid", "bayesian", "heuristic", "optimistic", "descriptive")
POSTERIOR_DRAWS = 20_000
DEFAULT_FPR = (0.001, 0.01, 0.1)


@dataclass(frozen=True)
class Estimate:
    name: str
    value: float  # eps, or the AUROC / TPR for the descriptive entries
    label: EstimateLabel
    level: float | None  # confidence (valid, descriptive) or credible level (bayesian)
    source: str  # method and citation
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["value"] = _finite(self.value)
        out["detail"] = {
            k: _finite(v) if isinstance(v, float) else v for k, v in self.detail.items()
        }
        return out


def _finite(x: object) -> object:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def _rule_estimate(
    ss: SortedScores, name: str, rule: ThresholdRule, alpha: float, delta: float, source: str
) -> Estimate:
    chosen = apply_rule(ss, rule, alpha, delta)
    detail = {
        "threshold": float(chosen["threshold"]),
        "direction": "<=" if chosen["flip"] else ">",
        "fp_upper": chosen["fp_u"],
        "fn_upper": chosen["fn_u"],
        "evaluated_trials": int(chosen["n"]),
        **rule.options(),
    }
    if chosen.get("grid_source"):
        detail["grid_source"] = chosen["grid_source"]
    return Estimate(name, float(chosen["eps"]), "valid", 1 - alpha, source, detail)


def _gdp_fit(ss: SortedScores, alpha: float, delta: float) -> Estimate:
    fit = gdp_fit(ss, alpha, delta)
    return Estimate(
        "gdp_fit",
        fit.eps,
        "heuristic",
        1 - alpha,
        "GDP fit maximised over thresholds, Bonferroni over all of them ([NHSBTJCT23], [DRS22])",
        {
            "mu": fit.mu,
            "gdp_fit_ok": fit.ok,
            "mu_interval_max_low": fit.mu_interval_max_low,
            "mu_interval_min_high": fit.mu_interval_min_high,
            "direction": fit.direction,
            "threshold": fit.threshold,
            "note": "model fits"
            if fit.ok
            else "rejected: the Gaussian trade-off model does not fit "
            "these scores (mu intervals do not overlap)",
        },
    )


def _rate_low(count: np.ndarray, nobs: int, a: float) -> np.ndarray:
    """A value <= the CP upper limit at level a: the empirical rate, the exact limit at count 0."""
    return np.where(count == 0, 1 - (a / 2) ** (1 / max(nobs, 1)), count / max(nobs, 1))


def winner_tradeoff(mu: float, law: RoundsLaw, cells: int = 8_000) -> tuple[np.ndarray, np.ndarray]:
    """The Neyman-Pearson trade-off (FP ascending, FN descending) of the winner of K ~ law runs
    of N(0, 1) vs N(mu, 1), on `cells` cells of the real line plus the K = 0 atom (on or just
    above the exact curve). Cached per (mu, law, cells): the arrays are read-only."""
    try:
        key: tuple[object, ...] = (float(mu), law, int(cells))
        hash(key)
    except TypeError:  # a law that cannot be hashed (a pmf table): keyed by its fields
        key = (float(mu), type(law), repr(law), int(cells))
    got = _TRADEOFFS.get(key)
    if got is None:
        if len(_TRADEOFFS) >= 512:
            _TRADEOFFS.clear()
        got = _TRADEOFFS[key] = _winner_tradeoff(float(mu), law, int(cells))
    return got


_TRADEOFFS: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = {}


def _winner_tradeoff(mu: float, law: RoundsLaw, cells: int) -> tuple[np.ndarray, np.ndarray]:
    w = GaussianWinner(GaussianBase(mu), law)
    lo, hi = w.quantile_range(1e-12)
    edges = np.linspace(lo, hi, cells + 1)
    edges[0], edges[-1] = -np.inf, np.inf
    p0 = np.append(w.cell_masses(edges, 0), w.atom)
    p1 = np.append(w.cell_masses(edges, 1), w.atom)
    with np.errstate(divide="ignore", invalid="ignore"):
        llr = np.log(p1) - np.log(p0)
    llr = np.nan_to_num(llr, nan=0.0, posinf=np.inf, neginf=-np.inf)
    order = np.argsort(-llr, kind="stable")
    fp = np.clip(np.concatenate([[0.0], np.cumsum(p0[order])]), 0, 1)
    fn = np.clip(1 - np.concatenate([[0.0], np.cumsum(p1[order])]), 0, 1)
    fp.flags.writeable = fn.flags.writeable = False
    return fp, fn


def selection_fit_mu(
    fp_u: ArrayLike, fn_u: ArrayLike, law: RoundsLaw, mu_max: float = 30.0, steps: int = 32
) -> float:
    """Largest mu (bisection) such that some point (fp_u, fn_u) lies strictly below the winner
    family's trade-off curve at mu (impossible for that mu); 0 if none lies below at mu ~ 0."""
    fp_u, fn_u = np.asarray(fp_u, float), np.asarray(fn_u, float)

    def below(mu: float) -> bool:
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


def _bounds_of(lim: CpLimits, counts: np.ndarray) -> np.ndarray:
    """`lim.bound(counts)` (counts in 0..lim.nobs), from a table of every count's bound where
    there are more counts than possible values (the same numbers)."""
    if len(counts) <= lim.nobs + 1:
        return lim.bound(counts)
    table = lim.bound(np.arange(lim.nobs + 1))
    return cast("np.ndarray", table[counts])


def _selection_fit(
    c: Counts, n: int, alpha: float, delta: float, law: RoundsLaw, rounds: int = 6
) -> Estimate:
    """mu_L over every threshold: a coarse pass, then the thresholds whose optimistic point
    (never above the CP point: the empirical rates, then, for those that pass, Zubkov and
    Serov's bound within about one count of the CP limit) lies below the fitted curve are
    evaluated exactly and the fit repeated, until no unevaluated threshold could raise it."""
    a = alpha / n  # upper limits at every threshold, both directions: 2 n events
    m = len(c.t)
    fs, gs = [c.fp, c.n0 - c.fp], [c.fn, c.n1 - c.fn]  # direction '>', then '<='
    opt_f = np.concatenate([_rate_low(f, c.n0, a) for f in fs])
    opt_g = np.concatenate([_rate_low(g, c.n1, a) for g in gs])
    all_f, all_g = np.concatenate(fs), np.concatenate(gs)
    tight = np.zeros(2 * m, bool)  # opt_f, opt_g hold the Zubkov-Serov bounds there
    lim0, lim1 = CpLimits(c.n0, a, upper=True), CpLimits(c.n1, a, upper=True)

    def below(idx: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
        """The thresholds of idx whose optimistic point lies below the curve (fp, fn)."""
        idx = idx[opt_g[idx] < np.interp(opt_f[idx], fp, fn) - 1e-12]
        need = idx[~tight[idx]]
        opt_f[need], opt_g[need] = _bounds_of(lim0, all_f[need]), _bounds_of(lim1, all_g[need])
        tight[need] = True
        return cast("np.ndarray", idx[opt_g[idx] < np.interp(opt_f[idx], fp, fn) - 1e-12])

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
        new = below(np.nonzero(~done)[0], fp, fn)
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


def _bayesian(
    ss: SortedScores, split: Split, alpha: float, delta: float, seed: int, draws: int
) -> Estimate:
    """[ZB+23]'s posterior at the threshold `cp_split` chose, from its evaluation part."""
    p = apply_rule(ss, split, alpha, delta)
    pilot = ss.pilot(split.split_fraction, split.seed)
    ev = ss.rest_at(pilot, [p["threshold"]])
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


def _auroc(ss: SortedScores, alpha: float) -> Estimate:
    """AUROC = P(S1 > S0) + P(S1 = S0)/2 with DeLong's variance."""
    auc, se = auroc_with_se(*ss.by_coin(), _placements(ss))
    z = float(-ndtri(alpha / 2))
    return Estimate(
        "auroc",
        auc,
        "descriptive",
        1 - alpha,
        "area under the empirical ROC curve (Mann-Whitney), DeLong interval",
        {"low": max(auc - z * se, 0.0), "high": min(auc + z * se, 1.0), "se": se},
    )


def _placements(ss: SortedScores) -> tuple[np.ndarray, np.ndarray]:
    return cast(
        "tuple[np.ndarray, np.ndarray]", ss.memo("placements", lambda: placements(*ss.by_coin()))
    )


def _vertices(ss: SortedScores) -> tuple[np.ndarray, np.ndarray]:
    return cast(
        "tuple[np.ndarray, np.ndarray]",
        ss.memo("roc_hull", lambda: hull_sorted(*ss.by_coin(), _placements(ss))),
    )


def _auroc_hull(ss: SortedScores) -> Estimate:
    return Estimate(
        "auroc_hull",
        auroc_hull_sorted(*ss.by_coin(), vertices=_vertices(ss)),
        "descriptive",
        None,
        "area under the ROC curve's convex hull, as jax_privacy's attack_auroc",
        {},
    )


def _tpr_at_fpr(ss: SortedScores, alpha: float, targets: tuple[float, ...], hull: bool) -> Estimate:
    s0, s1 = ss.by_coin()
    n1 = len(s1)
    vertices = _vertices(ss) if hull else None
    tp, left, right = tp_counts_sorted(s0, s1, targets, hull=hull, vertices=vertices)
    by = {}
    for f, t, lo_count, hi_count in zip(targets, tp, left, right):
        row = {"tpr": float(t / n1)}
        if not hull:  # CP limits on the TP counts of the two thresholds around FPR f
            lo = float(clopper_pearson_lower(lo_count, n1, alpha)) if lo_count > 0 else 0.0
            hi = float(clopper_pearson_upper(hi_count, n1, alpha))
            row.update(low=min(lo, row["tpr"]), high=max(hi, row["tpr"]))
        by[f"{f:g}"] = row
    name = "tpr_at_fpr_hull" if hull else "tpr_at_fpr"
    source = (
        "TPR at fixed FPR on the ROC's convex hull, as jax_privacy's tpr_at_given_fpr"
        if hull
        else "TPR at fixed FPR on the empirical ROC curve (randomised between neighbouring "
        "thresholds); Clopper-Pearson interval on the TP counts, given the thresholds"
    )
    return Estimate(
        name,
        by[f"{targets[0]:g}"]["tpr"],
        "descriptive",
        None if hull else 1 - alpha,
        source,
        {"by_fpr": by},
    )


def _panel_rules(opts: PanelOptions, seed: int) -> dict[str, ThresholdRule]:
    """The rule objects of the panel's valid entries, from its options."""
    fraction = opts.split_fraction
    return {
        "cp_split": Split(split_fraction=fraction, seed=seed),
        "cp_multisplit": MultiSplit(splits=opts.splits, split_fraction=fraction, seed=seed),
        "cp_bonferroni": BonferroniGrid(
            grid=None, grid_size=opts.grid_size, split_fraction=fraction, seed=seed
        )
        if opts.threshold_grid is None
        else BonferroniGrid(grid=tuple(opts.threshold_grid)),
        "cp_bonferroni_all": BonferroniAll(),
    }


SOURCES = {
    "cp_split": "Clopper-Pearson, threshold chosen on a seeded split of each class ([XWW24] eq. 4)",
    "cp_multisplit": "Clopper-Pearson, lower median of {splits} splits at alpha/2 ([MMB09])",
    "cp_bonferroni": "Clopper-Pearson, Bonferroni over a grid fixed in advance or from a "
    "left-out pilot",
    "cp_bonferroni_all": "Clopper-Pearson, Bonferroni over every threshold (alpha / n)",
}


@dataclass(frozen=True, kw_only=True)
class PanelOptions:
    """The estimator panel's statistical settings (keyword-only, frozen; the defaults are the
    panel of `auditsel audit-scores`).

    `threshold_grid`: the cp_bonferroni grid fixed in advance (None: a pilot grid of `grid_size`
    thresholds from a seeded `split_fraction` of each class, left out of that bound);
    `split_fraction`: the selection part of the split rules and the Bayesian entry; `splits`:
    cp_multisplit's splits; `fpr`: the FPRs of tpr_at_fpr(_hull); `posterior_draws`: the
    Bayesian entry's Monte Carlo draws."""

    threshold_grid: Sequence[float] | np.ndarray | None = None
    grid_size: int = 100
    split_fraction: float = 0.5
    splits: int = MULTISPLITS
    fpr: Sequence[float] = DEFAULT_FPR
    posterior_draws: int = POSTERIOR_DRAWS

    def __post_init__(self) -> None:
        if self.threshold_grid is not None:  # checked as the rule checks it; kept as a tuple
            try:
                given = cast("tuple[float, ...]", self.threshold_grid)
                grid = BonferroniGrid(grid=given).grid
            except ConfigError as err:
                raise ConfigError("threshold_grid", err.message) from None
            object.__setattr__(self, "threshold_grid", grid)
        object.__setattr__(self, "fpr", tuple(float(f) for f in check_fpr(self.fpr)))


def estimator_panel(
    scores: Any,
    member: Any,
    delta: float,
    confidence: float = 0.95,
    *,
    law: Any = None,
    seed: int | None = None,
    options: PanelOptions | None = None,
    sorted_scores: SortedScores | None = None,
) -> dict[str, Estimate]:
    """Every estimator on one game's scores, labelled (see the module docstring).

    `law` (a RoundsLaw) adds the selection-aware fit; `seed` (None: a fresh one, recorded in
    each valid entry's detail) seeds every split."""
    opts = options if options is not None else PanelOptions()
    confidence, delta = check_levels(confidence, delta)
    scores, member = check_scores(scores, member)
    targets = tuple(opts.fpr)
    seed = fresh_seed() if seed is None else seed  # one seed for every split of the panel
    ss = sorted_scores if sorted_scores is not None else SortedScores(scores, member)
    alpha = 1 - confidence
    out = {
        name: _rule_estimate(ss, name, rule, alpha, delta, SOURCES[name].format(splits=opts.splits))
        for name, rule in _panel_rules(opts, seed).items()
    }
    best = best_threshold(ss, alpha, delta)
    out["best_threshold"] = Estimate(
        "best_threshold",
        float(best["eps"]),
        "optimistic",
        None,
        "max over all thresholds at alpha each: no confidence statement",
        {"threshold": float(best["threshold"])},
    )
    split = Split(split_fraction=opts.split_fraction, seed=seed)  # cp_split's rule
    out["bayesian"] = _bayesian(ss, split, alpha, delta, seed, opts.posterior_draws)
    out["gdp_fit"] = _gdp_fit(ss, alpha, delta)
    if law is not None:
        out["selection_fit"] = _selection_fit(ss.counts(), ss.n, alpha, delta, law)
    out["auroc"] = _auroc(ss, alpha)
    out["auroc_hull"] = _auroc_hull(ss)
    out["tpr_at_fpr"] = _tpr_at_fpr(ss, alpha, targets, hull=False)
    out["tpr_at_fpr_hull"] = _tpr_at_fpr(ss, alpha, targets, hull=True)
    return out


def panel_dict(panel: dict[str, Estimate]) -> dict[str, Any]:
    return {name: est.to_dict() for name, est in panel.items()}
