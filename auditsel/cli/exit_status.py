"""The command line's exit statuses and its own error type.

Contract: docs/reference/exit-codes.md (every code, its cause, what is printed and what is left
on disk). Only the types in `BAD_INPUT` mean exit 2 (input the user can fix): a plain
ValueError raised deep in the numerics is an internal error (exit 1).
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
