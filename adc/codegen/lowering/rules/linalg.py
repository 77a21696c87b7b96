"""Buffer rules of cholesky and triangular_solve: one outlined nest each, its outer loop over the
stacked matrices (split across threads), plain scalar loops inside, correct for any size; and
where the matrices' order is a small constant, the same arithmetic unrolled over `Lanes`, W
matrices at a time, one per SIMD lane, the scalar loops finishing the stack's last < W.

The nest and the element access are matrices.py's, shared with the other factorizations.

    %1 = cholesky %a : f64[B,N,N]    ──▶   for b: for j: L[j,j] = sqrt(a[j,j] - Σ_k<j L[j,k]²)
                                                      for i > j: L[i,j] = (a[i,j] - Σ_k<j L[i,k] L[j,k]) / L[j,j]
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import llvmlite.ir as ir

from adc.codegen.native import cholesky, triangular
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.element_types import REGISTER_TYPES
from adc.codegen.lowering.fusion import unrolled_order
from adc.codegen.lowering.loops import I1, NOWRAP, TRANSPOSE_TILE, counted_loop, i64, tiled_loop_nest
from adc.codegen.lowering.rules.matrices import (CHOLESKY_BLOCKED, SOLVE_BLOCKED, Lanes, Matrices, block_size,
                                                 by_size, fill, over_matrices, runtime_matrix, subtract_products)
from adc.ir.core import Op

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules

def cholesky_lower(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    # Cholesky-Crout, column by column: L[j,j] = sqrt(a[j,j] - Σ_k<j L[j,k]²), then the rows below;
    # a pivot not > 0 (or NaN) fails, and the failed matrix becomes NaN (JAX's convention)
    (a,) = op.operands
    dtype = a.type.dtype
    ty = REGISTER_TYPES[dtype]

    def factor(em: Emitter, t: ir.Value, out: ir.Value) -> None:
        b, m = em.b, Matrices(em, t, a)
        n = em.dim(a.type.shape[-1])
        acc, failed = em.head.alloca(ty), em.head.alloca(I1)
        b.store(ir.Constant(I1, 0), failed)

        def column(j: ir.Value) -> None:
            b.store(m.read(j, j), acc)
            subtract_products(em, acc, i64(0), j, lambda k: (m.load(out, j, k), m.load(out, j, k)))
            pivot = b.load(acc)
            b.store(b.or_(b.load(failed), b.not_(b.fcmp_ordered(">", pivot, ir.Constant(ty, 0.0)))), failed)
            d = intrinsic(b, "sqrt", [pivot], dtype)
            m.store(out, j, j, d)

            def below(i: ir.Value) -> None:
                b.store(m.read(i, j), acc)
                subtract_products(em, acc, i64(0), j, lambda k: (m.load(out, i, k), m.load(out, j, k)))
                m.store(out, i, j, b.fdiv(b.load(acc), d))
            counted_loop(b, b.add(j, i64(1), flags=NOWRAP), n, below)
            counted_loop(b, i64(0), j, lambda i: m.store(out, i, j, ir.Constant(ty, 0.0)))
        counted_loop(b, i64(0), n, column)
        with b.if_then(b.load(failed), likely=False):
            nan = ir.Constant(ty, float("nan"))
            counted_loop(b, i64(0), n, lambda i: counted_loop(b, i64(0), n, lambda j: m.store(out, i, j, nan)))
    def factor_lanes(em: Emitter, t: ir.Value, outs: list[ir.Value], width: int) -> None:
        # the same operations in the same order, on vectors; a failed lane is NaN
        b, m, n = em.b, Lanes(em, t, a, width), unrolled_order(a)
        zero = ir.Constant(m.type, None)
        factor, failed = {}, ir.Constant(ir.VectorType(I1, width), None)
        for j in range(n):
            pivot = m.read(j, j)
            for k in range(j):
                pivot = b.fsub(pivot, b.fmul(factor[j, k], factor[j, k]))
            failed = b.or_(failed, b.not_(b.fcmp_ordered(">", pivot, zero)))
            factor[j, j] = d = intrinsic(b, "sqrt", [pivot], dtype)
            for i in range(j + 1, n):
                x = m.read(i, j)
                for k in range(j):
                    x = b.fsub(x, b.fmul(factor[i, k], factor[j, k]))
                factor[i, j] = b.fdiv(x, d)
        nan = ir.Constant(m.type, [float("nan")] * width)
        m.store(outs[0], lambda i, j: b.select(failed, nan, factor.get((i, j), zero)), n)
    def factor_blocked(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
        # a's lower triangle into the result's, factored there by the runtime library (its upper
        # triangle is scratch, zeroed after); a failed factorization is NaN
        (out,), b, m = outs, em.b, Matrices(em, t, a)
        n = em.dim(a.type.shape[-1])
        counted_loop(b, i64(0), n, lambda i: counted_loop(
            b, i64(0), b.add(i, i64(1), flags=NOWRAP), lambda j: m.store(out, i, j, m.read(i, j))))
        info = b.call(cholesky.declare_potrf(em.llmod, dtype),
                      [n, runtime_matrix(em, m, out, b.mul(n, n, flags=NOWRAP)), n, block_size(em)])
        counted_loop(b, i64(0), n, lambda i: counted_loop(
            b, b.add(i, i64(1), flags=NOWRAP), n, lambda j: m.store(out, i, j, ir.Constant(ty, 0.0))))
        with b.if_then(b.icmp_signed("!=", info, i64(0)), likely=False):
            fill(em, m, out, n, n, ir.Constant(ty, float("nan")))
    lanes = unrolled_order(a) is not None and not kernel.linalg_block
    unblocked = lambda em, t, outs: factor(em, t, outs[0])                  # noqa: E731
    body = unblocked if lanes else by_size(kernel, a.type.shape[-1], 0, CHOLESKY_BLOCKED, factor_blocked, unblocked)
    over_matrices(kernel, op, [dest], body, lanes=factor_lanes if lanes else None)


lower_rules["cholesky"] = cholesky_lower


def triangular_solve_lower(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    # substitution, column by column of b: x[i] = (b[i] - Σ t[i,k] x[k]) / t[i,i] over the rows k
    # solved before i (forward for a lower op(a), backward for an upper), t[i,k] = a[k,i] when `trans`
    a, rhs = op.operands
    lower, trans, unit = op.attrs["lower"], op.attrs["trans"], op.attrs["unit_diagonal"]
    forward = lower != trans

    def solve(em: Emitter, t: ir.Value, out: ir.Value) -> None:
        b, ma, mb = em.b, Matrices(em, t, a), Matrices(em, t, rhs)
        n, columns = em.dim(a.type.shape[-1]), em.dim(rhs.type.shape[-1])
        acc = em.head.alloca(REGISTER_TYPES[a.type.dtype])

        def coefficient(i: ir.Value, k: ir.Value) -> ir.Value:
            return ma.read(k, i) if trans else ma.read(i, k)

        def row(j: ir.Value, step: ir.Value) -> None:
            i = step if forward else b.sub(b.sub(n, i64(1)), step)
            b.store(mb.read(i, j), acc)
            solved = (i64(0), i) if forward else (b.add(i, i64(1)), n)
            subtract_products(em, acc, *solved, lambda k: (coefficient(i, k), mb.load(out, k, j)))
            x = b.load(acc)
            mb.store(out, i, j, x if unit else b.fdiv(x, coefficient(i, i)))
        counted_loop(b, i64(0), columns, lambda j: counted_loop(b, i64(0), n, lambda step: row(j, step)))
    def solve_lanes(em: Emitter, t: ir.Value, outs: list[ir.Value], width: int) -> None:
        # the same operations in the same order, on vectors, each coefficient read once
        b, ma, mb = em.b, Lanes(em, t, a, width), Lanes(em, t, rhs, width)
        n, columns = unrolled_order(a), rhs.type.shape[-1]
        read = functools.cache(lambda i, k: ma.read(k, i) if trans else ma.read(i, k))
        x = {}
        for j in range(columns):
            for i in range(n) if forward else reversed(range(n)):
                acc = mb.read(i, j)
                for k in range(0, i) if forward else range(i + 1, n):
                    acc = b.fsub(acc, b.fmul(read(i, k), x[k, j]))
                x[i, j] = acc if unit else b.fdiv(acc, read(i, i))
        mb.store(outs[0], lambda i, j: x[i, j], n)
    def solve_blocked(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
        # b into the result, solved there in place by the runtime library's trsm; op(a) lower when
        # `lower` and not `trans` or the other way, aᵀ read by swapped strides
        (out,), b = outs, em.b
        ma, mb = Matrices(em, t, a), Matrices(em, t, rhs)
        n, columns = em.dim(a.type.shape[-1]), em.dim(rhs.type.shape[-1])
        # in tiles: a fused transpose (the second solve of a cholesky's VJP) reads across rows
        tiled_loop_nest(b, [(i64(0), n), (i64(0), columns)], 0, TRANSPOSE_TILE,
                        lambda axes: mb.store(out, *axes, mb.read(*axes)))
        strides = [i64(1), n] if trans else [n, i64(1)]
        b.call(triangular.declare_trsm(em.llmod, a.type.dtype),
               [n, columns, runtime_matrix(em, ma, em.buffers[a], b.mul(n, n, flags=NOWRAP)), *strides,
                runtime_matrix(em, mb, out, b.mul(n, columns, flags=NOWRAP)), columns, i64(1),
                i64(int(lower != trans)), i64(int(unit)), block_size(em)])
    static = unrolled_order(a) is not None and isinstance(rhs.type.shape[-1], int) and not kernel.linalg_block
    unblocked = lambda em, t, outs: solve(em, t, outs[0])                   # noqa: E731
    # a stack over lanes finishes with the same operations on its last matrices
    body = unblocked if static else by_size(kernel, a.type.shape[-1], rhs.type.shape[-1], SOLVE_BLOCKED, solve_blocked,
                                            unblocked)
    over_matrices(kernel, op, [dest], body, lanes=solve_lanes if static else None)


lower_rules["triangular_solve"] = triangular_solve_lower
