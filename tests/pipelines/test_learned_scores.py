"""The default score learned from a pilot (issue 36 items 1 and 3): the family of statistics,
the pilot that never plays the audit's games, the choice that finds a leak in released state,
and the plan that says what it sees and what "not refuted" means when it sees nothing."""

import math

import numpy as np
import pytest
from scipy import stats

from auditsel import (
    AuditOptions,
    GaussianBase,
    InputCanary,
    ReportOptions,
    audit_pipeline,
    plan_pipeline,
)
from auditsel.errors import ConfigError
from auditsel.pipelines import learned_scores
from auditsel.pipelines.default_canaries import OUTLIER, default_canaries
from auditsel.pipelines.game import game_seed
from auditsel.pipelines.learned_scores import LearnedScore, learning_seed, statistics
from auditsel.pipelines.pipeline import Pipeline
from auditsel.pipelines.release_scores import PROBE_SEED

DELTA = 1e-5
NO_PANEL = ReportOptions(panel=False)
_rng = np.random.default_rng(0)
N, D = 40, 4
X = np.concatenate([_rng.normal(0, 1, (N, D - 1)), np.zeros((N, 1))], axis=1)
DATA = (X, (X[:, 0] > 0).astype(float))
PERSON = InputCanary(x=[0.0, 0.0, 0.0, 4.0], y=1)  # only the unused last feature describes it
SIGMA = 2.0
CLAIM = GaussianBase(1 / SIGMA).epsilon(DELTA)  # one Gaussian release of sensitivity 1


class Linear:
    def __init__(self, theta):
        self.theta = np.asarray(theta, dtype=float)

    def __call__(self, batch):
        return np.asarray(batch, dtype=float) @ self.theta

    def parameters(self):
        return [self.theta]


class Scaler:
    """A released preprocessing object (as sklearn's StandardScaler keeps it)."""

    def __init__(self, rows):
        self.mean_ = rows.mean(axis=0)
        self.n_samples_seen_ = len(rows)
        self._private = 1.0


def noisy_model(data, seed, canary):
    """A correct release: a model whose weights are the clipped sum plus Gaussian noise, and a
    leaderboard whose length (K) varies with the seed."""
    X, _ = data
    rng = np.random.default_rng(seed)
    rows = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    theta = rows.sum(axis=0) + rng.normal(0, SIGMA, X.shape[1])
    k = int(rng.integers(1, 5))
    return {"model": Linear(theta), "lr": 0.5, "runs": list(rng.random(k))}


def scaler_leak(data, seed, canary):
    """The same model, with the private data's feature means shipped beside it (the bug)."""
    release = noisy_model(data, seed, canary)
    release["scaler"] = Scaler(data[0])
    return release


def test_statistics_read_every_number_of_a_release():
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(D, 2), torch.nn.BatchNorm1d(2))
    net[0].scale = np.array([2.0, 3.0])  # a non-parameter array stored on the model
    net.eval()
    initial = {n: p.detach().clone() + 1.0 for n, p in net.named_parameters()}
    release = {
        "model": net,
        "initial": initial,
        "lr": 0.5,
        "clip": 2.0,
        "runs": [{"acc": 0.5}, {"acc": 0.7}, {"acc": 0.9}],
        "history": [1.0, 3.0],
        "scaler": Scaler(np.arange(8.0).reshape(2, 4)),
        "note": "text",
    }
    got = statistics(release, PERSON)
    own = got["canary score"]
    assert got["canary score / (lr x clip)"] == pytest.approx(own / 1.0)
    assert got["canary score / clip"] == pytest.approx(own / 2.0)
    assert got["runs.count"] == 3 and got["runs[*].acc.max"] == pytest.approx(0.9)
    assert got["runs[*].acc.mean"] == pytest.approx(0.7) and got["history[*].sum"] == 4.0
    assert got["scaler.mean_[3]"] == 5.0 and got["scaler.n_samples_seen_"] == 2.0
    assert "scaler._private" not in got and not any("note" in k for k in got)
    norm = math.sqrt(net[0].weight.numel())  # every weight 1 away from its initial value
    assert got["model.0.weight displacement norm"] == pytest.approx(norm)
    assert got["model.0.scale[1]"] == 3.0 and got["model.1.running_var[0]"] == 1.0
    column = got["model.0.weight[:, 3] displacement norm"]  # the canary's unused feature
    assert column == pytest.approx(math.sqrt(2))
    assert got["model.0.weight[:, 3] displacement norm / (lr x clip)"] == pytest.approx(column)


def test_the_learning_pilot_never_plays_the_audits_games(monkeypatch):
    """The games that choose the score are not the audit's: no seed handed to `tune` in the
    pilot is one an audit game gets, and the choice does not depend on the audit's games."""
    monkeypatch.setattr(learned_scores, "_CACHE", {})
    seen: list[int] = []

    def recording(data, seed, canary):
        seen.append(seed)
        return scaler_leak(data, seed, canary)

    kw_on = dict(data=DATA, canary=PERSON)
    kw = dict(delta=DELTA, report=NO_PANEL)
    audit = audit_pipeline(Pipeline(recording, **kw_on), games=64, **kw)
    audit_seeds = {game_seed(0, g) for g in range(64)}
    assert learning_seed(0) != 0 and len(seen) >= 200 + 64
    pilot = {game_seed(learning_seed(0), g) for g in range(200)}
    assert pilot <= set(seen) and not pilot & audit_seeds
    monkeypatch.setattr(learned_scores, "_CACHE", {})
    again = audit_pipeline(Pipeline(scaler_leak, **kw_on), games=128, **kw)
    assert again.result["pipeline"]["score"] == audit.result["pipeline"]["score"]


def test_a_scaler_shipped_with_the_model_is_found_refuted_and_planned():
    """The outlier moves the released feature mean and nothing else moves it: the learned
    score reads that entry, the audit refutes the model's claim, and the plan predicts it."""
    kw_on = dict(data=DATA, canary=PERSON)
    kw = dict(delta=DELTA, claimed_epsilon=CLAIM)
    plan = plan_pipeline(Pipeline(scaler_leak, **kw_on), games=512, **kw)
    assert "'scaler.mean_" in plan.score and plan.games_to_refute is not None
    assert plan.prob_refute is not None and plan.prob_refute >= 0.5
    assert plan.refutable_below > CLAIM and "cannot refute" not in plan.summary()
    audit = audit_pipeline(Pipeline(scaler_leak, **kw_on), games=512, report=NO_PANEL, **kw)
    assert audit.refuted and "'scaler.mean_" in audit.result["pipeline"]["score"]


def test_a_correct_pipeline_plans_no_refutation_and_says_what_not_refuted_means():
    kw_on = dict(data=DATA, canary=PERSON)
    kw = dict(delta=DELTA, claimed_epsilon=CLAIM)
    plan = plan_pipeline(Pipeline(noisy_model, **kw_on), games=256, **kw)
    assert plan.games_to_refute is None and plan.score
    assert plan.refutable_below is not None and plan.refutable_below < math.inf
    assert "cannot refute claims above" in plan.summary()
    assert "'not refuted' there does not mean 'verified'" in plan.summary()
    audit = audit_pipeline(Pipeline(noisy_model, **kw_on), games=256, report=NO_PANEL, **kw)
    assert not audit.refuted


@pytest.mark.slow  # a statistical run: 40 audits of a correct pipeline (about 10,000 games)
def test_learned_scores_keep_the_audits_confidence_on_a_correct_pipeline(monkeypatch):
    """Chosen from 24 statistics on a pilot, the score never sees the audit's games: over 40
    audits of a correct pipeline (at its true epsilon), refutations stay within what 95%
    confidence allows (a binomial upper limit at 1%)."""
    monkeypatch.setattr(learned_scores, "_CACHE_SIZE", 1)
    kw_on = dict(data=DATA, canary=PERSON)
    kw = dict(delta=DELTA, claimed_epsilon=CLAIM, report=NO_PANEL)
    refuted = sum(
        bool(
            audit_pipeline(
                Pipeline(noisy_model, **kw_on), games=64, statistics=AuditOptions(seed=s), **kw
            ).refuted
        )
        for s in range(40)
    )
    assert refuted <= stats.binom.ppf(0.99, 40, 0.05)


def test_a_learned_score_is_a_plain_score():
    score = LearnedScore("lr", -1, 200, 7, 3, 1.0, 0.5)
    assert score({"lr": 0.25}, PERSON) == -0.25 and score({}, PERSON) == 0.0
    assert "minus 'lr'" in score.words and "vouches for eps 0.5" in score.words


class TwoLayer:
    """A released model of two arrays (a weight matrix over the data's features, a bias)."""

    def __init__(self, weight, bias):
        self.weight, self.bias = weight, bias

    def __call__(self, batch):
        return (np.asarray(batch, dtype=float) @ self.weight.T).sum(axis=1)

    def parameters(self):
        return [self.weight, self.bias]


def test_both_puts_its_canaries_where_the_data_do_not_move_the_weights():
    """An unused feature (0 in every row): the gradient canary on the first weight matrix's
    entry for it, and the input canary's outlier there, far above the mean row's norm."""

    def tune(data, seed, canary):
        rng = np.random.default_rng(seed)
        return {"model": TwoLayer(rng.normal(0, 1, (3, D)), np.zeros(3)), "lr": 0.1}

    person, gradient = default_canaries(tune, DATA)
    assert gradient.coordinate == D - 1  # row 0, feature D - 1
    x = np.asarray(person.x)
    assert int(np.argmax(x)) == D - 1 and x[D - 1] >= OUTLIER * np.linalg.norm(X.mean(axis=0))

    def moves_all_but_one(data, seed, canary):  # no unused feature: the least-moved coordinate
        rng = np.random.default_rng(seed)
        theta = rng.normal(0, 1, 5)
        theta[2] = 1e-9 * rng.normal()
        return {"model": Linear(theta), "lr": 0.1}

    used = (_rng.normal(0, 1, (N, 5)), np.arange(N) % 2)
    assert default_canaries(moves_all_but_one, used)[1].coordinate == 2


def test_both_finds_the_model_inside_a_release_of_every_run_and_skips_a_probe_with_none():
    """A release of every run ({"runs": [{"model", "lr"}, ...]}): the gradient canary is chosen
    in the first run's model (the zoo's release_all was refused); a probe run with K = 0 (no
    model anywhere) is skipped, and a pipeline that never releases parameters is refused by
    name."""

    def every_run(data, seed, canary):
        rng = np.random.default_rng(seed)
        k = 0 if seed == PROBE_SEED else 2  # the first probe runs no model
        runs = [{"model": TwoLayer(rng.normal(0, 1, (3, D)), np.zeros(3)), "lr": 0.1}] * k
        return {"runs": runs, "best": 0 if k else None}

    assert default_canaries(every_run, DATA)[1].coordinate == D - 1

    def nothing(data, seed, canary):
        return {"runs": [], "note": "no run"}

    with pytest.raises(ConfigError, match=r"^canary: 'both' .* found none in a dict release"):
        default_canaries(nothing, DATA)


def every_run(data, seed, canary):
    """A sweep that releases every run (a table of K records, K varying with the seed): run k
    is theta = -lr_k (g + noise), g the gradient canary's step (norm 1) when it is in, so the
    canary's coordinate moves by lr_k when it is in, against noise of scale lr_k SIGMA."""
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(int(rng.integers(1, 8))):
        lr = float(rng.choice([0.1, 1.0, 10.0]))
        grads = [np.zeros(D)]
        canary.step(grads, sample_rate=1.0, max_grad_norm=1.0)
        runs.append({"model": Linear(-lr * (grads[0] + rng.normal(0, SIGMA, D))), "lr": lr})
    return {"runs": runs, "best": 0}


def test_a_table_of_runs_is_scored_run_by_run_and_by_its_z_statistic():
    """Each record that holds a model is scored by the canary, raw and per unit of its own
    learning rate, and each statistic of a table of records has sum / sqrt(count), the z
    statistic of K shifts; a list that is not a table of records (a model's tensors) has none."""
    from auditsel import GradientCanary

    canary = GradientCanary(coordinate=D - 1)
    bound = canary.for_game(True, np.random.default_rng(0))
    release = every_run(DATA, 3, bound)
    got = statistics(release, canary)
    runs = release["runs"]
    own = [-float(r["model"].theta[D - 1]) for r in runs]  # initial 0 - theta_i
    per_lr = [s / r["lr"] for s, r in zip(own, runs)]
    assert got["runs.count"] == len(runs) > 1
    assert got["runs[*].canary score.sum"] == pytest.approx(sum(own))
    assert got["runs[*].canary score / lr.max"] == pytest.approx(max(per_lr))
    z = got["runs[*].canary score / lr.sum / sqrt(count)"]
    assert z == pytest.approx(sum(per_lr) / math.sqrt(len(runs)))
    plain = statistics({"model": [np.ones(3), np.ones(1)], "lr": 0.5}, canary)
    assert "model[*].sum" in plain and not any("sqrt(count)" in k for k in plain)


def test_the_learned_score_reads_every_run_per_unit_of_its_learning_rate():
    """Releasing every run leaks K runs: the learning pilot chooses a statistic of the runs'
    own canary scores divided by their learning rates (the raw ones mix scales 100 apart, and
    no statistic of the release outside the records reads the canary)."""
    from auditsel import GradientCanary

    one_run = GaussianBase(1 / SIGMA).epsilon(DELTA)
    kw_on = dict(data=DATA, canary=GradientCanary(coordinate=D - 1))
    kw = dict(delta=DELTA)
    plan = plan_pipeline(Pipeline(every_run, **kw_on), games=1000, claimed_epsilon=one_run, **kw)
    assert "'runs[*].canary score / lr" in plan.score


GRID = [(lr, clip) for lr in (2.0, 5.0, 10.0) for clip in (0.5, 1.0, 2.0)]
WIDTH = 12  # coordinate 0 the canary's, 2..11 its reference (only the noise moves them)


def scaled_run(data, seed, canary):
    """A DP-SGD-like run at a (learning rate, clipping norm) drawn from GRID: every move is
    lr x (the canary's C when it is in + noise C / 2), so the noise scales with lr x clip."""
    rng = np.random.default_rng(seed)
    lr, clip = GRID[int(rng.integers(len(GRID)))]
    grads = [np.zeros(WIDTH)]
    canary.step(grads, sample_rate=1.0, max_grad_norm=clip)
    theta = -lr * (grads[0] + rng.normal(0, clip / 2, WIDTH))
    return {"model": Linear(theta), "lr": lr, "clip": clip, "accuracy": float(rng.random())}


def reference_canary():
    from auditsel import GradientCanary

    return GradientCanary(coordinate=0, reference=tuple(range(2, WIDTH)))


def test_the_noise_reading_in_units_of_lr_x_clip_is_the_same_whatever_lr_and_clip():
    """The canary's noise reading and score divided by lr x clip do not change when the
    learning rate and clipping norm scale every move (the units the noise scales with)."""
    canary = reference_canary()
    moves = np.random.default_rng(0).normal(size=WIDTH)
    seen = []
    for lr, clip in GRID:
        got = statistics({"model": Linear(-lr * clip * moves), "lr": lr, "clip": clip}, canary)
        assert got["canary noise"] == pytest.approx(lr * clip * np.sqrt(np.mean(moves[2:] ** 2)))
        seen.append((got["canary noise / (lr x clip)"], got["canary score / (lr x clip)"]))
    assert np.ptp(np.array(seen), axis=0) == pytest.approx([0.0, 0.0], abs=1e-12)
    from auditsel import GradientCanary

    plain = statistics({"model": Linear(moves), "lr": 1.0}, GradientCanary(coordinate=0))
    assert not any("canary noise" in k for k in plain)  # no reference: no reading


def test_calibration_keeps_the_canary_score_in_the_units_its_noise_scales_with():
    """Of the canary score's divisions only the one whose noise reading varies least in log
    stays a candidate, and no noise column does; without a noise reading nothing is dropped,
    and where a reading is not positive in every game every division stays."""
    from auditsel.pipelines.learned_scores import _calibrated

    rng = np.random.default_rng(0)
    runs = [GRID[i] for i in rng.integers(len(GRID), size=100)]
    lr, clip = np.array(runs).T
    noise = lr * clip * np.exp(rng.normal(0, 0.05, 100))
    columns = {
        "canary score": rng.normal(size=100),
        "canary noise": noise,
        "lr": lr,
        "canary score / lr": rng.normal(size=100),
        "canary score / (lr x clip)": rng.normal(size=100),
        "canary noise / lr": noise / lr,
        "canary noise / (lr x clip)": noise / (lr * clip),
    }
    names = tuple(columns)
    table = np.stack(list(columns.values()), axis=1)
    allowed = dict(zip(names, _calibrated(names, table)))
    assert [n for n, a in allowed.items() if a] == ["lr", "canary score / (lr x clip)"]
    plain = tuple(n for n in names if "noise" not in n)
    assert _calibrated(plain, table[:, [names.index(n) for n in plain]]).all()
    table[3, names.index("canary noise")] = 0.0  # a game with no noise: raw unusable
    table[3, names.index("canary noise / lr")] = 0.0
    table[3, names.index("canary noise / (lr x clip)")] = 0.0
    allowed = dict(zip(names, _calibrated(names, table)))
    assert [n for n, a in allowed.items() if a] == [
        "canary score",
        "lr",
        "canary score / lr",
        "canary score / (lr x clip)",
    ]


def test_the_learned_score_reads_the_canary_in_the_units_of_its_noise(monkeypatch):
    """A run whose noise scales with lr x clip over a grid: the learning pilot's choice is the
    canary score per unit of lr x clip (the scale-free one), which its noise reading names, at
    every seed (ranked on 100 games alone, the choice at seed 2 is 'canary score / clip')."""
    for seed in range(4):
        monkeypatch.setattr(learned_scores, "_CACHE", {})
        plan = plan_pipeline(
            Pipeline(scaled_run, data=DATA, canary=reference_canary()),
            games=1000,
            delta=DELTA,
            claimed_epsilon=CLAIM,
            statistics=AuditOptions(seed=seed),
        )
        assert plan.score.startswith("'canary score / (lr x clip)'"), seed


def test_ties_on_the_choosing_half_go_to_the_statistic_whose_worlds_lie_furthest_apart():
    """Two statistics that both separate the half perfectly (the same eps, AUC 1): the one
    that is a constant in each world (a scaler's mean: a deterministic function of the rows)
    is chosen over the first in the family's order, whose worlds vary (a canary's loss), so
    that the held-out games, where the second may mix, do not judge a weaker choice."""
    rng = np.random.default_rng(0)
    member = (np.arange(100) % 2).astype(np.int8)
    varied = np.where(member == 1, 10.0, 0.0) + rng.normal(0, 1, 100)
    constant = np.where(member == 1, 1.0, 0.0)
    table = np.stack([varied, constant], axis=1)
    column, sign, eps = learned_scores._choose(table, member, DELTA)
    assert (column, sign) == (1, 1)
    assert eps == learned_scores._choose(table[:, :1], member, DELTA)[2] > 0  # a tie in eps
