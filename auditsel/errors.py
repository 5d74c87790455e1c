"""Bad input: the one exception type, and the one family of checkers that raise it.

Contract (docs/explanation/architecture.md, "Errors": the one exception meaning "the user can
fix this", a domain object naming its own parameter, `err.within("base")` adding the config's
path): the CLI prints a `ConfigError(field, message)` as one line and exits with code 2, writing
nothing (every other exception is an internal failure, exit 1); `str(err)` is
`"<field>: <message>"` (just the message when `field` is empty).

The checkers (`number`, `integer`, `choice`, `mapping`, `require`) return the checked value
(converted: `number` gives a float, `integer` an int) or raise a ConfigError naming `field`.
Messages show the offending value with `shown(value)`: as the user wrote it (a numpy scalar as
the plain number, `1.1` and not `np.float64(1.1)`), cut to 80 characters.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, SupportsFloat, SupportsInt, TypeGuard, TypeVar, cast

SHOWN_CHARS = 80

#: The ranges of the fields that a config and a command-line option both set, declared once
#: here at the bottom layer: auditsel.experiments.config checks the config's fields with them,
#: the threshold rules (auditsel.auditing.rules) their seeds and grids, and auditsel.cli its
#: options (which cannot import the config module: `auditsel --help` stays light).
MAX_TRIALS = 10**10
MAX_SEED = 2**63 - 1
MAX_GRID = 100_000
LIMITS: dict[str, tuple[int, int]] = {
    "game.trials": (2, MAX_TRIALS),
    "game.seed": (0, MAX_SEED),
    "game.thresholds": (1, MAX_GRID),
}
T = TypeVar("T")


class ConfigError(ValueError):
    """Bad user input: `field` is the (dotted) parameter name, `message` says what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)

    def within(self, prefix: str) -> ConfigError:
        """The same error with `prefix.` in front of its field (the config layer's path)."""
        return ConfigError(f"{prefix}.{self.field}" if self.field else prefix, self.message)

    def __reduce__(self) -> tuple[Any, tuple[type[ConfigError], str, str]]:
        # picklable (joblib workers) also for subclasses with other __init__s
        return (_rebuild, (type(self), self.field, self.message))


def _rebuild(cls: type[ConfigError], field: str, message: str) -> ConfigError:
    err: ConfigError = cls.__new__(cls)
    ConfigError.__init__(err, field, message)
    return err


def shown(value: object) -> str:
    """A value as messages show it: repr, numpy scalars as plain numbers, at most SHOWN_CHARS."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        value = cast(Any, value).item()  # np.float64(1.1) -> 1.1, np.int64(3) -> 3
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def interval(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> str:
    """'[lo, hi)' and friends, as the messages write ranges (an infinite end is open)."""
    lo_open, hi_open = lo_open or lo == -math.inf, hi_open or hi == math.inf
    return f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def require(condition: bool, field: str, message: str) -> None:
    """Raise ConfigError(field, message) unless condition holds."""
    if not condition:
        raise ConfigError(field, message)


def _is_real(value: object) -> TypeGuard[SupportsFloat]:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    # numpy scalars without importing numpy here
    return (
        type(value).__module__ == "numpy"
        and getattr(value, "ndim", 1) == 0
        and type(value).__name__.startswith(("float", "int", "uint"))
    )


def number(
    value: object,
    field: str,
    lo: float = -math.inf,
    hi: float = math.inf,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """A finite real in the interval (bools and strings refused); returned as a float."""
    rng = interval(lo, hi, lo_open, hi_open)
    if not _is_real(value):
        raise ConfigError(field, f"must be a number in {rng}, got {shown(value)}")
    x = float(value)
    ok = math.isfinite(x) and (x > lo if lo_open else x >= lo) and (x < hi if hi_open else x <= hi)
    if not ok:
        raise ConfigError(field, f"must be in {rng}, got {shown(value)}")
    return x


MAX_JOBS = 1024


def jobs(value: object, field: str = "jobs") -> int:
    """A number of workers: a non-zero integer in [-MAX_JOBS, MAX_JOBS] (-1 = all cores), as
    joblib reads it."""
    n = integer(value, field, -MAX_JOBS, MAX_JOBS)
    if n == 0:
        raise ConfigError(
            field,
            f"must be a non-zero integer in [-{MAX_JOBS}, {MAX_JOBS}] (-1 = all cores), got 0",
        )
    return n


def integer(value: object, field: str, lo: int, hi: int | None = None) -> int:
    """An integer in [lo, hi] (an integral float such as 1e3 is accepted); returned as an int."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif _is_real(value) and not isinstance(value, (int, float)) and float(value).is_integer():
        value = int(cast(SupportsInt, value))  # a numpy scalar: exact, also above 2^53
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < lo
        or (hi is not None and value > hi)
    ):
        upper = f"{hi}" if hi is not None else "inf"
        raise ConfigError(field, f"must be an integer in [{lo}, {upper}], got {shown(value)}")
    return value


def choice(value: T, field: str, allowed: Iterable[object]) -> T:
    """One of `allowed` (compared by type and value, so True is not 1)."""
    if not any(value is a or (type(value) is type(a) and value == a) for a in allowed):
        names = ", ".join(str(a).lower() if isinstance(a, bool) else str(a) for a in allowed)
        raise ConfigError(field, f"must be one of {names}, got {shown(value)}")
    return value


def mapping(value: object, field: str) -> Mapping[str, Any]:
    """A mapping of keys to values (a config section)."""
    if not isinstance(value, Mapping):
        raise ConfigError(field, f"must be a mapping of keys to values, got {type(value).__name__}")
    return value


def percent(level: float) -> str:
    """A confidence as a percentage with as many decimals as it needs (at most 4): 0.95 ->
    "95%", 0.975 -> "97.5%", 0.999 -> "99.9%" (never rounded up to "100%")."""
    text = f"{100 * level:.4f}"
    for digits in range(4):
        shorter = f"{100 * level:.{digits}f}"
        if abs(float(shorter) - 100 * level) < 1e-9:
            text = shorter
            break
    return f"{text}%"
