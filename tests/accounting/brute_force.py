"""Brute-force lower bounds on the tuning run's privacy for finite pairs, shared by the
soundness tests of the upper bounds (test_sound_every_law, test_layered_profile,
test_score_dual, test_two_sided).

The truth is bounded from below by brute force over every score order of a finite pair and over
every two-piece split of one output between two ranks (a randomised score), with the exact
winner law of each (`order_winner_laws`, the K = 0 output common to both sides): each is an
exact post-processing game, so its eps (or delta) is at most the tuning run's."""

import itertools
import math

import numpy as np

from auditsel import (
    Binomial,
    FiniteOutputBase,
    FinitePmf,
    Point,
    Poisson,
    TruncatedNegativeBinomial,
    TwoPoint,
)
from auditsel.accounting.score_search import order_winner_laws
from auditsel.rounds import RoundsLaw

__all__ = [
    "LAWS",
    "PAIRS",
    "brute_force_delta",
    "brute_force_truth",
    "pair_epsilon",
    "random_pairs",
    "splits",
]


def pair_epsilon(a: np.ndarray, b: np.ndarray, delta: float) -> float:
    """Exact eps of a pair of pmfs: the likelihood-ratio prefix sets, both directions."""
    best = 0.0
    for x, y in ((a, b), (b, a)):
        with np.errstate(divide="ignore"):
            order = np.argsort(-(np.log(x) - np.log(y)), kind="stable")
        u, v = np.cumsum(x[order]), np.cumsum(y[order])
        live = u > delta
        if np.any(live & (v <= 0)):
            return math.inf
        if np.any(live):
            best = max(best, float(np.max(np.log(u[live] - delta) - np.log(v[live]))))
    return best


def splits(p: np.ndarray, q: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The pair itself and every split of one output into two ranks (shares t, 1 - t)."""
    out = [(p, q)]
    for j in range(len(p)):
        for t in (0.1, 0.5, 0.9):
            out.append(
                (
                    np.concatenate([np.delete(p, j), [t * p[j], (1 - t) * p[j]]]),
                    np.concatenate([np.delete(q, j), [t * q[j], (1 - t) * q[j]]]),
                )
            )
    return out


#: the winner laws of each (pair, law) met in this session, keyed by their reprs (a FinitePmf's
#: table is a dict: unhashable; a repr writes every float to its round-trip digits)
_WINNER_LAWS: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]] = {}


def _winner_laws(pair: FiniteOutputBase, law: RoundsLaw) -> list[tuple[np.ndarray, np.ndarray]]:
    """The exact winner laws (a, b) of every order of every split of the pair, computed once per
    session for each (pair, law): the soundness tests ask for the same settings at several
    deltas and in several files."""
    key = (repr(pair), repr(law))
    if key not in _WINNER_LAWS:
        _WINNER_LAWS[key] = [
            order_winner_laws((p, q), order, law)
            for p, q in splits(np.asarray(pair.p), np.asarray(pair.q))
            for order in itertools.permutations(range(len(p)))
        ]
    return _WINNER_LAWS[key]


def brute_force_truth(pair: FiniteOutputBase, law: RoundsLaw, delta: float) -> float:
    """A lower bound on the tuning run's eps at `delta`: the best score over all orders of the
    outputs and of every two-piece split."""
    return max((pair_epsilon(a, b, delta) for a, b in _winner_laws(pair, law)), default=0.0)


def brute_force_delta(pair: FiniteOutputBase, law: RoundsLaw, eps: float) -> float:
    """A lower bound on the tuning run's delta(eps): the best order of the outputs and of every
    two-piece split, both directions."""
    best = 0.0
    for a, b in _winner_laws(pair, law):
        best = max(
            best,
            float(np.maximum(a - math.exp(eps) * b, 0).sum()),
            float(np.maximum(b - math.exp(eps) * a, 0).sum()),
        )
    return best


def random_pairs(
    count: int, seed: int, sizes: tuple[int, int] = (2, 4), concentration: float = 0.7
) -> list[FiniteOutputBase]:
    """`count` random finite pairs (seeded): sizes[0] to sizes[1] - 1 outputs, each pmf a
    Dirichlet(`concentration`) draw floored at 1e-3 and renormalised."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(*sizes))
        p, q = (np.maximum(rng.dirichlet(np.full(n, concentration)), 1e-3) for _ in range(2))
        out.append(FiniteOutputBase(tuple(p / p.sum()), tuple(q / q.sum())))
    return out


#: the laws of the every-law soundness tests
LAWS = [
    Poisson(3.0),
    Poisson(10.0),
    TruncatedNegativeBinomial(1.0, 0.2),
    TruncatedNegativeBinomial(0.0, 0.1),
    TruncatedNegativeBinomial(-0.5, 0.05),
    Binomial(9, 0.846),
    Binomial(30, 0.5),
    TwoPoint(8, 0.3),
    Point(6),
    FinitePmf({0: 0.1, 3: 0.5, 9: 0.4}),
]


def _rr(eps: float) -> FiniteOutputBase:
    e = math.exp(eps)
    return FiniteOutputBase((e / (1 + e), 1 / (1 + e)), (1 / (1 + e), e / (1 + e)))


#: the pairs of the every-law soundness tests: two binary ones (one randomized response at
#: eps 0.5) and a three-output one
PAIRS = [
    FiniteOutputBase((0.9, 0.1), (0.1, 0.9)),
    _rr(0.5),
    FiniteOutputBase((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)),
]
