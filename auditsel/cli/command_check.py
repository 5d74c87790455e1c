"""`auditsel check MODULE:FUNCTION [--json]`: the checks before games, on your pipeline's objects.

Contract: FUNCTION (called with no arguments; MODULE a dotted module or a .py file) returns a
mapping whose keys are among `KEYS`, keyword arguments of `auditsel.check_pipeline` (missing
ones are None); `auditsel check` prints one line per finding (what breaks the claim first: the
object, what contradicts the claim, the effect on epsilon, the fix) and a count. Exit 0 when no
finding breaks the claim (warnings only, or none), 3 when one does (as `audit-pipeline --claim`
exits 3 when the claim is refuted), 2 on bad input (a target that is not MODULE:FUNCTION, a
function that raises or returns something else, an unknown key).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from typing import Any

from auditsel.cli.exit_status import EXIT_REFUTED, UsageError
from auditsel.cli.pipeline_options import user_argv

NAME = "check"
#: the fields of check_pipeline's RunObjects, written out so that `auditsel --help` imports no
#: check (a test holds them equal to the signature)
KEYS = tuple(
    "model optimizers data_loader engine rounds delta dataset release claim base privatizer".split()
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    check: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="check your pipeline's objects (optimizers, loader, engine, model, data, release) "
        "against the claim before any game: exit 3 when one breaks it",
    )
    check.add_argument(
        "target",
        help="MODULE:FUNCTION returning a mapping of the objects of one run of your training, "
        f"keys among {', '.join(KEYS)} (MODULE: a dotted module or a .py file)",
    )
    check.add_argument("--json", action="store_true", help="print the findings as JSON")
    return check


def load_objects(target: str) -> dict[str, Any]:
    """The objects dict FUNCTION returns, its keys checked (bad input: UsageError)."""
    from auditsel.pipelines.load import is_reference, load_object  # deferred: fast --help

    if not is_reference(target):
        raise UsageError(
            f"target: must be MODULE:FUNCTION (e.g. mytraining:objects), got {target!r}"
        )
    with user_argv(target):
        made = load_object(target, "target", call=True)
    if not isinstance(made, Mapping):
        raise UsageError(
            f"target: {target} must return a mapping with keys among {', '.join(KEYS)}, got "
            f"{type(made).__name__}"
        )
    unknown = sorted(str(k) for k in made if k not in KEYS)
    if unknown:
        raise UsageError(
            f"target: {target} returned unknown key(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(KEYS)}"
        )
    return dict(made)


def run(args: argparse.Namespace) -> int:
    """Check the objects `args.target` returns; 0, or EXIT_REFUTED when one breaks the claim."""
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.pipelines.checks import BREAKS, RunObjects, check_pipeline

    objects = load_objects(args.target)
    start = time.perf_counter()
    findings = check_pipeline(RunObjects(**objects))
    seconds = time.perf_counter() - start
    breaks = sum(f.severity == BREAKS for f in findings)
    if args.json:
        print(json.dumps({"findings": [f.to_dict() for f in findings], "breaks": breaks}))
    else:
        for finding in findings:
            print(finding.line())
        print(
            f"{len(findings)} finding(s), {breaks} breaking the claim ({seconds:.2f} s of checks)"
        )
    return EXIT_REFUTED if breaks else 0
