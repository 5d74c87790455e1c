"""The attack value is the same number on every x86-64 vector unit (issue 37): the committed
interval-widths row (DP-SGD noise 1.5, 8,400 steps, rate 0.003, Poisson(19)) and the README's
example (noise 1, 1,000 steps, rate 0.01, Poisson(10)), recomputed in a fresh interpreter whose
numpy runs without AVX-512 ("avx2") or without any dispatched SIMD and with the C library's
non-FMA kernels ("none"), print the same digits as here and as committed; auditsel.accounting.portable's
functions give the same bits. Before the fix the row read 1.9654 with AVX-512 and 1.9049 under
the avx2 profile (the merge cut its tails from FFT noise, and numpy's exp and log round
differently with AVX-512).

The profiles are tools/cpu_profile.py's (docs/howto/develop.md, "Tests on other vector units"):
numpy's dispatch is restricted by NPY_DISABLE_CPU_FEATURES (its dispatched targets at the
AVX-512 level, or all of them), OpenBLAS by OPENBLAS_CORETYPE, MKL, oneDNN, torch and numba by
their own variables, glibc by GLIBC_TUNABLES."""

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from auditsel.accounting import portable as pm
from auditsel.accounting.attack import attack_epsilon, label_laws
from auditsel.accounting.score_search import TAIL, merge_buckets
from auditsel.mechanisms import DpsgdBase
from auditsel.rounds import Poisson

ROOT = Path(__file__).resolve().parents[2]
CASES = {  # name: (noise, steps, rate, E[K]) at delta 1e-5
    "interval-widths row": (1.5, 8400, 0.003, 19.0),
    "README example": (1.0, 1000, 0.01, 10.0),
}
DELTA = 1e-5


def pm_values() -> list[np.ndarray]:
    """portable's functions on a fixed grid, float64 and longdouble."""
    x = np.linspace(-40.0, 40.0, 20001)
    pos = np.abs(x) + 1e-3
    out = []
    for v in (x, x.astype(np.longdouble)):
        out += [pm.exp(v), pm.expm1(v / 40), pm.log(pos.astype(v.dtype)), pm.log1p(v / 41)]
        out.append(pm.logaddexp(v, v[::-1]))
    return [np.asarray(a) for a in out]


def fingerprint(values: list[np.ndarray]) -> str:
    """A hash of the values' bits (a longdouble as the float64 pair hi + lo that holds it
    exactly: its storage has padding bytes whose contents vary)."""
    parts = []
    for v in values:
        hi = v.astype(np.float64)
        parts += [hi.tobytes(), (v - hi).astype(np.float64).tobytes()]
    return hashlib.sha256(b"".join(parts)).hexdigest()


def profile_env(name: str) -> tuple[dict[str, str], list[str]]:
    """tools/cpu_profile.py's profile (the one source of its variables), with this checkout
    first on the path."""
    spec = importlib.util.spec_from_file_location("cpu_profile", ROOT / "tools" / "cpu_profile.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    env, off = tool.profile_env(name)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env, off


def run_profile(name: str) -> dict:
    """This file run as a script under the profile: its `measure()` as JSON, and the numpy
    dispatch targets still enabled there (none of those the profile switches off)."""
    env, off = profile_env(name)
    done = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600, check=True
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert not set(off) & set(out["enabled"]), f"the {name} profile did not take: {out['enabled']}"
    return out


def measure() -> dict:
    """The attack values of CASES and a hash of portable's values."""
    out: dict = {
        name: attack_epsilon(DpsgdBase(s, n, t), Poisson(k), DELTA)
        for name, (s, n, t, k) in CASES.items()
    }
    out["bits"] = fingerprint(pm_values())
    return out


def committed() -> dict[str, str]:
    """The committed digits: the interval-widths row's attack and the README's lower end."""
    rows = json.loads((ROOT / "results" / "papers" / "interval-widths" / "rows.json").read_text())
    s, n, t, k = CASES["interval-widths row"]
    (row,) = [
        r
        for r in rows
        if (r["sigma"], r["N"], r["tau"], r["K"]) == (s, n, t, f"poisson(mean={k:g})")
    ]
    readme = (ROOT / "README.md").read_text()
    lower = readme.split("the tuning run's eps is in [", 1)[1].split(",", 1)[0]
    return {"interval-widths row": f"{row['attack']:.4f}", "README example": lower}


@pytest.mark.slow  # two fresh interpreters, each computing two DP-SGD attack values (about 10 CPU s)
@pytest.mark.parametrize("profile", ["avx2", "zen3", "none"])
def test_attack_values_print_the_same_digits_on_every_vector_unit(profile):
    mine, other, pinned = measure(), run_profile(profile), committed()
    assert other["bits"] == mine["bits"]  # portable: the same bits
    for name in CASES:
        assert abs(other[name] - mine[name]) <= 1e-9, (name, profile, other[name], mine[name])
        assert f"{other[name]:.4f}" == f"{mine[name]:.4f}" == pinned[name], (name, profile)


@pytest.mark.slow  # three fresh interpreters per profile (about 10 CPU s each)
@pytest.mark.parametrize("profile", ["avx2", "zen3", "none"])
def test_the_profile_takes_in_every_library(profile):
    """tools/cpu_profile.py --check: numpy, OpenBLAS, MKL, torch, numba and glibc each report
    the profile's vector unit (none of them AVX-512; for "none", none of them AVX2 either)."""
    tool = ROOT / "tools" / "cpu_profile.py"
    done = subprocess.run(
        [sys.executable, str(tool), "--profile", profile, "--check"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith(f"profile {profile}: took")


def test_the_merge_reads_no_fft_noise():
    """Entries of a composed run law below the FFT's round-off are noise (their bits move with
    the CPU): redrawn at random below it, they leave the merged buckets' cuts unchanged, though
    they move the TAIL quantile that the raw cdf gives (the rule that read them)."""
    laws = label_laws(DpsgdBase(1.0, 200, 0.05))
    rng = np.random.default_rng(1)
    noisy = []
    for b, v in enumerate(laws.laws):
        below = v.astype(float) < laws.noise[b]
        assert below.sum() > 1000  # the far tails are below the round-off
        redrawn = rng.uniform(0, laws.noise[b], len(v)).astype(np.longdouble)
        noisy.append(np.where(below, redrawn, v))
    other = type(laws)((noisy[0], noisy[1]), laws.upper, laws.error, laws.noise, laws.cuts)

    def raw_first(ls):
        return int(np.searchsorted(np.maximum(*[np.cumsum(v.astype(float)) for v in ls]), TAIL))

    assert raw_first(other.laws) != raw_first(laws.laws)
    np.testing.assert_array_equal(merge_buckets(other, 256).cuts, merge_buckets(laws, 256).cuts)


if __name__ == "__main__":  # the child of run_profile
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as umath
    result = measure()
    result["enabled"] = sorted(k for k, v in umath.__cpu_features__.items() if v)
    print(json.dumps(result))
