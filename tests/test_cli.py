"""`auditsel run`: outputs, the result.json contract, and every bad-input path (exit 2)."""

import importlib.abc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from auditsel.cli import main
from auditsel.experiments.config import default_config_path, load_config
from auditsel.mechanisms import FiniteOutputBase

ROOT = Path(__file__).resolve().parents[1]
#: the runs whose numbers, checkpoints or refusals are checked draw no figures (0.4 CPU s a run;
#: the figures have their own tests: test_run_draws_its_figures_without_pyplot_or_mathtext)
NO_PLOTS = "--no-plots"


def run_cli(*args, cwd=None):
    proc = subprocess.run(
        [sys.executable, "-m", "auditsel", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )
    return proc.returncode, proc.stdout, proc.stderr


def write_config(tmp_path, **changes):
    raw = yaml.safe_load(default_config_path().read_text())
    for dotted, value in changes.items():
        node = raw
        keys = dotted.split(".")
        for k in keys[:-1]:
            node = node[k]
        if value is DELETE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


DELETE = object()


def test_quickstart_writes_the_result_contract(tmp_path):
    out = tmp_path / "out"
    # the figures (privacy_curve.png among them) of the same default config:
    # test_run_draws_its_figures_without_pyplot_or_mathtext
    assert main(["run", "--out", str(out), "--trials", "20000", "--quiet", NO_PLOTS]) == 0
    result = json.loads((out / "result.json").read_text())
    assert set(result) >= {"name", "delta", "base", "rounds", "upper", "lower", "seconds"}
    assert set(result["upper"]) == {
        "generic_rdp",
        "profile",
        "improved_rdp",
        "improved_rdp_gdp",
        "exact",
    }
    assert set(result["lower"]) >= {
        "eps",
        "method",
        "gdp_fit",
        "eps_best_threshold",
        "confidence",
        "threshold_rule",
        "threshold",
        "fp",
        "fn",
        "trials",
    }
    assert result["base"]["epsilon"] == pytest.approx(1.0, abs=1e-9)  # calibrated eps_B
    # the game plays a monotone score: eps_L stays below the reduced game's exact value
    assert result["lower"]["eps"] <= result["monotone_score"]["exact"]
    assert result["upper"]["exact"] is None and result["lower"]["trials"] == 20000
    assert (out / "report.md").exists()


def test_same_seed_same_numbers_whatever_the_jobs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert (
        main(["run", "--out", str(a), "--trials", "300000", "--jobs", "1", "--quiet", NO_PLOTS])
        == 0
    )
    assert (
        main(["run", "--out", str(b), "--trials", "300000", "--jobs", "2", "--quiet", NO_PLOTS])
        == 0
    )
    ra, rb = (json.loads((d / "result.json").read_text()) for d in (a, b))
    assert ra["lower"] == rb["lower"] and ra["upper"] == rb["upper"]


def test_rerun_resumes_from_checkpoints(tmp_path):
    out = tmp_path / "out"
    assert main(["run", "--out", str(out), "--trials", "300000", "--quiet", NO_PLOTS]) == 0
    first = json.loads((out / "result.json").read_text())
    assert len(list((out / "checkpoints").glob("chunk_*.npz"))) == 2
    assert main(["run", "--out", str(out), "--trials", "300000", "--quiet", NO_PLOTS]) == 0
    assert json.loads((out / "result.json").read_text())["lower"] == first["lower"]


def test_example1_config_is_the_paper_example(tmp_path):
    spec = load_config(ROOT / "configs" / "example1.yaml")
    assert spec.base.p == pytest.approx(FiniteOutputBase.example1().p, rel=1e-15)
    assert spec.base.q == pytest.approx(FiniteOutputBase.example1().q, rel=1e-15)


@pytest.mark.slow  # reason: a run in a fresh interpreter (4 CPU s); the entry point starts in
# test_help_and_import_load_only_numpy_and_scipy and prints the table in the in-process runs below
def test_entry_point_prints_a_table(tmp_path):
    code, out, err = run_cli(
        "run", "--out", str(tmp_path / "o"), "--trials", "5000", "--no-progress"
    )
    assert code == 0, err
    assert "exact" in out and "eps_L" in out


BAD_CONFIGS = [
    ({"delta": 1.5}, "delta"),
    ({"delta": "tiny"}, "delta"),
    ({"base.kind": "cauchy"}, "base.kind"),
    ({"base.epsilon": -1}, "base.epsilon"),
    ({"base.mu": 0.5}, "base.mu"),  # both mu and epsilon
    ({"rounds.nu": 1.5}, "rounds.nu"),
    ({"rounds.eta": -2}, "rounds.eta"),
    ({"rounds.kind": "zeta"}, "rounds.kind"),
    ({"game.trials": 0}, "game.trials"),
    ({"game.trials": 1.5}, "game.trials"),
    ({"game.confidence": 1.0}, "game.confidence"),
    ({"game.threshold": "max"}, "game.threshold"),
    ({"game.proxy": "magic"}, "game.proxy"),
    ({"game.kind": "discrete"}, "game.kind"),
    ({"game.color": "red"}, "game.color"),
    ({"extra": 1}, "extra"),
    ({"name": DELETE}, "name"),
    ({"name": "a/b"}, "name"),
]


@pytest.mark.parametrize("changes, field", BAD_CONFIGS, ids=[f for _, f in BAD_CONFIGS])
def test_bad_config_one_line_exit_2_nothing_written(tmp_path, capsys, changes, field):
    path = write_config(tmp_path, **changes)
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "text, needle",
    [
        ("name: [unclosed", "not valid YAML"),
        ("", "empty"),
        ("- 1\n- 2\n", "mapping"),
        ("!!python/object/apply:os.system ['echo hacked']", "not valid YAML"),
    ],
)
def test_broken_yaml(tmp_path, capsys, text, needle):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--trials", "0"], "--trials"),
        (["run", "--trials", "many"], "--trials"),
        (["run", "--jobs", "0"], "--jobs"),
        (["run", "--seed", "-3"], "--seed"),
        (["run", "missing.yaml"], "not found"),
        (["run", "--bogus"], "unrecognized"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments(tmp_path, capsys, args, needle):
    assert main(args + ["--out", str(tmp_path / "out")] if args[0] == "run" else args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_output_directory(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["run", "--out", str(locked / "out"), "--trials", "1000"]) == 2
    assert "--out" in capsys.readouterr().err


def test_output_path_that_is_a_file(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["run", "--out", str(blocker / "out"), "--trials", "1000"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out" in err


def test_foreign_checkpoint_is_a_usage_error(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "--out", str(out), "--trials", "3000", "--quiet", NO_PLOTS]) == 0
    assert main(["run", "--out", str(out), "--trials", "3000", "--seed", "9", "--quiet"]) == 2
    assert "another experiment" in capsys.readouterr().err


#: each rule, each proxy and each game at least once by default; the whole matrix (12 runs) in
#: the slow tier
FAST_CASES = {
    ("quickstart.yaml", "sample", "split"),
    ("example1.yaml", "likelihood_ratio", "bonferroni"),
    ("quickstart.yaml", "likelihood_ratio", "bonferroni_all"),
}


@pytest.mark.parametrize(
    "config, proxy, rule",
    [
        pytest.param(*case, marks=() if case in FAST_CASES else pytest.mark.slow)
        for case in (
            (c, p, r)
            for c in ("quickstart.yaml", "example1.yaml")
            for p in ("sample", "likelihood_ratio")
            for r in ("split", "bonferroni", "bonferroni_all")
        )
    ],
)
def test_every_game_proxy_and_rule_runs_and_stays_below_exact(tmp_path, config, proxy, rule):
    raw = yaml.safe_load((ROOT / "configs" / config).read_text())
    raw["game"].update(proxy=proxy, threshold=rule, trials=40_000)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet", NO_PLOTS]) == 0
    result = json.loads((tmp_path / "o" / "result.json").read_text())
    low = result["lower"]
    assert low["threshold_rule"] == rule and low["proxy"] == proxy and low["valid"]
    exact = (result.get("monotone_score") or result.get("reduced_game"))["exact"]
    assert 0 <= low["eps"] <= exact


def test_best_is_refused_as_the_reported_rule(tmp_path, capsys):
    raw = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    raw["game"].update(threshold="best", trials=2000)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "game.threshold" in capsys.readouterr().err and not (tmp_path / "o").exists()


DPSGD = {
    "name": "dp",
    "delta": 1e-5,
    "base": {"kind": "dpsgd", "noise_multiplier": 20.0, "steps": 500, "sample_rate": 1.0},
    "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
}


def test_dpsgd_base_fills_the_whole_panel(tmp_path):
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(dict(DPSGD, game={"kind": "reduced", "trials": 20000})))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet", NO_PLOTS]) == 0
    r = json.loads((tmp_path / "o" / "result.json").read_text())
    up, mono = r["upper"], r["monotone_score"]
    assert all(mono[k] is not None for k in ("exact", "improved_rdp", "improved_rdp_gdp"))
    assert all(up[k] is not None for k in ("generic_rdp", "profile"))
    assert r["lower"]["eps"] <= mono["exact"] <= mono["improved_rdp"] <= up["generic_rdp"]
    assert r["base"]["mu"] == pytest.approx(500**0.5 / 20.0)
    # tau = 1: eq. 19 is exact, for a monotone score
    assert r["upper_rigour"]["exact"] == "monotone_score" and "monotone" in mono["assumption"]


@pytest.mark.parametrize(
    "base, field",
    [
        ({"kind": "dpsgd", "noise_multiplier": -1.0, "steps": 10}, "base.noise_multiplier"),
        ({"kind": "dpsgd", "noise_multiplier": 1.0, "steps": 0}, "base.steps"),
        ({"kind": "dpsgd", "noise_multiplier": 1.0}, "base.steps"),
        (
            {"kind": "dpsgd", "noise_multiplier": 1.0, "steps": 10, "sample_rate": 1.5},
            "base.sample_rate",
        ),
        (
            {"kind": "dpsgd", "noise_multiplier": 1.0, "steps": 10, "sample_rate": 0},
            "base.sample_rate",
        ),
        (
            {"kind": "dpsgd", "noise_multiplier": 1.0, "steps": 10, "accountant": "prv"},
            "base.accountant",
        ),
        ({"kind": "dpsgd", "steps": 10}, "base.noise_multiplier"),
        (
            {"kind": "dpsgd", "noise_multiplier": 1.0, "epsilon": 1.0, "steps": 10},
            "base.noise_multiplier",
        ),
        ({"kind": "dpsgd", "noise_multiplier": 1.0, "steps": 10, "clip": 1}, "base.clip"),
    ],
)
def test_bad_dpsgd_base(tmp_path, capsys, base, field):
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(dict(DPSGD, base=base)))
    assert main(["run", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err
    assert not (tmp_path / "o").exists()


def _last_line_printed(code: str, cwd) -> str:
    """The last line `python -c code` prints in a fresh interpreter (which must succeed)."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_help_and_import_load_only_numpy_and_scipy():
    """`import auditsel` binds every public name (NumPy and scipy.special with them), so
    `auditsel --help` (and `run --help`, `audit-scores --help`) loads them too, but never the
    optional or slow dependencies: torch, matplotlib, scikit-learn, dask, statsmodels, pandas,
    PyYAML, dp_accounting, joblib, scipy.stats, scipy.optimize."""
    heavy = [
        "statsmodels",
        "matplotlib",
        "torch",
        "dask",
        "dp_accounting",
        "joblib",
        "yaml",
        "sklearn",
        "pandas",
        "scipy.stats",
        "scipy.optimize",
    ]
    code = (
        "import sys\nfrom auditsel.cli import main\n"
        "for argv in (['--help'], ['run', '--help'], ['audit-scores', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        f"print(sorted(m for m in {heavy!r} + ['numpy', 'scipy'] if m in sys.modules))\n"
    )
    assert _last_line_printed(code, ROOT) == "['numpy', 'scipy']"


class _RefusePyplot(importlib.abc.MetaPathFinder):
    """A finder, first on sys.meta_path, that records and refuses any import of pyplot."""

    def __init__(self) -> None:
        self.tried: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib.pyplot" or name.startswith("matplotlib.pyplot."):
            self.tried.append(name)
            raise ImportError(f"{name}: refused by the test (the figures draw without pyplot)")
        return None


def test_run_draws_its_figures_without_pyplot_or_mathtext(tmp_path, monkeypatch):
    """`auditsel run` draws its three figures on matplotlib's Agg canvas without importing
    pyplot (a tenth of a second) and labels log axes without building the mathtext parser
    (a fifth of a second). In this process: pyplot hidden from sys.modules (and from
    matplotlib's attributes) and its import refused and recorded, the mathtext parser (a
    class attribute set on the first parse) reset to unbuilt; by the end of the run (its
    figures drawn) pyplot was never imported and the parser never built."""
    import matplotlib
    import matplotlib.figure  # the figures' own module: loaded, as in a run
    import matplotlib.mathtext as mt

    for name in [n for n in sys.modules if n.startswith("matplotlib.pyplot")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(matplotlib, "pyplot", raising=False)
    refuse = _RefusePyplot()
    monkeypatch.setattr(sys, "meta_path", [refuse, *sys.meta_path])
    monkeypatch.setattr(mt.MathTextParser, "_parser", None)
    argv = ["run", "--trials", "2000", "--out", str(tmp_path / "o"), "--quiet", "--no-progress"]
    assert main(argv) == 0
    assert refuse.tried == [] and "matplotlib.pyplot" not in sys.modules
    assert mt.MathTextParser._parser is None
    assert {p.name for p in (tmp_path / "o").glob("*.png")} == {
        "privacy_curve.png",
        "scores.png",
        "tradeoff.png",
    }
