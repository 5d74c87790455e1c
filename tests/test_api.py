"""The public API of `auditsel/__init__.py`: names imported once and listed once in `__all__`,
what type checkers see is what users get."""

import ast
import importlib.util
from pathlib import Path

import auditsel

INIT = Path(auditsel.__file__)


def _imported() -> dict[str, str]:
    """name -> home module of each `from auditsel.x import name` in auditsel/__init__.py."""
    tree = ast.parse(INIT.read_text())
    return {
        a.asname or a.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module
        for a in node.names
    }


def _generate():
    spec = importlib.util.spec_from_file_location(
        "generate", INIT.parents[1] / "docs" / "generate.py"
    )
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    return generate


def test_all_is_exactly_the_names_imported_once():
    imported = _imported()
    assert len(auditsel.__all__) == len(set(auditsel.__all__)), "a public name listed twice"
    assert sorted(auditsel.__all__) == sorted(imported)
    assert "__getattr__" not in vars(auditsel)  # no lazy loader: every name is bound at import


def test_every_public_name_is_the_object_of_its_home_module():
    import importlib

    for name, module in _imported().items():
        assert getattr(auditsel, name) is getattr(importlib.import_module(module), name)


def test_the_api_page_is_generated_from_all():
    """docs/reference/api.md has one section per `# Title` of `__all__`, each name in order
    (what docs/generate.py writes, regenerated here and compared)."""
    generate = _generate()
    for path, text in generate.outputs().items():
        assert path.read_text() == text, f"{path} is stale: run python docs/generate.py"
    on_page = [name for _, names in generate.sections() for name, _ in names]
    assert on_page == [n for n in auditsel.__all__ if n != "__version__"]
    assert ("GaussianBase", True) in generate.sections()[0][1]  # `# members`: shown


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
