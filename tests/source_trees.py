"""Syntax trees of source texts, each text parsed once per test module.

test_layers, test_docs, test_docstrings, test_sizes and test_typing each walk every module of
auditsel and attacks; `tree(text)` parses a text the first time it is asked for and hands the
same tree to every later caller in the same test module (tests/conftest.py clears the cache
after each module). Contract: callers only read a tree, never change it (a tree is shared)."""

from __future__ import annotations

import ast
import functools

__all__ = ["tree"]


@functools.cache
def tree(text: str) -> ast.Module:
    """`ast.parse(text)`, parsed once per test module (read, never changed)."""
    return ast.parse(text)
