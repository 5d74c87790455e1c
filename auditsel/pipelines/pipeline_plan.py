"""How many games an audit of your pipeline needs: `plan_pipeline`, sized from a pilot.

Contract. A pilot of `pilot` games (the audit's own game at the pilot's seed, the audit's + 1,
so that the audit's games stay fresh) gives the pipeline's trade-off curve. The plan is
computed on a pessimistic curve (`auditsel.auditing.planning.pessimistic_curve`): a few
threshold tests chosen on one half of the pilot, each at the Clopper-Pearson upper limits of
its FP and FN rates on the other half, simultaneous at `pilot_confidence`. With probability >=
pilot_confidence the pipeline's tests are at least as good as the planned ones, so the pilot's
sampling error and luckiest threshold never make the plan promise more than the pipeline gives.

A separating pilot (docs/howto/planning.md). Simultaneous limits cap what n games can vouch
for, so a claim (or a target) X is first tested on the held-out half: the test the first half
ranked best (`PilotTests.first`) gives the exact p-value of "the pipeline keeps (X, delta)"
(`auditsel.auditing.planning.claim_pvalue`). Where it is at most 1 - pilot_confidence (the
canary's and field's share), the pilot itself shows the leak, and the plan for X reads that
test at the medians of its rates (one-sided 50% Clopper-Pearson limits): a reading, not a
bound. A pipeline that keeps X gets a planned refutation with probability at most twice
1 - pilot_confidence (a union bound). `pilot_pvalue` and `reading` say which curve was read. A
learned score planned from a pilot of other than `LEARN_GAMES` games is not the audit's score,
and reads the limits. On the curve read, `auditsel.auditing.planning` gives

* `games_for_target`: the least number of games with P(eps_L >= target_eps) >= power;
* `games_to_refute`: the least number with P(eps_L > claimed_epsilon) >= power (None when the
  curve cannot reach the claim);
* at a given number of games: E[eps_L], the power of both events, and the range the certified
  eps_L is predicted in (`eps_low`, `eps_high`: the RANGE_LOW and RANGE_HIGH quantiles of its
  exact law over the binomial counts, widened to hold E[eps_L]; `eps_range` the law's
  probability of it). A prediction, not a bound: a split audit, which finds its threshold from
  the data, may certify less (docs/findings/plan-calibration.md);
* the CPU seconds per game of the pilot.

Several canaries (a tuple, or "both") are planned as `audit_pipeline` audits them: each plays
its own pilot and, in the audit, its own `games` games (every number of games is per canary),
certified at 1 - (1 - confidence) / m, on its pilot's curve at 1 - (1 - pilot_confidence) / m.
The audit refutes when any canary does: the games are the fewest over the canaries, and the
probabilities and E[eps_L] the largest (each a lower bound on the audit's); the range is that
of the largest eps_L (independent games: `EpsLaw.largest`). `PipelinePlan.canaries` holds each
canary's plan.

What a pilot cannot see: an event of rate r shows in n games with probability 1 - (1 - r)^n;
below `blind_rate` (about 3 / n) a leak is invisible, and "none" means "not seen in the pilot".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from auditsel.auditing.planning import (
    RANGE_HIGH,
    RANGE_LOW,
    EpsLaw,
    PilotTests,
    PlanCurve,
    blind_rate,
    empirical_curve,
    expected_for_games,
    games_needed,
    law_for_games,
    pilot_tests,
    planned_range,
    prob_for_games,
)
from auditsel.auditing.rules import THRESHOLD_RULES
from auditsel.auditing.threshold_search import epsilon_from_rates
from auditsel.errors import ConfigError, choice, integer, number, percent
from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions, given_options
from auditsel.pipelines.canaries import Canary
from auditsel.pipelines.default_canaries import resolve_canary
from auditsel.pipelines.game import PipelineGame, ScoreFn, TuneFn, field_columns
from auditsel.pipelines.learned_scores import LEARN_GAMES, held_out_tests
from auditsel.pipelines.pipeline import (
    Pipeline,
    _check_functions,
    _check_numbers,
    learned,
    pipeline_parts,
    play_games,
    scoring,
)

SHRINK = 0.5
FLAG_LEVEL = 0.05  # a field is flagged at this level, Bonferroni over the fields
PILOT_CONFIDENCE = 0.8  # measured: docs/findings/plan-calibration.md
MAX_PILOT = 10**7  # the CLI's --pilot range
MAX_PLANNED_GAMES = 10**12  # the CLI's plan --games range


@dataclass(frozen=True)
class PipelinePlan:
    """What `plan_pipeline` found (see the module docstring)."""

    pilot_games: int
    delta: float
    confidence: float
    rule: str
    power: float
    curve_eps: float  # the largest eq. 4 eps on the pessimistic curve
    cpu_seconds_per_game: float
    pilot_confidence: float = 0.8  # P(the pipeline's tests are at least the planned ones)
    point_eps: float = 0.0  # the pilot's point estimate (shrunk rates; optimistic, descriptive)
    blind_rate: float = 1.0  # leaks in a smaller fraction of games are invisible to the pilot
    target_eps: float | None = None
    games_for_target: int | None = None
    claimed_epsilon: float | None = None
    games_to_refute: int | None = None
    games: int | None = None
    expected_eps: float | None = None
    prob_target: float | None = None  # P(eps_L >= target_eps) with `games` games
    prob_refute: float | None = None  # P(eps_L > claimed_epsilon) with `games` games
    point_expected_eps: float | None = None  # E[eps_L] on the point estimate (optimistic)
    fields: Mapping[str, float] = field(default_factory=dict)  # each released field's eps
    flagged: tuple[str, ...] = ()  # fields whose values differ with and without the canary
    canaries: tuple[PipelinePlan, ...] = ()  # several canaries: each one's plan
    score: str = ""  # score=None: the learned score (what the audit will play), in words
    refutable_below: float | None = None  # claims above it: not refutable at `games` (heuristic)
    canary: str = ""  # the kind of the canary planned (input, gradient, ...)
    pilot_pvalue: float | None = None  # the held-out half's p-value of the claim (or target)
    reading: str = "limits"  # "median": the held-out half rejected it, read at the medians
    eps_low: float | None = None  # with `games`: the RANGE_LOW quantile of eps_L (predicted)
    eps_high: float | None = None  # its RANGE_HIGH quantile (several canaries: of their largest)
    eps_range: float = 0.0  # the planned law's probability of [eps_low, eps_high]
    law: EpsLaw | None = field(default=None, repr=False, compare=False)  # not in to_dict

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready values (non-finite numbers as None; each canary's plan)."""
        out = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in asdict(replace(self, law=None, canaries=())).items()
            if k != "law"
        }
        out["canaries"] = [plan.to_dict() for plan in self.canaries]
        return out

    def summary(self) -> str:
        if self.canaries:
            return self._combined_summary()
        lines = [
            f"plan from {self.pilot_games:,} pilot games: valid {self.rule} audit at "
            f"{percent(self.confidence)} confidence, delta = {self.delta:g}; planned on the pilot's "
            f"curve at its {percent(self.pilot_confidence)} limits, which reach eps "
            f"{self.curve_eps:.4f} (point estimate {self.point_eps:.4f}); "
            f"{self.cpu_seconds_per_game:.3g} CPU s per game"
        ]
        if self.score:
            lines.append(f"  score: {self.score}")
        lines += self._gate_lines()
        lines += self._games_lines(
            per="",
            relation="=",
            no_target="none (the pilot's curve does not reach it)",
            no_refute="none seen (no leak above the claim in the pilot)",
        )
        lines += self._blind_lines()
        if self.fields:
            lines.append(
                f"  {len(self.fields)} released fields scored, each at confidence "
                f"1 - {1 - self.confidence:g}/{len(self.fields)}; they differ with and without "
                f"the canary: {', '.join(self.flagged) or 'none seen'}"
            )
        lines += [
            f"  what the pilot cannot see: a leak that shows in fewer than {self.blind_rate:.2%} "
            f"of games (about 3 / {self.pilot_games:,}); a larger pilot sees rarer ones",
            f"  (with probability >= {percent(self.pilot_confidence)} over the pilot these are not "
            "over-stated for a threshold fixed at the plan's; a split audit certifies somewhat "
            "less)",
        ]
        return "\n".join(lines)

    def _gate_lines(self) -> list[str]:
        """What the held-out half says of the claim (or the target): the curve the plan read."""
        asked = self.claimed_epsilon if self.claimed_epsilon is not None else self.target_eps
        if asked is None or self.pilot_pvalue is None:
            return []
        what = "the claim" if self.claimed_epsilon is not None else "the target"
        if self.reading == "median":
            return [
                f"  the pilot's held-out games reject {what} {asked:g} (exact test, p = "
                f"{self.pilot_pvalue:.2g} <= {1 - self.pilot_confidence:.2g}): the plan for it "
                f"reads that test at its median rates (a reading of the pilot, not a bound)"
            ]
        if self.score and self.pilot_games != LEARN_GAMES:
            return [
                f"  the score was learned from {self.pilot_games:,} pilot games, the audit's "
                f"from {LEARN_GAMES}: not the audit's score, so the plan reads the pessimistic "
                f"curve (held-out p-value of {what} {asked:g}: {self.pilot_pvalue:.2g})"
            ]
        return [
            f"  the pilot's held-out games do not reject {what} {asked:g} (exact test, p = "
            f"{self.pilot_pvalue:.2g}): the plan reads the pessimistic curve"
        ]

    def _blind_lines(self) -> list[str]:
        """What an unrefuted claim would mean: nothing, above `refutable_below`."""
        if self.refutable_below is None or self.games_to_refute is not None:
            return []
        budget = f"{self.games:,} games" if self.games is not None else "any budget"
        return [
            f"  this audit, with these canaries, cannot refute claims above "
            f"{self.refutable_below:.4g} at {budget} (the pilot's point curve, optimistic, gives "
            f"P(eps_L >= {self.refutable_below:.4g}) < {1 - self.power:.2g}): 'not refuted' "
            f"there does not mean 'verified'"
        ]

    def _games_lines(self, *, per: str, relation: str, no_target: str, no_refute: str) -> list[str]:
        """The summary's lines on games (of one canary's plan, or of several's)."""
        lines = []
        if self.target_eps is not None:
            n = self.games_for_target
            lines.append(
                f"  games{per} for P(eps_L >= {self.target_eps:g}) >= {self.power:g}: "
                + (f"{n:,}" if n is not None else no_target)
            )
        if self.claimed_epsilon is not None:
            n = self.games_to_refute
            lines.append(
                f"  games{per} to refute the claim {self.claimed_epsilon:g} with probability "
                f">= {self.power:g}: " + (f"{n:,}" if n is not None else no_refute)
            )
        if self.games is not None:
            extra = ""
            if self.prob_target is not None:
                extra += f", P(eps_L >= {self.target_eps:g}) {relation} {self.prob_target:.3f}"
            if self.prob_refute is not None:
                extra += f", P(refuted) {relation} {self.prob_refute:.3f}"
            lines.append(
                f"  {self.games:,} games{per}: E[eps_L] {relation} {self.expected_eps:.4f}{extra}"
            )
            lines += self._range_lines()
        return lines

    def _range_lines(self) -> list[str]:
        """The planned range of the certified eps_L at `games` (a prediction, not a bound)."""
        if self.eps_low is None or self.eps_high is None:
            return []
        of = " (the largest of the canaries')" if self.canaries else ""
        return [
            f"    certified eps_L{of} predicted in [{self.eps_low:.4f}, {self.eps_high:.4f}] "
            f"({RANGE_LOW:.0%} and {RANGE_HIGH:.0%} quantiles of its law on the pilot's planned "
            f"curve at the plan's threshold: a prediction from the pilot, not a bound; a split "
            f"audit finds its threshold from the data and may certify less)"
        ]

    def _combined_summary(self) -> str:
        """The summary of a plan of several canaries: the audit's lines, then each canary's."""
        m = len(self.canaries)
        lines = [
            f"plan for {m} canaries (each plays its own {self.pilot_games:,} pilot games and the "
            f"audit's games: the audit plays {m} x the games below), each certified at "
            f"confidence 1 - {1 - self.confidence:g}/{m} = {self.canaries[0].confidence:.4g} "
            f"(Bonferroni: the audit's verdict holds at {percent(self.confidence)}); "
            f"{self.cpu_seconds_per_game:.3g} CPU s per game of all {m}"
        ]
        lines += self._games_lines(
            per=" per canary",
            relation=">=",
            no_target="none (no canary's curve reaches it)",
            no_refute="none seen (no canary's pilot sees a leak)",
        )
        if self.reading == "median":
            lines.append(
                f"  a canary's held-out pilot games reject the claim (exact test, p = "
                f"{self.pilot_pvalue:.2g} over the {m} canaries): its plan reads its median rates"
            )
        lines += self._blind_lines()
        for i, plan in enumerate(self.canaries):
            kind = f" ({plan.canary})" if plan.canary else ""
            lines.append(f"  canary {i}{kind}: " + plan.summary().replace("\n", "\n    "))
        return "\n".join(lines)


def _combined(
    plans: list[PipelinePlan], confidence: float, pilot_confidence: float
) -> PipelinePlan:
    """The plan of one audit of several canaries (module docstring)."""

    def fewest(key: str, pick: Callable[[list[Any]], Any] = min) -> Any:
        found = [getattr(p, key) for p in plans if getattr(p, key) is not None]
        return pick(found) if found else None

    def largest(key: str) -> Any:
        return fewest(key, max)

    first = plans[0]
    return replace(
        first,
        confidence=confidence,
        pilot_confidence=pilot_confidence,
        curve_eps=max(p.curve_eps for p in plans),
        point_eps=max(p.point_eps for p in plans),
        cpu_seconds_per_game=sum(p.cpu_seconds_per_game for p in plans),
        blind_rate=max(p.blind_rate for p in plans),
        games_for_target=fewest("games_for_target"),
        games_to_refute=fewest("games_to_refute"),
        expected_eps=largest("expected_eps"),
        **_largest_range(plans),
        prob_target=largest("prob_target"),
        prob_refute=largest("prob_refute"),
        point_expected_eps=largest("point_expected_eps"),
        refutable_below=largest("refutable_below"),
        pilot_pvalue=None
        if first.pilot_pvalue is None
        else min(1.0, len(plans) * min(p.pilot_pvalue or 1.0 for p in plans)),
        reading="median" if any(p.reading == "median" for p in plans) else "limits",
        score="",
        fields={f"{i}.{k}": v for i, p in enumerate(plans) for k, v in p.fields.items()},
        flagged=tuple(f"{i}.{k}" for i, p in enumerate(plans) for k in p.flagged),
        canaries=tuple(plans),
    )


def _range(law: EpsLaw, mean: float) -> dict[str, Any]:
    """The plan's fields of a law of eps_L (`planning.planned_range`)."""
    low, high, inside = planned_range(law, mean)
    return {"eps_low": low, "eps_high": high, "eps_range": inside, "law": law}


def _largest_range(plans: list[PipelinePlan]) -> dict[str, Any]:
    """The range of the largest eps_L of the canaries (independent games: `EpsLaw.largest`)."""
    laws = [p.law for p in plans]
    if any(law is None for law in laws):
        return {}
    mean = max(p.expected_eps for p in plans if p.expected_eps is not None)
    return _range(EpsLaw.largest([law for law in laws if law is not None]), mean)


def _differing(
    columns: NDArray[np.float64], member: NDArray[np.int8], fields: tuple[str, ...]
) -> tuple[str, ...]:
    """The fields whose pilot values differ with and without the canary: a two-sided
    Mann-Whitney test at FLAG_LEVEL / fields (Bonferroni), or values that never overlap."""
    from scipy.stats import mannwhitneyu  # deferred: scipy.stats, only when a pipeline is planned

    flagged = []
    for j, name in enumerate(fields):
        a, b = columns[member == 1, j], columns[member == 0, j]
        if np.ptp(columns[:, j]) == 0:
            continue  # the same value in every game: nothing to read
        apart = a.min() > b.max() or b.min() > a.max()
        p = mannwhitneyu(a, b, alternative="two-sided").pvalue
        if apart or p < FLAG_LEVEL / len(fields):
            flagged.append(name)
    return tuple(flagged)


def _curve_eps(curve: PlanCurve, delta: float) -> float:
    """The largest eq. 4 eps of the curve's tests (0 when none is informative)."""
    fps, fns = curve.candidates(10**6)
    return float(max(epsilon_from_rates(fps, fns, delta).max(), 0.0)) if len(fps) else 0.0


@dataclass(frozen=True, kw_only=True)
class PilotOptions:
    """How `plan_pipeline` plans: `games` pilot games, its curve's `confidence` limits, the
    `power` the plan aims for (in [0.5, 1))."""

    games: int = 200
    confidence: float = PILOT_CONFIDENCE
    power: float = 0.9


def plan_pipeline(
    pipeline: Pipeline,
    *,
    delta: float,
    pilot: int | PilotOptions = 200,
    target_eps: float | None = None,
    claimed_epsilon: float | None = None,
    games: int | None = None,
    statistics: AuditOptions | None = None,
    execution: ExecutionOptions | None = None,
) -> PipelinePlan:
    """Size an audit of your pipeline from `pilot` games (an int or a `PilotOptions`).

    Args:
        pipeline: `Pipeline(tune, score, data=..., canary=...)`, as `audit_pipeline` takes it
            (several canaries: module docstring; the games planned are per canary).
        delta: in [0, 1).
        pilot: the pilot's games (an int), or a `PilotOptions` (games, confidence, power:
            the probability the plan aims for, default 0.9).
        target_eps: plan the games with P(eps_L >= target_eps) >= power.
        claimed_epsilon: plan the games with P(eps_L > claimed_epsilon) >= power.
        games: a number of games to evaluate: the plan gives E[eps_L] and the power there.
        statistics: the `AuditOptions` of the audit to plan (the pilot plays at seed + 1).
        execution: an `ExecutionOptions` (jobs, backend, progress); never changes the numbers.

    Returns:
        A `PipelinePlan` (the module docstring says what each field holds).
    """
    st = given_options(AuditOptions, statistics, "statistics")
    ex = given_options(ExecutionOptions, execution, "execution")
    options = pilot if isinstance(pilot, PilotOptions) else PilotOptions(games=pilot)
    parts = pipeline_parts(pipeline)
    for unused in ("scheduler", "checkpoint_dir", "chunk_size"):
        if getattr(ex, unused) is not None:
            raise ConfigError(f"execution.{unused}", "not used by plan_pipeline's pilot")
    audit_seed = integer(st.seed, "seed", 0)
    canary = resolve_canary(parts["canary"], parts["tune"], parts["data"])  # "both": a pair
    canaries = canary if isinstance(canary, tuple) else (canary,)
    if not canaries:
        raise ConfigError("canary", "give a canary, or a tuple of canaries to plan each")
    confidence = number(st.confidence, "confidence", 0.5, 1, hi_open=True)
    pilot_confidence = number(options.confidence, "pilot_confidence", 0.5, 1, hi_open=True)
    m = len(canaries)  # the audit's Bonferroni split over its canaries (module docstring)
    request = _PlanRequest(
        **{**parts, "canary": canaries[0]},
        delta=delta,
        pilot=options.games,
        targets=(target_eps, claimed_epsilon, games),
        power=options.power,
        statistics=replace(st, confidence=1 - (1 - confidence) / m),
        seed=audit_seed + 1,
        audit_seed=audit_seed,
        execution=ex,
        pilot_confidence=1 - (1 - pilot_confidence) / m,
    )
    plans = [_plan_pipeline(replace(request, canary=one)) for one in canaries]
    if not isinstance(canary, tuple):
        return plans[0]
    return _combined(plans, confidence, pilot_confidence)


@dataclass(frozen=True, kw_only=True)
class _PlanRequest:
    """One canary's plan as asked (`targets`: target_eps, claimed_epsilon, games;
    `statistics` at the canary's share; `seed`: the pilot's, `audit_seed` + 1)."""

    tune: TuneFn
    score: ScoreFn | None
    data: Any
    canary: Canary
    delta: float
    pilot: int = 200
    targets: tuple[float | None, float | None, int | None] = (None, None, None)
    power: float = 0.9
    statistics: AuditOptions = field(default_factory=AuditOptions)
    seed: int = 1
    audit_seed: int = 0
    execution: ExecutionOptions = field(default_factory=ExecutionOptions)
    pilot_confidence: float = PILOT_CONFIDENCE


def _plan_pipeline(request: _PlanRequest) -> PipelinePlan:
    """One canary's plan (module docstring)."""
    r = _checked_plan(request)
    run = _pilot(r)
    tests, curves, field_eps = _field_curves(run, r.seed, r.pilot_confidence, r.delta)
    best = int(np.argmax(field_eps))
    curve, scores = curves[best], run.columns[:, best]
    # the field's share of the pilot's level: the level of its held-out test of a claim
    level = (1 - r.pilot_confidence) / len(curves)
    point_curve = empirical_curve(scores, run.member, run.source, shrink=SHRINK)
    rule = r.statistics.rule
    # the audit tests each field at a 1/k share (pipeline docstring)
    confidence_each = 1 - (1 - r.statistics.confidence) / len(curves)
    plan: dict[str, Any] = dict(
        rule=rule, confidence=confidence_each, delta=r.delta, spec_grid=False
    )
    if run.grid and rule == "split":  # a fixed grid of the pilot's thresholds, every game
        plan.update(rule="bonferroni", thresholds=len(run.grid), spec_grid=True)
    read = _Reading(tests[best], curve, level if run.audits_score else 0.0, r.delta)
    out = _plan_of(r, run, field_eps, best, read, point_curve, plan)
    return _at_games(out, r, read, point_curve, plan)


@dataclass(frozen=True)
class _Reading:
    """Which curve a plan reads for an eps X (module docstring): the medians where the
    held-out tests reject X at `level`, else the `limits`."""

    tests: PilotTests
    limits: PlanCurve
    level: float
    delta: float

    def pvalue(self, eps: float) -> float:
        """The held-out half's p-value of "every test keeps (eps, delta)"."""
        return self.tests.claim_pvalue(eps, self.delta)

    def curve(self, eps: float | None) -> PlanCurve:
        """The curve to plan X = eps on (the limits when eps is None)."""
        if eps is not None and self.level > 0 and self.pvalue(eps) <= self.level:
            return self.tests.reading()
        return self.limits


def _checked_plan(request: _PlanRequest) -> _PlanRequest:
    """The request with its numbers checked (a ConfigError naming the first out of range)."""
    r, st = request, request.statistics
    pilot = integer(r.pilot, "pilot", 20, MAX_PILOT)
    target_eps, claimed_epsilon, games = r.targets
    _check_functions(r.tune, r.score, r.canary)
    _check_numbers(
        pilot, r.delta, claimed_epsilon, st.confidence, r.seed, st.rule, r.execution.jobs
    )
    choice(st.rule, "rule", THRESHOLD_RULES)
    power = number(r.power, "power", 0.5, 1, hi_open=True)
    target_eps, games = _targets(target_eps, claimed_epsilon, games)
    targets = (target_eps, claimed_epsilon, games)
    return replace(r, pilot=pilot, power=power, targets=targets)


def _field_curves(
    run: _PilotRun, seed: int, pilot_confidence: float, delta: float
) -> tuple[list[PilotTests], list[PlanCurve], list[float]]:
    """Each field's held-out tests, their pessimistic curve at the field's share of the
    pilot's confidence, and its largest eq. 4 eps."""
    columns, member, source = run.columns, run.member, run.source
    k = columns.shape[1]
    share = 1 - (1 - pilot_confidence) / k
    tests = [
        pilot_tests(columns[:, j], member, source, seed=seed, confidence=share)
        if not run.grid
        else held_out_tests(run.grid, columns[:, j], member, source, run.threshold)
        for j in range(k)
    ]
    curves = [one.pessimistic(share) for one in tests]
    return tests, curves, [_curve_eps(c, delta) for c in curves]


def _refute_at(claimed_epsilon: float | None) -> float | None:
    """The eps_L that refutes the claim: the next float above it (None without a claim)."""
    return None if claimed_epsilon is None else math.nextafter(claimed_epsilon, math.inf)


def _plan_of(
    r: _PlanRequest,
    run: _PilotRun,
    field_eps: list[float],
    best: int,
    read: _Reading,
    point_curve: PlanCurve,
    plan: dict[str, Any],
) -> PipelinePlan:
    """The plan of the best field's curve (games None where the curve read cannot reach)."""
    target_eps, claimed_epsilon, games = r.targets
    curve_eps = field_eps[best]

    def needed(target: float) -> int | None:
        curve = read.curve(target)
        if target >= _curve_eps(curve, r.delta):
            return None
        return games_needed(curve, target, power=r.power, **plan)

    refute_at = _refute_at(claimed_epsilon)
    asked = claimed_epsilon if claimed_epsilon is not None else target_eps
    return PipelinePlan(
        pilot_games=r.pilot,
        delta=r.delta,
        confidence=r.statistics.confidence,
        rule=plan["rule"],
        power=r.power,
        curve_eps=curve_eps,
        cpu_seconds_per_game=run.cpu,
        pilot_confidence=r.pilot_confidence,
        point_eps=_curve_eps(point_curve, r.delta),
        blind_rate=blind_rate(r.pilot),
        target_eps=target_eps,
        games_for_target=None if target_eps is None else needed(target_eps),
        claimed_epsilon=claimed_epsilon,
        games_to_refute=None if refute_at is None else needed(refute_at),
        games=games,
        fields=dict(zip(run.fields, field_eps)),
        flagged=_differing(run.columns, run.member, run.fields),
        score=run.words,
        canary=str(r.canary.describe().get("kind", "")),
        pilot_pvalue=None if asked is None else read.pvalue(asked),
        reading="median"
        if asked is not None and read.curve(asked) is not read.limits
        else "limits",
    )


def _at_games(
    out: PipelinePlan, r: _PlanRequest, read: _Reading, point_curve: PlanCurve, plan: dict[str, Any]
) -> PipelinePlan:
    """The plan's numbers at `games` (E[eps_L], power, range, refutable eps); without games,
    the refutable eps where the claim cannot be refuted at all."""
    target_eps, claimed_epsilon, games = r.targets
    refute_at = _refute_at(claimed_epsilon)
    if games is not None:

        def at(target: float) -> float:
            return prob_for_games(read.curve(target), target, games, **plan)

        asked = claimed_epsilon if claimed_epsilon is not None else target_eps
        expected, law = law_for_games(read.curve(asked), games, **plan)
        return replace(
            out,
            expected_eps=expected,
            **_range(law, expected),
            point_expected_eps=expected_for_games(point_curve, games, **plan),
            prob_target=None if target_eps is None else at(target_eps),
            prob_refute=None if refute_at is None else at(refute_at),
            refutable_below=_refutable_below(point_curve, games, 1 - r.power, plan),
        )
    if out.games_to_refute is None:
        return replace(out, refutable_below=out.point_eps)
    return out


def _targets(
    target_eps: float | None, claimed_epsilon: float | None, games: int | None
) -> tuple[float | None, int | None]:
    """What to plan for, checked: a target eps, a claim to refute and/or a number of games."""
    if target_eps is not None:
        target_eps = number(target_eps, "target_eps", 0, math.inf, lo_open=True)
    if games is not None:
        games = integer(games, "games", 4, MAX_PLANNED_GAMES)
    if target_eps is None and claimed_epsilon is None and games is None:
        raise ConfigError(
            "target_eps", "give target_eps, claimed_epsilon or games: what to plan for"
        )
    return target_eps, games


def _refutable_below(
    point_curve: PlanCurve, games: int, chance: float, plan: dict[str, Any]
) -> float:
    """The eps above which the pilot's point curve (optimistic) gives an audit of `games`
    games a chance below `chance` of certifying: claims above it are not refutable there."""
    lo, hi = 0.0, _curve_eps(point_curve, plan["delta"])
    if hi == 0.0 or prob_for_games(point_curve, hi, games, **plan) >= chance:
        return hi
    for _ in range(30):
        mid = (lo + hi) / 2
        if prob_for_games(point_curve, mid, games, **plan) >= chance:
            lo = mid
        else:
            hi = mid
    return hi


def _pilot(r: _PlanRequest) -> _PilotRun:
    """The plan's pilot: the audit's own learning pilot for a learned score (the plan made on
    its held-out half), else `pilot` games at `seed` scored by the audit's score."""
    tune, data, canary, pilot, jobs = r.tune, r.data, r.canary, r.pilot, r.execution.jobs
    found = None
    if r.score is None:
        backend = r.execution.backend
        found = learned(tune, data, canary, r.audit_seed, r.delta, jobs, backend, pilot)
    if found is not None:
        member, s = found.held_member, found.score
        source = f"pilot ({len(member):,} held-out games of {pilot:,})"
        # the audit learns from LEARN_GAMES: another pilot size learns another score
        cpu = found.cpu_seconds / pilot
        columns, same = found.held_scores[:, None], pilot == LEARN_GAMES
        run = _PilotRun(columns, member, (), cpu, source, s.words, s.grid, s.threshold, same)
    else:
        fields, score_fn = scoring(tune, r.score, data, canary)
        game = PipelineGame(tune, score_fn, data, canary, fields=fields)
        start = time.process_time()
        ex = r.execution
        options = ExecutionOptions(jobs=jobs, backend=ex.backend, progress=ex.progress)
        record, inline = play_games(game, pilot, r.seed, options)
        assert record.scores is not None and record.member is not None  # played in memory
        cpu = ((time.process_time() - start) - inline + float(record.scores[:, 1].sum())) / pilot
        member = record.member
        columns = field_columns(record.scores) if fields else record.scores[:, :1]
        run = _PilotRun(columns, member, fields, cpu, f"pilot ({pilot:,} games)")
    if member.min() == member.max():
        raise ConfigError("pilot", f"{pilot} games drew one coin only; use a larger pilot")
    return run


@dataclass(frozen=True)
class _PilotRun:
    """What a plan's pilot gave (a learned score: its words and grid)."""

    columns: NDArray[np.float64]
    member: NDArray[np.int8]
    fields: tuple[str, ...]
    cpu: float
    source: str
    words: str = ""
    grid: tuple[float, ...] = ()
    threshold: float | None = None  # the grid's threshold its choosing half ranked best
    audits_score: bool = True  # the score planned is the one the audit will play
