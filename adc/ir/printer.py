"""The textual form of the IR; `adc/ir/parser.py` reads it back exactly.

Names are assigned here: parameters keep their source names, other values are
numbered in order of definition within each function. Attributes print sorted
by name, so printing is deterministic and golden tests compare text.

    func @f(%x: f32[N]) -> f32 {
      %0 = reduce_sum %x {axes = [0]} : f32 loc("k.adc":2:12)
      return %0
    }
"""
from __future__ import annotations

import json
import math
from typing import Any

from adc.errors import Location
from adc.ir.core import Func, FuncRef, Module, Op, Value
from adc.ir.types import DType, SymDim


def format_attr(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, FuncRef):
        return f"@{value}"
    if isinstance(value, (DType, SymDim, int)):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        return "[" + ",".join(format_attr(v) for v in value) + "]"
    raise TypeError(f"cannot print attribute value {value!r}")


def format_loc(loc: Location | None) -> str:
    return "" if loc is None else f" loc({json.dumps(loc.file)}:{loc.line}:{loc.col})"


class _Namer:
    def __init__(self, func: Func):
        self.names: dict[Value, str] = {}
        for i, p in enumerate(func.params):
            name = p.name if p.name and p.name.isidentifier() and p.name not in self.names.values() else f"arg{i}"
            self.names[p] = name
        self.counter = 0

    def define(self, value: Value) -> str:
        self.names[value] = str(self.counter)
        self.counter += 1
        return f"%{self.names[value]}"

    def __call__(self, value: Value) -> str:
        name = self.names.get(value)
        return f"%{name}" if name is not None else "%<undefined>"


def format_op(op: Op, namer: _Namer, locations: bool = True) -> str:
    operands = ", ".join(namer(v) for v in op.operands)
    results = ", ".join(namer.define(v) for v in op.results)
    text = f"{results} = {op.name}" if results else op.name     # (a call of a function returning nothing)
    if operands:
        text += f" {operands}"
    if op.attrs:
        text += " {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in op.attrs.items()) + "}"
    text += " : " + (", ".join(str(v.type) for v in op.results) or "()")
    return text + (format_loc(op.loc) if locations else "")


def format_func(func: Func, locations: bool = True) -> str:
    namer = _Namer(func)
    params = ", ".join(f"{namer(p)}: {p.type}" for p in func.params)
    results = [str(t) for t in func.result_types]
    result = results[0] if len(results) == 1 else f"({', '.join(results)})"
    lines = [f"func @{func.name}({params}) -> {result}{format_loc(func.loc) if locations else ''} {{"]
    lines += [f"  {format_op(op, namer, locations)}" for op in func.ops]
    lines.append("  return " + ", ".join(namer(v) for v in func.returns))
    lines.append("}")
    return "\n".join(lines) + "\n"


def format_functions(module: Module, locations: bool = True) -> dict[str, str]:
    """Each function's text by name: `format_module` joins them."""
    return {f.name: format_func(f, locations) for f in module}


def format_module(module: Module, locations: bool = True) -> str:
    return "\n".join(format_functions(module, locations).values())
