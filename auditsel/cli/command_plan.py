"""`auditsel plan CONFIG|MODULE:FUNCTION|PIPELINE.yaml [--target-eps X] [--games N]`: how many
games a valid audit needs, or what a number of games certifies.

Contract: for a config with a game section, the games at which the config's rule reaches
`--target-eps` with probability `--power` on the trade-off curve (the exact one when known,
else a simulated pilot) and/or E[eps_L] at `--games` (`auditsel.experiments.config_plan`); a
target at or above the exact eps is refused (no valid audit certifies more). For a pipeline, the
same from `--pilot` games (`auditsel.pipelines.pipeline_plan`), seeded apart from the audit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditsel.cli.command_audit_pipeline import add_tuning_options, claim_options
from auditsel.cli.exit_status import UsageError
from auditsel.cli.option_types import int_option, positive_float, unit_interval
from auditsel.cli.pipeline_options import (
    add_pipeline_options,
    is_pipeline,
    load_pipeline_spec,
    user_argv,
)
from auditsel.errors import ConfigError, percent

if TYPE_CHECKING:
    from auditsel.auditing.planning import Plan
    from auditsel.experiments.config import ExperimentSpec

NAME = "plan"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    plan: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="games a valid audit of CONFIG (or of your pipeline) needs"
    )
    plan.add_argument(
        "config",
        help="YAML config with a game section (its rule and confidence are planned), or a "
        "pipeline: MODULE:FUNCTION or a pipeline YAML (sized from --pilot games)",
    )
    plan.add_argument(
        "--target-eps",
        type=positive_float("--target-eps"),
        help="eps_L to reach with probability --power (default 0.9)",
    )
    plan.add_argument(
        "--games",
        type=int_option("--games", 4, 10**12, "an integer in [4, 10^12]"),
        help="also: the eps a valid audit of this many games certifies in expectation",
    )
    plan.add_argument(
        "--power",
        type=unit_interval("--power", lower=0.5),
        default=0.9,
        help="probability of reaching --target-eps, in [0.5, 1) (default 0.9)",
    )
    plan.add_argument(
        "--pilot",
        type=int_option("--pilot", 100, 10**7, "an integer in [100, 10^7]"),
        help="simulated games when the trade-off curve is not known (DP-SGD games; default "
        "4000), or the pilot games of a pipeline (default 200)",
    )
    add_pipeline_options(plan)
    add_tuning_options(plan)  # --rounds with --opacus or --base: the claim, computed
    plan.add_argument(
        "--json", action="store_true", help="print one JSON object (games, target_eps, ...)"
    )
    return plan


def _run_pipeline(args: argparse.Namespace) -> int:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions
    from auditsel.pipelines.pipeline_plan import PilotOptions, plan_pipeline

    spec = load_pipeline_spec(args)
    settings = dict(spec.settings)
    settings.setdefault("delta", 1e-5)
    tuning = claim_options(args, settings)  # --opacus/--base with --rounds: the tuning claim
    claim = tuning.get("claimed_epsilon", settings.get("claimed_epsilon"))
    if claim is None and "base" in tuning:  # --base, no --claim: the tuning run's epsilon
        from auditsel.accounting.interval import tuning_epsilon  # deferred: fast --help

        claim = float(tuning_epsilon(tuning["base"], tuning["rounds"], settings["delta"]).epsilon)
        print(
            f"auditsel: --base: the claim planned is the tuning run's epsilon {claim:.4g}",
            file=sys.stderr,
        )
    if args.target_eps is None and args.games is None and claim is None:
        raise UsageError(
            "plan: give --target-eps X, --claim EPS (games to refute it) and/or --games N"
        )
    p = spec.pipeline
    assert p.canary is not None  # load_pipeline refuses a pipeline without one
    with user_argv(args.config):
        plan = plan_pipeline(
            p,
            delta=settings["delta"],
            pilot=PilotOptions(games=args.pilot or 200, power=args.power),
            target_eps=args.target_eps,
            claimed_epsilon=claim,
            games=args.games,
            # the audit planned (--seed: its seed); the pilot plays at seed + 1, not the audit's
            statistics=AuditOptions(
                confidence=settings.get("confidence", 0.95),
                rule=settings.get("rule", "split"),
                seed=settings.get("seed", 0),
            ),
            execution=ExecutionOptions(jobs=args.jobs, progress=sys.stderr.isatty()),
        )
    print(json.dumps(plan.to_dict(), allow_nan=False) if args.json else plan.summary())
    return 0


def run(args: argparse.Namespace) -> int:
    """Plan the audit of `args.config` (a config or a pipeline); 0 on success."""
    from auditsel.experiments.config import load_config  # deferred: `auditsel --help` stays fast

    if is_pipeline(args.config):
        return _run_pipeline(args)
    if args.target_eps is None and args.games is None:
        raise UsageError(
            "plan: give --target-eps X (games needed) and/or --games N (what N games certify)"
        )
    try:
        spec = load_config(Path(args.config))
    except ConfigError as err:
        raise UsageError(f"{args.config}: {err}") from None
    if spec.game is None:
        raise UsageError(
            f"{args.config}: game: required by plan (the audit to plan); add a game section"
        )
    from auditsel.experiments.config_plan import plan_spec  # deferred: `auditsel --help` stays fast

    exact = None
    monotone = spec.game.score == "monotone"
    if spec.game.kind in ("reduced", "discrete") and spec.delta > 0 and monotone:
        from auditsel.accounting.exact import exact_epsilon  # deferred: fast --help
        from auditsel.selection import winner_law

        reduced = spec.base.reduced()  # a reduced or discrete game's base has one
        assert reduced is not None
        exact = exact_epsilon(winner_law(reduced, spec.rounds), spec.delta)
        if args.target_eps is not None and args.target_eps >= exact:
            raise UsageError(
                f"--target-eps: must be below the exact eps {exact:.4f} of {args.config} at "
                f"delta = {spec.delta:g}; no valid audit certifies more"
            )
    plan = plan_spec(
        spec,
        args.target_eps,
        args.games,
        power=args.power,
        pilot=args.pilot or 4000,
        exact_eps=exact,
    )
    if args.json:
        print(json.dumps(plan.to_dict(), allow_nan=False))
        return 0
    print(_plan_text(args, spec, plan, exact))
    return 0


def _plan_text(
    args: argparse.Namespace, spec: ExperimentSpec, plan: Plan, exact: float | None
) -> str:
    g = spec.game
    assert g is not None  # plan refuses a config without a game section
    lines = [
        f"{spec.name}: valid {g.threshold} audit at {percent(g.confidence)} confidence, delta = "
        f"{spec.delta:g}, trade-off curve {plan.curve}"
        + (f", exact eps {exact:.4f}" if exact is not None else "")
    ]
    if g.score != "monotone":
        from auditsel.experiments.experiment import game_score  # deferred: fast --help

        best = "" if plan.game_eps is None else f"; its best test's eps {plan.game_eps:.4f}"
        lines.append(f"  score played: {game_score(spec).describe()}{best}")
    if args.target_eps is not None:
        games = f"{plan.games:,}" if plan.games is not None else "more than 10^12"
        lines.append(f"  games for P(eps_L >= {args.target_eps:g}) >= {args.power:g}: {games}")
    if args.games is not None:
        lines.append(
            f"  {args.games:,} games: E[eps_L] = {plan.expected_eps:.4f}"
            + (
                f", P(eps_L >= {args.target_eps:g}) = {plan.prob_at_games:.3f}"
                if plan.prob_at_games is not None
                else ""
            )
        )
        if plan.eps_low is not None and plan.eps_high is not None:
            lines.append(
                f"    certified eps_L predicted in [{plan.eps_low:.4f}, {plan.eps_high:.4f}] (5% "
                "and 95% quantiles of its law on the curve: a prediction, not a bound)"
            )
    lines.append(
        "  (the best threshold on the curve, as a threshold fixed in advance would be: rules that "
        "choose it from the data certify somewhat less)"
    )
    return "\n".join(lines)
