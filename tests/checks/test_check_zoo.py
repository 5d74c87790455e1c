"""The bug zoo's pipelines under the checks: the correct ones get no finding, the bugs the
checks can read (a shuffled loader, every run released) break the claim."""

import pytest

from auditsel import DpsgdBase, Poisson, check_pipeline
from auditsel.pipelines.canaries import GradientCanary
from auditsel.pipelines.checks import BREAKS

DELTA = 1e-5


def test_the_correct_dpgd_pipeline_gets_no_finding():
    from auditsel.reproductions.bugzoo import correct_dpgd as zoo

    release = zoo.tune(zoo.TRAIN, 0, GradientCanary(coordinate=0))
    base = DpsgdBase(zoo.NOISE, zoo.STEPS, 1.0)
    claim = zoo.claim(DELTA)
    found = check_pipeline(
        dataset=zoo.TRAIN, release=release, base=base, rounds=Poisson(zoo.MEAN_RUNS),
        delta=DELTA, claim=claim,
    )  # fmt: skip
    assert found == []


def test_the_release_all_pipeline_breaks_the_claim():
    from auditsel.reproductions.bugzoo import correct_dpgd, release_all

    release = release_all.tune(release_all.TRAIN, 3, release_all.CANARY)
    assert len(release["runs"]) >= 2  # seed 3 draws several runs
    base = DpsgdBase(correct_dpgd.NOISE, correct_dpgd.STEPS, 1.0)
    (finding,) = check_pipeline(release=release, base=base, rounds=Poisson(10), delta=DELTA)
    assert (finding.check, finding.severity, finding.obj) == (
        "release_runs",
        BREAKS,
        "release['runs']",
    )
    # all runs composed: above the claim for the winner alone
    assert finding.effect > release_all.claim(DELTA)


def test_the_correct_opacus_pipeline_gets_no_finding_and_the_shuffled_one_breaks():
    pytest.importorskip("opacus")
    from auditsel.reproductions.bugzoo import correct_opacus as zoo
    from auditsel.reproductions.bugzoo import shuffled_batches

    model, engine, optimizer, loader = zoo.train(zoo.TRAIN, 0.5, zoo.CANARY)
    found = check_pipeline(
        model=model, optimizers=[optimizer], data_loader=loader, engine=engine,
        dataset=loader.dataset, delta=DELTA, claim=engine.get_epsilon(DELTA),
    )  # fmt: skip
    assert found == []
    (finding,) = check_pipeline(**shuffled_batches.pipeline_objects())
    assert (finding.check, finding.severity) == ("sampling", BREAKS)


def test_the_oversampled_class_is_found_as_duplicated_people():
    """The zoo's rare class repeated 9 times: the duplicate-rows check finds groups of 9
    (a warning, with the group-privacy epsilon: inf without a run base to compose)."""
    from auditsel.reproductions.bugzoo import oversampled_class

    found = [
        f for f in check_pipeline(**oversampled_class.pipeline_objects()) if f.check == "duplicates"
    ]
    assert found and "9" in found[0].message
