"""audit_pipeline: canaries against closed forms, coverage, fingerprints, jobs, user errors."""

import importlib
import json
import math
import sys
import textwrap
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from auditsel import (
    AuditOptions,
    ExecutionOptions,
    GradientCanary,
    InputCanary,
    Pipeline,
    Point,
    ReportOptions,
    assert_not_refuted,
    audit_pipeline,
    plan_pipeline,
)
from auditsel.accounting.exact import exact_epsilon
from auditsel.errors import ConfigError
from auditsel.games.engine import CheckpointError
from auditsel.mechanisms import GaussianBase
from auditsel.pipelines.game import PipelineError, game_seed
from auditsel.pipelines.pipeline_plan import PilotOptions
from auditsel.selection import winner_law
from auditsel.testing import RefutedClaim

# --- pipelines (module level: worker processes import them) -----------------------------------

STEPS, SIGMA, LR, CLIP = 4, 1.0, 0.1, 1.0
MU = math.sqrt(STEPS) / SIGMA  # [XWW24] eq. 19 at tau = 1: exact


def dpsgd_no_data(data, seed, canary, sample_rate=1.0):
    """Hand-written DP-SGD on 3 parameters with no data: the clipped sum holds the canary only."""
    rng = np.random.default_rng(seed)
    theta = np.zeros(3)
    for _ in range(STEPS):
        grads = [np.zeros(3)]
        canary.step(grads, sample_rate=sample_rate, max_grad_norm=CLIP)
        theta -= LR * (grads[0] + rng.normal(0.0, SIGMA * CLIP, 3))
    return [theta]


def standardised(release, canary):
    """The canary's default score (the move along its coordinate) in units of the noise."""
    return canary.score(release) / (LR * math.sqrt(STEPS) * SIGMA * CLIP)


def dpsgd_best_of_three(data, seed, canary):
    """K = 3 runs of `dpsgd_no_data`, the run whose canary coordinate moved most released:
    the selection of [XWW24] Figure 5 (the winner of K Gaussian runs)."""
    runs = [dpsgd_no_data(data, seed * 3 + k, canary) for k in range(3)]
    return max(runs, key=lambda r: canary.score(r))


def count_inclusions(data, seed, canary):
    hits = [np.zeros(2)]
    taken = sum(canary.step(hits, sample_rate=0.3, max_grad_norm=CLIP) for _ in range(STEPS))
    assert hits[0][1] == taken  # the coordinate got C once per inclusion
    return taken


def release_itself(release, canary):
    return float(release)


EPS_RR = 1.0
P_RR = math.exp(EPS_RR) / (1 + math.exp(EPS_RR))


def randomized_response(data, seed, canary):
    """Randomised response to "is there a row with feature 1": exactly EPS_RR-DP (delta = 0)."""
    X, _ = data
    present = bool(np.asarray(X)[:, 0].sum() >= 1)
    rng = np.random.default_rng(seed)
    return float(rng.random() < (P_RR if present else 1 - P_RR))


class Linear:
    """A released linear model: logit = x . theta."""

    def __init__(self, theta):
        self.theta = np.asarray(theta, dtype=float)

    def __call__(self, batch):
        return np.asarray(batch, dtype=float) @ self.theta


def gaussian_sum(data, seed, canary):
    """The sum of the (clipped) rows plus N(0, SIGMA^2): the canary x = [1] shifts it by 1."""
    X, _ = data
    rows = np.asarray(X, dtype=float)
    rows = rows / np.maximum(1.0, np.linalg.norm(rows, axis=1, keepdims=True))
    rng = np.random.default_rng(seed)
    return Linear(rows.sum(axis=0) + rng.normal(0.0, SIGMA, rows.shape[1]))


def theta_score(release, canary):
    return float(release.theta[0])


def blows_up(data, seed, canary):
    if seed % 5 == 0:
        raise ZeroDivisionError("the user's bug")
    return 0.0


def nan_score(release, canary):
    return math.nan


EMPTY = (np.zeros((6, 1)), np.zeros(6))
ROW_CANARY = InputCanary(x=[1.0], y=1)
DIRAC = GradientCanary(coordinate=1)


def _by_coin(audit):
    return audit.scores[audit.member == 0], audit.scores[audit.member == 1]


# --- canaries against closed forms ------------------------------------------------------------


def test_gradient_canary_with_no_data_audits_like_the_reduced_gaussian_game():
    """tau = 1, no data: the standardised move is N(0,1) without the canary and
    N(sqrt(N)/sigma, 1) with it ([XWW24] eq. 19); a wrong mean is rejected by the same test."""
    audit = audit_pipeline(
        Pipeline(dpsgd_no_data, standardised, data=None, canary=DIRAC),
        games=4000,
        delta=1e-5,
        statistics=AuditOptions(seed=3),
    )
    out, inn = _by_coin(audit)
    assert stats.kstest(out, "norm").pvalue > 1e-3
    assert stats.kstest(inn, "norm", args=(MU,)).pvalue > 1e-3
    assert stats.kstest(inn, "norm", args=(0.9 * MU,)).pvalue < 1e-6  # the test has power
    # the exact game's eps bounds the valid eps_L, which finds a real part of it
    exact = GaussianBase(MU).epsilon(1e-5)
    assert 0.2 * exact < audit.eps <= exact


def test_gradient_canary_through_selection_matches_the_exact_winner_law():
    """Three runs, the largest move released: the scores follow the winner law of
    auditsel.selection (cdf F(x - b mu)^3), exact eps bounds eps_L."""
    winner = winner_law(GaussianBase(MU), Point(3))
    audit = audit_pipeline(
        Pipeline(dpsgd_best_of_three, standardised, data=None, canary=DIRAC), games=3000, delta=1e-5
    )
    for b, part in enumerate(_by_coin(audit)):
        assert stats.kstest(part, lambda t, b=b: winner.cdf(t, b)).pvalue > 1e-3
    shifted = winner_law(GaussianBase(1.1 * MU), Point(3))
    assert stats.kstest(_by_coin(audit)[1], lambda t: shifted.cdf(t, 1)).pvalue < 1e-6
    assert 0 < audit.eps <= exact_epsilon(winner, 1e-5)


def test_gradient_canary_is_taken_at_the_sample_rate_and_only_when_in():
    audit = audit_pipeline(
        Pipeline(count_inclusions, release_itself, data=None, canary=DIRAC), games=2000, delta=1e-5
    )
    out, inn = _by_coin(audit)
    assert np.all(out == 0)
    counts = np.bincount(inn.astype(int), minlength=STEPS + 1)
    expected = stats.binom.pmf(np.arange(STEPS + 1), STEPS, 0.3) * len(inn)
    assert stats.chisquare(counts, expected).pvalue > 1e-3


def test_input_canary_is_appended_when_in_and_audits_like_its_gaussian_shift():
    audit = audit_pipeline(
        Pipeline(gaussian_sum, theta_score, data=EMPTY, canary=ROW_CANARY),
        games=3000,
        delta=1e-5,
        statistics=AuditOptions(seed=4),
    )
    out, inn = _by_coin(audit)
    assert stats.kstest(out / SIGMA, "norm").pvalue > 1e-3
    assert stats.kstest(inn / SIGMA, "norm", args=(1 / SIGMA,)).pvalue > 1e-3
    assert audit.eps <= GaussianBase(1 / SIGMA).epsilon(1e-5)


@pytest.mark.parametrize(
    ("tune", "score", "canary", "data"),
    [
        (gaussian_sum, theta_score, ROW_CANARY, EMPTY),  # default: minus the canary's loss
        (dpsgd_no_data, standardised, DIRAC, None),  # default: the move along the coordinate
    ],
)
def test_default_scores_are_increasing_in_the_canary_signal(tune, score, canary, data):
    """Each canary's default score is a strictly increasing function of the signal, so a
    threshold audit on it is the audit on the signal, to the last digit."""
    kw_on = dict(data=data, canary=canary)
    kw = dict(games=400, delta=1e-5, statistics=AuditOptions(seed=9))
    own = audit_pipeline(Pipeline(tune, score, **kw_on), **kw)
    default = audit_pipeline(Pipeline(tune, **kw_on), **kw)
    assert np.array_equal(own.member, default.member)
    assert np.all(np.diff(default.scores[np.argsort(own.scores)]) > 0)
    assert default.eps == own.eps
    assert "default score" in default.score


def test_input_canary_prepares_every_kind_of_training_set():
    torch = pytest.importorskip("torch")
    tud = torch.utils.data
    inside = ROW_CANARY.for_game(True, np.random.default_rng(0))
    outside = ROW_CANARY.for_game(False, np.random.default_rng(0))
    X, y = np.zeros((3, 1)), np.zeros(3, dtype=int)
    for data in [
        (X, y),
        (torch.zeros(3, 1), torch.zeros(3)),
        tud.TensorDataset(torch.zeros(3, 1), torch.zeros(3)),
        tud.Subset(tud.TensorDataset(torch.zeros(3, 1), torch.zeros(3)), [0, 1, 2]),
    ]:
        assert outside.prepare(data) is data
        grown = inside.prepare(data)
        assert len(grown if not isinstance(grown, tuple) else grown[0]) == 4
        last = grown[-1] if not isinstance(grown, tuple) else (grown[0][-1], grown[1][-1])
        assert float(last[0][0]) == 1.0 and float(last[1]) == 1.0
    for canary in (inside, outside):  # an error never depends on the coin
        with pytest.raises(ConfigError, match="data"):
            canary.prepare("not a data set")


def test_gradient_canary_outside_a_game_is_a_no_op_and_checks_its_coordinate():
    grads = [np.zeros((2, 2)), np.zeros(3)]
    assert not GradientCanary(coordinate=5).step(grads, sample_rate=1.0, max_grad_norm=1.0)
    inside = GradientCanary(coordinate=5, norm=2.5).for_game(True, np.random.default_rng(0))
    assert inside.step(grads, sample_rate=1.0, max_grad_norm=1.0)
    assert grads[1][1] == 2.5 and np.count_nonzero(grads[0]) == 0  # flat index 5 = [1][1]
    for canary in (
        GradientCanary(coordinate=7),
        GradientCanary(coordinate=7).for_game(False, None),
    ):
        with pytest.raises(ConfigError, match="coordinate: must be below 7"):
            canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
    with pytest.raises(ConfigError, match="optimizer"):
        GradientCanary(coordinate=0).attach(object())


# --- validity: coverage over many seeds ---------------------------------------------------------


@pytest.mark.slow  # a statistical run (200 audits)
def test_coverage_of_a_correct_pipeline_over_200_seeds():
    """Randomised response is exactly EPS_RR-DP: over 200 audits (seeds 0..199, 400 games each)
    the valid eps_L exceeds it in at most the stated 5% (with binomial slack: P(Bin(200, 0.05)
    > 20) < 0.002), while the point estimate without a confidence interval exceeds it often
    (the check has power: it fails an estimator that is not a bound)."""
    above = point_above = 0
    for seed in range(200):
        audit = audit_pipeline(
            Pipeline(randomized_response, release_itself, data=EMPTY, canary=ROW_CANARY),
            games=400,
            delta=0.0,
            statistics=AuditOptions(seed=seed),
            report=ReportOptions(panel=False),
        )
        above += audit.eps > EPS_RR
        point_above += audit.bound.eps_point > EPS_RR
    assert above <= 20
    assert point_above >= 40


# --- the same numbers however the games are run -------------------------------------------------


@pytest.mark.slow  # reason: five audits, three in worker processes (34 CPU s); the same numbers
# on threads and in one process by default: tests/pipelines/test_user_code.py
def test_same_numbers_for_any_jobs_chunk_size_and_backend():
    kw_on = dict(data=None, canary=DIRAC)
    kw = dict(games=300, delta=1e-5, statistics=AuditOptions(seed=11))
    run = lambda **ex: audit_pipeline(
        Pipeline(dpsgd_no_data, standardised, **kw_on), execution=ExecutionOptions(**ex), **kw
    )
    one, two = run(jobs=1), run(jobs=2)  # two: loky processes
    small, threads = run(jobs=2, chunk_size=7), run(jobs=2, backend="threading")
    three = run(jobs=3, chunk_size=7)
    for other in (two, small, threads, three):
        assert np.array_equal(one.scores, other.scores)
        assert np.array_equal(one.member, other.member)
        assert one.eps == other.eps
    plays = lambda audit: audit.result["pipeline"]["reproducibility"]["plays"]
    assert plays(one) == 4 and plays(two) == plays(threads) == plays(three) == 6
    # each game has its own seed and coin stream: the seeds of an audit are distinct
    assert len({game_seed(11, g) for g in range(300)}) == 300


@pytest.mark.slow  # reason: a pilot in worker processes (9 CPU s)
def test_a_pilot_on_workers_plans_what_one_process_plans():
    """plan_pipeline plays its pilot without a replay check, on the request's workers; the
    same plan as in one process."""
    kw_on = dict(data=EMPTY, canary=ROW_CANARY)
    kw = dict(delta=0.0, games=2000, target_eps=0.5)
    pilot = PilotOptions(games=160)
    one, two = (
        plan_pipeline(
            Pipeline(randomized_response, release_itself, **kw_on),
            pilot=pilot,
            execution=ExecutionOptions(jobs=jobs),
            **kw,
        )
        for jobs in (1, 2)
    )
    assert (one.curve_eps, one.games_for_target, one.prob_target) == (
        two.curve_eps,
        two.games_for_target,
        two.prob_target,
    )


# --- checkpoints: resume, and refuse what other code made ---------------------------------------


def _module(tmp_path, name, body):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.invalidate_caches()
        sys.modules.pop(name, None)
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


PIPE = """
import numpy as np

def tune(data, seed, canary):
    grads = [np.zeros(2)]
    canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
    return grads[0] + np.random.default_rng(seed).normal(size=2)

def score(release, canary):
    return float(release[0]) * {scale}
"""


def test_checkpoints_resume_and_an_edited_function_is_refused(tmp_path):
    ck = tmp_path / "ck"
    m = _module(tmp_path, "pipe_fp", PIPE.format(scale=1.0))
    kw_on = dict(data=None, canary=GradientCanary(coordinate=0))
    kw = dict(games=100, delta=1e-5)
    at = ExecutionOptions(checkpoint_dir=ck)
    first = audit_pipeline(Pipeline(m.tune, m.score, **kw_on), execution=at, **kw)
    again = audit_pipeline(Pipeline(m.tune, m.score, **kw_on), execution=at, **kw)
    assert again.resumed_games == 100 and first.resumed_games == 0
    assert np.array_equal(first.scores, again.scores) and first.eps == again.eps
    edited = _module(tmp_path, "pipe_fp", PIPE.format(scale=2.0))
    with pytest.raises(CheckpointError, match="`score` \\(its code changed\\)"):
        audit_pipeline(Pipeline(edited.tune, edited.score, **kw_on), execution=at, **kw)
    with pytest.raises(CheckpointError, match="`data`"):
        audit_pipeline(Pipeline(m.tune, m.score, **{**kw_on, "data": [1]}), execution=at, **kw)
    with pytest.raises(CheckpointError, match="`canary`"):
        other = {**kw_on, "canary": GradientCanary(coordinate=1)}
        audit_pipeline(Pipeline(m.tune, m.score, **other), execution=at, **kw)
    # the edited code in a fresh folder recomputes: every score doubled, the same coins
    fresh = audit_pipeline(
        Pipeline(edited.tune, edited.score, **kw_on),
        execution=ExecutionOptions(checkpoint_dir=tmp_path / "new"),
        **kw,
    )
    assert np.array_equal(fresh.scores, 2 * first.scores)
    assert np.array_equal(fresh.member, first.member)


# --- the user's errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    # reason: two fresh worker processes that import torch (6 CPU s); an exception on a worker
    # is named through the CLI by default (test_pipeline_cli), in this process here
    "jobs",
    [1, pytest.param(2, marks=pytest.mark.slow)],
)
def test_an_exception_in_the_users_pipeline_names_the_function_and_the_game(jobs):
    seeds = [game_seed(0, g) for g in range(40)]
    first_bad = next(g for g, s in enumerate(seeds) if s % 5 == 0)
    with pytest.raises(PipelineError) as err:
        audit_pipeline(
            Pipeline(blows_up, release_itself, data=None, canary=DIRAC),
            games=40,
            delta=0,
            execution=ExecutionOptions(jobs=jobs, chunk_size=40),
        )
    text = str(err.value)
    assert text.startswith("tune: ") and "test_pipeline.blows_up raised ZeroDivisionError" in text
    assert f"game {first_bad} (seed {seeds[first_bad]}" in text
    assert "test_pipeline.py:" in text and "the user's bug" in text


def test_a_nan_score_names_the_function_and_the_game():
    with pytest.raises(PipelineError, match="score: .*nan_score returned NaN in game 0"):
        audit_pipeline(
            Pipeline(dpsgd_no_data, nan_score, data=None, canary=DIRAC), games=10, delta=0
        )


def test_bad_arguments_are_config_errors():
    kw_on = dict(data=None, canary=DIRAC)
    kw = dict(games=10, delta=1e-5)
    for bad, field in [
        (dict(games=2), "games"),
        (dict(delta=1.0), "delta"),
        (dict(canary="dirac"), "canary"),
        (dict(claimed_epsilon=-1.0), "claimed_epsilon"),
        (dict(statistics=AuditOptions(rule="best")), "rule"),
        (dict(report=ReportOptions(base=GaussianBase(1.0))), "rounds"),
    ]:
        on = {**kw_on, **{k: v for k, v in bad.items() if k in kw_on}}
        rest = {**kw, **{k: v for k, v in bad.items() if k not in kw_on}}
        with pytest.raises(ConfigError) as err:
            audit_pipeline(Pipeline(dpsgd_no_data, **on), **rest)
        assert err.value.field == field
    with pytest.raises(ConfigError, match=r"^pipeline: must be auditsel.Pipeline"):
        audit_pipeline(dpsgd_no_data, **kw)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^canary: required"):
        audit_pipeline(Pipeline(dpsgd_no_data), **kw)
    with pytest.raises(ConfigError, match="tune"):
        audit_pipeline(Pipeline("tune", **kw_on), **kw)


# --- claims, reports, regression tests, planning -------------------------------------------------


def test_claim_verdict_report_and_result_json(tmp_path, figures, estimator_panel):
    audit = audit_pipeline(
        Pipeline(gaussian_sum, theta_score, data=EMPTY, canary=ROW_CANARY),
        games=2000,
        delta=1e-5,
        claimed_epsilon=0.2,
        report=ReportOptions(
            base=GaussianBase(1 / SIGMA), rounds=Point(1), out_dir=tmp_path / "out"
        ),
    )
    assert audit.refuted is True and audit.eps > 0.2
    names = sorted(p.name for p in audit.files)
    assert names == ["privacy_curve.png", "report.md", "result.json", "scores.png", "tradeoff.png"]
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["lower"]["eps"] == audit.eps and result["claim"]["refuted"] is True
    assert result["pipeline"]["games"] == 2000 and result["pipeline"]["cpu_seconds"] > 0
    exact = result["monotone_score"]["exact"]  # K = 1: the reduced game is the base itself
    assert exact == pytest.approx(GaussianBase(1 / SIGMA).epsilon(1e-5))
    assert set(audit.estimators) >= {"cp_split", "gdp_fit", "selection_fit", "auroc"}
    report = (tmp_path / "out" / "report.md").read_text()
    assert "claim, REFUTED" in report and "![tradeoff.png](tradeoff.png)" in report
    # without a pair and a law: no privacy curve, the game's plots only
    plain = audit_pipeline(
        Pipeline(gaussian_sum, theta_score, data=EMPTY, canary=ROW_CANARY),
        games=400,
        delta=1e-5,
        report=ReportOptions(out_dir=tmp_path / "plain"),
    )
    assert sorted(p.name for p in plain.files) == [
        "report.md",
        "result.json",
        "scores.png",
        "tradeoff.png",
    ]
    assert plain.refuted is None and "claim" not in plain.to_dict()


def test_assert_not_refuted_accepts_a_pipeline():
    pipeline = Pipeline(randomized_response, release_itself, data=EMPTY, canary=ROW_CANARY)
    bound = assert_not_refuted(EPS_RR, 0.0, pipeline, trials=2000, statistics=AuditOptions(seed=1))
    assert 0 < bound.eps <= EPS_RR
    with pytest.raises(RefutedClaim):
        assert_not_refuted(0.1, 0.0, pipeline, trials=2000, statistics=AuditOptions(seed=1))
    with pytest.raises(ConfigError, match="wrap your tuning function in a Pipeline"):
        assert_not_refuted(1.0, 0.0, randomized_response, trials=100)


@pytest.mark.slow  # a statistical run: 20 audits of the planned size (tests/pipelines/test_plan_honest.py plans by default)
def test_plan_sizes_an_audit_from_a_pilot():
    kw_on = dict(data=EMPTY, canary=ROW_CANARY)
    kw = dict(delta=0.0, pilot=PilotOptions(games=400, power=0.8))
    plan = plan_pipeline(
        Pipeline(randomized_response, release_itself, **kw_on), target_eps=0.5, games=3000, **kw
    )
    # the pilot's curve reaches about EPS_RR (randomised response has one informative test)
    assert 0.6 < plan.curve_eps < 1.4
    assert plan.games_for_target is not None and plan.prob_target > 0.8
    assert plan.expected_eps < EPS_RR
    # a claim above what the pilot sees is never planned to be refuted
    high = plan_pipeline(
        Pipeline(randomized_response, release_itself, **kw_on), claimed_epsilon=3.0, **kw
    )
    assert high.games_to_refute is None
    low = plan_pipeline(
        Pipeline(randomized_response, release_itself, **kw_on), claimed_epsilon=0.3, **kw
    )
    assert low.games_to_refute is not None and low.games_to_refute < plan.games_for_target
    # the plan holds: audits with the planned number of games reach the target at about the
    # planned rate (the planner is optimistic for split, so the check is loose)
    n = plan.games_for_target
    rr = Pipeline(randomized_response, release_itself, data=EMPTY, canary=ROW_CANARY)
    no_panel = ReportOptions(panel=False)
    hits = sum(
        audit_pipeline(
            rr, games=n, delta=0.0, statistics=AuditOptions(seed=100 + s), report=no_panel
        ).eps
        >= 0.5
        for s in range(20)
    )
    assert hits >= 6  # planned 0.8; the seeded split of main certified 8 of 20 here


def test_progress_counts_games(monkeypatch):
    from auditsel.games import engine

    seen = {}

    class Bar:
        def __init__(self, total, initial, unit, **kw):
            seen.update(total=total, unit=unit, done=initial)

        def update(self, n):
            seen["done"] += n

        def close(self):
            pass

    monkeypatch.setattr(engine, "tqdm", Bar)  # the engine's bar
    monkeypatch.setattr(engine, "_is_terminal", lambda stream: True)  # else: lines (a log)
    audit_pipeline(
        Pipeline(dpsgd_no_data, standardised, data=None, canary=DIRAC),
        games=70,
        delta=0,
        execution=ExecutionOptions(progress=True),
    )
    assert seen == {"total": 70, "unit": "game", "done": 70}


def test_a_streamed_audit_gives_the_bound_of_the_chunks(tmp_path):
    kw_on = dict(data=None, canary=DIRAC)
    kw = dict(games=640, delta=1e-5, statistics=AuditOptions(seed=2))
    streamed = audit_pipeline(
        Pipeline(dpsgd_no_data, standardised, **kw_on),
        execution=ExecutionOptions(stream=True, chunk_size=32, checkpoint_dir=tmp_path / "ck"),
        **kw,
    )
    assert streamed.scores is None and streamed.result["lower"]["streamed"] is True
    assert 0 < streamed.eps <= GaussianBase(MU).epsilon(1e-5)
    with pytest.raises(ConfigError, match="stream"):
        audit_pipeline(
            Pipeline(dpsgd_no_data, standardised, **kw_on),
            execution=ExecutionOptions(stream=True, chunk_size=32),
            **kw,
        )


@pytest.mark.slow  # starts a dask cluster
def test_a_dask_cluster_gives_the_same_numbers():
    pytest.importorskip("distributed")
    kw_on = dict(data=None, canary=DIRAC)
    kw = dict(games=96, delta=1e-5, statistics=AuditOptions(seed=5))
    here = audit_pipeline(Pipeline(dpsgd_no_data, standardised, **kw_on), **kw)
    dask = ExecutionOptions(jobs=2, backend="dask")
    cluster = audit_pipeline(Pipeline(dpsgd_no_data, standardised, **kw_on), execution=dask, **kw)
    assert np.array_equal(here.scores, cluster.scores) and here.eps == cluster.eps


def test_gradient_canary_reads_the_initial_weights_from_the_release():
    canary = GradientCanary(coordinate=2, initial=10.0)
    final, start = [np.array([0.0, 1.0]), np.array([5.0])], [np.zeros(2), np.array([7.5])]
    assert canary.score(final) == 10.0 - 5.0  # the canary's own initial value
    assert canary.score({"model": final, "initial": start}) == 7.5 - 5.0  # the release's


# --- narrow signatures: statistics, execution and report as frozen keyword-only options -------


def test_options_objects_are_honoured_and_the_old_keywords_refused(tmp_path):
    """audit_pipeline(statistics=, execution=, report=): each option is honoured (another
    seed plays other games); the flat keywords of 0.2 are refused, naming them."""
    kw_on = dict(data=None, canary=GradientCanary(coordinate=0))
    kw = dict(games=120, delta=1e-5)
    new = audit_pipeline(
        Pipeline(dpsgd_no_data, standardised, **kw_on),
        **kw,
        statistics=AuditOptions(confidence=0.9, seed=3, rule="bonferroni_all"),
        execution=ExecutionOptions(chunk_size=50, checkpoint_dir=tmp_path / "new"),
        report=ReportOptions(panel=False, name="options"),
    )
    assert (new.confidence, new.seed, new.rule, new.estimators) == (0.9, 3, "bonferroni_all", None)
    assert len(list((tmp_path / "new").glob("chunk*"))) == 3  # 120 games in chunks of 50
    other = audit_pipeline(
        Pipeline(dpsgd_no_data, standardised, **kw_on), **kw, report=ReportOptions(panel=False)
    )
    assert not np.array_equal(other.scores, new.scores)  # seed 0, not 3
    # 0.2's flat keywords and 0.3's data, canary and accept_nondeterminism: gone
    for flat in ("confidence", "seed", "jobs", "out_dir", "job", "data", "accept_nondeterminism"):
        with pytest.raises(TypeError, match=rf"unexpected keyword argument '{flat}'"):
            audit_pipeline(Pipeline(dpsgd_no_data, **kw_on), **kw, **{flat: 2})
    with pytest.raises(ConfigError, match=r"^statistics: must be AuditOptions"):
        audit_pipeline(Pipeline(dpsgd_no_data, **kw_on), **kw, statistics={"seed": 3})  # type: ignore[arg-type]
    for cls in (AuditOptions, ExecutionOptions, ReportOptions):
        with pytest.raises(TypeError):
            cls(1)  # keyword-only
        with pytest.raises(AttributeError):
            cls().progress = True  # type: ignore[misc]  # frozen


def test_plan_pipeline_plays_its_pilot_at_the_audits_seed_plus_one(monkeypatch):
    """plan_pipeline(statistics=AuditOptions(seed=s)) plans the audit at seed s from a pilot
    played at s + 1; the pilot's own seed= of 0.2 is refused, naming it."""
    import auditsel.pipelines.pipeline_plan as pipeline_plan

    kw_on = dict(data=EMPTY, canary=ROW_CANARY)
    kw = dict(delta=0.0, pilot=200, target_eps=0.5, games=500)
    played = []
    play = pipeline_plan.play_games

    def recorded(game, games, seed, *options, **keywords):
        played.append(seed)
        return play(game, games, seed, *options, **keywords)

    monkeypatch.setattr(pipeline_plan, "play_games", recorded)
    new = plan_pipeline(
        Pipeline(randomized_response, release_itself, **kw_on),
        **kw,
        statistics=AuditOptions(seed=6),
    )
    assert played == [7]
    monkeypatch.undo()
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'seed'"):
        plan_pipeline(Pipeline(randomized_response, release_itself, **kw_on), **kw, seed=7)
    other = plan_pipeline(
        Pipeline(randomized_response, release_itself, **kw_on),
        **kw,
        statistics=AuditOptions(seed=7),
    )
    assert other.curve_eps != new.curve_eps or other.expected_eps != new.expected_eps
    with pytest.raises(ConfigError, match=r"^execution.scheduler: "):
        plan_pipeline(
            Pipeline(randomized_response, release_itself, **kw_on),
            **kw,
            execution=ExecutionOptions(scheduler="x"),
        )
    # pilot=PilotOptions(games=..., confidence=...): the int's plan at the default confidence,
    # and the pilot's confidence reaches the plan (a looser curve certifies at least as much)
    same = plan_pipeline(
        Pipeline(randomized_response, release_itself, **kw_on),
        **{**kw, "pilot": PilotOptions(games=200)},
        statistics=AuditOptions(seed=6),
    )
    assert same == replace(new, cpu_seconds_per_game=same.cpu_seconds_per_game)
    loose = plan_pipeline(
        Pipeline(randomized_response, release_itself, **kw_on),
        **{**kw, "pilot": PilotOptions(games=200, confidence=0.5)},
        statistics=AuditOptions(seed=6),
    )
    assert loose.curve_eps >= new.curve_eps


def test_gradient_canary_addressed_by_parameter_name_and_index():
    """GradientCanary(parameter="fc1.weight", index=(3, 0)) is the flattened coordinate of that
    entry: the same step, the same score, on a torch module, a state dict and by hand."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(2, 5))
    model.add_module("fc2", torch.nn.Linear(5, 1))
    names = [n for n, _ in model.named_parameters()]
    by_name = GradientCanary(parameter="fc1.weight", index=(3, 0))
    flat = GradientCanary(coordinate=3 * 2 + 0)  # fc1.weight is first, shape (5, 2)
    for canary in (by_name, flat):
        grads = [torch.zeros_like(p) for p in model.parameters()]
        bound = canary.for_game(True, np.random.default_rng(0))
        assert bound.step(grads, sample_rate=1.0, max_grad_norm=2.0, names=names)
        assert grads[0][3, 0] == 2.0 and sum(float(g.abs().sum()) for g in grads) == 2.0
    assert by_name.score(model) == flat.score(model) == -model.fc1.weight[3, 0].item()
    assert by_name.score(model.state_dict()) == flat.score(model)
    two = GradientCanary(parameter="fc2.bias", index=0)  # an int index of a 1-d parameter
    assert two.score(model) == -model.fc2.bias[0].item()
    assert by_name.describe() == {
        "kind": "gradient", "parameter": "fc1.weight", "index": [3, 0], "norm": None,
        "initial": 0.0,
    }  # fmt: skip
    with pytest.raises(ConfigError, match="names"):
        by_name.step([torch.zeros(5, 2)], sample_rate=1.0, max_grad_norm=1.0)
    with pytest.raises(ConfigError, match="no parameter 'fc3.weight'"):
        GradientCanary(parameter="fc3.weight", index=(0, 0)).score(model)
    with pytest.raises(ConfigError, match=r"index: must index fc1.weight of shape \(5, 2\)"):
        GradientCanary(parameter="fc1.weight", index=(5, 0)).score(model)
    with pytest.raises(ConfigError, match="one of the two"):
        GradientCanary()
    with pytest.raises(ConfigError, match="one of the two"):
        GradientCanary(coordinate=1, parameter="fc1.weight", index=(0, 0))
