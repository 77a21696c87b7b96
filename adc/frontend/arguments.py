"""A builtin's signature, and the arguments of one call of it read as what its rule needs.

Part of elaboration: `elaborate.py` binds a call's arguments to a `Builtin`'s parameters
(defaults filled in), and the builtin's rule reads them through `Args` as tensors, static
integers, sizes, axes, flags or dtypes. Every check names the builtin and points at the
argument that fails it:

    sum(x, axis=2)   with x: f32[N, M]   ->   k.adc:3:15: error: sum(): axis 2 is out of range for rank 2
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from adc.errors import CompileError, Location
from adc.frontend.scope import Scope, describe, is_static
from adc.ir.core import Value
from adc.ir.types import DType, Dim


@dataclass(frozen=True)
class Builtin:
    """A builtin's parameters (positional ones first), its keyword parameters' defaults, its rule."""

    params: tuple[str, ...]
    defaults: dict[str, object]
    expand: Callable[[Scope, Args], object]


def registrar(table: dict[str, Builtin]):
    """The decorator `@builtin(name, *params, **defaults)` of one family's table: it registers
    `<name>_expand` with its positional parameters and its keyword parameters' defaults."""
    def builtin(name: str, *params: str, **defaults: object):
        def register(expand):
            table[name] = Builtin(params + tuple(defaults), defaults, expand)
            return expand
        return register
    return builtin


class Args:
    """The elaborated arguments of one builtin call by parameter name, with their locations."""

    def __init__(self, cx: Scope, func: str, values: dict[str, tuple[object, Location]]):
        self.cx, self.func, self.values = cx, func, values

    def __getitem__(self, key: str) -> object:
        return self.values[key][0]

    def error(self, key: str, message: str) -> CompileError:
        return CompileError(f"{self.func}(): {message}", self.values[key][1])

    def tensor(self, key: str, dtype: DType | None = None) -> Value:
        with self.cx.b.at(self.values[key][1]):
            return self.cx.tensor(self[key], dtype)

    def tensors(self, key: str) -> list[Value]:
        items = self[key]
        if not isinstance(items, list) or not items:
            raise self.error(key, f"'{key}' must be a non-empty list of tensors, got {describe(items)}")
        with self.cx.b.at(self.values[key][1]):
            dtype = self.cx.common_dtype(items)
            return [self.cx.tensor(v, dtype) for v in items]

    def float_tensor(self, key: str) -> Value:
        x = self.tensor(key)
        if not x.type.dtype.is_float:
            raise self.error(key, f"expected a float tensor, got {x.type}; convert it with f32(...) or f64(...)")
        return x

    def static_int(self, key: str, value: object = None) -> int:
        value = self[key] if value is None else value
        if type(value) is not int:
            raise self.error(key, f"'{key}' must be a static integer, got {describe(value)}")
        return value

    def dim(self, key: str, value: object = None) -> Dim:
        value = self[key] if value is None else value
        if not is_static(value):
            raise self.error(key, f"'{key}' needs sizes that are integers or dimension symbols, "
                                  f"got {describe(value)}")
        if isinstance(value, int) and value < 0:
            raise self.error(key, f"a size cannot be negative, got {value}")
        return value

    def shape(self, key: str) -> tuple[Dim, ...]:
        value = self[key]
        return tuple(self.dim(key, d) for d in value) if isinstance(value, list) else (self.dim(key),)

    def axis(self, key: str, rank: int, value: object = None) -> int:
        axis = self.static_int(key, value)
        if not -rank <= axis < rank:
            raise self.error(key, f"axis {axis} is out of range for rank {rank}")
        return axis % rank

    def axes(self, key: str, rank: int) -> tuple[int, ...]:
        """None: every axis; an int or a list of ints, negative ones counting from the end."""
        value = self[key]
        if value is None:
            return tuple(range(rank))
        axes = [self.axis(key, rank, a) for a in (value if isinstance(value, list) else [value])]
        if len(set(axes)) != len(axes):
            raise self.error(key, f"repeated axis in {value}")
        return tuple(sorted(axes))

    def flag(self, key: str) -> bool:
        if type(self[key]) is not bool:
            raise self.error(key, f"'{key}' must be True or False, got {describe(self[key])}")
        return self[key]

    def dtype(self, key: str) -> DType | None:
        if self[key] is not None and not isinstance(self[key], DType):
            raise self.error(key, f"'{key}' must be one of f32, f64, i32, i64, bool, got {describe(self[key])}")
        return self[key]
