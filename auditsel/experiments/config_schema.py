"""The fields of a config as data: the one declaration docs/reference/config.md's tables are
written from (`python docs/generate.py`; `--check` fails when the page is stale).

Contract: `SCHEMA` lists, section by section, every key the parser (`auditsel.experiments.config`)
accepts, the kinds it applies to, its default and what is allowed. What the code holds is read
from the code, never copied: the defaults of the game and one-run sections are the fields of
`GameSpec`, `DpsgdGameSpec` and `OneRunSpec`; the kinds of bases and games are the parser's
tuples; the threshold rules `THRESHOLD_RULES`; the ranges of trials, seeds and the Bonferroni
grid `auditsel.errors.LIMITS`. Every other range is a `Range` here, and tests/test_docs.py
holds each one to the parser: its closed ends are accepted, its open ends and the values just
beyond either end are refused with a ConfigError naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from attacks.dpsgd_game import DpsgdGameSpec
from attacks.names import CANARY_NAMES, DPSGD_PROXIES, INPUT_CANARIES, MODEL_NAMES, THREAT_NAMES
from auditsel.auditing.rules import THRESHOLD_RULES
from auditsel.errors import LIMITS
from auditsel.experiments.config import (
    BASE_KINDS,
    DPSGD_DATASETS,
    DPSGD_DEFAULT_CHUNK,
    GAME_KINDS,
    GameSpec,
    OneRunSpec,
)
from auditsel.experiments.experiment import PANEL_ABOVE, STREAM_ABOVE
from auditsel.mechanisms import NOISE_MAX, NOISE_MIN, SAMPLE_RATE_MIN, STEPS_MAX


def shown_number(x: float) -> str:
    """A bound as the page writes it: 10^k and 2^k for large powers, else the plain number."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if float(x).is_integer():
        n = int(x)
        for base, least in ((10, 10**4), (2, 2**16)):
            k = round(math.log(n, base)) if n >= least else 0
            if k and base**k == n:
                return f"{base}^{k}"
        return str(n)
    return f"{x:g}"


@dataclass(frozen=True, kw_only=True)
class Range:
    """The values of a number field: [lo, hi] with open ends as marked; `integer` for an
    integer field; `each` when it bounds every entry of a list."""

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    each: bool = False

    def text(self) -> str:
        hi = shown_number(self.hi)
        close = ")" if self.hi_open else "]"
        k = round(math.log2(self.hi + 1)) if self.integer and self.hi >= 2**31 else 0
        if k and 2**k == self.hi + 1:  # 2^63 - 1: the integers below 2^63
            hi, close = f"2^{k}", ")"
        return f"{'(' if self.lo_open else '['}{shown_number(self.lo)}, {hi}{close}"


@dataclass(frozen=True, kw_only=True)
class Field:
    """One row: `allowed` is prose in which `{range}` stands for the range's interval."""

    key: str
    kinds: tuple[str, ...] = ("all",)
    default: str = "required"
    allowed: str
    range: Range | None = None

    def allowed_text(self) -> str:
        return self.allowed.replace("{range}", self.range.text() if self.range else "")


@dataclass(frozen=True, kw_only=True)
class Section:
    """One table of the page: `path` is the dotted section ('' for the top level)."""

    title: str
    path: str
    rows: tuple[Field, ...]


def spec_default(spec: object, key: str) -> str:
    """A spec field's default as YAML writes it (a tuple as a list, None as null)."""
    value = getattr(spec, key)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _names(names: tuple[str, ...] | list[str], about: dict[str, str] | None = None) -> str:
    about = about or {}
    return ", ".join(f"`{n}` ({about[n]})" if n in about else f"`{n}`" for n in names)


def _limit(key: str) -> Range:
    lo, hi = LIMITS[key]
    return Range(lo=lo, hi=hi, integer=True)


_G, _D, _O = GameSpec(), DpsgdGameSpec(), OneRunSpec()
_UNIT = Range(lo=0, hi=1, lo_open=True)

TOP = Section(
    title="Top level",
    path="",
    rows=(
        Field(
            key="name",
            allowed="a non-empty string of letters, digits, `-`, `_`, `.`; names the output folder `auditsel-results/<name>/`",
        ),
        Field(
            key="delta",
            allowed="in {range}; the delta at which every epsilon is reported (a calibrated `base.epsilon` needs delta > 0)",
            range=Range(lo=0, hi=1, hi_open=True),
        ),
        Field(key="base", allowed="the single run: a mapping (below)"),
        Field(key="rounds", allowed="the law of the number of runs K: a mapping (below)"),
        Field(
            key="game",
            default="none",
            allowed="the distinguishing game for a lower bound; omitted: bounds only",
        ),
        Field(
            key="sweep",
            default="none",
            allowed='a grid over any fields, `dotted.field: [values]` or `"a.x,a.y": [[x, y], ...]` ([how-to](../howto/sweeps.md))',
        ),
    ),
)

BASE = Section(
    title="`base`",
    path="base",
    rows=(
        Field(
            key="kind",
            allowed=_names(
                BASE_KINDS,
                {
                    "gaussian": "N(0,1) vs N(mu,1)",
                    "discrete": "finite outputs",
                    "dpsgd": "one DP-SGD training, [XWW24] eq. 1",
                    "laplace": "N Laplace steps, optionally Poisson-subsampled: dp_accounting's RDP and PLD accountants; any other dp_accounting `DpEvent` is a base in Python, `auditsel.events`",
                },
            ),
        ),
        Field(
            key="mu",
            kinds=("gaussian",),
            default="—",
            allowed="in {range}; exactly one of `mu` and `epsilon`",
            range=Range(lo=0, hi=1e3, lo_open=True),
        ),
        Field(
            key="epsilon",
            kinds=("gaussian", "dpsgd", "laplace"),
            default="—",
            allowed="eps_B of one run at `delta`, in {range}: mu (gaussian) or the noise multiplier (dpsgd) is calibrated to it; laplace: the pure eps of one run, N log(1 + tau (e^(1/b) - 1))",
            range=Range(lo=0, hi=100, lo_open=True),
        ),
        Field(
            key="p",
            kinds=("discrete",),
            allowed="list of output probabilities on X, lowest score first, each in {range}",
            range=Range(lo=0, hi=1, each=True),
        ),
        Field(key="q", kinds=("discrete",), allowed="the same on X', as many entries as `p`"),
        Field(
            key="noise_multiplier",
            kinds=("dpsgd", "laplace"),
            default="—",
            allowed="sigma (dpsgd) or the Laplace scale b at sensitivity 1 (laplace), in {range} (below 0.1 the bounds leave float64); exactly one of `noise_multiplier` and `epsilon`",
            range=Range(lo=NOISE_MIN, hi=NOISE_MAX),
        ),
        Field(
            key="steps",
            kinds=("dpsgd", "laplace"),
            default="required (dpsgd), 1 (laplace)",
            allowed="the number of steps N, an integer in {range} (what computes in reasonable time: dp_accounting's PLD self-composition takes about 1.5 minutes and 1.3 GB at 10^7 steps and never ends at 10^9)",
            range=Range(lo=1, hi=STEPS_MAX, integer=True),
        ),
        Field(
            key="sample_rate",
            kinds=("dpsgd", "laplace"),
            default="1.0",
            allowed="Poisson sampling rate tau, in {range} (below 1e-9 the sampled densities underflow)",
            range=Range(lo=SAMPLE_RATE_MIN, hi=1),
        ),
        Field(
            key="accountant",
            kinds=("dpsgd", "laplace"),
            default="rdp (dpsgd), pld (laplace)",
            allowed="`rdp` or `pld` (dp_accounting's), for eps_B and the calibration",
        ),
    ),
)

_ROUNDS_ROWS = (
    Field(
        key="eta",
        kinds=("tnb",),
        allowed="truncated negative binomial shape, in {range} ([PS22])",
        range=Range(lo=-1, hi=1e6, lo_open=True),
    ),
    Field(
        key="nu",
        kinds=("tnb", "geometric", "logarithmic"),
        allowed="in {range} (at least 1e-15); geometric is TNB with eta = 1, logarithmic with eta = 0; nu = 1 is K = 1",
        range=_UNIT,
    ),
    Field(
        key="mean",
        kinds=("poisson",),
        allowed="E[K] of K ~ Poisson(mean), in {range} (below 1 too: the generic bound counts K = 0, [PS22] Theorem 6 sharpened)",
        range=Range(lo=0, hi=1e15, lo_open=True),
    ),
    Field(
        key="n",
        kinds=("binomial",),
        allowed="K ~ Binomial(n, p): n an integer in {range}",
        range=Range(lo=1, hi=2**53, integer=True),
    ),
    Field(key="p", kinds=("binomial",), allowed="in {range}", range=_UNIT),
    Field(
        key="L",
        kinds=("two_point",),
        allowed="[XWW24] eq. 21: K = L with probability s, else 1; L an integer in {range}",
        range=Range(lo=1, hi=2**53, integer=True),
    ),
    Field(key="s", kinds=("two_point",), allowed="in {range}", range=Range(lo=0, hi=1)),
    Field(
        key="k",
        kinds=("point",),
        allowed="K = k always, an integer in {range} (k = 1: one run, no tuning)",
        range=Range(lo=1, hi=2**53, integer=True),
    ),
    Field(
        key="pmf",
        kinds=("pmf",),
        allowed="a mapping {k: probability}, keys integers in [0, 2^53], probabilities summing to 1",
    ),
)
#: the laws of K, in the order their keys first appear above
_LAW_KINDS = tuple(dict.fromkeys(kind for row in _ROUNDS_ROWS for kind in row.kinds))

ROUNDS = Section(
    title="`rounds`",
    path="rounds",
    rows=(Field(key="kind", allowed=_names(_LAW_KINDS)), *_ROUNDS_ROWS),
)


def _game_row(key: str, allowed: str, range: Range | None = None) -> Field:
    """A row of `game` whose default is GameSpec's (or DpsgdGameSpec's, for dpsgd games)."""
    dpsgd = key in {f.name for f in fields(DpsgdGameSpec)}
    return Field(
        key=key,
        kinds=("dpsgd",) if dpsgd else ("all",),
        default=spec_default(_D if dpsgd else _G, key),
        allowed=allowed,
        range=range,
    )


_GAME_ABOUT = {
    "reduced": "gaussian or dpsgd base: the reduced game of [XWW24] Figure 5",
    "discrete": "discrete base",
    "dpsgd": "real DP-SGD training, dpsgd base",
    "dpsgd_worst_case": "the worst-case DP-SGD game, dpsgd base",
}

GAME = Section(
    title="`game`",
    path="game",
    rows=(
        _game_row("kind", _names(GAME_KINDS, _GAME_ABOUT)),
        _game_row("trials", "number of games, an integer in {range}", _limit("game.trials")),
        _game_row("seed", "an integer in {range}", _limit("game.seed")),
        _game_row("confidence", "in {range}", Range(lo=0.5, hi=1, hi_open=True)),
        _game_row(
            "threshold",
            f"the valid rule reported as `eps`: {_names(THRESHOLD_RULES)} ([lower bounds](../explanation/lower-bounds.md))",
        ),
        _game_row(
            "proxy",
            "the adversary's score: `sample` or `likelihood_ratio` (reduced, discrete); "
            f"{_names(DPSGD_PROXIES)} (dpsgd; the first is its default); `sample` "
            "(dpsgd_worst_case); `score` (reduced, dpsgd_worst_case: the statistic of the tuner's "
            "score, the default when `score` is not monotone)",
        ),
        _game_row(
            "score",
            "how the tuner ranks its runs ([any score](../explanation/threat-models.md#the-tuners-score)): "
            "`monotone` (the run with the largest value wins: [XWW24]'s assumption, today's game), "
            "`worst` (the score the worst-score attack finds for this setting at `delta`: reduced, "
            "dpsgd_worst_case), `{kind: farthest, center: C}` (the run farthest from C, in output "
            "units, wins: reduced); discrete and dpsgd games play `monotone` only, one-run audits too",
        ),
        _game_row(
            "split_fraction",
            "the part of the games that chooses the threshold (split) or the pilot (bonferroni), in {range}",
            Range(lo=0, hi=1, lo_open=True, hi_open=True),
        ),
        _game_row(
            "thresholds", "bonferroni grid size, an integer in {range}", _limit("game.thresholds")
        ),
        _game_row(
            "chunk_size",
            f"trials per seeded, checkpointed chunk, an integer in {{range}} ({DPSGD_DEFAULT_CHUNK} for dpsgd games)",
            Range(lo=1, hi=2**24, integer=True),
        ),
        _game_row(
            "stream",
            f"`auto` (above {shown_number(STREAM_ABOVE)} trials), `true` or `false`: audit chunk by chunk from disk",
        ),
        _game_row(
            "panel",
            f"`auto` (in memory, up to {PANEL_ABOVE:,} trials), `true` or `false`: the [estimator panel](../explanation/lower-bounds.md#the-estimator-panel)",
        ),
        _game_row(
            "one_run", "one-run audits instead of games: a mapping (below; reduced and dpsgd games)"
        ),
        _game_row(
            "threat",
            f"{_names(THREAT_NAMES)} ([XWW24] Table 2; [threat models](../explanation/threat-models.md))",
        ),
        _game_row("canary", _names(CANARY_NAMES, {"dirac": "the gradient canary Z_D"})),
        _game_row("input_canary", _names(INPUT_CANARIES)),
        _game_row(
            "dataset",
            _names(DPSGD_DATASETS[:2])
            + " (bundled with scikit-learn), "
            + _names(DPSGD_DATASETS[2:])
            + " (from `data_dir`)",
        ),
        _game_row(
            "data_dir", "a local folder holding the data set's files (nothing is downloaded)"
        ),
        _game_row("model", _names(MODEL_NAMES)),
        _game_row(
            "hidden",
            "layer widths of the mlp, a non-empty list of integers in {range}",
            Range(lo=1, hi=2**16, integer=True, each=True),
        ),
        _game_row(
            "train_size",
            "training examples (null: all), an integer in {range}",
            Range(lo=1, hi=1e8, integer=True),
        ),
        _game_row(
            "validation_size",
            "validation examples (null: all), an integer in {range}",
            Range(lo=1, hi=1e8, integer=True),
        ),
        _game_row(
            "learning_rates",
            "the tuner's grid, each in {range}",
            Range(lo=0, hi=1e6, lo_open=True, each=True),
        ),
        _game_row("clip", "the clip norm C, in {range}", Range(lo=0, hi=1e9, lo_open=True)),
        _game_row("device", "`cpu`, `cuda` or null (cuda when available)"),
        _game_row(
            "max_batch_runs",
            "training runs batched together, an integer in {range}",
            Range(lo=1, hi=2**16, integer=True),
        ),
    ),
)

ONE_RUN = Section(
    title="`game.one_run`",
    path="game.one_run",
    rows=(
        Field(
            key="canaries",
            default=spec_default(_O, "canaries"),
            allowed="m canaries in one run, an integer in {range}",
            range=Range(lo=2, hi=1e6, integer=True),
        ),
        Field(
            key="repeats",
            default=spec_default(_O, "repeats"),
            allowed="one-run audits played, an integer in {range}",
            range=Range(lo=1, hi=1e4, integer=True),
        ),
        Field(
            key="family",
            default=spec_default(_O, "family"),
            allowed="[MMC24]'s hypothesised trade-off family: `tuning` (the exact per-canary curve) or `gdp`",
        ),
    ),
)

#: every table of docs/reference/config.md, in its order
SCHEMA: tuple[Section, ...] = (TOP, BASE, ROUNDS, GAME, ONE_RUN)
