"""Buffer rule of qr: Householder QR of each stacked matrix, in place in q's buffer, plain scalar
loops (the nest and element access of matrices.py; spectral.py holds eigh and svd).

Column k's reflector H_k = I - 2 v vᵀ (v of unit norm, LAPACK's sign: r[k,k] = -sign(a[k,k]) ‖x‖,
so no cancellation) is stored over the column below the diagonal and applied to the columns
right of it; row k of r is then final. q = H_0 ⋯ H_{N-1} [I; 0] is formed in place, last
reflector first (LAPACK's dorg2r). A wide matrix (M < N, possible under symbolic sizes) or one
holding NaN gives NaN.

    %q, %r = qr %a : f64[M,N], f64[N,N]   ──▶   q = a; for k: v = house(q[k:, k]); q[k:, k+1:] -= 2 v (vᵀ q[k:, k+1:])
                                                 r[k, k:] = (alpha, q[k, k+1:]); then q = H_0 ⋯ H_{N-1} [I; 0]
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import llvmlite.ir as ir

from adc.codegen.native import householder as householder_routines
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.element_types import REGISTER_TYPES
from adc.codegen.lowering.loops import NOWRAP, counted_loop, i64
from adc.codegen.lowering.rules.matrices import (QR_BLOCK, QR_BLOCKED, Matrices, block_size, by_size, fill, holds_nan,
                                                 over_matrices, runtime_matrix)
from adc.ir.core import Op
from adc.ir.types import num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def accumulate(em: Emitter, ty: ir.Type, start: ir.Value, end: ir.Value,
               term: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """Σ term(k) for k in [start, end), in order."""
    acc = em.head.alloca(ty)
    em.b.store(ir.Constant(ty, 0.0), acc)
    counted_loop(em.b, start, end, lambda k: em.b.store(em.b.fadd(em.b.load(acc), term(k)), acc))
    return em.b.load(acc)


def reflect(em: Emitter, m: Matrices, out: ir.Value, rows: ir.Value, k: ir.Value, j: ir.Value) -> None:
    """Column j of `out` over rows [k, rows) times I - 2 v vᵀ, v stored in column k over the same rows."""
    b = em.b
    ty = REGISTER_TYPES[m.dtype]
    s = accumulate(em, ty, k, rows, lambda i: b.fmul(m.load(out, i, k), m.load(out, i, j)))
    twice = b.fmul(ir.Constant(ty, 2.0), s)
    counted_loop(b, k, rows, lambda i: m.store(out, i, j, b.fsub(m.load(out, i, j), b.fmul(twice, m.load(out, i, k)))))


def qr_lower(kernel: Emitter, op: Op, dests: list[ir.Value]) -> None:
    (a,), (q, r) = op.operands, op.results
    dtype = a.type.dtype
    ty = REGISTER_TYPES[dtype]
    zero, one, two = (ir.Constant(ty, x) for x in (0.0, 1.0, 2.0))

    def factor(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
        b = em.b
        (qo, ro), ma, mq, mr = outs, Matrices(em, t, a), Matrices(em, t, q), Matrices(em, t, r)
        rows, n = (em.dim(d) for d in a.type.shape[-2:])
        with b.if_else(b.icmp_signed("<", rows, n), likely=False) as (wide, tall):
            with wide:
                nan = ir.Constant(ty, float("nan"))
                fill(em, mq, qo, rows, n, nan)
                fill(em, mr, ro, n, n, nan)
            with tall:
                counted_loop(b, i64(0), rows, lambda i: counted_loop(
                    b, i64(0), n, lambda j: mq.store(qo, i, j, ma.read(i, j))))
                def unblocked(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
                    counted_loop(b, i64(0), n, lambda k: householder(em, mq, qo, mr, ro, rows, n, k))
                    form_q(em, mq, qo, rows, n)

                def blocked(em: Emitter, t: ir.Value, outs: list[ir.Value]) -> None:
                    # q (holding a) factored and formed in place by the runtime library, r filled there
                    b.call(householder_routines.declare_qr(em.llmod, dtype),
                           [rows, n, runtime_matrix(em, mq, qo, b.mul(rows, n, flags=NOWRAP)), n,
                            runtime_matrix(em, mr, ro, b.mul(n, n, flags=NOWRAP)), n, block_size(em, QR_BLOCK)])
                by_size(kernel, a.type.shape[-1], 0, QR_BLOCKED, blocked, unblocked)(em, t, outs)
                with b.if_then(holds_nan(em, ma, rows, n), likely=False):
                    fill(em, mq, qo, rows, n, ir.Constant(ty, float("nan")))
                    fill(em, mr, ro, n, n, ir.Constant(ty, float("nan")))

    def householder(em, mq, qo, mr, ro, rows, n, k) -> None:
        # x = q[k:, k] scaled by its largest magnitude (no overflow in Σ x²); v = x - alpha e_0, ‖v‖² = 2 ‖x‖ |v_0|
        b = em.b
        fabs = lambda x: intrinsic(b, "fabs", [x], dtype)                      # noqa: E731
        scale = em.head.alloca(ty)
        b.store(zero, scale)
        counted_loop(b, k, rows, lambda i: b.store(
            intrinsic(b, "maxnum", [b.load(scale), fabs(mq.load(qo, i, k))], dtype), scale))
        big = b.load(scale)
        unit = b.select(b.fcmp_ordered(">", big, zero), b.fdiv(one, big), zero)
        below = b.add(k, i64(1), flags=NOWRAP)
        tail = accumulate(em, ty, below, rows, lambda i: square(b, b.fmul(mq.load(qo, i, k), unit)))
        x0 = mq.load(qo, k, k)
        norm = b.fmul(big, intrinsic(b, "sqrt", [b.fadd(square(b, b.fmul(x0, unit)), tail)], dtype))
        # nothing below the diagonal: H = I and r[k,k] = x0, as LAPACK's dlarfg (its sign kept)
        reflects = b.fcmp_unordered("!=", tail, zero)
        alpha = b.select(reflects, b.fneg(intrinsic(b, "copysign", [norm, x0], dtype)), x0)
        v0 = b.fsub(x0, alpha)
        length = b.fmul(intrinsic(b, "sqrt", [b.fmul(two, norm)], dtype), intrinsic(b, "sqrt", [fabs(v0)], dtype))
        inverse = b.select(reflects, b.fdiv(one, length), zero)
        mq.store(qo, k, k, b.fmul(v0, inverse))
        counted_loop(b, below, rows, lambda i: mq.store(qo, i, k, b.fmul(mq.load(qo, i, k), inverse)))
        counted_loop(b, below, n, lambda j: reflect(em, mq, qo, rows, k, j))
        counted_loop(b, i64(0), k, lambda j: mr.store(ro, k, j, zero))
        mr.store(ro, k, k, alpha)
        counted_loop(b, below, n, lambda j: mr.store(ro, k, j, mq.load(qo, k, j)))

    def form_q(em, mq, qo, rows, n) -> None:
        # q = H_0 ⋯ H_{N-1} [I; 0], last reflector first: H_k touches rows k.. only, and column k of
        # the product is H_k e_k = e_k - 2 v v_0
        b = em.b
        counted_loop(b, i64(0), n, lambda j: counted_loop(b, i64(0), j, lambda i: mq.store(qo, i, j, zero)))

        def step(s: ir.Value) -> None:
            k = b.sub(b.sub(n, i64(1)), s)
            counted_loop(b, b.add(k, i64(1)), n, lambda j: reflect(em, mq, qo, rows, k, j))
            v0 = mq.load(qo, k, k)
            scale = b.fmul(ir.Constant(ty, -2.0), v0)
            counted_loop(b, b.add(k, i64(1)), rows, lambda i: mq.store(qo, i, k, b.fmul(scale, mq.load(qo, i, k))))
            mq.store(qo, k, k, b.fsub(one, b.fmul(two, square(b, v0))))
        counted_loop(b, i64(0), n, step)

    rows, n = (kernel.dim(d) for d in a.type.shape[-2:])
    work = kernel.b.mul(kernel.dim(num_elements(a.type.shape[:-2])), kernel.b.mul(rows, kernel.b.mul(n, n)))
    over_matrices(kernel, op, dests, factor, work)


def square(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fmul(x, x)


lower_rules["qr"] = qr_lower
