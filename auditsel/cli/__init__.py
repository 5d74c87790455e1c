"""Command line: `auditsel run [CONFIG] [--out DIR] [--trials N] [--seed S] [--jobs J]`,
`auditsel audit-pipeline MODULE:FUNCTION|PIPELINE.yaml [--canary ...] [--games N] [--jobs J]`,
`auditsel plan CONFIG|MODULE:FUNCTION|PIPELINE.yaml`, `auditsel calibrate CONFIG`,
`auditsel reproduce NAME`, `auditsel audit-scores FILE`.

One module per command (`auditsel.cli.command_*`: `add_parser(subparsers)` declares its
options, `run(args) -> int` runs it); this module assembles the parser (`build_parser`, which
the docs' CLI reference reads) and turns every outcome into an exit code (docs/reference/exit-codes.md):
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

Only the exception types in `exit_status.bad_input_types()` mean exit 2; a plain ValueError
raised deep in the numerics is an internal error. Heavy modules (numpy, scipy, matplotlib,
torch, ...) are imported inside the commands, so `auditsel --help` stays instant.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence

from auditsel.cli import (
    command_audit_pipeline,
    command_audit_scores,
    command_calibrate,
    command_plan,
    command_reproduce,
    command_run,
)
from auditsel.cli.exit_status import (
    EXIT_ENVIRONMENT,
    EXIT_PIPE,
    EXIT_REFUTED,
    UsageError,
    bad_input_types,
    one_line,
)
from auditsel.cli.option_types import (
    MAX_JOBS,
    MAX_SPLITS,
    SEED_RANGE,
    THRESHOLDS_RANGE,
    TRIALS_RANGE,
    CliParser,
)
from auditsel.files import DISK_FULL
from auditsel.version import __version__

__all__ = [
    "COMMANDS",
    "EXIT_ENVIRONMENT",
    "EXIT_PIPE",
    "EXIT_REFUTED",
    "MAX_JOBS",
    "MAX_SPLITS",
    "SEED_RANGE",
    "THRESHOLDS_RANGE",
    "TRIALS_RANGE",
    "UsageError",
    "build_parser",
    "main",
]

# the commands in the order `auditsel --help` lists them
COMMANDS = (
    command_run,
    command_reproduce,
    command_audit_pipeline,
    command_plan,
    command_calibrate,
    command_audit_scores,
)


def build_parser() -> argparse.ArgumentParser:
    """The `auditsel` parser: one subparser per module of COMMANDS."""
    parser = CliParser(
        prog="auditsel", description="Audit the privacy of DP hyperparameter tuning."
    )
    parser.add_argument("--version", action="version", version=f"auditsel {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=CliParser)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `auditsel ARGV` (sys.argv[1:] by default); the exit code (module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        run = {command.NAME: command.run for command in COMMANDS}[args.command]
        code = run(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except UsageError as err:
        print(f"auditsel: error: {one_line(err)}", file=sys.stderr)
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
            f"auditsel: error: out of memory ({one_line(err, 120) or 'MemoryError'}): the "
            f"config needs more memory than this machine has; lower game.trials or set "
            f"game.stream: true, or use a smaller model (game.hidden, game.max_batch_runs)",
            file=sys.stderr,
        )
        return 2
    except Exception as err:
        return _failure(err)


def _failure(err: Exception) -> int:
    """Exit 2 for bad input, 74 for the environment, else 1 with the traceback in a file."""
    if isinstance(err, bad_input_types()):
        print(f"auditsel: error: {one_line(err)}", file=sys.stderr)
        return 2
    environment = _environment_failure(err)
    if environment is not None:
        print(f"auditsel: error: {environment}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    if os.environ.get("AUDITSEL_DEBUG"):
        raise err
    where = _write_traceback(err)
    print(
        f"auditsel: internal error (a bug, not your input): {type(err).__name__}: "
        f"{one_line(err, 200)}; traceback written to {where}",
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


def _write_traceback(err: BaseException) -> str:
    """The full traceback in a new file under the temp directory (never inside --out)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fd, path = tempfile.mkstemp(prefix=f"auditsel-traceback-{stamp}-", suffix=".txt")
    with os.fdopen(fd, "w") as handle:
        handle.write(f"auditsel {__version__}, argv: {sys.argv!r}\n")
        handle.write("".join(traceback.format_exception(type(err), err, err.__traceback__)))
    return path
