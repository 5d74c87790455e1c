"""What a run pays whatever its number of games (issue 29): the bounds and the attack cached per
setting (identical values, a fresh copy each call), and `--no-plots` (no figure, no matplotlib,
the same numbers)."""

from __future__ import annotations

import json
import subprocess
import sys

from auditsel.cli import main
from auditsel.experiments import experiment
from auditsel.experiments.config import default_config_path, load_config
from auditsel.experiments.experiment import upper_fields, upper_panel


def test_upper_panel_is_cached_per_setting_and_each_call_gets_its_own_copy():
    spec = load_config(default_config_path())
    experiment._UPPER.clear()
    fresh = upper_panel(spec.base, spec.rounds, spec.delta)
    assert len(experiment._UPPER) == 1
    cached = upper_panel(spec.base, spec.rounds, spec.delta)
    assert len(experiment._UPPER) == 1  # served from the cache
    as_json = lambda value: json.dumps(upper_fields(spec.base, spec.rounds, *value))
    assert as_json(cached) == as_json(fresh)
    assert cached[0] is not fresh[0] and cached[1][0] is not fresh[1][0]
    cached[0].upper.clear()  # a caller changing its copy changes nobody else's
    assert as_json(upper_panel(spec.base, spec.rounds, spec.delta)) == as_json(fresh)
    other = upper_panel(spec.base, spec.rounds, 1e-6)  # another setting: computed, not reused
    assert len(experiment._UPPER) == 2 and other[0].upper != fresh[0].upper


def test_no_plots_writes_the_same_numbers_without_figures(tmp_path, capsys):
    argv = ["run", "--trials", "4000", "--quiet", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    assert main([*argv, "--out", str(tmp_path / "b"), "--no-plots"]) == 0
    with_plots = sorted(p.name for p in (tmp_path / "a").glob("*.png"))
    assert with_plots and not list((tmp_path / "b").glob("*.png"))
    assert "![" not in (tmp_path / "b" / "report.md").read_text()
    a, b = (json.loads((tmp_path / d / "result.json").read_text()) for d in "ab")
    for key in ("upper", "lower", "interval", "attack"):
        assert a[key] == b[key], key


def test_no_plots_never_imports_matplotlib(tmp_path):
    code = (
        "import sys; from auditsel.cli import main; "
        f"rc = main(['run', '--trials', '2000', '--quiet', '--no-progress', '--no-plots', "
        f"'--out', {str(tmp_path / 'o')!r}]); "
        "print(rc, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "False"], out.stderr
