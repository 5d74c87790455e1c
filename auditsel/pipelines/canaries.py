"""Canaries for auditing your own pipeline: what is in X' and not in X, and how to read it back.

Contract. A canary is frozen data (what it is) with the behaviour of one game bound to it by
`for_game(member, rng)`: the copy handed to your `tune(data, seed, canary)` knows whether it is
in (member = 1) and owns that game's random stream for its own draws. Out of a game (member =
0, or the unbound canary itself) every call below is a no-op, so `tune` is the same code in
both worlds and runs unchanged outside an audit.

* `InputCanary(x, y)`: one training example, appended to the training set in the game
  (`prepare(data)`: (X, y) arrays, numpy or torch, or a torch Dataset). Default score: minus
  the canary's loss under the released model (logistic loss for one output, cross-entropy for
  several), the membership test of [NHSBTJCT23] and [SNJ23]. `copies=k` appends k identical
  copies (a group, as [PS22] Section 2's outliers): eps_L then bounds that group's epsilon,
  which DP bounds only through group privacy.
* `GradientCanary(coordinate=i)`: a Dirac gradient of norm C (the clipping norm) on coordinate
  i of the flattened parameters (in the optimizer's order), or by name,
  `GradientCanary(parameter="fc1.weight", index=(3, 0))`: the worst-case canary of
  [NHSBTJCT23] and [XWW24] Sec. 5. It enters the clipped sum of a DP-SGD step before the noise,
  on the steps where Poisson sampling takes it (probability = the step's sample rate), as a
  real example whose clipped gradient is C e_i would: `canary.attach(optimizer)` on an Opacus
  `DPOptimizer`; `canary.step(grads, sample_rate=q, max_grad_norm=C)` on the summed clipped
  gradients of a hand-written loop; or `canary.examples(grads, ...)` on its per-example
  gradients before clipping, where the canary is one more row (`THROUGH` x C on its coordinate
  and its `spread` coordinates) that the pipeline's own clipping treats as any example's (any
  row is a valid canary, whatever its norm; `step` is then a no-op in that game).

  Default score: the move along the canary coordinate, `initial - theta_i` (gradient descent
  moves theta_i down when the canary is in), `initial` read from the release when it holds the
  initial weights (a mapping with "model" and "initial"), else the canary's; plus the same
  along each `spread` coordinate. Its `reference` coordinates (which only the noise moves) are
  read by `noise(release)`: the release's own noise scale, for the learned score
  (`auditsel.pipelines.learned_scores`).

A score reads the release only (`score(release)`), never the coin: the audit calls it with the
unbound canary. Every check of the canary's input (the data's format, the optimizer, the
sample rate) runs in both worlds, so that an error never depends on the coin.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from auditsel.errors import ConfigError, integer, number, shown

THROUGH = 1e4  # the example row of `GradientCanary.examples`: this many times C per coordinate


class Canary:
    """What every canary can do in one game (the base class; see the module docstring)."""

    _member: bool = False
    _rng: np.random.Generator | None = None
    _through: bool = False  # this game's canary entered by `examples` (then `step` is a no-op)

    def for_game(self, member: bool, rng: np.random.Generator) -> Canary:
        """This canary bound to one game: in when member, drawing from `rng`."""
        bound = copy.copy(self)
        object.__setattr__(bound, "_member", bool(member))
        object.__setattr__(bound, "_rng", rng)
        return bound

    @property
    def in_game(self) -> bool:
        """True when this game's coin put the canary in (member = 1)."""
        return self._member

    def prepare(self, data: Any) -> Any:
        """The training set of this game: `data`, plus the canary's example when it has one and
        is in."""
        return data

    def attach(self, optimizer: Any, *, sample_rate: float | None = None, model: Any = None) -> Any:
        """Inject the canary into an Opacus DPOptimizer (a no-op for others); the optimizer."""
        return optimizer

    def step(
        self,
        grads: Sequence[Any],
        *,
        sample_rate: float,
        max_grad_norm: Any,
        names: Sequence[str] | None = None,
    ) -> bool:
        """One step of a hand-written DP-SGD loop (a no-op for others): whether it added."""
        return False

    def examples(
        self,
        grads: Sequence[Any],
        *,
        sample_rate: float,
        max_grad_norm: Any,
        names: Sequence[str] | None = None,
    ) -> list[Any]:
        """The per-example gradients `grads` of a hand-written DP-SGD step, before clipping, with
        the canary's example row appended when it takes part (a no-op for other canaries)."""
        return list(grads)

    def score(self, release: Any) -> float:
        """The default attack: a real number, higher when the canary looks in."""
        raise NotImplementedError

    def noise(self, release: Any) -> float | None:
        """The release's own noise scale (module docstring); None where the canary reads none."""
        return None

    def describe(self) -> dict[str, Any]:
        """What result.json records of the canary."""
        return {"kind": type(self).__name__}


def default_score(release: Any, canary: Canary) -> float:
    """The canary's own score (`canary.score(release)`): what `audit_pipeline(score=None)` uses."""
    return canary.score(release)


# --- reading a release ------------------------------------------------------------------------


def _model_of(release: Any) -> Any:
    return release["model"] if isinstance(release, Mapping) and "model" in release else release


def _to_numpy(value: Any) -> NDArray[np.float64]:
    detach = getattr(value, "detach", None)
    if detach is not None:  # a torch tensor
        value = detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


def _parameter_list(release: Any) -> list[Any]:
    """The parameter tensors (or arrays) of a release, in `model.parameters()` order."""
    model = _model_of(release)
    parameters = getattr(model, "parameters", None)
    if callable(parameters):
        return list(parameters())
    if isinstance(model, Mapping):
        return list(model.values())
    if isinstance(model, (list, tuple)):
        return list(model)
    return [model]


def flat_parameters(release: Any) -> NDArray[np.float64]:
    """The release's parameters as one float64 vector: a torch module, a state dict, a sequence
    of tensors or arrays, or one array; a mapping with a "model" key is read through it."""
    parts = [_to_numpy(p).reshape(-1) for p in _parameter_list(release)]
    return np.concatenate(parts) if parts else np.empty(0)


def _locate(shapes: Sequence[tuple[int, ...]], coordinate: int) -> tuple[int, tuple[int, ...]]:
    """(parameter index, index tuple inside it) of a coordinate of the flattened parameters."""
    offset = coordinate
    for i, shape in enumerate(shapes):
        size = math.prod(shape)
        if offset < size:
            return i, tuple(int(j) for j in np.unravel_index(offset, shape)) if shape else ()
        offset -= size
    total = sum(math.prod(s) for s in shapes)
    raise ConfigError(
        "coordinate", f"must be below {total} (the number of parameters), got {coordinate}"
    )


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape)


# --- the canaries -----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class InputCanary(Canary):
    """One training example (x, y), appended to the training set when it is in (`copies`
    identical copies of it: a group canary)."""

    x: Any
    y: Any
    copies: int = 1

    def __post_init__(self) -> None:
        for name in ("x", "y"):
            try:  # a string, a ragged list, None: refused by name, not as an internal error
                value = _to_numpy(getattr(self, name))
            except (TypeError, ValueError):
                value = None
            if value is None or value.size == 0 or not np.all(np.isfinite(value)):
                raise ConfigError(
                    name,
                    f"must be a non-empty array of finite numbers (a rectangular list), got "
                    f"{shown(getattr(self, name))}",
                )
        object.__setattr__(self, "copies", integer(self.copies, "copies", 1))

    def prepare(self, data: Any) -> Any:
        kind = _data_kind(data)  # checked in both worlds
        return _append(data, self.x, self.y, kind, self.copies) if self._member else data

    def score(self, release: Any) -> float:
        """Minus the canary's loss under the released model (a callable: a torch module or any
        function from a batch of inputs to logits)."""
        model = _model_of(release)
        if not callable(model):
            raise ConfigError(
                "score",
                f"InputCanary's default score calls the release as a model; got a "
                f"{type(model).__name__}: release a model (or a mapping with a 'model' key), "
                f"or pass your own score(release, canary)",
            )
        logits = _to_numpy(_forward(model, self.x)).reshape(-1)
        y = _to_numpy(self.y).reshape(-1)
        if logits.size == 1:  # one output: a logit of P(y = 1)
            z, label = float(logits[0]), float(y[0])
            return -float(np.logaddexp(0.0, z) - label * z)
        label = int(y[0])
        if not 0 <= label < logits.size:
            raise ConfigError("y", f"must be a class index below {logits.size}, got {label}")
        return -float(np.logaddexp.reduce(logits) - logits[label])

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "input",
            "x_shape": list(_to_numpy(self.x).shape),
            "y": _to_numpy(self.y).reshape(-1).tolist(),
            "copies": self.copies,
        }


def _forward(model: Any, x: Any) -> Any:
    """model(x[None]) without gradients, x converted to the model's tensor type and dtype."""
    parameters = getattr(model, "parameters", None)
    first = next(iter(parameters()), None) if callable(parameters) else None
    if callable(parameters) and (first is None or hasattr(first, "detach")):  # a torch module
        # deferred: torch is an optional extra (the dpsgd extra, 1.9 s)
        import torch

        dtype = first.dtype if first is not None else torch.get_default_dtype()
        batch = torch.as_tensor(_to_numpy(x), dtype=dtype).unsqueeze(0)
        with torch.no_grad():
            return model(batch)
    return model(_to_numpy(x)[None])


def _data_kind(data: Any) -> str:
    """How `_append` extends this training set (a ConfigError when it cannot)."""
    if isinstance(data, (tuple, list)) and len(data) == 2:
        X, Y = data
        if hasattr(X, "detach") and hasattr(Y, "detach"):
            return "tensors"
        if np.ndim(X) >= 1 and np.ndim(Y) >= 1 and len(X) == len(Y):
            return "arrays"
        raise ConfigError("data", "must be (X, y) with one row of X per label in y")
    if hasattr(data, "__getitem__") and hasattr(data, "__len__"):
        import torch.utils.data as tud  # deferred: torch is an optional extra

        if isinstance(data, tud.TensorDataset) and len(data.tensors) == 2:
            return "tensor_dataset"
        if isinstance(data, tud.Dataset):
            return "dataset"
    raise ConfigError(
        "data",
        f"InputCanary appends its example to (X, y) arrays or tensors, or to a torch "
        f"Dataset; got {type(data).__name__}",
    )


def _append(data: Any, x: Any, y: Any, kind: str, copies: int = 1) -> Any:
    """`data` with `copies` copies of the example (x, y) appended as its last rows."""
    if kind == "arrays":
        X, Y = np.asarray(data[0]), np.asarray(data[1])
        rows = (
            np.concatenate([X, _rows(np.asarray(x, dtype=X.dtype), X.shape[1:], copies)]),
            np.concatenate([Y, _rows(np.asarray(y, dtype=Y.dtype), Y.shape[1:], copies)]),
        )
        return type(data)(rows)
    import torch  # deferred: torch is an optional extra
    import torch.utils.data as tud

    if kind == "tensors":
        X, Y = data
        x_rows = _rows(torch.as_tensor(_to_numpy(x), dtype=X.dtype), X.shape[1:], copies)
        y_rows = _rows(torch.as_tensor(_to_numpy(y), dtype=Y.dtype), Y.shape[1:], copies)
        return type(data)((torch.cat([X, x_rows]), torch.cat([Y, y_rows])))
    if kind == "tensor_dataset":
        return tud.TensorDataset(*_append(tuple(data.tensors), x, y, "tensors", copies))
    x_row = torch.as_tensor(_to_numpy(x), dtype=torch.get_default_dtype())
    x_rows = _rows(x_row, _to_numpy(x).shape, copies)
    extra = tud.TensorDataset(x_rows, _rows(torch.as_tensor(_to_numpy(y)), (), copies))
    return tud.ConcatDataset([data, extra])


def _rows(value: Any, shape: tuple[int, ...], copies: int) -> Any:
    """`copies` rows of `value` (a numpy array or torch tensor) reshaped to `shape`."""
    size = math.prod(shape)
    if math.prod(tuple(value.shape)) != size:  # the canary does not fit the data's rows
        what = "x" if shape else "y"
        raise ConfigError(
            f"canary.{what}",
            f"has {math.prod(tuple(value.shape))} values but a row of the data has shape "
            f"{tuple(shape)} ({size} values); give the canary the data's row shape",
        )
    row = value.reshape(1, *shape)
    if isinstance(row, np.ndarray):
        return np.repeat(row, copies, axis=0)
    return row.repeat_interleave(copies, dim=0)


@dataclass(frozen=True, eq=False)
class GradientCanary(Canary):
    """A Dirac gradient of norm C on one coordinate of the parameters: `coordinate=i` of the
    flattened parameters, or `parameter="fc1.weight", index=(3, 0)` by name (a name of
    `model.named_parameters()`; Opacus's `_module.` prefix is ignored)."""

    coordinate: int | None = None
    norm: float | None = None  # None: the clipping norm C of the step
    initial: float = 0.0  # the coordinate's initial value, for the default score
    parameter: str | None = None
    index: Any = None  # an int or a tuple of ints inside `parameter`
    #: further coordinates (of the flattened parameters) that the example row of `examples`
    #: also holds, and their initial values for the score (0 where not given)
    spread: tuple[int, ...] = ()
    spread_initial: tuple[float, ...] = ()
    #: coordinates that only the noise moves (an unused feature's weights) and their initial
    #: values (0 where not given): `noise(release)` reads their moves' spread
    reference: tuple[int, ...] = ()
    reference_initial: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if (self.coordinate is None) == (self.parameter is None):
            raise ConfigError(
                "coordinate",
                "give coordinate=i (of the flattened parameters) or parameter='name' with "
                "index=(...) (one of the two)",
            )
        if self.coordinate is not None:
            object.__setattr__(self, "coordinate", integer(self.coordinate, "coordinate", 0))
            if self.index is not None:
                raise ConfigError("index", "goes with parameter='name', not with coordinate")
        else:
            if not isinstance(self.parameter, str) or not self.parameter:
                raise ConfigError("parameter", "must be a parameter's name, e.g. 'fc1.weight'")
            index = self.index if isinstance(self.index, (tuple, list)) else (self.index,)
            if self.index is None or not all(
                isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))
                for i in index
            ):  # a bool is no index (True would become index 1)
                raise ConfigError(
                    "index", f"must be an int or a tuple of ints, e.g. (3, 0), got {self.index!r}"
                )
            object.__setattr__(self, "index", tuple(int(i) for i in index))
        if self.norm is not None:
            object.__setattr__(self, "norm", number(self.norm, "norm", 0, math.inf, lo_open=True))
        object.__setattr__(self, "initial", number(self.initial, "initial"))
        for field in ("spread", "reference"):
            self._check_coordinates(field)

    def _check_coordinates(self, field: str) -> None:
        """Validate the coordinates `field` ("spread" or "reference") and `field`_initial."""
        coordinates, starts = getattr(self, field), getattr(self, f"{field}_initial")
        if not isinstance(coordinates, (tuple, list)) or not isinstance(starts, (tuple, list)):
            raise ConfigError(field, f"must be a tuple of coordinates (and {field}_initial too)")
        coordinates = tuple(integer(c, field, 0) for c in coordinates)
        starts = tuple(number(v, f"{field}_initial") for v in starts)
        object.__setattr__(self, field, coordinates)
        object.__setattr__(self, f"{field}_initial", starts)
        if starts and len(starts) != len(coordinates):
            raise ConfigError(
                f"{field}_initial",
                f"must give one value per {field} coordinate ({len(coordinates)}), got "
                f"{len(starts)}",
            )
        if coordinates and self.coordinate is None:
            raise ConfigError(field, "goes with coordinate=i, not with parameter='name'")

    def _where(
        self, shapes: Sequence[tuple[int, ...]], names: Sequence[str] | None
    ) -> tuple[int, tuple[int, ...]]:
        """(parameter index, index tuple inside it) of the canary's coordinate."""
        if self.coordinate is not None:
            return _locate(shapes, self.coordinate)
        if names is None:
            raise ConfigError(
                "parameter",
                f"GradientCanary(parameter={self.parameter!r}) needs the parameters' names: "
                f"attach(optimizer, model=model), or step(grads, ..., names=[n for n, _ in "
                f"model.named_parameters()])",
            )
        plain = [n.removeprefix("_module.") for n in names]
        if self.parameter not in plain:
            raise ConfigError(
                "parameter", f"no parameter {self.parameter!r}; the names are {', '.join(plain)}"
            )
        i = plain.index(self.parameter)
        shape = tuple(shapes[i])
        if len(self.index) != len(shape) or not all(0 <= j < d for j, d in zip(self.index, shape)):
            raise ConfigError(
                "index", f"must index {self.parameter} of shape {shape}, got {self.index}"
            )
        return i, self.index

    def step(
        self,
        grads: Sequence[Any],
        *,
        sample_rate: float,
        max_grad_norm: Any,
        names: Sequence[str] | None = None,
    ) -> bool:
        """Add the canary's clipped gradient to the summed clipped gradients `grads` (in place,
        in parameter order) with probability `sample_rate`, when the canary is in; after
        clipping, before the noise. `names`: the parameters' names (for `parameter`)."""
        rate = number(sample_rate, "sample_rate", 0, 1, lo_open=True)
        index, where = self._where([_shape(g) for g in grads], names)
        norm = self._norm(max_grad_norm, index)
        if not self._member or self._rng is None or self._through:
            return False  # out, or entered through the pipeline's clipping (`examples`)
        if self._rng.random() >= rate:
            return False
        grads[index][where] += norm
        return True

    def examples(
        self,
        grads: Sequence[Any],
        *,
        sample_rate: float,
        max_grad_norm: Any,
        names: Sequence[str] | None = None,
    ) -> list[Any]:
        """The per-example gradients `grads` (one `[rows, *shape]` tensor or array per
        parameter) with, when the canary is in and sampled (probability `sample_rate`), one
        more row: THROUGH x C (the parameter's own C under per-layer clipping) at its coordinate
        and each `spread` coordinate, 0 elsewhere (module docstring)."""
        rate = number(sample_rate, "sample_rate", 0, 1, lo_open=True)
        shapes = [_shape(g)[1:] for g in grads]
        places = [self._where(shapes, names)] + [_locate(shapes, c) for c in self.spread]
        sizes = [THROUGH * self._norm(max_grad_norm, i) for i, _ in places]
        out = list(grads)
        if not self._member or self._rng is None:
            return out
        object.__setattr__(self, "_through", True)
        if self._rng.random() >= rate:
            return out
        rows = [_zero_row(g) for g in out]
        for (i, where), size in zip(places, sizes):
            rows[i][(0,) + tuple(where)] += size
        return [_stack(g, row) for g, row in zip(out, rows)]

    def _norm(self, max_grad_norm: Any, index: int) -> float:
        if self.norm is not None:
            return self.norm
        if isinstance(max_grad_norm, (list, tuple)):  # per-layer clipping: the parameter's own C
            max_grad_norm = max_grad_norm[index]
        return number(max_grad_norm, "max_grad_norm", 0, math.inf, lo_open=True)

    def attach(self, optimizer: Any, *, sample_rate: float | None = None, model: Any = None) -> Any:
        """Inject the canary into an Opacus `DPOptimizer`: added to the clipped sum before the
        noise at the step's sample rate (default: the rate its accountant charges). `model`
        names the parameters (for `parameter`). Out of the game the optimizer is untouched."""
        if not all(hasattr(optimizer, a) for a in ("add_noise", "params", "max_grad_norm")):
            raise ConfigError(
                "optimizer",
                "must be an Opacus DPOptimizer (from PrivacyEngine.make_private); in a "
                "hand-written DP-SGD loop call canary.step(grads, sample_rate=q, "
                "max_grad_norm=C) instead",
            )
        rate = _sample_rate(optimizer) if sample_rate is None else sample_rate
        rate = number(rate, "sample_rate", 0, 1, lo_open=True)
        names = None if model is None else [n for n, _ in model.named_parameters()]
        self._where([_shape(p) for p in optimizer.params], names)
        if not self._member:
            return optimizer
        noise = optimizer.add_noise  # the bound method of the optimizer's class

        def add_noise() -> Any:
            grads = [p.summed_grad for p in optimizer.params]
            self.step(
                grads,
                sample_rate=min(rate * optimizer.accumulated_iterations, 1.0),
                max_grad_norm=optimizer.max_grad_norm,
                names=names,
            )
            return noise()

        optimizer.add_noise = add_noise
        return optimizer

    def score(self, release: Any) -> float:
        """initial - theta_i summed over the canary's coordinates (module docstring)."""
        spread = self.spread_initial or (0.0,) * len(self.spread)
        moves = self._moves(release, (None, *self.spread), (self.initial, *spread))
        return sum(moves[1:], moves[0])

    def noise(self, release: Any) -> float | None:
        """The root mean square of the `reference` coordinates' moves (as the score reads
        them); None without reference coordinates."""
        if not self.reference:
            return None
        moves = self._moves(release, self.reference, self.reference_initial)
        return math.sqrt(float(np.mean(np.square(moves))))

    def _moves(
        self, release: Any, coordinates: tuple[int | None, ...], starts: tuple[float, ...]
    ) -> list[float]:
        """start - theta_c of each coordinate c (None: the canary's own), the start read from
        release["initial"] where the release holds it, else `starts` (0 where not given)."""
        starts = starts or (0.0,) * len(coordinates)
        if isinstance(release, Mapping) and "initial" in release:
            starts = tuple(self._coordinate_of(release["initial"], c) for c in coordinates)
        return [start - self._coordinate_of(release, c) for c, start in zip(coordinates, starts)]

    def _coordinate_of(self, parameters: Any, coordinate: int | None = None) -> float:
        found = _parameter_list(parameters)
        shapes = [_to_numpy(p).shape for p in found]
        if coordinate is None:
            index, where = self._where(shapes, _names(parameters))
        else:
            index, where = _locate(shapes, coordinate)
        return float(_to_numpy(found[index])[where])

    def describe(self) -> dict[str, Any]:
        where = (
            {"coordinate": self.coordinate}
            if self.coordinate is not None
            else {"parameter": self.parameter, "index": list(self.index)}
        )
        extra = {k: list(getattr(self, k)) for k in ("spread", "reference") if getattr(self, k)}
        return {"kind": "gradient", **where, "norm": self.norm, "initial": self.initial, **extra}


def _zero_row(grads: Any) -> Any:
    """One zero row shaped as a row of `grads` ([rows, *shape], a tensor or an array)."""
    zeros_like = getattr(grads, "new_zeros", None)
    if zeros_like is not None:  # a torch tensor
        return zeros_like((1, *grads.shape[1:]))
    return np.zeros((1, *np.shape(grads)[1:]), dtype=np.asarray(grads).dtype)


def _stack(grads: Any, row: Any) -> Any:
    """`grads` with `row` appended as its last row."""
    if hasattr(grads, "new_zeros"):
        import torch  # deferred: torch is an optional extra

        return torch.cat([grads, row])
    return np.concatenate([np.asarray(grads), row])


def _names(release: Any) -> list[str] | None:
    """The parameters' names of a release, in `_parameter_list` order; None when it has none."""
    model = _model_of(release)
    named = getattr(model, "named_parameters", None)
    if callable(named):
        return [n for n, _ in named()]
    if isinstance(model, Mapping):
        return [str(k) for k in model]
    return None


def _sample_rate(optimizer: Any) -> float:
    """The sample rate Opacus's accountant charges for this optimizer (bound into its step
    hook by `make_private`)."""
    try:
        rate = inspect.getclosurevars(optimizer.step_hook).nonlocals.get("sample_rate")
    except (AttributeError, TypeError):
        rate = None
    if rate is None:
        raise ConfigError(
            "sample_rate",
            "cannot read the optimizer's sample rate (it has no accountant hook from "
            "PrivacyEngine.make_private); pass attach(optimizer, sample_rate=q)",
        )
    return float(rate)
