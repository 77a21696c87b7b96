"""Level-1 operations on contiguous vectors for the runtime library's routines (the tridiagonal
eigensolver, tridiagonal.py's reduction): dot products and axpys, vectorized by hand.

A dot product is a reduction, which LLVM vectorizes only when allowed to reorder the sums (a fast
math flag adc does not use); here DOT_VECTORS vector accumulators take consecutive chunks and are
added at the end, an order of summation no worse than one accumulator's.

    dot(r, n, x, y)             Σ x_i y_i
    axpy(r, n, alpha, x, y)     y += alpha x
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.native import gemm
from adc.codegen.native.blocked import Routine, internal
from adc.codegen.lowering.loops import I64, for_range, i64

DOT_VECTORS = 4


def dot(r: Routine, n: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    """Σ x[i] y[i] for i < n (x, y contiguous element pointers)."""
    return r.b.call(_dot_function(r.module, r.blk), [n, x, y])


def axpy(r: Routine, n: ir.Value, alpha: ir.Value, x: ir.Value, y: ir.Value) -> None:
    """y[i] += alpha x[i] for i < n, rounded once each (x and y do not overlap)."""
    r.b.call(_axpy_function(r.module, r.blk), [n, alpha, x, y])


def _dot_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "dot", [I64, ptr, ptr], blk.elem)
    if r is None:
        return fn
    n, x, y = r.args
    b, lanes = r.b, blk.vl
    accumulators = [r.entry.alloca(r.vector) for _ in range(DOT_VECTORS)]
    for acc in accumulators:
        b.store(ir.Constant(r.vector, None), acc)

    def chunk(j: ir.Value, masks: list[ir.Value | None]) -> None:
        for k, acc in enumerate(accumulators):
            at = b.add(j, i64(k * lanes))
            b.store(r.fma(r.vload(b.gep(x, [at]), masks[k]), r.vload(b.gep(y, [at]), masks[k]), b.load(acc)), acc)
    r.chunks(n, DOT_VECTORS, chunk)
    total = b.load(accumulators[0])
    for acc in accumulators[1:]:
        total = b.fadd(total, b.load(acc))
    result = b.extract_element(total, i64(0))
    for lane in range(1, lanes):
        result = b.fadd(result, b.extract_element(total, i64(lane)))
    b.ret(result)
    return fn


def _axpy_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "axpy", [I64, blk.elem, ptr, ptr])
    if r is None:
        return fn
    n, alpha, x, y = r.args
    b = r.b
    scale = r.splat(alpha)

    def chunk(j: ir.Value, masks: list[ir.Value | None]) -> None:
        for k in range(DOT_VECTORS):
            at = b.add(j, i64(k * blk.vl))
            target = b.gep(y, [at])
            r.vstore(r.fma(scale, r.vload(b.gep(x, [at]), masks[k]), r.vload(target, masks[k])), target, masks[k])
    r.chunks(n, DOT_VECTORS, chunk)
    b.ret_void()
    return fn


def scale(r: Routine, n: ir.Value, alpha: ir.Value, x: ir.Value) -> None:
    """x[i] *= alpha for i < n."""
    with for_range(r.b, i64(0), n) as i:
        r.b.store(r.b.fmul(r.b.load(r.b.gep(x, [i])), alpha), r.b.gep(x, [i]))
