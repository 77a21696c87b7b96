"""The values elaboration works with, and the ops it builds for one kernel: literals, dtypes, broadcasting.

Part of elaboration (`elaborate.py`, `indexing.py` and the builtins' rules build with it).
An expression's value is an IR `Value` or something not yet a tensor: a weak literal, a
dimension, a `Deferred` tensor whose dtype its context decides, `Results` to unpack. `Scope`
turns them into tensors where an op needs one, which keeps two invariants of the IR: the
operands of an elementwise op have one dtype (literals take it) and one shape (NumPy
broadcasting becomes `broadcast` ops):

    x * 2.0        %0 = constant {dtype = f64, value = 2.0} : f64
    (x: f64[N])    %1 = broadcast %0 {dims = [], shape = [N]} : f64[N]
                   %2 = mul %x, %1 : f64[N]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from adc.errors import CompileError, Location
from adc.ir.builder import Builder
from adc.ir.core import Value
from adc.ir.types import BOOL, F32, DType, Dim, SymDim, TensorType


class Results(tuple):
    """The results of a call of a kernel returning a tuple: they can only be unpacked."""


@dataclass(frozen=True)
class Deferred:
    """A tensor whose dtype its context decides, f32 when none does (`zeros(shape)`, like a literal)."""

    make: Callable[[DType], Value]


def is_static(v: object) -> bool:
    """An integer known at compile time: an int literal or a dimension expression."""
    return isinstance(v, SymDim) or type(v) is int


def describe(v: object) -> str:
    if isinstance(v, Value):
        return f"tensor {v.type}"
    if isinstance(v, Results):
        return f"tuple of {len(v)} results"
    if isinstance(v, bool):
        return f"boolean {v}"
    if isinstance(v, (int, float)):
        return f"number {v}"
    kinds = {SymDim: "dimension", DType: "dtype", Deferred: "tensor"}
    if type(v) in kinds:
        return f"{kinds[type(v)]} {v}"
    return "list" if isinstance(v, list) else repr(v)


class Scope:
    """Building ops for one kernel: literals, dtype agreement and explicit broadcasting."""

    def __init__(self, b: Builder):
        self.b = b

    def error(self, message: str, loc: Location | None = None) -> CompileError:
        return CompileError(message, loc or self.b.loc)

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        return self.b.op(name, *operands, **attrs)

    def constant(self, value: int | float | bool, dtype: DType) -> Value:
        if dtype is BOOL and type(value) is not bool:
            raise self.error(f"cannot use {value} as a bool value")
        if dtype.is_int and isinstance(value, float) and not value.is_integer():
            raise self.error(f"cannot use {value} as an {dtype} value")
        try:
            cast = float(value) if dtype.is_float else int(value) if dtype.is_int else value
        except OverflowError:
            raise self.error(f"{value} is too large for {dtype}") from None
        if dtype.is_int and not -2 ** (8 * dtype.numpy.itemsize - 1) <= cast < 2 ** (8 * dtype.numpy.itemsize - 1):
            raise self.error(f"{value} is out of the range of {dtype}")
        return self.op("constant", dtype=dtype, value=cast)

    def tensor(self, v: object, dtype: DType | None = None) -> Value:
        """`v` as a tensor; a literal or dimension becomes a scalar of `dtype` (default f32)."""
        if isinstance(v, Value):
            return v
        if isinstance(v, (bool, int, float)):
            return self.constant(v, dtype or (BOOL if isinstance(v, bool) else F32))
        if isinstance(v, SymDim):
            return self.op("dim", dtype=dtype or F32, value=v)
        if isinstance(v, Deferred):
            return v.make(dtype or F32)
        raise self.error(f"expected a tensor or a number, got {describe(v)}")

    def common_dtype(self, values) -> DType:
        """The dtype of the tensors among `values`, which must agree; literals adapt to it."""
        tensors = [v for v in values if isinstance(v, Value)]
        for t in tensors[1:]:
            if t.type.dtype != tensors[0].type.dtype:
                raise self.error(f"dtype mismatch: {tensors[0].type} and {t.type}; convert one with "
                                 "f32(...), f64(...), i32(...) or i64(...)")
        if tensors:
            return tensors[0].type.dtype
        return BOOL if all(isinstance(v, bool) for v in values) else F32

    def broadcast_shape(self, types: list[TensorType]) -> tuple[Dim, ...]:
        """NumPy's rule: align at the right; a dimension broadcasts when it is 1 or equal."""
        shape: list[Dim] = []
        for axis in range(1, max(t.rank for t in types) + 1):
            size, source = 1, None
            for t in types:
                if t.rank < axis or t.shape[-axis] == 1:
                    continue
                if source is not None and t.shape[-axis] != size:
                    raise self.error(f"cannot broadcast {source} against {t}: dimension {size} "
                                     f"against {t.shape[-axis]}")
                size, source = t.shape[-axis], t
            shape.insert(0, size)
        return tuple(shape)

    def broadcast(self, v: Value, shape: tuple[Dim, ...]) -> Value:
        shape = tuple(shape)
        if v.type.shape == shape:
            return v
        return self.op("broadcast", v, dims=tuple(range(len(shape) - v.type.rank, len(shape))), shape=shape)

    def reshape(self, v: Value, shape) -> Value:
        shape = tuple(shape)
        return v if v.type.shape == shape else self.op("reshape", v, shape=shape)

    def transpose(self, v: Value, perm: tuple[int, ...] | None = None) -> Value:
        """`v` with result axis i taken from axis perm[i]; by default every axis reversed (NumPy's .T)."""
        perm = tuple(reversed(range(v.type.rank))) if perm is None else perm
        return v if perm == tuple(range(v.type.rank)) else self.op("transpose", v, perm=perm)

    def elementwise(self, name: str, *values: object) -> Value:
        """Op `name` on `values` after agreeing on a dtype and broadcasting to one shape."""
        dtype = self.common_dtype(values)
        tensors = [self.tensor(v, dtype) for v in values]
        shape = self.broadcast_shape([t.type for t in tensors])
        return self.op(name, *(self.broadcast(t, shape) for t in tensors))

    def select(self, cond: object, a: object, b: object) -> Value:
        dtype = self.common_dtype([a, b])
        c, x, y = self.tensor(cond, BOOL), self.tensor(a, dtype), self.tensor(b, dtype)
        if c.type.dtype is not BOOL:
            raise self.error(f"the condition must be a bool tensor (a comparison), got {c.type}")
        shape = self.broadcast_shape([c.type, x.type, y.type])
        return self.op("select", *(self.broadcast(v, shape) for v in (c, x, y)))


def typed(cx: Scope, dtype: DType | None, make: Callable[[DType], Value]) -> Value | Deferred:
    """`make(dtype)` now, or a `Deferred` built later, at this location, in the dtype of its context."""
    if dtype is not None:
        return make(dtype)
    loc = cx.b.loc

    def make_here(dt: DType) -> Value:
        with cx.b.at(loc):
            return make(dt)
    return Deferred(make_here)


def index_tensor(cx: Scope, value: object) -> Value:
    """`value` as indices: an i32 or i64 tensor, or a static integer (an i64 scalar). A bool is
    refused as NumPy's integer indexing refuses it (NumPy reads a bool index as a mask)."""
    if type(value) is int or isinstance(value, SymDim):
        return cx.tensor(value, DType.i64)
    if not isinstance(value, (Value, Deferred)):
        hint = _NOT_A_MASK if isinstance(value, bool) else ""
        raise cx.error(f"indices must be an i32 or i64 tensor, got {describe(value)}{hint}")
    indices = cx.tensor(value, DType.i64)
    if not indices.type.dtype.is_int:
        hint = _NOT_A_MASK if indices.type.dtype is BOOL else "; convert them with i64(...)"
        raise cx.error(f"indices must be an i32 or i64 tensor, got {indices.type}{hint}")
    return indices


_NOT_A_MASK = ("; a bool is not an index (NumPy would read it as a mask, which adc does not support): "
               "select with where(...), or convert it with i64(...)")
