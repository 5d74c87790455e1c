"""The attack value: the exact epsilon of one concrete attack on the worst-case pair, a valid
LOWER bound on the tuning run's epsilon with no Monte Carlo error; by default the worst score
found (`accounting.score_search`).

Contract. For a mechanism pair (`auditsel.mechanisms`, a Laplace base of `auditsel.events`, or a
dp_accounting DpEvent that is one of them), a law of K (`auditsel.rounds`) and delta in [0, 1),
`attack_epsilon(pair, law, delta)` returns eps_att with ::

    eps_att <= eps_T,s(delta) := inf{eps >= 0 : delta_T,s(eps) <= delta},

where delta_T,s is the privacy curve (max over both directions) of the tuning run T of
[XWW24] Algorithm 2 on the pair that plays the score s returned with the value
(`AttackValue.score`): K ~ law runs of the base, the best-scored run released, a fixed output
when K = 0. A guarantee for the tuning run holds for every score and every pair of neighbouring
data sets, so every rigorous upper bound of `accounting.registry` ([PS22], [KRW24]) is >= eps_att.

Which scores (`scores`).

* "any" (the default): the best of the monotone attack below and every score whose lower sets
  are intervals of the run's label order ("extremes") or complements of intervals ("middle"),
  over `resolution` merged buckets of the label, both directions: an exact dynamic program
  (`accounting.score_search`, which has the argument). The label laws it searches: a Gaussian
  base (and DP-SGD with tau = 1 or a Gaussian DpEvent: one Gaussian of mu = sqrt(N)/sigma)
  bucketed in its output x (label mu x - mu^2/2, masses as in A1); a finite-output base output
  by output (`finite_step`); DP-SGD and Laplace bases the labelled run below. On atomless bases
  (`splits_apply`) the search also runs with every heavy bucket split into equal pieces ranked
  apart (`split_epsilons`; by Lyapunov's theorem a deterministic score), kept in
  `AttackValue.split`.
* Finite-output bases, for the interval's lower end only (`with_one_run`; `AttackValue.coin`):
  the coin search (`accounting.coin_search`), a lower bound for the base with a released coin,
  NOT for the finite pair releasing its output alone (`coin_search.COIN_ASSUMPTION`);
  `attack_epsilon` never includes it.
* "monotone": the largest (or smallest) label wins, [XWW24]'s assumption (the reduced game's
  value is exact only under it).

Which monotone attack.

* Pairs with `reduction_is_exact` (Gaussian, finite-output, DP-SGD with tau = 1): the exact
  epsilon of the released winner under the pair's own score,
  `exact.exact_epsilon(winner_law(pair.reduced(), law), delta)`.
* DP-SGD with Poisson subsampling (tau < 1): the worst-case run of `games.worst_case` (each step
  releases x = b B + sigma Z, B ~ Bernoulli(tau): the tight dominating pair of the subsampled
  Gaussian under add/remove). The run with the largest ("largest") or smallest ("smallest")
  label of its N outputs is released; the value is the largest of the four epsilons (two
  strategies, both directions).
* Laplace bases (`events.LaplaceBase`, `events.laplace_steps`): the same on N steps x = B + L,
  L ~ Laplace(0, b): p = Lap(0, b), q = (1 - tau) Lap(0, b) + tau Lap(1, b), the dominating
  pair of the subsampled Laplace mechanism of sensitivity 1 (dp_accounting's PLD pair). Its loss
  `l(x) = log(1 - tau + tau e^((|x| - |x - 1|)/b))` is non-decreasing and bounded; bucket masses
  are sums of nonnegative closed-form terms on each side of 0 (A1 holds with `STEP_REL`).
* Other event bases: no worst-case pair is known; `attack_applies` says so (the interval's
  lower end is then 0).

The label. A step's output x has the privacy loss l(x) = log(1 - tau + tau e^((2x-1)/(2 sigma^2)))
(increasing in x). Bucket i holds the outputs whose loss rounds to i h (the top bucket also holds
everything above the cap of `dpsgd_step`); the run's label is the sum of its steps' bucket
indices modulo the FFT length L, read in a window [lo, lo + L) holding all but about 1e-30 of
either law. The label is a deterministic function of the run's outputs, so the law of the
winner's label is a post-processing of (T(X), T(X')) and by the data-processing inequality a
lower bound on its curve is one on delta_T. Its laws: the bucket masses of one step, their
N-fold circular convolution, then the winner's law G(F_j) - G(F_j-1) ([XWW24] Theorem 2; G the
pgf of K, F the label's cdf in selection order), on X and X'. Outputs with an infinite loss are
atoms at -inf / +inf.

Round-off. The value is a lower bound in floating point too: every error is bounded and charged.

1. Steps (A1). One step's bucket masses have relative error at most rho = `STEP_REL`, or are
   below `_FLOOR`. So the normalised computed step law p' and the true p satisfy p' <= k1 p and
   p <= k1 (p' + _FLOOR), k1 = (1 + rho) / (1 - rho - M _FLOOR) (M buckets), and the N-fold
   convolutions r' (computed steps) and r (true) satisfy, entry by entry, ::

       r' <= k r,   r <= k (r' + N _FLOOR'),   k = k1^N,

   hence ||r' - r||_1 <= e_s := 2 k (k - 1) + k N _FLOOR' L.

2. Convolution (A2). One FFT, an N-th power by repeated squaring and one inverse FFT in
   longdouble (unit round-off u). With c_F = `_FFT_SAFETY` u log2(L) the relative 2-norm error of
   one transform (Higham 2002, Theorem 24.2) and 8 N u that of the power, the computed r~
   satisfies ::

       ||r~ - r'||_2 <= e_2 := f + c_F (1 + f),  f = g (N c_F ||p'||_2 + 8 N u),
       g = exp(N c_F sqrt(L) ||p'||_2),   and ||r~ - r'||_1 <= e_F := sqrt(L) e_2.

   Negatives are set to 0 and the vector normalised by its sum S: the law used, r*, has
   ||r* - r||_1 <= e_r := e_s + 2 e_F, and r <= k (S r* + e_2 + N _FLOOR') entry by entry.
   Two more true upper bounds: the loss relation (every output of bucket i has its loss in
   [i h - h/2 - m-, i h + h/2 + m+], so a run labelled s satisfies P(s) <= e^-(s h - N(h/2 +
   m-)) Q(s) and Q(s) <= e^(s h + N(h/2 + m+)) P(s), plus the mass of runs with an unbounded
   step and the wrapped tail), and tilting (w_i = p_i e^(theta i h) / Z, theta = 1 on X, -1 on
   X': conv^N(p)(s) = Z^N e^(-theta s h) conv^N(w)(s), computed with its own e_2(w)), which
   knows the far tail to the FFT's relative precision. Each entry takes the smallest.

3. Winner (A3). K runs are K independent draws, so the winner's law under r* is within L1
   distance c = E[K] e_r of the one under r. The winner's masses under r* are enclosed entry by
   entry (cumulative sums with relative error rho_F = 2 (m + 2) u + u64; the pgf, its complement
   and derivative within `LAW_REL`; each mass within G(F_j) - G(F_j-1) and within the mean
   value bracket r_j [G'(F_j-1), G'(F_j)]). The true winner's masses are also bounded directly:
   A_j <= r_hi_j G'(min(1, F*_j + e_r)).

The hockey stick. For the direction "A over B", with a_lo the lower bounds of the r* winner A*,
b* the upper bounds of the r* winner B* and b_t those of the true winner B, every set S gives ::

    H_{e^eps}(A || B) >= A(S) - e^eps B(S),   A(S) >= a_lo(S) - c_A,
    B(S) <= min(b_t(S), min(b*, b_t)(S) + c_B).

With S_k the k labels of largest a_lo / min(b*, b_t) (labels whose a_lo is below the FFT's noise
left out), U_k = a_lo(S_k) - c_A and V_k the bound on B(S_k) (prefix sums rounded down / up),
delta_low(eps) = max(0, max_k (U_k - e^eps V_k)) <= delta_T(eps), and ::

    eps_att(delta) = max(0, max_k log((U_k - delta) / V_k))     (over k with U_k > delta)

is the smallest eps with delta_low(eps) <= delta. The K = 0 output adds nothing for eps >= 0.

Assumptions A1-A3 are the only ones: the accuracy of scipy's log_ndtr, of
`accounting.portable`'s functions and of pocketfft, each with a safety factor (tests compare
them with mpmath and direct convolution).

The same number on every CPU: the elementary functions are `accounting.portable`'s, the FFT is
pocketfft in longdouble on one thread, sums run in numpy's fixed order, and decisions read only
entries above the FFT's round-off (`score_search.informative_masses`); only the law of K's pgf
varies, about 1e-12 on the value.

How tight. The value converges to the likelihood-ratio attack's as the label step h
(`LABEL_STEP`) -> 0; the score search loses what merging the labels into `resolution` buckets
loses (a finer merge can only raise the value). The round-off charged (`AttackValue.slack`, in
delta units) matters only for deltas near or below it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import cast, overload

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr, ndtri

from auditsel.accounting import portable as pm
from auditsel.accounting.coin_search import COIN_ASSUMPTION, CoinScore, coin_search
from auditsel.accounting.exact import EPS_CAP, exact_epsilon, privacy_curve
from auditsel.accounting.score_search import (
    DEFAULT_RESOLUTION,
    LAW_REL,  # noqa: F401  (A3's pgf error, read with this module's constants)
    TAIL,
    U64,
    ULD,
    LabelLaws,
    ScoreSearch,
    SearchResult,
    cumulative,
    delta_tail,
    enclose_order,
    enclose_winner,
    merge_buckets,
    order_winner_laws,
    split_buckets,
    split_pieces,
    true_winner_upper,
)
from auditsel.accounting.score_search import direction_pieces as _direction_pieces
from auditsel.accounting.score_search import pieces_deltas as _deltas_at
from auditsel.accounting.score_search import pieces_epsilons as _epsilons
from auditsel.errors import ConfigError, choice, integer, number
from auditsel.events import as_pair, laplace_steps
from auditsel.mechanisms import DpsgdBase, FiniteOutputBase, GaussianBase
from auditsel.numerics import FloatArray, check_deltas
from auditsel.roles import MechanismPair
from auditsel.rounds import Point, RoundsLaw
from auditsel.selection import BucketScore, FiniteWinner, winner_law

#: A1: relative error of one bucket's mass (quadrature or log-cdf difference), with margin
STEP_REL = 1024 * U64
#: A1: masses below this may underflow (to 0 or a subnormal)
_FLOOR = 1e-290
#: A2: c_F = _FFT_SAFETY u log2(L), the relative 2-norm error of one (inverse) real FFT
_FFT_SAFETY = 32.0
#: the window holds all but this much of either law (Chernoff); only the tails wrap around
_WINDOW_TAIL = 1e-30
#: the step's cap: outputs beyond 1 + _CAP_SIGMAS sigma share the top bucket
_CAP_SIGMAS = 12.0
STRATEGIES = ("largest", "smallest")

_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(12)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


# --- one step ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepLaws:
    """One step's output, labelled: the law of its label under X (`p`) and X' (`q`).

    Finite labels are `start`, `start` + 1, ... (label value = index * `step`); outputs with an
    infinite loss are atoms: `p_minus_inf` (mass on X of outputs impossible on X') and
    `q_plus_inf` (mass on X' of outputs impossible on X). Every computed mass is within relative
    error `rel_error` of the true one, or below `_FLOOR` (module docstring, item 1)."""

    start: int
    step: float
    p: np.ndarray
    q: np.ndarray
    p_minus_inf: float = 0.0
    q_plus_inf: float = 0.0
    rel_error: float = STEP_REL
    #: (below, above): every output of bucket i has its loss in [(i - 1/2) h - below,
    #: (i + 1/2) h + above], except the outputs counted in `unbounded`
    loss_margin: tuple[float, float] = (math.inf, math.inf)
    #: (P-mass of outputs whose loss is not bounded below as above, Q-mass of those not
    #: bounded above)
    unbounded: tuple[float, float] = (1.0, 1.0)
    #: the buckets' ends in output space where the step has one (len(p) + 1 values)
    edges: np.ndarray | None = field(default=None, repr=False, compare=False)


def _normal_masses(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P[a < Z <= b] for a standard normal Z, a < b elementwise (a = -inf, b = inf allowed; pass
    the ends in longdouble: a narrow interval's width must not be rounded), each to a relative
    error well inside `STEP_REL` (A1): 12-point Gauss-Legendre quadrature of the
    density in extended precision on narrow intervals (width (|midpoint| + 1) <= 0.5, where the
    log-density varies by at most about 0.5), the log-cdf difference on the others (upper tail
    by symmetry; the two cdfs then differ by a factor e^0.5 or more)."""
    a_ld = np.asarray(a, dtype=np.longdouble)
    b_ld = np.asarray(b, dtype=np.longdouble)
    a, b = a_ld.astype(float), b_ld.astype(float)
    out = np.zeros(np.broadcast(a, b).shape)
    finite = np.isfinite(a) & np.isfinite(b)
    mid = np.where(finite, 0.5 * (a + b), 0.0)
    half = np.where(finite, 0.5 * (b - a), np.inf)
    narrow = finite & (2 * half * (np.abs(mid) + 1) <= 0.5)
    if np.any(narrow):
        # phi(m + h t) = phi(m) exp(-(m h t + h^2 t^2 / 2)): phi(m) in extended precision once
        # per interval, the small second factor in float64 (its argument is below 0.3)
        lo_ld, hi_ld = a_ld[narrow], b_ld[narrow]
        m_ld, h_ld = (lo_ld + hi_ld) / 2, (hi_ld - lo_ld) / 2
        head = pm.exp(-m_ld * m_ld / 2 - np.longdouble(_LOG_SQRT_2PI)) * h_ld
        m, h = m_ld.astype(float)[:, None], h_ld.astype(float)[:, None]
        t = _GL_NODES[None, :]
        tail = np.sum(_GL_WEIGHTS[None, :] * pm.exp(-(m * h * t + 0.5 * (h * t) ** 2)), axis=1)
        out[narrow] = head.astype(float) * tail
    wide = ~narrow
    if np.any(wide):
        lo, hi = a[wide], b[wide]
        upper = lo > 0  # both ends above 0: P[-b <= Z < -a]
        u = np.where(upper, -hi, lo)
        v = np.where(upper, -lo, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            lv, lu = log_ndtr(v), log_ndtr(u)
            out[wide] = np.where(lu < lv, pm.exp(lv) * -pm.expm1(lu - lv), 0.0)
    return np.maximum(out, 0.0)


#: the default label step h (module docstring, "How tight")
LABEL_STEP = 1e-3


def _bucketed(
    i_lo: int,
    h: float,
    tau: float,
    inner: np.ndarray,
    masses: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
    loss: Callable[[np.ndarray], np.ndarray],
) -> StepLaws:
    """The bucketed step of a worst-case run (`dpsgd_step`, `laplace_step`): bucket i_lo + j
    holds the outputs in (x_j, x_j+1], x = (-inf, `inner`, inf), with masses(a, b, shift) =
    P[a < shift + noise <= b] (p: shift 0; q: (1 - tau) p + tau shift 1); `loss_margin` and
    `unbounded` from each bucket's loss range at its computed ends (a 1e-12 relative fuzz for
    their rounding)."""
    x = np.concatenate([[-np.inf], inner, [np.inf]])
    a, b = x[:-1], x[1:]
    p, m1 = masses(a, b, 0), masses(a, b, 1)
    q = (1 - tau) * p + tau * m1 if tau < 1 else m1
    idx = np.arange(i_lo, i_lo + len(p))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        loss_a, loss_b = loss(a), loss(b)
    has = (p > 0) | (q > 0)
    fin_a, fin_b = np.isfinite(loss_a), np.isfinite(loss_b)
    fuzz_a = 1e-12 * (1 + np.abs(np.where(fin_a, loss_a, 0.0)))
    fuzz_b = 1e-12 * (1 + np.abs(np.where(fin_b, loss_b, 0.0)))
    below = float(np.max(((idx - 0.5) * h - loss_a + fuzz_a)[has & fin_a], initial=0.0))
    above = float(np.max((loss_b - (idx + 0.5) * h + fuzz_b)[has & fin_b], initial=0.0))
    unbounded = (
        float(np.sum(p[has & ~fin_a])) * (1 + STEP_REL),
        float(np.sum(q[has & ~fin_b])) * (1 + STEP_REL),
    )
    margin = (max(below, 0.0), max(above, 0.0))
    return StepLaws(i_lo, h, p, q, 0.0, 0.0, STEP_REL, margin, unbounded, x)


def dpsgd_step(noise_multiplier: float, sample_rate: float, label_step: float) -> StepLaws:
    """The bucketed step of the worst-case DP-SGD run (module docstring): p = N(0, sigma^2),
    q = (1 - tau) N(0, sigma^2) + tau N(1, sigma^2), labelled by the rounded loss l(x)."""
    s, tau, h = float(noise_multiplier), float(sample_rate), float(label_step)

    def loss(x: np.ndarray) -> np.ndarray:
        z = (2 * x - 1) / (2 * s * s)
        return z if tau >= 1 else pm.logaddexp(math.log1p(-tau), math.log(tau) + z)

    low = math.log1p(-tau) if tau < 1 else -math.inf  # infimum of l
    l_cap = float(loss(np.array(1.0 + _CAP_SIGMAS * s)))
    i_hi = math.ceil(l_cap / h)
    if tau < 1:
        i_lo = math.floor(low / h + 0.5)  # the bucket holding the infimum
    else:
        x_floor = -_CAP_SIGMAS * s  # N(0, s^2) below -_CAP_SIGMAS s: in the bottom bucket
        i_lo = math.floor((2 * x_floor - 1) / (2 * s * s) / h)
    edges = (np.arange(i_lo + 1, i_hi + 1) - 0.5) * h  # inner bucket boundaries (losses)
    if tau >= 1:
        inner = s * s * edges + 0.5  # l(x) = (2x - 1) / (2 s^2)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            # l(x) = v  <=>  x = s^2 (log(expm1(v) + tau) - log(tau)) + 1/2   (v > log(1 - tau))
            inner = s * s * (pm.log(pm.expm1(edges) + tau) - math.log(tau)) + 0.5
        inner = np.where(edges > low, inner, -np.inf)
    s_ld = np.longdouble(s)

    def masses(a: np.ndarray, b: np.ndarray, shift: int) -> np.ndarray:
        a_ld, b_ld = a.astype(np.longdouble), b.astype(np.longdouble)
        return _normal_masses((a_ld - shift) / s_ld, (b_ld - shift) / s_ld)

    return _bucketed(i_lo, h, tau, np.maximum.accumulate(inner), masses, loss)


def _laplace_masses(a: np.ndarray, c: np.ndarray, scale: float) -> np.ndarray:
    """P[a < X <= c] for X ~ Laplace(0, scale), a <= c elementwise (infinite ends allowed): the
    sum of the nonnegative pieces below and above 0, each in closed form without cancellation
    (module docstring, Laplace bases)."""
    lo_n, hi_n = np.minimum(a, 0.0), np.minimum(c, 0.0)
    lo_p, hi_p = np.maximum(a, 0.0), np.maximum(c, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        neg = 0.5 * pm.exp(hi_n / scale) * -pm.expm1((lo_n - hi_n) / scale)
        pos = 0.5 * pm.exp(-lo_p / scale) * -pm.expm1(-(hi_p - lo_p) / scale)
    return np.where(hi_n > lo_n, neg, 0.0) + np.where(hi_p > lo_p, pos, 0.0)


def laplace_step(noise_multiplier: float, sample_rate: float, label_step: float) -> StepLaws:
    """The bucketed step of the worst-case Laplace run (module docstring): p = Lap(0, b),
    q = (1 - tau) Lap(0, b) + tau Lap(1, b), labelled by the rounded loss l(x)."""
    b, tau, h = float(noise_multiplier), float(sample_rate), float(label_step)

    def loss(x: np.ndarray) -> np.ndarray:
        z = (np.abs(x) - np.abs(x - 1.0)) / b  # (2x - 1)/b on [0, 1], -+1/b beyond
        return cast(
            "np.ndarray", z if tau >= 1 else pm.logaddexp(math.log1p(-tau), math.log(tau) + z)
        )

    l_lo, l_hi = float(loss(np.array(0.0))), float(loss(np.array(1.0)))
    i_lo, i_hi = math.floor(l_lo / h + 0.5), math.floor(l_hi / h + 0.5)
    edges = (np.arange(i_lo + 1, i_hi + 1) - 0.5) * h  # inner bucket boundaries (losses)
    if tau >= 1:
        inner = (b * edges + 1.0) / 2
    else:  # l(x) = v  <=>  x = (b (log(expm1(v) + tau) - log(tau)) + 1) / 2, v > l_lo
        inner = (b * (pm.log(pm.expm1(edges) + tau) - math.log(tau)) + 1.0) / 2
    return _bucketed(
        i_lo,
        h,
        tau,
        np.clip(np.maximum.accumulate(inner), 0.0, 1.0),
        lambda lo, hi, shift: _laplace_masses(lo - shift, hi - shift, b),
        lambda v: loss(np.clip(v, -1.0, 2.0)),  # l is constant outside [0, 1]
    )


def finite_step(p: ArrayLike, q: ArrayLike, label_step: float) -> StepLaws:
    """A finite-output step (outputs y with masses p(y) on X, q(y) on X') labelled by its rounded
    loss log q(y)/p(y); outputs with p = 0 or q = 0 are the +inf / -inf atoms."""
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    both = (p > 0) & (q > 0)
    idx = np.zeros(len(p), dtype=np.int64)
    idx[both] = np.floor(pm.log(q[both] / p[both]) / label_step + 0.5).astype(np.int64)
    start = int(idx[both].min()) if np.any(both) else 0
    size = int(idx[both].max()) - start + 1 if np.any(both) else 1
    pp = np.bincount(idx[both] - start, weights=p[both], minlength=size)
    qq = np.bincount(idx[both] - start, weights=q[both], minlength=size)
    return StepLaws(
        start,
        float(label_step),
        pp,
        qq,
        float(p[(p > 0) & (q == 0)].sum()),
        float(q[(q > 0) & (p == 0)].sum()),
        4 * U64,  # sums of the given masses
        (1e-12, 1e-12),  # log q/p rounded: its bucket holds it up to that
        (0.0, 0.0),  # infinite losses are the atoms, not in a finite bucket
    )


# --- N steps ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunLaws:
    """The law of one run's label under X and X' on positions [-inf, finite..., +inf].

    `laws[b]` (longdouble, normalised) on the positions; position 1 + t holds the label index
    `start` + t (label value = index * `step`). Against the true law of the label, each entry
    is at most bulk[b] r* + entry_error[b], and the whole vector is within L1 distance
    `error[b]` (module docstring, items 1 and 2). `margin`, `unbounded` and `tail` carry the loss
    relation of item 2 (`_true_upper`)."""

    start: int
    step: float
    laws: tuple[np.ndarray, np.ndarray]
    error: tuple[float, float]
    entry_error: tuple[float, float] = (0.0, 0.0)
    bulk: tuple[float, float] = (1.0, 1.0)
    margin: tuple[float, float] = (math.inf, math.inf)
    unbounded: tuple[float, float] = (1.0, 1.0)
    tail: float = 1.0
    fft_length: int = 0
    #: per law, the 2-norm of the FFT's round-off (entries below it are noise)
    noise: tuple[float, float] = (0.0, 0.0)
    #: per law, upper bounds on the true finite-label masses from the tilted convolution
    tilted: tuple[np.ndarray, ...] | None = None

    def labels(self) -> np.ndarray:
        """Label values of the positions (-inf and +inf at the ends)."""
        inner = (self.start + np.arange(len(self.laws[0]) - 2)) * self.step
        return np.concatenate([[-np.inf], inner, [np.inf]])


def _power(x: np.ndarray, n: int) -> np.ndarray:
    """x ** n elementwise (n >= 1) by repeated squaring (relative error <= 8 n u, see the
    module docstring)."""
    result = np.ones_like(x)
    base = x
    while n:
        if n & 1:
            result = result * base
        n >>= 1
        if n:
            base = base * base
    return result


#: tilts (per unit of loss) of the Chernoff bounds that place the window
_TILTS = np.array([0.1, 0.25, 0.5, 1.0, 2.0, 4.0])


def _window(step: StepLaws, n: int) -> tuple[int, int]:
    """[lo, hi] (sums of n relative step indices) holding all but _WINDOW_TAIL of both laws'
    finite parts: Chernoff bounds P[S >= b] <= M(t)^n e^(-t b) at a few tilts t, as
    dp_accounting's `pld.common.compute_self_convolve_bounds`. Where the window falls does not
    affect validity, only how much of the tails wraps around."""
    size = len(step.p)
    idx = np.arange(size, dtype=float)
    thetas = np.concatenate([-_TILTS, _TILTS]) * step.step  # per bucket index
    pos = thetas > 0
    los, his = [], []
    for v in (step.p, step.q):
        v = np.asarray(v, dtype=float)
        keep = v > 0
        if not np.any(keep):
            continue
        log_v = pm.log(v[keep] / v.sum())
        log_m = pm.logsumexp(thetas[:, None] * idx[keep][None, :] + log_v[None, :], axis=1)
        bound = (n * log_m + math.log(2.0 / _WINDOW_TAIL)) / thetas
        his.append(math.ceil(float(np.min(bound[pos]))))
        los.append(math.floor(float(np.max(bound[~pos]))))
    lo = max(0, min(los))
    hi = min((size - 1) * n, max(his))
    return lo, max(hi, lo)


def _convolve(vec: np.ndarray, n: int, lo: int, c_f: float) -> tuple[np.ndarray, float, float]:
    """The n-fold circular convolution of `vec` (longdouble, length L) by one FFT, a power and
    one inverse FFT, rolled so that position t holds the sums lo + t (mod L), negatives set to
    0; with its 2-norm and L1 error bounds (module docstring, item 2)."""
    length = len(vec)
    if n == 1:
        return vec.copy(), 0.0, 0.0
    import scipy.fft as sfft  # deferred: only composed runs need it

    u = ULD
    run = sfft.irfft(_power(sfft.rfft(vec), n), length)
    norm2 = float(np.sqrt(np.sum(vec * vec)))
    grow = math.exp(min(n * c_f * math.sqrt(length) * norm2, 700.0))
    f = grow * (n * c_f * norm2 + 8 * n * u)
    e_2 = f + c_f * (1.0 + f)
    return np.maximum(np.roll(run, -lo), 0), e_2, math.sqrt(length) * e_2


def compose(step: StepLaws, n: int) -> RunLaws:
    """The label of a run of n independent steps (module docstring): the sum of the step labels
    modulo the FFT length L, read in the window [lo, lo + L); atoms at -inf / +inf; the error
    bounds of items 1 and 2, and the tilted upper bounds of item 2."""
    n = int(n)
    size = len(step.p)
    lo, hi = _window(step, n) if n > 1 else (0, size - 1)
    length = size
    if n > 1:
        import scipy.fft as sfft  # deferred: only composed runs need it

        length = int(sfft.next_fast_len(max(hi - lo + 1, 2), real=True))
    u = ULD
    c_f = _FFT_SAFETY * u * max(1.0, math.log2(length))
    rho = step.rel_error
    k1 = (1 + rho) / (1 - rho - (size + 1) * _FLOOR)
    k = math.exp(n * math.log(k1))
    floor_n = n * _FLOOR * (1 + (size + 1) * _FLOOR) ** n  # the N _FLOOR' of item 1
    steps_l1 = 2 * k * (k - 1) + k * floor_n * (length + 2)
    fold = np.arange(size) % length
    run_start = n * step.start + lo
    labels = (run_start + np.arange(length)) * step.step
    laws, errors, entries, bulks, noises, tilted = [], [], [], [], [], []
    for b, (v, atom) in enumerate(((step.p, step.p_minus_inf), (step.q, step.q_plus_inf))):
        total = float(np.sum(v)) + atom
        finite = np.asarray(v, dtype=np.longdouble) / total
        vec = np.zeros(length, dtype=np.longdouble)
        np.add.at(vec, fold, finite)
        atom = atom / total
        run, e_2, e_fft = _convolve(vec, n, lo, c_f)
        # P(some step of the run is at the atom); atom = 1 (disjoint supports) gives 1
        atom_run = -math.expm1(n * math.log1p(-atom)) if 0 < atom < 1 else float(atom >= 1)
        ends = np.array([atom_run, 0.0] if b == 0 else [0.0, atom_run], dtype=np.longdouble)
        full = np.concatenate([ends[:1], run, ends[1:]])
        total_run = float(np.sum(full))
        full /= np.sum(full)
        laws.append(full)
        errors.append(steps_l1 + 2.0 * e_fft + 8 * (length + 2) * u)
        entries.append(k * (e_2 + floor_n) * (1 + 1e-9))
        bulks.append(k * total_run * (1 + 8 * U64) * (1 + 4 * (length + 2) * u))
        noises.append(e_2)
        # tilted by e^(theta label), theta = +1 on X (its tail then sits where X' has its
        # mass) and -1 on X': P(s) <= Z^n e^(-theta s h) conv^n(w / Z)(s) + wrapped tail
        theta = 1.0 if b == 0 else -1.0
        step_labels = (step.start + np.arange(size)) * step.step
        log_w = pm.log(np.maximum(finite, np.finfo(np.longdouble).tiny)) + theta * step_labels
        shift = np.max(log_w[finite > 0]) if np.any(finite > 0) else 0.0
        weights = np.where(finite > 0, pm.exp(log_w - shift), 0)
        z = np.sum(weights)
        tvec = np.zeros(length, dtype=np.longdouble)
        np.add.at(tvec, fold, weights / z if z > 0 else weights)  # z = 0: no finite outputs
        trun, t_2, _ = _convolve(tvec, n, lo, c_f)
        with np.errstate(divide="ignore", over="ignore"):
            log_bound = (
                n * (float(pm.log(z)) + float(shift))
                - theta * labels
                + pm.log(k * (1 + 1e-12) * (trun.astype(float) * (1 + 4 * U64) + t_2 + floor_n))
            )
        tilted.append(pm.exp(np.minimum(log_bound, 700.0)) + (_WINDOW_TAIL if n > 1 else 0.0))
    unbounded = (min(1.0, n * step.unbounded[0]), min(1.0, n * step.unbounded[1]))
    return RunLaws(
        run_start,
        step.step,
        (laws[0], laws[1]),
        (errors[0], errors[1]),
        (entries[0], entries[1]),
        (bulks[0], bulks[1]),
        (n * (0.5 * step.step + step.loss_margin[0]), n * (0.5 * step.step + step.loss_margin[1])),
        unbounded,
        _WINDOW_TAIL if n > 1 else 0.0,
        length,
        (noises[0], noises[1]),
        (tilted[0], tilted[1]),
    )


def _true_upper(run: RunLaws) -> tuple[np.ndarray, np.ndarray]:
    """Entry-wise upper bounds on the TRUE run laws (float64, positions as `run.laws`): the
    smaller of the direct bound bulk r* + entry error and the loss relation: a run labelled s
    (all its steps in buckets with bounded loss) has loss >= s h - margin[0] and
    <= s h + margin[1], so P(s) <= e^-(s h - margin[0]) Q(s) and Q(s) <= e^(s h + margin[1])
    P(s), plus the mass of runs with an unbounded step and the wrapped-around tail."""
    direct = [
        run.bulk[b] * run.laws[b].astype(float) * (1 + 2 * U64) + run.entry_error[b] for b in (0, 1)
    ]
    for b in (0, 1):
        direct[b][0 if b == 1 else -1] = 0.0  # X' has no -inf atom, X no +inf atom
    s = run.labels()[1:-1]
    with np.errstate(over="ignore"):
        down = pm.exp(np.minimum(-(s - run.margin[0]), 700.0))
        up = pm.exp(np.minimum(s + run.margin[1], 700.0))
    p_rel = down * direct[1][1:-1] + run.unbounded[0] + run.tail
    q_rel = up * direct[0][1:-1] + run.unbounded[1] + run.tail
    p_hi, q_hi = direct[0].copy(), direct[1].copy()
    p_hi[1:-1] = np.minimum(p_hi[1:-1], p_rel)
    q_hi[1:-1] = np.minimum(q_hi[1:-1], q_rel)
    if run.tilted is not None:
        p_hi[1:-1] = np.minimum(p_hi[1:-1], run.tilted[0])
        q_hi[1:-1] = np.minimum(q_hi[1:-1], run.tilted[1])
    return p_hi, q_hi


# --- the run's label, for the score search ---------------------------------------------------
def _label_laws(run: RunLaws, cuts: np.ndarray, output_cuts: np.ndarray | None = None) -> LabelLaws:
    """A `LabelLaws` of a composed run (positions as `run.laws`, the atoms dropped where they
    hold nothing on either side: the true atom is then 0 as well), with its cut points."""
    upper = _true_upper(run)
    keep = np.ones(len(run.laws[0]), dtype=bool)
    for end in (0, -1):
        if run.laws[0][end] == 0 and run.laws[1][end] == 0:
            keep[end] = False
    inner = keep[1:] & keep[:-1]  # a cut between two kept positions
    return LabelLaws(
        (run.laws[0][keep], run.laws[1][keep]),
        (upper[0][keep], upper[1][keep]),
        (float(run.error[0]), float(run.error[1])),
        (float(run.noise[0]), float(run.noise[1])),
        np.asarray(cuts, dtype=float)[inner],
        None if output_cuts is None else np.asarray(output_cuts, dtype=float)[inner],
    )


def _grid_cuts(run: RunLaws) -> np.ndarray:
    """Cut points between the positions of a labelled run: -inf after the -inf atom, half a
    label step above each finite label (the last one before the +inf atom included)."""
    labels = run.labels()
    return np.concatenate([[-np.inf], labels[1:-1] + 0.5 * run.step])


def gaussian_label_laws(
    mu: float, resolution: int, cuts: ArrayLike | None = None, tail: float = TAIL
) -> LabelLaws:
    """The Gaussian base's label l = mu x - mu^2 / 2 in buckets of x: `cuts` (output units), by
    default `resolution` - 1 equal steps over the range where either law holds all but `tail`
    (`TAIL`, or `score_search.delta_tail` for an attack at a delta; masses by Gauss-Legendre
    quadrature or log-cdf differences, A1; one step composed once for its error bounds)."""
    if cuts is None:
        z = float(-ndtri(tail))
        cuts = np.linspace(-z, mu + z, max(int(resolution) - 1, 1))
    x = np.concatenate([[-np.inf], np.asarray(cuts, dtype=float), [np.inf]])
    a, b = x[:-1].astype(np.longdouble), x[1:].astype(np.longdouble)
    p = _normal_masses(a, b)
    q = _normal_masses(a - np.longdouble(mu), b - np.longdouble(mu))
    step = StepLaws(0, 0.0, p, q, 0.0, 0.0, STEP_REL, (math.inf, math.inf), (1.0, 1.0), x)
    return _label_laws(compose(step, 1), mu * x - 0.5 * mu * mu, x)


def _pair_run(pair: MechanismPair, label_step: float | None) -> tuple[StepLaws, int]:
    """(StepLaws, N) of the labelled run of a DP-SGD or Laplace pair, or of a finite base."""
    h = LABEL_STEP if label_step is None else number(label_step, "label_step", 0, 1, lo_open=True)
    laplace = laplace_steps(pair)
    if laplace is not None:
        scale, steps, rate = laplace
        return laplace_step(scale, rate, h), steps
    if isinstance(pair, DpsgdBase):
        return dpsgd_step(pair.noise_multiplier, pair.sample_rate, h), pair.steps
    red = cast(FiniteOutputBase, pair.reduced())  # `attack_applies`: a finite base here
    return finite_step(red.law(0), red.law(1), h), 1


def run_labels(
    pair: MechanismPair, outputs: ArrayLike, *, label_step: float | None = None
) -> np.ndarray:
    """The label the attack gives each run of a DP-SGD or Laplace pair's worst-case game: each
    step's output x (the last axis of `outputs`: one row per run, one column per step) put in
    its step bucket (`dpsgd_step` / `laplace_step`: the loss rounded to the label step h, the
    outputs beyond the cap in the top bucket), the bucket indices summed, times h. These are
    the values `AttackValue.score` (label units) ranks and `winner_bucket_laws` buckets, so a
    game that labels its runs this way plays exactly the attack's score."""
    pair = as_pair(pair, "pair")
    if not isinstance(pair, DpsgdBase) and laplace_steps(pair) is None:
        raise ConfigError("pair", "run labels are defined for DP-SGD and Laplace bases")
    step, steps = _pair_run(pair, label_step)
    x = np.asarray(outputs, dtype=float)
    if x.ndim == 0 or x.shape[-1] != steps:
        raise ConfigError("outputs", f"one column per step: last axis of length {steps}")
    assert step.edges is not None
    idx = np.searchsorted(step.edges, x, side="left") - 1  # bucket j holds (edges[j], edges[j+1]]
    idx = np.clip(idx, 0, len(step.p) - 1)
    return cast("np.ndarray", (np.sum(idx, axis=-1) + steps * step.start) * step.step)


def label_laws(
    pair: MechanismPair, *, label_step: float | None = None, resolution: int | None = None
) -> LabelLaws:
    """The law of one run's label on X and X' (unmerged; Gaussian bases at `resolution`
    buckets of x), for the score search (`accounting.score_search`) and `winner_bucket_laws`."""
    pair = _applicable(pair)
    m = DEFAULT_RESOLUTION if resolution is None else resolution
    red = pair.reduced() if pair.reduction_is_exact else None
    if isinstance(red, GaussianBase):
        return gaussian_label_laws(red.mu, m)
    step, steps = _pair_run(pair, label_step)
    run = compose(step, steps)
    return _label_laws(run, _grid_cuts(run))


# --- the attack value --------------------------------------------------------------------------
@dataclass(frozen=True)
class AttackValue:
    """The attack value at one or more deltas (module docstring).

    `epsilon` is a float for one delta, a tuple for several. `scores` says which scores were
    searched: "any" (the worst-score attack: every interval-shaped score of the merged label
    buckets, and the monotone attack) or "monotone" (the largest / smallest label wins: the
    reduced game's exact value where the pair's reduction is exact). At the first delta:
    `strategy` says which attack gave the value ("score": the pair's own monotone score, exact;
    "largest" / "smallest": the run with the largest / smallest label; "extremes" / "middle":
    the interval-shaped score the search found), `shape` the score's shape ("monotone",
    "extremes", "middle"), `score` the score itself as data (`selection.BucketScore`: its
    buckets, ranks and the adversary's statistic; a game plays it) and `output_score` the same
    score in the base's output units (Gaussian bases), `direction` "X' over X" or "X over X'";
    `method` "exact" (the pair's exact winner curve), "labelled" (the bucketed run, label step
    `label_step`) or "score_search" (the dynamic program over `resolution` merged buckets);
    `slack` the round-off budget in delta units (E[K] e_r, charged once per side)."""

    deltas: tuple[float, ...]
    epsilons: tuple[float, ...]
    strategy: str
    direction: str | None
    method: str
    label_step: float | None = None
    slack: float = 0.0
    fft_length: int = 0
    seconds: float = 0.0
    _pieces: tuple[tuple[np.ndarray, ...], ...] = field(default=(), repr=False, compare=False)
    score: BucketScore | None = field(default=None, compare=False)
    shape: str = "monotone"
    scores: str = "monotone"
    resolution: int | None = None
    output_score: BucketScore | None = field(default=None, repr=False, compare=False)
    monotone: tuple[float, ...] | None = None
    _search: ScoreSearch | None = field(default=None, repr=False, compare=False)
    #: one run's epsilon with the K = 0 mass charged (`one_run_epsilons`)
    one_run: tuple[float, ...] | None = None
    #: the split search's epsilon (`split_epsilons`), a lower bound of its own; None where
    #: nothing was split
    split: tuple[float, ...] | None = None
    split_direction: str | None = None
    split_shape: str | None = None
    _split_search: ScoreSearch | None = field(default=None, repr=False, compare=False)
    #: the coin search's epsilon (`accounting.coin_search`), a lower bound for the base with
    #: a released coin, NOT for the finite pair alone (`with_one_run`)
    coin: tuple[float, ...] | None = None
    coin_score: CoinScore | None = field(default=None, repr=False, compare=False)
    _coin_pieces: tuple[np.ndarray, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def epsilon(self) -> float:
        return self.epsilons[0]

    def delta(self, eps: ArrayLike) -> np.ndarray:
        """The certified lower privacy curve delta_low(eps) of the attack: the best of the
        monotone attack's curve (labelled method) and the score search's; where the value is
        the coin search's (method "coin_search", `with_one_run`), its score's curve too, a lower
        curve for the base with a released coin (`coin_search.COIN_ASSUMPTION`)."""
        e = np.atleast_1d(np.asarray(eps, dtype=float))
        curves = [_deltas_at(U, V, e) for U, V in self._pieces]
        if self.method == "coin_search" and self._coin_pieces is not None:
            curves.append(_deltas_at(self._coin_pieces[0], self._coin_pieces[1], e))
        for search in (self._search, self._split_search):
            if search is not None:
                curves.append(search.deltas_at(e))
        if not curves:
            raise ValueError("delta(eps) is kept for the labelled method and the score search")
        return cast("np.ndarray", np.max(curves, axis=0))

    def describe(self) -> str:
        """The value and the score that achieves it, in words a user can act on."""
        head = f"attack value eps >= {self.epsilon:.4f} at delta = {self.deltas[0]:g} "
        if self.method == "coin_search":
            head += f"(any score; a valid lower bound {COIN_ASSUMPTION}; round-off charged)"
        else:
            head += (
                f"({'any score' if self.scores == 'any' else 'monotone scores only'}; a valid "
                "lower bound: a post-processing of the true pair, round-off charged)"
            )
        lines = [head]
        if self.monotone is not None and self.scores == "any":
            lines.append(
                f"  the monotone score (largest/smallest label wins) gives {self.monotone[0]:.4f}"
            )
        how = {
            "extremes": "the runs far out on either side of the label win (every lower set of "
            "the score is an interval of the label)",
            "middle": "the runs in the middle of the label win (every lower set is the "
            "complement of an interval)",
            "monotone": "the run with the largest (or smallest) label wins",
            "split": "heavy label buckets split into equal pieces the score ranks apart (a "
            "cut of the output with equal shares under both laws: no game of auditsel plays "
            "it yet)",
            "coin": "outputs ranked by (output, released coin): an output's coin range may be "
            "split between ranks, a larger coin wins inside a segment (no game of auditsel "
            "plays it yet)",
        }
        lines.append(
            f"  score: {self.shape}: {how.get(self.shape, self.shape)}; test {self.direction}"
        )
        if self.method == "coin_search" and self.coin_score is not None:
            lines.append(f"  {self.coin_score.describe()}")
        for s in (self.score, self.output_score):
            if s is not None:
                ranks = np.asarray(s.ranks)
                top = np.argsort(-ranks)[:3]
                lines.append(f"  {s.describe()}; the top-ranked buckets: {_buckets(s, top)}")
                if self.shape == "extremes":
                    lines.append(
                        f"    the lowest-ranked bucket (runs near it lose): "
                        f"{_buckets(s, [int(np.argmin(ranks))])}"
                    )
        return "\n".join(lines)


def _buckets(score: BucketScore, idx: Iterable[int]) -> str:
    e = (-math.inf, *score.edges, math.inf)
    return ", ".join(f"({e[i]:.4g}, {e[i + 1]:.4g}]" for i in idx)


METHODS = ("auto", "exact", "labelled")
SCORES = ("any", "deterministic", "monotone")


def _no_coin(scores: str) -> str:
    """`scores` without the coin search ("any" -> "deterministic"): the pair's own attack."""
    return "deterministic" if scores == "any" else scores


def _applicable(pair: MechanismPair) -> MechanismPair:
    """`pair` as a mechanism pair (`events.as_pair`); a ConfigError where `attack_applies`
    says it has no attack value."""
    pair = as_pair(pair, "pair")
    why = attack_applies(pair)
    if why is not None:
        raise ConfigError("pair", why)
    return pair


def attack_applies(pair: MechanismPair) -> str | None:
    """None where `attack` has a value for the pair (a pair whose reduction is exact, a DP-SGD
    pair, a Laplace base), else why not: a dp_accounting event base whose worst-case pair is
    not known here has no attack value; its interval starts at eps >= 0 (`accounting.interval`)."""
    pair = as_pair(pair, "pair")
    if pair.reduction_is_exact or isinstance(pair, DpsgdBase) or laplace_steps(pair) is not None:
        return None
    return (
        f"no attack value for this base ({type(pair).__name__}): the attack needs the worst-case "
        "pair (Gaussian, finite-output, DP-SGD or Laplace bases, and the DpEvents that are one "
        "of them)"
    )


def attack(
    pair: MechanismPair,
    law: RoundsLaw,
    deltas: ArrayLike,
    *,
    method: str = "auto",
    label_step: float | None = None,
    scores: str = "any",
    resolution: int | None = None,
    tail: float | None = None,
) -> AttackValue:
    """The attack value at each delta (module docstring), how it was obtained and the score
    that achieves it. `pair`: a mechanism pair or a dp_accounting DpEvent that is one
    (`events.as_pair`). `scores`: "any", "deterministic" ("any" without the coin search, whose
    value `AttackValue.coin` only `with_one_run` reads) or "monotone" (module docstring, "Which
    scores"). `method` (the monotone attack): "auto" (exact where the pair's reduction is exact,
    else labelled), "exact" or "labelled" (DP-SGD, tau = 1 included; Laplace bases);
    `label_step`: the label grid h (`LABEL_STEP`); `resolution`: the merged buckets M of the
    score search (O(M^2) per step); `tail`: the label quantile beyond which the merge lumps
    labels into the end buckets (default `score_search.delta_tail(deltas, law)`)."""
    start = time.perf_counter()
    pair = as_pair(pair, "pair")
    d = check_deltas(deltas, "deltas")
    choice(method, "method", METHODS)
    choice(scores, "scores", SCORES)
    coin, scores = scores == "any", "any" if scores == "deterministic" else scores
    m = DEFAULT_RESOLUTION if resolution is None else integer(resolution, "resolution", 2, 4096)
    labelled = _labelled(pair, method)
    red = pair.reduced() if pair.reduction_is_exact else None
    tail = delta_tail(d, law) if tail is None else tail
    if labelled or not isinstance(red, GaussianBase):
        step, steps = _pair_run(pair, label_step)
        run = compose(step, steps)
        laws = _label_laws(run, _grid_cuts(run))
    else:
        laws = gaussian_label_laws(red.mu, m, tail=tail)
    if labelled:
        mono = labelled_attack(step, steps, law, d, start=start, run=run)
    else:
        assert red is not None  # the pair's reduction is exact here
        eps = _capped(red, d, np.atleast_1d(exact_epsilon(winner_law(red, law), d)))
        mono = AttackValue(tuple(d.tolist()), tuple(float(e) for e in eps), "score", None, "exact")
    search = ScoreSearch(merge_buckets(laws, m, tail), law)
    if scores == "monotone":
        found = [SearchResult(e, "monotone", mono.direction or "", (), ()) for e in mono.epsilons]
    else:
        found = search.best(d, start=np.array(mono.epsilons))
    value = _assemble(mono, found, search, scores, m, pair, law, start)
    if scores != "any":
        return value
    labels = None if red is not None else (step, steps, run)  # exact: one run's exact eps
    one = one_run_epsilons(law, d, exact=red, labelled=labels)
    value = replace(value, one_run=tuple(float(e) for e in one))
    if splits_apply(pair):
        value = _with_split(value, search, law, d)
    return _with_coin(value, red, law, d) if coin else value


def _with_coin(
    value: AttackValue, red: MechanismPair | None, law: RoundsLaw, d: FloatArray
) -> AttackValue:
    """`value` with the coin search's values (`coin_search`) where `red` is a finite-output
    base and the search beats what `value` already knows at the first delta."""
    if not isinstance(red, FiniteOutputBase):
        return value
    known = [max(a, b) for a, b in zip(value.epsilons, value.one_run or value.epsilons)]
    coins = coin_search(red.law(0), red.law(1), law, d, known)
    if coins is None:
        return value
    return replace(value, coin=coins.epsilons, coin_score=coins.score, _coin_pieces=coins.pieces)


def _labelled(pair: MechanismPair, method: str) -> bool:
    """Whether the monotone attack runs on the label grid (else on the pair's exact reduction);
    a pair or method it cannot serve is a ConfigError naming the field."""
    _applicable(pair)
    labelled = method == "labelled" or (method == "auto" and not pair.reduction_is_exact)
    if not labelled and not pair.reduction_is_exact:
        raise ConfigError("method", "exact needs a pair whose reduction is exact")
    if labelled and not isinstance(pair, DpsgdBase) and laplace_steps(pair) is None:
        raise ConfigError("method", "labelled needs a DP-SGD pair (DpsgdBase) or a Laplace base")
    return labelled


def splits_apply(pair: MechanismPair) -> bool:
    """Whether the split search runs for `pair`: the label is a function of an atomless output
    (Gaussian, DP-SGD and Laplace bases, `score_search.split_buckets`: a split is then a
    deterministic score); not a finite-output base, whose pieces would need a coin."""
    red = pair.reduced() if pair.reduction_is_exact else None
    if isinstance(red, FiniteOutputBase) or isinstance(pair, FiniteOutputBase):
        return False
    return (
        isinstance(pair, DpsgdBase | GaussianBase)
        or laplace_steps(pair) is not None
        or (isinstance(red, GaussianBase))
    )


def split_epsilons(
    search: ScoreSearch, law: RoundsLaw, deltas: np.ndarray, start: ArrayLike
) -> tuple[ScoreSearch, list[SearchResult]] | None:
    """The split search: the merged buckets of `search` with every heavy bucket split into
    equal pieces (`score_search.split_pieces`, `split_buckets`), the same DP over interval-
    shaped scores of the pieces, started from `start` (the values already found); None when no
    bucket is heavy. Each value is certified exactly as the unsplit search's (the pieces'
    masses are the buckets' divided by a power of two: no new round-off)."""
    pieces = split_pieces(search.laws)
    if not np.any(pieces > 1):
        return None
    split = ScoreSearch(split_buckets(search.laws, pieces), law)
    return split, split.best(deltas, start=start)


def _with_split(
    value: AttackValue, search: ScoreSearch, law: RoundsLaw, deltas: np.ndarray
) -> AttackValue:
    """`value` with its split search's epsilons (`split_epsilons`) recorded in `split` where
    the search found a score (`with_one_run` takes the largest)."""
    found = split_epsilons(search, law, deltas, value.epsilons)
    if found is None:
        return value
    split, results = found
    first = results[0]
    return replace(
        value,
        split=tuple(float(r.epsilon) for r in results),
        split_direction=first.direction or None,
        split_shape=first.shape,
        _split_search=split,
    )


def _capped(pair: MechanismPair, deltas: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """`exact_epsilon` answers inf above `exact.EPS_CAP`; as a lower bound for a Gaussian pair at
    delta > 0 (whose epsilon is finite there) that is EPS_CAP, not inf."""
    if not isinstance(pair, GaussianBase):
        return eps
    return np.where(np.isinf(eps) & (deltas > 0), EPS_CAP, eps)


def one_run_epsilons(
    law: RoundsLaw,
    deltas: ArrayLike,
    *,
    exact: MechanismPair | None = None,
    labelled: tuple[StepLaws, int, RunLaws | None] | None = None,
) -> FloatArray:
    """A lower bound on the tuning run's epsilon from one run: eps_B,low(delta / (1 - G(0))) at
    each delta (0 where delta / (1 - G(0)) >= 1), G(0) = P[K = 0].

    Why. Let the tuner's score ignore the runs (a constant score, ties broken uniformly at
    random, or any rule independent of the outputs): the tuning run T releases one run's output
    B when K >= 1 and the fixed output when K = 0, on X and on X' alike. For eps >= 0 ::

        H_{e^eps}(T(X') || T(X)) = (1 - G(0)) H_{e^eps}(B(X') || B(X)) + G(0) [1 - e^eps]_+
                                 = (1 - G(0)) delta_B(eps),

    and the same the other way, so delta_T(eps) >= (1 - G(0)) delta_B,low(eps) for any lower
    curve delta_B,low of the base, and eps_T(delta) >= eps_B,low(delta / (1 - G(0))). One run's
    eps alone (delta not divided, the K = 0 mass not charged) is not a lower bound when
    G(0) > 0: T is then closer to private than B. The base's lower curve: `exact` (a pair whose
    reduction is exact: its exact epsilon, `exact.exact_epsilon` of one run) or `labelled` (the
    labelled run of a DP-SGD, Laplace or finite base, (step, N, composed run or None):
    `labelled_attack` with K = 1, round-off charged)."""
    d = check_deltas(deltas, "deltas")
    keep = 1.0 - float(law.p_zero)
    dd = d / keep if keep > 0 else np.ones_like(d)
    out = np.zeros(len(d))
    ok = dd < 1
    if not np.any(ok):
        return out
    if exact is not None:
        one = np.atleast_1d(exact_epsilon(winner_law(exact, Point(1)), dd[ok]))
        out[ok] = _capped(exact, dd[ok], one)
    elif labelled is not None:
        step, steps, run = labelled
        out[ok] = labelled_attack(step, steps, Point(1), dd[ok], run=run).epsilons
    return out


def with_one_run(value: AttackValue) -> AttackValue:
    """`value` with each epsilon the largest of it, `value.one_run` (`one_run_epsilons`),
    `value.split` (`split_epsilons`) and `value.coin` (`accounting.coin_search`); where one of
    these is the largest at the first delta, method and shape say which ("one_run",
    "split_search" / "split", "coin_search" / "coin") and `score` is None (no game of auditsel
    plays it). The coin value is a lower bound for the base with a released coin
    (`coin_search.COIN_ASSUMPTION`), which `accounting.interval.attack_source` prints."""
    own = [
        (eps, shape, direction, method)
        for eps, shape, direction, method in (
            (value.split, "split", value.split_direction, "split_search"),
            (value.one_run, "one_run", None, "one_run"),
        )
        if eps is not None
    ]
    first = value.epsilons[0]
    for eps, *_ in own:
        value = replace(value, epsilons=_larger(value.epsilons, eps))
    for i, (eps, shape, direction, method) in enumerate(own):
        # above the value and the other one at the first delta: its labels
        if eps[0] > max([first] + [o[0] for j, (o, *_) in enumerate(own) if j != i]):
            value = _relabel(value, eps, shape, direction, method)
    coin = value.coin
    if coin is None or not coin[0] > value.epsilons[0]:
        # not the value at the first delta: not merged at any delta either, so that no epsilon
        # labelled as the finite pair's own comes from the base with a coin
        return value
    assert value.coin_score is not None
    return _relabel(value, coin, "coin", value.coin_score.direction, "coin_search")


def _relabel(
    value: AttackValue, other: Sequence[float], shape: str, direction: str | None, method: str
) -> AttackValue:
    """`value` with each epsilon the larger of it and `other`'s, its value (at the first delta)
    from a lower bound no game of auditsel plays: `score` is None."""
    return replace(
        value,
        epsilons=_larger(value.epsilons, other),
        strategy=shape,
        direction=direction,
        method=method,
        score=None,
        shape=shape,
        output_score=None,
    )


def _larger(a: Sequence[float], b: Sequence[float]) -> tuple[float, ...]:
    return tuple(max(x, y) for x, y in zip(a, b))


def _monotone_score(
    mono: AttackValue, search: ScoreSearch, pair: MechanismPair, law: RoundsLaw
) -> BucketScore:
    """The monotone attack's score as a `BucketScore`: the merged label buckets ranked in label
    order (the run with the largest label wins; with ties broken by the larger label, a bucket
    score with increasing ranks releases exactly that run), reversed for "smallest"; a finite
    base's own score (the output's index) in output units."""
    red = pair.reduced() if pair.reduction_is_exact else None
    if mono.method == "exact" and isinstance(red, FiniteOutputBase):
        w = FiniteWinner(red, law)
        with np.errstate(divide="ignore", invalid="ignore"):
            guess = pm.log(w.pmf(1)) - pm.log(w.pmf(0))
        n = len(guess)
        guess = np.where(np.isnan(guess), 0.0, guess)
        edges = tuple(float(i) + 0.5 for i in range(n - 1))
        return BucketScore(edges, tuple(range(n)), "output", "monotone", tuple(guess.tolist()))
    order = range(search.m) if mono.strategy != "smallest" else range(search.m - 1, -1, -1)
    result = SearchResult(mono.epsilon, "monotone", mono.direction or "", tuple(order), ())
    return search.score(result)


def _assemble(
    mono: AttackValue,
    found: list[SearchResult],
    search: ScoreSearch,
    scores: str,
    m: int | None,
    pair: MechanismPair,
    law: RoundsLaw,
    start: float,
) -> AttackValue:
    """The AttackValue of the best of the monotone attack and the score search."""
    eps = [max(a, r.epsilon) for a, r in zip(mono.epsilons, found)]
    first = found[0]
    searched = scores == "any" and first.order and first.epsilon > mono.epsilons[0]
    direction: str | None
    if searched:
        score = search.score(first)
        shape, strategy, direction = score.shape, first.shape, first.direction
        if shape == "monotone":
            strategy = "largest" if first.order[-1] > first.order[0] else "smallest"
        output = search.score(first, "output") if search.laws.output_cuts is not None else None
        method = "score_search"
    else:
        score = _monotone_score(mono, search, pair, law)
        shape, strategy, direction, method = "monotone", mono.strategy, mono.direction, mono.method
        output = None
        if search.laws.output_cuts is not None and mono.strategy in ("score", "largest"):
            output = search.score(SearchResult(mono.epsilon, "monotone", "", (), ()), "output")
    pieces = tuple(mono._pieces) + tuple(r.pieces for r in found if r.order and len(r.pieces))
    return AttackValue(
        mono.deltas,
        tuple(float(e) for e in eps),
        strategy,
        direction,
        method,
        mono.label_step,
        max(mono.slack, max(search.slack)) if searched else mono.slack,
        mono.fft_length,
        time.perf_counter() - start,
        pieces,
        score,
        shape,
        scores,
        m,
        output,
        mono.epsilons,
        search if scores == "any" else None,
    )


def labelled_attack(
    step: StepLaws,
    steps: int,
    law: RoundsLaw,
    deltas: ArrayLike,
    *,
    start: float | None = None,
    run: RunLaws | None = None,
) -> AttackValue:
    """The labelled attack on N = `steps` independent copies of a labelled step (any step pair:
    `dpsgd_step`, `finite_step`), at each delta (module docstring): the run with the largest or
    smallest label wins (monotone scores). `run`: the composed run when already computed."""
    start = time.perf_counter() if start is None else start
    d = check_deltas(deltas, "deltas")
    run = compose(step, steps) if run is None else run
    mean = float(law.mean)
    slack = (mean * run.error[0], mean * run.error[1])
    true_hi = _true_upper(run)
    best = np.full(len(d), -1.0)
    which = [("", "", 0.0)] * len(d)
    pieces = []
    for strategy in STRATEGIES:
        flip: Callable[[np.ndarray], np.ndarray] = (
            (lambda v: v) if strategy == "largest" else (lambda v: v[::-1])
        )
        laws = tuple(flip(v) for v in run.laws)
        rho = 2.0 * (len(laws[0]) + 2) * ULD + U64  # F and W's relative error (A3)
        cdfs = [cumulative(v) for v in laws]
        star = [enclose_winner(v.astype(float), *c, rho, law) for v, c in zip(laws, cdfs)]
        true = [
            true_winner_upper(flip(true_hi[b]), c[1], c[3], rho, run.error[b], law)
            for b, c in enumerate(cdfs)
        ]
        for num, name in ((1, "X' over X"), (0, "X over X'")):
            den = 1 - num
            floor = 4 * mean * run.noise[num]
            # two orders of the labels (by the r* bound and by the true bound): both valid
            eps = np.zeros(len(d))
            for by in (None, true[den]):
                U, V = _direction_pieces(
                    star[num][0], star[den][1], true[den], slack[num], slack[den], floor, by
                )
                pieces.append((U, V))
                eps = np.maximum(eps, _epsilons(U, V, d))
            for i in np.nonzero(eps > best)[0]:
                best[i] = eps[i]
                which[i] = (strategy, name, max(slack))
    return AttackValue(
        tuple(d.tolist()),
        tuple(float(e) for e in best),
        which[0][0],
        which[0][1],
        "labelled",
        step.step,
        float(which[0][2]),
        run.fft_length,
        time.perf_counter() - start,
        tuple(pieces),
    )


@overload
def attack_epsilon(
    pair: MechanismPair,
    law: RoundsLaw,
    delta: float,
    *,
    scores: str = "any",
    resolution: int | None = None,
) -> float: ...
@overload
def attack_epsilon(
    pair: MechanismPair,
    law: RoundsLaw,
    delta: np.ndarray | Sequence[float],
    *,
    scores: str = "any",
    resolution: int | None = None,
) -> FloatArray: ...
def attack_epsilon(
    pair: MechanismPair,
    law: RoundsLaw,
    delta: ArrayLike,
    *,
    scores: str = "any",
    resolution: int | None = None,
) -> FloatArray | float:
    """The attack value (module docstring): a float for a scalar delta, an array for an array.
    `scores`: "any" (the worst-score attack) or "monotone"; `resolution`: the merged buckets
    of the score search (`attack`)."""
    check_deltas(delta)
    value = attack(pair, law, delta, scores=_no_coin(scores), resolution=resolution)
    return np.array(value.epsilons) if np.ndim(delta) else value.epsilons[0]


def attack_delta(
    pair: MechanismPair,
    law: RoundsLaw,
    eps: ArrayLike,
    *,
    scores: str = "any",
    tail: float | None = None,
) -> FloatArray | float:
    """The attack's certified lower privacy curve delta_low(eps) <= delta_T(eps): the best of
    the monotone attack's (the exact winner curve where the pair's reduction is exact, else the
    labelled attack's) and, for `scores="any"`, the score search's, its buckets cut at the
    quantile `tail` (`score_search.TAIL` by default: a curve over every delta)."""
    pair = _applicable(pair)
    e = np.atleast_1d(np.asarray(eps, dtype=float))
    value = attack(pair, law, [0.5], scores=_no_coin(scores), tail=TAIL if tail is None else tail)
    curves = []
    if pair.reduction_is_exact:
        curves.append(privacy_curve(winner_law(cast(MechanismPair, pair.reduced()), law), e))
    if value._pieces or value._search is not None:
        curves.append(value.delta(e))
    out = np.max(curves, axis=0)
    return out if np.ndim(eps) else float(out[0])


def _score_laws(
    pair: MechanismPair, score: BucketScore, label_step: float | None
) -> LabelLaws | tuple[np.ndarray, tuple[np.ndarray, np.ndarray], RunLaws | None]:
    """What the laws of one run's bucket under `score` are summed from: a Gaussian base's label
    laws on the score's own buckets (label or output units), else (each position's bucket, the
    two laws on the positions, the composed run or None): a finite base's outputs (output
    units) or the labelled run (label units, `label_step`)."""
    pair = _applicable(pair)
    if not isinstance(score, BucketScore):
        raise ConfigError("score", "must be a BucketScore (AttackValue.score)")
    red = pair.reduced() if pair.reduction_is_exact else None
    if isinstance(red, GaussianBase):
        edges = np.asarray(score.edges, dtype=float)
        x = edges if score.unit == "output" else (edges + 0.5 * red.mu**2) / red.mu
        if not np.all(np.diff(x) > 0) or not np.all(np.isfinite(x)):
            raise ConfigError("score.edges", "finite cut points, distinct in output units")
        return gaussian_label_laws(red.mu, len(score.ranks), x)
    if isinstance(red, FiniteOutputBase) and score.unit == "output":
        on = (np.asarray(red.law(0), dtype=float), np.asarray(red.law(1), dtype=float))
        return score.bucket(np.arange(len(on[0]))), on, None
    if score.unit != "label":
        raise ConfigError("score.unit", "label for this base (its runs are labelled)")
    step, steps = _pair_run(pair, label_step)
    run = compose(step, steps)
    return score.bucket(run.labels()), run.laws, run


def _rank_order(score: BucketScore) -> np.ndarray:
    """The buckets from the lowest rank to the highest (ties: the larger value wins)."""
    return np.lexsort((np.arange(len(score.ranks)), np.asarray(score.ranks, dtype=float)))


def winner_bucket_laws(
    pair: MechanismPair, law: RoundsLaw, score: BucketScore, *, label_step: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The exact law of the winner's bucket when the tuning run plays `score` (K ~ `law` runs of
    the base, the run of the highest rank released; ties by the larger value, which does not
    change the winner's bucket): (pmf on X, pmf on X'), one entry per bucket of `score`, each
    summing to 1 - P[K = 0] (the fixed output of K = 0 is in no bucket). Sampling-free: a game
    compares its Monte Carlo counts with it. Gaussian bases: label or output units, masses on
    the score's own buckets; other bases: the labelled run (label units, `label_step`). Point
    values: a far-tail entry of a composed run can be FFT round-off; `winner_bucket_bounds`
    encloses every entry."""
    laws = _score_laws(pair, score, label_step)
    if isinstance(laws, LabelLaws):
        masses: tuple[np.ndarray, ...] = laws.laws
    else:
        buckets, on, _ = laws
        n = len(score.ranks)
        masses = tuple(np.bincount(buckets, np.asarray(v, dtype=float), n) for v in on)
    return order_winner_laws(masses, _rank_order(score), law)


def winner_bucket_bounds(
    pair: MechanismPair, law: RoundsLaw, score: BucketScore, *, label_step: float | None = None
) -> tuple[tuple[FloatArray, FloatArray], tuple[FloatArray, FloatArray]]:
    """Rigorous enclosures of the winner's bucket law that `winner_bucket_laws` gives as point
    values: ((lower, upper) on X, (lower, upper) on X'), one entry per bucket of `score`, each
    true mass between its two ends. `winner_bucket_laws`'s far-tail entries of a composed run
    (DP-SGD, Laplace) can be FFT round-off (say 1e-17 where the truth is 1e-30); here they are
    [0, a rigorous upper bound]: the computed law's L1 error and the entry-wise true upper
    bounds of the attack (module docstring, items 2 and 3; `score_search.enclose_order`), from
    the bucket masses summed in longdouble, in order."""
    laws = _score_laws(pair, score, label_step)
    n = len(score.ranks)
    sides: list[tuple[np.ndarray, np.ndarray, float]]  # per side: masses, upper bounds, L1 error
    if isinstance(laws, LabelLaws):
        sides, count = [(laws.laws[b], laws.upper[b], laws.error[b]) for b in (0, 1)], 1
    else:
        buckets, on, run = laws
        sums = [np.zeros(n, dtype=np.longdouble) for _ in on]
        for total, v in zip(sums, on):
            np.add.at(total, buckets, np.asarray(v, dtype=np.longdouble))
        if run is None:  # a finite base's given masses, summed
            count = len(on[0])
            sides = [(v, v.astype(float) * (1 + 4 * U64), 4 * count * U64) for v in sums]
        else:  # count: the most label positions a bucket sums
            count = int(np.max(np.bincount(buckets, minlength=n)))
            hi = [np.bincount(buckets, v, n) * (1 + (count + 1) * U64) for v in _true_upper(run)]
            sides = [(sums[b], hi[b], float(run.error[b])) for b in (0, 1)]
    order = _rank_order(score)
    lo_hi = [enclose_order(*side, order, law, count) for side in sides]
    return lo_hi[0], lo_hi[1]
