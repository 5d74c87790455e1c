"""The result.json of an audit of your pipeline, as typed dictionaries (what `audit.result` is).

Contract. `PipelineAudit.result` (and `to_dict()`) is the document that `audit_pipeline` writes
to result.json: the sections of `auditsel run`'s result (docs/reference/result-json.md) plus
`pipeline` (`PipelineEntry`, with `FieldsEntry` and `ReproducibilityEntry`), `claim`
(`ClaimEntry`), `canaries` (`CanaryEntry`, one per canary of a tuple of canaries) and
`sequential` (`SequentialEntry` and its `LookEntry`s, `audit_until_refuted`). Each is a
`TypedDict`: at run time a plain dict, for a type checker a mapping whose keys and value types
are known.
"""

from __future__ import annotations

from typing import Any, TypedDict


class _Claim(TypedDict):
    epsilon: float
    refuted: bool | None


class ClaimEntry(_Claim, total=False):
    """The claim an audit tested: refuted is eps_L > epsilon (valid at the audit's confidence:
    `confidence` where the verdict's differs from `lower.confidence`, which is then one
    canary's or one look's share: several canaries, early stop)."""

    confidence: float


class FieldsEntry(TypedDict):
    """Every released field scored: each field's eps_L at `confidence_each`, and the largest."""

    confidence_each: float  # 1 - (1 - confidence) / fields (Bonferroni over the fields)
    eps: dict[str, float]  # field -> its eps_L
    best: str  # the field with the largest eps_L (the audit's eps)


class ReproducibilityEntry(TypedDict):
    """The replay check before the games (`auditsel.pipelines.replay_check`)."""

    checked: bool
    games_replayed: list[int]
    plays: int
    hazards: list[str]  # what made games differ on replay ([] when none)
    accepted_nondeterminism: bool
    uses_global_generators: bool
    seconds: float
    play_cpu_seconds: float


class _PipelineGames(TypedDict):
    """The keys every `PipelineEntry` has (the optional ones are `PipelineEntry`'s own)."""

    tune: str  # module.qualname of tune
    score: str  # the score's name (or "every released field ...", "<Canary> default score")
    canary: dict[str, Any]  # Canary.describe(): its kind and what defines it
    games: int
    chunk_size: int
    resumed_games: int  # read back from checkpoints
    game_cpu_seconds: float
    cpu_seconds: float
    fingerprint: str


class PipelineEntry(_PipelineGames, total=False):
    """What result.json records of the audited pipeline and of its games (`fields` only when
    every released field was scored; `reproducibility` after the replay check)."""

    fields: FieldsEntry
    reproducibility: ReproducibilityEntry


class CanaryEntry(TypedDict):
    """One canary's own audit, of a tuple of canaries (Bonferroni over the canaries)."""

    canary: dict[str, Any]
    eps: float
    refuted: bool | None
    confidence: float  # 1 - (1 - confidence) / canaries
    games: int


class LookEntry(TypedDict):
    """One look of `audit_until_refuted`: its games and its eps_L."""

    games: int
    eps: float
    refuted: bool


class SequentialEntry(TypedDict):
    """How `audit_until_refuted` looked: the schedule, each look's eps_L, where it stopped."""

    looks: list[int]
    confidence: float
    confidence_each: float  # 1 - (1 - confidence) / looks
    seen: list[LookEntry]
    stopped_at: int
    stopped_early: bool


class CurveEntry(TypedDict):
    """A privacy curve as result.json holds it: delta at each eps."""

    eps: list[float]
    delta: list[float]


class PipelineResult(TypedDict, total=False):
    """result.json of an audit of your pipeline: `auditsel run`'s sections (their contents in
    docs/reference/result-json.md; the upper side only with `base` and `rounds`) and the
    sections of the module docstring."""

    name: str
    delta: float
    base: dict[str, Any] | None
    rounds: dict[str, Any] | None
    upper: dict[str, float | None]
    upper_rigour: dict[str, str]
    upper_sources: dict[str, str | None]
    notes: list[str]
    monotone_score: dict[str, Any]  # under [XWW24]'s monotone-score assumption (stated)
    reduced_game: dict[str, float | None]  # heuristic values (sample rate below 1)
    attack: dict[str, Any]  # the attack value: a lower bound with no sampling error
    exact_curve: CurveEntry | None
    reduced_game_curve: CurveEntry  # heuristic: the reduced game's curve, not named exact
    attack_curve: CurveEntry
    upper_curves: dict[str, Any]
    reduced_game_curves: dict[str, Any]
    monotone_score_curves: dict[str, Any]
    lower: dict[str, Any]  # eps_L and its threshold rule (auditsel.auditing.lower)
    interval: dict[str, Any]  # with base and rounds: [lower, upper] of the tuning epsilon
    version: str
    git_commit: str | None
    git_dirty: bool | None
    code_digest: str
    heuristic: list[str]
    contradicted: dict[str, str]
    claim: ClaimEntry
    pipeline: PipelineEntry
    canaries: list[CanaryEntry]
    sequential: SequentialEntry
    seconds: float
