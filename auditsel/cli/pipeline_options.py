"""The options that name a pipeline's parts and claim, shared by `audit-pipeline` and `plan`.

Contract: `add_pipeline_options` declares them (each typed by `auditsel.cli.option_types`, so a
value out of range is one line, exit 2); `is_pipeline` tells a pipeline target (MODULE:FUNCTION
or a YAML file with a `tune` key) from an experiment config; `load_pipeline_spec` loads the
target with the command line's values over the YAML's (`auditsel.pipelines.load`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from auditsel.cli.option_types import (
    SEED_RANGE,
    int_option,
    jobs_option,
    nonnegative_float,
    unit_interval,
)

if TYPE_CHECKING:
    from auditsel.pipelines.load import PipelineSpec


def add_pipeline_options(parser: argparse.ArgumentParser) -> None:
    """The options naming a pipeline's parts and claim (audit-pipeline and plan)."""
    parser.add_argument(
        "--score", help="MODULE:FUNCTION of score(release, canary) -> float (default: the canary's)"
    )
    parser.add_argument(
        "--canary",
        help="MODULE:NAME of an InputCanary/GradientCanary (or a function returning one), a "
        "YAML mapping such as '{kind: gradient, coordinate: 30}', a YAML list of them (each "
        "audited, Bonferroni), or 'both' (an input and a gradient canary chosen for you)",
    )
    parser.add_argument(
        "--data", help="MODULE:NAME of the training set (a function is called with no arguments)"
    )
    parser.add_argument(
        "--delta", type=unit_interval("--delta", closed_low=True), help="delta in [0, 1)"
    )
    parser.add_argument(
        "--claim",
        type=nonnegative_float("--claim"),
        help="the claimed epsilon of the whole tuning run, audited at --delta",
    )
    parser.add_argument(
        "--seed",
        type=int_option("--seed", *SEED_RANGE),
        help="seed of the games (plan: of the audit planned; its pilot plays at seed + 1)",
    )
    parser.add_argument(
        "--jobs", type=jobs_option, default=1, help="worker processes (-1 = all cores)"
    )


@contextmanager
def user_argv(target: str) -> Iterator[None]:
    """sys.argv as the user's script would see it run with no arguments: the pipeline's file
    alone (a script that parses its own command line sees none of auditsel's options)."""
    saved = sys.argv
    sys.argv = [target.rpartition(":")[0] or target]
    try:
        yield
    finally:
        sys.argv = saved


def is_pipeline(target: str) -> bool:
    """Whether `target` names a pipeline (MODULE:FUNCTION, or a YAML file with a `tune` key)."""
    from auditsel.pipelines.load import is_reference  # deferred: `auditsel --help` stays fast

    if is_reference(target):
        return True
    if target.endswith((".yaml", ".yml")) and Path(target).is_file():
        from auditsel.files.safe_yaml import read_yaml  # deferred: `auditsel --help` stays fast

        raw = read_yaml(Path(target))
        return isinstance(raw, dict) and "tune" in raw
    return False


def load_pipeline_spec(args: argparse.Namespace) -> PipelineSpec:
    """The pipeline `args` name (audit-pipeline's target or plan's config), the command line's
    values over the YAML's."""
    from auditsel.pipelines.load import load_pipeline  # deferred: `auditsel --help` stays fast

    audit = hasattr(args, "target")
    return load_pipeline(
        args.target if audit else args.config,
        score=args.score,
        canary=args.canary,
        data=args.data,
        delta=args.delta,
        claimed_epsilon=args.claim,
        seed=args.seed,
        **{k: getattr(args, k) for k in (("games", "confidence", "rule", "name") if audit else ())},
    )
