"""auditsel 0.3.0 removed the deprecated forms of 0.2.0 (CHANGELOG.md's 0.2.0 Deprecated list):
each old keyword is refused as any unknown keyword is (a TypeError naming it), each old key
and alias is gone, and no deprecation machinery is left in the package."""

import re
from pathlib import Path

import numpy as np
import pytest

from auditsel.version import __version__

ROOT = Path(__file__).resolve().parents[1]


def scores() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    member = np.repeat([0, 1], 200)
    return rng.normal(size=400) + member, member


def test_this_release_is_past_the_removal():
    assert tuple(int(p) for p in __version__.split(".")) >= (0, 3, 0)


def test_the_old_keywords_are_refused_naming_them():
    from auditsel.auditing.estimators import estimator_panel
    from auditsel.auditing.lower import apply_rule, audit_scores
    from auditsel.auditing.sorted_scores import SortedScores

    s, m = scores()
    calls = {
        "split_fraction": lambda: audit_scores(s, m, 1e-5, split_fraction=0.5),
        "seed": lambda: apply_rule(SortedScores(s, m), "split", 0.05, 1e-5, seed=1),  # type: ignore[call-arg]
        "grid_size": lambda: estimator_panel(s, m, 1e-5, grid_size=50),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=rf"unexpected keyword argument '{name}'"):
            call()


def test_the_old_aliases_and_dict_access_are_gone():
    from auditsel import GaussianBase, Poisson, panel
    from auditsel.auditing.lower import audit_scores
    from auditsel.results.result import RunResult

    with pytest.raises(TypeError, match="not subscriptable"):
        panel(GaussianBase(mu=1.0), Poisson(mean=3), 1e-5)["upper"]
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
    with pytest.raises(TypeError, match="not subscriptable"):
        RunResult.from_dict(document)["name"]  # type: ignore[index]
    bound = audit_scores(*scores(), 1e-5, rule="split")
    for alias in ("eps_gdp", "mu_gdp"):
        assert not hasattr(bound, alias) and alias not in bound.to_dict()


def test_no_deprecation_machinery_is_left():
    """No warnings.warn(..., DeprecationWarning) and no removal schedule in the package: a
    future deprecation starts again from a design, not from a leftover."""
    import auditsel.errors
    import auditsel.version

    assert not hasattr(auditsel.version, "REMOVED_IN")
    assert not hasattr(auditsel.errors, "AuditselDeprecationWarning")
    for path in sorted((ROOT / "auditsel").rglob("*.py")):
        text = path.read_text()
        assert not re.search(r"DeprecationWarning|REMOVED_IN", text), path
