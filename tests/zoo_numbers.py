"""The bug zoo's numbers (`auditsel.reproductions.bugzoo`), each computed once per session.

A zoo module's claim and correct interval at the zoo's delta are numbers of the module's
constants that tests/reproductions/test_bugzoo.py, test_bugzoo_pipelines.py and test_results.py
each read (an Opacus pipeline's is a second of accounting). Contract: `claim(name)` is
`bugzoo.module(name).claim(bugzoo.DELTA)` and `correct_interval(name)` is
`bugzoo.module(name).correct_interval(bugzoo.DELTA)`, the same values, computed on the first
call and handed back after (a test that patches a module's accounting calls it directly)."""

from __future__ import annotations

import functools

from auditsel.reproductions import bugzoo

__all__ = ["claim", "correct_interval"]


@functools.cache
def claim(name: str) -> float:
    """`bugzoo.module(name).claim(bugzoo.DELTA)`, computed once per session."""
    return bugzoo.module(name).claim(bugzoo.DELTA)


@functools.cache
def correct_interval(name: str) -> tuple:
    """`bugzoo.module(name).correct_interval(bugzoo.DELTA)`, computed once per session."""
    return bugzoo.module(name).correct_interval(bugzoo.DELTA)
