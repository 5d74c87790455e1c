"""numba's cache of the kernels is checked before it is read (issue 20, item 3): a damaged
(one flipped bit, truncated) or unknown cache file is deleted and rebuilt, never loaded; a
cache folder another user can write (or a file in it) is not read at all, so a pickle planted
there never runs; the numbers stay right either way.

The fast tests use a small numba function in a module of their own (compiled in well under a
second); the slow ones do the same to the DP-SGD kernels in fresh processes:

    python -m pytest -m slow tests/dpsgd/test_kernel_cache.py
"""

import importlib.util
import json
import os
import pickle
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numba
import numpy as np
import pytest

from auditsel.dpsgd import kernel_cache

ROOT = Path(__file__).resolve().parents[2]
POSIX = hasattr(os, "getuid")
posix_only = pytest.mark.skipif(not POSIX, reason="owners and mode bits: POSIX only")

SOURCE = textwrap.dedent(
    """
    import numpy as np

    def scaled(x, out):
        for i in range(x.shape[0]):
            out[i] = x[i] * np.float32(3.0) + np.float32(1.0)

    SIGNATURES = [(scaled, ["void(float32[::1], float32[::1])"])]
    """
)


class Evil:
    """Unpickling this runs code: it writes a marker file (what a planted cache file does)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path(self.marker).write_text, ("the planted cache file ran",))


@pytest.fixture(autouse=True)
def private_umask():
    """Files as a private umask makes them (022): under 002 (user private groups) numba's files
    are group-writable and the cache is refused, which is the policy, not what these tests test."""
    if not POSIX:
        yield
        return
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def load_module(folder: Path, name: str = "tinykernel"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    if not path.exists():
        path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(folder: Path, name: str = "tinykernel"):
    """Compile the tiny kernel through compile_cached (numba caches it in folder/__pycache__);
    returns (dispatcher, its output on 1..4, the warnings)."""
    module = load_module(folder, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (fn,) = kernel_cache.compile_cached(module.SIGNATURES, module=name, nogil=True)
    x = np.arange(1, 5, dtype=np.float32)
    out = np.zeros(4, np.float32)
    fn(x, out)
    return fn, out.tolist(), [str(w.message) for w in caught]


def cache_files(folder: Path, suffix: str):
    return sorted((folder / "__pycache__").glob(f"tinykernel.*{suffix}"))


@pytest.fixture
def built(tmp_path):
    fn, out, msgs = build(tmp_path)
    assert out == [4.0, 7.0, 10.0, 13.0] and not msgs
    assert fn.stats.cache_misses and not fn.stats.cache_hits  # built and saved
    return tmp_path


def test_a_clean_cache_is_loaded_with_its_digests(built):
    pycache = built / "__pycache__"
    manifest = json.loads((pycache / kernel_cache.MANIFEST).read_text())
    names = {p.name for p in cache_files(built, ".nbi") + cache_files(built, ".nbc")}
    assert names and set(manifest) == names
    fn, out, msgs = build(built)
    assert fn.stats.cache_hits and not fn.stats.cache_misses  # loaded, not rebuilt
    assert out == [4.0, 7.0, 10.0, 13.0] and not msgs


@pytest.mark.parametrize("suffix", [".nbc", ".nbi"])
@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_a_damaged_cache_file_is_deleted_and_rebuilt(built, suffix, damage):
    (path,) = cache_files(built, suffix)
    data = bytearray(path.read_bytes())
    if damage == "flip":  # one bit, in the middle (the object code of the data file)
        data[len(data) // 2] ^= 0x10
    path.write_bytes(
        bytes(
            data[: len(data) // 2] if damage == "truncate" else b"" if damage == "empty" else data
        )
    )
    fn, out, msgs = build(built)
    assert out == [4.0, 7.0, 10.0, 13.0]
    assert fn.stats.cache_misses and not fn.stats.cache_hits  # rebuilt, not loaded
    assert len(msgs) == 1 and "did not match the digests" in msgs[0] and path.name in msgs[0]
    fn, out, msgs = build(built)  # the rebuilt files carry new digests
    assert fn.stats.cache_hits and not msgs and out == [4.0, 7.0, 10.0, 13.0]


def test_files_without_a_manifest_or_unknown_to_it_are_not_loaded(built, tmp_path):
    pycache = built / "__pycache__"
    (pycache / kernel_cache.MANIFEST).unlink()  # e.g. a process killed before writing it
    fn, out, msgs = build(built)
    assert fn.stats.cache_misses and "did not match" in msgs[0]
    assert out == [4.0, 7.0, 10.0, 13.0]
    # a file planted in our own (private) folder under a name numba would read
    marker = tmp_path / "ran"
    (path,) = cache_files(built, ".nbi")
    with path.open("wb") as f:
        pickle.dump(Evil(marker), f)
    fn, out, msgs = build(built)
    assert not marker.exists() and "did not match" in msgs[0] and out == [4.0, 7.0, 10.0, 13.0]


@posix_only
@pytest.mark.parametrize("what", ["folder", "file"])
def test_a_cache_others_can_write_is_never_read(built, tmp_path, what):
    """The planted pickle would run if numba read it (checked below without the guard)."""
    pycache = built / "__pycache__"
    marker = tmp_path / "ran"
    (path,) = cache_files(built, ".nbi")
    with path.open("wb") as f:  # numba's index: a pickled version, then the pickled index
        pickle.dump(numba.__version__, f)
        f.write(pickle.dumps(Evil(marker)))
    manifest = json.loads((pycache / kernel_cache.MANIFEST).read_text())
    manifest[path.name] = kernel_cache._digest(path)  # the attacker rewrote the digests too
    (pycache / kernel_cache.MANIFEST).write_text(json.dumps(manifest))
    target = pycache if what == "folder" else path
    target.chmod(target.stat().st_mode | stat.S_IWGRP | stat.S_IWOTH)
    fn, out, msgs = build(built)
    assert not marker.exists(), "a pickle from a folder others can write was loaded"
    assert out == [4.0, 7.0, 10.0, 13.0] and not fn.stats.cache_hits
    assert len(msgs) == 1 and "writable by its group or by others" in msgs[0]
    assert "chmod go-w" in msgs[0] and "NUMBA_CACHE_DIR" in msgs[0]
    # without the guard, numba would have run it: the test's planted file is a real threat
    target.chmod(target.stat().st_mode & ~(stat.S_IWGRP | stat.S_IWOTH))
    module = load_module(built)
    with pytest.raises(Exception):  # noqa: B017 (the Evil pickle returns an int, not an index)
        numba.njit(module.SIGNATURES[0][1], cache=True)(module.scaled)
    assert marker.exists()


@posix_only
def test_unsafe_reason_names_each_way_others_could_write(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o755)
    (folder / "m.f-1.py311.nbi").write_bytes(b"x")
    assert kernel_cache.unsafe_reason(folder) is None
    folder.chmod(0o775)
    assert "writable by its group" in kernel_cache.unsafe_reason(folder)
    folder.chmod(0o755)
    (folder / "m.f-1.py311.nbi").chmod(0o646)
    assert "m.f-1.py311.nbi is writable" in kernel_cache.unsafe_reason(folder)
    (folder / "m.f-1.py311.nbi").chmod(0o644)
    (folder / "m.f-1.py311.1.nbc").symlink_to(folder / "m.f-1.py311.nbi")
    assert "symbolic link" in kernel_cache.unsafe_reason(folder)
    (folder / "m.f-1.py311.1.nbc").unlink()
    shared = tmp_path / "shared"  # a folder above, writable by all, without the sticky bit
    shared.mkdir()
    inner = shared / "cache"
    inner.mkdir(mode=0o755)
    shared.chmod(0o777)
    assert "above the cache" in kernel_cache.unsafe_reason(inner)
    shared.chmod(0o1777)  # as /tmp: others cannot rename what is ours
    assert kernel_cache.unsafe_reason(inner) is None
    if os.getuid() == 0:  # as root, a file of another user
        os.chown(folder / "m.f-1.py311.nbi", 12345, 12345)
        assert "owned by another user (uid 12345)" in kernel_cache.unsafe_reason(folder)


# --- the DP-SGD kernels themselves, in fresh processes (each compiles them: slow) -------------

CHILD = textwrap.dedent(
    """
    import hashlib, os, warnings, numpy as np
    os.umask(0o022)
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        from auditsel.dpsgd import kernels
        k = kernels.seed_keys([1, 2, 3])
        z = kernels.draw(k, 2, 0, 5, 300, True)
        cpu = kernels._cpu()
    print(hashlib.sha256(z.numpy().tobytes()).hexdigest())
    print(sum(  # the jitted kernels count hits per signature, the C callback its own
        sum(f.stats.cache_hits.values()) if hasattr(f, "stats") else f.cache_hits
        for f in vars(cpu).values()
    ))
    for w in caught:
        print("WARNING", w.message)
    """
)


def child(cache: Path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    res = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    digest, hits, *warns = res.stdout.splitlines()
    return digest, int(hits), warns


@pytest.mark.slow
@posix_only
def test_the_dpsgd_kernels_survive_a_damaged_truncated_or_planted_cache(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir(mode=0o700)
    want, hits, warns = child(cache)  # builds the cache
    assert hits == 0 and not warns
    assert child(cache) == (want, 3, [])  # the three kernels loaded, the same numbers
    fill = sorted(cache.rglob("kernels_cpu.philox_fill*.nbc"))[0]
    data = bytearray(fill.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit
    fill.write_bytes(bytes(data))
    digest, hits, warns = child(cache)
    assert digest == want and hits == 2 and len(warns) == 1 and "did not match" in warns[0]
    fill.write_bytes(fill.read_bytes()[:1000])  # truncated (once a SIGBUS with the C cache)
    digest, hits, warns = child(cache)
    assert digest == want and hits == 2 and "did not match" in warns[0]
    marker = tmp_path / "ran"
    index = sorted(cache.rglob("kernels_cpu.philox_fill*.nbi"))[0]
    with index.open("wb") as f:
        pickle.dump(numba.__version__, f)
        f.write(pickle.dumps(Evil(marker)))
    for folder in [cache, *cache.iterdir()]:  # a shared cache folder
        folder.chmod(0o777)
    digest, hits, warns = child(cache)
    assert digest == want and hits == 0 and not marker.exists()
    assert len(warns) == 1 and "writable by its group or by others" in warns[0]
