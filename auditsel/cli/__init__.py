"""Command line: `auditsel run | reproduce | audit-pipeline | check | plan | calibrate |
audit-scores`.

One module per command (`auditsel.cli.command_*`: `add_parser(subparsers)` declares its
options, `run(args) -> int` runs it); this module assembles the parser (`build_parser`, which
the docs' CLI reference reads) and turns every outcome into an exit code
(`auditsel.cli.exit_status`): docs/reference/exit-codes.md says which, for an exception raised
in the user's own code (exit 2, their traceback in a file) and for a standard output that
fails (every command, `--help` and `--version` included) too. Heavy modules are imported
inside the commands (`# deferred:`), so `auditsel --help` stays instant.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from auditsel.cli import (
    command_audit_pipeline,
    command_audit_scores,
    command_calibrate,
    command_check,
    command_plan,
    command_reproduce,
    command_run,
)
from auditsel.cli.exit_status import BAD_INPUT, StdoutFailed, one_line, to_stdout
from auditsel.cli.exit_status import EXIT_ENVIRONMENT as EXIT_ENVIRONMENT
from auditsel.cli.exit_status import EXIT_PIPE as EXIT_PIPE
from auditsel.cli.exit_status import EXIT_REFUTED as EXIT_REFUTED
from auditsel.cli.exit_status import UsageError as UsageError
from auditsel.cli.option_types import DEFAULT_OUT as DEFAULT_OUT
from auditsel.cli.option_types import MAX_SPLITS as MAX_SPLITS
from auditsel.cli.option_types import SEED_RANGE as SEED_RANGE
from auditsel.cli.option_types import THRESHOLDS_RANGE as THRESHOLDS_RANGE
from auditsel.cli.option_types import TRIALS_RANGE as TRIALS_RANGE
from auditsel.cli.option_types import CliParser
from auditsel.errors import MAX_JOBS as MAX_JOBS
from auditsel.executor import end_loky_workers
from auditsel.files import DISK_FULL
from auditsel.version import __version__

# the commands in the order `auditsel --help` lists them
COMMANDS = (
    command_run,
    command_reproduce,
    command_audit_pipeline,
    command_check,
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
    stream = sys.stdout  # while a command runs, a failed write names standard output
    sys.stdout = _GuardedStdout(stream)
    try:
        with _sigterm_interrupts():
            return _main(argv)
    finally:
        if isinstance(sys.stdout, _GuardedStdout):
            sys.stdout = stream


def _main(argv: Sequence[str] | None) -> int:
    """`main` inside its guards (SIGTERM as Ctrl-C, standard output's failures named)."""
    parser = build_parser()
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as done:  # --help, --version: the text must reach stdout
            to_stdout(sys.stdout.flush)
            return done.code if isinstance(done.code, int) else 0 if done.code is None else 2
        if args.command is None:
            parser.print_help()
            to_stdout(sys.stdout.flush)
            return 2
        run = {command.NAME: command.run for command in COMMANDS}[args.command]
        code: int = run(args)
        to_stdout(sys.stdout.flush)  # a closed pipe or a full stdout shows here, not at exit
        return code
    except UsageError as err:
        print(f"auditsel: error: {one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        end_loky_workers(kill=True)  # they would play on, then idle for minutes
        what = "terminated (SIGTERM)" if isinstance(err, Terminated) else "interrupted"
        print(
            f"auditsel: {what}; finished chunks are kept: rerun the same command to resume "
            f"from the checkpoints",
            file=sys.stderr,
        )
        return EXIT_TERMINATED if isinstance(err, Terminated) else 130
    except BrokenPipeError:
        return _closed_pipe()
    except StdoutFailed as err:
        _closed_pipe()  # no second error when Python flushes at exit
        print(f"auditsel: error: cannot write to standard output ({err})", file=sys.stderr)
        return EXIT_ENVIRONMENT
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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so that it ends as Ctrl-C does (finished chunks
    written, workers stopped, one line), with exit 143 (128 + SIGTERM)."""


EXIT_TERMINATED = 128 + signal.SIGTERM


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """While a command runs (in the main thread), SIGTERM raises `Terminated`; the previous
    handler is put back after. Forked workers restore the default (`worker_pool`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pid = os.getpid()

    def terminate(signum: int, frame: object) -> None:
        if os.getpid() != pid:  # a child forked by the user's code or a pool: end as before
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _failure(err: Exception) -> int:
    """Exit 2 for bad input (with the user's traceback in a file, for their code's errors),
    74 for the environment, 1 with a traceback file for a bug."""
    if isinstance(err, BAD_INPUT):
        user = getattr(err, "user_traceback", "")
        where = f"; your traceback: {_write_traceback(err, user)}" if user else ""
        print(f"auditsel: error: {one_line(err)}{where}", file=sys.stderr)
        return 2
    environment = _environment_failure(err)
    if environment is not None:
        try:  # stdout itself failed (full, gone): to /dev/null, no second error at exit
            sys.stdout.flush()
        except (OSError, ValueError):
            _closed_pipe()
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
    if isinstance(seen, StdoutError):  # print() itself failed: name it
        return f"cannot write to standard output ({seen.strerror})"
    if seen.errno == errno.EIO:
        return f"input/output error{where} ({seen.strerror}); check the disk, then rerun to resume"
    return (
        f"no space left on the device{where} ({seen.strerror}); free some space (or choose "
        f"another --out) and rerun the same command: finished checkpoints are kept and resumed"
    )


class StdoutError(OSError):
    """A write to standard output failed (a full device, an I/O error): the environment,
    exit 74, named as standard output (an OSError, so that an output folder keeps its files)."""


class _GuardedStdout:
    """Standard output whose failed writes say that they were standard output's
    (`StdoutError`); a closed reader stays BrokenPipeError (141)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return int(self._named(self._stream.write, text))

    def flush(self) -> None:
        self._named(self._stream.flush)

    @staticmethod
    def _named(call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as err:
            raise StdoutError(err.errno, err.strerror) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _closed_pipe() -> int:
    """stdout's reader went away (`| head`): stop quietly, as Unix tools do (128 + SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes at exit
    except (OSError, ValueError):
        pass
    return EXIT_PIPE


def _write_traceback(err: BaseException, user: str = "") -> str:
    """The full traceback in a new file under the temp directory (never inside --out): ours
    (auditsel-traceback-*), or the one of an exception raised in the user's code (`user`:
    auditsel-user-traceback-*)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    kind = "user-traceback" if user else "traceback"
    fd, path = tempfile.mkstemp(prefix=f"auditsel-{kind}-{stamp}-", suffix=".txt")
    with os.fdopen(fd, "w") as handle:
        handle.write(f"auditsel {__version__}, argv: {sys.argv!r}\n")
        handle.write(user or "".join(traceback.format_exception(type(err), err, err.__traceback__)))
    return path
