"""What accountants and papers claim for DP-SGD with Poisson subsampling, one function each.

A claim is an epsilon at delta that its source says upper-bounds the privacy loss of the
released model: of one DP-SGD run (N steps of the Poisson-subsampled Gaussian, noise multiplier
sigma, sample rate tau, clip norm 1) or of a tuning run (K ~ xi runs, the best released). An
audit refutes a claim when its valid lower bound eps_L exceeds it.

Neighbouring relation: every source below analyses add/remove neighbours (one example added or
removed), the relation of `auditsel.games.worst_case`'s game; each entry's `relation` says so,
quoting where the library documents it. Every call goes through the library's public API; no
library formula is re-implemented here.

Single-run claims: `opacus_rdp` (Opacus RDPAccountant: the sampled Gaussian RDP of Mironov,
Talwar & Zhang 2019, Opacus's orders and conversion), `opacus_gdp` (Opacus GaussianAccountant:
the Gaussian-DP central limit theorem of [DRS22], "experimental and can underestimate"),
`opacus_prv` (Opacus PRVAccountant, Gopi, Lee & Wutschitz 2021: the upper end of the PRV error
interval), `prv_accountant` (Microsoft's, the same method: eps_up), `dp_accounting_rdp` and
`dp_accounting_pld` (Google's RdpAccountant, default orders; PLDAccountant, pessimistic,
default discretisation), `reduced_mu` ([XWW24] eq. 19 for one run: the Gaussian epsilon of
mu = tau sqrt(N) / sigma, exact for tau = 1, a large-N heuristic for tau < 1).

Tuning claims (K ~ xi): `naive` ("tuning costs one run's eps": dp_accounting's pessimistic PLD
of one run), `repeat_and_select` (dp_accounting RdpAccountant on RepeatAndSelectDpEvent, [PS22];
TNB and Poisson laws only), `xww24_uo` ([XWW24] Algorithm 3, eps_UO, mu as above) and
`xww24_reduced` (the exact curve of [XWW24]'s reduced game, Figure 5, same mu): these two hold
only under [XWW24]'s monotone-score assumption (even at tau = 1), so as claims for the tuning
run (any score) they can be below the attack value; `profile` and `generic_rdp` (auditsel's
rigorous tuning bounds, [KRW24], [PS22]; `accounting.registry`).

Lower estimates of one run's true epsilon (not claims, printed beside them):
dp_accounting's optimistic PLD (`pessimistic_estimate=False`) and the optimistic PLD of
[DGKKM22] (`accounting.pld.dpsgd_epsilon_interval`).
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata

from auditsel.accounting.exact import exact_epsilon
from auditsel.accounting.improved import improved_epsilon
from auditsel.accounting.interval import finite_or_none
from auditsel.accounting.pld import dpsgd_epsilon_interval
from auditsel.accounting.registry import bound
from auditsel.mechanisms import DpsgdBase, GaussianBase, gaussian_epsilon, quiet_absl
from auditsel.rounds import Point, Poisson, RoundsLaw, TruncatedNegativeBinomial
from auditsel.selection import GaussianWinner


class MissingExtra(RuntimeError):
    """An optional accountant library is not installed (the CLI prints the extra to install)."""

    def __init__(self, package: str, extra: str = "accountants"):
        super().__init__(
            f"{package} is not installed; install the optional extra: "
            f'pip install "auditsel[{extra}]"'
        )
        self.package = package
        self.extra = extra


@dataclass(frozen=True)
class Setting:
    """One DP-SGD tuning setting: noise multiplier, steps, sample rate, the law of K, delta."""

    noise_multiplier: float
    steps: int
    sample_rate: float
    law: RoundsLaw = field(default_factory=lambda: Point(1))
    delta: float = 1e-5

    @property
    def single_run(self) -> bool:
        return isinstance(self.law, Point) and self.law.k == 1

    @property
    def mu(self) -> float:
        """tau sqrt(N) / sigma ([XWW24] eq. 19)."""
        return self.sample_rate * math.sqrt(self.steps) / self.noise_multiplier

    @property
    def base(self) -> DpsgdBase:
        return DpsgdBase(self.noise_multiplier, self.steps, self.sample_rate)


ADD_REMOVE = "add/remove"


@dataclass(frozen=True)
class Claim:
    name: str
    source: str
    compute: Callable[[Setting], float | None]
    tuning: bool  # a claim about the tuning run (else about one run)
    relation: str = ADD_REMOVE
    package: str | None = None  # the optional package it needs


def _require(module: str, package: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise MissingExtra(package) from None


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        with quiet_absl():
            yield


def _opacus(kind: str, s: Setting) -> float:
    accountants = _require("opacus.accountants", "opacus")
    cls = {
        "rdp": accountants.RDPAccountant,
        "gdp": accountants.GaussianAccountant,
        "prv": accountants.PRVAccountant,
    }[kind]
    with _quiet():
        acc = cls()
        acc.history = [(s.noise_multiplier, s.sample_rate, s.steps)]
        extra = {"poisson": True} if kind == "gdp" else {}
        return float(acc.get_epsilon(s.delta, **extra))


def _prv_accountant(s: Setting) -> float:
    prv = _require("prv_accountant", "prv-accountant")
    # deferred: prv_accountant is an optional extra
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

    with _quiet():
        acc = prv.PRVAccountant(
            prvs=[PoissonSubsampledGaussianMechanism(s.sample_rate, s.noise_multiplier)],
            max_self_compositions=[s.steps],
            eps_error=0.01,
            delta_error=s.delta / 1000,
        )
        _, _, eps_up = acc.compute_epsilon(delta=s.delta, num_self_compositions=[s.steps])
    return float(eps_up)


def _event(s: Setting):
    # deferred: dp_accounting (0.2 s) loads only when an accountant is asked
    import dp_accounting as dpa

    step = dpa.GaussianDpEvent(s.noise_multiplier)
    if s.sample_rate < 1:
        step = dpa.PoissonSampledDpEvent(s.sample_rate, step)
    return dpa.SelfComposedDpEvent(step, s.steps)


def _dp_accounting_rdp(s: Setting) -> float:
    import dp_accounting as dpa  # deferred: as in _event

    with _quiet():
        return float(dpa.rdp.RdpAccountant().compose(_event(s)).get_epsilon(s.delta))


def single_run_epsilon(s: Setting) -> float:
    """One run's epsilon by dp_accounting's pessimistic PLD (the naive claim for tuning)."""
    return _pld_epsilon(s.noise_multiplier, s.steps, s.sample_rate, s.delta, True)


@lru_cache(maxsize=256)
def _pld_epsilon(sigma, steps, tau, delta, pessimistic) -> float:
    """Pessimistic: the PLDAccountant a user calls. Optimistic: dp_accounting's PLD built with
    `pessimistic_estimate=False` (privacy buckets rounded down, dominated by the true PLD)."""
    import dp_accounting as dpa  # deferred: as in _event
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    s = Setting(sigma, steps, tau)
    with _quiet():
        if pessimistic:
            acc = dpa.pld.PLDAccountant(
                neighboring_relation=dpa.NeighboringRelation.ADD_OR_REMOVE_ONE
            )
            return float(acc.compose(_event(s)).get_epsilon(delta))
        pld = pld_lib.from_gaussian_mechanism(
            sigma, sampling_prob=tau, pessimistic_estimate=False, use_connect_dots=False
        )
        return float(pld.self_compose(steps).get_epsilon_for_delta(delta))


def _repeat_and_select(s: Setting) -> float | None:
    import dp_accounting as dpa  # deferred: as in _event
    from dp_accounting.dp_event import RepeatAndSelectDpEvent

    law = s.law
    if isinstance(law, TruncatedNegativeBinomial):
        shape = law.eta
    elif isinstance(law, Poisson):
        shape = math.inf
    elif s.single_run:
        return _dp_accounting_rdp(s)
    else:
        return None  # dp_accounting supports TNB (incl. geometric, logarithmic) and Poisson only
    event = RepeatAndSelectDpEvent(_event(s), float(law.mean), float(shape))
    with _quiet():
        return float(dpa.rdp.RdpAccountant().compose(event).get_epsilon(s.delta))


def _panel_bound(key: str) -> Callable[[Setting], float | None]:
    """The registered bound's value (the panel's, without the panel's attack): None where it
    does not apply or is vacuous."""

    def compute(s: Setting):
        b = bound(key)
        if not b.supports(s.base, s.law) or b.not_applicable(s.base, s.law, s.delta):
            return None
        value = b.epsilon(s.base, s.law, s.delta)
        return value if math.isfinite(value) else None

    return compute


CLAIMS = {
    c.name: c
    for c in (
        Claim(
            "opacus_rdp",
            "Opacus RDPAccountant",
            lambda s: _opacus("rdp", s),
            False,
            ADD_REMOVE + " (Opacus: sampled Gaussian RDP, Mironov-Talwar-Zhang 2019)",
            "opacus",
        ),
        Claim(
            "opacus_gdp",
            "Opacus GaussianAccountant (CLT; Opacus warns it can underestimate)",
            lambda s: _opacus("gdp", s),
            False,
            ADD_REMOVE + " ([DRS22] CLT for Poisson subsampling)",
            "opacus",
        ),
        Claim(
            "opacus_prv",
            "Opacus PRVAccountant (upper end)",
            lambda s: _opacus("prv", s),
            False,
            ADD_REMOVE + " (PRV of the remove pair)",
            "opacus",
        ),
        Claim(
            "prv_accountant",
            "Microsoft prv_accountant (eps_up)",
            _prv_accountant,
            False,
            ADD_REMOVE + " (PRV of the remove pair)",
            "prv-accountant",
        ),
        Claim(
            "dp_accounting_rdp",
            "dp_accounting RdpAccountant",
            _dp_accounting_rdp,
            False,
            ADD_REMOVE + " (dp_accounting default)",
        ),
        Claim(
            "dp_accounting_pld",
            "dp_accounting PLDAccountant (pessimistic)",
            single_run_epsilon,
            False,
            ADD_REMOVE + " (NeighboringRelation.ADD_OR_REMOVE_ONE)",
        ),
        Claim(
            "reduced_mu",
            "[XWW24] eq. 19: Gaussian eps of mu = tau sqrt(N)/sigma",
            lambda s: float(gaussian_epsilon(s.mu, s.delta)),
            False,
            ADD_REMOVE + " (heuristic for tau < 1)",
        ),
        Claim(
            "naive",
            "tuning costs one run's eps (dp_accounting PLD of one run)",
            single_run_epsilon,
            True,
        ),
        Claim(
            "repeat_and_select",
            "dp_accounting RepeatAndSelectDpEvent (RDP, [PS22])",
            _repeat_and_select,
            True,
        ),
        Claim(
            "xww24_uo",
            "[XWW24] Algorithm 3 eps_UO with mu = tau sqrt(N)/sigma (monotone score assumed)",
            lambda s: float(improved_epsilon(s.mu, s.law, s.delta)),
            True,
            ADD_REMOVE + " ([XWW24]'s monotone-score assumption; heuristic for tau < 1)",
        ),
        Claim(
            "xww24_reduced",
            "[XWW24] reduced game, exact curve with mu = tau sqrt(N)/sigma (monotone score "
            "assumed)",
            lambda s: float(exact_epsilon(GaussianWinner(GaussianBase(s.mu), s.law), s.delta)),
            True,
            ADD_REMOVE + " ([XWW24]'s monotone-score assumption; heuristic for tau < 1)",
        ),
        Claim(
            "profile",
            "auditsel profile bound ([KRW24], dp_accounting PLD profile)",
            _panel_bound("profile"),
            True,
        ),
        Claim(
            "generic_rdp",
            "auditsel generic RDP bound ([PS22], dp_accounting RDP)",
            _panel_bound("generic_rdp"),
            True,
        ),
    )
}


def claim_epsilon(name: str, setting: Setting) -> float | None:
    """The epsilon claimed by `name` for the setting (None where the claim does not apply:
    a single-run claim for a tuning law with K > 1, or a law the source does not support)."""
    claim = CLAIMS[name]
    if not claim.tuning and not setting.single_run:
        return None
    value = claim.compute(setting)
    return finite_or_none(value)


def lower_estimates(setting: Setting) -> dict:
    """Two optimistic estimates of one run's true epsilon (at or below it, up to discretisation)."""
    s = setting
    optimistic, _ = dpsgd_epsilon_interval(s.noise_multiplier, s.steps, s.sample_rate, s.delta)
    return {
        "dp_accounting_pld_optimistic": _pld_epsilon(
            s.noise_multiplier, s.steps, s.sample_rate, s.delta, False
        ),
        "dgkkm22_optimistic": float(optimistic),
    }


def library_versions() -> dict:
    out: dict[str, str | None] = {}
    for package in ("dp-accounting", "opacus", "prv-accountant"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = None
    return out
