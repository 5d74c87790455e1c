"""Fingerprints of data by content: the same values give the same digest in every process and
every run, different values a different one.

Contract. `content_digest(value, field)` is the sha256 (hex) of a canonical walk of `value`:

* None, bools, integers, floats (their exact bits: `float.hex`), complex numbers, strings and
  bytes: a type tag and the value;
* NumPy arrays and scalars: dtype, shape and the bytes in C order (object arrays element by
  element); torch tensors the same way (detached, moved to the CPU, read as raw bytes whatever
  their dtype; `joblib.hash` of a tensor is not stable across processes, this is); a torch
  module (any subclass: an Opacus `GradSampleModule` too) by its class and `state_dict`, not
  by its hooks or per-sample gradients;
* lists, tuples, dicts (in their order), sets and frozensets (in the order of their elements'
  digests), dataclasses (their fields);
* functions and classes by their qualified name; any other object, e.g. a torch
  `TensorDataset` or another map-style dataset, by its class and what pickling it would save
  (`__reduce_ex__(4)`: its constructor arguments and state, walked by these same rules), so a
  dataset holding tensors is digested by the tensors' bytes.

An object shared twice or referring to itself is walked once (later visits are back
references). An object that pickling refuses (a lock, an open file, a generator) is a
`ConfigError` naming `field` and the path to it inside the value (`data[0].lock`): such data
could not be sent to a worker process either.
"""

from __future__ import annotations

import copyreg
import dataclasses
import hashlib
import struct
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from auditsel.errors import ConfigError

MAX_ITEMS = 50_000_000  # values walked in one digest (a guard against endless generators)
_SCALARS = (type(None), bool, int, float, complex, str, bytes, bytearray)


class _Walker:
    def __init__(self, field: str):
        self.field = field
        self.h = hashlib.sha256()
        self.seen: dict[int, int] = {}
        self.keep: list[Any] = []  # objects walked: alive, so that their ids are not reused
        self.items = 0

    def put(self, tag: bytes, payload: bytes = b"") -> None:
        self.h.update(tag + struct.pack("<Q", len(payload)) + payload)

    def walk(self, value: Any, path: str) -> None:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise ConfigError(self.field, f"{path} holds more than {MAX_ITEMS:,} values")
        kind = type(value)
        if kind in _SCALARS:
            self._scalar(value)
            return
        if id(value) in self.seen:
            self.put(b"ref", struct.pack("<Q", self.seen[id(value)]))
            return
        self.seen[id(value)] = len(self.seen)
        self.keep.append(value)
        if isinstance(value, np.ndarray):
            self._array(value, path)
        elif isinstance(value, np.generic):
            self._array(np.asarray(value), path)
        elif "torch" in sys.modules and self._torch(value, path):  # opacus's modules too
            pass
        elif kind in (list, tuple):
            self.put(b"list" if kind is list else b"tuple", struct.pack("<Q", len(value)))
            for i, item in enumerate(value):
                self.walk(item, f"{path}[{i}]")
        elif kind is dict:
            self._mapping(value, path)
        elif kind in (set, frozenset):
            self._set(value)
        elif isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
            name = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
            self.put(b"named", name.encode())
        elif dataclasses.is_dataclass(value):
            self.put(b"dataclass", _qualname(kind).encode())
            for f in dataclasses.fields(value):
                self.put(b"field", f.name.encode())
                self.walk(getattr(value, f.name), f"{path}.{f.name}")
        else:
            self._reduced(value, path)

    def _scalar(self, value: Any) -> None:
        kind = type(value)
        if kind is float:
            self.put(b"float", value.hex().encode())
        elif kind is complex:
            self.put(b"complex", f"{value.real.hex()},{value.imag.hex()}".encode())
        elif kind is str:
            self.put(b"str", value.encode("utf-8", "surrogatepass"))
        elif kind in (bytes, bytearray):
            self.put(b"bytes", bytes(value))
        else:  # None, bool, int
            self.put(kind.__name__.encode(), repr(value).encode())

    def _array(self, array: np.ndarray, path: str) -> None:
        self.put(b"ndarray", f"{array.dtype.str}{array.shape}".encode())
        if array.dtype.hasobject:
            for i, item in enumerate(array.ravel(order="C")):
                self.walk(item, f"{path}.flat[{i}]")
        else:
            self.h.update(np.ascontiguousarray(array).view(np.uint8).ravel().tobytes())

    def _torch(self, value: Any, path: str) -> bool:
        torch = sys.modules["torch"]
        if isinstance(value, torch.Tensor):
            t = value.detach()
            if t.is_sparse or t.layout != torch.strided:
                t = t.to_dense()
            t = t.cpu().contiguous()
            self.put(b"tensor", f"{t.dtype}{tuple(t.shape)}".encode())
            self.h.update(t.reshape(-1).view(torch.uint8).numpy())
            return True
        if isinstance(value, torch.nn.Module):
            self.put(b"module", _qualname(type(value)).encode())
            self._mapping(dict(value.state_dict()), path)
            return True
        return False

    def _mapping(self, value: Mapping[Any, Any], path: str) -> None:
        self.put(b"dict", struct.pack("<Q", len(value)))
        for key, item in value.items():
            self.walk(key, f"{path} key")
            self.walk(item, f"{path}[{key!r}]")

    def _set(self, value: Any) -> None:
        parts = sorted(content_digest(item, self.field) for item in value)
        self.put(b"set", "".join(parts).encode())

    def _reduced(self, value: Any, path: str) -> None:
        try:
            reduced = value.__reduce_ex__(4)
        except Exception as err:
            raise ConfigError(
                self.field,
                f"{path} ({type(value).__name__}) cannot be fingerprinted or pickled "
                f"({type(err).__name__}: {err}); auditsel needs data it can hash and send to "
                f"a worker: hold arrays, tensors, datasets, plain containers",
            ) from None
        if isinstance(reduced, str):  # a global singleton, pickled by name
            self.put(b"global", f"{_qualname(type(value))}.{reduced}".encode())
            return
        self.put(b"object", _qualname(type(value)).encode())
        constructor, args = reduced[0], reduced[1]
        if constructor is copyreg.__newobj__ and args:  # type: ignore[attr-defined]  # cls.__new__(cls, *rest): skip cls
            args = args[1:]
        self.put(b"constructor", _callable_name(constructor).encode())
        self.walk(tuple(args or ()), f"{path}")
        state = reduced[2] if len(reduced) > 2 else None
        self.walk(state, f"{path}")
        for position, name in ((3, "items"), (4, "dict items")):
            if len(reduced) > position and reduced[position] is not None:
                for i, item in enumerate(reduced[position]):
                    self.walk(item, f"{path} {name}[{i}]")


def _qualname(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _callable_name(fn: Callable[..., Any]) -> str:
    owner = getattr(fn, "__self__", None)
    prefix = _qualname(owner) + "." if isinstance(owner, type) else ""
    return prefix + f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"


def content_digest(value: Any, field: str = "data") -> str:
    """sha256 (hex) of `value` by content, stable across processes (module docstring)."""
    walker = _Walker(field)
    try:
        walker.walk(value, field)
    except RecursionError:
        raise ConfigError(field, "is nested too deeply to be fingerprinted") from None
    return walker.h.hexdigest()
