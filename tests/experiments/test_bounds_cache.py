"""The bounds kept across runs (auditsel.experiments.bounds_cache): read back only by the code,
libraries and vector unit that computed them, for the same setting, equal to the last bit to what is
computed afresh; a broken or unwritable cache is computed around, never an error."""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import auditsel.experiments.bounds_cache as bc
import auditsel.experiments.experiment as ex
from auditsel.experiments.config import parse_config
from auditsel.results import fields

ROOT = Path(__file__).resolve().parents[2]

SPEC = {
    "name": "cache",
    "delta": 1e-5,
    "base": {"kind": "gaussian", "mu": 0.5},
    "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.01},
    "game": {"kind": "reduced", "trials": 2000, "seed": 0},
}


def test_a_value_is_computed_once_then_read_back(tmp_path):
    calls = []
    compute = lambda: calls.append(1) or {"eps": 0.1 + 0.2, "curve": [1e-300, 5e-324]}
    first = bc.cached(("setting", 0.5), compute, tmp_path)
    second = bc.cached(("setting", 0.5), compute, tmp_path)
    assert first == second and second["eps"] == 0.1 + 0.2 and len(calls) == 1
    assert bc.cached(("setting", 0.25), compute, tmp_path) == first and len(calls) == 2
    assert len(list(tmp_path.glob("*.pickle"))) == 2  # one file per setting
    assert bc.cached(("setting", 0.5), compute, None) == first and len(calls) == 3  # no folder


def test_other_code_or_libraries_never_read_a_kept_value(tmp_path, monkeypatch):
    key = ("setting", 0.5)
    path = bc.cache_file(key, tmp_path)
    monkeypatch.setattr(bc, "package_digest", lambda: "an edited package")
    assert bc.cache_file(key, tmp_path) != path
    monkeypatch.undo()
    monkeypatch.setattr(bc, "_versions", lambda: "numpy==0.0")
    assert bc.cache_file(key, tmp_path) != path


def test_another_vector_unit_never_reads_a_kept_value(tmp_path):
    """numpy's exp and log round differently without AVX-512 (issue 37): the same key, in a
    child whose numpy dispatches other SIMD targets than this process (NPY_DISABLE_CPU_FEATURES
    switching all of them off, or, where this process already runs without them, on again, as
    tools/cpu_profile.py's profiles do), names another file; in a child with this process's
    environment, the same file."""
    umath = np._core._multiarray_umath
    code = (
        "import sys; from pathlib import Path; from auditsel.experiments import bounds_cache as bc;"
        "print(bc._vector_unit(), bc.cache_file(('setting', 0.5), Path(sys.argv[1])))"
    )
    here = (bc._vector_unit(), str(bc.cache_file(("setting", 0.5), tmp_path)))
    enabled = [t for t in umath.__cpu_dispatch__ if umath.__cpu_features__.get(t)]
    other = " ".join(umath.__cpu_dispatch__) if enabled else ""
    seen = []
    for env in (dict(os.environ), dict(os.environ, NPY_DISABLE_CPU_FEATURES=other)):
        child = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        seen.append(tuple(child.stdout.split()))
    assert seen[0] == here
    if seen[1][0] == here[0]:
        pytest.skip("this CPU has none of numpy's dispatch targets: no other vector unit to test")
    assert seen[1][1] != here[1]


def test_a_broken_or_unwritable_cache_is_computed_around(tmp_path):
    key = ("setting", 1.0)
    path = bc.cache_file(key, tmp_path)
    path.write_bytes(b"not a pickle")
    assert bc.cached(key, lambda: 42, tmp_path) == 42
    assert pickle.loads(path.read_bytes()) == 42  # rewritten
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    assert bc.cached(key, lambda: 43, blocked) == 43  # cannot be kept: computed, no error
    unstable = (object(),)  # its repr holds an address: never kept
    assert bc.cached(unstable, lambda: 44, tmp_path) == 44
    assert len(list(tmp_path.glob("*.pickle"))) == 1


def test_cache_folder_follows_the_environment(tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv(bc.CACHE_ENV, str(tmp_path / "c"))
    assert bc.cache_folder(out) == tmp_path / "c"  # a folder the user names
    monkeypatch.setenv(bc.CACHE_ENV, "off")
    assert bc.cache_folder(out) is None
    monkeypatch.delenv(bc.CACHE_ENV)
    assert bc.cache_folder(out) == out / ".bounds-cache"  # else inside the output folder


def test_a_run_from_kept_bounds_equals_a_run_from_computed_ones(tmp_path, monkeypatch):
    """The bounds computed afresh (and kept), then read back by a run that cannot compute
    them: the two runs' results are equal to the last bit."""
    spec = parse_config(SPEC)
    fields._UPPER.clear()
    fresh, _ = ex.run_experiment(
        spec, None, progress=False, outputs=ex.ExperimentOutputs(bounds_cache=tmp_path)
    )
    assert len(list(tmp_path.glob("*.pickle"))) == 1
    fields._UPPER.clear()
    monkeypatch.setattr(fields, "_upper_panel", lambda *a: pytest.fail("computed, not read back"))
    read, _ = ex.run_experiment(
        spec, None, progress=False, outputs=ex.ExperimentOutputs(bounds_cache=tmp_path)
    )
    # every field but the wall time, to the last bit
    assert {k: v for k, v in read.items() if k != "seconds"} == {
        k: v for k, v in fresh.items() if k != "seconds"
    }
    # the bounds stay in this process's cache (auditsel.results.fields): equal to the last
    # bit to fresh ones, as asserted, so later runs of the setting read them


@pytest.mark.slow  # reason: CLI runs in fresh interpreters (9 CPU s); the cache's rules: above
def test_the_cli_keeps_bounds_where_told_and_nothing_with_no_cache(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), bc.CACHE_ENV: str(tmp_path / "cache")}

    def run(*extra):
        out = tmp_path / f"o{len(list(tmp_path.glob('o*')))}"
        argv = ["run", "--trials", "2000", "--out", str(out), "--quiet", "--no-progress"]
        proc = subprocess.run(
            [sys.executable, "-m", "auditsel", *argv, "--no-plots", *extra],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads((out / "result.json").read_text())

    off = run("--no-cache")
    assert not (tmp_path / "cache").exists()
    first, second = run(), run()
    assert len(list((tmp_path / "cache").glob("*.pickle"))) == 1
    assert first["upper"] and first["interval"]
    for key in set(off) - {"seconds"}:
        assert first[key] == second[key] == off[key], key
    # no folder named: kept inside the output folder, nothing written outside it
    del env[bc.CACHE_ENV]
    before = set(tmp_path.iterdir())
    inside = run()
    out = (set(tmp_path.iterdir()) - before).pop()
    assert len(list((out / ".bounds-cache").glob("*.pickle"))) == 1
    assert inside["upper"] == off["upper"]
