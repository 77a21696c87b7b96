"""The runtime library's blocked reduction of a symmetric matrix to tridiagonal form (LAPACK's dsytrd
with dlatrd, lower), the first step of its eigensolver (symmetric.py).

    reduce(r, n, a, lda, d, e, nb, vp, wp)
        a[n, n] row-major, both triangles holding the symmetric matrix, becomes Q T Qᵀ: T's diagonal
        in d[n], its subdiagonal in e[n-1]; Q = H_0 ⋯ H_{n-2}, H_c = I - 2 u_c u_cᵀ (unit u_c, or 0:
        householder.householder_vector's reflectors) with u_c left in a[c+1:, c] and zeros above
        the subdiagonal, so each panel of a's columns is a V for householder.block_reflector.

A panel of nb columns is reduced one column at a time against the matrix as it was before the
panel: column c first gets the panel's pending update (a -= V Wᵀ + W Vᵀ, V the panel's reflectors,
W their w's), then u_c from it, then w_c = p - (u_cᵀ p) u_c with p = 2 (A u_c - V Wᵀ u_c - W Vᵀ u_c):
A u_c is the one pass over the trailing matrix (a matrix-vector product, its rows split across
threads), the rest small. After the panel the trailing matrix gets the update by two gemms. V and
W are kept in row-major workspaces vp and wp (n x nb each), contiguous for the gemms.
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.native import gemm
from adc.codegen.native.blocked import MAX_BLOCK, Routine, View, internal, update
from adc.codegen.native.householder import householder_vector
from adc.codegen.native.vectors import dot, matrix_vector
from adc.codegen.lowering.loops import I64, for_range, i64

def reduce(r: Routine, n: ir.Value, a: ir.Value, lda: ir.Value, d: ir.Value, e: ir.Value, nb: ir.Value,
           vp: ir.Value, wp: ir.Value, u: ir.Value, y: ir.Value) -> None:
    """The reduction (the module docstring), from a routine of the runtime library; u and y are
    scratch vectors of n elements."""
    r.b.call(_reduce_function(r.module, r.blk), [n, a, lda, d, e, nb, vp, wp, u, y])


def _reduce_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "sytrd", [I64, ptr, I64, ptr, ptr, I64, ptr, ptr, ptr, ptr])
    if r is None:
        return fn
    n, a, lda, d, e, nb, vp, wp, u, y = r.args
    b, whole = r.b, View(a, lda, i64(1))
    column = _column_function(module, blk)
    v, w = View(vp, nb, i64(1)), View(wp, nb, i64(1))       # row r - j of the panel's V and W
    with for_range(b, i64(0), n, nb) as j:
        width = r.min(nb, b.sub(n, j))
        rows = b.sub(n, j)
        r.fill(v, rows, width, 0.0)
        r.fill(w, rows, width, 0.0)
        with for_range(b, i64(0), width) as i:
            b.call(column, [rows, whole.block(b, j, j).ptr, lda, b.gep(d, [j]), b.gep(e, [j]), i, nb, vp, wp, u, y])
        with for_range(b, i64(0), rows) as i:      # the reflectors into a (zeros above them)
            with for_range(b, i64(0), width) as q:
                r.store(r.load(v, i, q), whole, b.add(j, i), b.add(j, q))
        after = b.add(j, width)
        with b.if_then(b.icmp_signed("<", after, n)):
            trailing, left = whole.block(b, after, after), b.sub(n, after)
            vt, wt = v.block(b, width, i64(0)), w.block(b, width, i64(0))
            update(r, left, left, width, vt, wt.T, trailing)
            update(r, left, left, width, wt, vt.T, trailing)
    b.ret_void()
    return fn


def _column_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(rows, a, lda, d, e, i, nb, vp, wp, u, y): column i of the panel at a's element (j, j), the
    trailing matrix `rows` rows from there: d[i] and e[i] (d, e offset by j), u_i and w_i into vp's and
    wp's column i (rows counted from j). u and y: scratch vectors."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "sytrd_column", [I64, ptr, I64, ptr, ptr, I64, I64, ptr, ptr, ptr, ptr])
    if r is None:
        return fn
    rows, a, lda, d, e, i, nb, vp, wp, u, y = r.args
    b = r.b
    m, v, w = View(a, lda, i64(1)), View(vp, nb, i64(1)), View(wp, nb, i64(1))
    total = r.entry.alloca(r.elem)
    with for_range(b, i, rows) as row:          # the panel's pending update of column i
        b.store(r.load(m, row, i), total)
        with for_range(b, i64(0), i) as q:
            pending = b.fadd(b.fmul(r.load(v, row, q), r.load(w, i, q)), b.fmul(r.load(w, row, q), r.load(v, i, q)))
            b.store(b.fsub(b.load(total), pending), total)
        r.store(b.load(total), m, row, i)
    b.store(r.load(m, i, i), b.gep(d, [i]))
    below = b.add(i, i64(1))
    r.ret_if(b.icmp_signed(">=", below, rows))
    with for_range(b, below, rows) as row:
        r.store(r.load(m, row, i), v, row, i)
    b.store(householder_vector(r, v, below, rows, i), b.gep(e, [i]))
    length = b.sub(rows, below)
    with for_range(b, i64(0), length) as k:
        b.store(r.load(v, b.add(below, k), i), b.gep(u, [k]))
    matrix_vector(r, length, length, m.block(b, below, below), u, y)      # y = A u
    t1, t2 = r.tile(MAX_BLOCK), r.tile(MAX_BLOCK)
    with for_range(b, i64(0), i) as q:           # t1 = Wᵀ u, t2 = Vᵀ u over the rows below
        for tile, panel in ((t1, w), (t2, v)):
            b.store(r.constant(0.0), total)
            with for_range(b, i64(0), length) as k:
                b.store(r.scalar_fma(r.load(panel, b.add(below, k), q), b.load(b.gep(u, [k])), b.load(total)), total)
            b.store(b.load(total), b.gep(tile, [q]))
    with for_range(b, i64(0), length) as k:      # p = 2 (y - V t1 - W t2)
        row = b.add(below, k)
        b.store(b.load(b.gep(y, [k])), total)
        with for_range(b, i64(0), i) as q:
            pending = b.fadd(b.fmul(r.load(v, row, q), b.load(b.gep(t1, [q]))),
                             b.fmul(r.load(w, row, q), b.load(b.gep(t2, [q]))))
            b.store(b.fsub(b.load(total), pending), total)
        b.store(b.fmul(r.constant(2.0), b.load(total)), b.gep(y, [k]))
    projection = dot(r, length, u, y)            # w = p - (uᵀ p) u
    with for_range(b, i64(0), length) as k:
        value = r.scalar_fma(b.fneg(projection), b.load(b.gep(u, [k])), b.load(b.gep(y, [k])))
        r.store(value, w, b.add(below, k), i)
    b.ret_void()
    return fn
