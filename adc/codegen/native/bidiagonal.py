"""The runtime library's blocked reduction of a tall matrix to upper bidiagonal form (LAPACK's dgebrd
with dlabrd), the first step of its singular value decomposition (singular.py).

    reduce(r, m, n, a, lda, d, e, nb, xp, yp, vectors)
        a[m, n] (m >= n, row-major) becomes Q B Pᵀ: B's diagonal in d[n], its superdiagonal in
        e[n-1]; Q = H_0 ⋯ H_{n-1} with H_k's unit vector in a[k:, k] (householder_vector's
        reflectors, left of the diagonal's elements), P = G_0 ⋯ G_{n-2} with G_k's unit vector in
        a[k, k+1:] (right of it)

A panel of nb columns is reduced against the matrix as it was before the panel, which is
A - L Yᵀ - X U for the panel's left reflectors L (columns), right reflectors U (rows) and the
matrices Y (n x nb) and X (m x nb) of their pending updates: column k gets its update, then its
left reflector u (d_k); Y's column k = 2 (A - L Yᵀ - X U)ᵀ u over the columns right of k; row k
gets its update, then its right reflector v (e_k); X's column k = 2 (A - L Yᵀ - X U) v over the
rows below. (A - ...)ᵀ u and (A - ...) v are the two passes over the trailing matrix (split
across threads, vectors.py); after the panel the trailing matrix gets L Yᵀ + X U by two gemms.
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.native import gemm
from adc.codegen.native.blocked import MAX_BLOCK, Routine, View, internal, update
from adc.codegen.native.householder import householder_vector
from adc.codegen.native.vectors import matrix_vector, transposed_matrix_vector
from adc.codegen.lowering.loops import I64, for_range, i64


def reduce(r: Routine, m: ir.Value, n: ir.Value, a: ir.Value, lda: ir.Value, d: ir.Value, e: ir.Value,
           nb: ir.Value, xp: ir.Value, yp: ir.Value, vectors: ir.Value) -> None:
    """The reduction (the module docstring); xp and yp hold m x nb and n x nb elements, vectors 2 m + 2 n."""
    r.b.call(_reduce_function(r.module, r.blk), [m, n, a, lda, d, e, nb, xp, yp, vectors])


def _reduce_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "gebrd", [I64, I64, ptr, I64, ptr, ptr, I64, ptr, ptr, ptr])
    if r is None:
        return fn
    m, n, a, lda, d, e, nb, xp, yp, vectors = r.args
    b, whole = r.b, View(a, lda, i64(1))
    step = _step_function(module, blk)
    x, y = View(xp, nb, i64(1)), View(yp, nb, i64(1))       # rows from the panel's first
    with for_range(b, i64(0), n, nb) as j:
        width = r.min(nb, b.sub(n, j))
        rows, columns = b.sub(m, j), b.sub(n, j)
        r.fill(x, rows, width, 0.0)
        r.fill(y, columns, width, 0.0)
        with for_range(b, i64(0), width) as i:
            b.call(step, [rows, columns, whole.block(b, j, j).ptr, lda, b.gep(d, [j]), b.gep(e, [j]), i, nb, xp, yp,
                          vectors])
        after = b.add(j, width)
        with b.if_then(b.icmp_signed("<", after, n)):
            trailing, below, right = whole.block(b, after, after), b.sub(m, after), b.sub(n, after)
            update(r, below, right, width, whole.block(b, after, j), y.block(b, width, i64(0)).T, trailing)
            update(r, below, right, width, x.block(b, width, i64(0)), whole.block(b, j, after), trailing)
    b.ret_void()
    return fn


def _step_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(rows, columns, a, lda, d, e, i, nb, xp, yp, vectors): column and row i of the panel at a's element
    (j, j), `rows` x `columns` from there; d, e offset by j; X and Y rows counted from j."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "gebrd_step", [I64, I64, ptr, I64, ptr, ptr, I64, I64, ptr, ptr, ptr])
    if r is None:
        return fn
    rows, columns, a, lda, d, e, i, nb, xp, yp, vectors = r.args
    b = r.b
    m, x, y = View(a, lda, i64(1)), View(xp, nb, i64(1)), View(yp, nb, i64(1))
    left, right = vectors, b.gep(vectors, [rows])                            # u (from row i), v (from column i+1)
    product = b.gep(right, [columns])                                        # Aᵀ u or A v
    total = r.entry.alloca(r.elem)
    after = b.add(i, i64(1))

    def pending(row: ir.Value, column: ir.Value, count: ir.Value, rows_of_l: bool) -> ir.Value:
        """(L Yᵀ + X U)[row, column] over the panel's first `count` reflectors (+1 of L when rows_of_l)."""
        b.store(r.constant(0.0), total)
        with for_range(b, i64(0), b.add(count, i64(int(rows_of_l)))) as q:
            b.store(r.scalar_fma(r.load(m, row, q), r.load(y, column, q), b.load(total)), total)
        with for_range(b, i64(0), count) as q:
            b.store(r.scalar_fma(r.load(x, row, q), r.load(m, q, column), b.load(total)), total)
        return b.load(total)
    with for_range(b, i, rows) as row:           # column i's update, then its left reflector
        r.store(b.fsub(r.load(m, row, i), pending(row, i, i, False)), m, row, i)
    b.store(householder_vector(r, m, i, rows, i), b.gep(d, [i]))
    r.ret_if(b.icmp_signed(">=", after, columns))
    tall, wide = b.sub(rows, i), b.sub(columns, after)
    with for_range(b, i64(0), tall) as k:
        b.store(r.load(m, b.add(i, k), i), b.gep(left, [k]))
    transposed_matrix_vector(r, tall, wide, m.block(b, i, after), left, product)     # Aᵀ u
    t1, t2 = r.tile(MAX_BLOCK), r.tile(MAX_BLOCK)
    _project(r, i, tall, lambda k, q: r.load(m, b.add(i, k), q), left, t1)           # Lᵀ u
    _project(r, i, tall, lambda k, q: r.load(x, b.add(i, k), q), left, t2)           # Xᵀ u
    with for_range(b, i64(0), wide) as c:        # Y's column i = 2 (Aᵀ u - Y Lᵀ u - Uᵀ Xᵀ u)
        column = b.add(after, c)
        b.store(b.load(b.gep(product, [c])), total)
        with for_range(b, i64(0), i) as q:
            b.store(r.scalar_fma(b.fneg(r.load(y, column, q)), b.load(b.gep(t1, [q])), b.load(total)), total)
            b.store(r.scalar_fma(b.fneg(r.load(m, q, column)), b.load(b.gep(t2, [q])), b.load(total)), total)
        r.store(b.fmul(r.constant(2.0), b.load(total)), y, column, i)
    with for_range(b, after, columns) as column:     # row i's update, then its right reflector
        r.store(b.fsub(r.load(m, i, column), pending(i, column, i, True)), m, i, column)
    b.store(householder_vector(r, m.T, after, columns, i), b.gep(e, [i]))
    with for_range(b, i64(0), wide) as k:
        b.store(r.load(m, i, b.add(after, k)), b.gep(right, [k]))
    below = b.sub(rows, after)
    matrix_vector(r, below, wide, m.block(b, after, after), right, product)           # A v
    t3, t4 = r.tile(MAX_BLOCK), r.tile(MAX_BLOCK)
    _project(r, b.add(i, i64(1)), wide, lambda k, q: r.load(y, b.add(after, k), q), right, t3)    # Yᵀ v
    _project(r, i, wide, lambda k, q: r.load(m, q, b.add(after, k)), right, t4)                  # U v
    with for_range(b, i64(0), below) as k:       # X's column i = 2 (A v - L Yᵀ v - X U v)
        row = b.add(after, k)
        b.store(b.load(b.gep(product, [k])), total)
        with for_range(b, i64(0), after) as q:
            b.store(r.scalar_fma(b.fneg(r.load(m, row, q)), b.load(b.gep(t3, [q])), b.load(total)), total)
        with for_range(b, i64(0), i) as q:
            b.store(r.scalar_fma(b.fneg(r.load(x, row, q)), b.load(b.gep(t4, [q])), b.load(total)), total)
        r.store(b.fmul(r.constant(2.0), b.load(total)), x, row, i)
    b.ret_void()
    return fn


def _project(r: Routine, count: ir.Value, length: ir.Value, element, u: ir.Value, out: ir.Value) -> None:
    """out[q] = Σ_k element(k, q) u[k] for q < count, k < length."""
    b = r.b
    total = r.entry.alloca(r.elem)
    with for_range(b, i64(0), count) as q:
        b.store(r.constant(0.0), total)
        with for_range(b, i64(0), length) as k:
            b.store(r.scalar_fma(element(k, q), b.load(b.gep(u, [k])), b.load(total)), total)
        b.store(b.load(total), b.gep(out, [q]))
