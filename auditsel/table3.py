"""A [XWW24] Table-3-style grid on real DP-SGD: threat model x canary x eps_B, two proxies.

For each cell (threat in NTNV/NTCV/ETCV, canary Z_D or an input-space canary, eps_B):

    sigma    calibrated so that one run (N steps, sampling rate tau) is (eps_B, delta)-DP
    games    `trials` distinguishing games of the tuning protocol H (Algorithm 2) over DP-SGD
    eps_L    per proxy (lambda_a, lambda_b of eq. 10, scored on the SAME games): the split rule
             (rigorous at the confidence) and the paper's optimistic max over thresholds
    upper    eps_B, the generic bound, the improved bound and the exact reduced-game value at
             the same (sigma, N, tau, xi)  (auditsel.accounting.panel, when present)

This module sits above both sides of the wall: it builds the trainer's protocol through the
adversary's threat models (attacks.threats) and scores releases with the adversary's proxies.

``run_table3_grid(settings, game_runner=..., audit=..., upper_bounds=...)``: the runner plays
games, ``game_runner(protocol, proxies, trials, seed) -> (member, {name: scores})``; the default
``play_games`` draws chunk i from auditsel.game.chunk_rng(seed, i) like the game engine, so its
trials are those of ``auditsel.game.run_game`` with the same seed and chunk size, and scores
every proxy on each chunk's releases (one training per game for both proxies).
``time_cell`` measures the wall time of one cell to size the grid.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from attacks import canaries as canary_lib
from attacks import threats as threat_lib
from attacks.dpsgd_proxies import make_dpsgd_proxy
from auditsel.dpsgd.data import load_split
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.trainer import calibrate_noise_multiplier
from auditsel.rounds import RoundsLaw, TruncatedNegativeBinomial
from auditsel.errors import ConfigError
from auditsel.mechanisms import DpsgdBase

__all__ = ["Table3Settings", "table3_protocol", "build_protocol", "play_games", "run_table3_grid", "time_cell",
           "format_rows"]


@dataclass(frozen=True)
class Table3Settings:
    """Everything one grid needs; defaults sized for a 2-core CPU (see ``time_cell``)."""

    dataset: str = "digits"
    data_dir: Optional[str] = None
    model: str = "logreg"
    hidden: tuple = (32,)
    train_size: Optional[int] = 500
    validation_size: Optional[int] = None
    steps: int = 20
    sample_rate: float = 1.0
    clip: float = 1.0
    learning_rates: tuple = (0.001, 0.003, 0.01, 0.03)
    rounds: RoundsLaw = field(default_factory=lambda: TruncatedNegativeBinomial(0.0, 0.01))
    delta: float = 1e-5
    epsilons: tuple = (1.0, 2.0, 4.0)
    threats: tuple = ("ntnv", "ntcv", "etcv")
    canaries: tuple = ("dirac", "input")
    input_canary: str = "inverted"  # out_of_distribution kind, or "mislabelled"
    proxies: tuple = ("lambda_a", "lambda_b")
    trials: int = 1000
    seed: int = 0
    confidence: float = 0.95
    accountant: str = "rdp"
    device: Optional[str] = None
    max_batch_runs: int = 256


def _canary(name: str, s: Table3Settings, train, validation):
    if name == "dirac":
        return canary_lib.dirac()
    if name != "input":
        raise ConfigError("game.canary", f"must be dirac or input, got {name!r}")
    if s.input_canary == "mislabelled":
        return canary_lib.mislabelled(validation, 0)
    return canary_lib.out_of_distribution(train, s.input_canary)


def table3_protocol(threat: str, canary: str, epsilon: float, s: Table3Settings, data=None):
    """(protocol, sigma) of one cell: sigma calibrated so that one run is (epsilon, delta)-DP."""
    sigma = calibrate_noise_multiplier(epsilon, s.delta, s.steps, s.sample_rate, s.accountant)
    return build_protocol(threat, canary, sigma, s, data), sigma


def build_protocol(threat: str, canary: str, noise_multiplier: float, s: Table3Settings,
                   data=None):
    """The DP-SGD tuning protocol of one game from names: threat (ntnv | ntcv | etcv), canary
    (dirac | input), sigma, and the data/model/grid settings of ``s`` (``data``: a preloaded
    (train, validation) pair)."""
    train, validation = data if data is not None else load_split(s.dataset, s.data_dir)
    train, validation = train.take(s.train_size), validation.take(s.validation_size)
    sigma = noise_multiplier
    model = ModelSpec(s.model, train.shape, train.num_classes, hidden=tuple(s.hidden))
    z = _canary(canary, s, train, validation)
    proto = threat_lib.tuning_game(
        threat, z, model=model, train=train, validation=validation, rounds=s.rounds,
        grid=[{"lr": float(v)} for v in s.learning_rates], steps=s.steps,
        noise_multiplier=sigma, sample_rate=s.sample_rate, clip=s.clip, device=s.device,
        max_batch_runs=s.max_batch_runs)
    return proto


def play_games(protocol, proxies: Mapping[str, Callable], trials: int, seed: int,
               chunk_size: int = 250):
    """Games with every proxy scored on the same releases: (member, {name: scores})."""
    try:
        from auditsel.game import chunk_rng
    except ImportError:  # the engine's seeding rule, restated
        def chunk_rng(seed, index):
            return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))
    members, scores = [], {name: [] for name in proxies}
    for index, start in enumerate(range(0, trials, chunk_size)):
        size = min(chunk_size, trials - start)
        rng = chunk_rng(seed, index)
        member = rng.integers(0, 2, size=size, dtype=np.int8)
        obs = protocol.release(member, rng)
        members.append(member)
        for name, proxy in proxies.items():
            scores[name].append(np.asarray(proxy(obs), dtype=float))
    return np.concatenate(members), {k: np.concatenate(v) for k, v in scores.items()}


def _default_audit(confidence):
    from auditsel.lower import audit_scores

    def audit(scores, member, delta):
        lb = audit_scores(scores, member, delta=delta, confidence=confidence, rule="split")
        return {"eps_split": lb.eps, "eps_best": lb.eps_best_threshold, "eps_gdp": lb.eps_gdp}
    return audit


def _default_upper(sigma, s: Table3Settings):
    from auditsel.accounting.panel import upper_bounds

    base = DpsgdBase(noise_multiplier=sigma, steps=s.steps, sample_rate=s.sample_rate,
                     accountant=s.accountant)
    return upper_bounds(base, s.rounds, s.delta)


def run_table3_grid(settings: Table3Settings = Table3Settings(), *,
                    game_runner: Callable = play_games, audit: Optional[Callable] = None,
                    upper_bounds: Optional[Callable] = None, cells: Optional[Sequence] = None,
                    log: Optional[Callable] = print) -> list:
    """One row per (threat, canary, eps_B, proxy); see the module docstring.

    audit(scores, member, delta) -> {"eps_split", "eps_best", ...} (default: auditsel.lower,
    split rule at settings.confidence); upper_bounds(sigma, settings) -> dict (default: the
    accounting panel); cells: an explicit list of (threat, canary, eps_B) to run.
    """
    s = settings
    audit = audit or _default_audit(s.confidence)
    upper_bounds = upper_bounds or _default_upper
    data = load_split(s.dataset, s.data_dir)
    cells = cells or [(t, c, e) for e in s.epsilons for t in s.threats for c in s.canaries]
    rows, upper_cache = [], {}
    for cell_index, (threat, canary, eps) in enumerate(cells):
        t0 = time.perf_counter()
        proto, sigma = table3_protocol(threat, canary, eps, s, data)
        proxies = {p: make_dpsgd_proxy(p, threat) for p in s.proxies}
        member, scores = game_runner(proto, proxies, s.trials, s.seed + cell_index)
        train_seconds = time.perf_counter() - t0
        if eps not in upper_cache:
            upper_cache[eps] = upper_bounds(sigma, s)
        for p in s.proxies:
            row = {"threat": threat, "canary": canary, "proxy": p, "eps_B": eps,
                   "sigma": sigma, "trials": int(len(member)), **audit(scores[p], member, s.delta),
                   "upper": upper_cache[eps], "seconds": train_seconds}
            rows.append(row)
            if log:
                log(f"{threat:5} {canary:6} eps_B={eps:g} {p:8} eps_L(split)={row['eps_split']:.2f} "
                    f"eps_L(best)={row['eps_best']:.2f}  [{train_seconds:.0f}s]")
    return rows


def time_cell(settings: Table3Settings = Table3Settings(), threat: str = "ntnv",
              canary: str = "dirac", epsilon: float = 1.0, trials: int = 100) -> dict:
    """Wall time of ``trials`` games of one cell, extrapolated to settings.trials games and to
    the full grid (ETCV cells are far cheaper: no training data)."""
    proto, _ = table3_protocol(threat, canary, epsilon, settings)
    proxies = {p: make_dpsgd_proxy(p, threat) for p in settings.proxies}
    t = time.perf_counter()
    play_games(proto, proxies, trials, settings.seed)
    dt = time.perf_counter() - t
    per_game = dt / trials
    return {"threat": threat, "canary": canary, "trials": trials, "seconds": dt,
            "seconds_per_game": per_game, "cell_seconds": per_game * settings.trials,
            "mean_runs_per_game": settings.rounds.mean}


def format_rows(rows) -> str:
    """A markdown table of the grid."""
    head = ("| threat | canary | eps_B | proxy | eps_L split | eps_L best | generic | improved "
            "| exact (reduced) |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        u = r.get("upper") or {}
        f = lambda v: "-" if v is None else f"{v:.2f}"
        lines.append(f"| {r['threat']} | {r['canary']} | {r['eps_B']:g} | {r['proxy']} | "
                     f"{r['eps_split']:.2f} | {r['eps_best']:.2f} | {f(u.get('generic_rdp'))} | "
                     f"{f(u.get('improved_rdp'))} | {f(u.get('exact'))} |")
    return "\n".join(lines)
