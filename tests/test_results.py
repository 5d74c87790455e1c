"""Every committed result.json's upper bounds (and, where it has them, the reduced game's values,
the attack value and the interval), recomputed by today's code, equal the committed numbers to
their printed digits (4 decimals, as the report prints them).

    python tests/test_results.py [SUBSTRING ...]   # one line per result (those whose path
                                                   # contains a SUBSTRING) and the largest change
    python -m pytest -m slow tests/test_results.py
"""

import json
import math
from pathlib import Path

import pytest
import yaml

from auditsel.accounting.panel import panel
from auditsel.experiments.experiment import result_interval
from auditsel.mechanisms import DpsgdBase, FiniteOutputBase, GaussianBase
from auditsel.rounds import law_from_dict

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted((ROOT / "results").rglob("result.json"))
DIGITS = 4


def _config_base(name: str) -> dict:
    for folder in (ROOT / "configs", ROOT / "auditsel" / "configs"):
        for path in folder.glob("*.yaml"):
            raw = yaml.safe_load(path.read_text())
            if isinstance(raw, dict) and raw.get("name") == name:
                return raw["base"]
    raise LookupError(f"no config named {name}")


def pair_and_law(result: dict):
    base = result["base"]
    if base["kind"] == "gaussian":
        pair = GaussianBase(base["mu"])
    elif base["kind"] == "dpsgd":
        pair = DpsgdBase(
            base["noise_multiplier"], base["steps"], base["sample_rate"], base["accountant"]
        )
    else:
        raw = base if "p" in base else _config_base(result["name"])
        pair = FiniteOutputBase(tuple(raw["p"]), tuple(raw["q"]))
    rounds = {k: v for k, v in result["rounds"].items() if k != "mean"}
    return pair, law_from_dict(rounds)


def same_printed(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return f"{a:.{DIGITS}f}" == f"{b:.{DIGITS}f}" or math.isclose(a, b, rel_tol=0, abs_tol=1e-9)


def recompute(path: Path):
    """(committed, recomputed) upper and upper_curves of one result.json."""
    result = json.loads(path.read_text())
    pair, law = pair_and_law(result)
    curves = result.get("upper_curves")
    out = panel(
        pair, law, result["delta"], curve_deltas=None if curves is None else curves["delta"]
    )
    return result, out


def compared(result: dict, out) -> list[tuple[str, float | None, float | None]]:
    """(name, committed, recomputed) for every number the test compares."""
    pairs = [(k, v, out.upper[k]) for k, v in result["upper"].items()]
    pairs += [
        (f"reduced_game.{k}", v, out.reduced_game.get(k))
        for k, v in (result.get("reduced_game") or {}).items()
    ]
    for k, values in (result.get("upper_curves") or {}).items():
        if k != "delta":
            pairs += [
                (f"{k}@{d:g}", v, w)
                for d, v, w in zip(result["upper_curves"]["delta"], values, out.curves[k])
            ]
    if "attack" in result:
        pairs.append(("attack", result["attack"]["epsilon"], out.attack["epsilon"]))
    if "interval" in result:
        now = result_interval(result, out)
        pairs += [(f"interval.{k}", result["interval"][k], now[k]) for k in ("lower", "upper")]
    return pairs


def differences(path: Path) -> list[tuple[str, float | None, float | None]]:
    result, out = recompute(path)
    diffs = [(k, v, w) for k, v, w in compared(result, out) if not same_printed(v, w)]
    if result.get("upper_sources") != out.sources:
        diffs.append(("upper_sources", None, None))
    if result.get("upper_rigour") != out.labels:
        diffs.append(("upper_rigour", None, None))
    return diffs


@pytest.mark.slow
@pytest.mark.parametrize(
    "path", RESULTS, ids=[str(p.parent.relative_to(ROOT / "results")) for p in RESULTS]
)
def test_committed_upper_bounds_are_reproduced_to_their_printed_digits(path):
    assert not differences(path)


if __name__ == "__main__":
    import sys

    worst = 0.0
    for path in [p for p in RESULTS if not sys.argv[1:] or any(a in str(p) for a in sys.argv[1:])]:
        result, out = recompute(path)
        pairs = [(v, w) for _, v, w in compared(result, out)]
        change = max([abs(a - b) for a, b in pairs if a is not None and b is not None] or [0.0])
        same = (
            all(same_printed(a, b) for a, b in pairs) and result.get("upper_sources") == out.sources
        )
        worst = max(worst, change)
        print(
            f"{'same' if same else 'DIFFERENT'}  max |change| {change:.2e}  {path.relative_to(ROOT)}",
            flush=True,
        )
    print(f"largest change over {len(RESULTS)} results: {worst:.2e}")
