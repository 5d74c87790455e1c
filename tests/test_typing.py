"""The public API as type checkers see it: py.typed, the modules mypy checks in CI, and mypy
catching misuse of the public names (tests/typing/check_public_api.py)."""

import re
from pathlib import Path

import pytest

import auditsel
from attacks.proxies import make_proxy
from auditsel import DpsgdBase, FiniteOutputBase, GaussianBase, Poisson, winner_law
from auditsel.roles import GameProtocol, MechanismPair, Proxy, Winner

ROOT = Path(__file__).resolve().parents[1]


def mypy_config() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r"\n\[tool\.mypy\]\n(.*?)\n\[\[", text, flags=re.S).group(1)


def mypy_files() -> list[str]:
    block = re.search(r"\nfiles = \[(.*?)\]", mypy_config(), flags=re.S).group(1)
    return re.findall(r'"([^"]+)"', block)


def test_the_packages_say_they_are_typed():
    for package in ("auditsel", "attacks"):
        assert (ROOT / package / "py.typed").exists()
    text = (ROOT / "pyproject.toml").read_text()
    assert '"py.typed"' in text.split("[tool.setuptools.package-data]")[1].split("\n[")[0]


def test_mypy_checks_both_packages_whole_and_the_typing_examples():
    """`mypy` (no arguments) reads both packages as folders: every module, none left out."""
    assert set(mypy_files()) == {"auditsel", "attacks", "tests/typing/*.py"}
    config = (ROOT / "pyproject.toml").read_text().split("[tool.mypy]")[1]
    assert "exclude" not in config and "ignore_errors" not in config
    overrides = re.findall(r"module = \[(.*?)\]", config, flags=re.S)
    ours = [m for block in overrides for m in re.findall(r'"([^"]+)"', block)]
    assert not [m for m in ours if m.split(".")[0] in ("auditsel", "attacks")], ours


def api_modules() -> list[str]:
    """The modules that define the public API: auditsel/__init__.py and its names' homes."""
    return ["auditsel/__init__.py"] + sorted(
        m.replace(".", "/") + ".py" for m in auditsel._PUBLIC if not m.endswith("__init__")
    )


def test_the_package_objects_play_their_roles():
    pairs = [
        GaussianBase(mu=1.0),
        FiniteOutputBase(p=(0.5, 0.5), q=(0.4, 0.6)),
        DpsgdBase(noise_multiplier=1.0, steps=10, sample_rate=0.1),
    ]
    assert all(isinstance(p, MechanismPair) for p in pairs)
    winner = winner_law(pairs[0], Poisson(mean=3.0))
    assert isinstance(winner, Winner) and isinstance(winner, GameProtocol)
    assert isinstance(make_proxy("likelihood_ratio", winner), Proxy)
    assert not isinstance(Poisson(mean=3.0), MechanismPair)


@pytest.mark.slow  # runs mypy (5 CPU s); CI's `mypy` stage checks tests/typing with warn_unused_ignores by default
def test_mypy_rejects_wrong_types_and_unknown_keywords(tmp_path):
    """`GaussianBase(mu="x", nope=1)` is two errors for mypy (it was `Any` behind the lazy
    loader); the run uses the project's config and cache (fast after CI's mypy stage)."""
    api = pytest.importorskip("mypy.api")
    snippet = ROOT / "tests" / "typing" / f"_snippet_{tmp_path.name}.py"
    snippet.write_text(
        "from auditsel import GaussianBase, Poisson\n"
        'GaussianBase(mu="x", nope=1)\n'
        "Poisson(mean=10.0)\n"
        "Poisson(mean_=10.0)\n"
    )
    try:
        out, _, status = api.run(
            ["--config-file", str(ROOT / "pyproject.toml"), "--follow-imports=silent", str(snippet)]
        )
    finally:
        snippet.unlink()
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1
    assert any(":2: error:" in e and "[arg-type]" in e and '"str"' in e for e in errors), out
    assert any(":2: error:" in e and '"nope"' in e for e in errors), out
    assert any(":4: error:" in e and '"mean_"' in e for e in errors), out
    assert not any(":3: error:" in e for e in errors), out


def strict_modules() -> list[str]:
    """The modules .ci/run checks with `mypy --strict` (the list only grows)."""
    text = (ROOT / ".ci" / "run").read_text()
    line = re.search(r"mypy --strict --follow-imports=silent (.*?)\n(?!\s)", text, flags=re.S)
    return line.group(1).replace("\\", " ").split()


def test_the_strict_list_names_api_modules_that_exist():
    strict = strict_modules()
    assert "auditsel/__init__.py" in strict
    for path in strict:
        assert (ROOT / path).exists(), path
    assert set(api_modules()) & set(strict) >= {"auditsel/__init__.py", "auditsel/errors.py"}


@pytest.mark.slow  # a whole mypy --strict run (CI's mypy stage runs it too)
def test_the_strict_modules_are_clean_under_strict():
    api = pytest.importorskip("mypy.api")
    out, _, status = api.run(["--strict", "--follow-imports=silent", *strict_modules()])
    assert status == 0, out
