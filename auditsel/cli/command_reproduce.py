"""`auditsel reproduce NAME|all [--out ROOT] [--jobs J]`: recompute a paper's table (or a
committed finding) under ROOT/NAME/.

Contract: NAME is one of `auditsel.reproductions.names()` (or `all`); each output folder is
claimed as `auditsel run` claims its own (`auditsel.files`); a missing optional extra is one
line, exit 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from auditsel.cli.exit_status import UsageError
from auditsel.cli.option_types import jobs_option
from auditsel.files import claim_folder

__all__ = ["NAME", "add_parser", "run"]

NAME = "reproduce"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Declare `auditsel reproduce` and its options on `subparsers`."""
    rep: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="recompute a paper's table under results/papers/NAME/"
    )
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.reproductions import names as reproduction_names

    rep.add_argument("name", choices=[*reproduction_names(), "all"])
    rep.add_argument(
        "--out", default=None, help="root folder (default results/papers; accountants: results)"
    )
    rep.add_argument("--jobs", type=jobs_option, default=1, help="joblib workers for the audits")
    return rep


def run(args: argparse.Namespace) -> int:
    """Reproduce `args.name` (every reproduction for `all`); 0 on success."""
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.reproductions import REGISTRY, names, reproduce
    from auditsel.reproductions.accountant_claims import MissingExtra

    if args.out is not None and not args.out.strip():
        raise UsageError("--out: must name a folder, got ''")
    for name in names() if args.name == "all" else [args.name]:
        root = Path(args.out if args.out is not None else REGISTRY[name].root)
        with claim_folder(root / name, field="--out") as folder:
            try:
                out = reproduce(name, folder.path.parent, jobs=args.jobs)
            except MissingExtra as err:
                raise UsageError(str(err)) from None
        print(f"{name}: wrote {out / 'table.md'}, table.csv, rows.json")
    return 0
