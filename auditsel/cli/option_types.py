"""argparse types for the command line's options, and the parser class every command uses.

Contract: each type parses one option's text and either returns a value inside the option's
stated range or raises `argparse.ArgumentTypeError` with one line naming the option and the
allowed range (exit 2 through `CliParser.error`). The integer ranges are those of the config
fields the options override (`auditsel.experiments.config.LIMITS`; a test checks they agree:
the config module is too heavy to import for `auditsel --help`).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from auditsel.cli.exit_status import StdoutFailed, UsageError
from auditsel.errors import MAX_JOBS

__all__ = [
    "MAX_JOBS",
    "MAX_SPLITS",
    "SEED_RANGE",
    "THRESHOLDS_RANGE",
    "TRIALS_RANGE",
    "CliParser",
    "finite_float",
    "int_option",
    "integer_text",
    "jobs_option",
    "nonnegative_float",
    "positive_float",
    "unit_interval",
]

TRIALS_RANGE = (2, 10**10)
SEED_RANGE = (0, 2**63 - 1)
THRESHOLDS_RANGE = (1, 100_000)
MAX_SPLITS = 1000


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (exit 2) and which reads `-1e-5` as a value."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # `--delta -1e-5` is a value, not an option: argparse's own pattern misses exponents
        self._negative_number_matcher = re.compile(
            r"^-(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^-(?:inf|nan)$", re.IGNORECASE
        )

    def error(self, message: str) -> NoReturn:
        """One line, exit 2 (argparse would print the usage block too)."""
        raise UsageError(f"{message} (see `{self.prog} --help`)")

    def _print_message(self, message: str, file: Any = None) -> None:
        """argparse swallows a failed write: not here (a full stdout is exit 74)."""
        if message:
            try:
                (file or sys.stderr).write(message)
            except BrokenPipeError:
                raise
            except OSError as err:
                raise StdoutFailed(err.strerror or type(err).__name__) from None


def integer_text(text: str) -> int | None:
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


def int_option(name: str, lo: int, hi: int, allowed: str | None = None) -> Callable[[str], int]:
    """An argparse type for an integer option in [lo, hi] (the range of the config field it
    sets); the message names the option and its range."""
    allowed = allowed or f"an integer in [{lo}, {hi}]"

    def parse(text: str) -> int:
        value = integer_text(text)
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{name} must be {allowed}, got {text}")
        return value

    return parse


def jobs_option(text: str) -> int:
    """--jobs: a non-zero integer in [-MAX_JOBS, MAX_JOBS] (joblib's convention, -1 = all)."""
    value = integer_text(text)
    if value is None or value == 0 or abs(value) > MAX_JOBS:
        raise argparse.ArgumentTypeError(
            f"--jobs must be a non-zero integer in [-{MAX_JOBS}, {MAX_JOBS}] "
            f"(-1 = all cores), got {text}"
        )
    return value


def _number(name: str, text: str, quote: bool = False) -> float:
    try:
        return float(text)
    except ValueError:
        shown = repr(text) if quote else text
        raise argparse.ArgumentTypeError(f"{name} must be a number, got {shown}") from None


def finite_float(name: str) -> Callable[[str], float]:
    """An argparse type for any finite number."""

    def parse(text: str) -> float:
        value = _number(name, text)
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number, got {text}")
        return value

    return parse


def nonnegative_float(name: str) -> Callable[[str], float]:
    """An argparse type for a number in [0, 1000) (a claimed epsilon)."""

    def parse(text: str) -> float:
        value = _number(name, text, quote=True)
        if not (0 <= value < 1e3):
            raise argparse.ArgumentTypeError(f"{name} must be in [0, 1000), got {value:g}")
        return value

    return parse


def positive_float(name: str) -> Callable[[str], float]:
    """An argparse type for a number in (0, 1000) (a target epsilon)."""

    def parse(text: str) -> float:
        value = _number(name, text)
        if not (value > 0 and value < 1e3):
            raise argparse.ArgumentTypeError(f"{name} must be in (0, 1000), got {text}")
        return value

    return parse


def unit_interval(
    name: str, lower: float = 0.0, closed_low: bool = False
) -> Callable[[str], float]:
    """An argparse type for a number in [lower, 1) (closed below when `closed_low` or
    lower > 0), else in (lower, 1)."""

    def parse(text: str) -> float:
        value = _number(name, text)
        ok = (value >= lower if closed_low or lower > 0 else value > lower) and value < 1
        if not ok:
            low = "[" if closed_low or lower > 0 else "("
            raise argparse.ArgumentTypeError(f"{name} must be in {low}{lower:g}, 1), got {text}")
        return value

    return parse
