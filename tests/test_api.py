"""The public API of `auditsel/__init__.py`: what type checkers see is what users get."""

import ast
from pathlib import Path

import auditsel

INIT = Path(auditsel.__file__)


def _type_checking_imports() -> dict[str, str]:
    tree = ast.parse(INIT.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                out.update({a.name: imp.module for a in imp.names})
    return out


def test_type_checkers_see_exactly_the_lazy_names():
    eager = _type_checking_imports()
    assert eager == auditsel._WHERE
    assert sorted(auditsel.__all__) == sorted(["__version__", *eager])


def test_the_derived_files_are_generated_from_the_one_table():
    """The TYPE_CHECKING block and docs/reference/api.md are what docs/generate.py writes from
    `auditsel._SECTIONS` (regenerated here and compared)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "generate", INIT.parents[1] / "docs" / "generate.py"
    )
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    for path, text in generate.outputs().items():
        assert path.read_text() == text, f"{path} is stale: run python docs/generate.py"
    names = [
        n.rstrip("*") for _, homes in auditsel._SECTIONS for _, ns in homes for n in ns.split()
    ]
    assert len(names) == len(set(names)), "a public name is declared twice"
    assert auditsel.__all__ == ["__version__", *names]
    assert all(
        f"\n        {name}" in auditsel.__doc__ or f", {name}" in auditsel.__doc__ for name in names
    )


def test_every_public_name_resolves_to_the_object_of_its_module():
    import importlib

    for name, module in auditsel._WHERE.items():
        assert getattr(auditsel, name) is getattr(importlib.import_module(module), name)


def test_run_config_returns_a_frozen_result_read_by_attribute():
    import dataclasses
    import json

    import pytest

    config = {
        "name": "api",
        "delta": 1e-5,
        "base": {"kind": "gaussian", "mu": 1.0},
        "rounds": {"kind": "poisson", "mean": 3},
        "game": {"trials": 2_000, "seed": 1},
    }
    result = auditsel.run_config(config)
    assert isinstance(result, auditsel.RunResult)
    doc = result.to_dict()
    json.dumps(doc, allow_nan=False)  # the result.json document
    # the reduced game's exact value assumes a monotone score: under monotone_score, not upper
    assert result.eps_lower == doc["lower"]["eps"]
    assert result.eps_exact == doc["monotone_score"]["exact"] and doc["upper"]["exact"] is None
    assert result.monotone_score == doc["monotone_score"]
    assert result.upper == doc["upper"] and result.rounds["mean"] == 3.0
    assert result.eps_lower <= result.eps_exact  # the game plays a monotone score
    # the interval for any score: [the attack value, the tightest rigorous bound]
    assert result.interval == doc["interval"] and result.attack == doc["attack"]
    assert result.interval["lower"] == result.attack["epsilon"] >= result.eps_exact - 1e-9
    assert result.interval["upper"] == min(v for v in result.upper.values() if v is not None)
    assert result.reduced_game is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.lower = None  # type: ignore[misc]
    doc["monotone_score"]["exact"] = -1.0  # a copy: the result does not change
    assert result.eps_exact > 0
    with pytest.raises(TypeError, match="not subscriptable"):
        result["lower"]  # the dict access of 0.2 is gone: read the attributes or to_dict()


def test_errors_name_the_python_argument_and_the_config_adds_its_path():
    import pytest

    from auditsel import ConfigError, FinitePmf, Poisson, exact_epsilon, law_from_dict, winner_law

    cases = [
        (lambda: Poisson(mean=0), "mean"),
        (lambda: law_from_dict({"kind": "poisson", "mean": 0}), "rounds.mean"),
        (lambda: FinitePmf({2: 0.5}), "table"),  # the argument; `pmf` is the config's name
        (lambda: law_from_dict({"kind": "pmf", "pmf": {2: 0.5}}), "rounds.pmf"),
        (lambda: FinitePmf({2: 1.5, 1: -0.5}), "table[2]"),
        (lambda: law_from_dict({"kind": "pmf", "pmf": {2: 1.5, 1: -0.5}}), "rounds.pmf[2]"),
        (
            lambda: exact_epsilon(winner_law(auditsel.GaussianBase(mu=1.0), Poisson(2.0)), 1.5),
            "delta",
        ),
    ]
    for make, field in cases:
        with pytest.raises(ConfigError) as err:
            make()
        assert err.value.field == field, (field, str(err.value))


def test_options_are_keyword_only():
    import inspect

    for name, first_option in [
        ("audit_scores", "confidence"),
        ("exact_epsilon", "tol"),
        ("privacy_curve", "scans"),
        ("panel", "curve_deltas"),
        ("attack", "method"),
        ("tuning_interval", "eps_l"),
        ("law_from_dict", "path"),
        ("run_config", "jobs"),
        ("audit_protocol", "delta"),
        ("assert_not_refuted", "trials"),
    ]:
        params = inspect.signature(getattr(auditsel, name)).parameters
        assert params[first_option].kind is inspect.Parameter.KEYWORD_ONLY, name
