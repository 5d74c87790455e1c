"""Threshold rules as small frozen strategy objects (keyword-only options, each on the rules it
applies to), the one place names become objects, and the old call forms for one release."""

import dataclasses
import warnings

import numpy as np
import pytest

from auditsel.auditing.lower import audit_scores
from auditsel.auditing.rules import (
    THRESHOLD_RULES,
    BonferroniAll,
    BonferroniGrid,
    MultiSplit,
    Split,
    threshold_rule,
)
from auditsel.errors import ConfigError


def games(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    member = rng.integers(0, 2, n).astype(np.int8)
    return rng.normal(1.2 * member, 1.0), member


def test_rules_are_frozen_keyword_only_and_carry_only_their_options():
    assert THRESHOLD_RULES == ("split", "bonferroni", "bonferroni_all", "multisplit")
    rule = Split(split_fraction=0.3, seed=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rule.seed = 5
    with pytest.raises(TypeError):
        Split(0.3)  # keyword-only
    with pytest.raises(TypeError):
        Split(splits=3)  # an option of multisplit only
    with pytest.raises(TypeError):
        BonferroniAll(split_fraction=0.5)  # no pilot, no split: no options
    assert {f.name for f in dataclasses.fields(MultiSplit)} == {"splits", "split_fraction", "seed"}
    assert {f.name for f in dataclasses.fields(BonferroniGrid)} == {
        "grid",
        "grid_size",
        "split_fraction",
        "seed",
    }
    assert [cls.name for cls in (Split, BonferroniGrid, BonferroniAll, MultiSplit)] == list(
        THRESHOLD_RULES
    )
    assert hash(BonferroniGrid(grid=[0.0, 1.0])) == hash(BonferroniGrid(grid=(0.0, 1.0)))


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: Split(split_fraction=0.0), "split_fraction"),
        (lambda: Split(split_fraction="half"), "split_fraction"),
        (lambda: Split(seed=-1), "seed"),
        (lambda: Split(seed=1.5), "seed"),
        (lambda: MultiSplit(splits=0), "splits"),
        (lambda: BonferroniGrid(grid=[]), "grid"),
        (lambda: BonferroniGrid(grid=[[0.0, 1.0]]), "grid"),
        (lambda: BonferroniGrid(grid=[0.0, float("nan")]), "grid"),
        (lambda: BonferroniGrid(grid_size=0), "grid_size"),
        (lambda: BonferroniGrid(grid_size=10**6), "grid_size"),
    ],
)
def test_bad_options_name_their_field(make, field):
    with pytest.raises(ConfigError) as err:
        make()
    assert err.value.field == field and len(str(err.value).splitlines()) == 1


def test_names_map_to_rules_in_one_place():
    # a config or the CLI carries every option; only those of the named rule are kept
    options = dict(split_fraction=0.3, grid_size=7, grid=None, splits=5, seed=2)
    assert threshold_rule("split", **options) == Split(split_fraction=0.3, seed=2)
    assert threshold_rule("multisplit", **options) == MultiSplit(
        splits=5, split_fraction=0.3, seed=2
    )
    assert threshold_rule("bonferroni", **options) == BonferroniGrid(
        grid_size=7, split_fraction=0.3, seed=2
    )
    assert threshold_rule("bonferroni_all", **options) == BonferroniAll()
    rule = MultiSplit(splits=3)
    assert threshold_rule(rule) is rule
    with pytest.raises(ConfigError, match="eps_best_threshold"):
        threshold_rule("best")
    with pytest.raises(ConfigError, match="split, bonferroni, bonferroni_all, multisplit"):
        threshold_rule("max")
    with pytest.raises(ConfigError, match="rule"):
        threshold_rule(3)


def test_audit_takes_rule_objects_and_records_their_options():
    s, m = games()
    bound = audit_scores(s, m, 1e-5, rule=MultiSplit(splits=5, seed=3))
    assert bound.threshold_rule == "multisplit"
    assert bound.to_dict()["threshold_options"] == {"splits": 5, "split_fraction": 0.5, "seed": 3}
    # the split's seed is a real option: other seeds, other pilots (each valid)
    picks = {audit_scores(s, m, 1e-5, rule=Split(seed=k)).threshold for k in range(4)}
    assert len(picks) > 1


def test_a_rules_name_works_and_the_old_option_keywords_are_refused():
    """A rule's name is its default rule; the option keywords of 0.2 (split_fraction=, seed=,
    ...) are a TypeError naming them: the options live on the rule object."""
    s, m = games()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a rule's name is not deprecated
        by_name = audit_scores(s, m, 1e-5, rule="bonferroni_all")
    assert by_name == audit_scores(s, m, 1e-5, rule=BonferroniAll())
    for old in ("split_fraction", "seed", "splits", "threshold_grid", "grid_size"):
        with pytest.raises(TypeError, match=rf"unexpected keyword argument '{old}'"):
            audit_scores(s, m, 1e-5, rule="split", **{old: 1})
    for rule, field in [(MultiSplit, "splits"), (Split, "split_fraction"), (Split, "seed")]:
        with pytest.raises(ConfigError) as err:
            rule(**{field: 1.0 if field == "split_fraction" else -1 if field == "seed" else 0})
        assert err.value.field == field
