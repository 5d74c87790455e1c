"""The upper-bound panel: contract, labels, Example 1, and the invariants of issue 3 section 6."""

import typing

import dp_accounting as dpa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditsel.accounting import panel as panel_module
from auditsel.accounting.panel import (
    BOUND_KEYS,
    BOUND_LABELS,
    AttackInfo,
    BaseInfo,
    bound_labels,
    panel,
    upper_bounds,
)
from auditsel.accounting.registry import BOUNDS, MONOTONE_SCORE_KEYS, RIGOURS, Rigour
from auditsel.events import EventBase
from auditsel.mechanisms import DpsgdBase, FiniteOutputBase, GaussianBase
from auditsel.rounds import Poisson, TruncatedNegativeBinomial, TwoPoint

# three derandomized examples a property (each is 0.1-0.3 CPU s of panels); the same orderings
# at the ends of the ranges: test_extremes.py
SETTINGS = settings(max_examples=3, deadline=None, derandomize=True)
TOL = 1e-6


def values(base, law, delta) -> dict:
    """Every registered computation's value, whatever its label (the reduced game's values are
    under `monotone_score`, not `upper`: their orderings are properties of the computations)."""
    return {b.key: b.epsilon(base, law, delta) for b in BOUNDS}


def test_keys_and_labels():
    out = upper_bounds(GaussianBase(0.5), TruncatedNegativeBinomial(0, 0.01), 1e-5)
    assert tuple(out) == BOUND_KEYS
    assert set(BOUND_LABELS) == set(BOUND_KEYS)
    assert all(v["rigour"] in RIGOURS and v["citation"] for v in BOUND_LABELS.values())
    # the reduced game's values are never in upper: they assume a monotone score
    assert all(out[k] is None for k in MONOTONE_SCORE_KEYS)
    assert out["generic_rdp"] is not None and out["profile"] is not None
    assert bound_labels(DpsgdBase(2.0, 10, 0.5))["exact"] == "heuristic"
    assert bound_labels(DpsgdBase(2.0, 10, 1.0))["exact"] == "monotone_score"
    assert bound_labels(DpsgdBase(2.0, 10, 1.0))["profile"] == "rigorous"


def test_example1_panel_reproduces_the_paper():
    base, law = FiniteOutputBase.example1(), TruncatedNegativeBinomial(1.0, 1e-3)
    pure = panel(base, law, 0.0)
    assert pure.monotone_score["exact"] == pytest.approx(2.96, abs=0.01)  # the listed order
    assert pure.upper["generic_rdp"] == pytest.approx(3.0)
    assert pure.upper["profile"] is None and pure.upper["exact"] is None
    approx = panel(base, law, 1e-5)
    mono, up = approx.monotone_score, approx.upper
    assert mono["exact"] == pytest.approx(2.92, abs=0.01)
    assert mono["exact"] <= mono["improved_rdp"] <= up["generic_rdp"] < 3.11


def test_dpsgd_panel_has_base_info():
    base = DpsgdBase(1.0, 50, 0.1)
    out = panel(base, TruncatedNegativeBinomial(1.0, 0.1), 1e-5)
    assert out.base["mu"] == pytest.approx(base.mu)
    assert out.base["mu_gdp"] == pytest.approx(base.mu_gdp)
    for k in BOUND_KEYS:
        if out.labels[k] == "heuristic":  # tau < 1: the reduced game's values are no bounds
            assert out.upper[k] is None and out.reduced_game[k] is not None
        else:
            assert out.upper[k] >= out.base["epsilon"] * (1 - 1e-3)
    assert out.monotone_score == {}  # tau < 1: no exact reduction


mus = st.floats(0.1, 2.0)
tnbs = st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.floats(1e-3, 0.2))


@SETTINGS
@given(mu=mus, law=tnbs)
def test_exact_le_improved_le_generic_and_exact_le_profile(mu, law):
    out = values(GaussianBase(mu), TruncatedNegativeBinomial(*law), 1e-5)
    assert out["exact"] <= out["improved_rdp"] + TOL
    assert out["improved_rdp"] <= out["generic_rdp"] + TOL
    assert out["exact"] <= out["profile"] + TOL


@SETTINGS
@given(
    mu=mus,
    law=st.one_of(
        tnbs.map(lambda t: TruncatedNegativeBinomial(*t)),
        st.tuples(st.integers(2, 200), st.floats(0.0, 0.9)).map(lambda t: TwoPoint(*t)),
    ),
)
def test_every_bound_at_least_one_run(mu, law):
    base = GaussianBase(mu)
    out = values(base, law, 1e-5)
    eps_b = base.epsilon(1e-5)
    for k in ("generic_rdp", "profile", "improved_rdp", "exact"):
        assert out[k] >= eps_b - TOL, k


@SETTINGS
@given(mu=st.floats(0.1, 1.5), factor=st.floats(1.1, 2.0), law=tnbs)
def test_monotone_in_mu(mu, factor, law):
    law = TruncatedNegativeBinomial(*law)
    lo = values(GaussianBase(mu), law, 1e-5)
    hi = values(GaussianBase(mu * factor), law, 1e-5)
    for k in ("generic_rdp", "profile", "improved_rdp", "exact"):
        assert lo[k] <= hi[k] + TOL, k


@SETTINGS
@given(
    mu=mus,
    eta=st.sampled_from([0.0, 1.0, 2.0]),
    nu=st.floats(2e-3, 0.3),
    shrink=st.floats(0.2, 0.8),
)
def test_monotone_in_expected_runs(mu, eta, nu, shrink):
    small, large = TruncatedNegativeBinomial(eta, nu), TruncatedNegativeBinomial(eta, nu * shrink)
    assert small.mean < large.mean
    lo = values(GaussianBase(mu), small, 1e-5)
    hi = values(GaussianBase(mu), large, 1e-5)
    for k in ("generic_rdp", "profile", "improved_rdp", "exact"):
        assert lo[k] <= hi[k] + TOL, k


def test_poisson_monotone_in_mean():
    a = values(GaussianBase(0.5), Poisson(3.0), 1e-5)
    b = values(GaussianBase(0.5), Poisson(30.0), 1e-5)
    for k in ("generic_rdp", "profile", "improved_rdp", "exact"):
        assert a[k] <= b[k] + TOL


def test_panel_is_a_frozen_typed_result_read_by_attribute():
    import dataclasses
    import json

    p = panel(GaussianBase(0.5), TruncatedNegativeBinomial(0, 0.01), 1e-5, curve_deltas=[1e-3])
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.upper = {}
    with pytest.raises(TypeError, match="not subscriptable"):
        p["upper"]  # the dict access of 0.2 is gone
    d = p.to_dict()
    assert {"base", "upper", "labels", "sources", "notes", "seconds", "curves"} <= set(d)
    assert {"attack", "interval", "reduced_game", "monotone_score"} <= set(d)
    assert d["interval"] == p.interval.to_dict() and d["upper"] == p.upper
    json.dumps(d)
    # a Gaussian base: the reduced game's exact value assumes a monotone score; the attack for
    # any score is at least it (a monotone score is one of the scores), the interval's upper
    # end is a bound for any score, never the monotone value
    exact = p.monotone_score["exact"]
    assert p.upper["exact"] is None and p.value("exact") == exact
    assert p.attack["epsilon"] >= exact - TOL and p.interval.upper >= p.attack["epsilon"] - TOL
    assert p.interval.upper_source.split(" ")[0] in ("generic_rdp", "profile")
    assert all(v is None for v in p.curves["exact"])
    assert p.monotone_score_curves["exact"][0] == pytest.approx(
        values(GaussianBase(0.5), TruncatedNegativeBinomial(0, 0.01), 1e-3)["exact"]
    )


def keys_of(typed_dict) -> tuple[frozenset, frozenset]:
    return typed_dict.__required_keys__, typed_dict.__optional_keys__


@pytest.mark.parametrize(
    "base, curve_deltas",
    [
        (GaussianBase(0.5), None),
        (DpsgdBase(2.0, 10, 0.5), [1e-3]),  # adds base["accountant"] and attack["curve"]
        # no known worst-case pair: no attack, its keys all there (None, `source` says why)
        (EventBase(dpa.ComposedDpEvent([dpa.LaplaceDpEvent(2.0), dpa.GaussianDpEvent(3.0)])), None),
    ],
)
def test_the_typed_sections_hold_exactly_their_declared_keys(base, curve_deltas):
    """Panel.base is a BaseInfo and Panel.attack an AttackInfo: every required key present,
    nothing outside the declared keys, with the declared value types; the bound sections are
    keyed by the registry's keys, their labels are Rigour values."""
    p = panel(base, Poisson(3.0), 1e-5, curve_deltas=curve_deltas)
    for section, typed in ((p.base, BaseInfo), (p.attack, AttackInfo)):
        required, optional = keys_of(typed)
        assert required <= set(section) <= required | optional, (set(section), typed)
        hints = typing.get_type_hints(typed)
        for key, value in section.items():
            assert _is_instance(value, hints[key]), (key, value, hints[key])
    assert ("accountant" in p.base) == isinstance(base, DpsgdBase)
    assert ("curve" in p.attack) == (curve_deltas is not None)
    assert tuple(p.upper) == BOUND_KEYS and tuple(p.labels) == BOUND_KEYS
    assert set(p.labels.values()) <= set(typing.get_args(Rigour))
    assert set(p.monotone_score) | set(p.reduced_game) <= set(BOUND_KEYS)
    if curve_deltas is not None:
        assert set(p.curves) == {"delta", *BOUND_KEYS} and p.curves["delta"] == curve_deltas


def _is_instance(value, hint) -> bool:
    """isinstance against a hint of the TypedDicts: X | None, list[X] (ints count as floats)."""
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    args = typing.get_args(hint)
    if typing.get_origin(hint) is list:
        return isinstance(value, list) and all(_is_instance(v, args[0]) for v in value)
    if args:  # a union
        return any(_is_instance(value, a) for a in args)
    return isinstance(value, hint)


def test_dpsgd_eps_b_is_the_tightest_accountant():
    """eps_B shown for a DP-SGD base is the smaller of its two valid accountants (RDP and the
    pessimistic PLD), whichever the base names; a Gaussian base keeps its closed form."""
    for accountant in ("rdp", "pld"):
        base = DpsgdBase(1.0, 200, 0.05, accountant)
        info = panel_module.base_info(base, 1e-5)
        by = {a: base.epsilon(1e-5, accountant=a) for a in ("rdp", "pld")}
        assert info["epsilon"] == pytest.approx(min(by.values()), rel=1e-12)
        assert info["accountant"] == min(by, key=by.__getitem__)
    assert by["pld"] < by["rdp"]  # here the PLD is tighter: it is the one shown with rdp named
    gauss = panel_module.base_info(GaussianBase(1.0), 1e-5)
    assert "accountant" not in gauss
    assert gauss["epsilon"] == pytest.approx(GaussianBase(1.0).epsilon(1e-5))
