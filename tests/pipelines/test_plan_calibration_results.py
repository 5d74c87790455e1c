"""The committed calibration of the pipeline planner (benchmarks/plan_calibration.py): the table
in docs/findings/plan-calibration.md is the benchmark's table of the committed rows
(results/plan_calibration/rows.json), every row was computed with the planned range, and each
plan's range holds its E[eps_L]."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROWS = ROOT / "results" / "plan_calibration" / "rows.json"
PAGE = ROOT / "docs" / "findings" / "plan-calibration.md"


def benchmark():
    spec = importlib.util.spec_from_file_location(
        "plan_calibration", ROOT / "benchmarks" / "plan_calibration.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_shows_the_table_of_the_committed_rows():
    rows = json.loads(ROWS.read_text())
    page = PAGE.read_text()
    begin, end = "<!-- table: benchmarks/plan_calibration.py -->", "<!-- end of table -->"
    shown = page.split(begin, 1)[1].split(end, 1)[0].strip()
    assert shown == benchmark().table(rows).strip()


def test_every_row_has_its_range_and_the_range_holds_the_plan():
    rows = json.loads(ROWS.read_text())
    learned = [r for r in rows if r["score"] == "learned"]
    assert len(learned) >= 12  # issue 36: regenerated with learned scores
    for r in rows:
        assert r["low"] is not None and r["high"] is not None, r
        assert r["low"] <= r["predicted"] <= r["high"], r
        assert r["games"] > 0 and r["certified"] >= 0
