"""YAML read safely and bounded: the one reader of every YAML the user gives (a config, a
`--rounds` or `--base` mapping, a pipeline's data or canary list).

Contract. `load_yaml_text(text, field, source)` returns the Python values of YAML text with no
object built from a tag (PyYAML's safe loader), a float for `1e-5` (YAML 1.1 would give the
string), a ConfigError naming `field` for a key written twice in one mapping, for text over
MAX_CONFIG_BYTES and for a document that, counting every alias as a copy of what it names,
holds more than MAX_YAML_NODES values or MAX_YAML_CHARS characters (an alias bomb is refused
before any value is built). `read_yaml(path)` reads at most MAX_CONFIG_BYTES of a regular file
(a FIFO or device is refused, not read) and loads it so; an empty file is a ConfigError.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from auditsel.errors import ConfigError
from auditsel.files import open_regular

MAX_CONFIG_BYTES = 1 << 20  # a config file (or a --rounds mapping) is at most 1 MiB
MAX_YAML_NODES = 100_000  # values, lists and mappings, an alias counted as a copy
MAX_YAML_CHARS = 1 << 20  # characters of all values, an alias counted as a copy


class _DuplicateKey(yaml.YAMLError):  # type: ignore[misc, unused-ignore]  # yaml: no stubs
    """A mapping that names one key twice (YAML would silently keep the last)."""

    def __init__(self, key: str, line: int) -> None:
        super().__init__(key)
        self.key, self.line = key, line


class _SafeLoader(yaml.SafeLoader):  # type: ignore[misc, unused-ignore]  # yaml: no stubs
    """yaml.SafeLoader that also reads `1e-5` as a float: YAML 1.1 (PyYAML) wants a dot
    (`1.0e-5`) and would otherwise hand `delta: 1e-5` over as the string '1e-5'; and refuses a
    key written twice in one mapping (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[object] = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                    continue
                key = self.construct_object(key_node, deep=False)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: construct_mapping names it
                    continue
                if duplicate:
                    raise _DuplicateKey(str(key), key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep=deep)


_SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_yaml(path: str | Path) -> Any:
    """The raw config mapping from a YAML file (module docstring), or a ConfigError."""
    path = Path(path)
    try:
        with open_regular(path, "config") as handle:  # a FIFO or device: refused, not read
            data = handle.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(
                "config",
                f"{path} is larger than {MAX_CONFIG_BYTES >> 10} KiB; a config is a short "
                f"YAML file (see configs/quickstart.yaml)",
            )
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError("config", f"file {path} not found; pass an existing YAML file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(
            "config", f"cannot read {path} ({type(err).__name__}); pass a readable UTF-8 YAML file"
        ) from None
    raw = load_yaml_text(text, "config", str(path))
    if raw is None:
        raise ConfigError("config", f"{path} is empty; see configs/quickstart.yaml for the format")
    return raw


def load_yaml_text(text: str, field: str = "config", source: str = "the YAML text") -> Any:
    """YAML text -> Python values, safely and bounded (module docstring): a "billion laughs"
    alias bomb is refused here, not expanded when a value is formatted."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(field, f"{source} is longer than {MAX_CONFIG_BYTES >> 10} KiB")
    loader = None
    try:
        loader = _SafeLoader(text)  # the reader checks the characters here already
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded_size(node, field, source)
        return loader.construct_document(node)
    except RecursionError:  # e.g. 5000 nested brackets: a bad file, not an internal error
        raise ConfigError(
            field, f"{source} is nested too deeply; see configs/quickstart.yaml for the format"
        ) from None
    except _DuplicateKey as err:
        raise ConfigError(
            err.key,
            f"written twice in {source} (the second at line {err.line}); keep one",
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(field, f"{source} is not valid YAML{where}; fix the syntax") from None
    finally:
        if loader is not None:
            loader.dispose()


def _check_expanded_size(root: yaml.Node, field: str, source: str) -> None:
    """Count values and characters with every alias expanded, without expanding anything:
    each node's totals are computed once (children first) and reused where it is aliased."""
    cap = MAX_YAML_NODES + MAX_YAML_CHARS + 1  # totals are clipped here: no huge integers
    totals: dict[int, tuple[int, int]] = {}
    open_nodes: set[int] = set()  # the nodes being counted: an alias to one is recursive

    def count(node: yaml.Node) -> tuple[int, int]:
        if id(node) in totals:
            return totals[id(node)]
        if id(node) in open_nodes:
            raise ConfigError(
                field, f"{source} has a recursive alias (an anchor used inside itself)"
            )
        if isinstance(node, yaml.ScalarNode):
            return 1, len(str(node.value))
        open_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = node.value
        nodes, chars = 1, 0
        for child in children:  # one frame per level: never deeper than the composer went
            n, c = count(child)
            nodes, chars = min(cap, nodes + n), min(cap, chars + c)
        totals[id(node)] = (nodes, chars)
        return nodes, chars

    nodes, chars = count(root)
    if nodes > MAX_YAML_NODES or chars > MAX_YAML_CHARS:
        raise ConfigError(
            field,
            f"{source} expands to more than {MAX_YAML_NODES:,} values or {MAX_YAML_CHARS:,} "
            f"characters (aliases counted as copies); a config is much smaller",
        )
