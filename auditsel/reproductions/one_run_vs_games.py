"""One-run against game-based audits of the same real DP-SGD tuning setting: eps_L per CPU-minute.

Setting (sized for 2 CPU cores): ETCV, Dirac gradient canaries, tau = 1 (full batch), N = 20
steps, C = 1, learning rate 0.01, logistic regression on digits' shape (d = 650), sigma
calibrated to eps_B = 4 at delta = 1e-5 (dp_accounting RDP), xi = TNB(0, 0.01) (E[K] = 21.5).

* Game-based ([XWW24] Algorithm 1 through the engine, `game.kind: dpsgd`): one canary, T games,
  each a whole tuning run; proxy lambda_a; split rule, 95% Clopper-Pearson; repeated with
  `game_repeats` seeds for the spread. Its target is the
  exact epsilon of the tuning run w.r.t. one example: [XWW24]'s reduced game at mu = sqrt(N)/sigma.

* One-run (`auditsel.games.one_run_dpsgd`): m canaries in ONE tuning run, [SNJ23] and [MMC24] (the
  exact per-canary family), 95%, Bonferroni over the (k+, k-) grid; repeated r times for the
  spread. Its target is the exact per-canary epsilon of the m-canary run
  (`auditsel.games.one_run_reduced`), which is smaller: the tuner's selection reads all m canaries.

CPU seconds are this process's CPU time (all threads) for the training and the analysis.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from auditsel.accounting.exact import exact_epsilon
from auditsel.auditing.lower import audit_scores
from auditsel.auditing.one_run_analysis import audit_one_run
from auditsel.auditing.rules import Split
from auditsel.executor import ExecutionOptions
from auditsel.experiments.config import parse_config
from auditsel.experiments.experiment import protocol_and_proxy
from auditsel.experiments.one_run_experiment import EXACT_SCOPE
from auditsel.games.engine import run_game
from auditsel.games.one_run_dpsgd import OneRunDpsgd
from auditsel.games.one_run_reduced import OneRunReducedGame
from auditsel.mechanisms import GaussianBase, gaussian_epsilon, gaussian_mu
from auditsel.reproductions import _csv, to_markdown
from auditsel.results.figures import new_figure, save_figure
from auditsel.rounds import law_from_dict
from auditsel.selection import GaussianWinner

#: the one setting of the comparison: (epsilon, delta) of the base run, its steps, learning rate
#: and clip, and the law of the number of rounds (`law_from_dict`'s form)
SETTING: dict[str, Any] = {
    "epsilon": 4.0,
    "delta": 1e-5,
    "steps": 20,
    "lr": 0.01,
    "clip": 1.0,
    "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
}
GAMES = (250, 1000, 4000)
CANARIES = (100, 650)
REPEATS = 10
GAME_REPEATS = 5


def _spec(trials: int, seed: int):
    s = SETTING
    return parse_config(
        {
            "name": "one-run-comparison",
            "delta": s["delta"],
            "base": {
                "kind": "dpsgd",
                "epsilon": s["epsilon"],
                "steps": s["steps"],
                "sample_rate": 1.0,
            },
            "rounds": s["rounds"],
            "game": {
                "kind": "dpsgd",
                "threat": "etcv",
                "canary": "dirac",
                "dataset": "digits",
                "model": "logreg",
                "learning_rates": [s["lr"]],
                "clip": s["clip"],
                "proxy": "lambda_a",
                "trials": trials,
                "seed": seed,
                "threshold": "split",
            },
        }
    )


def _spread(key: str, values: Sequence[float]) -> dict[str, float]:
    """The mean of `values` under `key`, their min and max under `key`_min and `key`_max."""
    return {
        key: float(np.mean(values)),
        f"{key}_min": float(np.min(values)),
        f"{key}_max": float(np.max(values)),
    }


def _game_row(trials: int, seed: int, exact: dict, repeats: int = 1) -> dict:
    """`repeats` game-based audits of `trials` games each (seeds seed, seed + 1, ...): eps_L is
    their mean (each a valid 95% bound; the mean is a summary), with min and max."""
    eps, cpu_total, wall = [], 0.0, time.perf_counter()
    for r in range(repeats):
        spec = _spec(trials, seed + r)
        cpu = time.process_time()
        protocol, proxy = protocol_and_proxy(spec)
        execution = ExecutionOptions(chunk_size=spec.game.chunk_size, jobs=1)
        record = run_game(protocol, proxy, trials, seed + r, execution=execution)
        assert record.scores is not None and record.member is not None  # played in memory
        rule = Split(seed=seed + r)
        eps.append(audit_scores(record.scores, record.member, spec.delta, rule=rule).eps)
        cpu_total += time.process_time() - cpu
    cpu, mean = cpu_total / repeats, float(np.mean(eps))
    return {
        "method": "game-based (split, lambda_a)",
        "canaries": 1,
        "games": trials,
        "repeats": repeats,
        **_spread("eps_L", eps),
        "eps_L_runs": [float(e) for e in eps],
        "eps_L_mmc24": None,
        "eps_L_mmc24_per_cpu_minute": None,
        "cpu_seconds": cpu,
        "wall_seconds": (time.perf_counter() - wall) / repeats,
        "eps_L_per_cpu_minute": mean / (cpu / 60),
        "target": "tuning run, one example",
        "exact": exact["game"],
        "eps_B": exact["eps_B"],
        "rigour": "valid, 95% (each audit)",
    }


def _one_run_rows(m: int, repeats: int, seed: int, exact_b: float, sigma: float) -> dict:
    s = SETTING
    game = OneRunDpsgd(
        canaries=m,
        noise_multiplier=sigma,
        steps=s["steps"],
        law=law_from_dict(s["rounds"]),
        learning_rates=(s["lr"],),
        clip=s["clip"],
    )
    setup = game.setup()
    exact = game.reduced.epsilon(s["delta"])
    family = game.reduced.family
    snj, mmc, train_cpu, analysis_cpu, wall = [], [], 0.0, 0.0, time.perf_counter()
    for r in range(repeats):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(m, r)))
        t = time.process_time()
        scores, members = game.play(rng, setup)
        train_cpu += time.process_time() - t
        t = time.process_time()
        bound = audit_one_run(scores, members, s["delta"], family=family)
        analysis_cpu += time.process_time() - t
        snj.append(bound.eps_snj23)
        mmc.append(bound.eps_mmc24)
    cpu = (train_cpu + analysis_cpu) / repeats
    return {
        "method": "one-run ([SNJ23] | [MMC24] tuning family)",
        "canaries": m,
        "games": 1,
        "repeats": repeats,
        **_spread("eps_L", snj),
        **_spread("eps_L_mmc24", mmc),
        "cpu_seconds": cpu,
        "cpu_seconds_training": train_cpu / repeats,
        "cpu_seconds_analysis": analysis_cpu / repeats,
        "wall_seconds": (time.perf_counter() - wall) / repeats,
        "eps_L_per_cpu_minute": float(np.mean(snj)) / (cpu / 60),
        "eps_L_mmc24_per_cpu_minute": float(np.mean(mmc)) / (cpu / 60),
        "target": f"one canary of {m}",
        "exact": exact,
        "eps_B": exact_b,
        "rigour": "valid, 95% (each audit); [MMC24]: the trade-off is in the family (exact for ETCV)",
    }


def rows(
    jobs: int = 1,
    games: Sequence[int] = GAMES,
    canaries: Sequence[int] = CANARIES,
    repeats: int = REPEATS,
    seed: int = 0,
    game_repeats: int = GAME_REPEATS,
) -> list[dict[str, Any]]:
    """The comparison table (one row per game budget and per canary count); game-based rows
    repeat their audit `game_repeats` times, one-run rows `repeats` times."""
    from auditsel.dpsgd.trainer import calibrate_noise_multiplier  # deferred: torch

    s = SETTING
    sigma = calibrate_noise_multiplier(s["epsilon"], s["delta"], s["steps"], 1.0)
    mu = math.sqrt(s["steps"]) / sigma
    exact = {
        "game": exact_epsilon(
            GaussianWinner(GaussianBase(mu), law_from_dict(s["rounds"])), s["delta"]
        ),
        "eps_B": gaussian_epsilon(mu, s["delta"]),
    }
    out = [_game_row(t, seed, exact, game_repeats) for t in games]
    out += [_one_run_rows(m, repeats, seed, exact["eps_B"], sigma) for m in canaries]
    for row in out:
        row["sigma"], row["mu"] = sigma, mu
    return out


TIGHTNESS_EPS = (1.0, 4.0)
TIGHTNESS_CANARIES = (100, 1000, 10000)
TIGHTNESS_REPEATS = 3


def tightness_rows(
    eps_b: Sequence[float] = TIGHTNESS_EPS,
    canaries: Sequence[int] = TIGHTNESS_CANARIES,
    repeats: int = TIGHTNESS_REPEATS,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """The reduced one-run game (`auditsel.games.one_run_reduced`, TNB(0, 0.01), delta = 1e-5): eps_L of
    one-run audits against the exact per-canary epsilon, for a Gaussian base of eps_B and m canaries."""
    out = []
    law = law_from_dict(SETTING["rounds"])
    for e in eps_b:
        for m in canaries:
            game = OneRunReducedGame(gaussian_mu(e, SETTING["delta"]), law, m)
            snj, mmc, cpu = [], [], time.process_time()
            for r in range(repeats):
                rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(m, r)))
                b = audit_one_run(*game.play(rng), SETTING["delta"], family=game.family)
                snj.append(b.eps_snj23)
                mmc.append(b.eps_mmc24)
            exact = game.epsilon(SETTING["delta"])
            out.append(
                {
                    "eps_B": e,
                    "mu": game.mu,
                    "canaries": m,
                    "repeats": repeats,
                    "exact_per_canary": exact,
                    **_spread("eps_L_snj23", snj),
                    **_spread("eps_L_mmc24", mmc),
                    "snj23_over_exact": float(np.mean(snj)) / exact,
                    "mmc24_over_exact": float(np.mean(mmc)) / exact,
                    "cpu_seconds_per_audit": (time.process_time() - cpu) / repeats,
                }
            )
    return out


def summary(table: Sequence[Mapping[str, Any]]) -> list[str]:
    game = [r for r in table if r["canaries"] == 1]
    one = [r for r in table if r["canaries"] > 1]
    lines = [
        f"exact eps of the tuning run w.r.t. one example: {game[0]['exact']:.3f} "
        f"(one run of DP-SGD: {game[0]['eps_B']:.3f}; mu = {game[0]['mu']:.4f})"
    ]
    for r in one:
        lines.append(
            f"one-run, m = {r['canaries']}: eps_L {r['eps_L']:.3f} [SNJ23] / "
            f"{r['eps_L_mmc24']:.3f} [MMC24] (mean of {r['repeats']}) in {r['cpu_seconds']:.2f} "
            f"CPU s, target {r['exact']:.3f} (one canary of {r['canaries']})"
        )
    for r in game:
        lines.append(
            f"game-based, {r['games']:,} games: eps_L {r['eps_L']:.3f} (mean of {r['repeats']}, "
            f"{r['eps_L_min']:.3f} to {r['eps_L_max']:.3f}) in {r['cpu_seconds']:.1f} CPU s per audit"
        )
    return lines


def _plot_one_run(ax: Any, one: Sequence[Mapping[str, Any]]) -> None:
    """comparison.png's one-run rows: [SNJ23]'s and [MMC24]'s eps_L (mean, min-max) at their
    CPU seconds, and each row's exact per-canary epsilon."""
    for i, r in enumerate(one):
        x, colour = r["cpu_seconds"], f"C{i + 1}"
        for key, marker, name in (("eps_L", "s", "[SNJ23]"), ("eps_L_mmc24", "^", "[MMC24]")):
            yerr = [[r[key] - r[f"{key}_min"]], [r[f"{key}_max"] - r[key]]]
            label = (
                f"one-run {name}, m = {r['canaries']} (valid 95%; mean, min-max of {r['repeats']})"
            )
            ax.errorbar([x], [r[key]], yerr=yerr, fmt=marker, color=colour, capsize=3, label=label)
        label = f"exact, one canary of {r['canaries']} ({r['exact']:.3f})"
        ax.axhline(r["exact"], color=colour, ls=":", lw=1.5, label=label)


def plot(table: Sequence[Mapping[str, Any]], out_dir: str | Path) -> list[Path]:
    game = [r for r in table if r["canaries"] == 1]
    one = [r for r in table if r["canaries"] > 1]
    fig, ax = new_figure((8, 6.5))
    xs, ys = [r["cpu_seconds"] for r in game], [r["eps_L"] for r in game]
    yerr = [
        [y - r["eps_L_min"] for y, r in zip(ys, game)],
        [r["eps_L_max"] - y for y, r in zip(ys, game)],
    ]
    label = f"game-based eps_L (valid 95%, split; mean, min-max of {game[0]['repeats']})"
    ax.errorbar(xs, ys, yerr=yerr, fmt="o-", color="C0", capsize=3, label=label)
    _plot_one_run(ax, one)
    exact, eps_b = game[0]["exact"], game[0]["eps_B"]
    ax.axhline(
        exact, color="C0", ls="--", lw=1, label=f"exact, tuning run, one example ({exact:.3f})"
    )
    ax.axhline(
        eps_b, color="grey", ls="-.", lw=1, label=f"exact eps of one DP-SGD run ({eps_b:.3f})"
    )
    ax.set_xscale("log")
    ax.set_xlabel("CPU seconds per audit (training + analysis)")
    ax.set_ylabel("epsilon at delta = 1e-5")
    ax.set_title("Real DP-SGD (ETCV, Dirac, tau = 1, N = 20), TNB(0, 0.01)")
    ax.set_ylim(0, 1.1 * max(r["exact"] for r in table))
    fig.legend(*ax.get_legend_handles_labels(), fontsize=7, loc="lower center", ncol=2)
    fig.tight_layout(rect=(0, 0.22, 1, 1))
    path = Path(out_dir) / "comparison.png"
    save_figure(fig, path)
    return [path]


COLUMNS = tuple(
    "method canaries games repeats eps_L eps_L_min eps_L_max eps_L_mmc24 cpu_seconds "
    "eps_L_per_cpu_minute eps_L_mmc24_per_cpu_minute target exact eps_B rigour".split()
)
TIGHTNESS_COLUMNS = tuple(
    "eps_B canaries repeats exact_per_canary eps_L_snj23 eps_L_snj23_min eps_L_snj23_max "
    "eps_L_mmc24 eps_L_mmc24_min eps_L_mmc24_max snj23_over_exact mmc24_over_exact "
    "cpu_seconds_per_audit".split()
)


def _cell(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def write(
    table: Sequence[Mapping[str, Any]],
    out_dir: str | Path,
    seconds: float,
    tightness: Sequence[Mapping[str, Any]] | None = None,
) -> list[Path]:
    """table.md, table.csv, rows.json and comparison.png under out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = [
        "# One-run against game-based audits on real DP-SGD",
        "",
        (__doc__ or "").strip().split("\n\n")[1].replace("\n", " "),
        "",
        to_markdown(table, COLUMNS, cell=_cell),
        "",
        *[f"- {line}" for line in summary(table)],
        "",
        "eps_L: mean over the repeats (each audit is a valid 95% bound; the mean is a summary, "
        "eps_L_min and eps_L_max the spread); eps_L is [SNJ23] for one-run rows, eps_L_mmc24 the "
        "[MMC24] bound of the same runs; game-based repeats use seeds 0, 1, .... "
        f"Regenerate: `python -m auditsel.reproductions.one_run_vs_games` ({seconds:.0f} s here, 2 shared cores).",
        "",
    ]
    (out / "table.md").write_text("\n".join(md))
    (out / "table.csv").write_text(_csv(table, sorted({k for r in table for k in r})))
    (out / "rows.json").write_text(json.dumps(table, indent=1, allow_nan=False))
    files = [out / "table.md", out / "table.csv", out / "rows.json", *plot(table, out)]
    if tightness:
        files += _write_tightness(out, tightness)
    return files


def _write_tightness(out: Path, tightness: Sequence[Mapping[str, Any]]) -> list[Path]:
    """tightness.md and tightness.json under out: the one-run audits against the exact
    per-canary epsilon of the reduced one-run game."""
    md = [
        "# Tightness of one-run audits in the reduced one-run tuning game",
        "",
        "TNB(0, 0.01), delta = 1e-5, Gaussian base calibrated to eps_B, m canaries in one tuning "
        "run (the tuner selects on the sum of the canary coordinates; auditsel.games.one_run_reduced). "
        "eps_L: mean (min, max) over the repeats of valid 95% bounds; exact_per_canary: the "
        f"exact epsilon w.r.t. one canary, {EXACT_SCOPE}.",
        "",
        to_markdown(tightness, TIGHTNESS_COLUMNS, cell=_cell),
    ]
    (out / "tightness.md").write_text("\n".join(md) + "\n")
    (out / "tightness.json").write_text(json.dumps(tightness, indent=1, allow_nan=False))
    return [out / "tightness.md", out / "tightness.json"]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="one-run vs game-based audits on real DP-SGD")
    parser.add_argument("--out", default="results/one_run")
    args = parser.parse_args()
    start = time.perf_counter()
    table = rows()
    tight = tightness_rows()
    for path in write(table, args.out, time.perf_counter() - start, tight):
        print(f"wrote {path}")
