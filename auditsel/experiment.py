"""Config -> spec -> run -> result: the flow behind `auditsel run` (DESIGN.md contracts).

run_experiment computes the upper-bound panel (what applies to the base), plays the
distinguishing game if the spec has one, derives the lower bounds and returns the result
dict of DESIGN.md's result.json contract (a bound that does not apply is null).
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path

import numpy as np

from auditsel import __version__
from auditsel.accounting.exact import exact_epsilon, privacy_curve
from auditsel.config import ExperimentSpec
from auditsel.game import run_game
from auditsel.lower import audit_scores
from auditsel.mechanisms import GaussianBase
from auditsel.rounds import Point
from auditsel.selection import winner_law

__all__ = ["run_experiment", "base_summary", "upper_panel", "threshold_grid", "fingerprint"]

CURVE_POINTS = 60


def _finite_or_none(x):
    return None if x is None or not math.isfinite(x) else float(x)


def base_summary(spec: ExperimentSpec) -> dict:
    """eps_B of one run at delta, and mu for a Gaussian base."""
    if isinstance(spec.base, GaussianBase):
        eps_b = spec.base.epsilon(spec.delta)          # closed form
    else:
        eps_b = exact_epsilon(winner_law(spec.base, Point(1)), spec.delta)
    mu = spec.base.mu if isinstance(spec.base, GaussianBase) else None
    return {"kind": spec.base_config.get("kind"), "epsilon": _finite_or_none(eps_b), "mu": mu,
            "mu_gdp": None}


BOUND_LABELS = {
    "generic_rdp": ("rigorous", "Papernot & Steinke 2022 (seed 001), Thm 2 / Thm 6 / Lemma 7"),
    "profile": ("rigorous", "Koskela, Redberg & Wang 2024 (seed 000), Thm 5.2 / 5.7 / Cor 5.8"),
    "improved_rdp": ("rigorous for a Gaussian base", "Xiang, Wang & Wang (seed 004), Algorithm 3, mu"),
    "improved_rdp_gdp": ("heuristic", "Xiang, Wang & Wang (seed 004), Algorithm 3, mu_GDP"),
    "exact": ("rigorous (exact)", "exact hockey-stick curve of the released winner (seed 004 Thm 2, Fig. 5)"),
}


def upper_panel(spec: ExperimentSpec) -> dict:
    """The upper bounds that are implemented for this base; the others are None."""
    winner = winner_law(spec.base, spec.rounds)
    return {
        "generic_rdp": None,
        "profile": None,
        "improved_rdp": None,
        "improved_rdp_gdp": None,
        "exact": _finite_or_none(exact_epsilon(winner, spec.delta)),
    }


def threshold_grid(spec: ExperimentSpec, proxy_name: str) -> np.ndarray:
    """Bonferroni thresholds fixed by the spec alone (public knowledge, no scores seen).

    Gaussian base: `game.thresholds` points evenly spaced between the 1e-6 quantiles of the two
    winner laws (mapped through the proxy); finite base: one threshold between each pair of
    consecutive proxy values.
    """
    winner = winner_law(spec.base, spec.rounds)
    if isinstance(spec.base, GaussianBase):
        lo, hi = winner.quantile_range()
        if proxy_name == "sample":
            return np.linspace(lo, hi, spec.game.thresholds)
        values = winner.log_likelihood_ratio(np.linspace(lo, hi, 4001))
        return np.linspace(values.min(), values.max(), spec.game.thresholds)
    outputs = np.arange(len(spec.base.p))
    values = outputs if proxy_name == "sample" else winner.log_likelihood_ratio(outputs)
    values = np.unique(values[np.isfinite(values)])
    return (values[:-1] + values[1:]) / 2 if len(values) > 1 else values


def fingerprint(spec: ExperimentSpec) -> str:
    """What determines the trial scores: base, law, protocol, proxy, seed, chunk size."""
    g = spec.game
    payload = {"base": spec.base_config, "rounds": spec.rounds.describe(), "game": g.kind,
               "proxy": g.proxy, "seed": g.seed, "chunk_size": g.chunk_size,
               "delta": spec.delta if "epsilon" in spec.base_config else None}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _play(spec: ExperimentSpec, out_dir: Path | None, jobs: int, progress: bool, backend: str | None):
    from attacks.proxies import make_proxy

    g = spec.game
    winner = winner_law(spec.base, spec.rounds)
    proxy = make_proxy(g.proxy, winner)
    record = run_game(winner, proxy, g.trials, g.seed, chunk_size=g.chunk_size, jobs=jobs,
                      checkpoint_dir=None if out_dir is None else out_dir / "checkpoints",
                      fingerprint=fingerprint(spec), progress=progress, backend=backend)
    bound = audit_scores(record.scores, record.member, spec.delta, confidence=g.confidence,
                         rule=g.threshold, split_fraction=g.split_fraction,
                         threshold_grid=threshold_grid(spec, g.proxy) if g.threshold == "bonferroni" else None)
    return record, bound


def run_experiment(spec: ExperimentSpec, out_dir: Path | None = None, jobs: int = 1,
                   progress: bool = True, backend: str | None = None) -> tuple[dict, dict]:
    """Returns (result, artefacts): result.json content and in-memory data for the report."""
    start = time.perf_counter()
    result = {
        "name": spec.name,
        "delta": spec.delta,
        "base": base_summary(spec),
        "rounds": spec.rounds.describe(),
        "upper": upper_panel(spec),
        "lower": None,
        "version": __version__,
    }
    winner = winner_law(spec.base, spec.rounds)
    artefacts = {"winner": winner}
    eps_max = max(v for v in [result["upper"]["exact"], result["base"]["epsilon"], 1.0] if v is not None)
    eps_grid = np.linspace(0.0, 1.5 * eps_max, CURVE_POINTS)
    artefacts["curve"] = (eps_grid, privacy_curve(winner, eps_grid))
    result["exact_curve"] = {"eps": eps_grid.tolist(), "delta": artefacts["curve"][1].tolist()}
    if spec.game is not None:
        record, bound = _play(spec, out_dir, jobs, progress, backend)
        result["lower"] = {**bound.to_dict(), "game": spec.game.kind, "proxy": spec.game.proxy,
                           "seed": spec.game.seed}
        artefacts["record"] = record
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result, artefacts
