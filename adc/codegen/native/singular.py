"""The runtime library's singular value decomposition of large tall matrices (LAPACK's dgesvdx route:
bidiagonalization, then the bidiagonal's SVD as an eigenproblem of its Golub-Kahan matrix):

    i64 adc_rt_gesvdx_<dtype>(i64 m, i64 n, T* a, i64 lda, T* s, T* vh, i64 ldv, i64 nb)
        a[m, n] (m >= n, row-major) holds the matrix, and U on return; s[n] the singular values,
        descending; vh[n, n] = Vᵀ; 0, or 1 when the iteration did not converge or no workspace
        could be allocated (lowering then gives NaN)

    1. a = Q B Pᵀ, B upper bidiagonal (bidiagonal.py: blocked Householder, half the work in the gemm)
    2. B's SVD from the Golub-Kahan matrix, tridiagonal with a zero diagonal and (d_0, e_0, d_1, ...)
       off it, whose eigenvalues are ±s_k with eigenvectors (v_0, u_0, v_1, u_1, ...) / √2
       (tridiagonal_eigen.py: QL for all 2n, inverse iteration for the n largest): no BᵀB, so small
       singular values keep their absolute accuracy. Where s_k is small, the pair ±s_k is close and
       a computed eigenvector mixes the two, (v, u) and (v, -u): its halves still point along v and
       u, so each half is normalized on its own, and within a cluster of singular values the u's
       and the v's are each made orthonormal (modified Gram-Schmidt, twice)
    3. U = Q [U_B; 0] and V = P V_B, the reflectors applied as block reflectors (householder.py);
       vh holds V column-major, which read row-major is Vᵀ
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.native import bidiagonal, gemm, tridiagonal_eigen
from adc.codegen.native.blocked import MAX_BLOCK, Routine, View, clamp_block, declare, exported
from adc.codegen.native.householder import apply_panels
from adc.codegen.native.symmetric import scale_into_range
from adc.codegen.native.vectors import axpy, dot, scale
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.loops import I64, PTR, for_range, i64
from adc.ir.types import DType


def svd_type(dtype: DType) -> ir.FunctionType:
    ptr = gemm.ELEMENT_TYPES[dtype].as_pointer()
    return ir.FunctionType(I64, [I64, I64, ptr, I64, ptr, ptr, I64, I64])


def declare_svd(module: ir.Module, dtype: DType) -> ir.Function:
    """`adc_rt_gesvdx_<dtype>` declared in a kernel module (lowering's svd)."""
    return declare(module, "gesvdx", dtype, svd_type(dtype))


def define_svd(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """Define `adc_rt_gesvdx_<dtype>` (the module docstring) in the runtime library."""
    r = exported(module, blk, "gesvdx", svd_type(blk.dtype))
    m, n, a, lda, s, vh, ldv, nb = r.args
    b = r.b
    nb = clamp_block(b, nb)
    r.ret_if(b.icmp_signed("<=", n, i64(0)), i64(0))
    twice = b.mul(n, i64(2))
    # z (n x 2n), the reflectors' copy (m x n), X (m x nb), Y (n x nb), the reduction's vectors
    # (2 m + 2 n), d, e, the Golub-Kahan diagonal, off-diagonal and eigenvalues (2n each), and
    # the eigensolver's scratch (5 x 2n)
    sizes = [b.mul(n, twice), b.mul(m, n), b.mul(m, nb), b.mul(n, nb), b.mul(b.add(m, n), i64(2)), n, n, twice, twice,
             twice, b.mul(twice, i64(5))]
    total = sizes[0]
    for size in sizes[1:]:
        total = b.add(total, size)
    block, base = r.allocate(total)
    r.ret_if(b.icmp_unsigned("==", block, ir.Constant(PTR, None)), i64(1))
    parts, offset = [], i64(0)
    for size in sizes:
        parts.append(b.gep(base, [offset]))
        offset = b.add(offset, size)
    z, copy_, xp, yp, vectors, d, e, diagonal, off, w, scratch = parts
    whole = View(a, lda, i64(1))
    factor = scale_into_range(r, m, n, whole)
    bidiagonal.reduce(r, m, n, a, lda, d, e, nb, xp, yp, vectors)
    with for_range(b, i64(0), twice) as k:       # the Golub-Kahan matrix
        b.store(r.constant(0.0), b.gep(diagonal, [k]))
        b.store(r.constant(0.0), b.gep(off, [k]))
    with for_range(b, i64(0), n) as k:
        b.store(b.load(b.gep(d, [k])), b.gep(off, [b.mul(k, i64(2))]))
    with for_range(b, i64(0), b.sub(n, i64(1))) as k:
        b.store(b.load(b.gep(e, [k])), b.gep(off, [b.add(b.mul(k, i64(2)), i64(1))]))
    failed = tridiagonal_eigen.eigenvalues(r, twice, diagonal, off, w, scratch)
    with b.if_then(b.icmp_signed("!=", failed, i64(0)), likely=False):
        r.release(block)
        b.ret(failed)
    with for_range(b, i64(0), n) as k:           # the n largest, descending, none below 0
        value = b.load(b.gep(w, [b.sub(b.sub(twice, i64(1)), k)]))
        b.store(intrinsic(b, "maxnum", [value, r.constant(0.0)], blk.dtype), b.gep(s, [k]))
    tridiagonal_eigen.eigenvectors(r, twice, diagonal, off, s, n, z, scratch)
    _split_pairs(r, n, z, s, tridiagonal_eigen.norm_of(r, twice, diagonal, off), scratch)
    t, gram = r.tile(MAX_BLOCK * MAX_BLOCK), r.tile(MAX_BLOCK * MAX_BLOCK)
    # V = P V_B in vh, column-major: vh's row k is v_k
    with for_range(b, i64(0), n) as k:
        with for_range(b, i64(0), n) as i:
            b.store(b.load(b.gep(z, [b.add(b.mul(k, twice), i)])), b.gep(vh, [b.add(b.mul(k, ldv), i)]))
    reflectors = View(copy_, n, i64(1))
    with for_range(b, i64(0), n) as i:           # P's vector k as column k from row k + 1
        with for_range(b, i64(0), n) as k:
            inside = b.icmp_signed(">", i, k)
            r.store(b.select(inside, r.load(whole, k, b.select(inside, i, k)), r.constant(0.0)), reflectors, i, k)
    apply_panels(r, n, b.sub(n, i64(1)), i64(1), reflectors, View(vh, i64(1), ldv), n, nb, t, gram)
    # U = Q [U_B; 0] in a
    with for_range(b, i64(0), m) as i:           # Q's vector k as column k from row k
        with for_range(b, i64(0), n) as k:
            inside = b.icmp_signed(">=", i, k)
            r.store(b.select(inside, r.load(whole, i, k), r.constant(0.0)), reflectors, i, k)
    with for_range(b, i64(0), m) as i:
        with for_range(b, i64(0), n) as k:
            inside = b.icmp_signed("<", i, n)
            element = b.gep(z, [b.add(b.mul(k, twice), b.add(n, b.select(inside, i, i64(0))))])
            r.store(b.select(inside, b.load(element), r.constant(0.0)), whole, i, k)
    apply_panels(r, m, n, i64(0), reflectors, whole, n, nb, t, gram)
    with for_range(b, i64(0), n) as k:
        b.store(b.fdiv(b.load(b.gep(s, [k])), factor), b.gep(s, [k]))
    r.release(block)
    b.ret(i64(0))
    return r.fn


def _split_pairs(r: Routine, n: ir.Value, z: ir.Value, s: ir.Value, norm: ir.Value, scratch: ir.Value) -> None:
    """Each row (v_0, u_0, v_1, ...) of z (n x 2n) rearranged into (v | u), each half normalized, and
    within a cluster of singular values the v's and the u's made orthonormal (MGS, twice)."""
    b = r.b
    twice = b.mul(n, i64(2))
    cluster = b.fdiv(norm, b.fmul(r.constant(tridiagonal_eigen.CLUSTER), b.sitofp(twice, r.elem)))
    start = r.entry.alloca(I64)
    b.store(i64(0), start)
    with for_range(b, i64(0), n) as j:
        row = b.gep(z, [b.mul(j, twice)])
        with for_range(b, i64(0), twice) as k:
            b.store(b.load(b.gep(row, [k])), b.gep(scratch, [k]))
        with for_range(b, i64(0), n) as k:
            b.store(b.load(b.gep(scratch, [b.mul(k, i64(2))])), b.gep(row, [k]))
            b.store(b.load(b.gep(scratch, [b.add(b.mul(k, i64(2)), i64(1))])), b.gep(row, [b.add(n, k)]))
        with b.if_then(b.icmp_signed(">", j, i64(0))):
            gap = b.fsub(b.load(b.gep(s, [b.sub(j, i64(1))])), b.load(b.gep(s, [j])))
            b.store(b.select(b.fcmp_unordered(">=", gap, cluster), j, b.load(start)), start)
        for half in (i64(0), n):
            x = b.gep(row, [half])
            _normalize(r, n, x)
            for _ in range(2):
                with for_range(b, b.load(start), j) as q:
                    earlier = b.gep(z, [b.add(b.mul(q, twice), half)])
                    axpy(r, n, b.fneg(dot(r, n, earlier, x)), earlier, x)
                _normalize(r, n, x)


def _normalize(r: Routine, n: ir.Value, x: ir.Value) -> None:
    """x / ‖x‖, unless x = 0."""
    b = r.b
    size = intrinsic(b, "sqrt", [dot(r, n, x, x)], r.blk.dtype)
    positive = b.fcmp_ordered(">", size, r.constant(0.0))
    scale(r, n, b.select(positive, b.fdiv(r.constant(1.0), size), r.constant(1.0)), x)
