"""`auditsel reproduce NAME|all [--out ROOT] [--jobs J]`: recompute a paper's table (or a
committed finding) under ROOT/NAME/; `auditsel reproduce bugzoo [--budget N] [--pilot N]
[--pipelines A,B]`: the bug zoo at a stated budget of games per canary and pilot, some rows only
(the others kept).

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

NAME = "reproduce"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    rep: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="recompute a paper's table under results/papers/NAME/"
    )
    from auditsel.reproductions import names as reproduction_names  # deferred: fast --help

    rep.add_argument("name", choices=[*reproduction_names(), "all"])
    rep.add_argument(
        "--out", default=None, help="root folder (default results/papers; accountants: results)"
    )
    rep.add_argument("--jobs", type=jobs_option, default=1, help="joblib workers for the audits")
    zoo = rep.add_argument_group("bugzoo only")
    zoo.add_argument(
        "--budget", type=int, default=None, help="games per canary at most (default 8000)"
    )
    zoo.add_argument("--pilot", type=int, default=None, help="the plan's pilot games (default 200)")
    zoo.add_argument(
        "--pipelines",
        default=None,
        help="comma-separated zoo pipelines to recompute (the others kept from rows.json)",
    )
    return rep


def _zoo_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The bugzoo options given (None when none is), checked: one line naming the field."""
    named: dict[str, Any] = {k: getattr(args, k, None) for k in ("budget", "pilot", "pipelines")}
    given = {k: v for k, v in named.items() if v is not None}
    if not given:
        return None
    if args.name != "bugzoo":
        raise UsageError(f"--{next(iter(given))}: only `auditsel reproduce bugzoo` takes it")
    # deferred: the zoo's package is light, its pipelines load when audited
    from auditsel.reproductions.bugzoo import BUDGET, PILOT, PIPELINES

    for key, lowest in (("budget", 8), ("pilot", 20)):
        if key in given and given[key] < lowest:
            raise UsageError(f"--{key}: must be an integer >= {lowest}, got {given[key]}")
    options: dict[str, Any] = {
        "budget": given.get("budget", BUDGET),
        "pilot": given.get("pilot", PILOT),
    }
    if "pipelines" in given:
        names = [n.strip() for n in given["pipelines"].split(",") if n.strip()]
        unknown = [n for n in names if n not in PIPELINES]
        if unknown or not names:
            raise UsageError(
                f"--pipelines: must name zoo pipelines ({', '.join(PIPELINES)}), got "
                f"{given['pipelines']!r}"
            )
        options["pipelines"] = names
    return options


def run(args: argparse.Namespace) -> int:
    """Reproduce `args.name` (every reproduction for `all`); 0 on success."""
    from auditsel.reproductions import REGISTRY, names, reproduce  # deferred: fast --help
    from auditsel.reproductions.accountant_claims import MissingExtra

    if args.out is not None and not args.out.strip():
        raise UsageError("--out: must name a folder, got ''")
    zoo = _zoo_options(args)
    for name in names() if args.name == "all" else [args.name]:
        root = Path(args.out if args.out is not None else REGISTRY[name].root)
        with claim_folder(root / name, field="--out") as folder:
            try:
                if zoo is not None:
                    # deferred: the zoo's modules (torch, Opacus) load where it is reproduced
                    from auditsel.reproductions import bugzoo

                    out = bugzoo.reproduce(folder.path.parent, jobs=args.jobs, **zoo)
                else:
                    out = reproduce(name, folder.path.parent, jobs=args.jobs)
            except MissingExtra as err:
                raise UsageError(str(err)) from None
        print(f"{name}: wrote {out / 'table.md'}, table.csv, rows.json")
    return 0
