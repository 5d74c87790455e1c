"""Sizes (issue 39): no function of auditsel/ or attacks/ over 60 lines or 8 parameters outside
the numerical kernels. Lines are counted from the `def` line to the last line
(end_lineno - lineno + 1, docstring included); parameters are every name the function takes
but self/cls: positional, keyword-only, *args and **kwargs. ruff's C901, PLR0913 and PLR0915
hold the complexity, the arguments and the statements; it has no rule for lines.

What is over a limit today is listed below with its reason, in two kinds:

* a numerical kernel (a numba or torch inner loop, a branch-and-bound walk) kept whole on
  purpose: splitting it would cost speed or spread one piece of mathematics over several
  functions;
* "not yet split": a function to split (or, for a public entry point, to give an options
  object) that nobody has split yet. The list only shrinks: a listed function back within the
  limits fails the test until it is taken off the list, and any function not listed that goes
  over a limit fails it.
"""

import ast
from functools import cache
from pathlib import Path

from source_trees import tree as parsed

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 60
MAX_PARAMETERS = 8

KERNEL = "numerical kernel"
NOT_YET_SPLIT = "not yet split"

#: functions over MAX_LINES: "path::qualified name" -> (kind, reason)
LONG = {
    "auditsel/dpsgd/kernels_cpu.py::softmax_grad": (
        KERNEL,
        "the fused numba softmax-gradient kernel: one loop nest, on purpose (speed)",
    ),
    "auditsel/accounting/attack.py::compose": (
        KERNEL,
        "the FFT composition of the step labels with its enclosed error bounds (items 1 and 2 "
        "of attack's module docstring): one derivation, one function",
    ),
    "auditsel/accounting/score_search.py::ScoreSearch._dp": (
        KERNEL,
        "the dynamic program over the merged buckets' interval scores: one recursion",
    ),
}

#: functions over MAX_PARAMETERS: "path::qualified name" -> (kind, reason)
WIDE = {
    "auditsel/dpsgd/kernels_cpu.py::softmax_grad": (
        KERNEL,
        "numba takes its arrays one by one (no objects in nopython mode)",
    ),
    "auditsel/dpsgd/trainer.py::_clipped_sum": (
        KERNEL,
        "the clipped per-example gradient sum of one step: tensors one by one",
    ),
    "auditsel/auditing/threshold_search.py::search_rows": (
        KERNEL,
        "the branch-and-bound search: its rows, limits, objective and stopping rules",
    ),
    "auditsel/auditing/threshold_search.py::_Walk.__init__": (
        KERNEL,
        "the state of search_rows' walk, from its arguments",
    ),
}


#: what the lists have come down to (issue 39): an entry added to exempt a new function fails
#: `test_the_lists_only_shrink` until this is raised, in the same diff, with a reason
LONG_AT_MOST = 4
WIDE_AT_MOST = 4


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function, nested ones and methods included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if names[:1] in (["self"], ["cls"]):
        names = names[1:]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


@cache  # parsed once for the five tests
@cache
def sizes() -> dict[str, tuple[int, int]]:
    """ "path::qualified name" -> (lines, parameters) of every function of both packages
    (measured once per session; the tests only read it)."""
    out = {}
    for package in ("auditsel", "attacks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for name, node in _functions(parsed(path.read_text())):
                key = f"{rel}::{name}"
                lines = node.end_lineno - node.lineno + 1
                old = out.get(key, (0, 0))  # a name defined twice (if/else): the larger
                out[key] = (max(old[0], lines), max(old[1], _parameters(node)))
    return out


def test_the_sizes_are_measured_as_stated():
    found = sizes()
    assert len(found) > 500  # every function of both packages, nested ones and methods
    # `_fmt` of the report: its def line and one line of body
    assert found["auditsel/results/report.py::_fmt"] == (2, 2)
    # keyword-only parameters and **kwargs count, self does not
    assert found["auditsel/pipelines/pipeline.py::audit_pipeline"][1] == 7
    assert found["auditsel/pipelines/sequential.py::audit_until_refuted"][1] == 8
    assert found["auditsel/auditing/rules.py::threshold_rule"][1] == 2  # rule, **options
    assert found["auditsel/pipelines/pipeline.py::Pipeline.audit"][1] == 6


def test_the_exemptions_say_why():
    for key, (kind, reason) in {**LONG, **WIDE}.items():
        assert kind in (KERNEL, NOT_YET_SPLIT) and reason, key


def test_no_function_is_over_60_lines_unless_listed():
    long = {key: n for key, (n, _) in sizes().items() if n > MAX_LINES}
    new = {key: n for key, n in long.items() if key not in LONG}
    assert not new, f"split these functions (at most {MAX_LINES} lines): {new}"


def test_no_function_takes_over_8_parameters_unless_listed():
    wide = {key: k for key, (_, k) in sizes().items() if k > MAX_PARAMETERS}
    new = {key: k for key, k in wide.items() if key not in WIDE}
    assert not new, f"pass an options object (at most {MAX_PARAMETERS} parameters): {new}"


def test_the_lists_only_shrink():
    """A listed function that no longer exists, or is back within the limits, leaves its list."""
    found = sizes()
    gone = [key for key in {**LONG, **WIDE} if key not in found]
    assert not gone, f"no such function any more: take it off the list: {gone}"
    small = [key for key in LONG if found[key][0] <= MAX_LINES]
    small += [key for key in WIDE if found[key][1] <= MAX_PARAMETERS]
    assert not small, f"within the limits now: take it off the list: {small}"
    assert len(LONG) <= LONG_AT_MOST and len(WIDE) <= WIDE_AT_MOST, "the lists only shrink"
