"""The probe of a hand-written loop's clip-and-noise step (`privatizer=`): its one-example
sensitivity against the flat clip the claim assumes (check `per_layer_clipping`), and its noise
against the claim's (check `settings`).

A hand-written DP-SGD loop's privacy is in the step that clips the examples' gradients and adds
noise. Given that step as `privatizer(per_example_grads, clip) -> noisy summed grads` (one
`[batch, *shape]` tensor per parameter in, in parameter order; one `shape` tensor per parameter
out; the noise from torch's default generator), `privatizer_sensitivity` runs a seeded,
bounded probe (nothing is trained, no data is read):

* the shapes are the model's trainable parameters' (`SHAPES` without a model), C = `PROBE_CLIP`;
* D: `PROBE_EXAMPLES` seeded (`PROBE_SEED`) Gaussian per-example gradients, each scaled to a
  whole norm of C / 2 (no flat or per-tensor clipping touches them); the adversarial example:
  seeded Gaussian gradients with every tensor of norm `ADVERSARIAL_NORM` x C;
* every call runs with torch seeded to `NOISE_SEED` (its state restored), so that the noise
  cancels in a difference: D twice, and D with an all-zero example appended, must give the
  same output up to `RTOL` x C, else the probe cannot measure (a warning);
* the noise must be there: D under seeds `NOISE_SEED` and `NOISE_SEED + 1` differ (else
  "breaks": the output does not depend on torch's randomness, no noise);
* with a `base`, the noise must be the claim's: its standard deviation per number, estimated
  from the differences of D's outputs under `NOISE_PAIRS` pairs of seeds (||difference||^2 / 2
  per number; a relative error of about 1 / sqrt(2 n) for n numbers), below `NOISE_SHORTFALL`
  of the claim's noise multiplier x C breaks the claim (noise scaled for the mean but added to
  the sum, say): effect, the claim at the estimated noise multiplier;
* the sensitivity S = || privatizer(D + adversarial) - privatizer(D) || (all tensors together).
  Flat clipping gives S = C. S > C (1 + `RTOL`) breaks a flat claim, whose noise sigma C was
  calibrated to sensitivity C: the run is the claim's mechanism at noise multiplier
  sigma C / S (effect: the claim recomputed there, with `base` and `delta`). Per-tensor
  clipping of L tensors gives S = C sqrt(L) (every tensor of the adversarial example is
  above C). An adversarial example that passes unclipped (S at least `UNCLIPPED` of its norm)
  has unbounded effect.

An effective noise multiplier below `auditsel.mechanisms.NOISE_MIN` has no computed effect.
`RTOL` = 1e-3 is far above float32 rounding (about 1e-6) and below sqrt(2) - 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from auditsel.mechanisms import NOISE_MIN
from auditsel.pipelines.checks.finding import BREAKS, WARNING, Context, Finding

#: the hand-written loop's clip-and-noise step (module docstring)
Privatizer = Callable[[list[Any], float], Sequence[Any]]

PROBE_CLIP, PROBE_EXAMPLES, PROBE_SEED, NOISE_SEED = 1.0, 8, 0, 0
ADVERSARIAL_NORM = 10.0  # each tensor of the adversarial example: this many times C
RTOL = 1e-3
UNCLIPPED = 0.99
NOISE_PAIRS = 8  # pairs of seeds whose outputs' differences estimate the noise's spread
NOISE_SHORTFALL = 0.5  # a noise below this share of the claim's is reported
SHAPES: tuple[tuple[int, ...], ...] = ((4, 3), (4,), (2, 4), (2,))  # without a model


def _shapes(model: Any) -> list[tuple[int, ...]]:
    try:
        shapes = [tuple(p.shape) for p in model.parameters() if p.requires_grad]
    except (AttributeError, TypeError):
        shapes = []
    return shapes or [tuple(s) for s in SHAPES]


def _gradients(shapes: list[tuple[int, ...]], torch: Any) -> tuple[list[Any], list[Any]]:
    """D's per-example gradients (whole norm C / 2 each) and the adversarial example's (each
    tensor of norm ADVERSARIAL_NORM x C), one tensor per shape, seeded."""
    g = torch.Generator().manual_seed(PROBE_SEED)
    rows = [torch.randn((PROBE_EXAMPLES, *s), generator=g) for s in shapes]
    norms = sum((r.reshape(PROBE_EXAMPLES, -1) ** 2).sum(1) for r in rows).sqrt()
    scale = (PROBE_CLIP / 2) / norms
    batch = [r * scale.reshape(-1, *[1] * len(s)) for r, s in zip(rows, shapes)]
    adversarial = []
    for s in shapes:
        t = torch.randn(s, generator=g)
        adversarial.append(t * (ADVERSARIAL_NORM * PROBE_CLIP / t.norm().clamp(min=1e-12)))
    return batch, adversarial


def _call(privatizer: Privatizer, grads: list[Any], seed: int, torch: Any) -> Any:
    """The privatizer's output as one flat float64 vector, under torch seed `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = privatizer([g.clone() for g in grads], PROBE_CLIP)
    return torch.cat([torch.as_tensor(o).detach().double().reshape(-1) for o in out])


def sensitivity(privatizer: Privatizer, shapes: list[tuple[int, ...]]) -> dict[str, float]:
    """The probe's measurements (module docstring): `repeat` (D twice), `zero_row` (D against D
    with a zero example), `seeds` (D under two seeds) and `sensitivity` (D against D with the
    adversarial example), each the norm of the outputs' difference; `adversarial`, the
    adversarial example's whole norm; `noise_std`, the noise's standard deviation per number
    estimated from `numbers` differences of D's outputs under NOISE_PAIRS pairs of seeds
    (||difference||^2 / 2 per number)."""
    # deferred: torch is optional (a pipeline without a hand-written step has nothing to probe)
    import torch

    batch, adversarial = _gradients(shapes, torch)
    zero = [torch.cat([b, torch.zeros_like(b[:1])]) for b in batch]
    plus = [torch.cat([b, a[None]]) for b, a in zip(batch, adversarial)]
    base = _call(privatizer, batch, NOISE_SEED, torch)

    def gap(other: Any) -> float:
        if other.shape != base.shape:
            raise ValueError(
                f"returned {other.numel()} numbers for one batch, {base.numel()} for another"
            )
        return float((other - base).norm())

    squares = 0.0  # the noise's spread: D under seeds NOISE_SEED + 2i + 1 and + 2i + 2
    for i in range(NOISE_PAIRS):
        pair = [_call(privatizer, batch, NOISE_SEED + 2 * i + j, torch) for j in (1, 2)]
        squares += float(((pair[1] - pair[0]) ** 2).sum())
    return {
        "repeat": gap(_call(privatizer, batch, NOISE_SEED, torch)),
        "zero_row": gap(_call(privatizer, zero, NOISE_SEED, torch)),
        "seeds": gap(_call(privatizer, batch, NOISE_SEED + 1, torch)),
        "sensitivity": gap(_call(privatizer, plus, NOISE_SEED, torch)),
        "adversarial": float(torch.cat([a.reshape(-1) for a in adversarial]).norm()),
        "noise_std": math.sqrt(squares / (2 * NOISE_PAIRS * base.numel())),
        "numbers": float(NOISE_PAIRS * base.numel()),
    }


def privatizer_sensitivity(ctx: Context) -> list[Finding]:
    """The probe of `ctx.privatizer` (module docstring): breaks when one example moves the
    privatised sum by more than the flat clip C."""
    privatizer = ctx.privatizer
    if privatizer is None:
        return []
    shapes = _shapes(ctx.model)
    obj = f"privatizer ({getattr(privatizer, '__name__', type(privatizer).__name__)})"
    try:
        found = sensitivity(privatizer, shapes)
    except Exception as error:  # the user's step raised: the probe says so, and nothing more
        return [_cannot(obj, f"raised {type(error).__name__}: {error}")]
    tol = RTOL * PROBE_CLIP
    if found["repeat"] > tol or found["zero_row"] > tol:
        which = "the same batch twice" if found["repeat"] > tol else "a batch and the same"
        which += "" if found["repeat"] > tol else " batch with an all-zero example added"
        return [
            _cannot(
                obj,
                f"its outputs for {which}, under the same torch seed, differ by "
                f"{max(found['repeat'], found['zero_row']):.3g} (more than {tol:g}): its noise "
                f"does not cancel (drawn from another generator than torch's default, or for "
                f"each example)",
            )
        ]
    if found["seeds"] <= tol:
        return [
            Finding(
                BREAKS,
                obj,
                "its output is the same under two torch seeds: it adds no noise from torch's "
                "random generator (or a fixed one)",
                math.inf,
                "add Gaussian noise of standard deviation noise_multiplier x C to the clipped "
                "sum, drawn afresh at every step",
                check="settings",
                effect_text="no finite epsilon: the clipped sum is released with no noise",
            )
        ]
    return _noise_shortfall(ctx, obj, found) + _sensitivity(ctx, obj, found, len(shapes))


def _claim_at(ctx: Context, sigma: float) -> tuple[float | None, str]:
    """The claim at noise multiplier `sigma` and what it is; None (said why) without a base
    and a delta, or below the accountants' range of noise multipliers."""
    if ctx.base is None or ctx.delta is None:
        return None, "not computed: pass base= (the run the claim accounts) and delta="
    if sigma < NOISE_MIN:
        return None, (
            f"not computed: the effective noise multiplier {sigma:.3g} is below the "
            f"accountants' range (at least {NOISE_MIN:g}); the run is far from the claim"
        )
    return ctx.claim_epsilon(noise_multiplier=sigma), (
        f"the claim at the effective noise multiplier {sigma:.4g}"
    )


def _noise_shortfall(ctx: Context, obj: str, found: dict[str, float]) -> list[Finding]:
    """The noise's measured spread below NOISE_SHORTFALL of the claim's noise multiplier x C."""
    if ctx.base is None:
        return []
    claimed, measured = ctx.base.noise_multiplier * PROBE_CLIP, found["noise_std"]
    if measured >= NOISE_SHORTFALL * claimed:
        return []
    effect, text = _claim_at(ctx, measured / PROBE_CLIP)
    return [
        Finding(
            BREAKS,
            obj,
            f"its noise has a standard deviation of about {measured:.3g} C (estimated from "
            f"{found['numbers']:.0f} differences of its outputs under pairs of seeds), while "
            f"the claim's noise multiplier is {ctx.base.noise_multiplier:g} "
            f"({claimed:.3g} C): it adds less noise than the claim accounts for",
            effect,
            "add noise of standard deviation noise_multiplier x C to the clipped sum (not to "
            "the mean: scale it before dividing by the batch size), or account for the noise "
            "it adds",
            check="settings",
            effect_text=text + " (an estimate)" if effect is not None else text,
        )
    ]


def _sensitivity(ctx: Context, obj: str, found: dict[str, float], tensors: int) -> list[Finding]:
    """One example moving the privatised sum by more than the flat clip C."""
    c, s = PROBE_CLIP, found["sensitivity"]
    if s <= c * (1 + RTOL):
        return []
    groups = (s / c) ** 2  # L for per-tensor clipping of L tensors
    unclipped = s >= UNCLIPPED * found["adversarial"]
    if unclipped:
        effect: float | None = math.inf
        text = "no finite epsilon: an example's gradient passes unclipped"
    else:  # the claim's noise sigma C against a move of s: noise multiplier sigma C / s
        sigma = math.nan if ctx.base is None else ctx.base.noise_multiplier * c / s
        effect, text = _claim_at(ctx, sigma)
    how = (
        ", unclipped"
        if unclipped
        else f" = sqrt({groups:.3g}) C, as if {round(groups)} tensors or layers were each "
        f"clipped to C"
    )
    return [
        Finding(
            BREAKS,
            obj,
            f"one example whose gradient has norm {ADVERSARIAL_NORM:g} C in each of its "
            f"{tensors} tensors moves the privatised sum by {s / c:.4g} C{how}, while a "
            f"flat claim (noise calibrated to C) assumes at most C",
            effect,
            "clip each example's whole gradient (all tensors together) to C, or calibrate the "
            "noise to the norm of the per-tensor clipping norms (C sqrt(L) for L tensors "
            "clipped to C each), as Opacus's per-layer clipping does",
            check="per_layer_clipping",
            effect_text=text,
        )
    ]


def _cannot(obj: str, why: str) -> Finding:
    return Finding(
        WARNING,
        obj,
        f"the sensitivity probe cannot measure this step: {why}",
        None,
        "draw the noise from torch's default generator, once for the summed gradient (not per "
        "example), so that the probe's seeded calls cancel it",
        check="per_layer_clipping",
        effect_text="not computed: the probe did not run to the end",
    )
