"""The runtime library's symmetric eigensolver for large matrices (LAPACK's dsyevr route, with
dstein's inverse iteration in place of MRRR):

    i64 adc_rt_syevr_<dtype>(i64 n, T* a, i64 lda, T* w, i64 nb)
        a[n, n] row-major holds the symmetric matrix in both triangles; on return its columns are
        the unit eigenvectors, w[n] the eigenvalues ascending; 0, or 1 when the iteration did not
        converge or no workspace could be allocated (lowering then gives NaN)

    1. a = Q T Qᵀ, T tridiagonal (tridiagonal.py: blocked Householder, half the work in the gemm)
    2. T's eigenvalues by implicit QL, its eigenvectors Z by inverse iteration (tridiagonal_eigen.py)
    3. the eigenvectors Q Z: Q's reflectors applied to Z panel by panel, last first, each as a
       block reflector (householder.py: two gemms per panel)
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.native import gemm, tridiagonal, tridiagonal_eigen
from adc.codegen.native.blocked import MAX_BLOCK, Routine, View, clamp_block, copy, declare, exported
from adc.codegen.native.householder import apply_panels
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.loops import I64, PTR, for_range, i64
from adc.ir.types import DType


# the magnitudes a's largest element is kept within (the square roots of the smallest normal and the
# largest number, as LAPACK's rmin and rmax)
SMALLEST = {DType.f32: 2.0 ** -63, DType.f64: 2.0 ** -511}
LARGEST = {DType.f32: 2.0 ** 63, DType.f64: 2.0 ** 511}


def eigh_type(dtype: DType) -> ir.FunctionType:
    ptr = gemm.ELEMENT_TYPES[dtype].as_pointer()
    return ir.FunctionType(I64, [I64, ptr, I64, ptr, I64])


def declare_eigh(module: ir.Module, dtype: DType) -> ir.Function:
    """`adc_rt_syevr_<dtype>` declared in a kernel module (lowering's eigh)."""
    return declare(module, "syevr", dtype, eigh_type(dtype))


def define_eigh(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """Define `adc_rt_syevr_<dtype>` (the module docstring) in the runtime library."""
    r = exported(module, blk, "syevr", eigh_type(blk.dtype))
    n, a, lda, w, nb = r.args
    b = r.b
    nb = clamp_block(b, nb)
    r.ret_if(b.icmp_signed("<=", n, i64(0)), i64(0))
    # z (n x n), the panels' V and W (n x nb each), d, e, u, y and inverse iteration's five vectors
    elements = b.add(b.mul(n, n), b.add(b.mul(i64(2), b.mul(n, nb)), b.mul(i64(9), n)))
    block, z = r.allocate(elements)
    r.ret_if(b.icmp_unsigned("==", block, ir.Constant(PTR, None)), i64(1))
    vp = b.gep(z, [b.mul(n, n)])
    wp = b.gep(vp, [b.mul(n, nb)])
    d = b.gep(wp, [b.mul(n, nb)])
    e, u, y, scratch = (b.gep(d, [b.mul(n, i64(k))]) for k in (1, 2, 3, 4))
    factor = scale_into_range(r, n, n, View(a, lda, i64(1)))
    tridiagonal.reduce(r, n, a, lda, d, e, nb, vp, wp, u, y)
    failed = tridiagonal_eigen.eigenvalues(r, n, d, e, w, u)
    with b.if_then(b.icmp_signed("!=", failed, i64(0)), likely=False):
        r.release(block)
        b.ret(failed)
    tridiagonal_eigen.eigenvectors(r, n, d, e, w, n, z, scratch)
    columns = View(z, i64(1), n)        # z's rows are T's eigenvectors: z read column-major is Z
    whole, t, gram = View(a, lda, i64(1)), r.tile(MAX_BLOCK * MAX_BLOCK), r.tile(MAX_BLOCK * MAX_BLOCK)
    apply_panels(r, n, b.sub(n, i64(1)), i64(1), whole, columns, n, nb, t, gram)     # H_0 .. H_{n-2}
    copy(r, n, n, columns, whole, columns_outside=True)
    with for_range(b, i64(0), n) as k:
        b.store(b.fdiv(b.load(b.gep(w, [k])), factor), b.gep(w, [k]))
    r.release(block)
    b.ret(i64(0))
    return r.fn


def scale_into_range(r: Routine, rows: ir.Value, columns: ir.Value, a: View) -> ir.Value:
    """a scaled by 1 / max |a_ij| when that is below SMALLEST or above LARGEST (LAPACK's dsyev does
    the same): inverse iteration's pivots, eps ‖T‖, then neither underflow nor overflow its
    solutions. Returns the factor (1 when a is left alone)."""
    b, dtype = r.b, r.blk.dtype
    largest = r.entry.alloca(r.elem)
    b.store(r.constant(0.0), largest)
    with for_range(b, i64(0), rows) as i:
        with for_range(b, i64(0), columns) as j:
            size = intrinsic(b, "fabs", [r.load(a, i, j)], dtype)
            b.store(intrinsic(b, "maxnum", [b.load(largest), size], dtype), largest)
    big = b.load(largest)
    inside = b.and_(b.fcmp_ordered(">=", big, r.constant(SMALLEST[dtype])),
                    b.fcmp_ordered("<=", big, r.constant(LARGEST[dtype])))
    factor = b.select(b.or_(inside, b.fcmp_ordered("==", big, r.constant(0.0))), r.constant(1.0),
                      b.fdiv(r.constant(1.0), big))
    with b.if_then(b.fcmp_ordered("!=", factor, r.constant(1.0))):
        with for_range(b, i64(0), rows) as i:
            with for_range(b, i64(0), columns) as j:
                r.store(b.fmul(r.load(a, i, j), factor), a, i, j)
    return factor
