"""Small numerical kernels shared by the layers above (no auditsel imports).

`logsumexp(a)`: log(sum(exp(a))) over the last axis, stable for -inf entries and all -inf rows.
scipy.special.logsumexp computes the same, but costs about 0.2-0.4 ms of overhead a call; the
bounds call it thousands of times on small arrays (a Renyi integral per order).
"""
from __future__ import annotations

import numpy as np

__all__ = ["logsumexp"]


def logsumexp(a) -> np.ndarray | float:
    """log(sum(exp(a), axis=-1)); -inf for a row of -inf values, +inf if any entry is +inf."""
    a = np.asarray(a, dtype=float)
    top = np.max(a, axis=-1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(a - safe), axis=-1)) + safe[..., 0]
    out = np.where(np.isposinf(top[..., 0]), np.inf, out)
    return out if out.ndim else float(out)
