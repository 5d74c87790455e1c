"""`auditsel audit-scores FILE [--delta D] [--confidence C] [--threshold RULE] [--one-run]`:
eps lower bounds from scores a pipeline produced (CSV or .npz: score, member).

Contract: every valid threshold rule of `auditsel.auditing.rules` is applied to the same
scores with one seed (printed, so that the audit repeats), each an eps_L valid at the stated
confidence (`auditsel.auditing.lower.audit_scores`); `--threshold` picks the one reported as
eps (and the one whose failure is an error); the best-threshold value and the GDP fit are
printed as what they are (optimistic, not a bound; a heuristic), and the estimator panel labels
every entry (only `valid` entries are confidence bounds). `--one-run`: [SNJ23]'s valid bound and
[MMC24]'s, valid if the trade-off lies in the hypothesised family.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from auditsel.cli.exit_status import UsageError
from auditsel.cli.option_types import (
    MAX_SPLITS,
    SEED_RANGE,
    THRESHOLDS_RANGE,
    finite_float,
    int_option,
    parse_rounds_option,
    unit_interval,
)
from auditsel.errors import ConfigError, percent

if TYPE_CHECKING:
    import numpy as np

    from auditsel.auditing.estimators import Estimate
    from auditsel.auditing.lower import LowerBound
    from auditsel.rounds import RoundsLaw

NAME = "audit-scores"
RULE_NOTES = {
    "split": "valid; threshold chosen on a seeded half of each class, bound on the rest",
    "bonferroni": "valid; grid {grid}",
    "bonferroni_all": "valid; every threshold, confidence split n ways",
    "multisplit": "valid; lower median of {splits} seeded splits at half the level",
}
SPLIT_FRACTION = 0.5  # audit-scores' pilot: half of each class


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    scores: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="eps lower bounds from scores your pipeline produced"
    )
    scores.add_argument(
        "file",
        help="CSV with header and columns score, member (1 = canary in), or .npz (a file: "
        "standard input, '-', is not read)",
    )
    scores.add_argument(
        "--delta",
        type=unit_interval("--delta", closed_low=True),
        default=1e-5,
        help="delta in [0, 1) (default 1e-5)",
    )
    scores.add_argument(
        "--confidence",
        type=unit_interval("--confidence", lower=0.5),
        default=0.95,
        help="confidence in [0.5, 1) (default 0.95)",
    )
    _rule_options(scores)
    _one_run_options(scores)
    scores.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (result.json's lower, "
        "plus one entry per estimator under 'estimators')",
    )
    return scores


def _rule_options(scores: argparse.ArgumentParser) -> None:
    """The threshold rule's options: its name, its splits, its grid and its seed."""
    scores.add_argument(
        "--threshold",
        default="split",
        help="valid threshold rule reported as eps: split (default), bonferroni, "
        "bonferroni_all or multisplit (auditsel.auditing.rules); all are printed",
    )
    scores.add_argument(
        "--splits",
        type=int_option("--splits", 1, MAX_SPLITS),
        default=21,
        help="multisplit: number of random splits (default 21)",
    )
    scores.add_argument(
        "--thresholds",
        type=int_option("--thresholds", *THRESHOLDS_RANGE),
        default=100,
        help="bonferroni grid size (default 100)",
    )
    scores.add_argument(
        "--threshold-range",
        nargs=2,
        type=finite_float("--threshold-range"),
        metavar=("LO", "HI"),
        help="bonferroni grid range fixed in advance (default: quantiles of a pilot, a seeded "
        "half of each class, left out of the bound)",
    )
    scores.add_argument(
        "--seed",
        type=int_option("--seed", *SEED_RANGE),
        default=None,
        help="seed of the rules' random splits of each class (default: a fresh one, printed; "
        "pass it to repeat an audit); the row order never matters",
    )


def _one_run_options(scores: argparse.ArgumentParser) -> None:
    scores.add_argument(
        "--one-run",
        action="store_true",
        help="FILE holds one run's per-canary scores and inclusion bits: one-run audit "
        "([SNJ23], [MMC24])",
    )
    scores.add_argument(
        "--family",
        choices=("gdp", "pure_dp"),
        default="gdp",
        help="--one-run: [MMC24]'s hypothesised trade-off family (default gdp)",
    )
    scores.add_argument(
        "--rounds",
        metavar="LAW",
        help="the law of K as a YAML mapping, e.g. "
        "'{kind: tnb, eta: 0, nu: 0.01}': adds the selection-aware fit to the panel",
    )


def run(args: argparse.Namespace) -> int:
    """Audit the scores in `args.file`; 0 on success."""
    import numpy as np  # deferred: `auditsel --help` stays fast

    from auditsel.auditing.rules import THRESHOLD_RULES, fresh_seed
    from auditsel.auditing.scores import read_scores

    if args.threshold not in THRESHOLD_RULES:
        raise UsageError(
            f"--threshold: must be one of {', '.join(THRESHOLD_RULES)}, got {args.threshold!r}"
        )
    if args.file == "-":
        raise UsageError(
            "FILE: '-' (standard input) is not read: save the scores to a .csv or .npz file "
            "and pass its path"
        )
    score, member = read_scores(args.file)
    if args.one_run:
        return _audit_one_run(args, score, member)
    grid = None
    if args.threshold_range:
        lo, hi = args.threshold_range
        if not lo < hi:
            raise UsageError(f"--threshold-range: LO must be below HI, got {lo:g} {hi:g}")
        grid = np.linspace(lo, hi, args.thresholds)
    law = parse_rounds_option(args.rounds) if args.rounds else None
    seed = fresh_seed() if args.seed is None else args.seed  # one seed for every split
    bounds, panel, skipped = _audit(args, score, member, grid, law, seed)
    if args.json:
        print(json.dumps(_payload(args, bounds, panel, skipped), allow_nan=False))
        return 0
    print(_text(args, member, seed, grid, bounds, panel, skipped))
    return 0


def _audit(
    args: argparse.Namespace,
    score: np.ndarray,
    member: np.ndarray,
    grid: np.ndarray | None,
    law: RoundsLaw | None,
    seed: int,
) -> tuple[dict[str, LowerBound], dict[str, Estimate] | None, dict[str, str]]:
    """Every rule's bound (a rule other than --threshold may need more rows: skipped, with its
    reason) and the estimator panel, all from one seed."""
    from auditsel.auditing.estimators import PanelOptions, estimator_panel  # deferred: fast --help
    from auditsel.auditing.lower import audit_scores
    from auditsel.auditing.rules import THRESHOLD_RULES, threshold_rule
    from auditsel.auditing.sorted_scores import SortedScores

    options = dict(
        split_fraction=SPLIT_FRACTION, grid_size=args.thresholds, grid=grid, splits=args.splits,
        seed=seed,
    )  # fmt: skip
    ss = SortedScores(score, member)
    bounds: dict[str, LowerBound] = {}
    skipped: dict[str, str] = {}
    for rule in THRESHOLD_RULES:
        try:
            bounds[rule] = audit_scores(
                score,
                member,
                args.delta,
                confidence=args.confidence,
                rule=threshold_rule(rule, **options),
                sorted_scores=ss,
            )
        except ConfigError as err:
            if rule == args.threshold:
                raise
            skipped[rule] = str(err)
    panel: dict[str, Estimate] | None
    try:
        panel = estimator_panel(
            score,
            member,
            args.delta,
            args.confidence,
            law=law,
            seed=seed,
            options=PanelOptions(
                threshold_grid=grid,
                grid_size=args.thresholds,
                split_fraction=SPLIT_FRACTION,
                splits=args.splits,
            ),
            sorted_scores=ss,
        )
    except ConfigError as err:
        panel, skipped["estimators"] = None, str(err)
    return bounds, panel, skipped


def _payload(
    args: argparse.Namespace,
    bounds: dict[str, LowerBound],
    panel: dict[str, Estimate] | None,
    skipped: dict[str, str],
) -> dict[str, Any]:
    from auditsel.auditing.estimators import panel_dict  # deferred: `auditsel --help` stays fast
    from auditsel.auditing.rules import THRESHOLD_RULES

    payload = {
        **bounds[args.threshold].to_dict(),
        "delta": args.delta,
        "by_rule": {
            rule: (bounds[rule].to_dict()["eps"] if rule in bounds else None)
            for rule in THRESHOLD_RULES
        },
    }
    if panel is not None:
        payload["estimators"] = panel_dict(panel)
    if skipped:
        payload["skipped"] = skipped
    return payload


def _text(
    args: argparse.Namespace,
    member: np.ndarray,
    seed: int,
    grid: np.ndarray | None,
    bounds: dict[str, LowerBound],
    panel: dict[str, Estimate] | None,
    skipped: dict[str, str],
) -> str:
    from auditsel.auditing.rules import THRESHOLD_RULES  # deferred: `auditsel --help` stays fast

    n1 = int(member.sum())
    lines = [
        f"{args.file}: {len(member):,} games ({n1:,} with the canary), delta = {args.delta:g}, "
        f"{percent(args.confidence)} Clopper-Pearson, seed {seed}"
        + ("" if args.seed is not None else f" (drawn: --seed {seed} repeats this audit)")
    ]
    source = (
        "fixed in advance by --threshold-range"
        if grid is not None
        else "from a pilot (a seeded half of each class), which is left out of the bound"
    )
    for rule in THRESHOLD_RULES:
        if rule not in bounds:
            lines.append(f"  eps_L {rule:<15} {'n/a':>8}   ({skipped[rule]})")
            continue
        b = bounds[rule]
        note = RULE_NOTES[rule].format(grid=source, splits=args.splits)
        lines.append(
            f"  eps_L {rule:<15} {b.eps:8.4f}   ({note}; score {b.direction} {b.threshold:.6g})"
        )
    chosen = bounds[args.threshold]
    lines.append(
        f"  eps_L {'best threshold':<15} {chosen.eps_best_threshold:8.4f}   (optimistic: max over "
        f"all thresholds, no confidence statement; not a bound)"
    )
    fit = "fits" if chosen.gdp_fit_ok else "REJECTED by the data"
    lines.append(
        f"  eps_L {'gdp_fit':<15} {chosen.gdp_fit:8.4f}   (heuristic GDP fit, mu = "
        f"{chosen.gdp_fit_mu:.4f} maximised over every threshold; the Gaussian model {fit})"
    )
    lines.append(
        panel_text(panel)
        if panel is not None
        else f"estimator panel: not computed ({skipped['estimators']})"
    )
    return "\n".join(lines)


def _panel_extra(name: str, e: Estimate) -> str:
    if name == "selection_fit":
        return f"; mu = {e.detail['mu']:.4f}"
    if name == "auroc":
        return f"; [{e.detail['low']:.4f}, {e.detail['high']:.4f}]"
    if name == "tpr_at_fpr":
        return "; " + ", ".join(
            f"FPR {k}: {v['tpr']:.4f} [{v['low']:.4f}, {v['high']:.4f}]"
            for k, v in e.detail["by_fpr"].items()
        )
    if name == "tpr_at_fpr_hull":
        return "; " + ", ".join(f"FPR {k}: {v['tpr']:.4f}" for k, v in e.detail["by_fpr"].items())
    return ""


def panel_text(panel: dict[str, Estimate]) -> str:
    """The estimator panel as lines: name, value, label (with level), what it is."""
    lines = ["estimator panel (every entry labelled; only 'valid' entries are confidence bounds):"]
    for name, e in panel.items():
        shown = e.label in ("valid", "bayesian")
        level = f" {percent(e.level)}" if e.level is not None and shown else ""
        label = {"bayesian": "bayesian credible"}.get(e.label, e.label) + level
        extra = _panel_extra(name, e)
        if name == "gdp_fit":
            ok = e.detail["gdp_fit_ok"]
            label = "heuristic" + ("" if ok else ", REJECTED")
            extra = f"; mu = {e.detail['mu']:.4f}, gdp_fit_ok = {str(ok).lower()}"
        what = "eps" if e.label != "descriptive" else name.split("_")[0].upper()
        lines.append(f"  {name:<18} {what:>5} {e.value:8.4f}   {label:<24} {e.source}{extra}")
    return "\n".join(lines)


def _audit_one_run(args: argparse.Namespace, score: np.ndarray, member: np.ndarray) -> int:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.auditing.one_run_analysis import GdpFamily, PureDpFamily, audit_one_run

    family = GdpFamily() if args.family == "gdp" else PureDpFamily()  # argparse's choices
    try:
        bound = audit_one_run(score, member, args.delta, confidence=args.confidence, family=family)
    except ConfigError as err:  # bad input only: any other failure is an internal error (exit 1)
        raise UsageError(f"{args.file}: {err}") from None
    if args.json:
        print(json.dumps(bound.to_dict(), allow_nan=False))
        return 0
    d = bound.to_dict()
    print(
        f"{args.file}: one run, {bound.canaries:,} canaries ({bound.members:,} included), "
        f"delta = {args.delta:g}, {percent(args.confidence)} confidence split over "
        f"{bound.grid_size} (k+, k-) pairs"
    )
    print(
        f"  eps_L [SNJ23]        {bound.eps_snj23:8.4f}   (valid; {d['k_plus']} top / "
        f"{d['k_minus']} bottom guesses, {d['correct']} of {d['guesses']} correct)"
    )
    print(
        f"  eps_L [MMC24] {bound.mmc24_family:<6} {bound.eps_mmc24:8.4f}   (valid if the "
        f"trade-off lies in the {bound.mmc24_family} family; theta_L = {bound.mmc24_theta:.4f})"
    )
    return 0
