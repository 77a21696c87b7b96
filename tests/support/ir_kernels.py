"""One-function IR modules built with adc.ir.builder: what tests below the frontend compile.

    kernel("x: f32[N], d: f32", lambda b, x, d: b.op("mul", x, d))
    -> a verified module of `func @k(%x: f32[N], %d: f32) -> f32[N]`
"""
from __future__ import annotations

from adc.abi import parse_type
from adc.ir.builder import Builder
from adc.ir.core import Module
from adc.ir.verify import verify


def kernel(params: str, body, name: str = "k") -> Module:
    """A verified module of one function: `params` like "x: f32[N], d: f32"; body(b, *values) -> results."""
    b = Builder()
    values = [b.param(n.strip(), parse_type(t.strip()))
              for n, t in (p.split(":") for p in params.split(", ") if p)]
    results = body(b, *values)
    module = Module({name: b.finish(name, list(results) if isinstance(results, (list, tuple)) else [results])})
    verify(module)
    return module
