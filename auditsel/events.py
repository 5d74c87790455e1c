"""Any mechanism dp_accounting describes, as a mechanism pair: a `DpEvent` as the base run.

Contract. `as_pair(base)` turns what a user passes as the base of a tuning run into a mechanism
pair (the shape of `auditsel.mechanisms`), so that every bound, the panel, `tuning_epsilon` and
`calibrate` accept a dp_accounting `DpEvent` wherever they accept a pair:

* a pair is returned as it is;

* an event whose pair is known exactly becomes that pair, so that the exact curve of the
  released winner and every bound of the pair apply: `GaussianDpEvent(sigma)` and its
  compositions (self-composed, composed) are one Gaussian, `GaussianBase(sqrt(sum n_i /
  sigma_i^2))` (N(0, 1) vs N(mu, 1) with the composed mu: a sensitivity-1 Gaussian query at
  noise sigma is N(0, sigma^2) vs N(1, sigma^2)); `SelfComposedDpEvent(PoissonSampledDpEvent(q,
  GaussianDpEvent(sigma)), N)` is one DP-SGD run, `DpsgdBase(sigma, N, q, "pld")`;

* any other event becomes an `EventBase`: its RDP curve is dp_accounting's `RdpAccountant` for
  the event, its privacy profile delta(eps) the pessimistic (connect-the-dots) PLD of
  `PLDAccountant` (value discretization `PLD_DISCRETIZATION`), both through their public API,
  under add/remove neighbours. The profile is an upper bound on the true one, so the profile
  bounds stay rigorous; the RDP curve is dp_accounting's, as in its own RepeatAndSelectDpEvent.
  There is no reduced game, so `exact` and `improved_rdp` do not apply.

`EventBase.pure_epsilon` is computed from the structure of the event: Laplace with noise b
(sensitivity 1) is (1/b)-DP, a discrete Laplace with parameter a and sensitivity s is (a s)-DP,
compositions add, a Poisson-sampled eps-DP step at rate q is log(1 + q (e^eps - 1))-DP
(amplification by Poisson subsampling under add/remove), and anything with a Gaussian part is
not pure DP (inf). It gives [PS22] Corollary 3 ((2 + eta) eps for TNB) at every delta.

`LaplaceBase(noise_multiplier, steps, sample_rate)` is the config form of the commonest pure-DP
base: N (Poisson-subsampled) Laplace steps, i.e. SelfComposedDpEvent(PoissonSampledDpEvent(q,
LaplaceDpEvent(b)), N). dp_accounting is imported when an event is built or asked for numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike

from auditsel.errors import ConfigError, choice, number
from auditsel.mechanisms import (
    PLD_DISCRETIZATION,
    RDP_ORDERS,
    DpsgdBase,
    GaussianBase,
    Neighbouring,
    check_steps,
    quiet_absl,
    steps_fields,
)
from auditsel.numerics import FloatArray, check_deltas
from auditsel.roles import AccountedPair, MechanismPair

if TYPE_CHECKING:
    from dp_accounting import DpEvent

_ACCOUNTANTS = ("pld", "rdp")


def is_pair(obj: object) -> bool:
    """Whether `obj` is a mechanism pair (`auditsel.roles.MechanismPair`)."""
    return isinstance(obj, MechanismPair)


def _is_event(obj: object) -> bool:
    try:
        from dp_accounting import dp_event  # deferred: dp_accounting is heavy to import
    except ImportError:  # pragma: no cover - dp-accounting is a dependency
        return False
    return isinstance(obj, dp_event.DpEvent)


def as_pair(base: object, field_name: str = "base") -> AccountedPair:
    """A mechanism pair for `base`: a pair as it is, a dp_accounting DpEvent as the exact pair
    where one is known (Gaussian compositions, DP-SGD), else as an `EventBase`; anything else
    is a ConfigError naming `field_name`."""
    if is_pair(base):
        return cast("AccountedPair", base)  # the built-in pairs are; the bounds read the rest
    if not _is_event(base):
        raise ConfigError(
            field_name,
            "must be a mechanism pair (GaussianBase, FiniteOutputBase, DpsgdBase, LaplaceBase, "
            f"EventBase) or a dp_accounting DpEvent, got {type(base).__name__}",
        )
    gaussian = _gaussian_mu(base)
    if gaussian is not None:
        return GaussianBase(gaussian)
    dpsgd = _sampled_steps(base, "GaussianDpEvent")
    if dpsgd is not None and dpsgd[2] is not None:
        return DpsgdBase(dpsgd[0], dpsgd[1], dpsgd[2], "pld")
    return EventBase(base)


def _gaussian_mu(event: DpEvent) -> float | None:
    """mu of the one Gaussian an all-Gaussian composition is (None if it is not one)."""
    from dp_accounting import dp_event as ev  # deferred: dp_accounting is heavy to import

    def inverse_variance(e: DpEvent) -> float | None:
        if isinstance(e, ev.GaussianDpEvent):
            return None if e.noise_multiplier <= 0 else 1.0 / e.noise_multiplier**2
        if isinstance(e, ev.SelfComposedDpEvent):
            inner = inverse_variance(e.event)
            return None if inner is None else e.count * inner
        if isinstance(e, ev.ComposedDpEvent) and e.events:
            parts = [inverse_variance(x) for x in e.events]
            known = [p for p in parts if p is not None]
            return None if len(known) < len(parts) else float(sum(known))
        return None

    total = inverse_variance(event)
    return None if total is None or total <= 0 else math.sqrt(total)


def _sampled_steps(event: DpEvent, step: str) -> tuple[float, int, float | None] | None:
    """(noise multiplier, N, q) of N self-composed steps, each the dp_accounting event class
    `step` or PoissonSampledDpEvent(q, one) (q None when not sampled); None for any other."""
    from dp_accounting import dp_event as ev  # deferred: dp_accounting is heavy to import

    steps, inner, rate = 1, event, None
    if isinstance(inner, ev.SelfComposedDpEvent):
        steps, inner = inner.count, inner.event
    if isinstance(inner, ev.PoissonSampledDpEvent):
        rate, inner = inner.sampling_probability, inner.event
    if (
        isinstance(inner, getattr(ev, step))
        and inner.noise_multiplier > 0
        and 0 < (1.0 if rate is None else rate) <= 1
        and steps >= 1
    ):
        return float(inner.noise_multiplier), int(steps), None if rate is None else float(rate)
    return None


def laplace_steps(pair: object) -> tuple[float, int, float] | None:
    """(b, N, q) where the base is N (Poisson-subsampled at rate q) Laplace steps of noise b and
    sensitivity 1, its worst-case pair being known (`accounting.attack.laplace_step`): a
    `LaplaceBase`, or an `EventBase` whose event is LaplaceDpEvent(b), PoissonSampledDpEvent(q,
    LaplaceDpEvent(b)) or N self-compositions of one of them. None for any other base."""
    if isinstance(pair, LaplaceBase):
        return pair.noise_multiplier, pair.steps, pair.sample_rate
    found = _sampled_steps(pair.event, "LaplaceDpEvent") if isinstance(pair, EventBase) else None
    return None if found is None else (found[0], found[1], 1.0 if found[2] is None else found[2])


def pure_epsilon_of_event(event: DpEvent) -> float:
    """The pure-DP eps of an event from its structure (module docstring); inf if not pure."""
    from dp_accounting import dp_event as ev  # deferred: dp_accounting is heavy to import

    if isinstance(event, ev.NoOpDpEvent):
        return 0.0
    if isinstance(event, ev.LaplaceDpEvent):
        return math.inf if event.noise_multiplier <= 0 else 1.0 / event.noise_multiplier
    if isinstance(event, ev.DiscreteLaplaceDpEvent):
        return float(event.noise_parameter * event.sensitivity)
    if isinstance(event, ev.SelfComposedDpEvent):
        inner = pure_epsilon_of_event(event.event)
        return 0.0 if event.count == 0 else event.count * inner
    if isinstance(event, ev.ComposedDpEvent):
        return float(sum(pure_epsilon_of_event(e) for e in event.events))
    if isinstance(event, ev.PoissonSampledDpEvent):
        inner = pure_epsilon_of_event(event.event)
        q = event.sampling_probability
        if not math.isfinite(inner):
            return math.inf
        return math.log1p(q * math.expm1(inner)) if inner < 700 else inner + math.log(q)
    return math.inf


class _EventPair:
    """The pair surface of a mechanism given by a dp_accounting event (see the module
    docstring); subclasses provide `event`, `accountant` and `describe`."""

    neighbouring: ClassVar[Neighbouring] = Neighbouring.ADD_REMOVE
    rdp_orders: ClassVar[tuple[float, ...]] = RDP_ORDERS
    profile_is_exact: ClassVar[bool] = False  # pessimistic PLD: an upper bound
    reduction_is_exact: ClassVar[bool] = False
    region: ClassVar[None] = None
    mu: ClassVar[None] = None
    mu_gdp: ClassVar[None] = None
    event: DpEvent
    accountant: str

    def _key(self) -> str:
        return repr(self.event)

    def reduced(self) -> None:
        """No reduced game: the exact winner law is not known for a general event."""
        return None

    @property
    def pure_epsilon(self) -> float:
        return pure_epsilon_of_event(self.event)

    @property
    def supports_rdp(self) -> bool:
        return _supports(self._key(), self.event)[0]

    @property
    def supports_pld(self) -> bool:
        return _supports(self._key(), self.event)[1]

    def rdp(self, orders: ArrayLike) -> FloatArray:
        """RDP of one run at each order (dp_accounting's RdpAccountant; inf if unsupported)."""
        orders = np.asarray(orders, dtype=float)
        if not self.supports_rdp:
            return np.full(orders.shape, np.inf)
        return cast("FloatArray", _rdp(self._key(), self.event, tuple(orders.tolist())).copy())

    def delta(self, eps: ArrayLike) -> FloatArray | float:
        """delta(eps) from the pessimistic PLD (max over add/remove), vectorised: the PLD's own
        values on `profile_grid()` (one query), joined by chords in alpha = e^eps in between.
        The PLD's delta is convex in alpha (a sum of [p (1 - alpha e^-l)]_+ terms), so a chord
        lies above it: an upper bound on the PLD's value, itself one on the truth. 1 where the
        PLD accountant does not support the event (vacuous, never below the truth)."""
        e = np.asarray(eps, dtype=float)
        flat = np.atleast_1d(e).ravel()
        if not self.supports_pld:
            out = np.ones(flat.shape)
        else:
            grid, values = _profile_table(self._key(), self.event)
            out = _chords(grid, values, flat)
            low = flat < 0  # outside the table: ask the PLD itself
            if np.any(low):
                out[low] = np.asarray(_pld(self._key(), self.event).get_delta(flat[low]))
            out = np.clip(out, 0.0, 1.0)
        return out.reshape(e.shape) if e.ndim else float(out[0])

    def profile_epsilon(self, delta: float) -> float:
        """Smallest eps with delta(eps) <= delta (the PLD's own inverse); the pure eps at 0."""
        delta = float(check_deltas(delta)[0])
        if delta == 0:
            return self.pure_epsilon
        if not self.supports_pld:
            return math.inf
        return float(_pld(self._key(), self.event).get_epsilon(delta))

    def epsilon(self, delta: float) -> float:
        """eps_B of one run at delta with this pair's accountant (the other one where this one
        does not support the event); the pure eps at delta = 0."""
        delta = float(check_deltas(delta)[0])
        if delta == 0:
            return self.pure_epsilon
        if (self.accountant != "rdp" and self.supports_pld) or not self.supports_rdp:
            return self.profile_epsilon(delta)
        import dp_accounting as dpa  # deferred: heavy

        with quiet_absl():
            acc = dpa.rdp.RdpAccountant(list(RDP_ORDERS)).compose(self.event)
            return float(acc.get_epsilon(delta))

    def profile_grid(self) -> FloatArray:
        """eps where the bounds scan the profile: every 4th point of the table of `delta`."""
        if not self.supports_pld:
            return np.linspace(0.0, 1.0, 11)
        return cast("FloatArray", _profile_table(self._key(), self.event)[0][::4].copy())


@dataclass(frozen=True)
class EventBase(_EventPair):
    """One base run described by a dp_accounting DpEvent (module docstring)."""

    event: DpEvent
    accountant: str = "pld"

    def __post_init__(self) -> None:
        if not _is_event(self.event):
            raise ConfigError(
                "event", f"must be a dp_accounting DpEvent, got {type(self.event).__name__}"
            )
        choice(self.accountant, "accountant", _ACCOUNTANTS)
        from dp_accounting import dp_event as ev  # deferred: dp_accounting is heavy to import

        if _contains(self.event, ev.NonPrivateDpEvent):
            raise ConfigError("event", "is not private (NonPrivateDpEvent): eps is inf")
        rdp_ok, pld_ok = _supports(self._key(), self.event)
        if not (rdp_ok or pld_ok):
            raise ConfigError(
                "event",
                f"dp_accounting's RDP and PLD accountants (add/remove) both refuse {self.event}",
            )

    def describe(self) -> dict[str, Any]:
        return {"kind": "event", "event": repr(self.event), "accountant": self.accountant}


@dataclass(frozen=True)
class LaplaceBase(_EventPair):
    """N (Poisson-subsampled) Laplace steps with noise multiplier b (sensitivity 1): one run is
    SelfComposedDpEvent(PoissonSampledDpEvent(q, LaplaceDpEvent(b)), N); pure eps
    N log(1 + q (e^(1/b) - 1)), which is N / b at q = 1."""

    noise_multiplier: float
    steps: int = 1
    sample_rate: float = 1.0
    accountant: str = "pld"
    event: DpEvent = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_steps(self)
        import dp_accounting as dpa  # deferred: heavy

        step = dpa.LaplaceDpEvent(self.noise_multiplier)
        if self.sample_rate < 1:
            step = dpa.PoissonSampledDpEvent(self.sample_rate, step)
        event = step if self.steps == 1 else dpa.SelfComposedDpEvent(step, self.steps)
        object.__setattr__(self, "event", event)

    @classmethod
    def from_epsilon(
        cls, epsilon: float, steps: int = 1, sample_rate: float = 1.0, accountant: str = "pld"
    ) -> LaplaceBase:
        """The base whose one run is epsilon-DP (pure): b solves N log(1 + q (e^(1/b) - 1)) = eps."""
        epsilon = number(epsilon, "epsilon", 0, math.inf, lo_open=True)
        probe = cls(1.0, steps, sample_rate, accountant)  # validates the other fields
        per_step = epsilon / probe.steps
        q = probe.sample_rate
        # e^(1/b) = 1 + (e^per_step - 1)/q
        inv_b = math.log1p(math.expm1(per_step) / q) if per_step < 700 else per_step - math.log(q)
        return cls(1.0 / inv_b, probe.steps, q, accountant)

    def describe(self) -> dict[str, Any]:
        return {"kind": "laplace", **steps_fields(self), "pure_epsilon": self.pure_epsilon}


def _contains(event: DpEvent, kind: type[Any]) -> bool:
    from dp_accounting import dp_event as ev  # deferred: dp_accounting is heavy to import

    if isinstance(event, kind):
        return True
    if isinstance(event, ev.ComposedDpEvent):
        return any(_contains(e, kind) for e in event.events)
    inner = getattr(event, "event", None)
    return inner is not None and _contains(inner, kind)


# --- dp_accounting, cached by the event's repr (events with lists are not hashable) ---------


_T = TypeVar("_T")


def _cached(fn: Callable[..., _T]) -> Callable[..., _T]:
    """lru_cache keyed on (key, extra) only: the event itself rides along uncompared: the
    wrapped function is called as f(key, event, *extra)."""
    store: dict[tuple[object, ...], _T] = {}

    def wrapper(key: str, event: DpEvent, *extra: object) -> _T:
        k = (key, *extra)
        if k not in store:
            if len(store) >= 64:
                store.pop(next(iter(store)))
            store[k] = fn(event, *extra)
        return store[k]

    return wrapper


@_cached
def _supports(event: DpEvent) -> tuple[bool, bool]:
    import dp_accounting as dpa  # deferred: dp_accounting is heavy to import

    with quiet_absl():
        return (
            dpa.rdp.RdpAccountant().supports(event),
            dpa.pld.PLDAccountant().supports(event),
        )


@_cached
def _rdp(event: DpEvent, orders: tuple[float, ...]) -> FloatArray:
    import dp_accounting as dpa  # deferred: dp_accounting is heavy to import

    with quiet_absl():
        acc = dpa.rdp.RdpAccountant(list(orders)).compose(event)
    return np.asarray(acc.rdp, dtype=float)


def _chords(grid: FloatArray, values: FloatArray, eps: FloatArray) -> FloatArray:
    """Linear interpolation in alpha = e^eps between the table's points (exact at them); the
    last value beyond the table (delta is non-increasing); callers handle eps < 0."""
    i = np.clip(np.searchsorted(grid, eps, side="right") - 1, 0, len(grid) - 2)
    a0, a1 = np.exp(grid[i]), np.exp(grid[i + 1])
    with np.errstate(over="ignore", invalid="ignore"):
        t = np.clip((np.exp(np.minimum(eps, grid[-1])) - a0) / (a1 - a0), 0.0, 1.0)
    out = values[i] + t * (values[i + 1] - values[i])
    return cast("FloatArray", np.where(eps >= grid[-1], values[-1], out))


#: points of the tabulated profile (one vectorised PLD query; the chords between them)
PROFILE_POINTS = 6001


@_cached
def _profile_table(event: DpEvent) -> tuple[FloatArray, FloatArray]:
    """(eps grid, the PLD's delta there): from 0 to 1.5 times eps at delta = 1e-12 (at most
    the pure eps, beyond which only the PLD's truncation mass is left)."""
    pld = _pld(repr(event), event)
    hi = float(pld.get_epsilon(1e-12))
    pure = pure_epsilon_of_event(event)
    if not math.isfinite(hi):
        hi = 50.0
    hi = max(min(1.5 * hi, pure * 1.001 + 1e-3) if math.isfinite(pure) else 1.5 * hi, 1e-3)
    grid = np.linspace(0.0, hi, PROFILE_POINTS)
    return grid, np.asarray(pld.get_delta(grid), dtype=float)


@_cached
def _pld(event: DpEvent) -> Any:  # a dp_accounting PLDAccountant
    import dp_accounting as dpa  # deferred: dp_accounting is heavy to import

    return dpa.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION).compose(event)
