"""`auditsel reproduce accountants`: real accountants' and papers' claims against the worst-case game.

For each cell (sigma, N, tau, law of K; delta = 1e-5) the table lists every applicable claim of
`auditsel.reproductions.accountant_claims`, the optimistic PLD estimates of one run's epsilon, auditsel's valid 95%
lower bound eps_L from the worst-case DP-SGD game (`auditsel.games.worst_case`, split rule,
Clopper-Pearson, `GAMES` games; `CLOSE_GAMES` where eps_L lies within `CLOSE` of a claim and the
cell is cheap), the attack value (`accounting.attack`: a lower bound with no sampling error) and
the interval (`accounting.interval`: [the larger of the two, the tightest rigorous bound of
auditsel's panel]) with its width. A claim is *refuted* when eps_L exceeds it: with 95%
confidence the claimed epsilon is below the true epsilon of the worst-case run (add/remove
neighbours); it is *below the attack value* when the attack value exceeds it: then it is wrong
with certainty.

Games run through the engine (`auditsel.games.engine.run_game`: seeded chunks, joblib workers,
checkpoints under OUT/checkpoints/CELL, removed once the table is written, so an interrupted
table resumes). Cost of a cell: E[K] * N Gaussian steps per game.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attacks.proxies import SampleProxy
from auditsel.accounting.attack import attack_epsilon
from auditsel.accounting.interval import tuning_interval
from auditsel.auditing.lower import LowerBound, audit_scores
from auditsel.auditing.rules import Split
from auditsel.executor import ExecutionOptions
from auditsel.games.engine import run_game
from auditsel.games.worst_case import DpsgdWorstCase
from auditsel.reproductions import _law_name
from auditsel.reproductions.accountant_claims import (
    CLAIMS,
    MissingExtra,
    Setting,
    claim_epsilon,
    library_versions,
    lower_estimates,
)
from auditsel.results.figures import new_figure, save_figure
from auditsel.rounds import Point, Poisson, TruncatedNegativeBinomial, TwoPoint

DELTA = 1e-5
GAMES = 10_000_000
CLOSE_GAMES = 40_000_000
CLOSE = 0.1  # eps_L within 10% below a claim: rerun with CLOSE_GAMES
CLOSE_MAX_COST = 10  # ... when E[K] * N is at most this
CONFIDENCE = 0.95

#: (sigma, N, tau) of the cells of one run, K = 1
_SINGLE = [(s, 1, t) for t in (1.0, 0.1) for s in (0.5, 1.0, 2.0)] + [
    (0.8, 3, 0.2),
    (0.5, 10, 0.5),
    (1.0, 10, 0.1),
    (2.0, 10, 0.1),
    (1.0, 10, 1.0),
    (1.0, 100, 0.1),
    (2.0, 100, 0.01),
    (1.0, 1000, 0.01),
]
_LAWS = [TruncatedNegativeBinomial(0.0, 0.1), Poisson(4.0), TwoPoint(10, 0.5)]
_TUNED = [(1.0, 1, 1.0), (0.8, 3, 0.2), (1.0, 10, 0.1)]

GRID = tuple(
    [Setting(s, n, t, Point(1), DELTA) for s, n, t in _SINGLE]
    + [Setting(s, n, t, law, DELTA) for law in _LAWS for s, n, t in _TUNED]
)


def cell_id(setting: Setting) -> str:
    text = f"s{setting.noise_multiplier:g}_N{setting.steps}_q{setting.sample_rate:g}_"
    text += _law_name(setting.law)
    return text.translate(str.maketrans("(,", "__", " )="))


def run_cell(
    setting: Setting, games: int, seed: int, jobs: int = 1, checkpoint_dir: Path | None = None
) -> tuple[LowerBound, float]:
    """Play the worst-case game for one cell; returns the LowerBound and the seconds it took."""
    game = DpsgdWorstCase(setting.noise_multiplier, setting.steps, setting.sample_rate, setting.law)
    start = time.perf_counter()
    fingerprint = f"accountants/{cell_id(setting)}/{seed}"
    execution = ExecutionOptions(jobs=jobs, checkpoint_dir=checkpoint_dir)
    record = run_game(
        game, SampleProxy(), games, seed, fingerprint=fingerprint, execution=execution
    )
    assert record.scores is not None and record.member is not None  # played in memory
    bound = audit_scores(  # the split's seed: the game's (independent streams of it)
        record.scores, record.member, setting.delta, confidence=CONFIDENCE, rule=Split(seed=seed)
    )
    return bound, time.perf_counter() - start


def _claims(setting: Setting) -> tuple[dict, dict]:
    values, errors = {}, {}
    for name in CLAIMS:
        try:
            values[name] = claim_epsilon(name, setting)
        except MissingExtra:
            raise
        except Exception as err:
            values[name] = None
            errors[name] = f"{type(err).__name__}: {str(err)[:80]}"
    return values, errors


def cell_rows(
    grid: Sequence[Setting] = GRID,
    games: int = GAMES,
    close_games: int = CLOSE_GAMES,
    jobs: int = 1,
    work_dir: Path | None = None,
    log: Callable[[str], object] | None = print,
) -> list[dict[str, Any]]:
    rows = []
    for index, setting in enumerate(grid):
        row, message = _cell_row(index, setting, (games, close_games), jobs, work_dir)
        rows.append(row)
        if log:
            log(f"[{index + 1}/{len(grid)}] {message}")
    if work_dir is not None:
        shutil.rmtree(work_dir, ignore_errors=True)
    return rows


def _cell_row(
    index: int, setting: Setting, sizes: tuple[int, int], jobs: int, work_dir: Path | None
) -> tuple[dict[str, Any], str]:
    """One cell's row (its claims, its game's eps_L, the interval and the attack value, the
    seconds each took) and its log line (`sizes`: the games, and the games of a close cell)."""
    t0 = time.perf_counter()
    claims, errors = _claims(setting)
    claim_seconds = time.perf_counter() - t0
    lower = lower_estimates(setting) if setting.single_run else {}
    bound, seconds, played = _played_cell(index, setting, claims, sizes, jobs, work_dir)
    t1 = time.perf_counter()
    source = f"eps_L (worst-case game, {played:,} games, 95%)"
    interval = tuning_interval(
        setting.base, setting.law, setting.delta, eps_l=bound.eps, eps_l_source=source
    )
    attack_value = attack_epsilon(setting.base, setting.law, setting.delta)
    attack_seconds = time.perf_counter() - t1
    row = {
        "sigma": setting.noise_multiplier,
        "steps": setting.steps,
        "sample_rate": setting.sample_rate,
        "law": _law_name(setting.law),
        "mean_K": float(setting.law.mean),
        "delta": setting.delta,
        "mu": setting.mu,
        "games": played,
        "eps_L": bound.eps,
        "eps_L_best": bound.eps_best_threshold,
        "attack": attack_value,
        "interval_lower": interval.lower,
        "interval_lower_source": interval.lower_source,
        "interval_upper": interval.upper,
        "interval_upper_source": interval.upper_source,
        "width": interval.width,
        "single_run_pld": claims["naive"],
        **{f"claim_{k}": v for k, v in claims.items()},
        **lower,
        "refuted": [k for k, v in claims.items() if v is not None and bound.eps > v],
        "below_attack": below_attack(claims, attack_value),
        "errors": errors,
        "game_seconds": round(seconds, 2),
        "claim_seconds": round(claim_seconds, 2),
        "attack_seconds": round(attack_seconds, 2),
        "games_per_second": round(played / seconds),
    }
    message = (
        f"{cell_id(setting)}: eps_L = {bound.eps:.3f} ({played:,} games, "
        f"{seconds:.0f} s; claims {claim_seconds:.0f} s); refuted: {', '.join(row['refuted']) or 'none'}"
    )
    return row, message


def _played_cell(
    index: int,
    setting: Setting,
    claims: dict[str, float | None],
    sizes: tuple[int, int],
    jobs: int,
    work_dir: Path | None,
) -> tuple[Any, float, int]:
    """(eps_L's bound, seconds, games) of the cell's worst-case game: `sizes[0]` games, then
    `sizes[1]` at another seed where eps_L comes close below a claim and the cell is cheap."""
    games, close_games = sizes
    cost = float(setting.law.mean) * setting.steps
    ckpt = None if work_dir is None else work_dir / cell_id(setting)
    bound, seconds = run_cell(setting, games, seed=index, jobs=jobs, checkpoint_dir=ckpt)
    played = games
    close = [c for c in claims.values() if c is not None and (1 - CLOSE) * c < bound.eps <= c]
    if close and cost <= CLOSE_MAX_COST and close_games > games:
        ckpt = None if work_dir is None else work_dir / (cell_id(setting) + "_close")
        bound, more = run_cell(
            setting, close_games, seed=1000 + index, jobs=jobs, checkpoint_dir=ckpt
        )
        seconds += more
        played = close_games
    return bound, seconds, played


#: the attack value and the claims come from root finders accurate to about 1e-9: a claim counts
#: as below the attack value only when it is below by more than this (relative) margin
_ATTACK_MARGIN = 1e-6


def below_attack(claims: dict, attack_value: float) -> list[str]:
    """The claims below the attack value by more than _ATTACK_MARGIN (wrong with certainty)."""
    return [
        k
        for k, v in claims.items()
        if v is not None and attack_value > v * (1 + _ATTACK_MARGIN) + _ATTACK_MARGIN
    ]


def _below(r: Mapping[str, Any]) -> list[str]:
    """A row's claims below its attack value (recomputed from the row's numbers)."""
    claims = {n: r.get("claim_" + n) for n in CLAIMS}
    return below_attack(claims, r["attack"]) if r.get("attack") is not None else []


def header() -> list[str]:
    v = library_versions()
    versions = ", ".join(f"{k} {v[k] or 'not installed'}" for k in v)
    return [
        f"Libraries: {versions}. delta = {DELTA:g}; add/remove neighbours throughout (each library's "
        f"own relation: Opacus and prv_accountant analyse the Poisson-subsampled Gaussian's remove pair, "
        f"dp_accounting NeighboringRelation.ADD_OR_REMOVE_ONE, the max over add and remove).",
        f"eps_L: auditsel's valid {CONFIDENCE:.0%} lower bound from the worst-case DP-SGD game "
        f"(`game.kind: dpsgd_worst_case`, split rule, Clopper-Pearson), {GAMES:,} games per cell "
        f"({CLOSE_GAMES:,} where eps_L is within {CLOSE:.0%} below a claim and E[K] N <= {CLOSE_MAX_COST}). "
        f"eps_L_best is the optimistic best-threshold value (no confidence statement).",
        "attack: the attack value, the exact epsilon of the strongest attack over score functions "
        "that auditsel computes on the worst-case pair (`auditsel.accounting.attack`): a lower "
        "bound for the tuning run (any score) with no sampling error. interval: [max(attack, "
        "eps_L), the tightest rigorous bound of auditsel's panel for any score (generic_rdp, "
        "profile)]; width = its length. The reduced game's values (xww24_uo, xww24_reduced) hold "
        "only under [XWW24]'s monotone-score assumption, at tau = 1 too: never the interval's end.",
        "A claim is refuted when eps_L > claim, and wrong with certainty when attack > claim "
        f"(by more than a relative {_ATTACK_MARGIN:g}, the root finders' accuracy; marked "
        "'(< attack)'). reduced_mu, xww24_uo and xww24_reduced use "
        "mu = tau sqrt(N)/sigma ([XWW24] eq. 19), a heuristic for tau < 1; Opacus documents its "
        "GaussianAccountant as experimental and able to underestimate.",
    ]


def findings(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per refuted claim, every number from the rows."""
    lines = []
    for r in rows:
        for name in r["refuted"]:
            lines.append(
                f"- {name} ({CLAIMS[name].source}) refuted at sigma = {r['sigma']:g}, N = {r['steps']}, "
                f"tau = {r['sample_rate']:g}, K ~ {r['law']}: claims {r['claim_' + name]:.3f}, "
                f"eps_L = {r['eps_L']:.3f} ({r['games']:,} games); one run's PLD eps "
                f"{r['single_run_pld']:.3f}."
            )
    if not lines:
        lines.append("- no claim refuted.")
    certain = sorted({n for r in rows for n in _below(r)})
    for name in certain:
        cells = [r for r in rows if name in _below(r)]
        worst = max(cells, key=lambda r: r["attack"] - r["claim_" + name])
        lines.append(
            f"- {name} lies below the attack value (wrong with certainty, no sampling error) in "
            f"{len(cells)} cells; the largest gap: claims {worst['claim_' + name]:.3f}, attack "
            f"{worst['attack']:.3f} at sigma = {worst['sigma']:g}, N = {worst['steps']}, "
            f"tau = {worst['sample_rate']:g}, K ~ {worst['law']}."
        )
    tuned = [r for r in rows if r["law"] != "point(k=1)"]
    if tuned:
        widths = [r["width"] for r in tuned]
        rel = [r["width"] / r["interval_upper"] for r in tuned]
        lines.append(
            f"- interval on the {len(tuned)} tuning cells: width {min(widths):.3f} to "
            f"{max(widths):.3f} (median {sorted(widths)[len(widths) // 2]:.3f}), i.e. the "
            f"tightest rigorous bound exceeds the best lower value by {100 * min(rel):.0f}% to "
            f"{100 * max(rel):.0f}% of itself; the lower end is the attack value in "
            f"{sum(r['interval_lower_source'].startswith('attack') for r in tuned)} of them."
        )
        for tau_one in (True, False):
            sel = [r for r in tuned if (r["sample_rate"] == 1.0) == tau_one]
            if sel:
                lines.append(
                    f"  - tau {'= 1' if tau_one else '< 1'}: widths "
                    + ", ".join(f"{r['width']:.3f}" for r in sel)
                    + " (upper: "
                    + ", ".join(sorted({r["interval_upper_source"].split(" ")[0] for r in sel}))
                    + ")."
                )
    unrefuted = [n for n in CLAIMS if not any(n in r["refuted"] for r in rows)]
    lines.append(f"- never refuted on this grid: {', '.join(unrefuted)}.")
    bad = [
        (r, n)
        for r in rows
        for n in ("dp_accounting_pld", "profile", "generic_rdp")
        if r.get("claim_" + n) is not None and r["eps_L"] > r["claim_" + n]
    ]
    lines.append(
        f"- soundness check: eps_L above a rigorous bound (pessimistic PLD, profile, generic) in "
        f"{len(bad)} of {len(rows)} cells."
    )
    errors = sorted({f"{n} ({e})" for r in rows for n, e in r["errors"].items()})
    if errors:
        lines.append("- library errors (cell left empty): " + "; ".join(errors) + ".")
    return lines


def plot(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Claimed eps per accountant (x) against auditsel's eps_L (y), refuted claims marked."""
    fig, axes = new_figure((12, 5.2), grid=(1, 2))
    markers = "os^vD<>phX*P8d"
    for ax, tuning in zip(axes[0], (False, True)):
        names = [n for n in CLAIMS if (CLAIMS[n].tuning == tuning)]
        sel = [r for r in rows if (r["law"] != "point(k=1)") == tuning]
        top = 1.0
        for i, name in enumerate(names):
            pts = [
                (r["claim_" + name], r["eps_L"], name in r["refuted"])
                for r in sel
                if r.get("claim_" + name) is not None
            ]
            if not pts:
                continue
            xs, ys, ref = zip(*pts)
            top = max(top, *xs, *ys)
            ax.scatter(xs, ys, marker=markers[i % len(markers)], s=30, label=name, alpha=0.8)
            refuted = [(x, y) for x, y, r in zip(xs, ys, ref) if r]
            if refuted:
                ring = {"marker": "o", "s": 160, "facecolors": "none", "edgecolors": "red"}
                ax.scatter(*zip(*refuted), **ring, linewidths=1.5)
        pld = [
            (r["single_run_pld"], r["eps_L"]) for r in sel if r.get("single_run_pld") is not None
        ]
        if pld and not tuning:
            ax.scatter(
                *zip(*pld), marker="_", s=300, color="k", label="PLD eps of one run (pessimistic)"
            )
        ax.plot([0, top * 1.05], [0, top * 1.05], "k:", lw=1, label="eps_L = claim")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_yscale("symlog", linthresh=1)
        ax.set_xlabel("claimed epsilon")
        ax.set_ylabel("auditsel eps_L (valid 95% lower bound)")
        ax.set_title("one run (K = 1)" if not tuning else "tuning (K > 1)")
        ax.legend(fontsize=7, loc="upper left")
    title = (
        "Accountants' claims against the worst-case DP-SGD game (red ring: refuted, eps_L > claim)"
    )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)


#: the claims that rest on [XWW24]'s reduced game: they assume a monotone score (their own block)
_MONOTONE_SCORE_CLAIMS = ("xww24_uo", "xww24_reduced")


def summary_columns(
    rows: Sequence[Mapping[str, Any]], claims: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The markdown table's columns: setting, eps_L, claims (refuted ones starred); `claims`:
    which claims (default: all but `_MONOTONE_SCORE_CLAIMS`, which `monotone_columns` shows)."""
    names = [n for n in CLAIMS if n not in _MONOTONE_SCORE_CLAIMS] if claims is None else claims
    out = []
    for r in rows:
        row = {
            "sigma": r["sigma"],
            "N": r["steps"],
            "tau": r["sample_rate"],
            "K": r["law"],
            "games": r["games"],
            "eps_L": r["eps_L"],
            "attack": r.get("attack"),
            "interval": (
                f"[{r['interval_lower']:.3f}, {r['interval_upper']:.3f}]"
                if r.get("interval_upper") is not None and math.isfinite(r["interval_upper"])
                else None
            ),
            "width": r.get("width"),
        }
        for name in names:
            v = r.get("claim_" + name)
            mark = " (< attack)" if name in _below(r) else ""
            row[name] = (
                "n/a"
                if v is None
                else (f"**{v:.3f}** refuted{mark}" if name in r["refuted"] else f"{v:.3f}{mark}")
            )
        if "dp_accounting_pld_optimistic" in r and claims is None:
            row["pld_optimistic"] = r["dp_accounting_pld_optimistic"]
        out.append(row)
    return out


def monotone_columns(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The block of [XWW24]'s reduced-game claims (monotone score assumed), tuning cells only."""
    tuned = [r for r in rows if r["law"] != "point(k=1)"]
    keep = ("sigma", "N", "tau", "K", "eps_L", "attack", "interval", *_MONOTONE_SCORE_CLAIMS)
    return [
        {k: v for k, v in row.items() if k in keep}
        for row in summary_columns(tuned, list(_MONOTONE_SCORE_CLAIMS))
    ]
