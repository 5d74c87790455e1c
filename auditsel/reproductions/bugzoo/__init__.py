"""The bug zoo: tuning pipelines written the way practitioners write them, each audited as is.

`auditsel reproduce bugzoo` (written to results/bugzoo/). Every pipeline is one module of this
package holding what an author and an auditor would write:

* `tune(data, seed, canary) -> release`: the author's whole tuning run (PyTorch DP-GD by hand,
  or Opacus, on scikit-learn's breast-cancer data, `data`), with one bug or none (`BUG`);

* `claim(delta)`: the epsilon the author claims for the tuning run, computed by the pipeline's
  own accounting (`auditsel.from_opacus`, or `auditsel.DpsgdBase`) and the tuning bound of the
  law of K the author states (`claims.tuning_epsilon`);

* `CANARY` and `score(release, canary)`: the auditor's canary and attack;

* `correct_epsilon(delta) -> (value or None, how)`: what a correct accounting of the pipeline
  as written gives (exact, or a rigorous bound: `how` says which), None where no theorem
  covers what it does.

For each pipeline `audit(name)` follows the route a user would (docs/findings/bugzoo.md):

1. plan from a pilot of `PILOT` games (seed 1, `auditsel.plan_pipeline`, honest: on the
   pilot's pessimistic curve) the games that refute the claim with probability POWER, for an
   audit at the per-look confidence 1 - (1 - CONFIDENCE) / LOOKS (the last look of step 2);
2. audit with early stopping (`auditsel.audit_until_refuted`: LOOKS looks at a geometric
   schedule up to the budget, each at confidence 1 - (1 - CONFIDENCE) / LOOKS, stopping at the
   first that refutes), the budget being the planned games (SAFETY = 1: the honest plan is
   not inflated; at least `MIN_GAMES`, rounded up to a multiple of 500) or, when the pilot
   plans no refutation or more than `BUDGET` games, the stated game budget `BUDGET`.

Validity: the pilot plays other games (seed 1) and only sizes the audit; the looks are a union
bound (alpha spending, equal shares), so "refuted" holds at CONFIDENCE over all the looks, and
a correct pipeline's claim is refuted with probability at most 1 - CONFIDENCE = 5%. Each row:
the claim, the valid eps_L (of the look that stood), the verdict (refuted: eps_L > claim), the
games played and the budget, the CPU seconds of pilot and audit, the plan, and the correct
accounting.
"""

from __future__ import annotations

import importlib
import json
import math
import shutil
import time
import types
from pathlib import Path

from auditsel.experiments.figures import save_figure
from auditsel.experiments.report import atomic_write_text
from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions
from auditsel.pipelines.pipeline_plan import plan_pipeline
from auditsel.pipelines.sequential import audit_until_refuted
from auditsel.reproductions import REGISTRY, _csv, to_markdown
from auditsel.reproductions.accountant_claims import MissingExtra

__all__ = ["PIPELINES", "DELTA", "audit", "rows", "render", "findings", "plot"]

PIPELINES = (
    "correct_dpgd",
    "correct_opacus",
    "noise_for_mean",
    "batch_clipping",
    "shuffled_batches",
    "release_all",
    "fixed_grid",
    "train_selection",
)
DELTA = 1e-5
CONFIDENCE = 0.95
PILOT = 200
POWER = 0.9
SAFETY = 1  # the honest plan, as planned (docs/findings/plan-calibration.md: conservative)
LOOKS = 4  # the early-stopping audit's looks (auditsel.pipelines.sequential)
MIN_GAMES = 1000
BUDGET = 8_000  # the stated game budget when the pilot plans no refutation within it
LOOK_CONFIDENCE = 1 - (1 - CONFIDENCE) / LOOKS  # each look's, and the plan's, confidence
AUDIT_SEED = 0  # the pilot plays at AUDIT_SEED + 1 (plan_pipeline): never the audit's games
SCALE = 20.0  # the plot shows correct accountings up to this eps


def module(name: str) -> types.ModuleType:
    """The pipeline module `name` (imports torch, and opacus for the Opacus pipelines)."""
    if name not in PIPELINES:
        raise KeyError(f"no pipeline {name!r} in the zoo; one of {', '.join(PIPELINES)}")
    return importlib.import_module(f"{__name__}.{name}")


def planned_games(games_to_refute: int | None) -> int:
    """The early-stopping audit's budget from the plan (see the module docstring): the planned
    games (times SAFETY, at least MIN_GAMES, in steps of 500), or BUDGET when none is planned
    within it."""
    if games_to_refute is None:
        return BUDGET
    games = max(MIN_GAMES, 500 * math.ceil(SAFETY * games_to_refute / 500))
    return min(games, BUDGET)


def audit(
    name: str,
    *,
    jobs: int = 1,
    pilot: int = PILOT,
    games: int | None = None,
    checkpoint_dir: Path | None = None,
) -> dict:
    """Plan and audit one pipeline of the zoo: its row (`games` fixes the budget, skipping
    the planner's choice but not the pilot)."""
    m = module(name)
    claimed = float(m.claim(DELTA))
    start = time.perf_counter()
    common = dict(data=m.TRAIN, canary=m.CANARY, delta=DELTA, claimed_epsilon=claimed)
    plan = plan_pipeline(  # planned for the last look: LOOK_CONFIDENCE
        m.tune,
        m.score,
        pilot=pilot,
        power=POWER,
        statistics=AuditOptions(confidence=LOOK_CONFIDENCE, seed=AUDIT_SEED),
        execution=ExecutionOptions(jobs=jobs),
        **common,
    )
    n = planned_games(plan.games_to_refute) if games is None else games
    result = audit_until_refuted(
        m.tune,
        m.score,
        games=n,
        looks=LOOKS,
        confidence=CONFIDENCE,
        seed=AUDIT_SEED,
        jobs=jobs,
        checkpoint_dir=checkpoint_dir,
        panel=False,
        **common,
    )
    sequential = result.result["sequential"]
    truth, how = m.correct_epsilon(DELTA)
    return {
        "pipeline": name,
        "bug": m.BUG,
        "claimed_epsilon": claimed,
        "eps": result.eps,
        "refuted": bool(result.refuted),
        "games": int(sequential["stopped_at"]),
        "budget": n,
        "looks": [int(k) for k in sequential["looks"]],
        "cpu_seconds": round(plan.cpu_seconds_per_game * pilot + result.cpu_seconds, 2),
        "pilot_games": pilot,
        "pilot_curve_eps": plan.curve_eps,
        "planned_games_to_refute": plan.games_to_refute,
        "correct_epsilon": truth,
        "correct_epsilon_how": how,
        "wall_seconds": round(time.perf_counter() - start, 1),
    }


def rows(jobs: int = 1, out: Path | None = None) -> list[dict]:
    """One row per pipeline of the zoo (checkpoints under OUT/checkpoints/PIPELINE)."""
    try:
        importlib.import_module("opacus")
    except ImportError:
        raise MissingExtra("opacus", "bench") from None
    work = None if out is None else out / "checkpoints"
    return [
        audit(name, jobs=jobs, checkpoint_dir=None if work is None else work / name)
        for name in PIPELINES
    ]


def _verdict(row: dict) -> str:
    return "refuted" if row["refuted"] else "not refuted"


def table_rows(rows: list[dict]) -> list[dict]:
    """The columns of table.md."""
    return [
        {
            "pipeline": r["pipeline"],
            "bug": r["bug"] or "none (correct)",
            "claimed eps": r["claimed_epsilon"],
            "eps_L (95%)": r["eps"],
            "verdict": _verdict(r),
            "games": r["games"],
            "budget": r["budget"],
            "CPU s": r["cpu_seconds"],
            "correct eps": r["correct_epsilon"],
        }
        for r in rows
    ]


def findings(rows: list[dict]) -> list[str]:
    """What the table shows, every number read from the rows."""
    buggy = [r for r in rows if r["bug"] is not None]
    correct = [r for r in rows if r["bug"] is None]
    refuted = [r for r in buggy if r["refuted"]]
    missed = [r for r in buggy if not r["refuted"]]
    lines = [
        f"- {len(refuted)} of {len(buggy)} buggy pipelines refuted; "
        f"{sum(not r['refuted'] for r in correct)} of {len(correct)} correct pipelines not "
        f"refuted.",
    ]
    if refuted:
        slowest = max(refuted, key=lambda r: r["cpu_seconds"])
        lines.append(
            f"- The costliest refutation: `{slowest['pipeline']}`, {slowest['games']:,} games "
            f"(+ {slowest['pilot_games']} pilot games), {slowest['cpu_seconds']:.0f} CPU s."
        )
        early = [r for r in refuted if r["games"] < r["budget"]]
        if early:
            lines.append(
                "- Stopped early (refuted at a look before the budget): "
                + ", ".join(
                    f"`{r['pipeline']}` at {r['games']:,} of {r['budget']:,} games" for r in early
                )
                + "."
            )
    for r in missed:
        how = r["correct_epsilon_how"]
        if r["correct_epsilon"] is not None:
            how = f"{r['correct_epsilon']:.3g} ({how})"
        plan = (
            "the pilot plans no refutation (its curve reaches "
            f"{r['pilot_curve_eps']:.2f} < claim {r['claimed_epsilon']:.2f}), so the audit "
            f"played the budget of {r['budget']:,} games"
            if r["planned_games_to_refute"] is None
            else f"the pilot planned {r['planned_games_to_refute']:,} games"
        )
        lines.append(
            f"- Not refuted: `{r['pipeline']}`, eps_L {r['eps']:.3f} against the claim "
            f"{r['claimed_epsilon']:.3f}; correct accounting: {how}; {plan}."
        )
    total = sum(r["cpu_seconds"] for r in rows)
    lines.append(f"- CPU seconds, all pipelines (pilots and audits): {total:.0f}.")
    return lines


def plot(rows: list[dict], path: Path) -> Path:
    """Each pipeline's claim and eps_L, and its correct accounting (off the scale above SCALE)."""
    import matplotlib  # deferred: heavy, and only the plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: with matplotlib, above

    fig, ax = plt.subplots(figsize=(8, 0.55 * len(rows) + 1.2))
    ys = range(len(rows))[::-1]
    finite = [r["correct_epsilon"] for r in rows if (r["correct_epsilon"] or SCALE) < SCALE]
    top = max([r["claimed_epsilon"] for r in rows] + [r["eps"] for r in rows] + finite) * 1.15
    for y, r in zip(ys, rows):
        colour = "tab:red" if r["refuted"] else ("tab:green" if r["bug"] is None else "tab:gray")
        ax.plot([0, r["eps"]], [y, y], color=colour, lw=6, solid_capstyle="butt")
        ax.plot(r["claimed_epsilon"], y, marker="|", ms=22, mew=2.5, color="black")
        if r["correct_epsilon"] is not None:
            x, marker = (r["correct_epsilon"], "x") if r["correct_epsilon"] <= top else (top, ">")
            ax.plot(x, y, marker=marker, ms=8, color="tab:purple")
    ax.set_yticks(list(ys), [r["pipeline"] for r in rows])
    ax.set_xlim(0, top * 1.03)
    ax.set_xlabel(f"epsilon at delta = {DELTA:g}")
    ax.set_title(
        "bar: valid 95% eps_L (red: claim refuted)   |: claimed\n"
        "x: correct accounting (>: off the scale)",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def render(rows: list[dict], seconds: float, out: Path) -> Path:
    """table.md (the table, the findings, the plot), table.csv and rows.json; the checkpoints
    of the audits are removed once they are written."""
    plot(rows, out / "bugzoo.png")
    md = [
        f"# {REGISTRY['bugzoo'].title}",
        "",
        f"delta = {DELTA:g}; eps_L: split rule, Clopper-Pearson; each audit stops early "
        f"(`auditsel.audit_until_refuted`: {LOOKS} looks up to its budget, each at confidence "
        f"{LOOK_CONFIDENCE:g}, the verdict valid at {CONFIDENCE:.0%} over all looks); budget: "
        f"the games `auditsel.plan_pipeline` plans from a {PILOT}-game pilot, or {BUDGET:,} "
        "when it plans no refutation (see `auditsel.reproductions.bugzoo`). games: played. "
        "CPU s: pilot and audit, all workers.",
        "",
        to_markdown(table_rows(rows), digits=3),
        "",
        *findings(rows),
        "",
        f"Computed by `auditsel reproduce bugzoo` in {seconds:.0f} s of wall time.",
        "",
        "![claims and eps_L](bugzoo.png)",
        "",
    ]
    atomic_write_text(out / "table.md", "\n".join(md))
    atomic_write_text(out / "table.csv", _csv(rows))
    atomic_write_text(out / "rows.json", json.dumps(rows, indent=1) + "\n")
    shutil.rmtree(out / "checkpoints", ignore_errors=True)  # kept only to resume a broken run
    return out
