"""The checks before games on every bug-zoo pipeline: `auditsel reproduce bugzoo-checks`.

For each pipeline of `PIPELINES`, in order, what `auditsel check
auditsel.reproductions.bugzoo.NAME:pipeline_objects` does: build one seeded run's objects
(`pipeline_objects()`: `objects_s` seconds) and run `auditsel.check_pipeline` on them (`checks_s`
seconds, what `auditsel check` prints). A row holds the findings (check and severity, "breaks"
first), the verdict ("breaks the claim", "warning" or "no finding") and what is expected
(`EXPECTED`; "-" for the bugs no check reads). Written to results/bugzoo-checks/ (table.md,
table.csv, rows.json); docs/generate.py copies the table into docs/howto/check-your-pipeline.md.
The seconds are wall-clock on the machine that ran it; the findings are deterministic.
"""

from __future__ import annotations

import os
import platform
import time
import warnings
from pathlib import Path
from typing import Any

from auditsel.pipelines.checks import RunObjects, check_pipeline
from auditsel.reproductions import _write, to_markdown
from auditsel.reproductions.bugzoo import PIPELINES, module

TITLE = "The checks before games on the bug zoo: findings and seconds per pipeline"
NONE, BREAKS_CLAIM, WARNS = "no finding", "breaks the claim", "warning"
#: issue 38: the correct pipelines get no finding; the bugs of the kinds the checks read break it
#: (noise_for_mean is not in issue 38's list: the privatizer probe reads it)
_BREAKING = (
    "shuffled_batches second_optimizer_head scaler_in_model oversampled_class per_tensor_clip "
    "release_all leaderboard noise_for_mean"
)
EXPECTED: dict[str, str] = {
    **dict.fromkeys(("correct_dpgd", "correct_opacus", "correct_opacus_mlp"), NONE),
    **dict.fromkeys(_BREAKING.split(), BREAKS_CLAIM),
}


def verdict(findings: list[Any]) -> str:
    """What `auditsel check` says of a pipeline: "breaks the claim" (exit 3) when a finding
    does, "warning" when only warnings, "no finding" otherwise."""
    severities = {f.severity for f in findings}
    return BREAKS_CLAIM if "breaks" in severities else WARNS if severities else NONE


def row(name: str) -> dict[str, Any]:
    """One pipeline's row (module docstring): the objects `auditsel check
    auditsel.reproductions.bugzoo.NAME:pipeline_objects` reads, checked as it checks them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus's notices
        start = time.perf_counter()
        objects = module(name).pipeline_objects()
        built = time.perf_counter()
        findings = check_pipeline(RunObjects(**objects))
        done = time.perf_counter()
    return {
        "pipeline": name,
        "findings": "; ".join(f"{f.check} ({f.severity})" for f in findings) or "-",
        "verdict": verdict(findings),
        "expected": EXPECTED.get(name, "-"),
        "checks_s": round(done - built, 2),
        "objects_s": round(built - start, 2),
    }


def rows(names: tuple[str, ...] = PIPELINES) -> list[dict[str, Any]]:
    """Every pipeline's row, in the zoo's order."""
    return [row(name) for name in names]


def render(found: list[dict[str, Any]], seconds: float, out: Path) -> Path:
    """table.md (the table, the command, where it ran), table.csv and rows.json under out."""
    where = f"{platform.machine()}, {os.cpu_count()} CPU(s), Python {platform.python_version()}"
    lines = [
        to_markdown(found, digits=2),
        "",
        f"Computed by `auditsel reproduce bugzoo-checks` in {seconds:.1f} s ({where}). "
        "checks_s: `check_pipeline` on the objects (what `auditsel check` prints); objects_s: "
        "`pipeline_objects()`, the pipeline's own seeded training run.",
    ]
    out.mkdir(parents=True, exist_ok=True)
    return _write(out, TITLE, lines, found, found)
