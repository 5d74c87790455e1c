"""The command line's exit statuses and its own error type.

Contract (docs/reference/exit-codes.md):

* 0 success;
* 1 internal failure (a bug, e.g. a root finder that fails inside a bound): one line saying so
  and naming the file the traceback was written to; nothing half-written;
* 2 input the user can fix (config, arguments, score files, checkpoints of another experiment
  or other code, an output folder that escapes or is in use, a backend or scheduler that cannot
  be used, a device or an amount of memory the machine lacks): `UsageError` or
  `auditsel.errors.ConfigError`, one line on stderr naming the field and what is allowed;
  nothing written outside the output folder, and what this run created there removed
  (`auditsel.files`). Only the types in `BAD_INPUT` mean exit 2: a plain ValueError
  raised deep in the numerics is an internal error;
* 3 `audit-pipeline --claim EPS` refuted the claim (eps_L > EPS at the stated confidence),
  everything written as for 0; `check`: a check found that the pipeline's objects break it;
* 74 the environment failed (the disk or quota is full, an I/O error): one line; the
  checkpoints stay, rerunning the command resumes;
* 130 interrupted (Ctrl-C), 143 terminated (SIGTERM, ended as Ctrl-C ends it): the
  checkpoints stay, rerunning the command resumes;
* 141 stdout was closed by its reader (`auditsel ... | head`): quiet, as Unix tools are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from auditsel.errors import ConfigError

EXIT_ENVIRONMENT = 74  # sysexits.h EX_IOERR: a full disk, an I/O error
EXIT_PIPE = 128 + 13  # killed by SIGPIPE, as `yes | head` reports it
EXIT_REFUTED = 3  # audit-pipeline --claim: the audit ran and refuted the claim


class UsageError(Exception):
    """A user-fixable problem found by the CLI itself: printed as one line, exit code 2."""


class StdoutFailed(Exception):
    """stdout could not take what a command printed (a full disk, an I/O error): exit 74."""


#: the exception types that mean "input the user can fix" (exit 2; anything else is exit 1):
#: auditsel.errors.ConfigError (CheckpointError, BackendError and ScoreFileError derive from
#: it) and UsageError, the CLI's own
BAD_INPUT: tuple[type[Exception], ...] = (UsageError, ConfigError)


def one_line(err: BaseException | str, limit: int = 400) -> str:
    """`err`'s text on one line (whitespace runs joined), cut to `limit` characters."""
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def to_stdout(call: Callable[..., Any], *args: Any) -> Any:
    """`call(*args)`, a write or flush of standard output: a closed reader stays
    BrokenPipeError (141), any other OSError is StdoutFailed (74)."""
    try:
        return call(*args)
    except BrokenPipeError:
        raise
    except OSError as err:
        raise StdoutFailed(err.strerror or type(err).__name__) from None
