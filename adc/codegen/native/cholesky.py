"""The runtime library's blocked Cholesky factorization (LAPACK's dpotrf2, recursive, lower).

    i64 adc_rt_potrf_<dtype>(i64 n, T* a, i64 lda, i64 nb)
        a[n, n] row-major (row stride lda): its lower triangle is read and overwritten by L with
        L Lᵀ = a; the strictly upper triangle is scratch. Returns 0, or j + 1 when the pivot of
        column j is not > 0 (or NaN): the factorization stops there.

    potrf(A):  n <= nb: unblocked (Cholesky-Crout, row by row)
               else     L11 = potrf(A11); L21 = A21 L11⁻ᵀ (trsm on A21ᵀ); A22 -= L21 L21ᵀ (syrk);
                        L22 = potrf(A22)
    syrk(C, P): C -= P Pᵀ on C's lower triangle, halving C until its diagonal blocks have at most nb
                rows, which the gemm updates whole (their strictly upper triangles are scratch)

Each level's L21 and C21 updates are products of n/2-sized blocks on the gemm; the n/nb blocks
on the diagonal are the only unblocked arithmetic (n nb² / 6 multiply-adds).
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.native import gemm
from adc.codegen.native import triangular
from adc.codegen.native.blocked import View, clamp_block, declare, exported, half, internal, update
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.loops import I64, for_range, i64
from adc.ir.types import DType


def potrf_type(dtype: DType) -> ir.FunctionType:
    return ir.FunctionType(I64, [I64, gemm.ELEMENT_TYPES[dtype].as_pointer(), I64, I64])


def declare_potrf(module: ir.Module, dtype: DType) -> ir.Function:
    """`adc_rt_potrf_<dtype>` declared in a kernel module (lowering's cholesky)."""
    return declare(module, "potrf", dtype, potrf_type(dtype))


def define_potrf(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """Define `adc_rt_potrf_<dtype>` (the module docstring) in the runtime library."""
    r = exported(module, blk, "potrf", potrf_type(blk.dtype))
    n, a, lda, nb = r.args
    r.b.ret(r.b.call(_potrf_function(module, blk), [n, a, lda, clamp_block(r.b, nb)]))
    return r.fn


def _potrf_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    fn, r = internal(module, blk, "potrf", [I64, blk.elem.as_pointer(), I64, I64], I64)
    if r is None:
        return fn
    n, a, lda, nb = r.args
    b = r.b
    with b.if_then(b.icmp_signed("<=", n, nb)):
        b.ret(b.call(_unblocked_function(module, blk), [n, a, lda]))
    m = View(a, lda, i64(1))
    n1 = half(b, n)
    n2 = b.sub(n, n1)
    failed = b.call(fn, [n1, a, lda, nb])
    r.ret_if(b.icmp_signed("!=", failed, i64(0)), failed)
    l21, a22 = m.block(b, n1, i64(0)), m.block(b, n1, n1)
    triangular.solve(r, n1, n2, m, l21.T, lower=True, unit=False, nb=nb)       # L11 L21ᵀ = A21ᵀ
    b.call(_syrk_function(module, blk), [n2, n1, a22.ptr, l21.ptr, lda, nb])
    failed = b.call(fn, [n2, a22.ptr, lda, nb])
    b.ret(b.select(b.icmp_signed("==", failed, i64(0)), failed, b.add(failed, n1)))
    return fn


def _syrk_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(n, k, c, p, ld, nb): c[n, n] -= p[n, k] p[n, k]ᵀ on the lower triangle, c and p row-major with
    row stride ld."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "syrk", [I64, I64, ptr, ptr, I64, I64])
    if r is None:
        return fn
    n, k, c, p, ld, nb = r.args
    b = r.b
    cv, pv = View(c, ld, i64(1)), View(p, ld, i64(1))
    with b.if_then(b.icmp_signed("<=", n, nb)):
        update(r, n, n, k, pv, pv.T, cv)
        b.ret_void()
    n1 = half(b, n)
    n2 = b.sub(n, n1)
    c22, p2 = cv.block(b, n1, n1), pv.block(b, n1, i64(0))
    b.call(fn, [n1, k, c, p, ld, nb])
    update(r, n2, n1, k, p2, pv.T, cv.block(b, n1, i64(0)))
    b.call(fn, [n2, k, c22.ptr, p2.ptr, ld, nb])
    b.ret_void()
    return fn


def _unblocked_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(n, a, lda) -> info: Cholesky-Crout row by row, l_ij = (a_ij - Σ_p<j l_ip l_jp) / l_jj and
    l_ii = √(a_ii - Σ_p<i l_ip²), the sums in order."""
    fn, r = internal(module, blk, "potrf_unblocked", [I64, blk.elem.as_pointer(), I64], I64)
    if r is None:
        return fn
    n, a, lda = r.args
    b, m = r.b, View(a, lda, i64(1))
    total = r.entry.alloca(r.elem)
    with for_range(b, i64(0), n) as i:
        with for_range(b, i64(0), b.add(i, i64(1))) as j:
            b.store(r.load(m, i, j), total)
            with for_range(b, i64(0), j) as p:
                b.store(b.fsub(b.load(total), b.fmul(r.load(m, i, p), r.load(m, j, p))), total)
            s = b.load(total)
            with b.if_else(b.icmp_signed("<", j, i)) as (below, diagonal):
                with below:
                    r.store(b.fdiv(s, r.load(m, j, j)), m, i, j)
                with diagonal:
                    r.ret_if(b.not_(b.fcmp_ordered(">", s, r.constant(0.0))), b.add(i, i64(1)))
                    r.store(intrinsic(b, "sqrt", [s], blk.dtype), m, i, i)
    b.ret(i64(0))
    return fn
