"""The pipeline tests draw no figures unless a test asks for them.

Most pipeline tests check verdicts, messages, reports and result.json, never figures: their
audits write the outputs as write_outputs(plots=False) (`run --no-plots`) does, with no
figure drawn (about 0.4 CPU s an audit). A test that checks the figures themselves (their
files, a disk that fills while one is written) names the fixture `figures`; the figures' own
tests: tests/experiments/test_plots.py, tests/test_cli.py."""

import pytest


@pytest.fixture()
def figures() -> None:
    """The audits of this test draw their figures."""


@pytest.fixture(autouse=True)
def _no_figures(request, monkeypatch):
    if "figures" in request.fixturenames:
        return
    from auditsel.results import report

    monkeypatch.setattr(report, "write_plots", lambda *args, **kwargs: [])
