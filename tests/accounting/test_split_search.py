"""The split search (issue 37 item 3, randomised split orders): heavy label buckets split into
equal pieces that the score ranks apart. The pieces are exact divisions of their bucket, the
certified value is at most the exact eps of the score it found (point values, brute force over
the winner's law), never above a rigorous upper bound for any law of K, only on atomless
bases, and it closes the Laplace base's interval (26.5% of the upper end before)."""

import numpy as np
import pytest
from brute_force import pair_epsilon

from auditsel import (
    FiniteOutputBase,
    LaplaceBase,
    Poisson,
    TruncatedNegativeBinomial,
    tuning_interval,
)
from auditsel.accounting.attack import attack, split_epsilons, splits_apply, with_one_run
from auditsel.accounting.interval import interval_attack
from auditsel.accounting.registry import BOUNDS
from auditsel.accounting.score_search import (
    SPLIT_MASS,
    LabelLaws,
    ScoreSearch,
    order_winner_laws,
    split_buckets,
    split_pieces,
)
from auditsel.mechanisms import GaussianBase


def _laws(p, q) -> LabelLaws:
    p, q = (np.asarray(v, dtype=np.longdouble) / np.sum(v) for v in (p, q))
    upper = tuple(v.astype(float) * (1 + 1e-15) for v in (p, q))
    cuts = np.arange(len(p) - 1, dtype=float) + 0.5
    return LabelLaws((p, q), upper, (1e-17, 2e-17), (0.0, 0.0), cuts)


def test_pieces_are_exact_divisions_of_their_bucket():
    laws = _laws([0.6, 0.1, 0.05, 0.25], [0.25, 0.1, 0.05, 0.6])
    pieces = split_pieces(laws)
    assert list(pieces > 1) == [True, True, False, True]  # the buckets above SPLIT_MASS
    assert np.all(pieces & (pieces - 1) == 0)  # powers of two
    out = split_buckets(laws, pieces)
    assert len(out) == int(np.sum(pieces))
    idx = np.repeat(np.arange(len(laws)), pieces)
    for b in (0, 1):
        back = np.zeros(len(laws), dtype=np.longdouble)
        np.add.at(back, idx, out.laws[b])
        assert np.array_equal(back, laws.laws[b])  # no round-off: each piece is exact
        assert np.all(out.upper[b] * pieces[idx] == laws.upper[b][idx])
    assert out.error == laws.error
    with pytest.raises(ValueError, match="power of two"):
        split_buckets(laws, [3, 1, 1, 1])


def test_light_buckets_are_not_split():
    laws = _laws(np.full(20, 0.05), np.linspace(1, 1.2, 20))
    assert np.all(split_pieces(laws) == 1) and SPLIT_MASS > 0.05


@pytest.mark.parametrize("law", [Poisson(10.0), TruncatedNegativeBinomial(1.0, 0.1)])
def test_the_certified_split_value_is_the_exact_value_of_its_score_or_below(law):
    """The split search's certified eps against the exact eps of the winner's law of the order
    it found (point values on the pieces): never above it, and within 1e-6 of it."""
    laws = _laws([0.55, 0.05, 0.1, 0.3], [0.25, 0.05, 0.1, 0.6])
    split = split_buckets(laws, split_pieces(laws))
    for delta in (1e-3, 1e-5):
        found = ScoreSearch(split, law).best([delta])[0]
        a, b = order_winner_laws(tuple(np.asarray(v, float) for v in split.laws), found.order, law)
        exact = pair_epsilon(a, b, delta)
        assert found.epsilon <= exact + 1e-9
        assert found.epsilon == pytest.approx(exact, abs=1e-6)


def test_splits_apply_to_atomless_bases_only():
    assert splits_apply(LaplaceBase(1.0)) and splits_apply(GaussianBase(1.0))
    assert not splits_apply(FiniteOutputBase((0.9, 0.1), (0.1, 0.9)))


def test_the_laplace_interval_closes_and_stays_below_every_bound():
    """[any score](docs/findings/any-score.md)'s Laplace row, b = 1, TNB(1, 0.1), delta 1e-5:
    the interval was [1.8239, 2.4804] (26.5%); the split score finds more than 2.4 and the
    width is below 2% of the upper end, the lower end below every rigorous bound."""
    pair, law, delta = LaplaceBase(1.0), TruncatedNegativeBinomial(1.0, 0.1), 1e-5
    value = interval_attack(pair, law, [delta])
    assert value.method == "split_search" and value.score is None
    assert value.epsilon > 2.4 > max(value.monotone or (0.0,))
    iv = tuning_interval(pair, law, delta)
    assert iv.lower == value.epsilon and "split" in iv.lower_source
    assert iv.width / iv.upper < 0.02
    for b in BOUNDS:
        if b.supports(pair, law) and b.rigour(pair) == "rigorous":
            assert b.epsilon(pair, law, delta) >= value.epsilon, b.key


def test_with_one_run_takes_the_largest_and_keeps_the_unsplit_score():
    """The split value is recorded beside the unsplit search's; the interval's attack takes the
    larger, and where the split is smaller the playable score stays."""
    raw = attack(LaplaceBase(1.0), TruncatedNegativeBinomial(1.0, 0.1), [1e-5])
    assert raw.split is not None and raw.split[0] > raw.epsilon and raw.score is not None
    merged = with_one_run(raw)
    assert merged.epsilon == max(raw.split[0], raw.epsilon, (raw.one_run or (0.0,))[0])
    low = with_one_run(type(raw)(**{**raw.__dict__, "split": (0.0,)}))
    assert low.method == raw.method and low.score is raw.score
    # the certified curve includes the split search's: at the value's eps it reaches delta
    assert merged.delta([merged.epsilon * 0.999])[0] > 1e-5


def test_no_split_where_no_bucket_is_heavy():
    """A Gaussian base's buckets hold about 2% each: nothing is split, nothing recorded."""
    value = attack(GaussianBase(1.0), Poisson(10.0), [1e-5])
    assert value.split is None
    assert split_epsilons(value._search, Poisson(10.0), np.array([1e-5]), [0.0]) is None


def test_a_subnormal_piece_of_an_upper_bound_is_rounded_up():
    """Dividing by a power of two is exact unless the quotient is subnormal: the pieces of an
    upper bound of 3e-310 are rounded up, so n pieces still bound the bucket."""
    laws = _laws([0.5, 0.5], [0.5, 0.5])
    laws = LabelLaws(
        laws.laws, (np.array([3e-310, 0.5]), laws.upper[1]), laws.error, laws.noise, laws.cuts
    )
    out = split_buckets(laws, [64, 1])
    assert np.sum(out.upper[0][:64]) >= 3e-310  # (3e-310 / 64 rounds down)
