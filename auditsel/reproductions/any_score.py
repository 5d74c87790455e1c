"""`auditsel reproduce any-score`: how far [XWW24]'s monotone-score values sit below the tuning
run's epsilon for any score, and how close the generic and profile bounds are.

Contract. A tuning run ([XWW24] Algorithm 2) releases the run with the best score; its epsilon
is a supremum over every score function. [XWW24]'s reduced game ("release the max of K
Gaussians", Figure 5) assumes a continuous one-to-one, hence monotone, score of the reduced draw
(Sec. 5.2, Theorem 1, Proposition 3; `registry.ASSUMPTION`). For each setting the rows give

* `monotone`: the reduced game's exact epsilon (`monotone_label` "monotone_score" where the
  pair's reduction is exact, "heuristic" for DP-SGD with tau < 1 (eq. 19); none for a Laplace
  base) and `monotone_attack`, the attack on a monotone score (`attack(..., scores="monotone")`);
* `attack`: the attack value over score functions (`accounting.attack`, a lower bound for any
  score with no sampling error) and the score it found (`score`: `score_summary`; for the finite
  base "coin" where the coin search's value is the largest, a lower bound for that base with an
  independent coin released with each run, not for the finite pair alone,
  `accounting.coin_search`);
* `generic_rdp` [PS22], `profile` [KRW24]: rigorous upper bounds for any score;
* the interval [attack, tightest rigorous bound] (`interval_lower`, `interval_upper`, `width`,
  `width_pct` = width / upper) and `below_pct` = (attack - monotone) / attack: positive where the
  monotone value is not the tuning run's epsilon (for a coin score, the finite pair's own
  attack).

Every number is computed by `accounting.panel` and `accounting.interval`; nothing is typed in.
"""

from __future__ import annotations

import time

from dp_accounting import dp_event

from auditsel.accounting.attack import AttackValue, with_one_run
from auditsel.accounting.attack import attack as attack_value
from auditsel.accounting.interval import interval_attack
from auditsel.accounting.panel import panel
from auditsel.events import LaplaceBase, as_pair
from auditsel.mechanisms import DpsgdBase, FiniteOutputBase, GaussianBase
from auditsel.reproductions import _law_name
from auditsel.rounds import Poisson, TruncatedNegativeBinomial


def _composed_gaussian():
    """A dp_accounting event: 16 Gaussian queries of noise multiplier 4 (mu = 1)."""
    return dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(4.0), 16)


#: (name, pair, law, delta): the issue's Gaussian setting at two deltas, other Gaussian-type
#: bases (DP-SGD with sample rate 1, a composed Gaussian event, [XWW24] Example 1's finite
#: base), the README's DP-SGD example (tau < 1) and a Laplace base
SETTINGS = (
    ("gaussian mu=1", GaussianBase(mu=1.0), Poisson(10.0), 1e-5),
    ("gaussian mu=1", GaussianBase(mu=1.0), Poisson(10.0), 1e-2),
    ("gaussian mu=0.5", GaussianBase(mu=0.5), TruncatedNegativeBinomial(1.0, 0.1), 1e-5),
    ("gaussian mu=2", GaussianBase(mu=2.0), Poisson(5.0), 1e-8),
    ("dpsgd sigma=10 N=100 tau=1", DpsgdBase(10.0, 100, 1.0, "pld"), Poisson(10.0), 1e-5),
    ("event 16 x Gaussian(4)", _composed_gaussian(), TruncatedNegativeBinomial(0.0, 0.1), 1e-6),
    (
        "finite [XWW24] Example 1",
        FiniteOutputBase.example1(),
        TruncatedNegativeBinomial(1, 1e-3),
        1e-5,
    ),
    ("dpsgd sigma=1 N=1000 tau=0.01", DpsgdBase(1.0, 1000, 0.01, "pld"), Poisson(10.0), 1e-5),
    ("laplace b=1", LaplaceBase(1.0), TruncatedNegativeBinomial(1.0, 0.1), 1e-5),
)


def _bucket(score, which) -> str:
    """The bucket of `score` (a `selection.BucketScore`) with the lowest (which=min) or the
    highest (which=max) rank, as an interval of its unit."""
    ranks = list(score.ranks)
    i = ranks.index(which(ranks))
    edges = [float("-inf"), *score.edges, float("inf")]
    return f"({edges[i]:.3g}, {edges[i + 1]:.3g}]"


def score_summary(value: AttackValue) -> str:
    """The score an attack value found, in words: its shape and where it cuts (the bucket whose
    runs lose, for "extremes"; the bucket whose runs win, for "middle"), in the base's output
    units where known (Gaussian bases), else in label units; "monotone" for a monotone score;
    for a split score (`attack.split_epsilons`) its shape over the pieces; for a coin score
    (`accounting.coin_search`, finite bases) what it bounds."""
    if getattr(value, "shape", None) == "split":
        search = value._split_search
        pieces = "" if search is None else f", {search.m} pieces"
        return (
            f"split: {value.split_shape or 'extremes'} over the label buckets, the heavy ones "
            f"split into equal pieces ranked apart ({value.resolution} buckets{pieces})"
        )
    if getattr(value, "shape", None) == "coin" and value.coin_score is not None:
        segments = len(value.coin_score.segments)
        return (
            f"coin: the outputs ranked with a coin released with each run ({segments} coin "
            "segments; a lower bound for the base with a released coin, not for the finite "
            "pair alone)"
        )
    if getattr(value, "shape", "monotone") == "monotone" or value.score is None:
        return "monotone"
    score = value.output_score if value.output_score is not None else value.score
    if value.shape == "extremes":
        where = f"runs in {_bucket(score, min)} lose, the farthest from it win"
    else:
        where = f"runs in {_bucket(score, max)} win, the middle"
    return f"{value.shape}: {where} ({score.unit} units, {len(score.ranks)} buckets)"


def _row(name: str, pair, law, delta: float) -> dict:
    start = time.perf_counter()
    pair = as_pair(pair)
    p = panel(pair, law, delta)
    if "exact" in p.monotone_score:
        monotone, label = p.monotone_score["exact"], "monotone_score"
    elif "exact" in p.reduced_game:
        monotone, label = p.reduced_game["exact"], "heuristic"
    else:
        monotone, label = None, None
    hit = p.attack_value
    mono_attack = interval_attack(pair, law, [delta], "monotone_score")
    attack = p.attack["epsilon"]
    # below_pct compares the monotone value with a lower bound for the same base: a coin
    # value bounds the base with a released coin, so there the pair's own attack is read
    own = attack
    if hit is not None and hit.method == "coin_search":
        own = with_one_run(attack_value(pair, law, [delta], scores="deterministic")).epsilon
    iv = p.interval
    return {
        "setting": name,
        "K": _law_name(law),
        "delta": delta,
        "eps_B": p.base["epsilon"],
        "monotone": monotone,
        "monotone_label": label,
        "monotone_attack": mono_attack.epsilon,
        "attack": attack,
        "score": "" if hit is None else score_summary(hit),
        "score_shape": None if hit is None else hit.shape,
        "generic_rdp": p.upper["generic_rdp"],
        "profile": p.upper["profile"],
        "interval_lower": iv.lower,
        "interval_upper": iv.upper,
        "upper_source": (iv.upper_source or "").split(" ")[0],
        "width": iv.width,
        "width_pct": 100 * iv.width / iv.upper,
        "below_pct": None if monotone is None or own is None else 100 * (own - monotone) / own,
        "seconds": round(time.perf_counter() - start, 2),
    }


def rows() -> list[dict]:
    """One row per setting of `SETTINGS` (module docstring)."""
    return [_row(*setting) for setting in SETTINGS]


def summary(rows: list[dict]) -> list[str]:
    """The findings docs/findings/any-score.md quotes, every number from the rows."""
    exact = [r for r in rows if r["monotone_label"] == "monotone_score"]
    below = [r for r in exact if r["below_pct"] is not None and r["below_pct"] > 0]
    lines = [f"- {ASSUMPTION_LINE}"]
    if below:
        lo, hi = min(r["below_pct"] for r in below), max(r["below_pct"] for r in below)
        lines.append(
            f"- Where the reduction is exact ({len(exact)} settings), the reduced game's exact "
            f"value lies below the attack value for any score in {len(below)}: by "
            f"{lo:.1f}% to {hi:.1f}% of the attack value."
        )
    else:
        lines.append(
            f"- Where the reduction is exact ({len(exact)} settings), no monotone value lies "
            "below the attack value for any score at the attack's current strength."
        )
    first = rows[0]
    lines.append(
        f"- {first['setting']}, K ~ {first['K']}, delta = {first['delta']:g}: monotone "
        f"{first['monotone']:.4f}, attack for any score {first['attack']:.4f}, generic "
        f"{first['generic_rdp']:.4f}, profile {first['profile']:.4f}."
    )
    pct = sorted(r["width_pct"] for r in rows)
    lines.append(
        f"- Interval width as a share of its upper end: median {pct[len(pct) // 2]:.1f}%, "
        f"max {pct[-1]:.1f}% over the {len(rows)} settings."
    )
    return lines


ASSUMPTION_LINE = (
    "monotone = the reduced game's exact value ([XWW24]'s monotone-score assumption; "
    "heuristic for tau < 1); attack = a valid lower bound for any score (a coin score: for "
    "the base with a coin released with each run, the pair's privacy profile); generic_rdp and "
    "profile = rigorous upper bounds for any score"
)
