"""The docstrings of the documented modules are valid reStructuredText as Sphinx reads them
(napoleon's Google style, `code` as the default role): what `sphinx-build -W` would report
about a docstring (an undefined |substitution|, a lone `*`, unexpected indentation, a list
without its blank line) fails here in seconds, without building the site."""

import ast
import copy
import functools
import inspect
import re
from pathlib import Path

import pytest
from source_trees import tree as parsed

docutils_core = pytest.importorskip("docutils.core")
napoleon = pytest.importorskip("sphinx.ext.napoleon")
from docutils import io as docutils_io
from docutils import nodes
from docutils.parsers.rst import roles

ROOT = Path(__file__).resolve().parents[1]
API_PAGES = sorted((ROOT / "docs" / "reference").glob("api*.md"))
PY_ROLES = ("exc", "class", "obj", "meth", "func", "attr", "mod", "data", "any", "py:obj")


def _literal_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    return [nodes.literal(rawtext, text)], []


for _name in PY_ROLES:  # the Python domain's roles napoleon writes (Sphinx resolves them)
    roles.register_local_role(_name, _literal_role)


def documented_files() -> list[Path]:
    names = set()
    for page in API_PAGES:
        names |= set(re.findall(r"automodule:: ([\w.]+)", page.read_text()))
    files = set()
    for name in names:
        base = ROOT.joinpath(*name.split("."))
        path = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
        files.add(path)
    return sorted(files)


def docstrings(path: Path) -> list[tuple[str, int, str]]:
    """(name, line, docstring) of the module and its public classes, functions and methods."""
    tree = parsed(path.read_text())
    found = [("<module>", 1, ast.get_docstring(tree, clean=True))]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name.startswith("_"):
                continue
            found.append((node.name, node.lineno, ast.get_docstring(node, clean=True)))
            if isinstance(node, ast.ClassDef):
                found += [
                    (f"{node.name}.{m.name}", m.lineno, ast.get_docstring(m, clean=True))
                    for m in node.body
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and not m.name.startswith("_")
                ]
    return [(n, line, d) for n, line, d in found if d]


@functools.cache
def _settings():
    """publish_doctree's settings with the overrides, built once: docutils builds its option
    parser (40% of a docstring's check) for each call given only `settings_overrides`."""
    from docutils.parsers.rst import Parser
    from docutils.readers.standalone import Reader
    from docutils.writers.null import Writer

    parser = Parser()
    pub = docutils_core.Publisher(
        Reader(parser), parser, Writer(), source_class=docutils_io.StringInput
    )
    return pub.get_settings(report_level=5, halt_level=5, warning_stream=False)


def problems(text: str) -> list[str]:
    """docutils' warnings and errors for one docstring, after napoleon's Google style."""
    config = napoleon.Config(napoleon_google_docstring=True, napoleon_numpy_docstring=False)
    rst = str(napoleon.GoogleDocstring(inspect.cleandoc(text), config))
    doctree = docutils_core.publish_doctree(
        ".. default-role:: code\n\n" + rst, settings=copy.copy(_settings())
    )
    messages = [*doctree.findall(nodes.system_message), *doctree.transform_messages]
    return [msg.astext().splitlines()[0] for msg in messages if msg["level"] >= 2]


def test_the_check_finds_what_sphinx_reports():
    """Docstrings as written in the source: the first line beside the quotes, the rest
    indented (inspect.cleandoc removes the common indent, as autodoc does)."""
    assert problems("Bracket at |x| + 1.") and problems("Views of (..., *shape).")
    assert problems("A formula\n        x = 1\n    ends here.")  # unexpected indentation
    assert not problems(
        "Bracket at `|x|` + 1, views of `(..., *shape)`, as follows::\n\n        x = 1\n\n    Done."
    )
    assert not problems("Summary.\n\n    Args:\n        x: a number.\n\n    Returns:\n        2 x.")
    assert len(documented_files()) > 50


@pytest.mark.parametrize("path", documented_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_docstrings_are_valid_restructured_text(path):
    bad = {
        f"{name} (line {line})": found
        for name, line, text in docstrings(path)
        if (found := problems(text))
    }
    assert not bad, bad
