"""The public API as type checkers see it: py.typed, the modules mypy checks in CI, mypy
catching misuse of the public names (tests/typing/check_public_api.py), every public function
annotated (read with `ast`), and the --strict list covering the modules that define the API."""

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from source_trees import tree as parsed

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
    tree = ast.parse(Path(auditsel.__file__).read_text())
    homes = {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
    return ["auditsel/__init__.py"] + sorted(m.replace(".", "/") + ".py" for m in homes)


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


def _private(name: str) -> bool:
    """A leading underscore that is not a dunder (`_x`, not `__init__`)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _unannotated(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    """The parameters of `fn` without an annotation (self/cls of a method excepted), and
    "return" when the return is not annotated."""
    a = fn.args
    params = [*a.posonlyargs, *a.args]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    if method and not static and params and params[0].arg in ("self", "cls", "mcs"):
        params = params[1:]
    params += a.kwonlyargs
    missing = [p.arg for p in params if p.annotation is None]
    missing += [f"*{v.arg}" for v in (a.vararg, a.kwarg) if v is not None and v.annotation is None]
    if fn.returns is None:
        missing.append("return")
    return missing


def missing_annotations(source: str) -> Iterator[tuple[int, str, list[str]]]:
    """(line, qualified name, what is missing) of every public function and method of a
    module's source (top level and public classes, nested classes too; functions defined inside
    functions are not public) with a parameter or the return not annotated."""

    def walk(body: list[ast.stmt], prefix: str, method: bool) -> Iterator[tuple]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name.startswith("_"):
                    continue
                missing = _unannotated(node, method)
                if missing:
                    yield node.lineno, prefix + node.name, missing
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                yield from walk(node.body, f"{prefix}{node.name}.", True)
            elif isinstance(node, ast.If):  # e.g. a TYPE_CHECKING or version block
                yield from walk(node.body + node.orelse, prefix, method)

    yield from walk(parsed(source).body, "", False)


def public_modules() -> list[str]:
    """Every module of auditsel and attacks whose path has no private part (`_x`)."""
    paths = sorted(
        p.relative_to(ROOT).as_posix()
        for package in ("auditsel", "attacks")
        for p in (ROOT / package).rglob("*.py")
    )
    return [
        p for p in paths if not any(_private(part.removesuffix(".py")) for part in p.split("/"))
    ]


def test_the_annotation_check_finds_what_is_missing():
    source = (
        "def f(a: int, b, *args, c: int = 1, **kw: int) -> int: ...\n"
        "def g(a: int) -> None: ...\n"
        "def h(a: int): ...\n"
        "def _private(a): ...\n"
        "class C:\n"
        "    def m(self, x) -> None: ...\n"
        "    @classmethod\n"
        "    def n(cls) -> None: ...\n"
        "    @staticmethod\n"
        "    def s(self) -> None: ...\n"
        "    def __eq__(self, other): ...\n"
        "    class D:\n"
        "        def k(self): ...\n"
        "class _E:\n"
        "    def m(self, x): ...\n"
        "def outer() -> None:\n"
        "    def inner(x): ...\n"
    )
    assert list(missing_annotations(source)) == [
        (1, "f", ["b", "*args"]),
        (3, "h", ["return"]),
        (6, "C.m", ["x"]),
        (10, "C.s", ["self"]),
        (13, "C.D.k", ["return"]),
    ]


def test_every_public_function_is_annotated():
    """Every public function and method (no leading underscore, in a module with no private
    part) of auditsel and attacks annotates each parameter but self/cls, and its return."""
    modules = public_modules()
    assert "auditsel/accounting/panel.py" in modules and "auditsel/version.py" in modules
    checked, missing = 0, []
    for path in modules:
        checked += 1
        for line, name, what in missing_annotations((ROOT / path).read_text()):
            missing.append(f"{path}:{line} {name}: {', '.join(what)}")
    assert checked >= 100, checked  # every public module (123 when this was written)
    assert not missing, f"{len(missing)} public functions not fully annotated:\n" + "\n".join(
        missing
    )


def test_the_strict_list_covers_the_api_modules():
    """Every module that defines the public API
    is in .ci/run's --strict list, which the slow test below runs."""
    left_out = [m for m in api_modules() if m not in strict_modules()]
    assert not left_out, left_out
