"""Every module the docs name exists: a path such as `auditsel/auditing/lower.py` (or a glob,
`auditsel/dpsgd/kernels*.py`) in README.md or a page under docs/, and every dotted name in
backticks such as `auditsel.accounting.registry` or `auditsel.pipelines.pipeline.audit_pipeline`
(its longest prefix that is a module exists, and the rest names something that module
defines or imports). Modules were renamed (no two share a basename); a page naming the old
module fails here."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts),
]
PATH = re.compile(r"(?<![\w./-])((?:auditsel|attacks|tests|benchmarks)/[\w/*.-]*?\.py)\b")
DOTTED = re.compile(r"`((?:auditsel|attacks)(?:\.\w+)+)")


def module_file(dotted: list[str]) -> Path | None:
    """The file of module `a.b.c` (a package's __init__.py), or None."""
    base = ROOT.joinpath(*dotted)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def named_paths() -> list[tuple[str, str]]:
    return [
        (page.relative_to(ROOT).as_posix(), m.group(1))
        for page in PAGES
        for m in PATH.finditer(page.read_text())
    ]


def named_modules() -> list[tuple[str, str]]:
    return [
        (page.relative_to(ROOT).as_posix(), m.group(1))
        for page in PAGES
        for m in DOTTED.finditer(page.read_text())
    ]


def test_the_pages_name_paths_and_modules():
    assert len(named_paths()) >= 5 and len(named_modules()) >= 100
    assert ("docs/explanation/architecture.md", "auditsel/dpsgd/kernels*.py") in named_paths()


def missing_paths(paths: list[str]) -> list[str]:
    return [path for path in paths if not list(ROOT.glob(path))]


def missing_modules(names: list[str]) -> list[str]:
    """The dotted names whose module, or whose attribute in the longest module, is not there."""
    missing = []
    for name in names:
        parts = name.split(".")
        cut = next((k for k in range(len(parts), 0, -1) if module_file(parts[:k])), 0)
        if cut == 0:
            missing.append(name)
        elif cut < len(parts):  # the rest is an attribute: defined or imported in that module
            source = module_file(parts[:cut]).read_text()
            if not re.search(rf"\b{re.escape(parts[cut])}\b", source):
                missing.append(name)
    return missing


PAGE_NAMES = [p.relative_to(ROOT).as_posix() for p in PAGES]


@pytest.mark.parametrize("page", PAGE_NAMES)
def test_every_path_a_page_names_exists(page):
    missing = missing_paths([path for where, path in named_paths() if where == page])
    assert not missing, f"{page} names files that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGE_NAMES)
def test_every_module_a_page_names_exists(page):
    missing = missing_modules([name for where, name in named_modules() if where == page])
    assert not missing, f"{page} names modules or attributes that do not exist: {missing}"


def test_a_stale_name_is_caught():
    """The checks themselves: modules renamed last session (accounting/bounds.py is now
    registry.py, protocols.py roles.py) fail; their new names and attributes pass."""
    assert missing_paths(["auditsel/accounting/bounds.py", "auditsel/accounting/registry.py"]) == [
        "auditsel/accounting/bounds.py"
    ]
    assert missing_modules(
        [
            "auditsel.accounting.bounds",
            "auditsel.protocols.GameProtocol",
            "auditsel.accounting.registry.BOUNDS",
            "auditsel.roles.GameProtocol",
            "auditsel.roles.NoSuchRole",
        ]
    ) == [
        "auditsel.accounting.bounds",
        "auditsel.protocols.GameProtocol",
        "auditsel.roles.NoSuchRole",
    ]
