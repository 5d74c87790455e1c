"""The committed results stay light: the files `git ls-files results` lists are under 3 MB
together (results/ was 97% of the git history). A sweep writes no plot per point unless asked
(`--point-plots`); plots are palette PNGs (`auditsel.results.figures`)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 3_000_000  # bytes


def tracked_results() -> list[Path]:
    """The files under results/ that git tracks (skips outside a git checkout)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not in a git checkout")
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--", "results"],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"git ls-files failed: {proc.stderr.decode(errors='replace').strip()}")
    return [ROOT / name for name in proc.stdout.decode().split("\0") if name]


def test_the_tracked_results_are_under_3_mb():
    files = tracked_results()
    assert files, "git tracks no file under results/"
    sizes = {p.relative_to(ROOT).as_posix(): p.stat().st_size for p in files if p.exists()}
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    assert total < LIMIT, f"results/ holds {total:,} bytes (limit {LIMIT:,}); largest: {largest}"


def test_no_sweep_point_folder_holds_a_plot():
    """The committed sweeps were made without --point-plots: each point holds its result.json
    and report.md, and no PNG."""
    files = tracked_results()
    sweeps = {p.parent for p in files if p.name == "sweep.json"}
    assert sweeps, "no committed sweep"
    for sweep in sweeps:
        points = [p for p in files if p.parent.parent == sweep]
        assert {p.name for p in points} == {"result.json", "report.md"}, sweep


def test_every_image_a_committed_page_shows_is_committed():
    files = tracked_results()
    tracked = set(files)
    pages = [p for p in files if p.suffix == ".md"]
    assert len(pages) > 50
    for page in pages:
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text()):
            shown = Path(os.path.normpath(page.parent / target))
            assert shown in tracked, f"{page} shows {target}, which is not committed"
