"""The bug zoo: tuning pipelines written the way practitioners write them, each audited as is.

`auditsel reproduce bugzoo` (written to results/bugzoo/). Every pipeline is one module of this
package holding what an author would write:

* `tune(data, seed, canary) -> release`: the whole tuning run (PyTorch DP-GD or DP-SGD by hand,
  or Opacus, on scikit-learn's breast-cancer or digits data, `TRAIN`), with one bug or none
  (`BUG`);
* `claim(delta)`: the author's claimed epsilon, from the pipeline's own accounting
  (`auditsel.from_opacus` or `auditsel.DpsgdBase`) and the tuning bound of the stated law of K;
* `correct_interval(delta) -> (lower, upper, how)`: a correct accounting of the pipeline as
  written, for any selection score (`zoo_objects.Interval`);
* `pipeline_objects(seed=0)`: one seeded run's objects for a static check
  (`zoo_objects.run_objects`);
* the older modules also keep a hand-chosen `CANARY` and `score` (the tests' small audits).

`audit(name)` follows the documented route, no canary or score chosen by hand
(docs/findings/bugzoo.md):

1. plan from a pilot of `pilot` games (seed 1, `auditsel.plan_pipeline`, `canary="both"`, the
   default score learned from a pilot of its own, `auditsel.pipelines.learned_scores`; honest:
   on the pilot's pessimistic curve) the games per canary that refute the claim with
   probability POWER at the per-look confidence LOOK_CONFIDENCE, and P(refuted) and E[eps_L]
   at the budget;
2. audit with early stopping (`auditsel.audit_until_refuted`, `canary="both"`, `score=None`:
   LOOKS looks on a geometric schedule, each at LOOK_CONFIDENCE, stopping at the first that
   refutes) over `planned_games`, or the budget when the pilot plans no refutation.

A pipeline the route refuses (a release `canary="both"` cannot read) is a row that says so.
Validity (the looks a union bound: "refuted" holds at CONFIDENCE over all of them) and resuming
(finished rows kept in OUT/rows/NAME.json with their budget and pilot, each audit's games in
OUT/checkpoints/NAME, both removed once table.md is written; `pipelines=` recomputes some rows
and keeps the others of OUT/rows.json): docs/findings/bugzoo.md.
"""

from __future__ import annotations

import importlib
import json
import math
import shutil
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from auditsel.errors import ConfigError
from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions, ReportOptions
from auditsel.pipelines.game import PipelineError
from auditsel.pipelines.pipeline import Pipeline
from auditsel.pipelines.pipeline_plan import PilotOptions, plan_pipeline
from auditsel.pipelines.sequential import audit_until_refuted
from auditsel.reproductions import REGISTRY, _clean, _write, to_markdown
from auditsel.reproductions.accountant_claims import MissingExtra
from auditsel.results.figures import new_figure, save_figure
from auditsel.results.report import atomic_write_text

__all__ = [
    "PIPELINES",
    "DELTA",
    "audit",
    "rows",
    "render",
    "findings",
    "plot",
    "reproduce",
    "verdict",
]

PIPELINES = tuple(
    "correct_dpgd correct_opacus correct_opacus_mlp noise_for_mean batch_clipping "
    "shuffled_batches release_all fixed_grid train_selection noise_after_lr scaler_in_model "
    "early_stop_loss noise_before_clip per_tensor_clip leaderboard oversampled_class "
    "second_optimizer_head".split()
)
DELTA = 1e-5
CONFIDENCE = 0.95
PILOT = 200
POWER = 0.9
SAFETY = 1  # the honest plan, as planned (docs/findings/plan-calibration.md: conservative)
LOOKS = 4  # the early-stopping audit's looks (auditsel.pipelines.sequential)
MIN_GAMES = 1000
BUDGET = 8_000  # games per canary: the stated budget when the pilot plans no refutation
LOOK_CONFIDENCE = 1 - (1 - CONFIDENCE) / LOOKS  # each look's, and the plan's, confidence
AUDIT_SEED = 0  # the pilot plays at AUDIT_SEED + 1 (plan_pipeline): never the audit's games
SCALE = 20.0  # the plot shows correct accountings up to this eps
#: the documented route: an input and a gradient canary chosen for you
CANARY: Literal["both"] = "both"
REFUSALS = ("canary", "score", "release")  # a ConfigError of these: the route refuses the pipeline


def module(name: str) -> types.ModuleType:
    """The pipeline module `name` (imports torch, and opacus for the Opacus pipelines)."""
    if name not in PIPELINES:
        raise KeyError(f"no pipeline {name!r} in the zoo; one of {', '.join(PIPELINES)}")
    return importlib.import_module(f"{__name__}.{name}")


def planned_games(games_to_refute: int | None, budget: int = BUDGET) -> int:
    """The early-stopping audit's games per canary from the plan (module docstring): the
    planned games (times SAFETY, at least MIN_GAMES, in steps of 500) capped at `budget`, or
    `budget` when none is planned."""
    if games_to_refute is None:
        return budget
    games = max(MIN_GAMES, 500 * math.ceil(SAFETY * games_to_refute / 500))
    return min(games, budget)


def correct_text(lower: float | None, upper: float | None) -> str:
    """The table's "correct eps": the any-score interval, one end, inf, or "-"."""
    if lower is not None and upper is not None:
        if math.isinf(lower):
            return "inf"
        return f"{lower:.3f}" if lower == upper else f"[{lower:.3f}, {upper:.3f}]"
    if upper is not None:
        return f"<= {upper:.3f}"
    return "-" if lower is None else f">= {lower:.3f}"


def _describe(name: str, claimed: float, budget: int, pilot: int) -> dict[str, Any]:
    m = module(name)
    lower, upper, how = m.correct_interval(DELTA)
    return {
        "pipeline": name,
        "bug": m.BUG,
        "claimed_epsilon": claimed,
        "correct_lower": lower,
        "correct_upper": upper,
        "correct_eps": correct_text(lower, upper),
        "correct_how": how,
        "budget_cap": budget,
        "pilot_games": pilot,
    }


#: a row's plan fields and the plan's attributes they are read from
PLAN_FIELDS = {
    "pilot_curve_eps": "curve_eps",
    "pilot_point_eps": "point_eps",
    "planned_games_to_refute": "games_to_refute",
    "planned_p_refuted": "prob_refute",
    "planned_expected_eps": "expected_eps",
}


def audit(
    name: str,
    *,
    jobs: int = 1,
    pilot: int = PILOT,
    budget: int = BUDGET,
    checkpoint_dir: Path | None = None,
) -> dict:
    """Plan and audit one pipeline of the zoo on the documented route: its row."""
    m = module(name)
    claimed = float(m.claim(DELTA))
    row = _describe(name, claimed, budget, pilot)
    start = time.perf_counter()
    pipeline = Pipeline(m.tune, None, data=m.TRAIN, canary=CANARY)
    try:
        plan = plan_pipeline(  # planned for the last look: LOOK_CONFIDENCE
            pipeline,
            pilot=PilotOptions(games=pilot, power=POWER),
            games=budget,
            statistics=AuditOptions(confidence=LOOK_CONFIDENCE, seed=AUDIT_SEED),
            execution=ExecutionOptions(jobs=jobs),
            delta=DELTA,
            claimed_epsilon=claimed,
        )
        n = planned_games(plan.games_to_refute, budget)
        result = audit_until_refuted(
            pipeline,
            games=n,
            looks=LOOKS,
            statistics=AuditOptions(confidence=CONFIDENCE, seed=AUDIT_SEED),
            execution=ExecutionOptions(jobs=jobs, checkpoint_dir=checkpoint_dir),
            report=ReportOptions(panel=False),
            delta=DELTA,
            claimed_epsilon=claimed,
        )
    except (ConfigError, PipelineError) as err:
        if not isinstance(err, PipelineError) and err.field not in REFUSALS:
            raise  # the zoo's own options (pilot, budget): not the route refusing a pipeline
        return {**row, **_refused(str(err)), "wall_seconds": round(time.perf_counter() - start)}
    sequential = result.result["sequential"]
    entry = result.result["pipeline"]
    return {
        **row,
        "status": "audited",
        "eps": result.eps,
        "refuted": bool(result.refuted),
        "games": int(sequential["stopped_at"]),
        "budget": n,
        "looks": [int(k) for k in sequential["looks"]],
        "score": f"{entry['canary'].get('kind', '?')}: {entry['score']}",
        "cpu_seconds": round(plan.cpu_seconds_per_game * pilot + result.cpu_seconds, 2),
        **{k: getattr(plan, attr) for k, attr in PLAN_FIELDS.items()},
        "wall_seconds": round(time.perf_counter() - start, 1),
    }


def _refused(message: str) -> dict[str, Any]:
    status = "refused: " + message.splitlines()[0]
    row = {"status": status, "eps": 0.0, "refuted": False, "games": 0, "budget": 0, "looks": []}
    return {**row, "score": "-", "cpu_seconds": 0.0, **dict.fromkeys(PLAN_FIELDS)}


def _kept(path: Path, budget: int, pilot: int) -> dict | None:
    """A finished row of an earlier, broken run with the same options (module docstring)."""
    try:
        row = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    same = row.get("budget_cap") == budget and row.get("pilot_games") == pilot
    return row if same else None


def rows(
    jobs: int = 1,
    out: Path | None = None,
    *,
    budget: int = BUDGET,
    pilot: int = PILOT,
    pipelines: Sequence[str] | None = None,
) -> list[dict]:
    """One row per pipeline of the zoo (module docstring: resumed from OUT/rows/, checkpoints
    under OUT/checkpoints/PIPELINE; `pipelines`: only these, the others kept from
    OUT/rows.json)."""
    try:
        importlib.import_module("opacus")
    except ImportError:
        raise MissingExtra("opacus", "bench") from None
    names = list(PIPELINES if pipelines is None else pipelines)
    for name in names:
        module(name)  # an unknown name fails before any game
    done: dict[str, dict] = {}
    if pipelines is not None and out is not None and (out / "rows.json").exists():
        done = {r["pipeline"]: r for r in json.loads((out / "rows.json").read_text())}
    for name in names:
        kept = None if out is None else _kept(out / "rows" / f"{name}.json", budget, pilot)
        if kept is None:
            work = None if out is None else out / "checkpoints" / name
            kept = audit(name, jobs=jobs, pilot=pilot, budget=budget, checkpoint_dir=work)
            kept = {k: _clean(v) for k, v in kept.items()}
            if out is not None:
                (out / "rows").mkdir(parents=True, exist_ok=True)
                atomic_write_text(out / "rows" / f"{name}.json", json.dumps(kept, indent=1))
        done[name] = kept
    return [done[n] for n in PIPELINES if n in done]


def reproduce(
    out_root: Path,
    *,
    jobs: int = 1,
    budget: int = BUDGET,
    pilot: int = PILOT,
    pipelines: Sequence[str] | None = None,
) -> Path:
    """`auditsel reproduce bugzoo [--budget N] [--pilot N] [--pipelines A,B]`: the rows under
    out_root/bugzoo/, rendered."""
    out = Path(out_root) / "bugzoo"
    out.mkdir(parents=True, exist_ok=True)
    found = rows(jobs, out, budget=budget, pilot=pilot, pipelines=pipelines)
    return render(found, sum(r["wall_seconds"] for r in found), out)


def verdict(row: dict) -> str:
    """The table's verdict: refuted, not refuted, or refused (by which check: the findings
    give the message)."""
    if row["status"] != "audited":
        return "refused (" + row["status"].removeprefix("refused: ").split(":")[0] + ")"
    return "refuted" if row["refuted"] else "not refuted"


def _plan_text(row: dict) -> str:
    """What the plan predicted: the games per canary to refute, or none; P(refuted) and
    E[eps_L] at the budget."""
    if row["status"] != "audited":
        return "-"
    games = row["planned_games_to_refute"]
    head = "none" if games is None else f"{games:,} games"
    p, e = row["planned_p_refuted"], row["planned_expected_eps"]
    tail = "" if p is None else f"; P(refuted) {p:.2f}"
    tail += "" if e is None else f", E[eps_L] {e:.2f}"
    return head + tail


def table_rows(rows: list[dict]) -> list[dict]:
    """The columns of table.md."""
    return [
        {
            "pipeline": r["pipeline"],
            "bug": r["bug"] or "none (correct)",
            "claimed eps": r["claimed_epsilon"],
            "correct eps (any score)": r["correct_eps"],
            "plan": _plan_text(r),
            "games per canary": r["games"],
            "budget": r["budget"],
            "eps_L (95%)": r["eps"] if r["status"] == "audited" else "-",
            "verdict": verdict(r),
            "CPU s": r["cpu_seconds"],
        }
        for r in rows
    ]


def findings(rows: list[dict]) -> list[str]:
    """What the table shows, every number read from the rows."""
    audited = [r for r in rows if r["status"] == "audited"]
    refused = [r for r in rows if r["status"] != "audited"]
    buggy = [r for r in rows if r["bug"] is not None]
    correct = [r for r in rows if r["bug"] is None]
    refuted = [r for r in buggy if r["refuted"]]
    lines = [
        f"- {len(refuted)} of {len(buggy)} buggy pipelines refuted; "
        f"{sum(not r['refuted'] for r in correct)} of {len(correct)} correct pipelines not "
        f"refuted; {len(refused)} refused by the route."
    ]
    planned = [r for r in audited if r["planned_games_to_refute"] is not None]
    within = [r for r in planned if r["planned_games_to_refute"] <= r["budget_cap"]]
    beyond = [r for r in planned if r not in within]
    lines.append(
        f"- The plan predicted a refutation within the budget for {len(within)} of "
        f"{len(audited)} audited pipelines"
        + (": " + ", ".join(f"`{r['pipeline']}`" for r in within) if within else "")
        + (
            "; beyond it for "
            + ", ".join(f"`{r['pipeline']}` ({r['planned_games_to_refute']:,})" for r in beyond)
            if beyond
            else ""
        )
        + "."
    )
    early = [r for r in refuted if r["games"] < r["budget"]]
    if early:
        lines.append(
            "- Stopped early (refuted at a look before the budget): "
            + ", ".join(f"`{r['pipeline']}` at {r['games']:,} of {r['budget']:,}" for r in early)
            + "."
        )
    lines += [f"- `{r['pipeline']}`: {r['status']}." for r in refused]
    lines += [f"- `{r['pipeline']}` refuted by {r['score']}." for r in audited if r["refuted"]]
    earlier = [r["pipeline"] for r in audited if "every released field" in r["score"]]
    if earlier:  # rows kept from a run before the learned default score (issue 36)
        lines.append(
            "- Kept from an earlier run with the every-field score (before the learned default "
            "score and the far outlier; not recomputed since): "
            + ", ".join(f"`{n}`" for n in earlier)
            + "."
        )
    total = sum(r["cpu_seconds"] for r in rows)
    lines.append(f"- CPU seconds, all pipelines (pilots and audits): {total:.0f}.")
    return lines


def plot(rows: list[dict], path: Path) -> Path:
    """Each pipeline's claim and eps_L, and its correct interval (off the scale above SCALE)."""
    fig, ax = new_figure((8, 0.45 * len(rows) + 1.2))
    ys = range(len(rows))[::-1]
    ends = [v for r in rows for v in (r["correct_lower"], r["correct_upper"]) if v is not None]
    top = max([r["claimed_epsilon"] for r in rows] + [r["eps"] for r in rows] + ends) * 1.15
    top = min(top, SCALE)
    for y, r in zip(ys, rows):
        colour = "tab:red" if r["refuted"] else ("tab:green" if r["bug"] is None else "tab:gray")
        ax.plot([0, r["eps"]], [y, y], color=colour, lw=6, solid_capstyle="butt")
        ax.plot(r["claimed_epsilon"], y, marker="|", ms=18, mew=2.5, color="black")
        lo, hi = r["correct_lower"], r["correct_upper"]
        if r["correct_eps"] == "inf" or (lo is not None and lo > top):
            ax.plot(top, y, marker=">", ms=8, color="tab:purple")
        elif lo is not None or hi is not None:
            a, b = (lo if lo is not None else hi), min(hi if hi is not None else top, top)
            ax.plot([a, b], [y + 0.2, y + 0.2], color="tab:purple", lw=2, marker="x")
    ax.set_yticks(list(ys), [r["pipeline"] for r in rows])
    ax.set_xlim(0, top * 1.03)
    ax.set_xlabel(f"epsilon at delta = {DELTA:g}")
    ax.set_title(
        "bar: valid 95% eps_L (red: claim refuted)   |: claimed\n"
        "x-x: correct eps for any score (>: off the scale)",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure(fig, path)
    return path


def render(rows: list[dict], seconds: float, out: Path) -> Path:
    """table.md (the table, the findings, the plot), table.csv and rows.json; the kept rows and
    checkpoints of the audits are removed once they are written."""
    plot(rows, out / "bugzoo.png")
    caps = sorted({r["budget_cap"] for r in rows})
    pilots = sorted({r["pilot_games"] for r in rows})
    lines = [
        f"delta = {DELTA:g}; the documented route, no canary or score chosen by hand: "
        f'`canary="both"` (an input and a gradient canary chosen by '
        f"`auditsel.pipelines.default_canaries`), the default score (learned from a pilot of its "
        f"own: `auditsel.pipelines.learned_scores`); a plan from a "
        f"{' or '.join(map(str, pilots))}-game pilot (`auditsel.plan_pipeline`), then an audit "
        f"that stops early (`auditsel.audit_until_refuted`: {LOOKS} looks, each at confidence "
        f"{LOOK_CONFIDENCE:g}, the verdict valid at {CONFIDENCE:.0%} over all looks) of the "
        f"planned games per canary, capped at a budget of "
        f"{' or '.join(f'{c:,}' for c in caps)} games per canary (the issue's route "
        f"caps at {BUDGET:,}; see `auditsel.reproductions.bugzoo`). correct eps: the tuning "
        "run's epsilon for any selection score (an interval, one end of it, inf where a value "
        "computed from the private rows without noise is released, - where no theorem covers "
        "it). plan: the games per canary it plans to refute (none: the pilot sees no leak "
        "above the claim), P(refuted) and E[eps_L] at the budget. CPU s: pilot and audit.",
        "",
        to_markdown(table_rows(rows), digits=3),
        "",
        *findings(rows),
        "",
        f"Computed by `auditsel reproduce bugzoo`: {seconds:.0f} s of wall time, summed over "
        "the rows.",
        "",
        "![claims and eps_L](bugzoo.png)",
    ]
    _write(out, REGISTRY["bugzoo"].title, lines, rows, rows)
    shutil.rmtree(out / "checkpoints", ignore_errors=True)  # kept only to resume a broken run
    shutil.rmtree(out / "rows", ignore_errors=True)
    return out
