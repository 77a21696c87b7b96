"""Buffer rules of lu_factor and lu_pivots_to_permutation: one outlined nest each over the
stacked matrices (split across threads, matrices.py), plain scalar loops inside; large matrices
factored by the runtime library's blocked getrf (codegen/native/lu.py) instead.

lu_factor is LAPACK's getf2, right-looking: the operand is copied into the factor's buffer and
eliminated there, column by column. Its pivot is the first row of largest |x| on or below the
diagonal (idamax: a NaN is never larger, unless it comes first); an exactly zero column is no
pivot and stays (U gets a zero on its diagonal, what divides by it later gives inf or NaN).

    %0, %1 = lu_factor %a : f64[B,N,N], i64[B,N]   ──▶   for b: lu = a; for j: p = argmax_{i>=j} |lu[i,j]|;
                                                            piv[j] = p; if lu[p,j] != 0: swap rows j, p;
                                                            lu[i>j, j] /= lu[j,j]; lu[i>j, k>j] -= lu[i,j] lu[j,k]
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from adc.codegen.native import lu
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.element_types import REGISTER_TYPES
from adc.codegen.lowering.loops import I64, NOWRAP, counted_loop, i64
from adc.codegen.lowering.rules.matrices import LU_BLOCKED, Matrices, block_size, by_size, over_matrices, runtime_matrix
from adc.ir.core import Op

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def lu_factor_lower(kernel: Emitter, op: Op, dests: list[ir.Value]) -> None:
    # getf2 (the module docstring): pivot search, row interchange, column scaled, trailing rank-1 update
    (a,), (factor, pivots) = op.operands, op.results
    dtype = a.type.dtype
    ty = REGISTER_TYPES[dtype]

    def eliminate(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
        (out, piv_out), b = outs, em.b
        ma, m, pv = Matrices(em, t, a), Matrices(em, t, factor), Matrices(em, t, pivots, vectors=True)
        n = em.dim(a.type.shape[-1])
        best, row = em.head.alloca(ty), em.head.alloca(I64)
        counted_loop(b, i64(0), n, lambda i: counted_loop(b, i64(0), n, lambda j: m.store(out, i, j, ma.read(i, j))))

        def column(j: ir.Value) -> None:
            b.store(intrinsic(b, "fabs", [m.load(out, j, j)], dtype), best)
            b.store(j, row)

            def search(i: ir.Value) -> None:
                x = intrinsic(b, "fabs", [m.load(out, i, j)], dtype)
                larger = b.fcmp_ordered(">", x, b.load(best))
                b.store(b.select(larger, x, b.load(best)), best)
                b.store(b.select(larger, i, b.load(row)), row)
            following = b.add(j, i64(1), flags=NOWRAP)
            counted_loop(b, following, n, search)
            p = b.load(row)
            pv.store(piv_out, i64(0), j, p)
            with b.if_then(b.fcmp_unordered("!=", m.load(out, p, j), ir.Constant(ty, 0.0))):
                def swap(k: ir.Value) -> None:
                    x, y = m.load(out, j, k), m.load(out, p, k)
                    m.store(out, j, k, y)
                    m.store(out, p, k, x)
                counted_loop(b, i64(0), n, swap)
                counted_loop(b, following, n, lambda i: m.store(out, i, j, b.fdiv(m.load(out, i, j), m.load(out, j, j))))

            def update(i: ir.Value) -> None:
                factor_ij = m.load(out, i, j)
                counted_loop(b, following, n, lambda k: m.store(
                    out, i, k, b.fsub(m.load(out, i, k), b.fmul(factor_ij, m.load(out, j, k)))))
            counted_loop(b, following, n, update)
        counted_loop(b, i64(0), n, column)

    def eliminate_blocked(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
        # a into the factor's buffer, factored there by the runtime library's getrf
        (out, piv_out), b = outs, em.b
        ma, m, pv = Matrices(em, t, a), Matrices(em, t, factor), Matrices(em, t, pivots, vectors=True)
        n = em.dim(a.type.shape[-1])
        counted_loop(b, i64(0), n, lambda i: counted_loop(b, i64(0), n, lambda j: m.store(out, i, j, ma.read(i, j))))
        b.call(lu.declare_getrf(em.llmod, dtype), [n, runtime_matrix(em, m, out, b.mul(n, n, flags=NOWRAP)), n,
                                                   runtime_matrix(em, pv, piv_out, n), block_size(em)])
    over_matrices(kernel, op, dests, by_size(kernel, a.type.shape[-1], 0, LU_BLOCKED,
                                            eliminate_blocked, eliminate))


lower_rules["lu_factor"] = lu_factor_lower


def lu_pivots_to_permutation_lower(kernel: Emitter, op: Op, dest: ir.Value) -> None:
    # perm = 0 .. N-1, then perm[i] <-> perm[piv[i]] for i = 0, 1, ... (piv clamped into [0, N))
    (pivots,), perm = op.operands, op.result

    def permute(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
        (out,), b = outs, em.b
        pv, pm = Matrices(em, t, pivots, vectors=True), Matrices(em, t, perm, vectors=True)
        n = em.dim(pivots.type.shape[-1])
        counted_loop(b, i64(0), n, lambda i: pm.store(out, i64(0), i, i))

        def interchange(i: ir.Value) -> None:
            k = pv.read(i64(0), i)
            k = b.select(b.icmp_signed("<", k, i64(0)), i64(0), k)
            k = b.select(b.icmp_signed(">=", k, n), b.sub(n, i64(1)), k)
            x, y = pm.load(out, i64(0), i), pm.load(out, i64(0), k)
            pm.store(out, i64(0), i, y)
            pm.store(out, i64(0), k, x)
        counted_loop(b, i64(0), n, interchange)
    over_matrices(kernel, op, [dest], permute, vectors=True)


lower_rules["lu_pivots_to_permutation"] = lu_pivots_to_permutation_lower
