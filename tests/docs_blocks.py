"""The python blocks of a docs page, run as the docs convention says (docs/ pages, team rules):
in order, in one namespace, in a temporary directory; a block whose first line is
`# requires: MODULE` is skipped when MODULE is missing, one starting `# not run:` always."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def blocks(page: str, lang: str = "python") -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (ROOT / page).read_text(), flags=re.S)


def runnable(block: str) -> bool:
    first = block.splitlines()[0] if block.strip() else ""
    if first.startswith("# not run:"):
        return False
    if first.startswith("# requires:"):
        return all(importlib.util.find_spec(m.strip()) for m in first.split(":", 1)[1].split(","))
    return True


def run_page(page: str, replace: dict[str, str] | None = None) -> dict:
    """Execute the page's runnable python blocks; `replace` edits the code first (each key must
    occur exactly once in the page). Returns the namespace."""
    code = blocks(page)
    for old, new in (replace or {}).items():
        assert sum(b.count(old) for b in code) == 1, f"{old!r} must occur once in {page}"
        code = [b.replace(old, new) for b in code]
    namespace = {"__name__": f"docs_{Path(page).stem.replace('-', '_')}"}
    for block in code:
        if runnable(block):
            exec(compile(block, page, "exec"), namespace)
    return namespace


def module_source(page: str, marker: str) -> str:
    """The blocks whose second line names `marker` (e.g. "tuning.py"), joined: the module a
    page tells its reader to save."""
    return "\n".join(b for b in blocks(page) if marker in (b.splitlines()[1:2] or [""])[0])
