"""auditsel: audit the privacy of differentially private hyperparameter tuning.

Upper bounds (exact curve of the released winner, and the papers' bounds), the distinguishing
game, and epsilon lower bounds from it. See docs/howto/python-api.md and docs/explanation/architecture.md.

The public names, in the manner of dp_accounting (pairs and laws are data, bounds are
algorithms). Every name is imported on first use (`import auditsel` stays fast):

    mechanism pairs    GaussianBase, FiniteOutputBase, DpsgdBase, Neighbouring,
                       gaussian_delta(mu, eps), gaussian_epsilon(mu, delta), gaussian_mu(eps, delta);
                       any dp_accounting DpEvent as a base: LaplaceBase, EventBase, as_pair(base)
    laws of K          TruncatedNegativeBinomial, Poisson, Binomial, TwoPoint, Point, FinitePmf,
                       RoundsLaw, law_from_dict
    exact curve        winner_law(pair, law), privacy_curve(winner, eps), exact_epsilon(winner, delta)
    upper bounds       BOUNDS (the registry), bound(key), panel(pair, law, delta, *, curve_deltas)
                       -> Panel, panel_curves(pair, law, deltas), upper_bounds(pair, law, delta)
    the interval       attack_epsilon(pair, law, delta) (a lower bound with no sampling error),
                       attack(pair, law, deltas) -> AttackValue, tuning_interval(pair, law,
                       delta) -> Interval [lower, upper] holding the tuning run's epsilon,
                       tuning_epsilon(pair, law, delta) -> TuningEpsilon (what to report: the
                       tightest rigorous bound, its source and the interval)
    calibration        calibrate(base, law, target_epsilon=, delta=, solve_for=) -> Calibration
    lower bounds       audit_scores(scores, member, delta, ...), audit_protocol(release, score, ...),
                       LowerBound; threshold rules Split, BonferroniGrid, BonferroniAll,
                       MultiSplit; estimator_panel(scores, member, delta, ...)
    your pipeline      audit_pipeline(tune, score, *, data, canary, games, delta, ...),
                       PipelineAudit, Pipeline, InputCanary, GradientCanary,
                       from_opacus(privacy_engine, *, optimizer, data_loader, delta), OpacusRun,
                       plan_pipeline(tune, score, *, data, canary, delta, ...), PipelinePlan,
                       audit_until_refuted(...) (early stop), audit_pipeline_one_run(tune,
                       score, *, data, canaries, delta, ...), CanarySet; their options
                       AuditOptions, ExecutionOptions, ReportOptions
    experiments        run_config(config, out_dir=None, ...) -> RunResult, load_config, parse_config
    regression tests   assert_not_refuted(claimed_eps, delta, protocol, ...), worst_case_tuning,
                       RefutedClaim
    bad input          ConfigError (the one exception a user can fix; the CLI exits 2 on it)

Argument order: the pair (or its parameters) first, then eps before delta.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING

from auditsel.version import __version__

_PUBLIC = {
    "auditsel.errors": ("ConfigError",),
    "auditsel.mechanisms": (
        "GaussianBase",
        "FiniteOutputBase",
        "DpsgdBase",
        "Neighbouring",
        "gaussian_delta",
        "gaussian_epsilon",
        "gaussian_mu",
    ),
    "auditsel.rounds": (
        "TruncatedNegativeBinomial",
        "Poisson",
        "Binomial",
        "TwoPoint",
        "Point",
        "FinitePmf",
        "RoundsLaw",
        "law_from_dict",
    ),
    "auditsel.events": ("LaplaceBase", "EventBase", "as_pair"),
    "auditsel.selection": ("winner_law",),
    "auditsel.accounting.exact": ("privacy_curve", "exact_epsilon"),
    "auditsel.accounting.registry": ("BOUNDS", "bound"),
    "auditsel.accounting.panel": ("panel", "panel_curves", "upper_bounds", "Panel"),
    "auditsel.accounting.attack": ("attack", "attack_epsilon", "AttackValue"),
    "auditsel.accounting.interval": (
        "tuning_interval",
        "Interval",
        "tuning_epsilon",
        "TuningEpsilon",
    ),
    "auditsel.accounting.calibrate": ("calibrate", "Calibration"),
    "auditsel.auditing.lower": ("audit_scores", "LowerBound"),
    "auditsel.auditing.rules": ("Split", "BonferroniGrid", "BonferroniAll", "MultiSplit"),
    "auditsel.auditing.estimators": ("estimator_panel",),
    "auditsel.pipelines.own_protocol": ("audit_protocol",),
    "auditsel.pipelines.audit_options": ("AuditOptions", "ExecutionOptions", "ReportOptions"),
    "auditsel.pipelines.pipeline": ("audit_pipeline", "Pipeline", "PipelineAudit"),
    "auditsel.pipelines.canaries": ("InputCanary", "GradientCanary"),
    "auditsel.pipelines.opacus": ("from_opacus", "OpacusRun"),
    "auditsel.pipelines.pipeline_plan": ("plan_pipeline", "PipelinePlan"),
    "auditsel.pipelines.sequential": ("audit_until_refuted",),
    "auditsel.pipelines.one_run_pipeline": ("audit_pipeline_one_run", "CanarySet"),
    "auditsel.experiments.experiment": ("run_config",),
    "auditsel.experiments.result": ("RunResult",),
    "auditsel.experiments.config": ("load_config", "parse_config"),
    "auditsel.testing": ("assert_not_refuted", "worst_case_tuning", "RefutedClaim"),
}
_WHERE = {name: module for module, names in _PUBLIC.items() for name in names}

__all__ = [
    "__version__",
    "AttackValue",
    "AuditOptions",
    "BOUNDS",
    "Binomial",
    "Calibration",
    "BonferroniAll",
    "BonferroniGrid",
    "CanarySet",
    "ConfigError",
    "DpsgdBase",
    "EventBase",
    "ExecutionOptions",
    "FiniteOutputBase",
    "FinitePmf",
    "GaussianBase",
    "GradientCanary",
    "InputCanary",
    "Interval",
    "LaplaceBase",
    "LowerBound",
    "MultiSplit",
    "Neighbouring",
    "OpacusRun",
    "Panel",
    "Pipeline",
    "PipelineAudit",
    "PipelinePlan",
    "ReportOptions",
    "Point",
    "Poisson",
    "RefutedClaim",
    "RoundsLaw",
    "RunResult",
    "Split",
    "TruncatedNegativeBinomial",
    "TuningEpsilon",
    "TwoPoint",
    "assert_not_refuted",
    "attack",
    "attack_epsilon",
    "audit_pipeline",
    "audit_pipeline_one_run",
    "audit_protocol",
    "audit_scores",
    "audit_until_refuted",
    "as_pair",
    "bound",
    "calibrate",
    "estimator_panel",
    "exact_epsilon",
    "from_opacus",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_mu",
    "law_from_dict",
    "load_config",
    "panel",
    "panel_curves",
    "parse_config",
    "plan_pipeline",
    "privacy_curve",
    "run_config",
    "tuning_epsilon",
    "tuning_interval",
    "upper_bounds",
    "winner_law",
    "worst_case_tuning",
]

if (
    TYPE_CHECKING
):  # the same names, eagerly, for type checkers (tests/test_api.py checks they agree)
    from auditsel.accounting.attack import AttackValue, attack, attack_epsilon
    from auditsel.accounting.calibrate import Calibration, calibrate
    from auditsel.accounting.exact import exact_epsilon, privacy_curve
    from auditsel.accounting.interval import (
        Interval,
        TuningEpsilon,
        tuning_epsilon,
        tuning_interval,
    )
    from auditsel.accounting.panel import Panel, panel, panel_curves, upper_bounds
    from auditsel.accounting.registry import BOUNDS, bound
    from auditsel.auditing.estimators import estimator_panel
    from auditsel.auditing.lower import LowerBound, audit_scores
    from auditsel.auditing.rules import BonferroniAll, BonferroniGrid, MultiSplit, Split
    from auditsel.errors import ConfigError
    from auditsel.events import EventBase, LaplaceBase, as_pair
    from auditsel.experiments.config import load_config, parse_config
    from auditsel.experiments.experiment import run_config
    from auditsel.experiments.result import RunResult
    from auditsel.mechanisms import (
        DpsgdBase,
        FiniteOutputBase,
        GaussianBase,
        Neighbouring,
        gaussian_delta,
        gaussian_epsilon,
        gaussian_mu,
    )
    from auditsel.pipelines.audit_options import AuditOptions, ExecutionOptions, ReportOptions
    from auditsel.pipelines.canaries import GradientCanary, InputCanary
    from auditsel.pipelines.one_run_pipeline import CanarySet, audit_pipeline_one_run
    from auditsel.pipelines.opacus import OpacusRun, from_opacus
    from auditsel.pipelines.own_protocol import audit_protocol
    from auditsel.pipelines.pipeline import Pipeline, PipelineAudit, audit_pipeline
    from auditsel.pipelines.pipeline_plan import PipelinePlan, plan_pipeline
    from auditsel.pipelines.sequential import audit_until_refuted
    from auditsel.rounds import (
        Binomial,
        FinitePmf,
        Point,
        Poisson,
        RoundsLaw,
        TruncatedNegativeBinomial,
        TwoPoint,
        law_from_dict,
    )
    from auditsel.selection import winner_law
    from auditsel.testing import RefutedClaim, assert_not_refuted, worst_case_tuning


def __getattr__(name):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'auditsel' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
