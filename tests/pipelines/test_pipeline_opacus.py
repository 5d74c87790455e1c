"""Canaries in real Opacus runs, and the claim of an Opacus run read by from_opacus."""

import warnings

import numpy as np
import pytest
from scipy import stats

opacus = pytest.importorskip("opacus")
torch = pytest.importorskip("torch")

from auditsel import (
    DpsgdBase,
    GradientCanary,
    InputCanary,
    Poisson,
    ReportOptions,
    audit_pipeline,
    from_opacus,
    panel,
)
from auditsel.errors import ConfigError
from auditsel.pipelines.pipeline import Pipeline

N_EXAMPLES, FEATURES, BATCH, EPOCHS, LR, CLIP = 64, 3, 16, 1, 0.5, 1.0
STEPS = EPOCHS * (N_EXAMPLES // BATCH)  # Opacus: sample rate 1 / len(loader) = 1/4


def _data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(N_EXAMPLES, FEATURES, generator=g)
    X[:, -1] = 0.0  # a padding feature: its weight gets no gradient from the data
    y = (X[:, 0] > 0).float()
    return torch.utils.data.TensorDataset(X, y)


DATA = _data()


def train(data, seed, canary, noise=0.0, accountant="prv"):
    torch.manual_seed(seed)
    model = torch.nn.Linear(FEATURES, 1)
    torch.nn.init.zeros_(model.weight), torch.nn.init.zeros_(model.bias)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = opacus.PrivacyEngine(accountant=accountant)
        model, optimizer, loader = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=noise,
            max_grad_norm=CLIP,
        )
    canary.attach(optimizer)
    loss = torch.nn.BCEWithLogitsLoss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus's backward-hook notice
        for _ in range(EPOCHS):
            for xb, yb in loader:
                optimizer.zero_grad()
                loss(model(xb).squeeze(-1), yb).backward()
                optimizer.step()
    return model, engine, optimizer, loader


def tune_without_noise(data, seed, canary):
    return train(data, seed, canary)[0]


def inclusions(release, canary):
    """The padding weight's move in units of one clipped gradient in the averaged step:
    lr * C / expected batch size (Opacus divides the noised sum by the expected batch)."""
    return canary.score(release) * (N_EXAMPLES * (1 / (N_EXAMPLES // BATCH))) / (LR * CLIP)


@pytest.mark.slow  # Opacus training runs
def test_gradient_canary_enters_the_opacus_sum_at_the_accountants_sample_rate():
    """Noise 0 and a padding coordinate: the move counts the steps that took the canary,
    each one clipped gradient added to the sum before Opacus scales it by the expected batch:
    0 out of the game, Bin(steps, 1/len(loader)) in it."""
    canary = GradientCanary(coordinate=FEATURES - 1)
    audit = audit_pipeline(
        Pipeline(tune_without_noise, inclusions, data=DATA, canary=canary),
        games=160,
        delta=1e-5,
    )
    out = audit.scores[audit.member == 0]
    inn = audit.scores[audit.member == 1]
    assert np.all(out == 0)
    counts = np.rint(inn)
    assert np.allclose(inn, counts, atol=1e-4)  # whole clipped gradients, scaled as the sum
    q = 1 / (N_EXAMPLES // BATCH)
    observed = np.bincount(counts.astype(int), minlength=STEPS + 1)
    assert len(observed) == STEPS + 1
    expected = stats.binom.pmf(np.arange(STEPS + 1), STEPS, q) * len(inn)
    merged = lambda c: np.append(c[:2], c[2:].sum())  # 0, 1, >= 2 inclusions: cells of >= 5
    assert stats.chisquare(merged(observed), merged(expected)).pvalue > 1e-3


def test_attach_is_checked_in_both_worlds_and_reads_an_explicit_rate():
    _, _, optimizer, _ = train(DATA, 0, GradientCanary(coordinate=0))
    for member in (False, True):
        canary = GradientCanary(coordinate=FEATURES + 1).for_game(member, np.random.default_rng(0))
        with pytest.raises(ConfigError, match="coordinate: must be below 4"):
            canary.attach(optimizer)
    plain = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)
    with pytest.raises(ConfigError, match="optimizer"):
        GradientCanary(coordinate=0).attach(plain)


def test_input_canary_in_an_opacus_pipeline_with_its_default_score():
    canary = InputCanary(x=[0.0, 0.0, 0.0], y=1)
    audit = audit_pipeline(
        Pipeline(tune_without_noise, data=DATA, canary=canary),
        games=40,
        delta=1e-5,
        report=ReportOptions(panel=False),
    )
    assert np.all(np.isfinite(audit.scores)) and audit.score == "InputCanary default score"


def test_from_opacus_is_opacus_own_epsilon_and_the_tuning_bounds_beside_it():
    _, engine, optimizer, loader = train(DATA, 0, GradientCanary(coordinate=0), noise=1.0)
    run = from_opacus(
        engine, optimizer=optimizer, data_loader=loader, delta=1e-5, rounds=Poisson(3)
    )
    assert run.claimed_epsilon == engine.get_epsilon(1e-5)
    assert run.base == DpsgdBase(1.0, STEPS, 1 / (N_EXAMPLES // BATCH), "pld")
    assert run.opacus_accountant == "prv"
    # PRV (Opacus) and PLD (dp_accounting): two numerical accountants of the same run
    assert run.base_epsilon == pytest.approx(run.claimed_epsilon, rel=0.05)
    expected = panel(run.base, Poisson(3), 1e-5)
    # sample rate < 1: the reduced game's heuristics sit apart, never among the bounds
    assert expected.reduced_game and set(run.reduced_game) == set(expected.reduced_game)
    assert dict(run.tuning) == {
        k: v for k, v in expected.upper.items() if k not in expected.reduced_game
    }
    rigorous = [v for k, v in expected.upper.items() if expected.labels[k] == "rigorous"]
    assert run.tuning_epsilon == min(v for v in rigorous if v is not None)
    assert run.interval is not None and run.interval.upper == run.tuning_epsilon
    assert run.interval.lower == expected.attack["epsilon"] <= run.tuning_epsilon
    assert run.tuning_epsilon > run.claimed_epsilon  # tuning costs privacy
    # before training, with the steps a run will take: the same number
    fresh = train(DATA, 0, GradientCanary(coordinate=0), noise=1.0)
    fresh_engine = opacus.PrivacyEngine()
    planned = from_opacus(
        fresh_engine, optimizer=fresh[2], data_loader=fresh[3], delta=1e-5, steps=STEPS
    )
    assert planned.claimed_epsilon == run.claimed_epsilon
    with pytest.raises(ConfigError, match="steps: the engine's accountant has recorded no step"):
        from_opacus(fresh_engine, optimizer=fresh[2], data_loader=fresh[3], delta=1e-5)


def test_from_opacus_keeps_the_rdp_accountant():
    _, engine, optimizer, loader = train(
        DATA, 0, GradientCanary(coordinate=0), noise=1.0, accountant="rdp"
    )
    run = from_opacus(engine, optimizer=optimizer, data_loader=loader, delta=1e-5)
    assert run.base.accountant == "rdp" and run.claimed_epsilon == engine.get_epsilon(1e-5)
    assert run.base_epsilon == pytest.approx(run.claimed_epsilon, rel=0.05)
    with pytest.raises(ConfigError, match="privacy_engine"):
        from_opacus(object(), optimizer=optimizer, data_loader=loader, delta=1e-5)
