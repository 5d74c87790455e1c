"""Checked by mypy in CI (pyproject's [tool.mypy] files), never run: the public API as a type
checker sees it. Each `# type: ignore[code]` marks an error mypy must find there: with
`warn_unused_ignores`, a line that stops being an error fails the check
(tests/test_typing.py also asserts the messages)."""

from __future__ import annotations

import numpy as np

import auditsel
from auditsel import (
    BOUNDS,
    DpsgdBase,
    FiniteOutputBase,
    GaussianBase,
    Poisson,
    TruncatedNegativeBinomial,
    exact_epsilon,
    gaussian_epsilon,
    run_config,
    winner_law,
)
from auditsel.events import LaplaceBase
from auditsel.roles import AccountedPair, GameProtocol, MechanismPair, Proxy, Winner

# --- what type checks -------------------------------------------------------------------------
pair: MechanismPair = GaussianBase(mu=1.0)
finite: MechanismPair = FiniteOutputBase(p=(0.5, 0.5), q=(0.4, 0.6))
dpsgd: MechanismPair = DpsgdBase(noise_multiplier=1.0, steps=100, sample_rate=0.01)
# the pairs as the bounds read them (roles.AccountedPair: mu, mu_gdp, rdp_orders, ...)
accounted: tuple[AccountedPair, ...] = (
    GaussianBase(mu=1.0),
    FiniteOutputBase(p=(0.5, 0.5), q=(0.4, 0.6)),
    DpsgdBase(noise_multiplier=1.0, steps=100, sample_rate=0.01),
    LaplaceBase(noise_multiplier=1.0),
)
law = Poisson(mean=10.0)  # the config's name for the parameter
tnb = TruncatedNegativeBinomial(eta=0.5, nu=0.01)
winner: Winner = winner_law(GaussianBase(mu=1.0), law)
protocol: GameProtocol = winner
eps: float = exact_epsilon(winner, 1e-5)
eps_b: float = gaussian_epsilon(1.0, 1e-5)
version: str = auditsel.__version__
keys = [b.key for b in BOUNDS]


def my_proxy(x: np.ndarray) -> np.ndarray:  # any name for the argument
    return x


proxy: Proxy = my_proxy
result = run_config("configs/quickstart.yaml", jobs=1)
eps_l: float | None = result.eps_lower
bad_lower: float = result.eps_lower  # type: ignore[assignment]

# --- what must not type check -----------------------------------------------------------------
GaussianBase(mu="x", nope=1)  # type: ignore[arg-type, call-arg]
Poisson(mean_=10.0)  # type: ignore[call-arg]
run_config("configs/quickstart.yaml", None, 1)  # type: ignore[call-arg]
bad_pair: MechanismPair = Poisson(mean=1.0)  # type: ignore[assignment]
bad_eps: str = exact_epsilon(winner, 1e-5)  # type: ignore[assignment]
