"""Every deprecated form still works in 0.2.0, warns, and names the release that removes it
(`auditsel.version.REMOVED_IN`, CHANGELOG.md's 0.2.0 Deprecated list). Another module's tests
check that each old form gives the new form's numbers; here, only the schedule."""

import re
from pathlib import Path

import numpy as np
import pytest

from auditsel.version import REMOVED_IN, __version__

ROOT = Path(__file__).resolve().parents[1]


def removal(version: str) -> str:
    return re.escape(f"auditsel {version}")


def scores() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    member = np.repeat([0, 1], 200)
    return rng.normal(size=400) + member, member


def test_the_removal_comes_after_this_release():
    current = tuple(int(p) for p in __version__.split("."))
    removed = tuple(int(p) for p in REMOVED_IN.split("."))
    assert removed > current


def test_the_threshold_rules_old_keywords_name_the_removal():
    from auditsel.auditing.lower import audit_scores

    s, m = scores()
    with pytest.warns(DeprecationWarning, match=removal(REMOVED_IN)):
        audit_scores(s, m, 1e-5, split_fraction=0.5)


def test_the_estimator_panels_old_keywords_name_the_removal():
    from auditsel.auditing.estimators import panel_options

    with pytest.warns(DeprecationWarning, match=removal(REMOVED_IN)):
        options = panel_options(None, {"grid_size": 50})
    assert options.grid_size == 50


def test_the_pipeline_functions_old_keywords_name_the_removal():
    from auditsel.pipelines.audit_options import (
        AuditOptions,
        ExecutionOptions,
        grouped_options,
        legacy_options,
    )

    with pytest.warns(DeprecationWarning, match=removal(REMOVED_IN)):
        execution = legacy_options(
            ExecutionOptions, None, {"jobs": 2}, caller="f", argument="execution"
        )
    assert execution.jobs == 2
    groups = {"statistics": (AuditOptions, None), "execution": (ExecutionOptions, None)}
    with pytest.warns(DeprecationWarning, match=removal(REMOVED_IN)) as caught:
        given = grouped_options(groups, {"jobs": 2, "seed": 3}, caller="f")
    assert len(caught) == 1  # one warning for the call
    assert given["execution"].jobs == 2 and given["statistics"].seed == 3


def test_dict_access_and_aliases_name_the_removal():
    from auditsel import GaussianBase, Poisson, panel
    from auditsel.auditing.lower import audit_scores
    from auditsel.results.result import RunResult

    p = panel(GaussianBase(mu=1.0), Poisson(mean=3), 1e-5)
    with pytest.warns(DeprecationWarning, match=removal(REMOVED_IN)):
        assert p["upper"] == dict(p.upper)
    document = {
        "name": "n",
        "delta": 1e-5,
        "base": {},
        "rounds": {},
        "upper": {},
        "upper_rigour": {},
        "version": __version__,
        "seconds": 0.0,
    }
    with pytest.warns(DeprecationWarning, match=removal(REMOVED_IN)):
        assert RunResult.from_dict(document)["name"] == "n"
    s, m = scores()
    bound = audit_scores(s, m, 1e-5, rule="split")
    for alias, name in (("eps_gdp", "gdp_fit"), ("mu_gdp", "gdp_fit_mu")):
        with pytest.warns(DeprecationWarning, match=removal(REMOVED_IN)):
            value = getattr(bound, alias)
        assert value == getattr(bound, name) or (np.isnan(value) and np.isnan(getattr(bound, name)))


def test_every_deprecation_warning_in_the_code_names_the_removal():
    """No DeprecationWarning is raised from a message that does not name REMOVED_IN: each
    warnings.warn(..., AuditselDeprecationWarning) sits in a function whose message reads
    REMOVED_IN; and each is auditsel's own class (which the test suite turns into an error)."""
    sites = []
    for path in sorted((ROOT / "auditsel").rglob("*.py")):
        text = path.read_text()
        found = re.finditer(r"warnings\.warn\((.*?)(Auditsel)?DeprecationWarning", text, flags=re.S)
        for m in found:
            message = m.group(1)
            constant = re.fullmatch(r"\s*(_[A-Z_]+),\s*", message)
            if constant:  # a module constant: read its definition
                message = text[text.index(f"{constant.group(1)} = (") :][:400]
            ok = "{REMOVED_IN}" in message and m.group(2) is not None
            sites.append((path.relative_to(ROOT).as_posix(), ok))
    assert len(sites) >= 7
    assert all(ok for _, ok in sites), [site for site, ok in sites if not ok]


def test_the_changelog_schedules_the_removal():
    text = (ROOT / "CHANGELOG.md").read_text()
    section = text[text.index(f"## [{__version__}]") :]
    section = section[: section.index("\n## [", 1)]
    deprecated = section[section.index("### Deprecated") :]
    assert f"auditsel {REMOVED_IN}" in deprecated
