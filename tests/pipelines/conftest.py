"""The pipeline tests draw no figures and compute no estimator panel unless a test asks.

Most pipeline tests check verdicts, messages, reports and result.json, never figures: their
audits write the outputs as write_outputs(plots=False) (`run --no-plots`) does, with no
figure drawn (about 0.4 CPU s an audit). A test that checks the figures themselves (their
files, a disk that fills while one is written) names the fixture `figures`; the figures' own
tests: tests/experiments/test_plots.py, tests/test_cli.py.

Likewise the estimator panel (`ReportOptions(panel="auto")`, the default: the panel up to
auditsel.pipelines.pipeline.PANEL_ABOVE games, 0.2 to 0.5 CPU s an audit) is computed only
where a test reads it and names the fixture `estimator_panel`; elsewhere "auto" computes none,
as `panel=False` does (the panel's own tests: tests/auditing/test_estimators.py)."""

import pytest


@pytest.fixture()
def figures() -> None:
    """The audits of this test draw their figures."""


@pytest.fixture()
def estimator_panel() -> None:
    """The audits of this test compute their estimator panel ("auto", as by default)."""


@pytest.fixture(autouse=True)
def _only_the_outputs_asked_for(request, monkeypatch):
    from auditsel.pipelines import pipeline

    if "figures" not in request.fixturenames:
        request.getfixturevalue("no_figures")
    if "estimator_panel" not in request.fixturenames:
        monkeypatch.setattr(pipeline, "PANEL_ABOVE", 0)
