"""Level-1 operations on contiguous vectors for the runtime library's routines (the tridiagonal
eigensolver, tridiagonal.py's reduction): dot products and axpys, vectorized by hand.

A dot product is a reduction, which LLVM vectorizes only when allowed to reorder the sums (a fast
math flag adc does not use); here DOT_VECTORS vector accumulators take consecutive chunks and are
added at the end, an order of summation no worse than one accumulator's.

    dot(r, n, x, y)             Σ x_i y_i
    axpy(r, n, alpha, x, y)     y += alpha x
    matrix_vector(r, rows, columns, m, u, y)              y = m u (a dot product per row)
    transposed_matrix_vector(r, rows, columns, m, u, y)   y = mᵀ u (an axpy per row)

The matrix-vector products split their work across threads (rows, or chunks of columns) from
PARALLEL elements on: each reads the matrix once, and memory is what they wait for.
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.native import gemm, parallel
from adc.codegen.native.blocked import Routine, View, internal
from adc.codegen.lowering.loops import I64, PTR, for_range, i64

DOT_VECTORS = 4
PARALLEL = 1 << 16          # elements of a matrix-vector product's matrix from which threads share it
COLUMN_CHUNK = 256          # columns of mᵀ u a thread accumulates at a time (its y chunk stays in L1)


def dot(r: Routine, n: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    """Σ x[i] y[i] for i < n (x, y contiguous element pointers)."""
    return r.b.call(_dot_function(r.module, r.blk), [n, x, y])


def axpy(r: Routine, n: ir.Value, alpha: ir.Value, x: ir.Value, y: ir.Value) -> None:
    """y[i] += alpha x[i] for i < n, rounded once each (x and y do not overlap)."""
    r.b.call(_axpy_function(r.module, r.blk), [n, alpha, x, y])


def _dot_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "dot", [I64, ptr, ptr], blk.elem, kernel=True)
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
    fn, r = internal(module, blk, "axpy", [I64, blk.elem, ptr, ptr], kernel=True)
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


def matrix_vector(r: Routine, rows: ir.Value, columns: ir.Value, m: View, u: ir.Value, y: ir.Value) -> None:
    """y[k] = m[k, :columns] · u for k < rows (m row-major), the rows across threads when large."""
    _parallel(r, _matrix_vector_task(r.module, r.blk), rows, columns, m, u, y, rows)


def transposed_matrix_vector(r: Routine, rows: ir.Value, columns: ir.Value, m: View, u: ir.Value,
                             y: ir.Value) -> None:
    """y[c] = Σ_k m[k, c] u[k] for c < columns (m row-major: each row an axpy), chunks of COLUMN_CHUNK
    columns across threads when large."""
    chunks = r.b.sdiv(r.b.add(columns, i64(COLUMN_CHUNK - 1)), i64(COLUMN_CHUNK))
    _parallel(r, _transposed_task(r.module, r.blk), rows, columns, m, u, y, chunks)


def _parallel(r: Routine, task: ir.Function, rows, columns, m: View, u, y, count) -> None:
    b = r.b
    ctx = r.context([rows, columns, m.ptr, m.rs, u, y])
    with b.if_else(b.icmp_signed(">=", b.mul(rows, columns), i64(PARALLEL))) as (split, alone):
        with split:
            parallel.call_parallel_for(b, task, ctx, i64(0), count, i64(1))
        with alone:
            b.call(task, [ctx, i64(0), count])


def _unpack(r: Routine, ctx: ir.Value):
    rows, columns, m, ld, u, y = r.unpack(ctx, 6)
    return rows, columns, r.element_pointer(m), ld, r.element_pointer(u), r.element_pointer(y)


def _matrix_vector_task(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """task(ctx, start, end): rows [start, end) of y = m u."""
    fn, r = internal(module, blk, "gemv_task", [PTR, I64, I64])
    if r is None:
        return fn
    ctx, start, end = r.args
    b = r.b
    _, columns, m, ld, u, y = _unpack(r, ctx)
    with for_range(b, start, end) as k:
        b.store(dot(r, columns, b.gep(m, [b.mul(k, ld)]), u), b.gep(y, [k]))
    b.ret_void()
    return fn


def _transposed_task(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """task(ctx, start, end): column chunks [start, end) of y = mᵀ u."""
    fn, r = internal(module, blk, "gemv_transposed_task", [PTR, I64, I64])
    if r is None:
        return fn
    ctx, start, end = r.args
    b = r.b
    rows, columns, m, ld, u, y = _unpack(r, ctx)
    with for_range(b, start, end) as chunk:
        first = b.mul(chunk, i64(COLUMN_CHUNK))
        width = r.min(i64(COLUMN_CHUNK), b.sub(columns, first))
        with for_range(b, i64(0), width) as c:
            b.store(r.constant(0.0), b.gep(y, [b.add(first, c)]))
        with for_range(b, i64(0), rows) as k:
            axpy(r, width, b.load(b.gep(u, [k])), b.gep(m, [b.add(b.mul(k, ld), first)]), b.gep(y, [first]))
    b.ret_void()
    return fn
