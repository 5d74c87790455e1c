"""The bug zoo (`auditsel reproduce bugzoo`) at small size: each bug is visible (a small audit
refutes the claim, or the exact leak of what runs exceeds the claim), the correct pipelines
are not refuted over several seeds, and the registry and docs name the command.

The committed results/bugzoo/rows.json is checked by tests/reproductions/test_results.py (schema and
consistency; its regeneration is a slow test there)."""

import math
import re
from pathlib import Path

import pytest
import zoo_numbers

pytest.importorskip("torch")
pytest.importorskip("sklearn")

import auditsel
from auditsel import reproductions
from auditsel.pipelines.pipeline import Pipeline
from auditsel.reproductions import bugzoo
from auditsel.reproductions.bugzoo import author_claims

ROOT = Path(__file__).resolve().parents[2]
DELTA = bugzoo.DELTA


def small_audit(name: str, games: int, seed: int = 0):
    m = bugzoo.module(name)
    return auditsel.audit_pipeline(
        Pipeline(m.tune, m.score, data=m.TRAIN, canary=m.CANARY),
        games=games,
        delta=DELTA,
        claimed_epsilon=m.claim(DELTA),
        statistics=auditsel.AuditOptions(seed=seed),
        report=auditsel.ReportOptions(panel=False),
    )


def test_the_zoo_has_fourteen_bugs_and_three_correct_pipelines_each_a_module():
    pytest.importorskip("opacus")
    bugs = {n: bugzoo.module(n).BUG for n in bugzoo.PIPELINES}
    correct = ["correct_dpgd", "correct_opacus", "correct_opacus_mlp"]
    assert [n for n, b in bugs.items() if b is None] == correct
    found = [b for b in bugs.values() if b is not None]
    assert len(found) == 14 and len(set(found)) == 14
    for name in bugzoo.PIPELINES:
        assert (ROOT / "auditsel" / "reproductions" / "bugzoo" / f"{name}.py").exists()
    with pytest.raises(KeyError, match="no pipeline"):
        bugzoo.module("no_such_pipeline")


@pytest.mark.slow  # pipeline audits (the bug zoo's regeneration runs them at length)
@pytest.mark.parametrize(
    "name, games", [("noise_for_mean", 400), ("batch_clipping", 400), ("train_selection", 800)]
)
def test_visible_bugs_are_refuted_by_a_small_audit(name, games):
    result = small_audit(name, games)
    assert result.refuted and result.eps > result.claimed_epsilon


@pytest.mark.slow  # a statistical run (a planned audit)
def test_releasing_every_run_leaks_the_composition_the_audit_sees_above_the_claim():
    m = bugzoo.module("release_all")
    lower, truth, how = m.correct_interval(DELTA)
    assert "exact" in how and lower == truth > 3 * m.claim(DELTA)
    # the exact formula against a direct sum for a law with two values of K
    law = auditsel.TwoPoint(4, 0.5)  # K = 1 or 4 (half each)
    eps = author_claims.released_runs_epsilon(0.5, law, DELTA)
    mixture = 0.5 * auditsel.gaussian_delta(0.5, eps) + 0.5 * auditsel.gaussian_delta(1.0, eps)
    assert mixture == pytest.approx(DELTA, rel=1e-6)
    plan = auditsel.plan_pipeline(
        Pipeline(m.tune, m.score, data=m.TRAIN, canary=m.CANARY),
        delta=DELTA,
        pilot=150,
        claimed_epsilon=m.claim(DELTA),
    )
    # the pilot's point estimate sees the leak above the claim; the plan vouches (at its 80%
    # limits) only for what 150 games can, less: a conservative plan (plan-calibration.md)
    assert plan.point_eps > m.claim(DELTA) and plan.curve_eps <= plan.point_eps


@pytest.mark.slow  # a statistical run (an audit of 300 games)
def test_the_fixed_grid_leaks_more_than_its_claim_only_in_the_tails():
    """K = 5 fixed: the worst case (the reduced game, exact at sample rate 1) is far above the
    Poisson(5) claim; the Poisson(5) game itself is below it (the claim is right for a random K)
    and the pipeline's own leak is one run's (its selection ignores the canary's weight)."""
    m = bugzoo.module("fixed_grid")
    truth = m.reduced_game_epsilon(DELTA)
    assert truth > m.claim(DELTA) + 1.5
    lower, upper, _ = m.correct_interval(DELTA)  # any score: above the monotone-score value
    assert truth < lower <= upper
    base = auditsel.DpsgdBase(m.NOISE, m.STEPS, 1.0).reduced()
    poisson = auditsel.exact_epsilon(auditsel.winner_law(base, auditsel.Poisson(5)), DELTA)
    assert poisson <= m.claim(DELTA) + 1e-9
    result = small_audit("fixed_grid", 300)
    assert not result.refuted


def test_shuffled_batches_visit_every_example_once_while_the_claim_charges_poisson():
    pytest.importorskip("opacus")
    bugzoo.module("shuffled_batches")  # a module of the zoo
    correct = bugzoo.module("correct_opacus")
    null = correct.CANARY  # unbound: a no-op
    sizes = {}
    for poisson in (False, True):
        _, _, _, loader = correct.train(correct.TRAIN, 0.5, null, poisson_sampling=poisson)
        sizes[poisson] = [len(xb) for xb, _ in loader]
    assert sizes[False] == [correct.BATCH] * (400 // correct.BATCH)  # a permutation in batches
    assert len(set(sizes[True])) > 1  # Poisson sampling: random batch sizes
    assert zoo_numbers.claim("shuffled_batches") == pytest.approx(
        zoo_numbers.claim("correct_opacus"), rel=1e-9
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.slow  # a statistical run (three audits)
def test_the_correct_hand_written_pipeline_is_not_refuted(seed):
    result = small_audit("correct_dpgd", 300, seed=seed)
    assert result.refuted is False


@pytest.mark.slow  # an audit of an Opacus pipeline
def test_the_correct_opacus_pipeline_is_not_refuted():
    pytest.importorskip("opacus")
    for seed in (0, 1):
        assert small_audit("correct_opacus", 120, seed=seed).refuted is False


def test_the_correct_pipelines_claim_is_exactly_their_reduced_game():
    m = bugzoo.module("correct_dpgd")
    winner = auditsel.winner_law(
        auditsel.DpsgdBase(m.NOISE, m.STEPS, 1.0).reduced(), auditsel.Poisson(m.MEAN_RUNS)
    )
    assert zoo_numbers.claim("correct_dpgd") == pytest.approx(
        auditsel.exact_epsilon(winner, DELTA), rel=1e-9
    )


def test_the_budget_follows_the_honest_plan_or_is_the_stated_one():
    assert bugzoo.SAFETY == 1  # the honest plan is not inflated
    assert bugzoo.planned_games(None) == bugzoo.BUDGET  # no refutation planned: the budget
    assert bugzoo.planned_games(100) == bugzoo.MIN_GAMES
    planned = bugzoo.planned_games(1561)  # the planner's games, in steps of 500
    assert planned % 500 == 0 and planned >= bugzoo.SAFETY * 1561 > planned - 500
    assert bugzoo.planned_games(10**7) == bugzoo.BUDGET
    # a stated budget caps the plan, below MIN_GAMES too
    assert bugzoo.planned_games(1561, budget=1000) == 1000
    assert bugzoo.planned_games(100, budget=400) == bugzoo.planned_games(None, budget=400) == 400
    # planned at the confidence of each look: the last look is the audit the plan sized
    assert bugzoo.LOOK_CONFIDENCE == pytest.approx(1 - (1 - bugzoo.CONFIDENCE) / bugzoo.LOOKS)


@pytest.mark.slow  # the documented route on one pipeline (a pilot, then up to 2,000 games)
def test_a_zoo_audit_on_the_documented_route_stops_at_the_first_look_that_refutes():
    """`canary="both"`, the default score, a 200-game pilot and an early-stopping audit on a
    visible bug: refuted at a look before its budget, its verdict valid at 95% over the looks;
    the row says which canary and field refuted it."""
    row = bugzoo.audit("noise_for_mean", budget=1000)
    assert row["status"] == "audited" and row["budget_cap"] == 1000
    assert row["refuted"] and row["games"] < row["budget"] == 1000
    assert row["looks"] == [128, 256, 512, 1000] and row["games"] in row["looks"]
    assert row["score"].startswith(("gradient: ", "input: "))


@pytest.mark.slow  # a pilot and a planned audit of the zoo's release_all
def test_a_release_of_every_run_is_audited_on_the_route():
    """release_all (every run's model in a list) is audited on the route (its gradient canary
    in the first run's model: auditsel.pipelines.default_canaries.parameter_holder)."""
    row = bugzoo.audit("release_all", pilot=20, budget=32)
    assert row["status"] == "audited" and row["games"] > 0, row["status"]


def test_a_release_the_route_cannot_read_is_a_row_that_says_so(monkeypatch):
    m = bugzoo.module("release_all")
    monkeypatch.setattr(m, "tune", lambda data, seed, canary: {"runs": [], "note": "none"})
    row = bugzoo.audit("release_all", pilot=20, budget=32)
    assert row["status"].startswith("refused: canary: 'both' chooses the gradient canary")
    lower, upper, _ = m.correct_interval(DELTA)
    assert row["games"] == 0 and not row["refuted"]
    assert row["correct_eps"] == bugzoo.correct_text(lower, upper)


def _row(name: str, bug: str | None, **changes) -> dict:
    row = {
        "pipeline": name,
        "bug": bug,
        "claimed_epsilon": 2.25,
        "correct_lower": 3.84,
        "correct_upper": 3.99,
        "correct_eps": bugzoo.correct_text(3.84, 3.99),
        "correct_how": "any score",
        "budget_cap": 1000,
        "pilot_games": 200,
        "status": "audited",
        "eps": 0.1,
        "refuted": False,
        "games": 1000,
        "budget": 1000,
        "looks": [128, 256, 512, 1000],
        "score": "input: every released field (2; largest: canary)",
        "cpu_seconds": 7.0,
        "pilot_curve_eps": 1.0,
        "pilot_point_eps": 1.2,
        "planned_games_to_refute": None,
        "planned_p_refuted": 0.0,
        "planned_expected_eps": 0.4,
        "wall_seconds": 9.0,
    }
    return {**row, **changes}


def test_render_writes_the_table_and_the_findings(tmp_path):
    rows = [
        _row("correct_dpgd", None),
        _row(
            "noise_for_mean",
            "noise scaled for the mean instead of the sum",
            correct_lower=None,
            correct_upper=20959.7,
            correct_eps=bugzoo.correct_text(None, 20959.7),
            eps=3.9,
            refuted=True,
            games=128,
            planned_games_to_refute=300,
            planned_p_refuted=0.97,
            score="gradient: every released field (2; largest: canary)",
        ),
        _row(
            "release_all",
            "every candidate's model released",
            status="refused: canary: 'both' cannot read the release",
            eps=0.0,
            games=0,
            budget=0,
        ),
    ]
    bugzoo.render(rows, 12.0, tmp_path)
    md = (tmp_path / "table.md").read_text()
    assert (
        "| correct_dpgd | none (correct) | 2.250 | [3.840, 3.990] | none; P(refuted) 0.00, "
        "E[eps_L] 0.40 | 1000 | 1000 | 0.100 | not refuted |" in md
    )
    assert "| <= 20959.700 | 300 games; P(refuted) 0.97, E[eps_L] 0.40 | 128 | 1000 | 3.900 |" in md
    assert "| refused (canary) |" in md and "`release_all`: refused: canary: 'both'" in md
    assert "1 of 2 buggy pipelines refuted; 1 of 1 correct pipelines not refuted; 1 refused" in md
    assert "Stopped early (refuted at a look before the budget): `noise_for_mean` at 128" in md
    assert "budget of 1,000 games per canary" in md  # the budget is stated
    # noise_for_mean's row was played with the every-field score: named as kept from before
    # noise_for_mean's plan (300 games) is within its budget (1,000)
    assert (
        "predicted a refutation within the budget for 1 of 2 audited pipelines: `noise_for_mean`."
        in md
    )
    kept = [line for line in md.splitlines() if line.startswith("- Kept from an earlier run")]
    assert len(kept) == 1 and kept[0].endswith(": `correct_dpgd`, `noise_for_mean`."), kept
    assert (tmp_path / "bugzoo.png").stat().st_size > 0 and (tmp_path / "rows.json").exists()


def test_correct_text_names_the_interval_one_end_or_none():
    assert bugzoo.correct_text(3.8417, 3.9879) == "[3.842, 3.988]"
    assert bugzoo.correct_text(9.19, 9.19) == "9.190"
    assert bugzoo.correct_text(None, 17.8) == "<= 17.800"
    assert bugzoo.correct_text(math.inf, math.inf) == "inf"
    assert bugzoo.correct_text(None, None) == "-"


def test_registered_and_documented():
    entry = reproductions.REGISTRY["bugzoo"]
    assert entry.root == "results" and callable(entry.resolve(entry.rows))
    page = (ROOT / "docs" / "findings" / "bugzoo.md").read_text()
    assert "auditsel reproduce bugzoo" in page
    committed = (ROOT / "results" / "bugzoo" / "table.md").read_text()
    table = re.search(r"\| pipeline \|.*?\n\n", committed, flags=re.S).group(0)
    assert table.strip() in page  # the findings page shows the committed table as is


@pytest.mark.slow  # a statistical run (a refuting game)
def test_fixed_grid_worst_case_config_refutes_the_poisson_claim():
    """The worst case the fixed_grid audit cannot see (its selection does not track the
    canary) is refuted by the reduced game at K = 5 (docs/findings/bugzoo.md)."""
    fixed_grid = bugzoo.module("fixed_grid")
    config = ROOT / "auditsel" / "configs" / "bugzoo_fixed_grid_worst_case.yaml"
    result = auditsel.run_config(config)
    claim = fixed_grid.claim(bugzoo.DELTA)
    assert result.delta == bugzoo.DELTA
    correct = fixed_grid.reduced_game_epsilon(bugzoo.DELTA)
    assert result.eps_exact == pytest.approx(correct, rel=1e-9)  # the game's monotone score
    assert claim < result.lower["eps"] <= correct


def test_a_plan_beyond_the_budget_is_not_counted_as_predicted():
    row = _row("noise_for_mean", "noise scaled for the mean", planned_games_to_refute=5000)
    lines = bugzoo.findings([row])
    assert any(
        "within the budget for 0 of 1" in line and "beyond it for `noise_for_mean` (5,000)" in line
        for line in lines
    ), lines
