"""The import graph has layers (docs/explanation/architecture.md), no import runs back up, there
are no import cycles, and an import inside a function only defers a heavy or optional dependency
(and says so in a `# deferred: why` comment)."""

import ast
import fnmatch
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest
from source_trees import tree

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("auditsel", "attacks")
ADVERSARY_MAY_SEE = (
    "auditsel.errors",
    "auditsel.roles",
    "auditsel.rounds",
    "auditsel.mechanisms",
    "auditsel.selection",
    "auditsel.dpsgd",
    "auditsel.dpsgd.*",
    "attacks",
    "attacks.*",
)


def layer_table() -> list[tuple[int, str]]:
    text = (ROOT / "docs" / "explanation" / "architecture.md").read_text()
    block = re.search(r"```layers\n(.*?)```", text, flags=re.S).group(1)
    table = []
    for line in block.splitlines():
        level, *patterns = line.split()
        table += [(int(level), p) for p in patterns]
    return table


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imports(path: Path) -> set[str]:
    """Every project module imported anywhere in the file (function-local imports included)."""
    return set(_imports(path.read_text()))


@functools.cache
def _imports(text: str) -> frozenset[str]:
    """`imports` of a file's text (each text parsed once per session: several tests walk
    every module)."""
    out = set()
    for node in ast.walk(tree(text)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n for n in names if n.split(".")[0] in PACKAGES}
    return frozenset(out)


def matches(name: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def layer_of(name: str, table, known) -> int | None:
    if name not in known:  # `from pkg import name` where name is not a module
        return None
    hits = [level for level, pattern in table if fnmatch.fnmatchcase(name, pattern)]
    return max(hits) if hits else -1


def test_every_module_has_a_layer():
    table = layer_table()
    missing = [m for m in modules() if not any(fnmatch.fnmatchcase(m, p) for _, p in table)]
    assert not missing, (
        f"add these modules to the ```layers table of docs/explanation/architecture.md: {missing}"
    )


def test_no_import_runs_up_a_layer():
    table, known = layer_table(), modules()
    upward = []
    for name, path in known.items():
        own = layer_of(name, table, known)
        for target in imports(path):
            level = layer_of(target, table, known)
            if (name, target) == ("attacks", "auditsel"):
                continue  # only to settle the import order (attacks/__init__.py says why)
            if level is not None and level > own:
                upward.append(f"{name} (layer {own}) imports {target} (layer {level})")
    assert not upward, "\n".join(upward)


def test_trainer_never_imports_the_adversary_and_the_adversary_sees_only_public_parts():
    known = modules()
    for name, path in known.items():
        targets = {t for t in imports(path) if t in known}
        if name.startswith("auditsel.dpsgd"):
            assert not any(t.split(".")[0] == "attacks" for t in targets), name
        if name.split(".")[0] == "attacks":
            if name == "attacks":
                # the package's own __init__ imports auditsel first, only to break the cycle
                # through experiments.config (test_each_adversary_module_imports_first)
                targets.discard("auditsel")
            hidden = sorted(t for t in targets if not matches(t, ADVERSARY_MAY_SEE))
            assert not hidden, f"{name} imports {hidden}, which an adversary does not see"


def test_each_adversary_module_imports_first():
    """A program whose first import is any module of `attacks` works: auditsel's package
    imports attacks.proxies (through experiments.config), a cycle that once met a half-made
    `attacks.proxies` when it was imported first. One interpreter, every module imported
    afresh (auditsel and attacks dropped from sys.modules before each; each of their files is
    compiled once, its code object executed afresh on every import)."""
    names = sorted(n for n in modules() if n.split(".")[0] == "attacks")
    script = (
        "import importlib, importlib.machinery as machinery, sys\n"
        "compiled, get_code = {}, machinery.SourceFileLoader.get_code\n"
        "def once(loader, fullname):\n"
        "    if fullname.split('.')[0] not in ('auditsel', 'attacks'):\n"
        "        return get_code(loader, fullname)\n"
        "    path = loader.get_filename(fullname)\n"
        "    if path not in compiled:\n"
        "        compiled[path] = get_code(loader, fullname)\n"
        "    return compiled[path]\n"
        "machinery.SourceFileLoader.get_code = once\n"
        f"for name in {names!r}:\n"
        "    for loaded in [m for m in sys.modules if m.split('.')[0] in ('auditsel', 'attacks')]:\n"
        "        del sys.modules[loaded]\n"
        "    importlib.import_module(name)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_routes_share_one_result_package_and_pipelines_never_import_experiments():
    """`auditsel run` (experiments) and `audit_pipeline` (pipelines) are siblings: both write
    the result document of `auditsel.results`, neither borrows from the other (issue 39)."""
    known = modules()
    borrowed = {
        name: sorted(t for t in imports(path) if t.startswith("auditsel.experiments"))
        for name, path in known.items()
        if name.startswith("auditsel.pipelines")
    }
    assert not {k: v for k, v in borrowed.items() if v}, borrowed
    results = [n for n in known if n.startswith("auditsel.results")]
    assert {"auditsel.results.fields", "auditsel.results.report"} <= set(results)
    for name in results:
        upward = [
            t
            for t in imports(known[name])
            if t.startswith(("auditsel.experiments", "auditsel.pipelines"))
        ]
        assert not upward, (name, upward)


@pytest.mark.parametrize("bad, layer", [("auditsel.cli", 10), ("auditsel.accounting.panel", 3)])
def test_the_check_catches_an_upward_import(tmp_path, bad, layer):
    """The checker itself: a mechanisms module importing `bad` would be reported."""
    fake = tmp_path / "m.py"
    fake.write_text(f"def f():\n    from {bad} import something\n")
    table, known = layer_table(), modules()
    assert bad in imports(fake)
    assert layer_of(bad, table, known) == layer > layer_of("auditsel.mechanisms", table, known)


# --- cycles and function-local imports ---------------------------------------------------------
# Third-party modules a function may import on first use instead of at the top of its module:
# optional extras and dependencies whose import is slow (seconds measured with
# `python -X importtime -c "import numpy, scipy.stats; import NAME"` on the shared 2-core machine).
HEAVY = {
    "torch": "the dpsgd extra; 1.9 s",
    "matplotlib": "plots only; 0.56 s for pyplot",
    "PIL": "plots only (matplotlib's image library, when a PNG is written)",
    "opacus": "optional extra",
    "dp_accounting": "DP-SGD pairs only; 0.19 s",
    "dask": "the dask extra",
    "distributed": "the dask extra; 0.86 s",
    "sklearn": "the dpsgd extra; 0.48 s",
    "prv_accountant": "optional extra",
    "jax": "optional extra",
    "jax_privacy": "optional extra",
    "joblib": "parallel runs only; 0.14 s",
    "yaml": "config and pipeline files only (`import auditsel` loads none); 0.09 s",
    "scipy.stats": "the estimator panel, planning and the one-run analyses only (`import auditsel` "
    "loads none); 0.8 s beyond scipy.special",
    "scipy.optimize": "calibration and the one-run games only; about a third of scipy.stats",
    "scipy.io": "SVHN's .mat files only; 0.06 s beyond scipy.special",
    "scipy.fft": "the attack's FFTs of composed runs only (DP-SGD and Laplace bases; `auditsel "
    "run` computes them in a forked process "
    "beside the game); 0.05 s with the attack's modules",
}


def is_heavy(module: str) -> bool:
    """A module of a HEAVY dependency (its name or a submodule of it)."""
    return any(module == h or module.startswith(h + ".") for h in HEAVY)


# Modules whose function-local imports load a subcommand only when it runs (`auditsel --help`).
LAZY_BY_DESIGN = ("auditsel.cli", "auditsel.cli.*")
DEFERRED = re.compile(r"#\s*deferred:\s*\S")
MAX_TOP_MODULES = 10


def _is_type_checking(node) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        getattr(test, "id", None) == "TYPE_CHECKING"
        or getattr(test, "attr", None) == "TYPE_CHECKING"
    )


def runtime_imports(path: Path) -> list[tuple[ast.stmt, bool]]:
    """Every import statement that runs (not under `if TYPE_CHECKING:`), with whether it is
    inside a function."""
    return list(_runtime_imports(path.read_text()))


@functools.cache
def _runtime_imports(text: str) -> tuple[tuple[ast.stmt, bool], ...]:
    # each source parsed once per session (by its text): `loads` walks the same modules for
    # every function-local import; the nodes are only read
    out = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                for sub in child.orelse:
                    visit_stmt(sub, in_function)
                continue
            visit_stmt(child, in_function)

    def visit_stmt(child, in_function):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            out.append((child, in_function))
        nested = in_function or isinstance(
            child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
        )
        visit(child, nested)

    visit(tree(text), False)
    return tuple(out)


def targets(node, known) -> set[str]:
    """The modules an import statement loads (project modules by full name, others by their
    full dotted name)."""
    if isinstance(node, ast.ImportFrom):
        if node.level:  # relative imports are not used in this project
            raise AssertionError(f"relative import at line {node.lineno}")
        sub = {f"{node.module}.{a.name}" for a in node.names} & set(known)
        return {node.module, *sub}
    return {a.name for a in node.names}


def is_project(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def graph(known, *, local: bool) -> dict[str, set[str]]:
    """Project module -> project modules it imports (at the top; with `local`, also in functions)."""
    edges = {}
    for name, path in known.items():
        edges[name] = {
            t
            for node, in_function in runtime_imports(path)
            if local or not in_function
            for t in targets(node, known)
            if is_project(t) and t in known and t != name
        }
    # attacks/__init__.py imports auditsel's package only to settle the import order: Python
    # runs a package's __init__ before any of its modules, so that edge never meets a half-made
    # module (test_each_adversary_module_imports_first checks the order itself)
    edges.get("attacks", set()).discard("auditsel")
    return edges


def loads(name: str, known) -> set[str]:
    """The third-party modules that importing `name` imports (through project modules too)."""
    seen, todo, third = set(), [name], set()
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        parts = mod.split(".")
        # parent packages run too, but not auditsel/__init__.py (which imports the public API):
        # a module that defers an import has run it already, it is the same for every module
        todo += [".".join(parts[:i]) for i in range(1, len(parts)) if parts[:i] != ["auditsel"]]
        if mod not in known:
            continue
        for node, in_function in runtime_imports(known[mod]):
            if not in_function:
                for t in targets(node, known):
                    (todo.append(t) if is_project(t) else third.add(t))
    return third


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def has_deferred_comment(lines: list[str], node, import_lines: set[int]) -> bool:
    """A `# deferred: why` comment on the import's own lines or just above them (comment lines,
    blank lines and the imports of the same group: one comment may cover a group of imports)."""
    if any(DEFERRED.search(line) for line in lines[node.lineno - 1 : node.end_lineno]):
        return True
    i = node.lineno - 1  # the line above, 1-based
    while i >= 1 and (
        i in import_lines or lines[i - 1].strip().startswith("#") or not lines[i - 1].strip()
    ):
        if DEFERRED.search(lines[i - 1]):
            return True
        i -= 1
    return False


def local_import_problems(name: str, path: Path, known) -> list[str]:
    """Why each function-local import of the module breaks the rule (empty if none does)."""
    lines = path.read_text().splitlines()
    found = runtime_imports(path)
    import_lines = {i for node, _ in found for i in range(node.lineno, node.end_lineno + 1)}
    problems = []
    for node, in_function in found:
        if not in_function:
            continue
        where = (
            f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{node.lineno}"
        )
        if not has_deferred_comment(lines, node, import_lines):
            problems.append(f"{where}: an import inside a function without a `# deferred:` comment")
            continue
        if matches(name, LAZY_BY_DESIGN):
            continue
        loaded = targets(node, known)
        project = [t for t in loaded if is_project(t) and t in known]
        heavy = any(is_heavy(m) for t in project for m in loads(t, known))
        if project and not heavy:
            problems.append(f"{where}: {project} load nothing heavy: import at the top")
        for target in loaded:
            if not is_project(target) and not is_heavy(target):
                problems.append(
                    f"{where}: {target} is not a heavy or optional dependency: import it at the top"
                )
    return problems


def test_no_import_cycles():
    found = cycles(graph(modules(), local=True))
    assert not found, f"import cycles (function-local imports included): {found}"


def test_imports_inside_functions_only_defer_heavy_dependencies():
    known = modules()
    problems = [p for name, path in known.items() for p in local_import_problems(name, path, known)]
    assert not problems, "\n".join(problems)


def test_few_modules_at_the_top_of_the_package():
    top = sorted(p.stem for p in (ROOT / "auditsel").glob("*.py"))
    rest = [m for m in top if m not in ("__init__", "__main__")]
    assert len(rest) <= MAX_TOP_MODULES, f"{len(rest)} modules at the top of auditsel/: {rest}"


def test_the_cycle_check_catches_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize(
    "source, problem",
    [
        ("def f():\n    from auditsel.rounds import Point\n", "without a `# deferred:`"),
        (
            "def f():\n    # deferred: speed\n    from auditsel.rounds import Point\n",
            "load nothing heavy",
        ),
        ("def f():\n    import json  # deferred: speed\n", "not a heavy or optional"),
        (
            "def f():\n    # deferred: torch\n    from auditsel.dpsgd.trainer import train_runs\n",
            None,
        ),
        ("def f():\n    import matplotlib.pyplot as plt  # deferred: plots only\n", None),
        ("from auditsel.rounds import Point\n", None),
    ],
)
def test_the_local_import_check_catches_an_unjustified_import(tmp_path, source, problem):
    fake = tmp_path / "m.py"
    fake.write_text(source)
    found = local_import_problems("auditsel.fake", fake, modules())
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0], found
