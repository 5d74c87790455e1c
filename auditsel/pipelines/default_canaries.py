"""`canary="both"`: an InputCanary and a GradientCanary chosen for you, audited together.

Contract. `resolve_canary(canary, tune, data)` returns `canary` unchanged unless it is the
string "both" (or a list, returned as a tuple); "both" becomes `default_canaries(tune, data)`,
the pair (InputCanary, GradientCanary) that `audit_pipeline` and `plan_pipeline` then treat as
any tuple of canaries: each canary plays the audit's games (the games are doubled, not split)
and is certified at confidence 1 - (1 - confidence) / 2 (Bonferroni), so that the verdict holds
at `confidence` whichever canary refutes (`auditsel.pipelines.pipeline`).

The choice is a heuristic for power, never for validity (any canary gives a valid eps_L):

* the InputCanary is an outlier person built from `data` ((X, y) arrays or tensors, or a
  TensorDataset of two tensors) to dominate what a pipeline computes from its rows (its loss,
  a feature's scale), with the least frequent label of y (the first on ties): the mean row,
  moved two ways, each in units of `far` = `OUTLIER` times the larger of the most variable
  feature's standard deviation and the mean row's norm. (a) The far feature is set `far`
  above its mean: an unused one (0 in every row: the data never move the weights it feeds, so
  that only the noise and the canary move them) where the data have one, else the least
  variable (the first such). (b) The row moves `SIDE` x `far` along the unit vector from its
  label's mean row to the other labels' mean row (the far feature left out; omitted where y
  has one label or the two means are equal): the side the data associate with the other
  labels, where training on the data moves the weights against the canary's label, so that
  its loss (a wrong-side point's, linear in its distance) rises at every step the data move
  them and dominates the mean loss over the rows. A pipeline that monitors its training loss
  (early stopping on it: the bug zoo's `early_stop_loss`) sees it rise from the first steps;
  on the far feature alone the canary's loss is a random walk of the noise, which such a
  pipeline barely sees (docs/findings/bugzoo.md gives the stop steps measured with each, and
  `benchmarks/zoo_early_stop_canary.py` measures them). Far out on purpose: a pipeline that
  clips each example's gradient caps it at C whatever its size (a linear model's: about
  1 / sqrt(1 + SIDE^2) of it, 0.71 C, on the far feature's weight), so a large outlier costs
  a correct pipeline nothing, while one that does not clip (or clips the batch) lets it
  through at full size (the bug zoo's `batch_clipping`);
* the GradientCanary's coordinate is one where the data do not move the weights: where the data
  have an unused feature (0 in every row) and the released parameters hold a weight matrix
  whose rows take the data's features (the first such, in parameter order), that matrix's first
  row at the unused feature (a second unused feature when there is one, so that the two canaries
  sit apart): its data gradient is exactly 0 in every step, so the canary's gradient is all that
  moves it (noise aside). Otherwise the coordinate that moved least over `PROBES` probe runs
  (seeds `PROBE_SEED`, `PROBE_SEED - 1`, ..., the canary out): the largest of
  abs(theta_i - initial_i) over the runs smallest, with the initial weights from
  `release["initial"]` when the release holds them, else 0. The parameters are read from the
  release's `parameter_holder`: the release itself where `flat_parameters` reads it (a torch
  module, a mapping with "model"), else its first part that holds a model (a list of every
  run's model: the first run's); a probe that released none (K = 0) is skipped;
* where the pipeline hands the canary its per-example gradients before clipping
  (`canary.examples(grads, ...)`, seen in the probe runs), the GradientCanary enters there, as
  one more example, through the pipeline's own clipping, and holds a coordinate in every
  parameter tensor (`spread`): the one above, and in each other tensor the coordinate whose
  value varied least over `THROUGH_PROBES` more probe runs (seeds `PROBE_SEED`, `PROBE_SEED -
  1`, ..., torch's generator seeded from each, so that every process places it alike), each
  scored from its median over those runs (`initial`, `spread_initial`: near a fixed init's
  value where the data do not move it, so that the score's move divided by the released
  learning rate and clipping norm is not offset by the init). Flat clipping cuts that row to norm C as any example's; a pipeline
  that clips each tensor to C lets C through in every tensor, which the canary's score (its
  move summed over the coordinates) reads; noise added before clipping is swamped by the
  row's size. Where the data have unused features whose weights number at least `REFERENCE`
  beyond the canary's own (the first weight matrix's entries at every unused feature: the
  data never move them, only the noise does), they are its `reference` (each read from its
  median over the same probe runs): `GradientCanary.noise(release)`, their moves' root mean
  square, is the release's own noise scale, from which the learned score takes the units of
  the canary's score (the released scalars, e.g. the learning rate times the clipping norm,
  that the noise scales with: `auditsel.pipelines.learned_scores`). A pipeline that only
  calls `canary.step` (after clipping) or `attach` (Opacus) gets the one-coordinate canary, as
  before.

[NHSBTJCT23]'s Dirac canary is strongest where nothing else moves its coordinate; [CBP24]'s
crafted gradient canaries make the same point for a hidden-state release. A pipeline
whose initial weights are drawn from its seed adds their spread to every coordinate: release
them (`"initial"`, by name, or as the module) so that the score reads the displacement, or fix
the initial weights for the audit (the claim does not depend on them; [AD24] choose them to
make the audit tight).

Give your own tuple, `canary=(InputCanary(x, y), GradientCanary(coordinate=i))`, to choose
them; a pipeline whose data or release these rules cannot read is refused by name (ConfigError).
"""

from __future__ import annotations

import math
import sys
from typing import Any, Literal, cast

import numpy as np

from auditsel.errors import ConfigError
from auditsel.pipelines.canaries import (
    Canary,
    GradientCanary,
    InputCanary,
    _parameter_list,
    _to_numpy,
    flat_parameters,
)
from auditsel.pipelines.game import TuneFn, probe_call
from auditsel.pipelines.release_scores import PROBE_SEED

__all__ = [
    "BOTH",
    "OUTLIER",
    "SIDE",
    "default_canaries",
    "outlier_example",
    "parameter_holder",
    "resolve_canary",
]

BOTH: Literal["both"] = "both"
OUTLIER = 1000.0  # the outlier's far feature: this many times its scale above its mean
SIDE = 1.0  # its move to the other labels' side: this multiple of the far feature's offset
PROBES = 3  # probe runs that choose the gradient canary's coordinate (no unused feature)
THROUGH_PROBES = 15  # probe runs (torch seeded) that place a through-clipping canary
REFERENCE = 8  # the fewest unused-feature weights that a through-clipping canary reads
#               the release's noise on (module docstring)
HOLDER_DEPTH = 3  # levels into a release of mappings and lists searched for a model


#: what `audit_pipeline`, `plan_pipeline` and `audit_until_refuted` take as `canary`: one canary,
#: several (each audited at its Bonferroni share), or "both" (an input and a gradient canary)
CanaryChoice = Canary | tuple[Canary, ...] | Literal["both"]


def resolve_canary(canary: Any, tune: TuneFn, data: Any) -> Canary | tuple[Canary, ...]:
    """`canary`, with "both" replaced by `default_canaries(tune, data)` and a list by a tuple
    (module docstring); anything else is returned as given, for the caller to check."""
    if isinstance(canary, str):
        if canary != BOTH:
            raise ConfigError(
                "canary",
                f"must be a canary, a tuple of canaries or 'both', got {canary!r}",
            )
        return default_canaries(tune, data)
    if isinstance(canary, list):
        return tuple(canary)
    return cast("Canary | tuple[Canary, ...]", canary)  # checked by the caller


def _arrays(data: Any) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of a training set the InputCanary can be appended to, as numpy arrays."""
    tensors = getattr(data, "tensors", None)
    if isinstance(tensors, tuple) and len(tensors) == 2:  # a torch TensorDataset
        data = tensors
    if isinstance(data, (tuple, list)) and len(data) == 2:
        try:
            X, y = _to_numpy(data[0]), _to_numpy(data[1])
        except (TypeError, ValueError):
            X = y = np.empty(0)
        if X.ndim >= 1 and y.ndim >= 1 and len(X) == len(y) > 0:
            return X, y
    raise ConfigError(
        "canary",
        f"'both' builds its InputCanary from (X, y) arrays or tensors or a TensorDataset; got "
        f"{type(data).__name__}: give canary=(InputCanary(x, y), GradientCanary(...))",
    )


def _unused(rows: np.ndarray) -> np.ndarray:
    """The features (columns) that are 0 in every row."""
    return np.flatnonzero(np.all(rows == 0, axis=0))


def _wrong_side(rows: np.ndarray, mine: np.ndarray, far: int) -> np.ndarray | None:
    """The unit vector from the mean row of the canary's label (`mine`, a mask) to the mean
    row of the others, the `far` feature left out: the side the data associate with the other
    labels; None where there is none (one label, or the two means equal)."""
    if mine.all() or not mine.any():
        return None
    gap = rows[~mine].mean(axis=0) - rows[mine].mean(axis=0)
    gap[far] = 0.0
    norm = float(np.linalg.norm(gap))
    return gap / norm if norm > 0 else None


def outlier_example(data: Any) -> InputCanary:
    """The InputCanary of "both" (module docstring): the mean row with one feature (an unused
    one where there is one, else the least variable) set far above its mean, moved `SIDE` times
    as far towards the other labels' mean row, and the least frequent label."""
    X, y = _arrays(data)
    rows = X.reshape(len(X), -1)
    labels_of = y.reshape(len(y), -1)
    spread = rows.std(axis=0)
    x = rows.mean(axis=0)
    unused = _unused(rows)
    j = int(unused[0]) if len(unused) else int(np.argmin(spread))
    far = OUTLIER * (max(float(spread.max()), float(np.linalg.norm(x))) or 1.0)
    labels, counts = np.unique(labels_of, axis=0, return_counts=True)
    label = labels[int(np.argmin(counts))]
    side = _wrong_side(rows, np.all(labels_of == label, axis=1), j)
    x[j] += far
    if side is not None:
        x += SIDE * far * side
    return InputCanary(x=x.reshape(X.shape[1:]), y=label.reshape(y.shape[1:]))


def _probe(tune: TuneFn, data: Any, person: Canary, seed: int) -> Any:
    what = (
        f"the probe run that chooses the gradient canary of canary='both' (seed {seed}, canary out)"
    )
    return probe_call("tune", tune, what, data, seed, person)  # unbound: the canary is out


def _read(release: Any) -> tuple[np.ndarray, np.ndarray]:
    """(theta, initial) of a release that holds its parameters (initial 0 where it holds none);
    empty arrays where it does not."""
    try:
        theta = flat_parameters(release)
        initial = (
            flat_parameters(release["initial"])
            if isinstance(release, dict) and "initial" in release
            else np.zeros_like(theta)
        )
    except (TypeError, ValueError, AttributeError, KeyError, IndexError):
        return np.empty(0), np.empty(0)
    if theta.size == 0 or theta.shape != initial.shape or not np.all(np.isfinite(theta)):
        return np.empty(0), np.empty(0)
    return theta, initial


def parameter_holder(release: Any, depth: int = HOLDER_DEPTH) -> Any:
    """The part of a release that holds one model's parameters: the release itself when
    `flat_parameters` reads it, else the first part that does, depth first through mappings
    (their values) and lists (their entries), at most `depth` levels down (a list of every
    run's model and its learning rate: the first run's); None where no part does."""
    if _read(release)[0].size:
        return release
    if depth <= 0:
        return None
    parts: list[Any] = []
    if isinstance(release, dict):
        parts = list(release.values())
    elif isinstance(release, (list, tuple)):
        parts = list(release)
    for part in parts:
        found = parameter_holder(part, depth - 1)
        if found is not None:
            return found
    return None


def _moves(release: Any) -> np.ndarray | None:
    """abs(theta - initial) of a probe's release (initial 0 where it holds none), read from
    its `parameter_holder`; None where no part of it holds parameters."""
    holder = parameter_holder(release)
    if holder is None:
        return None
    theta, initial = _read(holder)
    moves: np.ndarray = np.abs(theta - initial)
    return moves


def _unreadable(release: Any) -> ConfigError:
    return ConfigError(
        "canary",
        f"'both' chooses the gradient canary's coordinate from the released parameters, "
        f"and found none in a {type(release).__name__} release (nor in any part of it, "
        f"{HOLDER_DEPTH} levels down, over {PROBES} probe runs): give "
        f"canary=(InputCanary(x, y), GradientCanary(coordinate=i))",
    )


def _unused_weights(release: Any, rows: np.ndarray) -> list[int]:
    """Every coordinate of the first weight matrix taking the data's features at an unused
    feature (their data gradient is 0 in every step), row by row, in the order of `_unused`
    from the second unused feature on, then the first; [] where there is none."""
    unused = [int(j) for j in _unused(rows)]
    unused = unused[1:] + unused[:1]
    offset = 0
    for parameter in _parameter_list(release):
        shape = _to_numpy(parameter).shape
        if len(shape) == 2 and shape[1] == rows.shape[1]:
            return [offset + r * shape[1] + j for r in range(shape[0]) for j in unused]
        offset += math.prod(shape)
    return []


def default_canaries(tune: TuneFn, data: Any) -> tuple[InputCanary, GradientCanary]:
    """(InputCanary, GradientCanary) for `canary="both"` (module docstring): the outlier
    person of `data`, and a coordinate the data do not move (an unused feature's weight, else
    the one that moved least over the probe runs)."""
    person = outlier_example(data)
    listener = _Listener(person)
    seeds = [PROBE_SEED - r for r in range(PROBES)]
    first = None
    while seeds and first is None:  # a probe that released no parameters (K = 0) is skipped
        release = _probe(tune, data, listener, seeds.pop(0))
        moves = _moves(release)
        first = None if moves is None else (release, moves)
    if first is None:
        raise _unreadable(release)
    release, moves = first
    X, _ = _arrays(data)
    rows = X.reshape(len(X), -1)
    holder = parameter_holder(release)
    free = _unused_weights(holder, rows)  # the first: the canary's own where there is one
    coordinate = free[0] if free else None
    if coordinate is None:
        for seed in seeds:
            again = _moves(_probe(tune, data, listener, seed))
            if again is not None and again.shape == moves.shape:
                moves = np.maximum(moves, again)
        coordinate = int(np.argmin(moves))
    if not listener.heard:
        return person, GradientCanary(coordinate=coordinate)
    thetas = []
    for r in range(THROUGH_PROBES):
        seed = PROBE_SEED - r
        theta = _read(parameter_holder(_seeded_probe(tune, data, listener, seed)))[0]
        if theta.shape == moves.shape:
            thetas.append(theta)
    if not thetas:  # no probe released parameters: the one-coordinate canary
        return person, GradientCanary(coordinate=coordinate)
    return person, _through_clipping(coordinate, np.stack(thetas), holder, free)


def _seeded_probe(tune: TuneFn, data: Any, canary: Canary, seed: int) -> Any:
    """A probe run (`_probe`) with torch's generator seeded from `seed` (when torch is
    loaded), its state restored after: the same release in every process."""
    torch = sys.modules.get("torch")
    if torch is None:
        return _probe(tune, data, canary, seed)
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed % 2**32)
        return _probe(tune, data, canary, seed)


class _Listener(Canary):
    """The probes' canary (out of every game: a no-op), which notes whether the pipeline hands
    it the per-example gradients before clipping (`Canary.examples`)."""

    def __init__(self, person: InputCanary) -> None:
        self.person = person
        self.heard = False

    def prepare(self, data: Any) -> Any:
        return self.person.prepare(data)  # out: the data, checked as the InputCanary checks

    def examples(
        self,
        grads: Any,
        *,
        sample_rate: float,
        max_grad_norm: Any,
        names: Any = None,
    ) -> list[Any]:
        self.heard = True
        return list(grads)


def _through_clipping(
    coordinate: int, thetas: np.ndarray, holder: Any, free: list[int]
) -> GradientCanary:
    """The GradientCanary of a pipeline that lets it through its own clipping (module
    docstring): `coordinate`, and in every other parameter tensor the coordinate whose value
    varied least over the probe runs (`thetas`, one row per run: the smallest standard
    deviation, the first on ties), each with its median over the runs as its initial value
    (robust to the runs whose learning rate and clipping norm move it most); the coordinates
    of `free` (an unused feature's weights) that it does not hold as its `reference`, where
    there are at least `REFERENCE` of them."""
    spread: list[int] = []
    offset = 0
    for parameter in _parameter_list(holder):
        size = math.prod(_to_numpy(parameter).shape)
        if not offset <= coordinate < offset + size:
            block = thetas[:, offset : offset + size]
            spread.append(offset + int(np.argmin(block.std(axis=0))))
        offset += size
    start = np.median(thetas, axis=0)
    reference = [c for c in free if c != coordinate and c not in spread]
    if len(reference) < REFERENCE:
        reference = []
    return GradientCanary(
        coordinate=coordinate,
        initial=float(start[coordinate]),
        spread=tuple(spread),
        spread_initial=tuple(float(start[c]) for c in spread),
        reference=tuple(reference),
        reference_initial=tuple(float(start[c]) for c in reference),
    )
