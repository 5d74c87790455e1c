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


def test_every_public_name_resolves_to_the_object_of_its_module():
    import importlib

    for name, module in auditsel._WHERE.items():
        assert getattr(auditsel, name) is getattr(importlib.import_module(module), name)
