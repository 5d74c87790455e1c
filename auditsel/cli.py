"""Command line: `auditsel run [CONFIG] [--out DIR] [--trials N] [--seed S] [--jobs J]`.

Exit codes: 0 success; 2 bad config, argument or checkpoint (one line on stderr, nothing
written); 1 internal failure.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from auditsel import __version__

__all__ = ["main"]


class UsageError(Exception):
    """A user-fixable problem: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the usage block too)
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _positive_int(name):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1, got {value}")
        return value
    return parse


def _seed(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed must be an integer in [0, 2^63), got {text!r}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"--seed must be an integer in [0, 2^63), got {value}")
    return value


def _jobs(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs must be a non-zero integer (-1 = all cores), got {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("--jobs must be a non-zero integer (-1 = all cores), got 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="auditsel", description="Audit the privacy of DP hyperparameter tuning.")
    parser.add_argument("--version", action="version", version=f"auditsel {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = sub.add_parser("run", help="run one experiment (the embedded quickstart by default)")
    run.add_argument("config", nargs="?", help="YAML config (default: the embedded quickstart)")
    run.add_argument("--out", help="output directory (default: results/<name>/)")
    run.add_argument("--trials", type=_positive_int("--trials"), help="override game.trials")
    run.add_argument("--seed", type=_seed, help="override game.seed")
    run.add_argument("--jobs", type=_jobs, default=1, help="joblib workers (-1 = all cores)")
    run.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    run.add_argument("--quiet", action="store_true", help="do not print the table")
    return parser


def _prepare_out_dir(path: Path) -> None:
    """Create the output directory and check it is writable, before any work starts."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-"):
            pass
    except OSError as err:
        raise UsageError(f"--out: cannot write to {path} ({err.strerror or err}); "
                         f"choose a writable directory") from None


def _write_outputs(out_dir: Path, result: dict, artefacts: dict) -> list[Path]:
    """Write result.json, report.md and plots to a staging folder, then move them in place."""
    from auditsel.report import markdown_report, write_plots

    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=out_dir))
    try:
        plots = write_plots(result, artefacts, staging)
        (staging / "report.md").write_text(markdown_report(result, plots))
        (staging / "result.json").write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
        names = plots + ["report.md", "result.json"]  # result.json last: its presence means done
        for name in names:
            os.replace(staging / name, out_dir / name)
        return [out_dir / n for n in names]
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _command_run(args) -> int:
    from auditsel.config import ConfigError, default_config_path, load_config
    from auditsel.experiment import run_experiment
    from auditsel.game import CheckpointError
    from auditsel.report import text_table

    config_path = Path(args.config) if args.config else default_config_path()
    try:
        spec = load_config(config_path)
        overrides = {k: v for k, v in (("trials", args.trials), ("seed", args.seed)) if v is not None}
        if overrides:
            if spec.game is None:
                raise UsageError(f"--{next(iter(overrides))}: {config_path} has no game section; "
                                 f"add one or drop the option")
            if overrides.get("trials", 2) < 2:
                raise UsageError("--trials: must be >= 2")
            spec = spec.with_game(**overrides)
    except ConfigError as err:
        raise UsageError(f"{config_path}: {err}") from None
    out_dir = Path(args.out) if args.out else Path("results") / spec.name
    _prepare_out_dir(out_dir)
    try:
        result, artefacts = run_experiment(spec, out_dir, jobs=args.jobs,
                                           progress=not args.no_progress and sys.stderr.isatty())
    except CheckpointError as err:
        raise UsageError(str(err)) from None
    except ValueError as err:  # a setting only checkable with data (e.g. too few trials to split)
        raise UsageError(str(err)) from None
    written = _write_outputs(out_dir, result, artefacts)
    if not args.quiet:
        print(text_table(result))
        print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        return _command_run(args)
    except UsageError as err:
        print(f"auditsel: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("auditsel: interrupted; rerun the same command to resume from the checkpoints",
              file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - internal failure: one line, exit 1
        if os.environ.get("AUDITSEL_DEBUG"):
            raise
        print(f"auditsel: internal error: {type(err).__name__}: {err} "
              f"(set AUDITSEL_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
