"""Sphinx configuration of auditsel's documentation site (MyST markdown pages).

Build it as CI does (warnings are errors):

    pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html

Every page of docs/tutorials, docs/howto, docs/explanation, docs/findings, docs/benchmarks and
docs/reference is in the site (index.md's toctrees are globs). The CLI reference is generated
from `auditsel.cli.build_parser` (sphinx-argparse), the API reference from the docstrings
(autodoc).
"""

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
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinxarg.ext",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3  # `[text](page.md#a-heading)` links resolve and are checked

# docstrings are reStructuredText in Google style (Args:, Returns:, Raises:; napoleon reads
# them), with `code` in single backticks: render those as code
default_role = "code"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False  # the return type stays in the signature (autodoc_typehints)
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True}
# the docs extra installs no torch (nor opacus): the pages of modules that import them are
# built from mocks, with or without torch installed, so that the site is the same either way
# (`pip install -e ".[docs]"` then sphinx-build -W, as the README says and CI does)
autodoc_mock_imports = ["torch", "opacus"]
# a public name is documented twice, at its home module and re-exported by `auditsel` (the API
# page): where a signature's annotation stays a plain string (a module that imports torch, built
# from mocks, cannot resolve its hints), Sphinx finds both targets. Both are the same object, so
# the ambiguity is harmless; other reference warnings stay errors under -W.
suppress_warnings = ["ref.python"]

highlight_language = "text"  # code blocks without a language, docstrings' literal blocks
smartquotes = False  # option names keep their two hyphens ("--jobs", not an en dash)
html_theme = "furo"
html_title = f"auditsel {__version__}"


def setup(app):
    # ```layers (the table tests/test_layers.py reads) is shown as plain text
    app.add_lexer("layers", TextLexer)
