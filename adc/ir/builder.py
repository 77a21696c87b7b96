"""Builder: appends ops to a function body, inferring result types from the type rules.

Every op gets a location: the builder's current one (set with `at`), which a
pass rewriting an op sets to that op's location, so derived ops point at the
source expression they come from. A type-rule failure becomes a `CompileError`
at that location.

    b = Builder()
    x = b.param("x", TensorType(F32, (N,)))
    y = b.op("mul", x, x)
    func = b.finish("square", [y])
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from adc.errors import CompileError, Location
from adc.ir.core import Attrs, Func, Op, Value
from adc.ir.ops import TypeRuleError, infer_types
from adc.ir.types import TensorType


class Builder:
    def __init__(self, funcs: Mapping[str, Func] | None = None, loc: Location | None = None):
        self.funcs = funcs if funcs is not None else {}
        self.loc = loc
        self.params: list[Value] = []
        self.ops: list[Op] = []

    @contextmanager
    def at(self, loc: Location | None) -> Iterator[None]:
        """Stamp ops built inside the block with `loc`."""
        saved, self.loc = self.loc, loc
        try:
            yield
        finally:
            self.loc = saved

    def param(self, name: str, type: TensorType) -> Value:
        value = Value(type, name)
        self.params.append(value)
        return value

    def emit(self, name: str, *operands: Value, **attrs: Any) -> tuple[Value, ...]:
        """Append op `name` and return its results."""
        attrs_ = Attrs(attrs)
        try:
            types = infer_types(name, [v.type for v in operands], attrs_, self.funcs)
        except TypeRuleError as err:
            raise CompileError(f"{name}: {err}", self.loc) from None
        results = tuple(Value(t) for t in types)
        self.ops.append(Op(name, tuple(operands), attrs_, results, self.loc))
        return results

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        """Append a single-result op and return its result."""
        (result,) = self.emit(name, *operands, **attrs)
        return result

    def finish(self, name: str, returns: list[Value] | tuple[Value, ...], loc: Location | None = None) -> Func:
        return Func(name, tuple(self.params), tuple(self.ops), tuple(returns), loc or self.loc)


def sum_present(b: Builder, *terms: Value | None) -> Value | None:
    """The sum of the terms that are not None (symbolic zeros of the derivative passes); None if all are."""
    present = [t for t in terms if t is not None]
    total = present[0] if present else None
    for t in present[1:]:
        total = b.op("add", total, t)
    return total


def full(b: Builder, value: float, type: TensorType) -> Value:
    """A tensor of `type` holding `value` everywhere (a broadcast scalar constant)."""
    scalar = b.op("constant", dtype=type.dtype, value=value)
    return b.op("broadcast", scalar, dims=[], shape=type.shape) if type.rank else scalar
