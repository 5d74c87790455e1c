"""The test tree mirrors the package (tests/accounting, tests/auditing, ...; cross-cutting
tests at the top). pytest puts this folder on sys.path, so every test imports the shared
helpers as `import oracles` (and `figure_records`)."""

import os

# `auditsel run` keeps the bounds of a setting across runs (auditsel.experiments.bounds_cache);
# the tests keep nothing in the user's cache folder and compute every bound afresh (the
# cache's own tests name a temporary folder)
os.environ["AUDITSEL_CACHE_DIR"] = "off"

# a game writes its chunks once it has played 5 s (auditsel.games.engine.CHECKPOINT_AFTER, the
# default of run_game's checkpoint_after); the tests of checkpoints and resumes play short games,
# so here every chunk is written from the first, as in a long run (the default's own test sets
# it back: tests/games/test_game.py; a test that runs the CLI in a new process passes
# --checkpoint-after 0)
from auditsel.games import engine

engine.CHECKPOINT_AFTER = 0.0

# a dask scheduler that cannot be reached is refused after auditsel.executor.SCHEDULER_TIMEOUT
# (10 s); the tests name a closed port (tcp://127.0.0.1:1), refused at once, so they wait 1 s
from auditsel import executor

executor.SCHEDULER_TIMEOUT = "1s"

# tests/source_trees.py shares each module's syntax tree among the tests of one test module;
# kept for the whole session they would be ~400k objects that every later garbage collection
# walks (test_hostile's CLI runs took 60% more CPU), so they are dropped after each module
import pytest
import source_trees


@pytest.fixture(autouse=True, scope="module")
def _syntax_trees_per_module():
    yield
    source_trees.tree.cache_clear()


@pytest.fixture
def no_figures(monkeypatch):
    """For a test that checks exit codes, messages, files and result.json, never figures: none
    drawn, as write_outputs(plots=False) (`run --no-plots`) writes the outputs (the figures are
    0.4 CPU s a run; their own tests: tests/experiments/test_plots.py, tests/test_cli.py)."""
    from auditsel.results import report

    monkeypatch.setattr(report, "write_plots", lambda *args, **kwargs: [])
