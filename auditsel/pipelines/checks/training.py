"""The checks that read the optimizers, the loader and the accountant (no training, no data).

* `parameters_outside_dp`: a trainable parameter that some optimizer updates but no DP
  optimizer does (a head trained by a second, plain optimizer), or that is in both;
* `sampling`: a loader whose batches are not Poisson-sampled (a shuffled or sequential
  `DataLoader`, Opacus's `poisson_sampling=False`) while the accounting assumes Poisson
  sampling [CGKKMSZ24];
* `settings`: a noise multiplier, clipping norm, sample rate or number of steps that differs
  between the DP optimizers, the loader, the accountant and the claim;
* `per_layer_clipping`: per-layer clipping (Opacus's `max_grad_norms`) whose noise is
  calibrated to less than the norm of the per-layer norms, i.e. to a flat clip that the
  per-layer clipping does not enforce; and, for a hand-written loop that hands its
  clip-and-noise step as `privatizer=`, the probe of `auditsel.pipelines.checks.privatizer`
  (one example moving the noisy sum by more than the flat clip C).

A DP optimizer is any optimizer with Opacus's public `noise_multiplier` and `max_grad_norm`
attributes (so a hand-written one that declares them is read too); with none, the optimizer
checks say nothing (a plain loop's privacy is not in its optimizer).
"""

from __future__ import annotations

import math
from typing import Any

from auditsel.pipelines.checks.finding import BREAKS, Context, Finding
from auditsel.pipelines.checks.privatizer import privatizer_sensitivity

_REL = 1e-9  # two settings are the same number up to float rounding
_CLAIM_SLACK = 0.01  # a claim below the accountant's epsilon by more than 1% is not it


def _params(optimizer: Any) -> list[Any]:
    try:
        return [p for group in optimizer.param_groups for p in group["params"]]
    except (AttributeError, TypeError, KeyError):
        return []


def _names(model: Any) -> dict[int, str]:
    try:
        return {id(p): name for name, p in model.named_parameters()}
    except (AttributeError, TypeError):
        return {}


def parameters_outside_dp(ctx: Context) -> list[Finding]:
    """Parameters updated by a non-DP optimizer (and by no DP one, or by both)."""
    dp = ctx.dp_optimizers
    if not dp:
        return []
    private = {id(p) for _, o in dp for p in _params(o)}
    names = _names(ctx.model)
    findings = []
    dp_index = {i for i, _ in dp}
    for i, optimizer in enumerate(ctx.optimizers):
        if i in dp_index:
            continue
        plain = [p for p in _params(optimizer) if getattr(p, "requires_grad", True)]
        if not plain:
            continue
        both = sum(id(p) in private for p in plain)
        named = [names.get(id(p), f"a {tuple(getattr(p, 'shape', ()))} tensor") for p in plain]
        shown = ", ".join(named[:4]) + (f" and {len(named) - 4} more" if len(named) > 4 else "")
        findings.append(
            Finding(
                BREAKS,
                f"optimizers[{i}] ({type(optimizer).__name__})",
                f"updates {len(plain)} parameter tensor(s) ({shown}) with no clipping or noise"
                + (f", {both} of them also in a DP optimizer" if both else "")
                + ": the claim covers only the DP optimizer's parameters",
                math.inf,
                "train every parameter with the DP optimizer (one optimizer over "
                "model.parameters(), made private), or freeze these (requires_grad=False) "
                "before training",
                check="parameters_outside_dp",
                effect_text="no finite epsilon: these parameters see the data with no noise",
            )
        )
    return findings


def _is_poisson(loader: Any) -> bool | None:
    """True for a Poisson-sampled loader (a batch sampler with a sample rate: Opacus's
    DPDataLoader, UniformWithReplacementSampler), False for fixed-size batches (shuffled or in
    order), None when the loader is not a DataLoader."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is None and getattr(loader, "sampler", None) is None:
        return None
    return hasattr(batch_sampler, "sample_rate") or hasattr(loader, "sample_rate")


def _length(obj: Any) -> int | None:
    try:
        return len(obj)
    except TypeError:
        return None


def sampling(ctx: Context) -> list[Finding]:
    """Fixed-size batches (shuffled or in order) where the accounting assumes Poisson
    sampling at a rate below 1."""
    loader = ctx.data_loader
    if loader is None or not ctx.assumes_poisson or _is_poisson(loader) is not False:
        return []
    rows, size = _length(getattr(loader, "dataset", None)), getattr(loader, "batch_size", None)
    if rows is not None and size is not None and size >= rows:
        return []  # one full batch per step: no sampling to amplify
    shuffled = type(getattr(loader, "sampler", None)).__name__
    rate = ctx.history[-1][1] if ctx.history else ctx.base.sample_rate if ctx.base else None
    at = f" at rate {rate:.4g}" if rate is not None else ""
    return [
        Finding(
            BREAKS,
            f"data_loader ({type(loader).__name__}, {shuffled}, batch_size={size})",
            f"batches of a fixed size, each row in one batch per epoch, while the accounting "
            f"charges Poisson sampling{at}: the claim assumes an amplification by subsampling "
            f"that this loader does not give [CGKKMSZ24]",
            None,
            "sample the batches by Poisson sampling (Opacus: make_private(..., "
            "poisson_sampling=True), or opacus.data_loader.DPDataLoader.from_data_loader), "
            "or account for what the loader does",
            check="sampling",
            effect_text="not computed: no accountant for shuffled batches under add/remove "
            "neighbours, here or in dp_accounting; [CGKKMSZ24] show that the shuffled run's "
            "epsilon can be far above the Poisson claim",
        )
    ]


def _differs(a: float, b: float) -> bool:
    return not math.isclose(a, b, rel_tol=_REL)


def settings(ctx: Context) -> list[Finding]:
    """Noise, clipping norm, sample rate and steps: the DP optimizers against each other and
    the accountant, the loader's rate against the accountant's, the claim against both."""
    findings = _optimizer_settings(ctx)
    rate = getattr(ctx.data_loader, "sample_rate", None)
    if rate is not None and ctx.history and _differs(float(rate), ctx.history[-1][1]):
        charged = ctx.history[-1][1]
        effect = ctx.claim_epsilon(sample_rate=min(float(rate), 1.0))
        findings.append(
            Finding(
                BREAKS,
                "data_loader",
                f"samples at rate {float(rate):.4g} while the engine's accountant charges "
                f"{charged:.4g}",
                effect,
                "account with the loader that trains (make_private returns both), or sample "
                "at the rate the claim charges",
                check="settings",
                effect_text=f"the claim at sample rate {float(rate):.4g}",
            )
        )
    findings += _claim_against_accountant(ctx)
    return findings


def _optimizer_settings(ctx: Context) -> list[Finding]:
    findings = []
    recorded = {s for s, _, _ in ctx.history}
    for i, optimizer in ctx.dp_optimizers:
        sigma = float(optimizer.noise_multiplier)
        if recorded and all(_differs(sigma, s) for s in recorded):
            charged = ", ".join(f"{s:g}" for s in sorted(recorded))
            findings.append(
                Finding(
                    BREAKS,
                    f"optimizers[{i}] ({type(optimizer).__name__})",
                    f"adds noise multiplier {sigma:g} while the engine's accountant recorded "
                    f"{charged}: the claim is for another noise than this optimizer adds",
                    ctx.claim_epsilon(noise_multiplier=sigma) if sigma > 0 else math.inf,
                    "compute the claim from the accountant of the engine whose make_private "
                    "returned this optimizer (train with it), or train with the noise "
                    "multiplier the claim assumes",
                    check="settings",
                    effect_text=f"the claim at noise multiplier {sigma:g}",
                )
            )
    settings_of = {
        i: (float(o.noise_multiplier), float(o.max_grad_norm)) for i, o in ctx.dp_optimizers
    }
    if len(set(settings_of.values())) > 1:
        shown = "; ".join(f"optimizers[{i}]: noise {s:g}, clip {c:g}" for i, (s, c) in
                          settings_of.items())  # fmt: skip
        weakest = min(s for s, _ in settings_of.values())
        findings.append(
            Finding(
                BREAKS,
                "optimizers",
                f"the DP optimizers differ in noise multiplier or clipping norm ({shown}): one "
                f"accountant describes one of them",
                ctx.claim_epsilon(noise_multiplier=weakest) if weakest > 0 else math.inf,
                "make every DP optimizer with the same noise multiplier and clipping norm, "
                "and account for each one that trains",
                check="settings",
                effect_text=f"the claim at the smallest noise multiplier, {weakest:g}",
            )
        )
    return findings


def _claim_against_accountant(ctx: Context) -> list[Finding]:
    """A stated claim below what the engine's own accountant gives for the run it recorded
    (fewer steps, more noise or a smaller rate than the run took)."""
    if ctx.claim is None or ctx.delta is None or not ctx.history or ctx.base is None:
        return []
    if ctx.rounds is None and hasattr(ctx.engine, "get_epsilon"):
        recorded = float(ctx.engine.get_epsilon(ctx.delta))  # Opacus's own number
    else:
        recorded = ctx.claim_epsilon()  # type: ignore[assignment]
    if recorded is None or float(ctx.claim) >= recorded * (1 - _CLAIM_SLACK):
        return []
    base = ctx.base
    return [
        Finding(
            BREAKS,
            "claim",
            f"the claimed epsilon {float(ctx.claim):.4g} is below the {recorded:.4g} that the "
            f"engine's accountant gives for the run it recorded ({base.steps} steps at noise "
            f"multiplier {base.noise_multiplier:g}, sample rate {base.sample_rate:.4g}"
            + (", with the law of K" if ctx.rounds is not None else "")
            + ")",
            recorded,
            "compute the claim from the run's own accountant (auditsel.from_opacus) with the "
            "steps, noise and rate the training took",
            check="settings",
            effect_text="the claim for the run the accountant recorded",
        )
    ]


def per_layer_clipping(ctx: Context) -> list[Finding]:
    """Per-layer clipping whose noise is calibrated to less than the per-layer norms' norm
    (Opacus's optimizers), and the sensitivity probe of a hand-written `privatizer`."""
    findings = []
    for i, optimizer in ctx.dp_optimizers:
        norms = getattr(optimizer, "max_grad_norms", None)
        if norms is None:
            continue
        total = math.sqrt(sum(float(c) ** 2 for c in norms))
        flat = float(optimizer.max_grad_norm)
        if flat >= total * (1 - _REL):
            continue  # Opacus's own calibration: a flat clip at the norm of the norms
        sigma = float(optimizer.noise_multiplier) * flat / total
        findings.append(
            Finding(
                BREAKS,
                f"optimizers[{i}] ({type(optimizer).__name__})",
                f"clips {len(norms)} layers separately (norms {', '.join(f'{c:g}' for c in norms)}"
                f"; together up to {total:.4g}) but calibrates its noise to a flat clip of "
                f"{flat:g}: the sensitivity is {total / flat:.4g} times the claim's",
                ctx.claim_epsilon(noise_multiplier=sigma),
                "calibrate the noise to the norm of the per-layer norms (Opacus does so unless "
                "max_grad_norm is changed after make_private), or clip flat",
                check="per_layer_clipping",
                effect_text=f"the claim at the effective noise multiplier {sigma:.4g}",
            )
        )
    return findings + privatizer_sensitivity(ctx)
