"""The checks on Opacus runs: each bug found, the correct run clean; from_opacus runs them."""

import math
import warnings

import pytest

opacus = pytest.importorskip("opacus")
torch = pytest.importorskip("torch")

from auditsel import DpsgdBase, RunObjects, check_pipeline, from_opacus
from auditsel.errors import ConfigError
from auditsel.pipelines.checks import BREAKS

ROWS, FEATURES, BATCH, NOISE, CLIP, DELTA = 64, 3, 16, 1.0, 1.0, 1e-5


def _data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(ROWS, FEATURES, generator=g)
    return torch.utils.data.TensorDataset(X, (X[:, 0] > 0).float())


def train(poisson=True, head_apart=False, clipping="flat"):
    """One Opacus run (1 epoch); `head_apart`: a head outside the private module, trained by a
    second, plain optimizer."""
    torch.manual_seed(0)
    body = torch.nn.Sequential(torch.nn.Linear(FEATURES, 4), torch.nn.Linear(4, 1))
    head = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(body.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(_data(), batch_size=BATCH, shuffle=not poisson)
    clip = [CLIP] * 4 if clipping == "per_layer" else CLIP
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = opacus.PrivacyEngine()
        body, optimizer, loader = engine.make_private(
            module=body, optimizer=optimizer, data_loader=loader, noise_multiplier=NOISE,
            max_grad_norm=clip, poisson_sampling=poisson, clipping=clipping,
        )  # fmt: skip
        model = torch.nn.ModuleDict({"body": body, "head": head}) if head_apart else body
        optimizers = [optimizer]
        if head_apart:
            optimizers.append(torch.optim.SGD(head.parameters(), lr=0.1))
        loss = torch.nn.BCEWithLogitsLoss()
        for xb, yb in loader:
            for o in optimizers:
                o.zero_grad()
            if len(xb):
                out = body(xb)
                loss((head(out) if head_apart else out).squeeze(-1), yb).backward()
            for o in optimizers:
                o.step()
    return {"model": model, "optimizers": optimizers, "data_loader": loader, "engine": engine}


@pytest.fixture(scope="module")
def correct():
    return train()


def test_the_correct_run_has_no_finding(correct):
    assert check_pipeline(RunObjects(**correct, delta=DELTA, dataset=_data())) == []
    claim = correct["engine"].get_epsilon(DELTA)
    assert check_pipeline(RunObjects(**correct, delta=DELTA, claim=claim)) == []


def test_a_shuffled_loader_breaks_the_claim():
    (finding,) = check_pipeline(RunObjects(**train(poisson=False), delta=DELTA))
    assert (finding.check, finding.severity) == ("sampling", BREAKS)
    assert finding.effect is None and "[CGKKMSZ24]" in finding.message


def test_a_head_trained_by_a_second_plain_optimizer_breaks_the_claim():
    (finding,) = check_pipeline(RunObjects(**train(head_apart=True), delta=DELTA))
    assert (finding.check, finding.severity) == ("parameters_outside_dp", BREAKS)
    assert finding.obj == "optimizers[1] (SGD)" and "head.weight" in finding.message


def test_a_noise_multiplier_other_than_the_accountant_s_breaks_the_claim(correct):
    run = dict(correct, optimizers=[_twin(correct["optimizers"][0], noise_multiplier=0.4)])
    (finding,) = check_pipeline(RunObjects(**run, delta=DELTA))
    assert (finding.check, finding.severity) == ("settings", BREAKS)
    steps = sum(n for _, _, n in correct["engine"].accountant.history)
    assert finding.effect == pytest.approx(
        DpsgdBase(0.4, steps, BATCH / ROWS, "pld").epsilon(DELTA)
    )
    # from_opacus refuses it, and says what to do (not "pass the optimizer of this engine")
    with pytest.raises(ConfigError, match="whose make_private returned this optimizer"):
        from_opacus(run["engine"], optimizer=run["optimizers"][0], data_loader=run["data_loader"],
                    delta=DELTA)  # fmt: skip


def _twin(optimizer, **changes):
    """A stand-in with the DPOptimizer's public attributes, some changed."""

    class Twin:
        pass

    twin = Twin()
    twin.param_groups = optimizer.param_groups
    twin.noise_multiplier = changes.get("noise_multiplier", optimizer.noise_multiplier)
    twin.max_grad_norm = changes.get("max_grad_norm", optimizer.max_grad_norm)
    return twin


def test_a_loader_at_another_rate_and_a_claim_for_fewer_steps_break_the_claim(correct):
    other = opacus.data_loader.DPDataLoader.from_data_loader(
        torch.utils.data.DataLoader(_data(), batch_size=32)
    )
    (finding,) = check_pipeline(RunObjects(**dict(correct, data_loader=other), delta=DELTA))
    assert (finding.check, finding.severity) == ("settings", BREAKS)
    assert "rate 0.5 " in finding.message and finding.effect > correct["engine"].get_epsilon(DELTA)
    history = correct["engine"].accountant.history
    fewer = opacus.accountants.PRVAccountant()
    fewer.history = [(NOISE, BATCH / ROWS, 1)]  # one step, where the run took four
    (claimed,) = check_pipeline(RunObjects(**correct, delta=DELTA, claim=fewer.get_epsilon(DELTA)))
    assert (claimed.obj, claimed.severity) == ("claim", BREAKS) and history[0][2] == 4
    assert claimed.effect == correct["engine"].get_epsilon(DELTA)


def test_per_layer_clipping_is_clean_until_its_noise_is_flat():
    run = train(clipping="per_layer")
    assert (
        check_pipeline(RunObjects(**run, delta=DELTA)) == []
    )  # Opacus: noise for the norm of the norms
    optimizer = run["optimizers"][0]
    optimizer.max_grad_norm = CLIP  # the noise of a flat clip at 1; 4 tensors clipped to 1 each
    (finding,) = check_pipeline(RunObjects(**run, delta=DELTA))
    assert (finding.check, finding.severity) == ("per_layer_clipping", BREAKS)
    steps = sum(n for _, _, n in run["engine"].accountant.history)
    effective = DpsgdBase(NOISE / math.sqrt(4), steps, BATCH / ROWS, "pld")
    assert finding.effect == pytest.approx(effective.epsilon(DELTA))


def test_from_opacus_reports_the_findings():
    run = train(poisson=False)
    opacus_run = from_opacus(
        run["engine"], optimizer=run["optimizers"][0], data_loader=run["data_loader"], delta=DELTA
    )
    assert [f.check for f in opacus_run.findings] == ["sampling"]
    assert any(note.startswith("breaks the claim") for note in opacus_run.notes)
    assert opacus_run.to_dict()["findings"][0]["severity"] == BREAKS
