"""`auditsel audit-pipeline MODULE:FUNCTION|PIPELINE.yaml [--canary ...] [--games N] [--jobs J]`:
play the distinguishing game around the user's own tuning pipeline and report eps_L.

Contract: the command line's values override the pipeline YAML's, which override the defaults
(1000 games, delta 1e-5, confidence 0.95, seed 0, the split rule); eps_L is a valid lower
bound at the stated confidence (`auditsel.pipelines.pipeline.audit_pipeline`); exit 3 when
`--claim EPS` is refuted (eps_L > EPS), everything written as for 0. An exception raised in the
user's own code is the user's input: one line naming the function, the line and the game, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from auditsel.cli.exit_status import EXIT_REFUTED
from auditsel.cli.option_types import int_option, unit_interval
from auditsel.cli.pipeline_options import add_pipeline_options, load_pipeline_spec, user_argv
from auditsel.errors import ConfigError
from auditsel.files import check_output_path
from auditsel.games.backends import BACKENDS

__all__ = ["NAME", "add_parser", "run"]

NAME = "audit-pipeline"
DEFAULTS = {"games": 1000, "delta": 1e-5, "confidence": 0.95, "seed": 0, "rule": "split"}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Declare `auditsel audit-pipeline` and its options on `subparsers`."""
    pipe = subparsers.add_parser(
        NAME, help="audit your own tuning pipeline: play the game around MODULE:FUNCTION"
    )
    pipe.add_argument(
        "target",
        help="MODULE:FUNCTION of tune(data, seed, canary) -> release (MODULE: a dotted module "
        "or a .py file), or a pipeline YAML (keys tune, score, canary, data, games, delta, "
        "claimed_epsilon, confidence, seed, rule, name)",
    )
    add_pipeline_options(pipe)
    pipe.add_argument(
        "--games", type=int_option("--games", 4, 10**9), help="games to play (default 1000)"
    )
    pipe.add_argument(
        "--confidence",
        type=unit_interval("--confidence", lower=0.5),
        help="confidence of eps_L, in [0.5, 1) (default 0.95)",
    )
    pipe.add_argument(
        "--rule",
        help="valid threshold rule: split (default), bonferroni, bonferroni_all, multisplit",
    )
    pipe.add_argument("--name", help="name of the report (default: pipeline MODULE.FUNCTION)")
    pipe.add_argument("--out", help="output directory (default: results/<FUNCTION>/)")
    pipe.add_argument(
        "--backend",
        choices=BACKENDS,
        help="joblib backend for the games (default: loky processes; dask needs the dask extra)",
    )
    pipe.add_argument(
        "--scheduler",
        help="dask scheduler address (default: a LocalCluster on loopback with --jobs workers)",
    )
    pipe.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    pipe.add_argument("--quiet", action="store_true", help="do not print the table")
    pipe.add_argument(
        "--accept-nondeterministic",
        action="store_true",
        help="audit a pipeline that the replay check found not reproducible (unseeded "
        "randomness, in-place mutation, global generators under threads, thread races), "
        "knowingly: the hazards are recorded in result.json",
    )
    return pipe


def run(args: argparse.Namespace) -> int:
    """Audit the pipeline `args.target` names; 0, or EXIT_REFUTED when --claim is refuted."""
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions, ReportOptions

    spec = load_pipeline_spec(args)
    settings = {**DEFAULTS, **spec.settings}  # the command line's, then the YAML's, then these
    tune_name = getattr(spec.pipeline.tune, "__name__", "pipeline")
    out = args.out if args.out is not None else Path("results") / tune_name
    check_output_path(out, "--out")  # audit_pipeline claims it (locked; cleaned on failure)
    progress = not args.no_progress and sys.stderr.isatty()
    try:
        with user_argv(args.target):
            audit = spec.pipeline.audit(
                games=settings["games"],
                delta=settings["delta"],
                claimed_epsilon=settings.get("claimed_epsilon"),
                statistics=AuditOptions(
                    confidence=settings["confidence"], rule=settings["rule"], seed=settings["seed"]
                ),
                execution=ExecutionOptions(
                    jobs=args.jobs,
                    backend=args.backend,
                    scheduler=args.scheduler,
                    progress=progress,
                ),
                report=ReportOptions(out_dir=out, name=settings.get("name")),
                accept_nondeterminism=args.accept_nondeterministic,
            )
    except ConfigError as err:
        if err.field == "out_dir":  # the option the user typed
            raise ConfigError("--out", err.message) from None
        raise
    out_dir = Path(out)
    if audit.resumed_games:
        print(
            f"auditsel: resumed {audit.resumed_games:,} of {audit.games:,} games from "
            f"{out_dir / 'checkpoints'}",
            file=sys.stderr,
        )
    if not args.quiet:
        print(audit.summary())
        print(
            f"{audit.games:,} games, {audit.cpu_seconds:.1f} CPU s, {audit.wall_seconds:.1f} s "
            f"wall; wrote {', '.join(str(p) for p in audit.files)}"
        )
    return EXIT_REFUTED if audit.refuted else 0
