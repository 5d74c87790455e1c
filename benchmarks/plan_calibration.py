"""The pipeline planner's calibration: predicted against certified eps_L over many audits.

    python benchmarks/plan_calibration.py [--games 1000] [--quick] [--no-torch] [--zoo A,B]
        [--no-tutorial] [--write] [--from-rows results/plan_calibration/rows.jsonl]

Each audit plans from a pilot (`auditsel.plan_pipeline`, pilot seed s) and then plays `--games`
games with `auditsel.audit_pipeline` (seed 1000 + s with a hand score; with a learned score the
audit the plan planned, seed s - 1, whose score is learned from the same pilot: issue 36 item
3; split rule, 95% Clopper-Pearson): the row holds the plan's E[eps_L] at that many games (on
the pilot's curve at its `pilot_confidence` limits, 80%, or its median reading where the held-out pilot rejects
the claim), the plan's range of the certified eps_L (the 5% and 95% quantiles of its law on
the same curve: a prediction, not a bound), the pilot's point estimate of E[eps_L] (the
planner before issue 27: optimistic), the certified eps_L, whether it is at least the range's
low end, the claim and both verdicts (planned refutation, refuted). Pipelines, in this order:

* four numpy pipelines with known epsilon, three pilots each (50, 100, 200) with a hand score:
  randomised response (eps = 1, delta = 0, claim exact), the Gaussian mechanism (mu = 1, claim
  exact), a planted bug (mu = 3 claimed as mu = 1) and a rare leak (the canary's bit released
  in 2% of games, the claim mu = 1: a leak a small pilot cannot see);
* the same four releasing their value as a field, {"value": v}, on the documented route (the
  score learned: `score=None`), pilots 100, 200 and 200 (seeds 4 to 6);
* seven pipelines of the bug zoo (`auditsel.reproductions.bugzoo`: correct DP-GD and six bugs;
  torch) on the documented route, `canary="both"` and the learned score, at pilot 200 (seed 2)
  and then 100 (seed 1);
* the pipeline tutorial's Opacus pipeline (docs/tutorials/audit-your-pipeline.md, read from the
  page; opacus; a hand score), pilot 100.

Each row is appended to results/plan_calibration/rows.jsonl as it is done, so a run cut short
keeps its rows (`--from-rows` makes the table of them, every row of today's code). `--write`
puts the table into docs/findings/plan-calibration.md (between its table markers) and the rows
into results/plan_calibration/rows.json. The summary line counts the audits whose certified
eps_L is below the range's low end (what the plan states it will not be, but in 5% of audits
of the planned law) and below the plan's E[eps_L] (single audits scatter around their mean).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import auditsel
from auditsel.mechanisms import GaussianBase
from auditsel.pipelines.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "findings" / "plan-calibration.md"
RESULTS = ROOT / "results" / "plan_calibration"  # --write: rows.json, the table's rows
TUTORIAL = ROOT / "docs" / "tutorials" / "audit-your-pipeline.md"
DELTA = 1e-5
EMPTY = (np.zeros((4, 1)), np.zeros(4))
CANARY = auditsel.InputCanary(x=[1.0], y=1)
P_RR = math.exp(1.0) / (1 + math.exp(1.0))
RARE = 0.02


def _present(data) -> bool:
    return bool(np.asarray(data[0])[:, 0].sum() >= 1)


def randomized_response(data, seed, canary):
    rng = np.random.default_rng(seed)
    return float(rng.random() < (P_RR if _present(data) else 1 - P_RR))


def gaussian(data, seed, canary, mu=1.0):
    return float(np.random.default_rng(seed).normal(mu * _present(data), 1.0))


def gaussian_too_little_noise(data, seed, canary):
    return gaussian(data, seed, canary, mu=3.0)


def rare_leak(data, seed, canary):
    rng = np.random.default_rng(seed)
    if rng.random() < RARE:  # the bug: a debugging branch releases the bit itself
        return 1e6 * _present(data)
    return float(rng.normal(_present(data), 1.0))


def itself(release, canary):
    return float(release)


GAUSS_CLAIM = GaussianBase(1.0).epsilon(DELTA)
NUMPY = {  # name: (tune, claim, delta, what)
    "randomized_response": (randomized_response, 1.0, 0.0, "correct, claim exact"),
    "gaussian": (gaussian, GAUSS_CLAIM, DELTA, "correct, claim exact"),
    "too_little_noise": (gaussian_too_little_noise, GAUSS_CLAIM, DELTA, "bug: mu 3 claimed as 1"),
    "rare_leak": (rare_leak, GAUSS_CLAIM, DELTA, f"bug in {RARE:.0%} of games"),
}
ZOO = (  # releases of fields: the score is learned (score=None), the canaries are "both"
    "correct_dpgd",
    "noise_for_mean",
    "fixed_grid",
    "batch_clipping",
    "train_selection",
    "noise_after_lr",
    "oversampled_class",
)


def tutorial_pipeline():
    """(tune, score, data, canary, claim) of the pipeline tutorial, its tuning.py read from the
    page."""
    blocks = re.findall(r"```python\n(.*?)```", TUTORIAL.read_text(), flags=re.S)
    source = "\n".join(b for b in blocks if "tuning.py" in b.split("\n")[1])
    folder = Path(tempfile.mkdtemp(prefix="auditsel-calibration-"))
    (folder / "tuning_tutorial.py").write_text(source)
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("tuning_tutorial", folder / "tuning_tutorial.py")
    m = importlib.util.module_from_spec(spec)
    sys.modules["tuning_tutorial"] = m
    spec.loader.exec_module(m)
    canary = auditsel.GradientCanary(coordinate=30)
    _, engine, optimizer, loader = m.train_one(m.train_data, 0.1, canary)
    claim = auditsel.from_opacus(engine, optimizer=optimizer, data_loader=loader, delta=DELTA)
    return m.tune, m.score, m.train_data, canary, claim.claimed_epsilon


def one_audit(name, tune, score, data, canary, claim, delta, pilot, seed, games) -> dict:
    start = time.process_time()
    common_on = dict(data=data, canary=canary)
    common = dict(delta=delta, claimed_epsilon=claim)
    # the pilot plays at `seed` (>= 1): plan_pipeline's pilot is its AuditOptions seed + 1
    planned = auditsel.AuditOptions(seed=seed - 1)
    plan = auditsel.plan_pipeline(
        Pipeline(tune, score, **common_on), pilot=pilot, statistics=planned, games=games, **common
    )
    # a learned score is the audit's own (learned at the audit's seed): the plan is of the audit
    # at its seed, seed - 1, so that audit is the one played; a hand score plans any seed's
    audit_seed = seed - 1 if score is None else 1000 + seed
    audit = auditsel.audit_pipeline(
        Pipeline(tune, score, **common_on),
        games=games,
        statistics=auditsel.AuditOptions(seed=audit_seed),
        report=auditsel.ReportOptions(panel=False),
        **common,
    )
    return {
        "pipeline": name,
        "score": "hand" if score is not None else "learned",
        "pilot": pilot,
        "seed": seed,
        "games": games,
        "claim": claim,
        "predicted": plan.expected_eps,
        # the plan's range of the certified eps_L (its law's 5% and 95% quantiles on the curve
        # it reads: a prediction from the pilot, not a bound)
        "low": plan.eps_low,
        "high": plan.eps_high,
        "point_predicted": plan.point_expected_eps,
        "certified": audit.eps,
        # planned at the games audited: P(refuted) >= 0.5 there (a refutation planned at more
        # games than the audit plays is not a prediction about it)
        "planned_refutation": plan.prob_refute is not None and plan.prob_refute >= 0.5,
        "refuted": bool(audit.refuted),
        "cpu_seconds": round(time.process_time() - start, 1),
    }


def as_fields(tune):
    """The pipeline releasing its value as a field, {"value": v}: the learned route
    (`score=None`) scores a release of fields."""

    def fielded(data, seed, canary):
        return {"value": tune(data, seed, canary)}

    return fielded


def rows(
    games: int,
    quick: bool,
    torch: bool,
    zoo: tuple[str, ...] = ZOO,
    tutorial: bool = True,
    record=None,
) -> list[dict]:
    """The table's rows, in order: numpy with a hand score, numpy with a learned one, the zoo
    at pilot 200, then 100, the tutorial; `record(row)` is called on each as it is done."""
    out = []

    def done(row: dict) -> None:
        out.append(row)
        print(_line(row), flush=True)
        if record is not None:
            record(row)

    pilots = (50, 100, 200)
    for name, (tune, claim, delta, _) in NUMPY.items():
        for s, pilot in enumerate(pilots[:1] if quick else pilots, start=1):
            done(one_audit(name, tune, itself, EMPTY, CANARY, claim, delta, pilot, s, games))
    # the same pipelines on the documented route: the score learned (seeds 4 to 6: pilots and
    # audits of their own); a pilot of LEARN_GAMES (200) plans the audit's own score
    for name, (tune, claim, delta, _) in NUMPY.items():
        for s, pilot in enumerate((200,) if quick else (100, 200, 200), start=4):
            done(
                one_audit(name, as_fields(tune), None, EMPTY, CANARY, claim, delta, pilot, s, games)
            )
    if not torch:
        return out
    from auditsel.reproductions import bugzoo

    for s, pilot in ((2, 200),) if quick else ((2, 200), (1, 100)):
        for name in zoo[:1] if quick else zoo:
            m = bugzoo.module(name)
            done(
                one_audit(
                    name, m.tune, None, m.TRAIN, "both", m.claim(DELTA), DELTA, pilot, s, games
                )
            )
    if tutorial and not quick and importlib.util.find_spec("opacus") is not None:
        tune, score, data, canary, claim = tutorial_pipeline()
        done(one_audit("tutorial (Opacus)", tune, score, data, canary, claim, DELTA, 100, 1, games))
    return out


def _line(r: dict) -> str:
    return (
        f"| {r['pipeline']} | {r['score']} | {r['pilot']} | {r['games']:,} | {r['claim']:.3f} | "
        f"{r['predicted']:.3f} | [{r['low']:.3f}, {r['high']:.3f}] | {r['point_predicted']:.3f} | "
        f"{r['certified']:.3f} | {'yes' if r['certified'] >= r['low'] else '**no**'} | "
        f"{'yes' if r['planned_refutation'] else 'no'} | {'yes' if r['refuted'] else 'no'} |"
    )


def table(out: list[dict]) -> str:
    head = (
        "| pipeline | score | pilot | games | claim | planned E[eps_L] | planned range (5%, 95%) "
        "| point estimate (old) | certified eps_L | certified >= range's low end | "
        "planned refutation | refuted |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|"
    )
    below = sum(r["certified"] < r["predicted"] for r in out)
    below_low = [r for r in out if r["certified"] < r["low"]]
    above_high = sum(r["certified"] > r["high"] for r in out)
    old_below = sum(r["certified"] < r["point_predicted"] for r in out)
    means = {}
    for r in out:
        means.setdefault(f"{r['pipeline']} ({r['score']})", []).append(r)
    short = [
        n
        for n, rs in means.items()
        if np.mean([r["certified"] for r in rs]) < np.mean([r["predicted"] for r in rs])
    ]
    false_plans = [r["pipeline"] for r in out if r["planned_refutation"] and not r["refuted"]]
    learned = [r for r in out if r["score"] == "learned"]
    learned_below = sum(r["certified"] < r["predicted"] for r in learned)
    learned_low = sum(r["certified"] < r["low"] for r in learned)
    summary = (
        f"\n\n{len(out)} audits ({len(learned)} with a learned score). Certified eps_L below "
        f"the planned range's low end (its 5% quantile): {len(below_low)} of {len(out)}"
        + (" (" + ", ".join(f"{r['pipeline']}, pilot {r['pilot']}" for r in below_low) + ")")
        * bool(below_low)
        + f", {learned_low} of the {len(learned)} learned; above its high end (95%): "
        f"{above_high} of {len(out)}. Below the plan's E[eps_L]: {below} of {len(out)}, "
        f"{learned_below} of the {len(learned)} learned (the point estimate, the planner "
        f"before: {old_below} of {len(out)}). Pipelines whose mean certified eps_L is below the "
        f"mean plan: {', '.join(short) or 'none'}. Planned refutations that the audit did not "
        f"make: {', '.join(false_plans) or 'none'}."
    )
    return head + "\n" + "\n".join(_line(r) for r in out) + summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="one pilot per pipeline, one zoo")
    parser.add_argument("--no-torch", action="store_true", help="the numpy pipelines only")
    parser.add_argument(
        "--zoo", default=",".join(ZOO), help="the bug-zoo pipelines to audit (comma-separated)"
    )
    parser.add_argument("--no-tutorial", action="store_true", help="leave out the Opacus row")
    parser.add_argument("--write", action="store_true", help=f"write the table into {PAGE}")
    parser.add_argument(
        "--from-rows",
        type=Path,
        help="no audits: the table of the rows a run recorded (its rows.jsonl, one JSON a line)",
    )
    args = parser.parse_args()
    if args.from_rows is not None:
        out = [json.loads(line) for line in args.from_rows.read_text().splitlines() if line]
        _write(out, args.write)
        return
    zoo = tuple(n for n in args.zoo.split(",") if n)
    for name in zoo:
        if name not in ZOO:
            parser.error(f"--zoo: {name!r} is not one of {', '.join(ZOO)}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    log = RESULTS / "rows.jsonl"  # each row as it is done (a run cut short keeps its rows)
    log.write_text("")

    def record(row: dict) -> None:
        with log.open("a") as f:
            f.write(json.dumps(row, allow_nan=False) + "\n")

    out = rows(args.games, args.quick, not args.no_torch, zoo, not args.no_tutorial, record)
    _write(out, args.write)


def _write(out: list[dict], write: bool) -> None:
    """Print the table of `out`; with `write`, put it into PAGE and its rows into rows.json."""
    text = table(out)
    print(text)
    if write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "rows.json").write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
        page = PAGE.read_text()
        begin, end = "<!-- table: benchmarks/plan_calibration.py -->", "<!-- end of table -->"
        head, rest = page.split(begin, 1)
        PAGE.write_text(head + begin + "\n" + text + "\n" + end + rest.split(end, 1)[1])


if __name__ == "__main__":
    main()
