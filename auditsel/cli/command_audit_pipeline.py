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
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditsel.cli.exit_status import EXIT_REFUTED, UsageError
from auditsel.cli.option_types import (
    DEFAULT_OUT,
    int_option,
    nonnegative_float,
    parse_rounds_option,
    unit_interval,
)
from auditsel.cli.pipeline_options import add_pipeline_options, load_pipeline_spec, user_argv
from auditsel.errors import ConfigError
from auditsel.executor import BACKENDS
from auditsel.files import atomic_write_text, check_output_path

if TYPE_CHECKING:
    from auditsel.pipelines.checks import Finding
    from auditsel.pipelines.pipeline import Pipeline, PipelineAudit

NAME = "audit-pipeline"
DEFAULTS = {"games": 1000, "delta": 1e-5, "confidence": 0.95, "seed": 0, "rule": "split"}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    pipe: argparse.ArgumentParser = subparsers.add_parser(
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
    pipe.add_argument("--out", help=f"output directory (default: {DEFAULT_OUT}/<FUNCTION>/)")
    pipe.add_argument(
        "--backend",
        choices=BACKENDS,
        help="joblib backend for the games (default: workers forked from the warm audit "
        "process on Linux, loky processes elsewhere; dask needs the dask extra)",
    )
    pipe.add_argument(
        "--scheduler",
        help="dask scheduler address (default: a LocalCluster on loopback with --jobs workers)",
    )
    _claim_and_stop_options(pipe)
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


def _claim_and_stop_options(pipe: argparse.ArgumentParser) -> None:
    """--rounds, --base, --opacus (the tuning bounds and the claim), --fresh, --early-stop."""
    add_tuning_options(pipe)
    pipe.add_argument(
        "--fresh",
        action="store_true",
        help="start over: delete the checkpoints of --out (also each canary's) once the folder "
        "is locked and the command checked (nothing is resumed)",
    )
    pipe.add_argument(
        "--early-stop",
        action="store_true",
        help="with a claim: audit at --looks looks (geometric schedule), each at confidence "
        "1 - (1 - confidence) / looks, and stop at the first that refutes the claim",
    )
    pipe.add_argument(
        "--looks",
        type=int_option("--looks", 1, 64),
        default=4,
        help="looks of --early-stop (default 4)",
    )
    pipe.add_argument(
        "--accept",
        action="store_true",
        help="with --opacus: audit even when a check before the games finds that the run "
        "breaks the claim (the findings are recorded in result.json)",
    )
    pipe.add_argument(
        "--game-threads",
        type=int_option("--game-threads", 1, 4096),
        metavar="N",
        help="BLAS, OpenMP and torch threads of the process playing the games (default: 1 "
        "with --jobs 1, else cores / jobs)",
    )
    pipe.add_argument(
        "--checkpoint-after",
        type=nonnegative_float("--checkpoint-after"),
        metavar="SECONDS",
        help="write the finished chunks of games once the games have played this long "
        "(default 5; 0: from the first chunk); an interrupted audit resumes from them",
    )


def add_tuning_options(pipe: argparse.ArgumentParser) -> None:
    """--rounds, --base, --opacus: the law of K and one run (audit-pipeline and plan)."""
    pipe.add_argument(
        "--rounds",
        metavar="LAW",
        help="the law of K as a YAML mapping, e.g. '{kind: poisson, mean: 3}': with --base or "
        "--opacus, the tuning bounds and the interval stand beside eps_L",
    )
    pipe.add_argument(
        "--base",
        metavar="BASE",
        help="one run as a YAML mapping, as a config's base section, e.g. '{kind: dpsgd, "
        "noise_multiplier: 1.0, steps: 100, sample_rate: 0.01}'",
    )
    pipe.add_argument(
        "--opacus",
        metavar="MODULE:NAME",
        help="a function of your module returning (privacy_engine, optimizer, data_loader) of "
        "one Opacus run: the base is read from it, and the claim (unless --claim) is the "
        "tuning run's epsilon for the law of K of --rounds (not Opacus's epsilon of one run)",
    )


def run(args: argparse.Namespace) -> int:
    """Audit the pipeline `args.target` names; 0, or EXIT_REFUTED when --claim is refuted."""
    spec = load_pipeline_spec(args)
    options = {**DEFAULTS, **spec.settings}  # the command line's, then the YAML's, then these
    options.update(claim_options(args, options))
    findings = options.pop("findings", None)  # --opacus: the checks before the games
    if args.early_stop and options.get("claimed_epsilon") is None:
        raise UsageError("--early-stop: stops when the claim is refuted; give --claim or --opacus")
    tune_name = getattr(spec.pipeline.tune, "__name__", "pipeline")
    out = args.out if args.out is not None else Path(DEFAULT_OUT) / tune_name
    check_output_path(out, "--out")  # audit_pipeline claims it (locked; cleaned on failure)
    try:
        with user_argv(args.target):
            audit = _audit(args, spec.pipeline, options, out)
    except ConfigError as err:  # named as the option the user typed
        option = {"out_dir": "--out", "fresh": "--fresh"}.get(err.field)
        if option is None:
            raise
        raise ConfigError(option, err.message) from None
    out_dir = Path(out)
    if findings is not None:
        _record_findings(out_dir, findings, accepted=any(f.severity == "breaks" for f in findings))
    if audit.resumed_games and not args.early_stop:
        where = out_dir / ("canary-*" if audit.result.get("canaries") else "")
        print(
            f"auditsel: resumed {audit.resumed_games:,} of {audit.games:,} games from "
            f"{where / 'checkpoints'}",
            file=sys.stderr,
        )
    if not args.quiet:  # the table, each canary's line, the looks' line, games, seconds, files
        from auditsel.pipelines.pipeline import canaries_text  # deferred: fast --help
        from auditsel.pipelines.sequential import looks_text

        print(audit.summary())
        if audit.result.get("canaries"):  # several canaries
            print(canaries_text(audit.result))
        if audit.result.get("sequential"):
            print(looks_text(audit.result))
        print(
            f"{audit.games:,} games, {audit.cpu_seconds:.1f} CPU s, {audit.wall_seconds:.1f} s "
            f"wall; wrote {', '.join(str(p) for p in audit.files)}"
        )
    return EXIT_REFUTED if audit.refuted else 0


def _print_look(entry: Mapping[str, Any], j: int, level: float) -> None:
    """--early-stop: each look's eps_L and verdict on stderr as it finishes (a log shows it)."""
    verdict = "refuted: stopping" if entry["refuted"] else "not refuted"
    print(
        f"auditsel: look {j}: {entry['games']:,} games, eps_L {entry['eps']:.4f} at confidence "
        f"{level:.4g}, {verdict}",
        file=sys.stderr,
        flush=True,
    )


def _tuning_claim(run: Any) -> float:
    """--opacus with --rounds and no --claim: the tuning run's epsilon (`run.tuning_epsilon`,
    the smallest rigorous bound for K runs), not Opacus's epsilon of one run."""
    eps = run.tuning_epsilon
    if eps is None:
        raise UsageError(
            "--claim: no rigorous tuning bound applies to this Opacus run and law of K; give "
            "the claim to test with --claim EPS"
        )
    print(
        f"auditsel: --opacus: the claim is the tuning run's epsilon {eps:.4g} (the law of K of "
        f"--rounds); Opacus's {run.claimed_epsilon:.4g} is one run's",
        file=sys.stderr,
    )
    return float(eps)


def _audit(
    args: argparse.Namespace, pipeline: Pipeline, options: dict[str, Any], out: str | Path
) -> PipelineAudit:
    """The audit itself: one (`Pipeline.audit`), or looks until the claim is refuted
    (--early-stop)."""
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions, ReportOptions

    progress = not args.no_progress  # a bar on a terminal, else a line now and then (engine)
    run = dict(jobs=args.jobs, backend=args.backend, scheduler=args.scheduler, progress=progress)
    run.update(game_threads=args.game_threads, checkpoint_after=args.checkpoint_after)
    run["fresh"] = args.fresh  # deleted once the folder is locked and the options checked
    run["accept_nondeterminism"] = args.accept_nondeterministic
    named: dict[str, Any] = {k: options.get(k) for k in ("name", "base", "rounds")}
    common: dict[str, Any] = dict(
        games=options["games"],
        delta=options["delta"],
        statistics=AuditOptions(**{k: options[k] for k in ("confidence", "rule", "seed")}),
        execution=ExecutionOptions(**run),
        report=ReportOptions(out_dir=out, **named),
    )
    if args.early_stop:
        # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
        from auditsel.pipelines.sequential import LookOptions, audit_until_refuted

        looks = LookOptions(count=args.looks, on_look=_print_look)
        claim = options["claimed_epsilon"]
        return audit_until_refuted(pipeline, claimed_epsilon=claim, looks=looks, **common)
    return pipeline.audit(claimed_epsilon=options.get("claimed_epsilon"), **common)


def claim_options(args: argparse.Namespace, options: dict[str, Any]) -> dict[str, Any]:
    """base, rounds and the claim from --base, --rounds, --opacus (and --claim)."""
    if args.base and args.opacus:
        raise UsageError("--base: give --base or --opacus (the base of the Opacus run), not both")
    if (args.base or args.opacus) and not args.rounds:
        raise UsageError(
            f"--rounds: the law of K, e.g. '{{kind: poisson, mean: 3}}', goes with "
            f"{'--base' if args.base else '--opacus'} (the tuning bounds need both)"
        )
    if args.rounds and not (args.base or args.opacus):
        raise UsageError("--rounds: give --base or --opacus too (the base of one run)")
    if not args.rounds:
        return {}
    rounds = parse_rounds_option(args.rounds)
    delta = options["delta"]
    if args.opacus:
        from auditsel.pipelines.load import load_object  # deferred: `auditsel --help` stays fast
        from auditsel.pipelines.opacus import from_opacus

        made = load_object(args.opacus, "--opacus", call=True)
        try:
            engine, optimizer, loader = made
        except (TypeError, ValueError):
            raise UsageError(
                f"--opacus: {args.opacus} must return (privacy_engine, optimizer, "
                f"data_loader), got {type(made).__name__}"
            ) from None
        run = from_opacus(
            engine, optimizer=optimizer, data_loader=loader, delta=delta, rounds=rounds
        )
        _refuse_broken_claim(args, run.findings)
        claim = options.get("claimed_epsilon")
        return {
            "base": run.base,
            "rounds": rounds,
            "claimed_epsilon": _tuning_claim(run) if claim is None else claim,
            "findings": run.findings,
        }
    from auditsel.experiments.config import parse_base  # deferred: `auditsel --help` stays fast
    from auditsel.files.safe_yaml import load_yaml_text

    raw = load_yaml_text(args.base, "--base", "the --base mapping")
    try:
        base = parse_base(raw, delta)
    except ConfigError as err:
        raise UsageError(f"--base: {err}") from None
    return {"base": base, "rounds": rounds}


def _refuse_broken_claim(args: argparse.Namespace, findings: Sequence[Finding]) -> None:
    """Print the checks' findings (before the plan and the games); refuse a claim that one
    breaks unless --accept (exit 2: fix the pipeline, or accept knowingly)."""
    for finding in findings:
        print(finding.line(), file=sys.stderr if args.quiet else sys.stdout)
    broken = [f for f in findings if f.severity == "breaks"]
    if broken and not getattr(args, "accept", False):
        raise UsageError(
            f"--opacus: {len(broken)} check(s) before the games find that the run breaks the "
            f"claim (the first: {broken[0].obj}, see above); fix the pipeline, or pass --accept "
            f"to audit it anyway (recorded in result.json)"
        )


def _record_findings(out_dir: Path, findings: Sequence[Finding], accepted: bool) -> None:
    """result.json's `checks`: the findings of the checks before the games and whether the
    claim was audited although one breaks it (--accept)."""
    path = out_dir / "result.json"
    if not path.is_file():
        return
    result = json.loads(path.read_text())
    result["checks"] = {"findings": [f.to_dict() for f in findings], "accepted": accepted}
    atomic_write_text(path, json.dumps(result, indent=2, allow_nan=False) + "\n")
