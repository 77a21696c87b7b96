"""Symbolic sizes checked to fit in int64 bytes where they become known, before anything uses them.

A kernel computes its sizes (dimensions, element counts, the byte offsets of its block) in i64
arithmetic that assumes no overflow (`nsw`), which holds only once every buffer's byte size is
known to fit. A static shape is checked when the program is built (`types.fits`); a shape with
symbols is checked here, with overflow-checked arithmetic: a kernel checks, on entry, the
shapes of every value it and the regions it runs hold, and those using a symbol a scan binds
(a trip count) once the scan has bound it. A region checks only the shapes of the symbols its
own scans bind: its parent checked the rest. Past 2**63 - 1 bytes the kernel returns
STATUS_NO_MEMORY (the runtime's MemoryError), as NumPy refuses an array larger than the address
space; before, f32[N, N, N] at N = 2**22 wrapped to 0 bytes and the kernel wrote into nothing.

    f(x: f32[N]) with a value of f32[N,N,N]   ──▶   entry: N*N*N*4 computed with llvm.smul.with.overflow;
                                                    an overflow (and no zero dimension) returns 1
"""
from __future__ import annotations

from typing import Iterable

import llvmlite.ir as ir

from adc.codegen.lowering.loops import I1, i64
from adc.ir.core import Func, Module, children_first
from adc.ir.types import Dim, DType, SymDim

Shape = tuple[tuple[Dim, ...], DType]


def symbolic_shapes(module: Module, func: Func, region: bool) -> list[Shape]:
    """The distinct symbolic shapes (with their dtypes) of the values `func` and the regions it runs
    hold; for a region, only those using a symbol its own scans bind."""
    names = children_first([func.name], lambda name: module[name].regions())
    found: dict[Shape, None] = {}
    for name in names:
        f = func if name == func.name else module[name]
        values = [*f.params, *(r for op in f.ops for r in op.results)]
        found.update(dict.fromkeys((v.type.shape, v.type.dtype) for v in values
                                   if any(isinstance(d, SymDim) for d in v.type.shape)))
    if region:
        bound = set(func.bound_symbols)
        return [s for s in found if bound & symbols_of(s)]
    return list(found)


def symbols_of(shape: Shape) -> set[str]:
    return {name for d in shape[0] if isinstance(d, SymDim) for name in d.symbols}


def too_large(b: ir.IRBuilder, shapes: Iterable[Shape], symbols: dict[str, ir.Value]) -> ir.Value:
    """Whether any of `shapes` holds more than 2**63 - 1 bytes for the symbols' values (i1)."""
    overflowed: ir.Value = ir.Constant(I1, 0)
    for dims, dtype in shapes:
        total, over, empty = i64(dtype.numpy.itemsize), ir.Constant(I1, 0), ir.Constant(I1, 0)
        for d in dims:
            value, value_over = _evaluate(b, d, symbols)
            empty = b.or_(empty, b.icmp_signed("==", value, i64(0)))
            total, step_over = _checked(b, "smul", total, value)
            over = b.or_(over, b.or_(value_over, step_over))
        overflowed = b.or_(overflowed, b.and_(over, b.not_(empty)))
    return overflowed


def _evaluate(b: ir.IRBuilder, d: Dim, symbols: dict[str, ir.Value]) -> tuple[ir.Value, ir.Value]:
    """Dimension `d` for the symbols' values, and whether computing it overflowed."""
    if not isinstance(d, SymDim):
        return i64(int(d)), ir.Constant(I1, 0)
    total, over = i64(0), ir.Constant(I1, 0)
    for monomial, coefficient in d.terms:
        term = i64(coefficient)
        for name in monomial:
            term, step_over = _checked(b, "smul", term, symbols[name])
            over = b.or_(over, step_over)
        total, step_over = _checked(b, "sadd", total, term)
        over = b.or_(over, step_over)
    return total, over


def _checked(b: ir.IRBuilder, op: str, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    pair = getattr(b, f"{op}_with_overflow")(x, y)
    return b.extract_value(pair, 0), b.extract_value(pair, 1)
