"""The delta contract, for every public function that takes a delta and every registered bound,
in the manner of dp_accounting's shared accountant test suite (`privacy_accountant_test.py`:
one abstract test run over every accountant): a delta outside [0, 1) is a ConfigError naming
the argument; delta = 0 gives the pure-DP value or inf, never a finite wrong number.

`test_every_public_delta_function_is_in_the_contract` finds the functions by introspection (every
public name of a module, without a leading underscore, and the methods of public classes, with a parameter named
`delta`, `deltas` or `*_delta(s)`), so a new one fails until it is listed here.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dp_accounting as dpa
import numpy as np
import pytest

import auditsel
from auditsel.accounting.calibrate import CalibrationOptions
from auditsel.accounting.registry import BOUNDS
from auditsel.accounting.score_search import ScoreSearch
from auditsel.errors import ConfigError
from auditsel.events import LaplaceBase, as_pair
from auditsel.mechanisms import DpsgdBase, FiniteOutputBase, GaussianBase
from auditsel.reproductions.bugzoo import PIPELINES
from auditsel.rounds import Binomial, Point, Poisson, TruncatedNegativeBinomial

BAD = (-0.1, -1e-300, 1.0, 1.5, math.nan, math.inf, -math.inf)
RAISES = "ConfigError"  # the expected answer at delta = 0 of a function that must refuse it


@dataclass(frozen=True)
class Case:
    call: Callable[[Any], Any]  # delta -> result
    field: str = "delta"  # the argument the ConfigError must name
    at_zero: Any = math.inf  # the value at delta = 0 (RAISES: a ConfigError naming `field`)
    zero: bool = True  # whether delta = 0 is checked (False: the function is too slow there)


def _scores():
    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 4000)
    return rng.normal(member * 1.0, 1.0), member


class _Chunks:
    """Two in-memory chunks with the surface of `games.engine.ChunkSource`."""

    def __init__(self, scores, member):
        self.parts = [(scores[:2000], member[:2000]), (scores[2000:], member[2000:])]
        self.trials = len(scores)

    def __len__(self):
        return 2

    def load(self, index):
        return self.parts[index]


def _one_run_scores():
    rng = np.random.default_rng(1)
    members = rng.integers(0, 2, 400)
    return rng.normal(members * 2.0, 1.0), members


def _rr_tune(data, seed, canary):
    """Randomised response to the canary's presence (1-DP): a pipeline for the contract."""
    present = bool(np.asarray(data[0])[:, 0].sum() >= 1) if data is not None else False
    p = math.e / (1 + math.e)
    return float(np.random.default_rng(seed).random() < (p if present else 1 - p))


def _release_itself(release, canary):
    return float(release)


class _NoEngine:
    """Not an Opacus engine: from_opacus checks delta before it reads the engine."""


def _cases() -> dict[str, Case]:
    from auditsel.accounting import (
        attack,
        calibrate,
        exact,
        generic,
        improved,
        interval,
        panel,
        pld,
        profile,
        rdp,
        score_dual,
        two_sided,
    )
    from auditsel.auditing import (
        estimators,
        gdp_fitting,
        lower,
        one_run_analysis,
        planning,
        streamed_audit,
        threshold_search,
        validity,
    )
    from auditsel.auditing.sorted_scores import SortedScores
    from auditsel.dpsgd import trainer
    from auditsel.games.one_run_reduced import OneRunReducedGame, TuningFamily
    from auditsel.games.played_score import resolve_score
    from auditsel.games.worst_case import DpsgdWorstCase
    from auditsel.mechanisms import gaussian_epsilon, gaussian_mu
    from auditsel.pipelines.canaries import InputCanary
    from auditsel.pipelines.checks.release import released_runs_epsilon
    from auditsel.pipelines.checks.runner import RunObjects, check_pipeline
    from auditsel.pipelines.one_run_pipeline import audit_pipeline_one_run
    from auditsel.pipelines.opacus import from_opacus
    from auditsel.pipelines.own_protocol import audit_protocol
    from auditsel.pipelines.pipeline import Pipeline, audit_pipeline
    from auditsel.pipelines.pipeline_plan import plan_pipeline
    from auditsel.pipelines.sequential import audit_until_refuted
    from auditsel.reproductions import paper_bounds as repro
    from auditsel.reproductions import table3
    from auditsel.reproductions.bugzoo import author_claims as zoo
    from auditsel.results.fields import upper_panel
    from auditsel.selection import winner_law
    from auditsel.testing import assert_not_refuted, audit, worst_case_tuning

    g, fin, dp = GaussianBase(0.8), FiniteOutputBase.example1(), DpsgdBase(2.0, 20, 0.1)
    lap = LaplaceBase(1.0, steps=2)
    event = as_pair(dpa.ComposedDpEvent([dpa.LaplaceDpEvent(2.0), dpa.GaussianDpEvent(3.0)]))
    tnb = TruncatedNegativeBinomial(1.0, 0.1)
    # the game audited (a frozen dataclass), built once: its worst score is an attack's search
    reduced = functools.cache(lambda: worst_case_tuning(1.0, 1e-5, tnb))
    rdp_curve = rdp.ORDERS * 0.1
    scores, member = _scores()
    one_scores, one_members = _one_run_scores()
    curve = planning.PlanCurve(np.array([0.1, 0.3]), np.array([0.3, 0.1]), "exact")
    pure = fin.pure_epsilon
    release = lambda b, rng: rng.normal(b, 1.0)
    score = lambda y: y
    row = InputCanary(x=[1.0], y=1)
    empty = (np.zeros((0, 1)), np.zeros(0))
    pipe = Pipeline(_rr_tune, _release_itself, data=empty, canary=row)
    step = attack.dpsgd_step(2.0, 0.1, 1e-2)
    search = ScoreSearch(attack.gaussian_label_laws(1.0, 32), tnb)
    return {
        "auditsel.mechanisms.gaussian_epsilon": Case(lambda d: gaussian_epsilon(0.8, d)),
        "auditsel.mechanisms.gaussian_mu": Case(lambda d: gaussian_mu(1.0, d), at_zero=RAISES),
        "auditsel.mechanisms.GaussianBase.epsilon": Case(g.epsilon),
        "auditsel.mechanisms.GaussianBase.profile_epsilon": Case(g.profile_epsilon),
        "auditsel.mechanisms.GaussianBase.from_epsilon": Case(
            lambda d: GaussianBase.from_epsilon(1.0, d), at_zero=RAISES
        ),
        "auditsel.mechanisms.FiniteOutputBase.epsilon": Case(fin.epsilon, at_zero=pure),
        "auditsel.mechanisms.FiniteOutputBase.profile_epsilon": Case(
            fin.profile_epsilon, at_zero=pure
        ),
        "auditsel.mechanisms.DpsgdBase.epsilon": Case(dp.epsilon),
        "auditsel.mechanisms.DpsgdBase.profile_epsilon": Case(dp.profile_epsilon),
        "auditsel.mechanisms.DpsgdBase.profile_epsilon_fine": Case(dp.profile_epsilon_fine),
        "auditsel.events.LaplaceBase.epsilon": Case(lap.epsilon, at_zero=2.0),
        "auditsel.events.LaplaceBase.profile_epsilon": Case(lap.profile_epsilon, at_zero=2.0),
        "auditsel.events.EventBase.epsilon": Case(event.epsilon),
        "auditsel.events.EventBase.profile_epsilon": Case(event.profile_epsilon),
        "auditsel.mechanisms.DpsgdBase.profile_grid": Case(
            dp.profile_grid, field="delta_for_grid", at_zero=RAISES
        ),
        "auditsel.mechanisms.DpsgdBase.from_epsilon": Case(
            lambda d: DpsgdBase.from_epsilon(1.0, d, 20, 0.1), at_zero=RAISES
        ),
        "auditsel.accounting.rdp.rdp_to_epsilon": Case(
            lambda d: rdp.rdp_to_epsilon(rdp.ORDERS, rdp_curve, d)
        ),
        "auditsel.accounting.rdp.rdp_to_epsilon_continuous": Case(
            lambda d: rdp.rdp_to_epsilon_continuous(lambda a: 0.1 * a, d)
        ),
        "auditsel.accounting.rdp.check_deltas": Case(
            lambda d: float(rdp.check_deltas(d)[0]), at_zero=0.0
        ),
        "auditsel.numerics.check_deltas": Case(
            lambda d: float(rdp.check_deltas(d)[0]), at_zero=0.0
        ),
        "auditsel.accounting.generic.generic_epsilon": Case(
            lambda d: generic.generic_epsilon(rdp.ORDERS, rdp_curve, tnb, d)
        ),
        "auditsel.accounting.profile.profile_epsilon": Case(
            lambda d: profile.profile_epsilon(g, tnb, d)
        ),
        "auditsel.accounting.profile.rnm_epsilon": Case(
            lambda d: profile.rnm_epsilon(g.profile_epsilon, 10, d)
        ),
        "auditsel.accounting.score_dual.score_dual_epsilon": Case(
            lambda d: float(score_dual.score_dual_epsilon(fin, tnb, d)[0])
        ),
        "auditsel.accounting.two_sided.two_sided_epsilon": Case(
            lambda d: float(two_sided.two_sided_epsilon(fin, tnb, d)[0])
        ),
        "auditsel.accounting.profile.rnm_gaussian_closed_form": Case(
            lambda d: profile.rnm_gaussian_closed_form(2.0, 10, d)
        ),
        "auditsel.accounting.profile.rnm_gaussian_rdp": Case(
            lambda d: profile.rnm_gaussian_rdp(2.0, 10, d)
        ),
        "auditsel.accounting.improved.improved_epsilon": Case(
            lambda d: improved.improved_epsilon(0.8, tnb, d)
        ),
        "auditsel.accounting.improved.finite_improved_epsilon": Case(
            lambda d: improved.finite_improved_epsilon(fin, tnb, d)
        ),
        "auditsel.accounting.calibrate.calibrate": Case(
            lambda d: calibrate.calibrate(
                g, tnb, target_epsilon=3.0, delta=d, options=CalibrationOptions(baseline=False)
            ),
            at_zero=RAISES,  # no Gaussian noise is (3, 0)-DP: the target is out of reach
            field="delta",
        ),
        "auditsel.accounting.interval.tightest_bound": Case(
            lambda d: interval.tightest_bound(g, tnb, d).epsilon
        ),
        "auditsel.accounting.interval.rigorous_values": Case(
            lambda d: min(
                (v for v, _ in interval.rigorous_values(g, tnb, d).values()), default=math.inf
            )
        ),
        "auditsel.accounting.interval.tuning_epsilon": Case(
            lambda d: interval.tuning_epsilon(g, tnb, d).epsilon
        ),
        "auditsel.accounting.interval.tuning_epsilon[laplace]": Case(
            lambda d: interval.tuning_epsilon(lap, tnb, d).epsilon,
            at_zero=3 * 2.0,  # [PS22] Corollary 3: (2 + eta) eps, eta = 1, eps = 2
        ),
        "auditsel.accounting.interval.tuning_interval": Case(
            lambda d: interval.tuning_interval(g, tnb, d).upper
        ),
        "auditsel.accounting.interval.tuning_epsilon[monotone_score]": Case(
            lambda d: interval.tuning_epsilon(g, tnb, d, assume="monotone_score").epsilon
        ),
        "auditsel.reproductions.table3.table_bounds": Case(
            lambda d: table3.table_bounds(g, tnb, d)["exact_monotone_score"], at_zero=None
        ),
        "auditsel.accounting.interval.interval_attack": Case(
            lambda d: interval.interval_attack(g, tnb, d).epsilon, field="deltas"
        ),
        "auditsel.accounting.attack.attack": Case(
            lambda d: attack.attack(g, tnb, d).epsilon, field="deltas"
        ),
        "auditsel.accounting.attack.attack_epsilon": Case(
            lambda d: attack.attack_epsilon(g, tnb, d)
        ),
        "auditsel.accounting.attack.one_run_epsilons": Case(
            lambda d: attack.one_run_epsilons(tnb, d, exact=g)[0],
            field="deltas",
            at_zero=None,  # a lower bound: any value up to the truth (inf) is right
        ),
        "auditsel.accounting.profile.layered_epsilon": Case(
            lambda d: profile.layered_epsilon(g, tnb, d)[0]
        ),
        "auditsel.accounting.score_search.ScoreSearch.best": Case(
            lambda d: search.best(d)[0].epsilon,
            field="deltas",
            at_zero=None,  # a lower bound: any value up to the truth (inf) is right
        ),
        "auditsel.accounting.attack.labelled_attack": Case(
            lambda d: attack.labelled_attack(step, 5, tnb, d).epsilon,
            field="deltas",
            at_zero=None,  # a lower bound: any value up to the truth (inf) is right
        ),
        "auditsel.results.fields.upper_panel": Case(
            lambda d: upper_panel(g, tnb, d, with_curves=False)[0].monotone_score["exact"],
            at_zero=None,
        ),
        "auditsel.pipelines.opacus.from_opacus": Case(
            lambda d: from_opacus(_NoEngine(), optimizer=None, data_loader=None, delta=d),
            at_zero=RAISES,  # Opacus's accountants need delta > 0
        ),
        "auditsel.pipelines.checks.runner.RunObjects.__init__": Case(
            lambda d: check_pipeline(RunObjects(delta=d)),
            at_zero=RAISES,  # the claim's delta, in (0, 1)
        ),
        "auditsel.pipelines.checks.release.released_runs_epsilon": Case(
            lambda d: released_runs_epsilon(DpsgdBase(4.0, 4, 1.0), Poisson(3), d)
        ),
        "auditsel.pipelines.pipeline.audit_pipeline": Case(
            lambda d: (
                audit_pipeline(
                    Pipeline(_rr_tune, _release_itself, data=empty, canary=row), games=200, delta=d
                ).eps
            ),
            at_zero=None,
        ),
        "auditsel.pipelines.one_run_pipeline.audit_pipeline_one_run": Case(
            lambda d: (
                audit_pipeline_one_run(
                    _rr_tune, _release_itself, data=empty, canaries=[row, row], delta=d
                ).eps
            ),
            at_zero=None,
        ),
        "auditsel.pipelines.pipeline.Pipeline.audit": Case(
            lambda d: pipe.audit(games=200, delta=d).eps, at_zero=None
        ),
        "auditsel.pipelines.sequential.audit_until_refuted": Case(
            lambda d: audit_until_refuted(pipe, games=200, delta=d, claimed_epsilon=50.0).eps,
            at_zero=None,
        ),
        "auditsel.pipelines.pipeline_plan.plan_pipeline": Case(
            lambda d: (
                plan_pipeline(
                    Pipeline(_rr_tune, _release_itself, data=empty, canary=row),
                    delta=d,
                    pilot=40,
                    games=400,
                ).curve_eps
            ),
            at_zero=None,
        ),
        "auditsel.accounting.exact.exact_epsilon": Case(
            lambda d: exact.exact_epsilon(winner_law(g, tnb), d)
        ),
        "auditsel.accounting.pld.DiscretePld.epsilon": Case(
            lambda d: pld.pessimistic_pld(pld.gaussian_curve(0.8), 1e-2).epsilon(d)
        ),
        "auditsel.accounting.pld.dpsgd_epsilon_interval": Case(
            lambda d: max(pld.dpsgd_epsilon_interval(2.0, 5, 0.1, d, step=1e-2))
        ),
        "auditsel.accounting.panel.panel": Case(
            lambda d: panel.panel(g, tnb, d).monotone_score["exact"], at_zero=None
        ),
        "auditsel.accounting.panel.panel[curve_deltas]": Case(
            lambda d: panel.panel(g, tnb, 1e-5, curve_deltas=[d]).monotone_score_curves["exact"][0],
            field="curve_deltas",
            at_zero=None,  # None: the panel's "no finite value" (inf)
        ),
        "auditsel.accounting.panel.panel_curves": Case(
            lambda d: panel.panel_curves(g, tnb, [d])["exact"][0], field="deltas", at_zero=None
        ),
        "auditsel.accounting.panel.upper_bounds": Case(
            lambda d: panel.upper_bounds(g, tnb, d)["generic_rdp"], at_zero=None
        ),
        "auditsel.accounting.panel.base_info": Case(
            lambda d: panel.base_info(g, d)["epsilon"], at_zero=None
        ),
        "auditsel.auditing.threshold_search.epsilon_from_rates": Case(
            lambda d: float(threshold_search.epsilon_from_rates(0.1, 0.2, d)),
            at_zero=math.log(0.8 / 0.1),  # [XWW24] eq. 4: max(log(0.9/0.2), log(0.8/0.1))
        ),
        "auditsel.auditing.gdp_fitting.gdp_fit": Case(
            lambda d: gdp_fitting.gdp_fit(SortedScores(scores, member), 0.05, d), at_zero=None
        ),
        "auditsel.auditing.lower.apply_rule": Case(
            lambda d: lower.apply_rule(SortedScores(scores, member), "split", 0.05, d),
            at_zero=None,
        ),
        "auditsel.auditing.lower.audit_scores": Case(
            lambda d: lower.audit_scores(scores, member, d).eps, at_zero=None
        ),
        "auditsel.auditing.streamed_audit.audit_chunks": Case(
            lambda d: streamed_audit.audit_chunks(_Chunks(scores, member), d).eps,
            at_zero=None,
        ),
        "auditsel.auditing.estimators.estimator_panel": Case(
            lambda d: estimators.estimator_panel(scores, member, d), at_zero=None
        ),
        "auditsel.auditing.one_run_analysis.snj23_p_value": Case(
            lambda d: one_run_analysis.snj23_p_value(100, 20, 15, 1.0, d), at_zero=None
        ),
        "auditsel.auditing.one_run_analysis.snj23_epsilon": Case(
            lambda d: one_run_analysis.snj23_epsilon(100, 20, 15, 0.05, d), at_zero=None
        ),
        "auditsel.auditing.one_run_analysis.audit_one_run": Case(
            lambda d: one_run_analysis.audit_one_run(one_scores, one_members, d).eps_snj23,
            at_zero=None,
        ),
        "auditsel.auditing.one_run_analysis.GdpFamily.epsilon": Case(
            lambda d: one_run_analysis.GdpFamily().epsilon(1.0, d)
        ),
        "auditsel.auditing.one_run_analysis.PureDpFamily.epsilon": Case(
            lambda d: one_run_analysis.PureDpFamily().epsilon(1.0, d), at_zero=1.0
        ),
        "auditsel.auditing.planning.prob_at_least": Case(
            lambda d: planning.prob_at_least(0.5, 0.1, 0.2, 1000, 0.05, d), at_zero=None
        ),
        "auditsel.auditing.planning.expected_eps": Case(
            lambda d: planning.expected_eps(0.1, 0.2, 1000, 0.05, d), at_zero=None
        ),
        "auditsel.auditing.planning.eps_law": Case(
            lambda d: planning.eps_law(0.1, 0.2, 1000, 0.05, d), at_zero=None
        ),
        "auditsel.auditing.planning.law_for_games": Case(
            lambda d: planning.law_for_games(curve, 1000, "split", 0.95, d), at_zero=None
        ),
        "auditsel.auditing.planning.claim_pvalue": Case(
            lambda d: planning.claim_pvalue(0, 50, 0, 50, 2.0, d), at_zero=None
        ),
        "auditsel.auditing.planning.PilotTests.claim_pvalue": Case(
            lambda d: planning.pilot_tests(*_scores(), "pilot").claim_pvalue(2.0, d),
            at_zero=None,
        ),
        "auditsel.auditing.planning.curve_epsilon": Case(
            lambda d: planning.curve_epsilon(curve, d), at_zero=None
        ),
        "auditsel.games.played_score.resolve_score": Case(
            lambda d: resolve_score("worst", GaussianBase(1.0), Poisson(10.0), d), at_zero=None
        ),
        "auditsel.games.worst_case.DpsgdWorstCase.resolved": Case(
            lambda d: DpsgdWorstCase(1.0, 4, 0.2, Poisson(5.0), score="worst").resolved(d),
            at_zero=None,
        ),
        "auditsel.auditing.planning.games_needed": Case(
            lambda d: planning.games_needed(curve, 0.5, "split", 0.95, d), at_zero=None
        ),
        "auditsel.auditing.validity.overclaim_rates": Case(
            lambda d: validity.overclaim_rates(
                lambda b, rng: rng.normal(b), lambda y: y, 1.0, d, validity.Repetitions(1, 200)
            ),
            zero=False,
        ),
        "auditsel.dpsgd.trainer.dpsgd_epsilon": Case(
            lambda d: trainer.dpsgd_epsilon(2.0, 20, 0.1, d)
        ),
        "auditsel.dpsgd.trainer.calibrate_noise_multiplier": Case(
            lambda d: trainer.calibrate_noise_multiplier(1.0, d, 20, 0.1), at_zero=RAISES
        ),
        "auditsel.games.one_run_reduced.OneRunReducedGame.epsilon": Case(
            lambda d: OneRunReducedGame(0.8, tnb, 10).epsilon(d)
        ),
        "auditsel.games.one_run_reduced.TuningFamily.epsilon": Case(
            lambda d: TuningFamily(tnb, 10).epsilon(0.8, d)
        ),
        "auditsel.pipelines.own_protocol.audit_protocol": Case(
            lambda d: audit_protocol(release, score, delta=d, trials=400).eps, at_zero=None
        ),
        "auditsel.testing.audit": Case(
            lambda d: audit(reduced(), d, trials=2000).eps, at_zero=None
        ),
        "auditsel.testing.assert_not_refuted": Case(
            lambda d: assert_not_refuted(50.0, d, reduced(), trials=2000),
            at_zero=None,
        ),
        "auditsel.testing.worst_case_tuning": Case(
            lambda d: worst_case_tuning(1.0, d, tnb), at_zero=RAISES
        ),
        "auditsel.reproductions.bugzoo.author_claims.monotone_claim": Case(
            lambda d: zoo.monotone_claim(g, tnb, d)
        ),
        "auditsel.reproductions.bugzoo.author_claims.any_score_interval": Case(
            lambda d: zoo.any_score_interval(g, tnb, d), at_zero=None
        ),
        "auditsel.reproductions.bugzoo.author_claims.released_runs_epsilon": Case(
            lambda d: zoo.released_runs_epsilon(1.0, Poisson(3), d)
        ),
        "auditsel.reproductions.paper_bounds.table4_rows": Case(
            lambda d: repro.table4_rows(delta=d), zero=False
        ),
        "auditsel.reproductions.paper_bounds.figure6_rows": Case(
            lambda d: repro.figure6_rows(delta=d), zero=False
        ),
        "auditsel.reproductions.paper_bounds.koskela_gaussian_rows": Case(
            lambda d: repro.koskela_gaussian_rows(delta=d), zero=False
        ),
        "auditsel.reproductions.paper_bounds.dpsgd_factor_rows": Case(
            lambda d: repro.dpsgd_factor_rows(delta=d), zero=False
        ),
    }


#: functions with a delta-like parameter that are not eps/delta functions, and why
ZOO = (*PIPELINES, "hand_dpsgd")  # the pipelines and the loop two of them share
EXEMPT = {
    # steps of the audit behind audit_scores, audit_pipeline and the estimators (listed above),
    # which check delta once at their entry (auditing.lower.check_levels is that check)
    **{
        f"auditsel.auditing.{name}": "a step of the audits listed above, at their checked delta"
        for name in (
            "gdp_fitting.gdp_over_rows",
            "lower.check_levels",
            "lower.evaluate_at",
            "lower.lower_bound",
            "planning.expected_for_games",
            "planning.prob_for_games",
            "threshold_search.best_on_coins",
            "threshold_search.best_on_table",
            "threshold_search.best_threshold",
            "threshold_search.eq4_objective",
        )
    },
    "auditsel.pipelines.pipeline.learned": "audit_pipeline's step, at its checked delta",
    "auditsel.pipelines.pipeline.scoring": "audit_pipeline's step, at its checked delta",
    # the bug zoo's pipelines (internal modules: docs/findings/bugzoo.md) state their authors'
    # claims; the accountants they call are in the contract above
    **{f"auditsel.reproductions.bugzoo.{name}.*": "a zoo pipeline's claim" for name in ZOO},
    "auditsel.accounting.registry.*": "the registry: run over every bound and pair below",
    "auditsel.accounting.profile.BaseProfile.__init__": "`delta` is the profile function",
    "auditsel.accounting.generic.poisson_rdp": "`delta_hat` is a function (the base's profile)",
    "auditsel.roles.*": "typing protocols: the pairs implementing them are listed above",
    "auditsel.experiments.config.ExperimentSpec.__init__": "built by parse_config, which checks",
    "auditsel.auditing.one_run_analysis.OneRunBound.__init__": "a result record",
    "auditsel.accounting.calibrate.Calibration.__init__": "a result record",
    "auditsel.accounting.attack.AttackValue.__init__": "a result record",
    "auditsel.accounting.score_search.pieces_epsilons": "one score's pieces; its callers check",
    "auditsel.accounting.score_search.delta_tail": "a merge parameter from deltas its caller "
    "(attack) has checked; any value is valid",
    "auditsel.accounting.score_search.ScoreSearch._evaluate": "private: best's checked deltas",
    "auditsel.accounting.attack.split_epsilons": "runs ScoreSearch.best on its deltas, which "
    "checks them (listed above)",
    "auditsel.accounting.coin_search.CoinResult.__init__": "a result record",
    "auditsel.accounting.coin_search.coin_search": "run by attack (listed above) on the deltas it "
    "has checked, and checks them again (check_deltas)",
    "auditsel.accounting.coin_search.certify": "one coin score's pieces at coin_search's checked "
    "deltas",
    "auditsel.accounting.interval.TuningEpsilon.__init__": "a result record",
    "auditsel.accounting.panel.Panel.__init__": "a result record",
    "auditsel.pipelines.opacus.OpacusRun.__init__": "a result record",
    "auditsel.pipelines.learned_scores.learn_score": "the audit's delta, checked by "
    "audit_pipeline and plan_pipeline before they learn a score",
    "auditsel.pipelines.checks.finding.Context.__init__": "built by check_pipeline, which checks",
    "auditsel.pipelines.pipeline.PipelineAudit.__init__": "a result record",
    "auditsel.pipelines.one_run_pipeline.OneRunPipelineAudit.__init__": "a result record",
    "auditsel.experiments.config.parse_base": "the config's delta, checked where it is read "
    "(parse_config, the --delta option); it only calibrates base.epsilon",
    "auditsel.pipelines.pipeline_plan.PipelinePlan.__init__": "a result record",
    "auditsel.results.result.RunResult.__init__": "a result record",
    "auditsel.results.fields.upper_key": "a cache key of upper_panel's arguments, which it checks",
    "auditsel.results.fields.computed_upper": "upper_panel's computation, called by "
    "run_experiment with the spec's delta, checked by parse_config",
    "auditsel.reproductions.accountant_claims.Setting.__init__": "a paper's setting, as data",
    "auditsel.reproductions.table3.Table3Grid.__init__": "a paper's grid, as data",
    "auditsel.auditing.one_run_analysis.TradeoffFamily.epsilon": "a typing Protocol (no code): "
    "the families it describes are checked where they are defined",
}


def _delta_functions() -> set[str]:
    """module.name (or module.Class.method) of every public callable with a delta parameter."""
    found = set()
    for info in pkgutil.walk_packages(auditsel.__path__, "auditsel."):
        if info.name == "auditsel.__main__" or info.name.split(".")[:2] == ["auditsel", "cli"]:
            continue
        module = importlib.import_module(info.name)
        public = getattr(module, "__all__", None) or [n for n in vars(module) if n[0] != "_"]
        for name in public:
            obj = getattr(module, name, None)
            if inspect.isclass(obj):
                members = [(f"{name}.{k}", v) for k, v in vars(obj).items()]
            else:
                members = [(name, obj)]
            for qual, fn in members:
                fn = getattr(fn, "__func__", fn)
                if not callable(fn) or getattr(fn, "__module__", None) != info.name:
                    continue
                try:
                    params = inspect.signature(fn).parameters
                except (TypeError, ValueError):
                    continue
                if any(p == "deltas" or p == "delta" or p.endswith("_delta") for p in params):
                    found.add(f"{info.name}.{qual}")
                if any(p.endswith("_deltas") for p in params):
                    found.add(f"{info.name}.{qual}")
    return found


def test_every_public_delta_function_is_in_the_contract():
    listed = {name.split("[")[0] for name in _cases()}
    exempt_prefixes = tuple(k[:-1] for k in EXEMPT if k.endswith("*"))
    missing = sorted(
        name
        for name in _delta_functions()
        if name not in listed and name not in EXEMPT and not name.startswith(exempt_prefixes)
    )
    assert not missing, f"add these to the delta contract (or EXEMPT, with a reason): {missing}"


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_delta_is_a_config_error_naming_the_argument(name):
    case = CASES[name]
    for bad in BAD:
        with pytest.raises(ConfigError) as err:
            case.call(bad)
        assert err.value.field == case.field, (name, bad, str(err.value))
        assert "[0, 1)" in err.value.message or "(0, 1)" in err.value.message, str(err.value)


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.zero))
def test_delta_zero_gives_the_pure_value_or_inf(name):
    case = CASES[name]
    if case.at_zero == RAISES:
        with pytest.raises(ConfigError) as err:
            case.call(0.0)
        assert err.value.field == case.field
        return
    value = case.call(0.0)
    if case.at_zero is None:  # a value of its own kind: only never a finite wrong number
        return
    assert value == pytest.approx(case.at_zero, rel=1e-9), (name, value)


PAIRS = {
    "gaussian": GaussianBase(0.8),
    "finite": FiniteOutputBase.example1(),  # pure DP: eps = 1
    "dpsgd": DpsgdBase(2.0, 20, 0.1),
    "laplace": LaplaceBase(1.0, steps=2),  # pure DP: eps = 2
    "event": dpa.ComposedDpEvent([dpa.LaplaceDpEvent(2.0), dpa.GaussianDpEvent(3.0)]),
}
LAWS = {
    "tnb": TruncatedNegativeBinomial(1.0, 0.1),
    "tnb_nu_1": TruncatedNegativeBinomial(0.5, 1.0),
    "poisson_below_1": Poisson(0.4),
    "binomial": Binomial(5, 0.3),
    "point": Point(3),
}


@pytest.mark.parametrize("key", [b.key for b in BOUNDS])
@pytest.mark.parametrize("pair_name", sorted(PAIRS))
def test_every_registered_bound_keeps_the_contract(key, pair_name):
    """Bad deltas raise; at delta = 0 a bound is inf, its certified pure-DP value, or nan where
    it does not apply to the pair at all; never a finite value below the truth."""
    b = next(b for b in BOUNDS if b.key == key)
    pair = PAIRS[pair_name]
    for law_name, law in LAWS.items():
        for bad in BAD:
            with pytest.raises(ConfigError) as err:
                b.curve(pair, law, [1e-5, bad])
            assert err.value.field == "deltas"
            with pytest.raises(ConfigError) as err:
                b.epsilon(pair, law, bad)
            assert err.value.field == "delta"
        if not b.supports(pair, law):
            assert np.all(np.isnan(b.curve(pair, law, [0.0, 1e-5])))
            continue
        at_zero = b.epsilon(pair, law, 0.0)
        pure = as_pair(pair).pure_epsilon
        if math.isfinite(pure):  # pure DP: only a certified value, at least the pure eps of K=1
            assert at_zero == math.inf or at_zero >= pure - 1e-9, (law_name, at_zero)
            if key == "generic_rdp" and law_name == "tnb":
                assert at_zero == pytest.approx((2 + law.eta) * pure)  # [PS22] Cor 3
            if key == "generic_rdp" and law_name == "tnb_nu_1":
                assert at_zero == pytest.approx(pure)  # K = 1
        else:
            assert at_zero == math.inf, (law_name, at_zero)
