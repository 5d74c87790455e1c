"""The plan of bug-zoo pipelines on the documented route, without the audit.

    python benchmarks/plan_zoo_rows.py noise_for_mean batch_clipping correct_dpgd [--games 1000]

For each pipeline of `auditsel.reproductions.bugzoo`: `plan_pipeline` as the zoo's `audit` calls
it (pilot 200, `canary="both"`, the learned score, the zoo's look confidence, power 0.9, audit
seed 0), evaluated at `--games` games per canary; one line each: the claim, the games to refute,
P(refuted) and E[eps_L] there, the held-out half's p-value of the claim and the curve the plan
read (docs/howto/planning.md). About 10 to 20 CPU s per numpy pipeline, 45 per Opacus one.
"""

from __future__ import annotations

import argparse
import time

from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions
from auditsel.pipelines.pipeline import Pipeline
from auditsel.pipelines.pipeline_plan import PilotOptions, plan_pipeline
from auditsel.reproductions import bugzoo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pipelines", nargs="+", choices=bugzoo.PIPELINES)
    parser.add_argument("--games", type=int, default=1000)
    args = parser.parse_args()
    for name in args.pipelines:
        m = bugzoo.module(name)
        claimed = float(m.claim(bugzoo.DELTA))
        start = time.process_time()
        plan = plan_pipeline(
            Pipeline(m.tune, None, data=m.TRAIN, canary="both"),
            delta=bugzoo.DELTA,
            claimed_epsilon=claimed,
            pilot=PilotOptions(games=bugzoo.PILOT, power=bugzoo.POWER),
            games=args.games,
            statistics=AuditOptions(confidence=bugzoo.LOOK_CONFIDENCE, seed=bugzoo.AUDIT_SEED),
            execution=ExecutionOptions(jobs=1),
        )
        print(
            f"{name}: claim {claimed:.3f}, games to refute {plan.games_to_refute}, "
            f"P(refuted) at {args.games:,} {plan.prob_refute:.3f}, "
            f"E[eps_L] {plan.expected_eps:.3f}, held-out p {plan.pilot_pvalue:.3g}, "
            f"reading {plan.reading}, {time.process_time() - start:.0f} CPU s",
            flush=True,
        )


if __name__ == "__main__":
    main()
