"""The checks that read the data: state fitted on it, and rows counted twice.

* `data_dependent_state`: model state that is not a trained parameter but changes with the
  data, found by a seeded, bounded probe on two datasets that differ in one row: D, the first
  `PROBE_ROWS` rows of the training set, and D', row 0 plus seeded Gaussian noise of 10 times
  each feature's spread plus 1 (seed `PROBE_SEED`; rows of integers get row 1's values).
  (1) The model runs forward in training mode (no gradients, torch's random state, the model's
  state and mode restored) over D and over D' in batches of `PROBE_BATCH`; a buffer or numeric
  module attribute that ends differently (BatchNorm's running statistics) is updated by the
  data with no noise. (2) A stored array (a buffer, an array attribute of a module, a fitted
  attribute `name_` in the model or the release, such as a scaler's `mean_`) that equals a
  column statistic of the training set (mean, standard deviation, variance, min, max, median)
  which the one-row change moves is a statistic of the private data shipped with the model (a
  heuristic; statistics all 0 or all 1 are not compared).
* `duplicates`: exact duplicate rows (features and label), which a per-row accountant counts as
  distinct people. "breaks" when every distinct row of one label value (or of the dataset), at
  least `MIN_CLASS_ROWS` of them, occurs at least twice (a class replicated by oversampling),
  else a warning; each with the group-privacy epsilon for the largest multiplicity m
  (`_group_epsilon`).

Both read at most `MAX_ROWS` rows of a dataset that is not arrays (an indexable dataset is read
item by item); (2) compares statistics only when the features hold at most `MAX_STAT_VALUES`
numbers (larger sets, such as images, are not compared).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any

import numpy as np

from auditsel.pipelines.checks.finding import BREAKS, WARNING, Context, Finding, claim_curve

PROBE_ROWS, PROBE_BATCH, PROBE_SEED = 256, 64, 0
MAX_ROWS = 100_000
MIN_CLASS_ROWS = 5  # a replicated class: at least this many distinct rows, each 2+ times
MAX_STAT_VALUES = 20_000_000
_STAT_RTOL, _STAT_ATOL = 1e-4, 1e-6


def _array(value: Any) -> np.ndarray | None:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray) and value.dtype.kind in "fiub":
        return value
    return None


def columns(dataset: Any) -> list[np.ndarray] | None:
    """The dataset as arrays of rows (features first, then labels, ...): a TensorDataset, a
    tuple of arrays, one array, or any indexable dataset of tuples (at most MAX_ROWS rows)."""
    if dataset is None:
        return None
    found = _array(dataset)
    if found is not None:
        return [found]
    parts = getattr(dataset, "tensors", dataset if isinstance(dataset, (tuple, list)) else None)
    if isinstance(parts, (tuple, list)) and parts and all(_array(p) is not None for p in parts):
        return [_array(p) for p in parts]  # type: ignore[misc]
    return _indexed(dataset)


def _indexed(dataset: Any) -> list[np.ndarray] | None:
    try:
        n = min(len(dataset), MAX_ROWS)
        items = [dataset[i] for i in range(n)]
    except (TypeError, IndexError, KeyError, AttributeError):
        return None
    if not items:
        return None
    items = [item if isinstance(item, (tuple, list)) else (item,) for item in items]
    try:
        parts = [np.stack([np.asarray(_array(x) if _array(x) is not None else x) for x in part])
                 for part in zip(*items)]  # fmt: skip
    except (TypeError, ValueError):
        return None
    return parts if all(p.dtype.kind in "fiub" for p in parts) else None  # rows of numbers


# --- (1) and (2): state that changes with the data ----------------------------------------------


def _stored(model: Any) -> Iterator[tuple[str, Any]]:
    """(name, value) of the model's buffers and of its modules' tensor, array and number
    attributes (not parameters, not submodules)."""
    yield from model.named_buffers()
    for prefix, module in model.named_modules():
        for key, value in vars(module).items():
            if key.startswith("_") or key == "training":
                continue
            if _array(value) is not None or isinstance(value, float):
                yield (f"{prefix}.{key}" if prefix else key), value


def _snapshot(model: Any) -> dict[str, np.ndarray]:
    out = {}
    for name, value in _stored(model):
        array = _array(value)
        out[name] = np.array(array if array is not None else value, dtype=float, copy=True)
    return out


def _forward_pass(model: Any, rows: Any, torch: Any) -> dict[str, np.ndarray] | None:
    """The model's stored state after forward passes over `rows` in training mode, from the
    state it had; the state and the mode are restored. None when the model cannot take them."""
    saved = {name: b.detach().clone() for name, b in model.named_buffers()}
    attributes = {(m, k): v.detach().clone() if hasattr(v, "detach") else v
                  for m in model.modules() for k, v in vars(m).items()
                  if not k.startswith("_") and (hasattr(v, "detach") or isinstance(v, float))}  # fmt: skip
    mode = model.training
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(PROBE_SEED)
            model.train()
            for start in range(0, len(rows), PROBE_BATCH):
                model(rows[start : start + PROBE_BATCH])
        return _snapshot(model)
    except Exception:  # the model takes other inputs: the probe says nothing
        return None
    finally:
        model.train(mode)
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(saved[name])
        for (module, key), value in attributes.items():
            setattr(module, key, value)


def _neighbours(features: np.ndarray, torch: Any) -> tuple[Any, Any]:
    """D (the first PROBE_ROWS rows) and D' (row 0 moved by seeded noise of 10 spreads; rows of
    integers, such as token ids, get row 1's values instead)."""
    head = np.asarray(features[:PROBE_ROWS])
    floats = head.dtype.kind == "f"
    rows = torch.as_tensor(head, dtype=torch.float32 if floats else None)
    other = rows.clone()
    if floats:
        noise = torch.randn(rows[0].shape, generator=torch.Generator().manual_seed(PROBE_SEED))
        other[0] = rows[0] + 10 * (rows.std(dim=0) + 1) * noise
    else:
        other[0] = rows[1]
    return rows, other


def _updated_by_forward(ctx: Context, features: np.ndarray) -> tuple[list[Finding], set[str]]:
    # deferred: torch is optional (a pipeline without a torch model has no forward to probe)
    import torch

    model = ctx.model
    rows, other = _neighbours(features, torch)
    first, second = _forward_pass(model, rows, torch), _forward_pass(model, other, torch)
    if first is None or second is None:
        return [], set()
    moved = sorted(k for k in first if k in second and not np.array_equal(first[k], second[k]))
    if not moved:
        return [], set()
    shown = ", ".join(moved[:4]) + (f" and {len(moved) - 4} more" if len(moved) > 4 else "")
    finding = Finding(
        BREAKS,
        f"model ({type(model).__name__})",
        f"{len(moved)} stored value(s) ({shown}) change with one row of the data in a forward "
        f"pass in training mode (running statistics): they are released with no clipping or "
        f"noise, and couple the examples of a batch",
        math.inf,
        "replace BatchNorm by GroupNorm or LayerNorm (opacus.validators.ModuleValidator.fix), "
        "or keep such layers in eval mode with statistics from public data",
        check="data_dependent_state",
        effect_text="no finite epsilon: the statistics see the data with no noise",
    )
    return [finding], set(moved)


def _statistics(features: np.ndarray) -> dict[str, np.ndarray]:
    x = np.asarray(features, dtype=float).reshape(len(features), -1)
    stats = {
        "mean": x.mean(0), "std": x.std(0), "std (ddof 1)": x.std(0, ddof=1) if len(x) > 1 else x.std(0),
        "var": x.var(0), "min": x.min(0), "max": x.max(0), "median": np.median(x, 0),
    }  # fmt: skip
    return {k: v for k, v in stats.items() if not (np.allclose(v, 0) or np.allclose(v, 1))}


def _fitted(obj: Any, prefix: str, depth: int = 0) -> Iterator[tuple[str, np.ndarray]]:
    """Fitted arrays (`name_` attributes, scikit-learn's convention) of the objects held by
    `obj` (a module's attributes, a release's values), at most 3 levels down."""
    if depth > 3 or obj is None or isinstance(obj, (str, bytes, int, float)):
        return
    if isinstance(obj, (Mapping, list, tuple)):
        items = obj.items() if isinstance(obj, Mapping) else enumerate(obj)
        for key, value in islice(items, 100):
            yield from _fitted(value, f"{prefix}[{key!r}]", depth + 1)
        return
    for key, value in getattr(obj, "__dict__", {}).items():
        array = _array(value)
        if key.endswith("_") and not key.startswith("_") and array is not None:
            yield f"{prefix}.{key}", array
        elif not key.startswith("_") and not hasattr(value, "detach") and array is None:
            yield from _fitted(value, f"{prefix}.{key}", depth + 1)


def _fitted_in_model(model: Any) -> Iterator[tuple[str, np.ndarray]]:
    """Fitted arrays of the objects each module holds (a scaler kept as an attribute)."""
    for prefix, module in model.named_modules():
        for key, value in vars(module).items():
            if key.startswith("_") or _array(value) is not None or hasattr(value, "detach"):
                continue
            name = f"model.{prefix}.{key}" if prefix else f"model.{key}"
            yield from _fitted(value, name, 1)


def _stored_statistics(ctx: Context, features: np.ndarray, moved: set[str]) -> list[Finding]:
    if features.size > MAX_STAT_VALUES:
        return []
    stats = _statistics(features)
    rows_other = np.array(features, dtype=float, copy=True).reshape(len(features), -1)
    rows_other[0] += 10 * (rows_other.std(0) + 1)
    other = _statistics(rows_other)
    candidates: list[tuple[str, np.ndarray]] = []
    if ctx.model is not None and hasattr(ctx.model, "named_buffers"):
        candidates += [(f"model.{k}", np.asarray(v, float)) for k, v in _snapshot(ctx.model).items()
                       if k not in moved]  # fmt: skip
        candidates += list(_fitted_in_model(ctx.model))
    candidates += list(_fitted(ctx.release, "release"))
    found = []
    for name, value in candidates:
        flat = np.asarray(value, dtype=float).ravel()
        for stat, column in stats.items():
            if flat.shape != column.shape or stat not in other:
                continue
            if np.allclose(flat, column, rtol=_STAT_RTOL, atol=_STAT_ATOL) and not np.allclose(
                other[stat], column, rtol=_STAT_RTOL, atol=_STAT_ATOL
            ):
                found.append((name, stat))
                break
    if not found:
        return []
    shown = ", ".join(f"{n} = the data's column {s}" for n, s in found[:4])
    return [
        Finding(
            BREAKS,
            found[0][0].split(".")[0].split("[")[0],
            f"{len(found)} stored array(s) equal a statistic of the training data that one row "
            f"moves ({shown}; a heuristic match): a statistic of the private data is released "
            f"with no noise",
            math.inf,
            "fit the scaler on public data (or on a DP estimate of the statistics, and account "
            "for it), or scale with fixed constants",
            check="data_dependent_state",
            effect_text="no finite epsilon: the statistic sees the data with no noise",
        )
    ]


def _columns(ctx: Context) -> list[np.ndarray] | None:
    """`columns(ctx.dataset)`, read once per check_pipeline call."""
    if "columns" not in ctx.cache:
        ctx.cache["columns"] = columns(ctx.dataset)
    found: list[np.ndarray] | None = ctx.cache["columns"]
    return found


def data_dependent_state(ctx: Context) -> list[Finding]:
    """(1) state updated by a forward pass, (2) stored statistics of the data (docstring)."""
    data = _columns(ctx)
    if not data or data[0].ndim < 2 or len(data[0]) < 2:
        return []
    features = data[0]
    findings: list[Finding] = []
    moved: set[str] = set()
    if ctx.model is not None and hasattr(ctx.model, "named_buffers"):
        findings, moved = _updated_by_forward(ctx, features)
    return findings + _stored_statistics(ctx, features, moved)


# --- duplicates ---------------------------------------------------------------------------------


def duplicates(ctx: Context) -> list[Finding]:
    """Exact duplicate rows: "breaks" for a replicated class (systematic duplication),
    otherwise a warning, each with the group-privacy epsilon (module docstring)."""
    data = _columns(ctx)
    if not data or any(len(part) != len(data[0]) for part in data) or len(data[0]) < 2:
        return []
    parts = [np.ascontiguousarray(p).reshape(len(p), -1) for p in data]
    keys = [b"".join(p[i].tobytes() for p in parts) for i in range(len(parts[0]))]
    seen = Counter(keys)
    counts = np.array(list(seen.values()))
    m = int(counts.max())
    if m < 2:
        return []
    copies = int((counts[counts > 1]).sum())
    replicated = _replicated_class(parts, keys, seen)
    if replicated is not None:
        label, distinct, fewest, m = replicated
        which = "of the dataset" if label is None else f"with label {label}"
        times = f"{fewest}" if fewest == m else f"{fewest} to {m}"
        severity, message, fix = (
            BREAKS,
            f"every one of the {distinct} distinct rows {which} occurs {times} times: a "
            f"class replicated (oversampling for balance), so each of its people "
            f"is counted as up to {m} people, and the claim, for one row, is not one "
            f"for one person",
            "balance by weighting the rare class's loss (or by sampling it at a higher "
            "rate, and accounting for it), not by copying rows; or account for groups of "
            f"{m} rows (group privacy)",
        )
    else:
        severity, message, fix = (
            WARNING,
            f"{copies} rows are in groups of identical rows (largest group: {m} identical "
            f"rows): if a person's copies are counted as distinct people, the claim holds for "
            f"one row, not for one person",
            "drop the duplicates, or bound each person's rows and account for groups "
            "(oversampling a class for balance copies its people)",
        )
    effect, text = _group_epsilon(ctx, m)
    return [Finding(severity, "dataset", message, effect, fix, "duplicates", text)]


def _replicated_class(
    parts: list[np.ndarray], keys: list[bytes], seen: Counter[bytes]
) -> tuple[str | None, int, int, int] | None:
    """A label value (None: the whole dataset) at least MIN_CLASS_ROWS of whose distinct rows
    all occur at least twice, as (label, distinct rows, fewest copies, most copies), the one
    with the most copies; None when there is none. The label is the last part when it holds one
    number per row (a dataset of one part has none)."""
    groups: dict[str | None, set[bytes]] = {None: set(seen)}
    labels = parts[-1] if len(parts) >= 2 and parts[-1].shape[1] == 1 else None
    if labels is not None:
        for key, value in zip(keys, labels[:, 0]):
            groups.setdefault(f"{value:g}" if labels.dtype.kind == "f" else str(value), set()).add(
                key
            )
    found = []
    for label, rows in groups.items():
        multiplicities = [seen[k] for k in rows]
        if len(rows) >= MIN_CLASS_ROWS and min(multiplicities) >= 2:
            found.append((label, len(rows), min(multiplicities), max(multiplicities)))
    return max(found, key=lambda f: f[3]) if found else None


def _group_epsilon(ctx: Context, m: int) -> tuple[float | None, str]:
    """The claim made a guarantee for groups of m rows, at the claim's delta: for full batches
    (sample rate 1), the claim at noise multiplier sigma / m (m rows move the sum by m C); with
    another base, eps_m = m eps(delta_1) for a delta_1 with m e^((m-1) eps(delta_1)) delta_1 <= delta
    (group privacy of (eps, delta)-DP); from the claimed number alone, (m eps, m e^((m-1) eps)
    delta) at that larger delta (none when it reaches 1)."""
    delta = ctx.delta
    if ctx.base is not None and delta is not None and ctx.base.sample_rate >= 1:
        # every row in every step: m rows move the clipped sum by m C, noise sigma C
        sigma = ctx.base.noise_multiplier / m
        effect = ctx.claim_epsilon(noise_multiplier=sigma)
        return effect, f"the claim for {m} rows: full batches at noise multiplier {sigma:.4g}"
    if ctx.base is not None and delta is not None:
        curve = claim_curve(ctx.base, ctx.rounds)
        first = curve(delta / m)
        for factor in (1.0, 1.25, 1.5, 2.0, 3.0):
            guess = first * factor
            if not math.isfinite(guess):
                break
            delta_1 = delta / (m * math.exp((m - 1) * guess))
            if delta_1 <= 0:
                break
            eps_1 = curve(delta_1)
            if eps_1 <= guess:
                return m * eps_1, f"group privacy for {m} rows at delta {delta:g}"
        return math.inf, f"group privacy for {m} rows: no finite eps at delta {delta:g}"
    if ctx.claim is not None and delta is not None:
        eps = float(ctx.claim)
        group_delta = m * math.exp(min((m - 1) * eps, 700.0)) * delta
        if group_delta >= 1:
            return math.inf, (
                f"group privacy for {m} rows: the claimed ({eps:g}, {delta:g}) alone gives no "
                f"guarantee (delta {group_delta:.3g} >= 1); pass base= for the run's accounting"
            )
        return m * eps, f"group privacy for {m} rows, at delta {group_delta:.3g} (not {delta:g})"
    return None, "not computed: no claim or run to scale (pass claim= and delta=)"
