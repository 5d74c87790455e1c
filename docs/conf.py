"""Sphinx configuration of auditsel's documentation site (MyST markdown pages).

Build it as CI does (warnings are errors):

    pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html

Every page of docs/tutorials, docs/howto, docs/explanation, docs/findings, docs/benchmarks and
docs/reference is in the site (index.md's toctrees are globs). The CLI reference is generated
from `auditsel.cli.build_parser` (sphinx-argparse), the API reference from the docstrings
(autodoc).
"""

import re
from pathlib import Path

from pygments.lexers.special import TextLexer

from auditsel.version import __version__

ROOT = Path(__file__).resolve().parents[1]

project = "auditsel"
author = "the auditsel authors"
copyright = "the auditsel authors"
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinxarg.ext",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3  # `[text](page.md#a-heading)` links resolve and are checked

# docstrings are plain prose with `code` in single backticks: render those as code
default_role = "code"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True}
# the docs extra installs no torch (nor opacus): the pages of modules that import them are
# built from mocks, with or without torch installed, so that the site is the same either way
# (`pip install -e ".[docs]"` then sphinx-build -W, as the README says and CI does)
autodoc_mock_imports = ["torch", "opacus"]

highlight_language = "text"  # code blocks without a language, docstrings' literal blocks
smartquotes = False  # option names keep their two hyphens ("--jobs", not an en dash)
html_theme = "furo"
html_title = f"auditsel {__version__}"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _text_indent(line: str) -> int:
    """Where a line's text starts (after a bullet's marker)."""
    m = re.match(r"(\s*)([*-]|\d+\.|\([a-z0-9]\))\s+", line)
    return m.end() if m else _indent(line)


def _inline(line: str) -> str:
    """Escape what rST would read as markup in plain prose, outside `code` spans: |x| (a
    substitution), a lone * (emphasis), name_ (a link target)."""
    parts = re.split(r"(``.*?``|`[^`]*`)", line)
    for i in range(0, len(parts), 2):
        text = parts[i]
        bullet = re.match(r"\s*\* ", text) if i == 0 else None
        head, text = (text[: bullet.end()], text[bullet.end() :]) if bullet else ("", text)
        text = re.sub(r"(?<!\*)\*(?!\*)", r"\\*", text.replace("|", "\\|"))
        text = re.sub(r"(\w)_(?=\W|$)", r"\1\\_", text)
        parts[i] = head + text
    return "".join(parts)


def plain_text_docstring(app, what, name, obj, options, lines):
    """The docstrings are plain text with `code` in backticks (the team's convention, readable
    in a terminal): an indented block (a formula, a layout, a table) shows as written, a list
    item's text may wrap to an aligned column, and prose characters that rST would read as
    markup are escaped."""
    out: list[str] = []
    last = ""  # the last non-blank line written
    item = None  # the text column of the list item being written, if any
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() and item is not None and _indent(line) < item:
            item = None
        deeper = line.strip() and last and _indent(line) > _text_indent(last)
        if deeper and item is not None and not last.rstrip().endswith(":"):
            line = " " * item + line.strip()  # a wrapped list item aligned to a column
        elif deeper:
            depth = _indent(line)
            block = []
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) >= depth):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            while out and not out[-1].strip():
                out.pop()
            if out[-1].rstrip().endswith("::"):
                pass  # already a literal block
            elif out[-1].rstrip().endswith(":"):
                out[-1] = out[-1].rstrip() + ":"
            else:
                out += ["", " " * _text_indent(last) + "::"]
            out += ["", *block, ""]
            last = block[-1]
            continue
        if _text_indent(line) > _indent(line):
            item = _text_indent(line)
            if out and out[-1].strip():
                out.append("")  # a list item: rST wants a blank line before it
        out.append(_inline(line))
        if line.strip():
            last = line
        i += 1
    lines[:] = out


def setup(app):
    # ```layers (the table tests/test_layers.py reads) is shown as plain text
    app.add_lexer("layers", TextLexer)
    app.connect("autodoc-process-docstring", plain_text_docstring)
