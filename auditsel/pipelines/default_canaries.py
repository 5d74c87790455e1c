"""`canary="both"`: an InputCanary and a GradientCanary chosen for you, audited together.

Contract. `resolve_canary(canary, tune, data)` returns `canary` unchanged unless it is the
string "both" (or a list, returned as a tuple); "both" becomes `default_canaries(tune, data)`,
a pair that `audit_pipeline` and `plan_pipeline` treat as any tuple of canaries: each plays the
audit's games, certified at confidence 1 - (1 - confidence) / 2 (Bonferroni).

The choice is a heuristic for power, never for validity (any canary gives a valid eps_L):

* the InputCanary is an outlier person built from `data` ((X, y) arrays or tensors, or a
  TensorDataset), with the least frequent label of y (the first on ties): the mean row, moved
  in units of `far` = `OUTLIER` times the larger of the most variable feature's standard
  deviation and the mean row's norm. (a) The far feature (an unused one, 0 in every row, where
  there is one, else the least variable) is set `far` above its mean. (b) The row moves `SIDE` x
  `far` along the unit vector from its label's mean row to the other labels' (the far feature
  left out; omitted for one label or equal means): there training moves the weights against the
  canary's label, so its loss rises at every step and dominates the mean loss (what a pipeline
  that early-stops on its loss sees). Per-example clipping caps it at C whatever its size, so a
  large outlier costs a correct pipeline nothing, while one that does not clip lets it through;
* the GradientCanary's coordinate is one the data do not move: with an unused feature and a
  weight matrix whose rows take the data's features (the first, in parameter order), that
  matrix's first row at the unused feature (the second unused feature when there is one, so
  that the two canaries sit apart); otherwise the coordinate that moved least over `PROBES`
  probe runs (seeds `PROBE_SEED`, `PROBE_SEED - 1`, ..., canary out): the smallest largest
  abs(theta_i - initial_i), with the initial weights from `release["initial"]`, else 0. The
  parameters are read from `parameter_holder(release)`; a probe that released none is skipped;
* where the pipeline hands the canary its per-example gradients before clipping
  (`canary.examples`, seen in the probes), the GradientCanary enters there, through the
  pipeline's own clipping, and holds one coordinate in every parameter tensor (`spread`): the
  one above, and in each other tensor the one that varied least over `THROUGH_PROBES` probe runs
  (torch's generator seeded from each seed), each with its median over those runs as its initial
  value. Where the unused features' weights number at least `REFERENCE` beyond the canary's
  own, they are its `reference` (medians likewise): `GradientCanary.noise(release)` reads the
  release's own noise scale from them, from which the learned score takes the units of the
  canary's score (`auditsel.pipelines.learned_scores`). A pipeline that only calls
  `canary.step` or `attach` gets the one-coordinate canary.

[NHSBTJCT23]'s Dirac canary is strongest where nothing else moves its coordinate ([CBP24]
make the same point for a hidden-state release). Initial weights drawn from the seed add their
spread to every coordinate: release them (`"initial"`) or fix them for the audit ([AD24]).
Give your own tuple, `canary=(InputCanary(x, y), GradientCanary(coordinate=i))`, to choose; a
pipeline whose data or release these rules cannot read is refused by name (ConfigError).
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

BOTH: Literal["both"] = "both"
OUTLIER = 1000.0  # the outlier's far feature: this many times its scale above its mean
SIDE = 1.0  # its move to the other labels' side: this multiple of the far feature's offset
PROBES = 3  # probe runs that choose the gradient canary's coordinate (no unused feature)
THROUGH_PROBES = 15  # probe runs (torch seeded) that place a through-clipping canary
REFERENCE = 8  # the fewest unused-feature weights a through-clipping canary reads noise on
HOLDER_DEPTH = 3  # levels into a release of mappings and lists searched for a model


#: what the audits take as `canary`: one canary, several (Bonferroni), or "both"
CanaryChoice = Canary | tuple[Canary, ...] | Literal["both"]


def resolve_canary(canary: Any, tune: TuneFn, data: Any) -> Canary | tuple[Canary, ...]:
    """`canary`, with "both" replaced by `default_canaries(tune, data)` and a list by a tuple;
    anything else as given, for the caller to check."""
    if isinstance(canary, str):
        if canary != BOTH:
            raise ConfigError(
                "canary", f"must be a canary, a tuple of canaries or 'both', got {canary!r}"
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
    """The InputCanary of "both" (module docstring)."""
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
    """(theta, initial) of a release that holds its parameters (initial 0 where it holds none;
    empty arrays where it holds none)."""
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
    parts = release.values() if isinstance(release, dict) else release
    for part in parts if isinstance(release, (dict, list, tuple)) else ():
        found = parameter_holder(part, depth - 1)
        if found is not None:
            return found
    return None


def _moves(release: Any) -> np.ndarray | None:
    """abs(theta - initial) of a probe's release (`_read` of its `parameter_holder`); None
    where no part of it holds parameters."""
    holder = parameter_holder(release)
    if holder is None:
        return None
    theta, initial = _read(holder)
    moves: np.ndarray = np.abs(theta - initial)
    return moves


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
    """(InputCanary, GradientCanary) for `canary="both"` (module docstring)."""
    person = outlier_example(data)
    listener = _Listener(person)
    seeds = [PROBE_SEED - r for r in range(PROBES)]
    first = None
    while seeds and first is None:  # a probe that released no parameters (K = 0) is skipped
        release = _probe(tune, data, listener, seeds.pop(0))
        moves = _moves(release)
        first = None if moves is None else (release, moves)
    if first is None:
        raise ConfigError(
            "canary",
            f"'both' chooses the gradient canary's coordinate from the released parameters, "
            f"and found none in a {type(release).__name__} release (nor in any part of it, "
            f"{HOLDER_DEPTH} levels down, over {PROBES} probe runs): give "
            f"canary=(InputCanary(x, y), GradientCanary(coordinate=i))",
        )
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
    thetas = []
    for r in range(THROUGH_PROBES if listener.heard else 0):  # through the pipeline's clipping
        theta = _read(parameter_holder(_seeded_probe(tune, data, listener, PROBE_SEED - r)))[0]
        if theta.shape == moves.shape:
            thetas.append(theta)
    if not thetas:  # not heard, or no probe released parameters: the one-coordinate canary
        return person, GradientCanary(coordinate=coordinate)
    return person, _through_clipping(coordinate, np.stack(thetas), holder, free)


def _seeded_probe(tune: TuneFn, data: Any, canary: Canary, seed: int) -> Any:
    """`_probe` with torch's generator (when loaded) seeded from `seed`, restored after."""
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
        self, grads: Any, *, sample_rate: float, max_grad_norm: Any, names: Any = None
    ) -> list[Any]:
        self.heard = True
        return list(grads)


def _through_clipping(
    coordinate: int, thetas: np.ndarray, holder: Any, free: list[int]
) -> GradientCanary:
    """The GradientCanary of a pipeline that lets it through its own clipping (module
    docstring; `thetas`: one row per probe run, `free`: the unused features' weights)."""
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
