"""`auditsel calibrate CONFIG --target-eps X [--solve-for noise|mean]`: the noise multiplier
(or E[K]) at which the tightest rigorous tuning bound equals the target epsilon.

Contract: the answer is `auditsel.accounting.calibrate.calibrate`'s (a rigorous upper bound on
the whole tuning run meets the target there, to `--rtol`), printed beside dp_accounting's
RepeatAndSelectDpEvent calibration of the same budget (the comparison) unless `--no-baseline`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditsel.cli.exit_status import UsageError
from auditsel.cli.option_types import positive_float, unit_interval
from auditsel.errors import ConfigError

if TYPE_CHECKING:
    from auditsel.accounting.calibrate import Calibration

NAME = "calibrate"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    cal: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="the noise (or E[K]) at which the tightest rigorous tuning bound equals --target-eps",
    )
    cal.add_argument(
        "config", help="YAML config: its base, rounds and delta (a game section is ignored)"
    )
    cal.add_argument(
        "--target-eps",
        type=positive_float("--target-eps"),
        required=True,
        help="the epsilon of the whole tuning run at the config's delta, in (0, 1000)",
    )
    cal.add_argument(
        "--solve-for",
        choices=("noise", "mean"),
        default="noise",
        help="noise: the base's noise multiplier (default); mean: E[K] of the law",
    )
    cal.add_argument(
        "--rtol",
        type=unit_interval("--rtol", lower=1e-6),
        default=1e-3,
        help="relative tolerance of the answer, in [1e-6, 1) (default 1e-3)",
    )
    cal.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip dp_accounting's RepeatAndSelectDpEvent calibration (the comparison)",
    )
    cal.add_argument(
        "--assume",
        choices=("monotone_score",),
        help="monotone_score: calibrate [XWW24]'s reduced-game value instead, which holds only "
        "under its monotone-score assumption (default: the tuning run for any score)",
    )
    cal.add_argument("--json", action="store_true", help="print one JSON object")
    return cal


def run(args: argparse.Namespace) -> int:
    """Calibrate the config `args.config` names; 0 on success."""
    from auditsel.accounting.calibrate import CalibrationOptions, calibrate  # deferred: fast --help
    from auditsel.experiments.config import load_config

    try:
        spec = load_config(Path(args.config))
    except ConfigError as err:
        raise UsageError(f"{args.config}: {err}") from None
    result = calibrate(
        spec.base,
        spec.rounds,
        target_epsilon=args.target_eps,
        delta=spec.delta,
        solve_for=args.solve_for,
        options=CalibrationOptions(
            rtol=args.rtol, baseline=not args.no_baseline, assume=args.assume
        ),
    )
    if args.json:
        print(json.dumps({"name": spec.name, **result.to_dict()}, allow_nan=False))
        return 0
    print(calibration_text(spec.name, result))
    return 0


def _baseline_lines(c: Calibration, noise: bool) -> list[str]:
    if c.baseline_value is None:
        return [f"  dp_accounting     n/a ({c.baseline_note})"]
    lines = [
        f"  dp_accounting     {c.baseline_value:.6g}   RepeatAndSelectDpEvent, RdpAccountant, "
        f"the same budget (our bound there: eps = {c.baseline_epsilon:.4f})"
    ]
    if c.gain is not None and not c.at_range_end:
        if noise:
            lines.append(
                f"  {1 - 1 / c.gain:.1%} less noise than dp_accounting's calibration "
                f"(its sigma / ours = {c.gain:.4f})"
            )
        else:
            lines.append(
                f"  {c.gain:.4g}x the runs dp_accounting's calibration allows "
                f"(E[K] {c.value:.4g} against {c.baseline_value:.4g})"
            )
    return lines


def calibration_text(name: str, c: Calibration) -> str:
    """The calibration `c` as lines: the
    answer, its bound, dp_accounting's, the gain."""
    noise = c.parameter == "noise_multiplier"
    what = "noise multiplier" if noise else "E[K]"
    rounds = c.law.describe()
    head = (
        f"{name}: target eps = {c.target_epsilon:g} for the whole tuning run at delta = "
        f"{c.delta:g}, K ~ {rounds['kind']} (E[K] = {rounds['mean']:.4g}), base "
        f"{c.pair.describe()['kind']}"
    )
    if c.at_range_end:
        answer = (
            f"  {what:<17} any: the tightest bound stays at or below the target over the whole "
            f"range (reported: {c.value:.6g}, eps = {c.epsilon:.4f}, {c.bound}: {c.source})"
        )
    else:
        which = "assuming a monotone score" if c.assumption else "tightest rigorous bound there"
        answer = (
            f"  {what:<17} {c.value:.6g}   {which}: eps = {c.epsilon:.4f} ({c.bound}: {c.source})"
        )
    lines = [head, answer]
    if c.assumption is not None:
        lines.append(
            "  ASSUMED: a monotone score ([XWW24]'s reduced game); not the tuning run's epsilon "
            "for any score (drop --assume for that)"
        )
    lines += _baseline_lines(c, noise)
    lines.append(
        f"  {c.evaluations} evaluations of the bounds, {c.seconds:.1f} s"
        + ("" if c.baseline_seconds is None else f" ({c.baseline_seconds:.1f} s dp_accounting)")
    )
    return "\n".join(lines)
