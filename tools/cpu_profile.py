"""Run a command as if on an older x86-64 vector unit (issue 37): every library auditsel computes
with is told to leave out AVX-512 ("avx2": an AVX2-only Intel machine), to take the code paths it
takes on an AMD Zen 3 CPU, which has no AVX-512 ("zen3"), or to leave out all SIMD beyond the
baseline ("none").

    python tools/cpu_profile.py [--profile avx2|zen3|none] -- COMMAND [ARG ...]   # run COMMAND
    python tools/cpu_profile.py [--profile avx2|zen3|none] --env                  # print the env
    python tools/cpu_profile.py [--profile avx2|zen3|none] --check                # show it took

What each profile sets (the one source of these variables; tests/accounting/test_cpu_profiles.py
reads `profile_env`):

========================  ==============================  ===================================
library                   avx2 (zen3 where it differs)    none
========================  ==============================  ===================================
numpy (dispatch)          NPY_DISABLE_CPU_FEATURES =      all of numpy's dispatched targets
                          its AVX-512 targets (X86_V4,
                          AVX512_*)
OpenBLAS (numpy, scipy)   OPENBLAS_CORETYPE=Haswell       OPENBLAS_CORETYPE=Prescott
                          (zen3: Zen)
MKL (torch's BLAS)        MKL_ENABLE_INSTRUCTIONS=AVX2    MKL_ENABLE_INSTRUCTIONS=SSE4_2
oneDNN (torch)            ONEDNN_MAX_CPU_ISA=AVX2         ONEDNN_MAX_CPU_ISA=SSE41
torch's own kernels       ATEN_CPU_CAPABILITY=avx2        ATEN_CPU_CAPABILITY=default
numba (DP-SGD kernels)    NUMBA_CPU_NAME=haswell          NUMBA_CPU_NAME=generic
                          (zen3: znver3, LLVM's Zen 3
                          tuning), NUMBA_CPU_FEATURES =
                          this CPU's with every avx512*,
                          amx* and avx10* off
glibc (libm, string ops)  GLIBC_TUNABLES=glibc.cpu.       glibc.cpu.hwcaps=-AVX512F,...,
                          hwcaps=-AVX512F,-AVX512DQ,...   -AVX2,-FMA,-AVX
========================  ==============================  ===================================

"zen3" is an emulation, not AMD hardware: the arithmetic of an x86-64 CPU is IEEE's on every
vendor, so the digits can only move where a library picks its kernels by the CPU it finds, and
the profile makes each pick what it picks on a Zen 3. OpenBLAS's wheel maps its Zen core type to
its Haswell kernels (what `--check` reports), MKL and oneDNN take their AVX2 paths, numba
compiles with LLVM's znver3 scheduling and tuning, restricted to the instructions this CPU has
(an AMD-only instruction would not run here). What it cannot reach: microcode, and any library
that tests the vendor string itself.

numba's cache is left where it is: numba keys each cached function on its target CPU name and
features (its codegen's magic tuple), so code compiled for this CPU is never loaded under a
profile, nor the profile's without it (auditsel.dpsgd.kernel_cache's digests cover both).

``--check`` runs a fresh interpreter under the profile and prints what each library chose
(numpy's enabled targets, torch's capability, MKL's, oneDNN's and OpenBLAS's kernels, numba's target
and whether its machine code for a float64 loop uses zmm registers, glibc's hwcaps); it exits 1
when any of them still uses AVX-512 (or, for "none", AVX2). A library that is not installed
is reported as such. Nothing here changes what auditsel computes; it only emulates the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ("avx2", "zen3", "none")
# glibc's names (sysdeps/x86/include/cpu-features-preferred_feature_index_1.def, cpu-features.h)
GLIBC_AVX512 = ("AVX512F", "AVX512CD", "AVX512DQ", "AVX512BW", "AVX512VL", "AVX512ER", "AVX512PF")


def numpy_dispatch_targets() -> list[str]:
    """numpy's dispatched targets on this build (the names NPY_DISABLE_CPU_FEATURES takes)."""
    import importlib

    try:
        umath = importlib.import_module("numpy._core._multiarray_umath")
    except ImportError:  # numpy 1.x
        umath = importlib.import_module("numpy.core._multiarray_umath")
    return list(umath.__cpu_dispatch__)


def numba_features_without_avx512() -> str:
    """This CPU's LLVM features with every AVX-512 (and AMX, AVX10) feature switched off."""
    import llvmlite.binding as ll

    out = []
    for f in ll.get_host_cpu_features().flatten().split(","):
        name = f[1:]
        off = name.startswith(("avx512", "amx", "avx10"))
        out.append(("-" + name) if off else f)
    return ",".join(out)


def profile_env(name: str, base: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """(environment, numpy targets switched off) of profile `name` ("avx2", "zen3" or "none") on
    top of `base` (default: this process's environment)."""
    if name not in PROFILES:
        raise ValueError(f"profile: {name!r}, allowed {PROFILES}")
    targets = numpy_dispatch_targets()
    if name in ("avx2", "zen3"):
        off = [t for t in targets if "512" in t or t == "X86_V4"]
        zen = name == "zen3"
        extra = {
            "OPENBLAS_CORETYPE": "Zen" if zen else "Haswell",
            "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "ONEDNN_MAX_CPU_ISA": "AVX2",
            "ATEN_CPU_CAPABILITY": "avx2",
            "NUMBA_CPU_NAME": "znver3" if zen else "haswell",
            "NUMBA_CPU_FEATURES": numba_features_without_avx512(),
            "GLIBC_TUNABLES": "glibc.cpu.hwcaps=" + ",".join("-" + f for f in GLIBC_AVX512),
        }
    else:
        off = targets
        hw = [*GLIBC_AVX512, "AVX2", "FMA", "AVX"]
        extra = {
            "OPENBLAS_CORETYPE": "Prescott",
            "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
            "ONEDNN_MAX_CPU_ISA": "SSE41",
            "ATEN_CPU_CAPABILITY": "default",
            "NUMBA_CPU_NAME": "generic",
            "GLIBC_TUNABLES": "glibc.cpu.hwcaps=" + ",".join("-" + f for f in hw),
        }
    env = dict(os.environ if base is None else base, NPY_DISABLE_CPU_FEATURES=" ".join(off))
    env.update(extra)
    return env, off


PROBE = r"""
import json, os, subprocess, sys
out = {}
try:
    from numpy._core import _multiarray_umath as umath
except ImportError:
    from numpy.core import _multiarray_umath as umath
out["numpy_dispatch_enabled"] = [t for t in umath.__cpu_dispatch__ if umath.__cpu_features__.get(t)]
try:
    import threadpoolctl, numpy
    numpy.ones((64, 64)) @ numpy.ones((64, 64))
    out["blas"] = sorted(
        {f"{i['internal_api']}:{i.get('architecture')}" for i in threadpoolctl.threadpool_info()
         if i.get("user_api") == "blas"}
    )
except ImportError:
    out["blas"] = "threadpoolctl not installed"
try:
    import torch
    out["torch_capability"] = torch.backends.cpu.get_cpu_capability()
except ImportError:
    out["torch_capability"] = "torch not installed"
try:
    import numba, numpy as np
    from numba.core.codegen import JITCPUCodegen
    @numba.njit("float64(float64[:])")
    def total(x):
        s = 0.0
        for v in x:
            s += v * v
        return s
    asm = total.inspect_asm(total.signatures[0])
    cg = total.targetctx.codegen()
    out["numba_cpu"] = cg._get_host_cpu_name()
    out["numba_avx512_features"] = [
        f for f in cg._get_host_cpu_features().split(",") if f.startswith("+avx512")
    ]
    out["numba_zmm"] = "zmm" in asm
    out["numba_ymm"] = "ymm" in asm
except ImportError:
    out["numba_cpu"] = "numba not installed"
out["glibc_tunables"] = os.environ.get("GLIBC_TUNABLES")
print(json.dumps(out))
"""


def verbose_lines(env: dict[str, str], variable: str, code: str) -> list[str]:
    """The lines a fresh interpreter running `code` prints under `env` with `variable`=1 (a
    library's *_VERBOSE switch: it names its kernels and their instruction set)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(env, **{variable: "1"}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.stdout.splitlines()


def mkl_isa(env: dict[str, str]) -> str:
    """The instruction set MKL reports for a torch matmul (MKL_VERBOSE's header)."""
    code = "import torch; torch.ones(64, 64, dtype=torch.float64) @ torch.ones(64, 64, dtype=torch.float64)"
    for line in verbose_lines(env, "MKL_VERBOSE", code):
        if line.startswith("MKL_VERBOSE oneMKL") or line.startswith("MKL_VERBOSE Intel(R) MKL"):
            isa = line.split(" architecture ", 1)[-1].split(" Lnx ", 1)[0].split(" Win ", 1)[0]
            return isa.rstrip(", ")
    return "no MKL_VERBOSE line (MKL not used)"


def onednn_isa(env: dict[str, str]) -> str:
    """The instruction set oneDNN reports for a torch convolution (ONEDNN_VERBOSE's header)."""
    code = (
        "import torch; torch.nn.functional.conv2d(torch.ones(2, 3, 16, 16), torch.ones(4, 3, 3, 3));"
        "torch.nn.functional.linear(torch.ones(8, 64, dtype=torch.bfloat16),"
        " torch.ones(64, 64, dtype=torch.bfloat16))"
    )
    for line in verbose_lines(env, "ONEDNN_VERBOSE", code):
        if ",cpu,isa:" in line:
            return line.split(",cpu,isa:", 1)[1].strip()
    return "no ONEDNN_VERBOSE line (oneDNN not used)"


def glibc_levels(env: dict[str, str]) -> list[str]:
    """The x86-64 levels glibc's loader finds usable under `env` (its --list-diagnostics:
    dl_hwcaps_subdirs and the mask of those active, first name the lowest bit)."""
    loader = "/lib64/ld-linux-x86-64.so.2"
    try:
        done = subprocess.run(
            [loader, "--list-diagnostics"], env=env, capture_output=True, text=True, timeout=60
        )
    except OSError:
        return ["no glibc loader at " + loader]
    info = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    names = info.get("dl_hwcaps_subdirs", "").strip('"').split(":")
    mask = int(info.get("dl_hwcaps_subdirs_active", "0"), 16)
    return [n for i, n in enumerate(names) if mask >> i & 1]


def check(name: str) -> int:
    """Run the probe under profile `name`; print what each library chose; 0 when it took."""
    env, off = profile_env(name)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode:
        print(done.stderr, file=sys.stderr)
        return 1
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["mkl"] = mkl_isa(env)
    out["onednn"] = onednn_isa(env)
    out["glibc_levels"] = glibc_levels(env)
    print(json.dumps(out, indent=1))
    bad = []
    if set(off) & set(out["numpy_dispatch_enabled"]):
        bad.append("numpy")
    if isinstance(out["blas"], list) and any(
        "SkylakeX" in b
        or "Cooperlake" in b
        or (name == "zen3" and not b.endswith((":Zen", ":Haswell")))
        for b in out["blas"]
    ):
        bad.append("OpenBLAS")
    want = {"avx2": "AVX2", "zen3": "AVX2", "none": "DEFAULT"}[name]
    if out["torch_capability"] not in (want, "torch not installed"):
        bad.append("torch")
    if (
        out.get("numba_zmm")
        or out.get("numba_avx512_features")
        or (name == "none" and out.get("numba_ymm"))
        or (name == "zen3" and out.get("numba_cpu") != "znver3")
    ):
        bad.append("numba")
    if (
        "AVX-512" in out["mkl"]
        or "AVX512" in out["mkl"]
        or (name == "none" and "AVX2" in out["mkl"])
    ):
        bad.append("MKL")
    if "512" in out["onednn"] or (name == "none" and "AVX2" in out["onednn"]):
        bad.append("oneDNN")
    if "x86-64-v4" in out["glibc_levels"] or (
        name == "none" and "x86-64-v3" in out["glibc_levels"]
    ):
        bad.append("glibc")
    print(f"profile {name}: " + ("took" if not bad else "did not take in " + ", ".join(bad)))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=PROFILES, default="avx2")
    parser.add_argument("--env", action="store_true", help="print the variables it sets")
    parser.add_argument("--check", action="store_true", help="show that each library took it")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.check:
        return check(args.profile)
    env, _ = profile_env(args.profile)
    if args.env:
        for key in sorted(
            set(env) - set(os.environ) | {k for k in env if env[k] != os.environ.get(k)}
        ):
            print(f"export {key}={env[key]!r}")
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("command: missing (after --), or --env or --check", file=sys.stderr)
        return 2
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    sys.exit(main())
