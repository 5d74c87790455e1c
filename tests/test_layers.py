"""The import graph has layers (docs/explanation/architecture.md) and no import runs back up."""

import ast
import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("auditsel", "attacks")
ADVERSARY_MAY_SEE = (
    "auditsel.errors",
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
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n for n in names if n.split(".")[0] in PACKAGES}
    return out


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
            hidden = sorted(t for t in targets if not matches(t, ADVERSARY_MAY_SEE))
            assert not hidden, f"{name} imports {hidden}, which an adversary does not see"


@pytest.mark.parametrize("bad, layer", [("auditsel.cli", 9), ("auditsel.accounting.panel", 3)])
def test_the_check_catches_an_upward_import(tmp_path, bad, layer):
    """The checker itself: a mechanisms module importing `bad` would be reported."""
    fake = tmp_path / "m.py"
    fake.write_text(f"def f():\n    from {bad} import something\n")
    table, known = layer_table(), modules()
    assert bad in imports(fake)
    assert layer_of(bad, table, known) == layer > layer_of("auditsel.mechanisms", table, known)
