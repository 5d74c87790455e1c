"""`game.one_run` in `auditsel run`: r one-run audits of the configured tuning setting.

Reduced game (`game.kind: reduced`, Gaussian or DP-SGD base reduced to mu): the reduced
one-run tuning game of `auditsel.games.one_run_reduced`. Real DP-SGD (`game.kind: dpsgd`, tau = 1, Dirac
canaries): `auditsel.games.one_run_dpsgd` with the config's threat, data, model, learning rates and
clip. Audit r (`repeats`) uses the generator SeedSequence(game.seed, spawn_key=(r,)), so the
numbers depend on the seed only (and not on --jobs: the audits run in sequence); with an output
folder each finished audit is checkpointed, and a rerun resumes after the last one. Each audit: [SNJ23] and [MMC24] at game.confidence
(`auditsel.auditing.one_run_analysis.audit_one_run`); the result holds every audit's eps_L, their mean, and the
exact per-canary epsilon of the reduced one-run game (exact for the reduced game and for ETCV;
heuristic as a target for NTCV, whose real examples also move the canary coordinates).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from auditsel.auditing.one_run_analysis import GdpFamily, OneRunBound, audit_one_run
from auditsel.errors import ConfigError
from auditsel.games.engine import Checkpoints
from auditsel.games.one_run_dpsgd import OneRunDpsgd
from auditsel.games.one_run_reduced import OneRunReducedGame
from auditsel.mechanisms import DpsgdBase, GaussianBase

if TYPE_CHECKING:
    from auditsel.experiments.config import ExperimentSpec

#: what `exact_per_canary` is exact for: the one-run game as defined, whose tuner selects by one
#: fixed score, not the epsilon of a tuning run for every score function (the any-score attack
#: of `auditsel.accounting.score_search` bounds that one)
EXACT_SCOPE = (
    "this one-run game's own exact eps (its tuner selects the run with the largest sum over the "
    "canaries); not a tuning run's epsilon for every score function"
)


def one_run_game(
    spec: ExperimentSpec,
) -> tuple[OneRunDpsgd | OneRunReducedGame, Literal["rigorous", "heuristic"]]:
    """The one-run game of the spec: (game with .play(rng) and .reduced, exact rigour label)."""
    g = spec.game
    assert g is not None and g.one_run is not None  # a one-run spec (parse_config)
    m = g.one_run.canaries
    if g.kind == "dpsgd":
        d, base = g.dpsgd, spec.base
        assert d is not None and isinstance(base, DpsgdBase)  # parse_config: a DP-SGD game
        if d.canary != "dirac":
            raise ConfigError("game.canary", "one-run DP-SGD audits use Dirac canaries (dirac)")
        game = OneRunDpsgd(
            canaries=m,
            noise_multiplier=base.noise_multiplier,
            steps=base.steps,
            law=spec.rounds,
            learning_rates=tuple(d.learning_rates),
            clip=d.clip,
            threat=d.threat,
            dataset=d.dataset,
            model=d.model,
            train_size=d.train_size or 0,
            device=d.device,
        )
        return game, ("rigorous" if d.threat == "etcv" else "heuristic")
    reduced = spec.base.reduced()  # a reduced game's base: Gaussian (parse_config)
    assert isinstance(reduced, GaussianBase)
    return OneRunReducedGame(reduced.mu, spec.rounds, m), "rigorous"


def play_one_run(
    spec: ExperimentSpec,
    out_dir: Path | None = None,
    *,
    fingerprint: str | None = None,
    code: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The r one-run audits of the spec. With `out_dir`, each audit's canary scores and
    inclusion bits are kept in out_dir/checkpoints/one_run (`auditsel.games.engine.Checkpoints`)
    under `fingerprint` (what determines the scores: `auditsel.experiments.experiment.fingerprint`
    of the spec) and the code that computed them (`code`, `auditsel.games.fingerprint.code_identity`
    by default), so a rerun after an interruption resumes at the first audit not finished (none
    lost, none repeated); the bounds are recomputed from the kept scores."""
    if out_dir is not None and not fingerprint:
        raise ValueError("play_one_run: checkpoints in out_dir need the spec's fingerprint")
    g = spec.game
    assert g is not None and g.one_run is not None  # a one-run spec (parse_config)
    one = g.one_run
    played, rigour = one_run_game(spec)
    game: Any = played  # .play(rng) or, with a setup, .play(rng, setup) (OneRunDpsgd)
    reduced = game if not hasattr(game, "reduced") else game.reduced
    family = reduced.family if one.family == "tuning" else GdpFamily()
    store = None
    if out_dir is not None:
        name = f"{fingerprint}-one-run-{one.canaries}"
        store = Checkpoints(Path(out_dir) / "checkpoints" / "one_run", name, one.canaries, code)
        store.open()
    start = time.perf_counter()
    try:
        bounds = _audits(spec, game, family, store)
    finally:
        if store is not None:
            store.close()
    snj, mmc = [b.eps_snj23 for b in bounds], [b.eps_mmc24 for b in bounds]
    exact = reduced.epsilon(spec.delta)
    return {
        "canaries": one.canaries,
        "repeats": one.repeats,
        "family": family.name,
        "confidence": g.confidence,
        "seed": g.seed,
        "eps_snj23": snj[0],
        "eps_mmc24": mmc[0],  # audit 0: a valid bound
        "eps_snj23_mean": float(np.mean(snj)),
        "eps_mmc24_mean": float(np.mean(mmc)),
        "eps_snj23_runs": snj,
        "eps_mmc24_runs": mmc,
        "exact_per_canary": None if not math.isfinite(exact) else exact,
        "exact_rigour": rigour,
        "exact_scope": EXACT_SCOPE,
        "seconds": round(time.perf_counter() - start, 3),
        "audits": [b.to_dict() for b in bounds],
        "rigour": "empirical, each audit valid at the confidence ([SNJ23]; [MMC24] when the "
        "trade-off lies in the family); eps_* is audit 0, the mean over audits is a summary, not a bound",
    }


def _audits(
    spec: ExperimentSpec, game: Any, family: Any, store: Checkpoints | None
) -> list[OneRunBound]:
    """The one-run audits of the spec, in order: audit r's scores read back from `store` or
    played at the seed's r-th stream (the game's setup made once, when first needed)."""
    g = spec.game
    assert g is not None and g.one_run is not None  # a one-run spec (parse_config)
    one = g.one_run
    setup = None
    bounds = []
    for r in range(one.repeats):
        kept = store.load(r, one.canaries) if store is not None else None
        if kept is not None:
            scores, members = kept
        else:
            if setup is None and hasattr(game, "setup"):
                setup = game.setup()
            rng = np.random.default_rng(np.random.SeedSequence(g.seed, spawn_key=(r,)))
            scores, members = game.play(rng, setup) if setup is not None else game.play(rng)
            if store is not None:
                store.save(r, np.asarray(scores, dtype=np.float64), np.asarray(members))
        bounds.append(
            audit_one_run(scores, members, spec.delta, confidence=g.confidence, family=family)
        )
    return bounds
