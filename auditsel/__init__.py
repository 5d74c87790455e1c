"""auditsel: audit the privacy of differentially private hyperparameter tuning.

Upper bounds (exact curve of the released winner, and the papers' bounds), the distinguishing
game, and epsilon lower bounds from it. See docs/howto/python-api.md and
docs/explanation/architecture.md.

The public names, in the manner of dp_accounting (pairs and laws are data, bounds are
algorithms), are imported here and listed once in `__all__`, by section: a `# Title` comment
opens a section of the API page (docs/reference/api.md, written from this list by
`python docs/generate.py`), and `# members` after a name shows its members there. Argument
order: the pair (or its parameters) first, then eps before delta.

`import auditsel` loads NumPy and scipy.special (the numbers need them), never torch,
matplotlib, scikit-learn, dask, statsmodels, pandas, PyYAML, scipy.stats or scipy.optimize
(tests/test_cli.py holds this).
"""

from auditsel.accounting.attack import AttackValue, attack, attack_epsilon
from auditsel.accounting.calibrate import Calibration, CalibrationOptions, calibrate
from auditsel.accounting.exact import exact_epsilon, privacy_curve
from auditsel.accounting.interval import Interval, TuningEpsilon, tuning_epsilon, tuning_interval
from auditsel.accounting.panel import Panel, panel, panel_curves, upper_bounds
from auditsel.accounting.registry import BOUNDS, bound
from auditsel.auditing.estimators import estimator_panel
from auditsel.auditing.lower import LowerBound, audit_scores
from auditsel.auditing.rules import BonferroniAll, BonferroniGrid, MultiSplit, Split
from auditsel.errors import ConfigError
from auditsel.events import EventBase, LaplaceBase, as_pair
from auditsel.experiments.config import load_config, parse_config
from auditsel.experiments.experiment import run_config
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
from auditsel.pipelines.checks.finding import Finding
from auditsel.pipelines.checks.runner import RunObjects, check_pipeline
from auditsel.pipelines.one_run_pipeline import CanarySet, audit_pipeline_one_run
from auditsel.pipelines.opacus import OpacusRun, from_opacus
from auditsel.pipelines.own_protocol import audit_protocol
from auditsel.pipelines.pipeline import Pipeline, PipelineAudit, audit_pipeline
from auditsel.pipelines.pipeline_plan import PilotOptions, PipelinePlan, plan_pipeline
from auditsel.pipelines.sequential import LookOptions, audit_until_refuted
from auditsel.results.result import RunResult
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
from auditsel.version import __version__

__all__ = [
    "__version__",
    # Mechanism pairs
    "GaussianBase",  # members
    "FiniteOutputBase",  # members
    "DpsgdBase",  # members
    "Neighbouring",  # members
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_mu",
    "LaplaceBase",  # members
    "EventBase",  # members
    "as_pair",
    # Laws of K
    "RoundsLaw",  # members
    "TruncatedNegativeBinomial",
    "Poisson",
    "Binomial",
    "TwoPoint",
    "Point",
    "FinitePmf",
    "law_from_dict",
    # The exact curve of the released winner
    "winner_law",
    "privacy_curve",
    "exact_epsilon",
    # Upper bounds
    "BOUNDS",
    "bound",
    "panel",
    "Panel",
    "panel_curves",
    "upper_bounds",
    # What to report: the tightest rigorous bound and the interval
    "tuning_epsilon",
    "TuningEpsilon",  # members
    "tuning_interval",
    "Interval",
    "attack_epsilon",
    "attack",
    "AttackValue",
    # Calibration
    "calibrate",
    "Calibration",  # members
    "CalibrationOptions",
    # Lower bounds
    "audit_scores",
    "LowerBound",  # members
    "Split",
    "BonferroniGrid",
    "BonferroniAll",
    "MultiSplit",
    "estimator_panel",
    "audit_protocol",
    # Your own pipeline
    "audit_pipeline",
    "PipelineAudit",  # members
    "Pipeline",  # members
    "AuditOptions",
    "ExecutionOptions",
    "ReportOptions",
    "InputCanary",  # members
    "GradientCanary",  # members
    "from_opacus",
    "OpacusRun",  # members
    "check_pipeline",
    "RunObjects",
    "Finding",  # members
    "plan_pipeline",
    "PipelinePlan",  # members
    "PilotOptions",
    "audit_until_refuted",
    "LookOptions",
    "audit_pipeline_one_run",
    "CanarySet",  # members
    # Experiments
    "run_config",
    "RunResult",  # members
    "load_config",
    "parse_config",
    # Regression tests
    "assert_not_refuted",
    "worst_case_tuning",
    "RefutedClaim",
    # Bad input
    "ConfigError",  # members
]
