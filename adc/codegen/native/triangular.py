"""The runtime library's triangular solve with many right-hand sides (BLAS's trsm, left side): B := T⁻¹ B
in place, T the lower or upper triangle of a strided matrix, its diagonal taken as ones when `unit`.

    void adc_rt_trsm_<dtype>(i64 n, i64 k, T* a, i64 rsa, i64 csa, T* b, i64 rsb, i64 csb,
                             i64 lower, i64 unit, i64 nb)
        T: a[n, n], element (i, j) at a[i*rsa + j*csa] (a transposed triangle is a swap of strides)
        B: b[n, k], row-major (csb = 1) or column-major (rsb = 1)

Recursive, for a lower T: X1 = T11⁻¹ B1; B2 -= T21 X1 (blocked.update, the gemm); X2 = T22⁻¹ B2,
halving n until a block of at most nb rows is left (an upper T the same from the bottom). A block
is solved by substitution with CHUNK_VECTORS vectors of right-hand sides in registers, row after
row: x_i = (b_i - Σ t_ip x_p) · (1 / t_ii) over the rows p solved before i, one FMA per vector and
p. A column-major B (a Cholesky's panel, whose right-hand sides are a matrix's rows) goes through
a tile on the stack, TILE_COLUMNS right-hand sides at a time, transposed. A zero on the diagonal
gives inf or NaN, as a division by it does.
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.native import gemm
from adc.codegen.native.blocked import (CHUNK_VECTORS, MAX_BLOCK, Routine, View, clamp_block, copy, declare, exported, half,
                                        internal, update)
from adc.codegen.lowering.loops import I1, I64, for_range, i64
from adc.ir.types import DType

TILE_COLUMNS = 64       # right-hand sides of a column-major B transposed into a tile at a time


def trsm_type(dtype: DType) -> ir.FunctionType:
    ptr = gemm.ELEMENT_TYPES[dtype].as_pointer()
    return ir.FunctionType(ir.VoidType(), [I64, I64, ptr, I64, I64, ptr, I64, I64, I64, I64, I64])


def declare_trsm(module: ir.Module, dtype: DType) -> ir.Function:
    """`adc_rt_trsm_<dtype>` declared in a kernel module (lowering's triangular_solve)."""
    return declare(module, "trsm", dtype, trsm_type(dtype))


def define_trsm(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """Define `adc_rt_trsm_<dtype>` (the module docstring) in the runtime library."""
    r = exported(module, blk, "trsm", trsm_type(blk.dtype))
    n, k, a, rsa, csa, b_, rsb, csb, lower, unit, nb = r.args
    b = r.b
    b.call(solve_function(module, blk), [n, k, a, rsa, csa, b_, rsb, csb, b.icmp_signed("!=", lower, i64(0)),
                                         b.icmp_signed("!=", unit, i64(0)), clamp_block(b, nb)])
    b.ret_void()
    return r.fn


def solve(r: Routine, n: ir.Value, k: ir.Value, t: View, x: View, lower: bool, unit: bool, nb: ir.Value) -> None:
    """x[n, k] := t⁻¹ x from a routine of the library (t's `lower` or upper triangle, `unit` diagonal)."""
    r.b.call(solve_function(r.module, r.blk), [n, k, t.ptr, t.rs, t.cs, x.ptr, x.rs, x.cs,
                                               ir.Constant(I1, lower), ir.Constant(I1, unit), nb])


def solve_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """The recursion (the module docstring): (n, k, a, rsa, csa, b, rsb, csb, i1 lower, i1 unit, nb)."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "trsm", [I64, I64, ptr, I64, I64, ptr, I64, I64, I1, I1, I64])
    if r is None:
        return fn
    n, k, a, rsa, csa, b_, rsb, csb, lower, unit, nb = r.args
    b = r.b
    r.ret_if(b.or_(b.icmp_signed("<=", n, i64(0)), b.icmp_signed("<=", k, i64(0))))
    with b.if_then(b.icmp_signed("<=", n, nb)):
        b.call(_unblocked_function(module, blk), [n, k, a, rsa, csa, b_, rsb, csb, lower, unit])
        b.ret_void()
    t, x = View(a, rsa, csa), View(b_, rsb, csb)
    n1 = half(b, n)
    n2 = b.sub(n, n1)
    t22, x2 = t.block(b, n1, n1), x.block(b, n1, i64(0))

    def recurse(n_: ir.Value, t_: View, x_: View) -> None:
        b.call(fn, [n_, k, t_.ptr, t_.rs, t_.cs, x_.ptr, x_.rs, x_.cs, lower, unit, nb])
    with b.if_else(lower) as (forward, backward):
        with forward:       # X1 = T11⁻¹ B1; B2 -= T21 X1; X2 = T22⁻¹ B2
            recurse(n1, t, x)
            update(r, n2, k, n1, t.block(b, n1, i64(0)), x, x2)
            recurse(n2, t22, x2)
        with backward:      # X2 = T22⁻¹ B2; B1 -= T12 X2; X1 = T11⁻¹ B1
            recurse(n2, t22, x2)
            update(r, n1, k, n2, t.block(b, i64(0), n1), x2, x)
            recurse(n1, t, x)
    b.ret_void()
    return fn


def _unblocked_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """A block of n <= MAX_BLOCK rows: (n, k, a, rsa, csa, b, rsb, csb, i1 lower, i1 unit)."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "trsm_unblocked", [I64, I64, ptr, I64, I64, ptr, I64, I64, I1, I1])
    if r is None:
        return fn
    n, k, a, rsa, csa, b_, rsb, csb, lower, unit = r.args
    b = r.b
    t = View(a, rsa, csa)
    reciprocals = r.tile(MAX_BLOCK)
    with for_range(b, i64(0), n) as i:
        inverse = b.fdiv(r.constant(1.0), r.load(t, i, i))
        b.store(b.select(unit, r.constant(1.0), inverse), b.gep(reciprocals, [i]))
    substitute = _substitution_function(module, blk)
    with b.if_else(b.icmp_signed("==", csb, i64(1))) as (in_place, transposed):
        with in_place:
            b.call(substitute, [n, k, a, rsa, csa, b_, rsb, reciprocals, lower])
        with transposed:
            tile = r.tile(MAX_BLOCK * TILE_COLUMNS)
            x, rows = View(b_, rsb, csb), View(tile, i64(TILE_COLUMNS), i64(1))
            with for_range(b, i64(0), k, i64(TILE_COLUMNS)) as first:
                width = r.min(i64(TILE_COLUMNS), b.sub(k, first))
                block = x.block(b, i64(0), first)
                copy(r, n, width, block, rows, columns_outside=True)
                b.call(substitute, [n, width, a, rsa, csa, tile, i64(TILE_COLUMNS), reciprocals, lower])
                copy(r, n, width, rows, block, columns_outside=True)
    b.ret_void()
    return fn


def _substitution_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(n, w, a, rsa, csa, x, ldx, reciprocals, i1 lower): x[n, w] (row-major, row stride ldx) :=
    t⁻¹ x, rows in order (lower) or from the last, t's diagonal given as `reciprocals`."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "trsm_substitution", [I64, I64, ptr, I64, I64, ptr, I64, ptr, I1], kernel=True)
    if r is None:
        return fn
    n, w, a, rsa, csa, x, ldx, reciprocals, lower = r.args
    b, t = r.b, View(a, rsa, csa)
    accumulators = [r.entry.alloca(r.vector) for _ in range(CHUNK_VECTORS)]

    def row(order: ir.Value) -> ir.Value:
        return b.select(lower, order, b.sub(b.sub(n, i64(1)), order))

    def chunk(j: ir.Value, masks: list[ir.Value | None]) -> None:
        def vector(i: ir.Value, v: int) -> ir.Value:
            return b.gep(x, [b.add(b.mul(i, ldx), b.add(j, i64(v * blk.vl)))])
        with for_range(b, i64(0), n) as s:
            i = row(s)
            for v, acc in enumerate(accumulators):
                b.store(r.vload(vector(i, v), masks[v]), acc)
            with for_range(b, i64(0), s) as q:
                p = row(q)
                coefficient = r.splat(b.fneg(r.load(t, i, p)))
                for v, acc in enumerate(accumulators):
                    b.store(r.fma(coefficient, r.vload(vector(p, v), masks[v]), b.load(acc)), acc)
            scale = r.splat(b.load(b.gep(reciprocals, [i])))
            for v, acc in enumerate(accumulators):
                r.vstore(b.fmul(b.load(acc), scale), vector(i, v), masks[v])
    r.chunks(w, CHUNK_VECTORS, chunk)
    b.ret_void()
    return fn
