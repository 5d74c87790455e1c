"""Syntax trees of source texts, each text parsed once per session.

test_layers, test_docs, test_docstrings and test_typing each walk every module of auditsel and
attacks; `tree(text)` parses a text the first time it is asked for and hands the same tree to
every later caller. Contract: callers only read a tree, never change it (a tree is shared)."""

from __future__ import annotations

import ast
import functools

__all__ = ["tree"]


@functools.cache
def tree(text: str) -> ast.Module:
    """`ast.parse(text)`, parsed once per session (read, never changed)."""
    return ast.parse(text)
