"""Buffer rules of eigh and svd: one-sided (Hestenes) cyclic Jacobi on each stacked small matrix,
plain scalar loops in the nest of matrices.py, no memory beyond the results' buffers.

Both orthogonalize the columns of a matrix G by plane rotations from the right, pair (i, j) after
pair, sweep after sweep, until no pair of a sweep has |g_iᵀg_j| > M·eps·‖g_i‖‖g_j‖ (or 30 sweeps
pass; random f64 matrices, n = 4 to 64, took 5-9 sweeps (eigh) and 5-11 (svd), the last rotating
nothing, measured with a NumPy model of this loop): each rotation zeroes g_iᵀg_j with
ζ = (‖g_j‖² - ‖g_i‖²) / 2 g_iᵀg_j, t = sign(ζ) / (|ζ| + √(1 + ζ²)), c = 1/√(1 + t²), s = c t.
- svd: G = a (in u's buffer) and the rotations accumulated in V (vh's buffer, transposed at the
  end); s_k = ‖g_k‖, u_k = g_k / s_k, sorted descending. Columns are compared relative to their
  own norms (Demmel and Veselić 1992).
- eigh: G = S + c I (v's buffer), S the symmetric matrix of a's lower triangle and c = 2‖S‖_F,
  positive definite with condition number <= 3, so its left singular vectors are S's eigenvectors
  and the column directions g_k / ‖g_k‖ are accurate to eps (no V needed); w_k = v_kᵀ S v_k (the
  Rayleigh quotient, accurate to eps‖S‖ as LAPACK's), sorted ascending.
A matrix holding NaN gives NaN. Eigenvector and singular vector signs are those Jacobi reaches.
Stacks of matrices of a static order ≤ 16 run W at a time over SIMD lanes (jacobi_lanes.py), with
the same operations, so the same results. Other matrices from order 12 (eigh) and 24 (svd, tall
matrices) are decomposed by the runtime library instead (codegen/native/symmetric.py, singular.py:
tridiagonal and bidiagonal reductions; the thresholds in matrices.py), in the results' buffers; a
decomposition that failed gives NaN.

    %w, %v = eigh %a : f64[N], f64[N,N]   ──▶   v = S + cI; sweeps of rotations of column pairs;
                                                w_k = v_kᵀ S v_k / v_kᵀ v_k, v_k /= ‖v_k‖; sort
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir
import numpy as np

from adc.codegen.native import singular, symmetric
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.element_types import REGISTER_TYPES
from adc.codegen.lowering.fusion import UNROLLED_ORDER, unrolled_order
from adc.codegen.lowering.loops import I1, NOWRAP, counted_loop, i64
from adc.codegen.lowering.rules.jacobi_lanes import MAX_SWEEPS, LaneColumns, LaneJacobi, nan_lanes, store_lanes
from adc.codegen.lowering.rules.matrices import (EIGH_BLOCK, EIGH_BLOCKED, SVD_BLOCK, SVD_BLOCKED, Lanes, Matrices,
                                                 block_size, by_size, fill, holds_nan, over_matrices, runtime_matrix)
from adc.codegen.lowering.rules.orthogonal import accumulate, square
from adc.ir.core import Op
from adc.ir.types import num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


class _Columns:
    """The columns of G (and of V, rotated alike) of one matrix, in their output buffers."""

    def __init__(self, em: Emitter, g: Matrices, g_out: ir.Value, rows: ir.Value, n: ir.Value,
                 v: Matrices | None = None, v_out: ir.Value | None = None):
        self.em, self.g, self.g_out, self.rows, self.n, self.v, self.v_out = em, g, g_out, rows, n, v, v_out
        self.ty = REGISTER_TYPES[g.dtype]
        self.dtype = g.dtype

    def dot(self, i: ir.Value, j: ir.Value) -> ir.Value:
        b, g, out = self.em.b, self.g, self.g_out
        return accumulate(self.em, self.ty, i64(0), self.rows, lambda r: b.fmul(g.load(out, r, i), g.load(out, r, j)))

    def rotate(self, i: ir.Value, j: ir.Value, c: ir.Value, s: ir.Value) -> None:
        # (g_i, g_j) <- (c g_i - s g_j, s g_i + c g_j), and V's columns i and j alike
        b = self.em.b
        pairs = [(self.g, self.g_out, self.rows)] + ([(self.v, self.v_out, self.n)] if self.v else [])
        for m, out, rows in pairs:
            def step(r: ir.Value, m=m, out=out) -> None:
                x, y = m.load(out, r, i), m.load(out, r, j)
                m.store(out, r, i, b.fsub(b.fmul(c, x), b.fmul(s, y)))
                m.store(out, r, j, b.fadd(b.fmul(s, x), b.fmul(c, y)))
            counted_loop(b, i64(0), rows, step)

    def sweeps(self) -> None:
        """Rotate every pair of columns, sweep after sweep, until a sweep rotates none."""
        b, ty = self.em.b, self.ty
        one = ir.Constant(ty, 1.0)
        tolerance = b.fmul(ir.Constant(ty, float(np.finfo(self.dtype.numpy).eps)),
                           b.sitofp(self.rows, ty))
        rotated = self.em.head.alloca(I1)
        b.store(ir.Constant(I1, 1), rotated)

        def pair(i: ir.Value, j: ir.Value) -> None:
            alpha, beta, gamma = self.dot(i, i), self.dot(j, j), self.dot(i, j)
            bound = b.fmul(tolerance, b.fmul(intrinsic(b, "sqrt", [alpha], self.dtype),
                                             intrinsic(b, "sqrt", [beta], self.dtype)))
            with b.if_then(b.fcmp_ordered(">", intrinsic(b, "fabs", [gamma], self.dtype), bound)):
                b.store(ir.Constant(I1, 1), rotated)
                zeta = b.fdiv(b.fsub(beta, alpha), b.fmul(ir.Constant(ty, 2.0), gamma))
                root = intrinsic(b, "sqrt", [b.fadd(one, square(b, zeta))], self.dtype)
                size = b.fadd(intrinsic(b, "fabs", [zeta], self.dtype), root)
                # |ζ| past √max: 1 + ζ² overflows, and t = 1 / 2ζ to working precision
                t = b.select(b.fcmp_ordered("<", size, ir.Constant(ty, float("inf"))),
                             b.fdiv(intrinsic(b, "copysign", [one, zeta], self.dtype), size),
                             b.fdiv(ir.Constant(ty, 0.5), zeta))
                c = b.fdiv(one, intrinsic(b, "sqrt", [b.fadd(one, square(b, t))], self.dtype))
                self.rotate(i, j, c, b.fmul(c, t))

        def sweep(_: ir.Value) -> None:
            with b.if_then(b.load(rotated)):
                b.store(ir.Constant(I1, 0), rotated)
                counted_loop(b, i64(0), self.n, lambda i: counted_loop(
                    b, b.add(i, i64(1), flags=NOWRAP), self.n, lambda j: pair(i, j)))
        counted_loop(b, i64(0), i64(MAX_SWEEPS), sweep)

    def sort(self, key: Matrices, key_out: ir.Value, descending: bool) -> None:
        """Selection sort of the columns (G's, V's) by `key` (a vector), ascending or descending."""
        b = self.em.b
        best = self.em.head.alloca(i64(0).type)
        zero = i64(0)

        def place(k: ir.Value) -> None:
            b.store(k, best)

            def compare(j: ir.Value) -> None:
                x, y = key.load(key_out, zero, j), key.load(key_out, zero, b.load(best))
                with b.if_then(b.fcmp_ordered(">" if descending else "<", x, y)):
                    b.store(j, best)
            counted_loop(b, b.add(k, i64(1), flags=NOWRAP), self.n, compare)
            j = b.load(best)
            with b.if_then(b.icmp_signed("!=", j, k)):
                x, y = key.load(key_out, zero, k), key.load(key_out, zero, j)
                key.store(key_out, zero, k, y)
                key.store(key_out, zero, j, x)
                self.rotate(k, j, ir.Constant(self.ty, 0.0), ir.Constant(self.ty, -1.0))     # a swap
        counted_loop(b, i64(0), self.n, place)


def eigh_lower(kernel: Emitter, op: Op, dests: list[ir.Value]) -> None:
    (a,), (w, v) = op.operands, op.results
    dtype = a.type.dtype
    ty = REGISTER_TYPES[dtype]

    def decompose(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
        b = em.b
        (wo, vo), ma, mw, mv = outs, Matrices(em, t, a), Matrices(em, t, w, vectors=True), Matrices(em, t, v)
        n = em.dim(a.type.shape[-1])

        def s(i: ir.Value, j: ir.Value) -> ir.Value:      # the symmetric matrix of a's lower triangle
            upper = b.icmp_signed("<", i, j)
            return ma.read(b.select(upper, j, i), b.select(upper, i, j))

        def jacobi(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
            frobenius = intrinsic(b, "sqrt", [accumulate(em, ty, i64(0), n, lambda i: accumulate(
                em, ty, i64(0), n, lambda j: square(b, s(i, j))))], dtype)
            shift = b.fmul(ir.Constant(ty, 2.0), frobenius)
            shift = b.select(b.fcmp_ordered(">", shift, ir.Constant(ty, 0.0)), shift, ir.Constant(ty, 1.0))
            counted_loop(b, i64(0), n, lambda i: counted_loop(b, i64(0), n, lambda j: mv.store(
                vo, i, j, b.select(b.icmp_signed("==", i, j), b.fadd(s(i, j), shift), s(i, j)))))
            columns = _Columns(em, mv, vo, n, n)
            columns.sweeps()

            def finish(k: ir.Value) -> None:
                # v_k = g_k / ‖g_k‖; w_k = v_kᵀ S v_k
                scale = b.fdiv(ir.Constant(ty, 1.0), intrinsic(b, "sqrt", [columns.dot(k, k)], dtype))
                counted_loop(b, i64(0), n, lambda r: mv.store(vo, r, k, b.fmul(mv.load(vo, r, k), scale)))
                quotient = accumulate(em, ty, i64(0), n, lambda i: b.fmul(mv.load(vo, i, k), accumulate(
                    em, ty, i64(0), n, lambda j: b.fmul(s(i, j), mv.load(vo, j, k)))))
                mw.store(wo, i64(0), k, quotient)
            counted_loop(b, i64(0), n, finish)
            columns.sort(mw, wo, descending=False)

        def blocked(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
            # S into v's buffer, both triangles, decomposed there by the runtime library; NaN if it failed
            counted_loop(b, i64(0), n, lambda i: counted_loop(b, i64(0), n, lambda j: mv.store(vo, i, j, s(i, j))))
            failed = b.call(symmetric.declare_eigh(em.llmod, dtype),
                            [n, runtime_matrix(em, mv, vo, b.mul(n, n)), n, runtime_matrix(em, mw, wo, n),
                             block_size(em, EIGH_BLOCK)])
            with b.if_then(b.icmp_signed("!=", failed, i64(0)), likely=False):
                fill(em, mw, wo, i64(1), n, ir.Constant(ty, float("nan")))
                fill(em, mv, vo, n, n, ir.Constant(ty, float("nan")))
        # a stack over lanes finishes with Jacobi too: the same operations on every matrix
        (jacobi if lanes else by_size(kernel, a.type.shape[-1], 0, EIGH_BLOCKED, blocked, jacobi))(em, t, outs)
        with b.if_then(holds_nan(em, ma, n, n), likely=False):
            fill(em, mw, wo, i64(1), n, ir.Constant(ty, float("nan")))
            fill(em, mv, vo, n, n, ir.Constant(ty, float("nan")))

    def decompose_lanes(em: Emitter, t: ir.Value, outs: list[ir.Value], width: int) -> None:
        # the same operations in the same order, W matrices at a time (jacobi_lanes.py)
        b, n, la = em.b, a.type.shape[-1], Lanes(em, t, a, width)
        s = {(i, j): la.read(max(i, j), min(i, j)) for i in range(n) for j in range(n)}
        zero = ir.Constant(la.type, None)
        total = zero
        for i in range(n):
            row = zero
            for j in range(n):
                row = b.fadd(row, b.fmul(s[i, j], s[i, j]))
            total = b.fadd(total, row)
        shift = b.fmul(splat_float(la.type, 2.0), intrinsic(b, "sqrt", [total], dtype))
        shift = b.select(b.fcmp_ordered(">", shift, zero), shift, splat_float(la.type, 1.0))
        g = LaneColumns(em, la.type, n, n)
        for i in range(n):
            for j in range(n):
                g.store(j, i, b.fadd(s[i, j], shift) if i == j else s[i, j])
        columns = LaneJacobi(em, g, None, n, dtype)
        columns.sweeps()
        keys = []
        for k in range(n):      # v_k = g_k / ‖g_k‖; w_k = v_kᵀ S v_k
            scale = b.fdiv(splat_float(la.type, 1.0), intrinsic(b, "sqrt", [g.dot(k, k)], dtype))
            for r in range(n):
                g.store(k, r, b.fmul(g.load(k, r), scale))
            quotient = zero
            for i in range(n):
                inner = zero
                for j in range(n):
                    inner = b.fadd(inner, b.fmul(s[i, j], g.load(k, j)))
                quotient = b.fadd(quotient, b.fmul(g.load(k, i), inner))
            keys.append(quotient)
        keys = columns.sort(keys, descending=False)
        nan = nan_lanes(em, la, n, n)
        store_lanes(em, t, w, outs[0], width, 1, lambda _, k: keys[k], nan, vectors=True)
        store_lanes(em, t, v, outs[1], width, n, lambda r, k: g.load(k, r), nan)

    n = kernel.dim(a.type.shape[-1])
    work = kernel.b.mul(kernel.dim(num_elements(a.type.shape)), kernel.b.mul(n, i64(8)))
    lanes = a.type.rank >= 3 and unrolled_order(a) is not None and not kernel.linalg_block
    over_matrices(kernel, op, dests, decompose, work, lanes=decompose_lanes if lanes else None)


lower_rules["eigh"] = eigh_lower


def splat_float(vector: ir.VectorType, x: float) -> ir.Constant:
    return ir.Constant(vector, [x] * vector.count)


def svd_lower(kernel: Emitter, op: Op, dests: list[ir.Value]) -> None:
    (a,), (u, s, vh) = op.operands, op.results
    dtype = a.type.dtype
    ty = REGISTER_TYPES[dtype]

    def decompose(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
        b = em.b
        (uo, so, vo), ma, mu = outs, Matrices(em, t, a), Matrices(em, t, u)
        ms, mv = Matrices(em, t, s, vectors=True), Matrices(em, t, vh)
        rows, n = (em.dim(d) for d in a.type.shape[-2:])
        with b.if_else(b.icmp_signed("<", rows, n), likely=False) as (wide, tall):
            with wide:
                nan = ir.Constant(ty, float("nan"))
                fill(em, mu, uo, rows, n, nan)
                fill(em, ms, so, i64(1), n, nan)
                fill(em, mv, vo, n, n, nan)
            with tall:
                counted_loop(b, i64(0), rows, lambda i: counted_loop(
                    b, i64(0), n, lambda j: mu.store(uo, i, j, ma.read(i, j))))

                def jacobi(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
                    counted_loop(b, i64(0), n, lambda i: counted_loop(b, i64(0), n, lambda j: mv.store(
                        vo, i, j, b.uitofp(b.icmp_signed("==", i, j), ty))))
                    columns = _Columns(em, mu, uo, rows, n, mv, vo)
                    columns.sweeps()

                    def finish(k: ir.Value) -> None:
                        # s_k = ‖g_k‖, u_k = g_k / s_k
                        norm = intrinsic(b, "sqrt", [columns.dot(k, k)], dtype)
                        ms.store(so, i64(0), k, norm)
                        scale = b.fdiv(ir.Constant(ty, 1.0), norm)
                        counted_loop(b, i64(0), rows, lambda r: mu.store(uo, r, k, b.fmul(mu.load(uo, r, k), scale)))
                    counted_loop(b, i64(0), n, finish)
                    columns.sort(ms, so, descending=True)
                    counted_loop(b, i64(0), n, lambda i: counted_loop(b, b.add(i, i64(1), flags=NOWRAP), n, lambda j: (
                        transpose_pair(mv, vo, i, j))))

                def blocked(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
                    # decomposed in u's buffer (holding a) by the runtime library; NaN if it failed
                    failed = b.call(singular.declare_svd(em.llmod, dtype),
                                    [rows, n, runtime_matrix(em, mu, uo, b.mul(rows, n)), n, runtime_matrix(em, ms, so, n),
                                     runtime_matrix(em, mv, vo, b.mul(n, n)), n, block_size(em, SVD_BLOCK)])
                    with b.if_then(b.icmp_signed("!=", failed, i64(0)), likely=False):
                        nan = ir.Constant(ty, float("nan"))
                        fill(em, mu, uo, rows, n, nan)
                        fill(em, ms, so, i64(1), n, nan)
                        fill(em, mv, vo, n, n, nan)
                # a stack over lanes finishes with Jacobi too: the same operations on every matrix
                (jacobi if static else by_size(kernel, a.type.shape[-1], 0, SVD_BLOCKED, blocked, jacobi))(em, t, outs)
                with b.if_then(holds_nan(em, ma, rows, n), likely=False):
                    nan = ir.Constant(ty, float("nan"))
                    fill(em, mu, uo, rows, n, nan)
                    fill(em, ms, so, i64(1), n, nan)
                    fill(em, mv, vo, n, n, nan)

    def decompose_lanes(em: Emitter, t: ir.Value, outs: list[ir.Value], width: int) -> None:
        # the same operations in the same order, W matrices at a time (jacobi_lanes.py)
        b, (rows, n), la = em.b, a.type.shape[-2:], Lanes(em, t, a, width)
        g, v = LaneColumns(em, la.type, rows, n), LaneColumns(em, la.type, n, n)
        for i in range(rows):
            for j in range(n):
                g.store(j, i, la.read(i, j))
        for i in range(n):
            for j in range(n):
                v.store(j, i, splat_float(la.type, float(i == j)))
        columns = LaneJacobi(em, g, v, n, dtype)
        columns.sweeps()
        keys = []
        for k in range(n):      # s_k = ‖g_k‖, u_k = g_k / s_k
            keys.append(intrinsic(b, "sqrt", [g.dot(k, k)], dtype))
            scale = b.fdiv(splat_float(la.type, 1.0), keys[-1])
            for r in range(rows):
                g.store(k, r, b.fmul(g.load(k, r), scale))
        keys = columns.sort(keys, descending=True)
        nan = nan_lanes(em, la, rows, n)
        store_lanes(em, t, u, outs[0], width, rows, lambda r, k: g.load(k, r), nan)
        store_lanes(em, t, s, outs[1], width, 1, lambda _, k: keys[k], nan, vectors=True)
        store_lanes(em, t, vh, outs[2], width, n, lambda i, j: v.load(i, j), nan)

    rows, n = (kernel.dim(d) for d in a.type.shape[-2:])
    work = kernel.b.mul(kernel.dim(num_elements(a.type.shape)), kernel.b.mul(n, i64(8)))
    static = (a.type.rank >= 3 and all(isinstance(d, int) and d <= UNROLLED_ORDER for d in a.type.shape[-2:])
              and a.type.shape[-2] >= a.type.shape[-1] and not kernel.linalg_block)
    over_matrices(kernel, op, dests, decompose, work, lanes=decompose_lanes if static else None)


def transpose_pair(m: Matrices, out: ir.Value, i: ir.Value, j: ir.Value) -> None:
    x, y = m.load(out, i, j), m.load(out, j, i)
    m.store(out, i, j, y)
    m.store(out, j, i, x)


lower_rules["svd"] = svd_lower
