"""Pipelines named on the command line: MODULE:NAME references and pipeline YAML files.

Contract. A reference `MODULE:NAME` names an attribute of a module: `MODULE` is a dotted module
name importable from the current directory (`mypkg.tuning`) or the path of a Python file
(`pipelines/tuning.py`, imported under a module name of its own:
`auditsel.pipelines.user_code.import_file`). For `data` and `canary`, a function that takes no
arguments is called (a data loader, a canary factory). A canary may also be a YAML mapping
(`{kind: gradient, coordinate: 30}`, `{kind: input, x: [...], y: 1}`), a YAML list of them
(each audited, Bonferroni), or `both` (`auditsel.pipelines.default_canaries`).

A pipeline YAML file (read with safe_load) has the keys of `PIPELINE_KEYS`; `tune` is
required, unknown and duplicate keys are errors, and command-line options override the file.
Whatever importing the user's module or calling their function raises (SystemExit included) is
the user's error (`PipelineError`, exit 2), named with the reference, with their traceback.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditsel.errors import ConfigError, mapping
from auditsel.files.safe_yaml import load_yaml_text, read_yaml
from auditsel.pipelines.canaries import Canary, GradientCanary, InputCanary
from auditsel.pipelines.default_canaries import BOTH, CanaryChoice
from auditsel.pipelines.pipeline import Pipeline, PipelineError
from auditsel.pipelines.user_code import call_user, import_file

PIPELINE_KEYS = (
    "name",
    "tune",
    "score",
    "canary",
    "data",
    "games",
    "delta",
    "claimed_epsilon",
    "confidence",
    "seed",
    "rule",
)
CANARY_KINDS: dict[str, type[Canary]] = {"gradient": GradientCanary, "input": InputCanary}


@dataclass(frozen=True)
class PipelineSpec:
    """A pipeline and its audit's settings, as read from a YAML file and the options."""

    pipeline: Pipeline
    settings: Mapping[str, Any] = field(default_factory=dict)  # games, delta, claimed_epsilon...


def is_reference(text: str) -> bool:
    """True for MODULE:NAME (not a YAML file, not a Windows drive)."""
    module, sep, name = text.rpartition(":")
    return bool(sep and module and name.isidentifier() and not text.endswith((".yaml", ".yml")))


def _import(module: str, field_name: str) -> types.ModuleType:
    if module.endswith(".py") or "/" in module or "\\" in module:
        return import_file(module, field_name)  # a unique name: no clash of stems or stdlib
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # as `python -m` does: the current directory
    try:
        imported: types.ModuleType = call_user(
            field_name, f"importing {module!r}", importlib.import_module, module
        )
        return imported
    except PipelineError as err:
        cause = err.user_traceback.rstrip().rsplit("\n", 1)[-1]
        missing = re.match(r"ModuleNotFoundError: No module named '([^']+)'", cause)
        if missing and module.startswith(missing.group(1)):
            raise ConfigError(
                field_name, f"cannot import module {module!r} ({cause.split(': ', 1)[1]})"
            ) from None
        raise


def _takes_no_arguments(fn: Any) -> bool:
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in inspect.signature(fn).parameters.values()
    )


def load_object(reference: str, field_name: str, call: bool = False) -> Any:
    """The object named by MODULE:NAME; with call=True a function found there is called."""
    if not isinstance(reference, str) or not is_reference(reference):
        raise ConfigError(
            field_name, f"must be MODULE:NAME (e.g. mytuning:tune), got {reference!r}"
        )
    module_name, _, name = reference.rpartition(":")
    module = _import(module_name, field_name)
    if not hasattr(module, name):
        raise ConfigError(field_name, f"module {module_name!r} has no attribute {name!r}")
    value = getattr(module, name)
    if call and inspect.isfunction(value) and _takes_no_arguments(value):
        value = call_user(field_name, f"{reference}()", value)
    return value


def _canary_list(value: list[Any], field_name: str) -> tuple[Canary, ...]:
    """A tuple of canaries from a list of canary references or mappings."""
    if not value:
        raise ConfigError(field_name, "must list at least one canary, got []")
    found = tuple(load_canary(v, f"{field_name}[{i}]") for i, v in enumerate(value))
    for i, one in enumerate(found):
        if not isinstance(one, Canary):
            raise ConfigError(f"{field_name}[{i}]", "must be one canary, not a list or 'both'")
    return found  # type: ignore[return-value]


def load_canary(value: Any, field_name: str = "canary") -> CanaryChoice:
    """A canary from MODULE:NAME or a mapping {kind: gradient | input, ...}; a list of them
    (a tuple of canaries, each audited: Bonferroni), or "both" (kept: the audit chooses the
    pair, `auditsel.pipelines.default_canaries`)."""
    if value == BOTH:
        return BOTH
    if isinstance(value, str) and value.lstrip().startswith("["):
        value = load_yaml_text(value, field_name, f"the {field_name} list")
    if isinstance(value, list):
        return _canary_list(value, field_name)
    if isinstance(value, str) and not is_reference(value):
        try:
            value = load_yaml_text(value, field_name, f"the {field_name} mapping")
        except ConfigError as err:
            if "written twice" in err.message:
                raise err.within(field_name) from None
            raise ConfigError(
                field_name, f"must be MODULE:NAME or a YAML mapping, got {value!r}"
            ) from None
    if isinstance(value, Mapping):
        spec = dict(value)
        kind = spec.pop("kind", None)
        if kind not in CANARY_KINDS:
            raise ConfigError(
                f"{field_name}.kind", f"must be one of {', '.join(CANARY_KINDS)}, got {kind!r}"
            )
        try:
            return CANARY_KINDS[kind](**spec)
        except ConfigError as err:
            raise err.within(field_name) from None
        except (TypeError, ValueError) as err:  # e.g. x: abc, or a ragged x
            raise ConfigError(field_name, f"{kind} canary: {err}") from None
    canary = load_object(value, field_name, call=True) if isinstance(value, str) else value
    if not isinstance(canary, Canary):
        raise ConfigError(
            field_name, f"must name an InputCanary or GradientCanary, got {type(canary).__name__}"
        )
    return canary


def load_pipeline(target: str, **options: Any) -> PipelineSpec:
    """A pipeline from MODULE:FUNCTION (its tune) or a pipeline YAML file, with `options`
    (score, canary, data, games, delta, ...; None = not given) overriding the file."""
    settings: dict[str, Any] = {}
    if is_reference(target):
        settings["tune"] = target
    elif target.endswith(".py"):
        raise ConfigError(
            "tune", f"name the function in {target}: FILE.py:FUNCTION, e.g. {target}:tune"
        )
    else:
        raw = mapping(read_yaml(Path(target)), target)
        unknown = sorted(set(raw) - set(PIPELINE_KEYS))
        if unknown:
            raise ConfigError(
                unknown[0], f"unknown key in {target}; allowed: {', '.join(PIPELINE_KEYS)}"
            )
        settings.update(raw)
    settings.update({k: v for k, v in options.items() if v is not None})
    if "tune" not in settings:
        raise ConfigError("tune", f"required: the MODULE:FUNCTION of your tuning run ({target})")
    if "canary" not in settings:
        raise ConfigError("canary", "required: MODULE:NAME or {kind: gradient, coordinate: i}")
    tune = load_object(settings.pop("tune"), "tune")
    score = settings.pop("score", None)
    score = load_object(score, "score") if score is not None else None
    canary = load_canary(settings.pop("canary"))
    data = settings.pop("data", None)
    data = load_object(data, "data", call=True) if isinstance(data, str) else data
    return PipelineSpec(Pipeline(tune, score, data, canary), settings)
