"""The runtime library's blocked LU factorization with partial pivoting (LAPACK's dgetrf2, recursive).

    void adc_rt_getrf_<dtype>(i64 n, T* a, i64 lda, i64* piv, i64 nb)
        a[n, n] row-major (row stride lda), overwritten by L (unit diagonal, below) and U (on and
        above) with P a = L U; piv[i] (from 0): row i was interchanged with row piv[i], in order

    getrf(A[m, n]):  n <= nb: unblocked (getf2: pivot, interchange, scale, rank-1 update, column by column)
                     else     getrf(A[:, :n1]); the left half's interchanges applied to A[:, n1:];
                              A12 = L11⁻¹ A12 (trsm, unit lower); A22 -= A21 A12 (the gemm);
                              getrf(A22); its interchanges applied to A21

A column's pivot is the first row of largest |a[i, j]| on or below the diagonal (idamax: a NaN is
never larger, unless it comes first); an exactly zero column is no pivot and stays (U gets a zero
on its diagonal, and what divides by it later gives inf or NaN), as in LAPACK and the unblocked
rule (lowering/rules/lu.py).
"""
from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from adc.codegen.native import gemm, triangular
from adc.codegen.native.blocked import Routine, View, clamp_block, copy, declare, exported, half, internal, update
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.loops import I64, for_range, i64
from adc.ir.types import DType


def getrf_type(dtype: DType) -> ir.FunctionType:
    return ir.FunctionType(ir.VoidType(), [I64, gemm.ELEMENT_TYPES[dtype].as_pointer(), I64, I64.as_pointer(), I64])


def declare_getrf(module: ir.Module, dtype: DType) -> ir.Function:
    """`adc_rt_getrf_<dtype>` declared in a kernel module (lowering's lu_factor)."""
    return declare(module, "getrf", dtype, getrf_type(dtype))


def define_getrf(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """Define `adc_rt_getrf_<dtype>` (the module docstring) in the runtime library."""
    r = exported(module, blk, "getrf", getrf_type(blk.dtype))
    n, a, lda, piv, nb = r.args
    b = r.b
    nb = clamp_block(b, nb)
    # the panels are factored in a copy of their own (none if there is no memory for it: in place)
    block, workspace = r.allocate(b.mul(n, nb))
    b.call(_getrf_function(module, blk), [n, n, a, lda, piv, nb, workspace])
    r.release(block)
    b.ret_void()
    return r.fn


def _getrf_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(m, n, a, lda, piv, nb, workspace): the recursion on a[m, n], m >= n, pivots counted from its
    first row; the workspace holds m x nb elements, or is null."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "getrf", [I64, I64, ptr, I64, I64.as_pointer(), I64, ptr])
    if r is None:
        return fn
    m, n, a, lda, piv, nb, workspace = r.args
    b = r.b
    r.ret_if(b.icmp_signed("<=", n, i64(0)))
    with b.if_then(b.icmp_signed("<=", n, nb)):
        b.call(_panel_function(module, blk), [m, n, a, lda, piv, workspace])
        b.ret_void()
    whole = View(a, lda, i64(1))
    n1 = half(b, n)
    n2 = b.sub(n, n1)
    b.call(fn, [m, n1, a, lda, piv, nb, workspace])
    right, lower_left, a22 = whole.block(b, i64(0), n1), whole.block(b, n1, i64(0)), whole.block(b, n1, n1)
    _interchange(r, right, i64(0), n1, n2, piv)
    triangular.solve(r, n1, n2, whole, right, lower=True, unit=True, nb=nb)
    update(r, b.sub(m, n1), n2, n1, lower_left, right, a22)
    later = b.gep(piv, [n1])
    b.call(fn, [b.sub(m, n1), n2, a22.ptr, lda, later, nb, workspace])
    with for_range(b, i64(0), n2) as i:
        b.store(b.add(b.load(b.gep(later, [i])), n1), b.gep(later, [i]))
    _interchange(r, whole, n1, n, n1, piv)
    b.ret_void()
    return fn


def _interchange(r: Routine, v: View, first: ir.Value, last: ir.Value, columns: ir.Value, piv: ir.Value) -> None:
    """LAPACK's laswp: rows i and piv[i] of v's first `columns` columns interchanged, for i = first,
    ..., last - 1 in order (v row-major)."""
    b = r.b
    with for_range(b, first, last) as i:
        p = b.load(b.gep(piv, [i]))
        with b.if_then(b.icmp_signed("!=", p, i)):
            _swap_rows(r, v, i, p, columns)


def _swap_rows(r: Routine, v: View, i: ir.Value, p: ir.Value, columns: ir.Value) -> None:
    def chunk(j: ir.Value, masks: list[ir.Value | None]) -> None:
        x_ptr, y_ptr = r.at(v, i, j), r.at(v, p, j)
        x, y = r.vload(x_ptr, masks[0]), r.vload(y_ptr, masks[0])
        r.vstore(y, x_ptr, masks[0])
        r.vstore(x, y_ptr, masks[0])
    r.chunks(columns, 1, chunk)


def _scale_column(r: Routine, v: View, j: ir.Value, first: ir.Value, last: ir.Value) -> None:
    """Rows [first, last) of column j divided by the pivot v[j, j]: times its reciprocal unless that
    overflows (LAPACK's dgetf2: |pivot| below the smallest normal number divides)."""
    b = r.b
    pivot = r.load(v, j, j)
    tiny = r.constant(float(np.finfo(r.blk.dtype.numpy).tiny))
    with b.if_else(b.fcmp_ordered(">=", intrinsic(b, "fabs", [pivot], r.blk.dtype), tiny)) as (normal, small):
        with normal:
            inverse = b.fdiv(r.constant(1.0), pivot)
            with for_range(b, first, last) as i:
                r.store(b.fmul(r.load(v, i, j), inverse), v, i, j)
        with small:
            with for_range(b, first, last) as i:
                r.store(b.fdiv(r.load(v, i, j), pivot), v, i, j)


def _panel_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(m, n, a, lda, piv, workspace): getf2 on a[m, n], in a copy of it in the workspace (row stride n)
    when there is one. A column of a itself, walked at a large power-of-two stride (lda = 1024), sits
    in a few cache sets: every pass over it missed the L2 cache (1024 x 8 panels: 0.2 ms each)."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "getrf_panel", [I64, I64, ptr, I64, I64.as_pointer(), ptr])
    if r is None:
        return fn
    m, n, a, lda, piv, workspace = r.args
    b = r.b
    unblocked = _unblocked_function(module, blk)
    with b.if_else(b.icmp_unsigned("==", b.ptrtoint(workspace, I64), i64(0))) as (in_place, copied):
        with in_place:
            b.call(unblocked, [m, n, a, lda, piv])
        with copied:
            panel, contiguous = View(a, lda, i64(1)), View(workspace, n, i64(1))
            copy(r, m, n, panel, contiguous)
            b.call(unblocked, [m, n, workspace, n, piv])
            copy(r, m, n, contiguous, panel)
    b.ret_void()
    return fn


def _unblocked_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(m, n, a, lda, piv): getf2 on a[m, n], n <= MAX_BLOCK, row-major; the rank-1 updates along rows."""
    fn, r = internal(module, blk, "getrf_unblocked", [I64, I64, blk.elem.as_pointer(), I64, I64.as_pointer()])
    if r is None:
        return fn
    m, n, a, lda, piv = r.args
    b, v = r.b, View(a, lda, i64(1))
    best, row = r.entry.alloca(r.elem), r.entry.alloca(I64)
    with for_range(b, i64(0), n) as j:
        fabs = lambda x: intrinsic(b, "fabs", [x], blk.dtype)                      # noqa: E731
        b.store(fabs(r.load(v, j, j)), best)
        b.store(j, row)
        following = b.add(j, i64(1))
        with for_range(b, following, m) as i:
            x = fabs(r.load(v, i, j))
            larger = b.fcmp_ordered(">", x, b.load(best))
            b.store(b.select(larger, x, b.load(best)), best)
            b.store(b.select(larger, i, b.load(row)), row)
        p = b.load(row)
        b.store(p, b.gep(piv, [j]))
        with b.if_then(b.fcmp_unordered("!=", r.load(v, p, j), r.constant(0.0))):
            with b.if_then(b.icmp_signed("!=", p, j)):
                _swap_rows(r, v, j, p, n)
            _scale_column(r, v, j, following, m)
        with for_range(b, following, m) as i:
            # row i right of column j -= l_ij u_j: a few elements a row, in scalar registers (a masked
            # vector store there stalls the next column's loads of the row, which it cannot forward)
            factor = b.fneg(r.load(v, i, j))
            with for_range(b, following, n) as c:
                r.store(r.scalar_fma(factor, r.load(v, j, c), r.load(v, i, c)), v, i, c)
    b.ret_void()
    return fn
