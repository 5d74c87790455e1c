"""Command line: `auditsel run [CONFIG] [--out DIR] [--trials N] [--seed S] [--jobs J]`,
`auditsel audit-pipeline MODULE:FUNCTION|PIPELINE.yaml [--canary ...] [--games N] [--jobs J]`,
`auditsel plan CONFIG|MODULE:FUNCTION|PIPELINE.yaml`, `auditsel reproduce NAME`,
`auditsel audit-scores FILE`.

Exit codes (docs/reference/exit-codes.md):
* 0 success;
* 2 input the user can fix (config, arguments, score files, checkpoints of another experiment
  or other code, an output folder that escapes or is in use, a backend or scheduler that cannot
  be used, a device or an amount of memory the config needs and the machine lacks): one line on
  stderr naming the field and what is allowed; nothing written outside the output folder, and
  what this run created there removed (`auditsel.files`);
* 74 the environment failed: the disk (or quota) is full, or an I/O error; one line; the
  checkpoints stay, rerunning the command resumes;
* 141 stdout was closed by its reader (`auditsel ... | head`): quiet, as Unix tools are;
* 1 internal failure (a bug, e.g. a root finder that fails inside a bound): one line saying so
  and naming the file the traceback was written to; nothing half-written either.
* 3 `audit-pipeline --claim EPS` only: the audit ran and refuted the claim (eps_L > EPS at the
  stated confidence); everything was written as for 0.
* 130 interrupted (Ctrl-C): the checkpoints stay, rerunning the command resumes.

An exception raised inside the user's own pipeline (tune, score, data, canary) is the user's
input, not ours: exit 2, one line naming the function, the line and the game.

Only the exception types in `_bad_input_types` mean exit 2; a plain ValueError raised deep in
the numerics is an internal error. Heavy modules (numpy, scipy, matplotlib, torch, ...) are
imported inside the commands, so `auditsel --help` stays instant.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path

from auditsel.errors import LIMITS, MAX_JOBS, ConfigError
from auditsel.files import DISK_FULL, check_output_path, claim_folder
from auditsel.games.backends import BACKENDS
from auditsel.version import __version__

__all__ = ["main"]


class UsageError(Exception):
    """A user-fixable problem found by the CLI itself: printed as one line, exit code 2."""


def _bad_input_types() -> tuple:
    """The exception types that mean "input the user can fix" (exit 2); anything else is exit 1.

    auditsel.errors.ConfigError is the one bad-input type (CheckpointError, BackendError and
    ScoreFileError derive from it); UsageError is the CLI's own."""
    return (UsageError, ConfigError)


EXIT_ENVIRONMENT = 74  # sysexits.h EX_IOERR: a full disk, an I/O error
EXIT_PIPE = 128 + 13  # killed by SIGPIPE, as `yes | head` reports it
EXIT_REFUTED = 3  # audit-pipeline --claim: the audit ran and refuted the claim


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # `--delta -1e-5` is a value, not an option: argparse's own pattern misses exponents
        self._negative_number_matcher = re.compile(
            r"^-(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^-(?:inf|nan)$", re.IGNORECASE
        )

    def error(self, message):  # one line, exit 2 (argparse would print the usage block too)
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _integer_text(text: str) -> int | None:
    """An integer written as digits or as an integral float (1e6), else None."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value.is_integer() else None


def _int_option(name: str, lo: int, hi: int, allowed: str | None = None):
    """An argparse type for an integer option in [lo, hi] (the range of the config field it
    sets); the message names the option and its range."""
    allowed = allowed or f"an integer in [{lo}, {hi}]"

    def parse(text):
        value = _integer_text(text)
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{name} must be {allowed}, got {text}")
        return value

    return parse


# ranges of the config fields the options override: one source, auditsel.errors.LIMITS
TRIALS_RANGE = LIMITS["game.trials"]
SEED_RANGE = LIMITS["game.seed"]
THRESHOLDS_RANGE = LIMITS["game.thresholds"]
MAX_SPLITS = 1000


def _jobs(text):
    value = _integer_text(text)
    if value is None or value == 0 or abs(value) > MAX_JOBS:
        raise argparse.ArgumentTypeError(
            f"--jobs must be a non-zero integer in [-{MAX_JOBS}, {MAX_JOBS}] "
            f"(-1 = all cores), got {text}"
        )
    return value


def _finite_float(name):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number, got {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="auditsel", description="Audit the privacy of DP hyperparameter tuning.")
    parser.add_argument("--version", action="version", version=f"auditsel {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = sub.add_parser("run", help="run one experiment (the embedded quickstart by default)")
    run.add_argument("config", nargs="?", help="YAML config (default: the embedded quickstart)")
    run.add_argument("--out", help="output directory (default: results/<name>/)")
    run.add_argument(
        "--trials", type=_int_option("--trials", *TRIALS_RANGE), help="override game.trials"
    )
    run.add_argument("--seed", type=_int_option("--seed", *SEED_RANGE), help="override game.seed")
    run.add_argument("--jobs", type=_jobs, default=1, help="joblib workers (-1 = all cores)")
    run.add_argument(
        "--backend",
        choices=BACKENDS,
        help="joblib backend for the game's chunks "
        "(default: threads for the numpy games, loky processes for DP-SGD; "
        "dask needs the dask extra)",
    )
    run.add_argument(
        "--scheduler",
        help="dask scheduler address (default: a LocalCluster on loopback with --jobs workers)",
    )
    run.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    run.add_argument("--quiet", action="store_true", help="do not print the table")
    run.add_argument(
        "--no-plots",
        action="store_true",
        help="write result.json and report.md only (no matplotlib: about a second less)",
    )
    run.add_argument(
        "--assume",
        choices=("monotone_score",),
        help="monotone_score: also print [XWW24]'s reduced-game epsilon, which holds only under "
        "its monotone-score assumption (the table's interval holds for any score)",
    )

    rep = sub.add_parser("reproduce", help="recompute a paper's table under results/papers/NAME/")
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.reproductions import names as reproduction_names

    rep.add_argument("name", choices=[*reproduction_names(), "all"])
    rep.add_argument(
        "--out", default=None, help="root folder (default results/papers; accountants: results)"
    )
    rep.add_argument("--jobs", type=_jobs, default=1, help="joblib workers for the audits")

    pipe = sub.add_parser(
        "audit-pipeline",
        help="audit your own tuning pipeline: play the game around MODULE:FUNCTION",
    )
    pipe.add_argument(
        "target",
        help="MODULE:FUNCTION of tune(data, seed, canary) -> release (MODULE: a dotted module "
        "or a .py file), or a pipeline YAML (keys tune, score, canary, data, games, delta, "
        "claimed_epsilon, confidence, seed, rule, name)",
    )
    _pipeline_options(pipe)
    pipe.add_argument(
        "--games",
        type=_int_option("--games", 4, 10**9),
        help="games to play (default 1000)",
    )
    pipe.add_argument(
        "--confidence",
        type=_unit_interval("--confidence", lower=0.5),
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

    plan = sub.add_parser("plan", help="games a valid audit of CONFIG (or of your pipeline) needs")
    plan.add_argument(
        "config",
        help="YAML config with a game section (its rule and confidence are planned), or a "
        "pipeline: MODULE:FUNCTION or a pipeline YAML (sized from --pilot games)",
    )
    plan.add_argument(
        "--target-eps",
        type=_positive_float("--target-eps"),
        help="eps_L to reach with probability --power (default 0.9)",
    )
    plan.add_argument(
        "--games",
        type=_int_option("--games", 4, 10**12, "an integer in [4, 10^12]"),
        help="also: the eps a valid audit of this many games certifies in expectation",
    )
    plan.add_argument(
        "--power",
        type=_unit_interval("--power", lower=0.5),
        default=0.9,
        help="probability of reaching --target-eps, in [0.5, 1) (default 0.9)",
    )
    plan.add_argument(
        "--pilot",
        type=_int_option("--pilot", 100, 10**7, "an integer in [100, 10^7]"),
        help="simulated games when the trade-off curve is not known (DP-SGD games; default "
        "4000), or the pilot games of a pipeline (default 200)",
    )
    _pipeline_options(plan)
    plan.add_argument(
        "--json", action="store_true", help="print one JSON object (games, target_eps, ...)"
    )

    cal = sub.add_parser(
        "calibrate",
        help="the noise (or E[K]) at which the tightest rigorous tuning bound equals --target-eps",
    )
    cal.add_argument(
        "config", help="YAML config: its base, rounds and delta (a game section is ignored)"
    )
    cal.add_argument(
        "--target-eps",
        type=_positive_float("--target-eps"),
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
        type=_unit_interval("--rtol", lower=1e-6),
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

    scores = sub.add_parser(
        "audit-scores", help="eps lower bounds from scores your pipeline produced"
    )
    scores.add_argument(
        "file", help="CSV with header and columns score, member (1 = canary in), or .npz"
    )
    scores.add_argument(
        "--delta",
        type=_unit_interval("--delta", closed_low=True),
        default=1e-5,
        help="delta in [0, 1) (default 1e-5)",
    )
    scores.add_argument(
        "--confidence",
        type=_unit_interval("--confidence", lower=0.5),
        default=0.95,
        help="confidence in [0.5, 1) (default 0.95)",
    )
    scores.add_argument(
        "--threshold",
        default="split",
        help="valid threshold rule reported as eps: split (default), bonferroni, "
        "bonferroni_all or multisplit (auditsel.auditing.rules); all are printed",
    )
    scores.add_argument(
        "--splits",
        type=_int_option("--splits", 1, MAX_SPLITS),
        default=21,
        help="multisplit: number of random splits (default 21)",
    )
    scores.add_argument(
        "--thresholds",
        type=_int_option("--thresholds", *THRESHOLDS_RANGE),
        default=100,
        help="bonferroni grid size (default 100)",
    )
    scores.add_argument(
        "--threshold-range",
        nargs=2,
        type=_finite_float("--threshold-range"),
        metavar=("LO", "HI"),
        help="bonferroni grid range fixed in advance (default: quantiles of a pilot, a seeded "
        "half of each class, left out of the bound)",
    )
    scores.add_argument(
        "--seed",
        type=_int_option("--seed", *SEED_RANGE),
        default=None,
        help="seed of the rules' random splits of each class (default: a fresh one, printed; "
        "pass it to repeat an audit); the row order never matters",
    )
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
    scores.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (result.json's lower, "
        "plus one entry per estimator under 'estimators')",
    )
    return parser


def _pipeline_options(parser) -> None:
    """The options naming a pipeline's parts and claim (audit-pipeline and plan)."""
    parser.add_argument(
        "--score", help="MODULE:FUNCTION of score(release, canary) -> float (default: the canary's)"
    )
    parser.add_argument(
        "--canary",
        help="MODULE:NAME of an InputCanary/GradientCanary (or a function returning one), or a "
        "YAML mapping such as '{kind: gradient, coordinate: 30}'",
    )
    parser.add_argument(
        "--data", help="MODULE:NAME of the training set (a function is called with no arguments)"
    )
    parser.add_argument(
        "--delta", type=_unit_interval("--delta", closed_low=True), help="delta in [0, 1)"
    )
    parser.add_argument(
        "--claim",
        type=_nonnegative_float("--claim"),
        help="the claimed epsilon of the whole tuning run, audited at --delta",
    )
    parser.add_argument(
        "--seed",
        type=_int_option("--seed", *SEED_RANGE),
        help="seed of the games (plan: of the pilot)",
    )
    parser.add_argument("--jobs", type=_jobs, default=1, help="worker processes (-1 = all cores)")


def _nonnegative_float(name):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (0 <= value < 1e3):
            raise argparse.ArgumentTypeError(f"{name} must be in [0, 1000), got {value:g}")
        return value

    return parse


def _positive_float(name):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text}") from None
        if not (value > 0 and value < 1e3):
            raise argparse.ArgumentTypeError(f"{name} must be in (0, 1000), got {text}")
        return value

    return parse


def _unit_interval(name, lower=0.0, closed_low=False):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text}") from None
        ok = (value >= lower if closed_low or lower > 0 else value > lower) and value < 1
        if not ok:
            low = "[" if closed_low or lower > 0 else "("
            raise argparse.ArgumentTypeError(f"{name} must be in {low}{lower:g}, 1), got {text}")
        return value

    return parse


def _command_run(args) -> int:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.experiments.config import default_config_path, parse_config, read_yaml
    from auditsel.experiments.sweep import expand_sweep

    config_path = Path(args.config) if args.config else default_config_path()
    overrides = {k: v for k, v in (("trials", args.trials), ("seed", args.seed)) if v is not None}
    points = spec = None
    try:
        raw = read_yaml(config_path)
        if isinstance(raw, dict) and "sweep" in raw:
            if overrides and not isinstance(raw.get("game"), dict):
                raise UsageError(
                    f"--{next(iter(overrides))}: {config_path} has no game section; "
                    f"add one or drop the option"
                )
            points = expand_sweep(raw, overrides)
            name = points[0].spec.name
        else:
            spec = parse_config(raw)
            if overrides:
                if spec.game is None:
                    raise UsageError(
                        f"--{next(iter(overrides))}: {config_path} has no game section; "
                        f"add one or drop the option"
                    )
                spec = spec.with_game(**overrides)
            name = spec.name
    except ConfigError as err:
        raise UsageError(f"{config_path}: {err}") from None
    if args.scheduler and args.backend != "dask":
        raise UsageError("--scheduler: only used with --backend dask; add --backend dask")
    if getattr(args, "assume", None) and points is not None:
        raise UsageError(
            "--assume: prints one setting's epsilon, not a sweep's (sweep.csv has the "
            "<key>_monotone_score columns); drop the option"
        )
    # resolved, refused when it escapes (.., the current folder), locked against a second
    # run; on failure only what this run created goes (auditsel.files)
    out = args.out if args.out is not None else Path("results") / name
    with claim_folder(out, field="--out") as folder:
        progress = not args.no_progress and sys.stderr.isatty()
        return _run_into(args, folder.path, spec, points, progress)


def _run_into(args, out_dir, spec, points, progress) -> int:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.experiments.experiment import run_experiment
    from auditsel.experiments.report import prefetch_plotting, text_table, write_outputs
    from auditsel.experiments.sweep import run_sweep
    from auditsel.games.backends import execution_backend

    workers = abs(args.jobs) if args.jobs != -1 else 2
    if points is not None:
        with execution_backend(args.backend, args.scheduler, workers=workers) as backend:
            run_sweep(points, out_dir, jobs=args.jobs, progress=progress, backend=backend)
        if not args.quiet:
            print((out_dir / "sweep.md").read_text())
            print(
                f"wrote {out_dir / 'sweep.csv'}, {out_dir / 'sweep.md'}, {out_dir / 'sweep.png'} "
                f"and {len(points)} point folders"
            )
        return 0
    if not args.no_plots:
        prefetch_plotting()
    with execution_backend(args.backend, args.scheduler, workers=workers) as backend:
        result, artefacts = run_experiment(
            spec, out_dir, jobs=args.jobs, progress=progress, backend=backend
        )
    record = artefacts.get("record")
    if record is not None and record.resumed_chunks:
        chunks = -(-spec.game.trials // spec.game.chunk_size)
        print(
            f"auditsel: resumed {record.resumed_chunks} of {chunks} chunks from "
            f"{out_dir / 'checkpoints'}",
            file=sys.stderr,
        )
    written = write_outputs(out_dir, result, artefacts, plots=not args.no_plots)
    if not args.quiet:
        print(text_table(result))
        if getattr(args, "assume", None):
            # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
            from auditsel.accounting.interval import tuning_epsilon

            print(tuning_epsilon(spec.base, spec.rounds, spec.delta, assume=args.assume))
        print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def _command_reproduce(args) -> int:
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


RULE_NOTES = {
    "split": "valid; threshold chosen on a seeded half of each class, bound on the rest",
    "bonferroni": "valid; grid {grid}",
    "bonferroni_all": "valid; every threshold, confidence split n ways",
    "multisplit": "valid; lower median of {splits} seeded splits at half the level",
}
SPLIT_FRACTION = 0.5  # audit-scores' pilot: half of each class


def _command_audit_scores(args) -> int:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    import numpy as np

    from auditsel.auditing.estimators import estimator_panel, panel_dict
    from auditsel.auditing.lower import audit_scores
    from auditsel.auditing.rules import THRESHOLD_RULES, fresh_seed, threshold_rule
    from auditsel.auditing.scores import read_scores
    from auditsel.auditing.sorted_scores import SortedScores
    from auditsel.errors import ConfigError

    if args.threshold not in THRESHOLD_RULES:
        raise UsageError(
            f"--threshold: must be one of {', '.join(THRESHOLD_RULES)}, got {args.threshold!r}"
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
    law = _parse_rounds_option(args.rounds) if args.rounds else None
    seed = fresh_seed() if args.seed is None else args.seed  # one seed for every split
    options = dict(
        split_fraction=SPLIT_FRACTION,
        grid_size=args.thresholds,
        grid=grid,
        splits=args.splits,
        seed=seed,
    )
    ss = SortedScores(score, member)
    bounds, skipped = {}, {}
    for rule in THRESHOLD_RULES:  # a rule other than --threshold may need more rows
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
    try:
        panel = estimator_panel(
            score,
            member,
            args.delta,
            args.confidence,
            law=law,
            threshold_grid=grid,
            grid_size=args.thresholds,
            split_fraction=SPLIT_FRACTION,
            splits=args.splits,
            seed=seed,
            sorted_scores=ss,
        )
    except ConfigError as err:
        panel, skipped["estimators"] = None, str(err)
    chosen = bounds[args.threshold]
    if args.json:
        payload = {
            **chosen.to_dict(),
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
        print(json.dumps(payload, allow_nan=False))
        return 0
    n1 = int(member.sum())
    print(
        f"{args.file}: {len(member):,} games ({n1:,} with the canary), delta = {args.delta:g}, "
        f"{args.confidence:.0%} Clopper-Pearson, seed {seed}"
        + ("" if args.seed is not None else f" (drawn: --seed {seed} repeats this audit)")
    )
    source = (
        "fixed in advance by --threshold-range"
        if grid is not None
        else "from a pilot (a seeded half of each class), which is left out of the bound"
    )
    for rule in THRESHOLD_RULES:
        if rule not in bounds:
            print(f"  eps_L {rule:<15} {'n/a':>8}   ({skipped[rule]})")
            continue
        b = bounds[rule]
        note = RULE_NOTES[rule].format(grid=source, splits=args.splits)
        print(f"  eps_L {rule:<15} {b.eps:8.4f}   ({note}; score {b.direction} {b.threshold:.6g})")
    print(
        f"  eps_L {'best threshold':<15} {chosen.eps_best_threshold:8.4f}   (optimistic: max over all "
        f"thresholds, no confidence statement; not a bound)"
    )
    fit = "fits" if chosen.gdp_fit_ok else "REJECTED by the data"
    print(
        f"  eps_L {'gdp_fit':<15} {chosen.gdp_fit:8.4f}   (heuristic GDP fit, mu = "
        f"{chosen.gdp_fit_mu:.4f} maximised over every threshold; the Gaussian model {fit})"
    )
    print(
        panel_text(panel)
        if panel is not None
        else f"estimator panel: not computed ({skipped['estimators']})"
    )
    return 0


def panel_text(panel) -> str:
    """The estimator panel as lines: name, value, label (with level), what it is."""
    lines = ["estimator panel (every entry labelled; only 'valid' entries are confidence bounds):"]
    for name, e in panel.items():
        level = (
            f" {e.level:.0%}" if e.level is not None and e.label in ("valid", "bayesian") else ""
        )
        label = {"bayesian": "bayesian credible"}.get(e.label, e.label) + level
        extra = ""
        if name == "gdp_fit":
            ok = e.detail["gdp_fit_ok"]
            label = "heuristic" + ("" if ok else ", REJECTED")
            extra = f"; mu = {e.detail['mu']:.4f}, gdp_fit_ok = {str(ok).lower()}"
        elif name == "selection_fit":
            extra = f"; mu = {e.detail['mu']:.4f}"
        elif name == "auroc":
            extra = f"; [{e.detail['low']:.4f}, {e.detail['high']:.4f}]"
        elif name == "tpr_at_fpr":
            extra = "; " + ", ".join(
                f"FPR {k}: {v['tpr']:.4f} [{v['low']:.4f}, {v['high']:.4f}]"
                for k, v in e.detail["by_fpr"].items()
            )
        elif name == "tpr_at_fpr_hull":
            extra = "; " + ", ".join(
                f"FPR {k}: {v['tpr']:.4f}" for k, v in e.detail["by_fpr"].items()
            )
        what = "eps" if e.label != "descriptive" else name.split("_")[0].upper()
        lines.append(f"  {name:<18} {what:>5} {e.value:8.4f}   {label:<24} {e.source}{extra}")
    return "\n".join(lines)


def _parse_rounds_option(text):
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.experiments.config import load_yaml_text
    from auditsel.rounds import law_from_dict

    try:
        spec = load_yaml_text(text, "--rounds", "the --rounds mapping")
        if not isinstance(spec, dict):
            raise UsageError(
                f"--rounds: not a YAML mapping ({_one_line(repr(text), 60)}); "
                f"write e.g. '{{kind: poisson, mean: 10}}'"
            )
        return law_from_dict(spec)
    except ConfigError as err:
        raise UsageError(str(err) if err.field == "--rounds" else f"--rounds: {err}") from None


def _is_pipeline(target: str) -> bool:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.pipelines.load import is_reference

    if is_reference(target):
        return True
    if target.endswith((".yaml", ".yml")) and Path(target).is_file():
        # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
        from auditsel.experiments.config import read_yaml

        raw = read_yaml(Path(target))
        return isinstance(raw, dict) and "tune" in raw
    return False


def _load_pipeline(args):
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.pipelines.load import load_pipeline

    return load_pipeline(
        args.target if hasattr(args, "target") else args.config,
        score=args.score,
        canary=args.canary,
        data=args.data,
        delta=args.delta,
        claimed_epsilon=args.claim,
        seed=args.seed,
        **(
            {
                "games": args.games,
                "confidence": args.confidence,
                "rule": args.rule,
                "name": args.name,
            }
            if hasattr(args, "target")
            else {}
        ),
    )


def _command_audit_pipeline(args) -> int:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.pipelines.load import PIPELINE_KEYS

    spec = _load_pipeline(args)
    settings = dict(spec.settings)
    defaults = {"games": 1000, "delta": 1e-5, "confidence": 0.95, "seed": 0, "rule": "split"}
    options = {
        k: settings.get(k, defaults.get(k)) for k in PIPELINE_KEYS if k in settings or k in defaults
    }
    tune_name = getattr(spec.pipeline.tune, "__name__", "pipeline")
    out = args.out if args.out is not None else Path("results") / tune_name
    check_output_path(out, "--out")  # audit_pipeline claims it (locked; cleaned on failure)
    progress = not args.no_progress and sys.stderr.isatty()
    audit = spec.pipeline.audit(
        jobs=args.jobs,
        backend=args.backend,
        scheduler=args.scheduler,
        out_dir=out,
        progress=progress,
        **options,
    )
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


def _command_plan_pipeline(args) -> int:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.pipelines.pipeline_plan import plan_pipeline

    spec = _load_pipeline(args)
    settings = spec.settings
    if args.target_eps is None and args.games is None and settings.get("claimed_epsilon") is None:
        raise UsageError(
            "plan: give --target-eps X, --claim EPS (games to refute it) and/or --games N"
        )
    p = spec.pipeline
    plan = plan_pipeline(
        p.tune,
        p.score,
        data=p.data,
        canary=p.canary,
        delta=settings.get("delta", 1e-5),
        pilot=args.pilot or 200,
        target_eps=args.target_eps,
        claimed_epsilon=settings.get("claimed_epsilon"),
        games=args.games,
        power=args.power,
        confidence=settings.get("confidence", 0.95),
        rule=settings.get("rule", "split"),
        seed=args.seed if args.seed is not None else settings.get("seed", 0) + 1,  # not the audit's
        jobs=args.jobs,
        progress=sys.stderr.isatty(),
    )
    print(json.dumps(plan.to_dict(), allow_nan=False) if args.json else plan.summary())
    return 0


def _command_plan(args) -> int:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.experiments.config import load_config

    if _is_pipeline(args.config):
        return _command_plan_pipeline(args)
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
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.experiments.config_plan import plan_spec

    exact = None
    monotone = spec.game.score == "monotone"
    if spec.game.kind in ("reduced", "discrete") and spec.delta > 0 and monotone:
        # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
        from auditsel.accounting.exact import exact_epsilon
        from auditsel.selection import winner_law

        exact = exact_epsilon(winner_law(spec.base.reduced(), spec.rounds), spec.delta)
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
    g = spec.game
    print(
        f"{spec.name}: valid {g.threshold} audit at {g.confidence:.0%} confidence, delta = {spec.delta:g}, "
        f"trade-off curve {plan.curve}" + (f", exact eps {exact:.4f}" if exact is not None else "")
    )
    if not monotone:
        # deferred: as above
        from auditsel.experiments.experiment import game_score

        best = "" if plan.game_eps is None else f"; its best test's eps {plan.game_eps:.4f}"
        print(f"  score played: {game_score(spec).describe()}{best}")
    if args.target_eps is not None:
        games = f"{plan.games:,}" if plan.games is not None else "more than 10^12"
        print(f"  games for P(eps_L >= {args.target_eps:g}) >= {args.power:g}: {games}")
    if args.games is not None:
        print(
            f"  {args.games:,} games: E[eps_L] = {plan.expected_eps:.4f}"
            + (
                f", P(eps_L >= {args.target_eps:g}) = {plan.prob_at_games:.3f}"
                if plan.prob_at_games is not None
                else ""
            )
        )
    print(
        "  (the best threshold on the curve, as a threshold fixed in advance would be: rules that "
        "choose it from the data certify somewhat less)"
    )
    return 0


def _command_calibrate(args) -> int:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.accounting.calibrate import calibrate
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
        rtol=args.rtol,
        baseline=not args.no_baseline,
        assume=args.assume,
    )
    if args.json:
        print(json.dumps({"name": spec.name, **result.to_dict()}, allow_nan=False))
        return 0
    print(calibration_text(spec.name, result))
    return 0


def calibration_text(name: str, c) -> str:
    """The calibration as lines: the answer, its bound, dp_accounting's, the gain."""
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
    if c.baseline_value is None:
        lines.append(f"  dp_accounting     n/a ({c.baseline_note})")
    else:
        lines.append(
            f"  dp_accounting     {c.baseline_value:.6g}   RepeatAndSelectDpEvent, RdpAccountant, "
            f"the same budget (our bound there: eps = {c.baseline_epsilon:.4f})"
        )
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
    lines.append(
        f"  {c.evaluations} evaluations of the bounds, {c.seconds:.1f} s"
        + ("" if c.baseline_seconds is None else f" ({c.baseline_seconds:.1f} s dp_accounting)")
    )
    return "\n".join(lines)


def _audit_one_run(args, score, member) -> int:
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.auditing.one_run_analysis import GdpFamily, PureDpFamily, audit_one_run

    family = {"gdp": GdpFamily, "pure_dp": PureDpFamily}[args.family]()
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
        f"delta = {args.delta:g}, {args.confidence:.0%} confidence split over {bound.grid_size} (k+, k-) pairs"
    )
    print(
        f"  eps_L [SNJ23]        {bound.eps_snj23:8.4f}   (valid; {d['k_plus']} top / {d['k_minus']} "
        f"bottom guesses, {d['correct']} of {d['guesses']} correct)"
    )
    print(
        f"  eps_L [MMC24] {bound.mmc24_family:<6} {bound.eps_mmc24:8.4f}   (valid if the trade-off lies in the "
        f"{bound.mmc24_family} family; theta_L = {bound.mmc24_theta:.4f})"
    )
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        command = {
            "audit-scores": _command_audit_scores,
            "plan": _command_plan,
            "calibrate": _command_calibrate,
            "reproduce": _command_reproduce,
            "audit-pipeline": _command_audit_pipeline,
        }.get(args.command, _command_run)
        code = command(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except UsageError as err:
        print(f"auditsel: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "auditsel: interrupted; rerun the same command to resume from the checkpoints",
            file=sys.stderr,
        )
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except MemoryError as err:
        print(
            f"auditsel: error: out of memory ({_one_line(err, 120) or 'MemoryError'}): the "
            f"config needs more memory than this machine has; lower game.trials or set "
            f"game.stream: true, or use a smaller model (game.hidden, game.max_batch_runs)",
            file=sys.stderr,
        )
        return 2
    except Exception as err:
        if isinstance(err, _bad_input_types()):
            print(f"auditsel: error: {_one_line(err)}", file=sys.stderr)
            return 2
        environment = _environment_failure(err)
        if environment is not None:
            print(f"auditsel: error: {environment}", file=sys.stderr)
            return EXIT_ENVIRONMENT
        if os.environ.get("AUDITSEL_DEBUG"):
            raise
        where = _write_traceback(err)
        print(
            f"auditsel: internal error (a bug, not your input): {type(err).__name__}: "
            f"{_one_line(err, 200)}; traceback written to {where}",
            file=sys.stderr,
        )
        return 1


def _environment_failure(err: BaseException) -> str | None:
    """The one line for a failure of the environment (a full disk, an I/O error), else None.
    joblib hands a worker's OSError over as itself; a chained cause is looked at too."""
    seen: BaseException | None = err
    while seen is not None and not isinstance(seen, OSError):
        seen = seen.__cause__
    if not isinstance(seen, OSError) or seen.errno not in (*DISK_FULL, errno.EIO):
        return None
    where = f" writing {seen.filename}" if seen.filename else ""
    if seen.errno == errno.EIO:
        return f"input/output error{where} ({seen.strerror}); check the disk, then rerun to resume"
    return (
        f"no space left on the device{where} ({seen.strerror}); free some space (or choose "
        f"another --out) and rerun the same command: finished checkpoints are kept and resumed"
    )


def _closed_pipe() -> int:
    """stdout's reader went away (`| head`): stop quietly, as Unix tools do (128 + SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes at exit
    except (OSError, ValueError):
        pass
    return EXIT_PIPE


def _one_line(err: BaseException, limit: int = 400) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _write_traceback(err: BaseException) -> str:
    """The full traceback in a new file under the temp directory (never inside --out)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fd, path = tempfile.mkstemp(prefix=f"auditsel-traceback-{stamp}-", suffix=".txt")
    with os.fdopen(fd, "w") as handle:
        handle.write(f"auditsel {__version__}, argv: {sys.argv!r}\n")
        handle.write("".join(traceback.format_exception(type(err), err, err.__traceback__)))
    return path


if __name__ == "__main__":
    sys.exit(main())
