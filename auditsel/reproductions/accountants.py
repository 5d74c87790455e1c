"""`auditsel reproduce accountants`: Opacus, dp_accounting, prv_accountant and the papers' claims
for DP-SGD with Poisson subsampling against the worst-case game (`game.kind: dpsgd_worst_case`;
auditsel.reproductions.accountants_table; needs the `accountants` extra). Written to results/accountants/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from auditsel.accounting.registry import ASSUMPTION
from auditsel.reproductions import REGISTRY, _write, to_markdown
from auditsel.reproductions import accountants_table as at
from auditsel.reproductions.accountant_claims import CLAIMS, Setting, claim_epsilon
from auditsel.reproductions.accountants_table import cell_rows


def rows(jobs: int = 1, out: Path | None = None) -> list[dict]:
    for name in CLAIMS:  # fail fast, before any game, when an optional library is missing
        if CLAIMS[name].package:
            claim_epsilon(name, Setting(1.0, 1, 1.0))
    return cell_rows(jobs=jobs, work_dir=None if out is None else out / "checkpoints")


def _flat(v: Any) -> Any:
    """A csv cell: a list joined by ';', a dict as JSON."""
    return ";".join(v) if isinstance(v, list) else json.dumps(v) if isinstance(v, dict) else v


def render(rows: list[dict], seconds: float, out: Path) -> Path:
    at.plot(rows, out / "accountants.png")
    lines = [
        *at.header(),
        "",
        to_markdown(at.summary_columns(rows), digits=3),
        "",
        "[XWW24]'s reduced-game values for the tuning cells (`xww24_uo`, `xww24_reduced`): "
        f"{ASSUMPTION}; heuristic for tau < 1 (mu of eq. 19). As claims for the tuning run they "
        "are marked against eps_L and the attack value like the others.",
        "",
        to_markdown(at.monotone_columns(rows), digits=3),
        "",
        "Findings (every number computed from rows.json):",
        "",
        *at.findings(rows),
        "",
        f"Computed by `auditsel reproduce accountants` in {seconds:.0f} s "
        f"(games {sum(r['game_seconds'] for r in rows):.0f} s, claims {sum(r['claim_seconds'] for r in rows):.0f} s).",
        "",
        "![claims against eps_L](accountants.png)",
    ]
    flat = [{k: _flat(v) for k, v in r.items()} for r in rows]
    document = {"versions": at.library_versions(), "rows": rows}
    return _write(out, REGISTRY["accountants"].title, lines, document, flat)
