"""What the zoo's authors claim: the smallest rigorous tuning bound for their base and law of K.

`tuning_epsilon(base, rounds, delta)` is the claim of an author who accounts one run with
`base` (a DpsgdBase, or `OpacusRun.base` from `auditsel.from_opacus`) and the tuning run with
the law of K they state: the smallest bound of auditsel's panel (`auditsel.accounting.panel`)
labelled rigorous, as `OpacusRun.tuning_epsilon` does for an Opacus run. It is a valid claim
exactly when the pipeline does what the accounting assumes.
"""

from __future__ import annotations

from auditsel.accounting.panel import panel
from auditsel.mechanisms import DpsgdBase
from auditsel.rounds import RoundsLaw

__all__ = ["tuning_epsilon"]


def tuning_epsilon(base: DpsgdBase, rounds: RoundsLaw, delta: float) -> float:
    """The smallest rigorous tuning bound of the panel for (base, rounds) at delta."""
    bounds = panel(base, rounds, delta)
    return min(
        v
        for k, v in bounds["upper"].items()
        if v is not None and bounds["labels"].get(k) == "rigorous"
    )
