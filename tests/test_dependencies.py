"""Dependencies: every one has a version range in pyproject.toml, the versions the suite ran on
(.ci/tested-versions.txt) lie inside it, and dp_accounting's private PLD attributes (the one
place auditsel reads them: auditsel.mechanisms.dense_pmfs) still mean what auditsel assumes."""

import re
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from auditsel.mechanisms import DpsgdBase, dense_pmfs

ROOT = Path(__file__).resolve().parents[1]


def requirements() -> list[Requirement]:
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"\ndependencies = \[(.*?)\]", text, flags=re.S).group(1)
    extras = re.search(r"\[project\.optional-dependencies\](.*?)\n\[", text, flags=re.S).group(1)
    return [Requirement(r) for r in re.findall(r'"([^"]+)"', deps + extras)]


def pinned_versions() -> dict[str, str]:
    lines = (ROOT / ".ci" / "tested-versions.txt").read_text().splitlines()
    pins = [line.split("==") for line in lines if line and not line.startswith("#")]
    return {canonicalize_name(name): v for name, v in pins}


def test_every_dependency_has_a_range_and_the_tested_versions_lie_in_it():
    pins = pinned_versions()
    text = (ROOT / "pyproject.toml").read_text()
    untested = set()
    for extra in ("crosscheck", "docs"):  # jax-privacy; the docs build (CI's docs stage)
        line = re.search(rf"\n{extra} = \[(.*?)\]", text, flags=re.S).group(1)
        untested |= {Requirement(r).name for r in re.findall(r'"([^"]+)"', line)}
    for req in requirements():
        name = canonicalize_name(req.name)
        assert any(s.operator in (">=", ">", "==", "~=") for s in req.specifier), req
        if name != "torch":  # torch: the range stays open (.ci/run pins the CPU build)
            assert any(s.operator in ("<", "<=", "==", "~=") for s in req.specifier), req
        if req.name in untested:  # extras the test environment does not install
            continue
        assert name in pins, f"{req.name}: not in .ci/tested-versions.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (req, pins[name])


def test_the_installed_dp_accounting_is_in_range():
    (req,) = [r for r in requirements() if r.name == "dp-accounting"]
    assert req.specifier.contains(version("dp-accounting"))


@pytest.mark.parametrize("tau", [1.0, 0.05])  # a symmetric PLD (full batch) and an asymmetric one
def test_the_private_pld_arrays_give_dp_accountings_own_profile(tau):
    """delta(eps) from the arrays read out of dp_accounting's private attributes equals its
    public query `get_delta_for_epsilon`, at the losses themselves and between them."""
    pair = DpsgdBase(noise_multiplier=1.5, steps=50, sample_rate=tau)
    pld = pair.pld()
    parts = dense_pmfs(pld)
    assert len(parts) == (1 if tau == 1.0 else 2)
    for losses, probs, inf_mass in parts:
        assert np.all(np.diff(losses) > 0) and np.all(probs > -1e-15) and 0 <= inf_mass < 1e-6
        assert abs(probs.sum() + inf_mass - 1) < 1e-6  # pessimistic rounding: about 1e-8
    eps = np.sort(np.concatenate([np.linspace(0.0, 8.0, 41), parts[0][0][::500][:20]]))
    theirs = np.maximum(np.asarray(pld.get_delta_for_epsilon(eps), dtype=float), 0.0)
    assert np.allclose(pair.delta(eps), theirs, rtol=1e-9, atol=1e-15)


def test_a_dp_accounting_without_the_private_attributes_fails_loudly():
    """A dp_accounting whose PLD lost an attribute auditsel reads is named as the cause, with
    the version range to install, not an AttributeError deep in a bound."""

    class Renamed:  # a PLD whose private fields have other names
        pmf_remove = None

    with pytest.raises(RuntimeError, match=r"dp-accounting within the range auditsel declares"):
        dense_pmfs(Renamed())


def test_the_rdp_curve_comes_from_the_public_getter():
    pair = DpsgdBase(noise_multiplier=2.0, steps=10, sample_rate=1.0)
    orders = np.array([2.0, 4.0, 8.0])
    # full batch: N Gaussian steps, RDP N alpha / (2 sigma^2)
    assert np.allclose(pair.rdp(orders), 10 * orders / (2 * 2.0**2), rtol=1e-12)
