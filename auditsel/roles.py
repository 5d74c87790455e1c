"""The duck-typed roles of auditsel, as typing Protocols (PEP 544).

Objects of the package play four roles: `MechanismPair` (one base run on neighbouring data
sets), `Winner` (the exact law of the tuning protocol's released winner), `GameProtocol` (what
the game engine plays) and `Proxy` (the adversary's score). Any object with these methods plays
them too (a user's own mechanism pair, tuning protocol or attack), and a type checker checks it.

Arguments are positional-only (your own class may name them as it likes). All four are
`runtime_checkable`: `isinstance(x, MechanismPair)` checks that the methods exist
(not their signatures; mypy checks those).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike


@runtime_checkable
class MechanismPair(Protocol):
    """One base run on neighbouring data sets X, X' (`auditsel.mechanisms`: GaussianBase,
    FiniteOutputBase, DpsgdBase; `auditsel.events`: LaplaceBase, EventBase)."""

    @property
    def neighbouring(self) -> Any:
        """The neighbouring relation its statements are about (a `Neighbouring` member)."""
        ...

    @property
    def reduction_is_exact(self) -> bool:
        """Whether `reduced()` is the same privacy pair (else a heuristic reduction)."""
        ...

    def delta(self, eps: Any, /) -> Any:
        """The privacy profile: delta(eps) for a float (a float) or an array (an array)."""
        ...

    def profile_epsilon(self, delta: float, /) -> float:
        """The inverse of the profile: the smallest eps with delta(eps) <= delta."""
        ...

    def epsilon(self, delta: float, /) -> float:
        """eps_B at delta: the epsilon of one run that the user reports."""
        ...

    @property
    def pure_epsilon(self) -> float:
        """The pure-DP epsilon (delta = 0); inf where there is none."""
        ...

    def rdp(self, orders: Any, /) -> np.ndarray:
        """The RDP curve at the given orders."""
        ...

    def profile_grid(self) -> np.ndarray:
        """The eps grid the profile bounds scan."""
        ...

    def reduced(self) -> MechanismPair | None:
        """The pair whose winner law is exact (itself, or the Gaussian a DP-SGD run reduces
        to); None where no exact winner law is known (a dp_accounting event)."""
        ...

    def describe(self) -> dict[str, Any]:
        """The pair's parameters, as written to result.json."""
        ...


class AccountedPair(MechanismPair, Protocol):
    """A mechanism pair as the bounds read it (`auditsel.accounting`): the pairs of
    `auditsel.mechanisms` and `auditsel.events` add these class-level facts (None where a pair
    has none); `events.as_pair` hands every pair to the bounds as one."""

    @property
    def mu(self) -> float | None:
        """The Gaussian shift of the reduced game ([XWW24] eq. 19), None without one."""
        ...

    @property
    def mu_gdp(self) -> float | None:
        """The central-limit GDP parameter ([XWW24] Appendix A.4), None without one."""
        ...

    @property
    def rdp_orders(self) -> tuple[float, ...] | None:
        """The RDP orders of its accountant, None for the default orders."""
        ...

    @property
    def profile_is_exact(self) -> bool:
        """Whether `delta(eps)` is the exact profile (else an upper bound on it)."""
        ...

    @property
    def region(self) -> Any:
        """(w, q) -> the most powerful tests' error pair, or None (`accounting.profile`)."""
        ...


@runtime_checkable
class GameProtocol(Protocol):
    """What the game engine plays (`auditsel.games.engine.run_game`, [XWW24] Algorithm 1): one
    release per coin (trainer side)."""

    def release(self, member: np.ndarray, rng: np.random.Generator, /) -> Any:
        """Observations for the coins `member` (0: X, 1: X'), drawn from `rng`."""
        ...


@runtime_checkable
class Winner(GameProtocol, Protocol):
    """The exact law of the released winner over a pair, the reduced game
    (`auditsel.selection`: GaussianWinner, FiniteWinner)."""

    @property
    def atom(self) -> float:
        """The mass of the fixed output (K = 0), the same on X and X'."""
        ...

    def log_likelihood_ratio(self, x: Any, /) -> np.ndarray:
        """log A'(x) / A(x): the Neyman-Pearson score of a release."""
        ...


@runtime_checkable
class Proxy(Protocol):
    """The adversary's score (`attacks`) of the observations (higher = "b = 1"): one float per
    trial, shape (n,), or one row of P scores per trial, shape (n, P); it never sees the coins."""

    def __call__(self, observations: Any, /) -> ArrayLike: ...
