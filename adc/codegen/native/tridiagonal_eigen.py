"""The symmetric tridiagonal eigenproblem in the runtime library (symmetric.py's second step): the
eigenvalues by implicit QL with Wilkinson's shift (EISPACK's tql1), the eigenvectors by inverse
iteration (LAPACK's dstein), O(n²) unless eigenvalues cluster.

    eigenvalues(r, n, d, e, w, scratch) -> i64     w = T's eigenvalues, ascending; 1 if QL did not
                                                    converge in 30 iterations for one of them
    eigenvectors(r, n, d, e, w, count, z, scratch) row j of z[count, n] = T's unit eigenvector of w[j]

QL splits T where |e_m| <= eps (|d_m| + |d_m+1|), or where |e_m| <= eps ‖T‖: a block of rounding
noise (the null space of a rank-deficient matrix) never meets the relative test alone. Either
perturbs T by at most eps ‖T‖, what the tridiagonal reduction already did.

Inverse iteration solves (T - w_j I) x = b three times from a pseudo-random b, with T - w_j I
factored once by Gaussian elimination with partial pivoting (dlagtf: a zero or tiny pivot
replaced by eps ‖T‖), normalizing each time; x is made orthogonal (modified Gram-Schmidt) to the
eigenvectors of the eigenvalues closer than ‖T‖ / (CLUSTER n) before it (a cluster) before
every solve and at the end, so repeated eigenvalues get orthonormal eigenvectors. (dstein's
clusters are 1e-3 ‖T‖ wide, see CLUSTER.)
"""
from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from adc.codegen.native import gemm
from adc.codegen.native.blocked import Routine, internal
from adc.codegen.native.vectors import axpy, dot, scale
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.loops import I1, I64, for_range, i64

MAX_ITERATIONS = 30     # QL iterations for one eigenvalue
SOLVES = 3              # inverse iteration's solves for one eigenvector
# Eigenvalues closer than ‖T‖ / (CLUSTER n) get mutually orthogonalized eigenvectors: the vectors of
# eigenvalues a gap apart are orthogonal to about eps ‖T‖ / gap, here within CLUSTER n eps; dstein's
# 1e-3 ‖T‖ made all 1024 eigenvalues of g gᵀ + n I one cluster (95 ms of Gram-Schmidt, 5 ms now)
CLUSTER = 10


def eigenvalues(r: Routine, n: ir.Value, d: ir.Value, e: ir.Value, w: ir.Value, scratch: ir.Value) -> ir.Value:
    """w = the eigenvalues of T (diagonal d, subdiagonal e), ascending; 0, or 1 on no convergence."""
    return r.b.call(_eigenvalues_function(r.module, r.blk), [n, d, e, w, scratch])


def eigenvectors(r: Routine, n: ir.Value, d: ir.Value, e: ir.Value, w: ir.Value, count: ir.Value, z: ir.Value,
                 scratch: ir.Value) -> None:
    """Row j of z (count x n, row-major) = the unit eigenvector of T for w[j], j < count (w in ascending or
    descending order: a cluster is a run of neighbours closer than its width); scratch: 5 n elements."""
    r.b.call(_eigenvectors_function(r.module, r.blk), [n, d, e, w, count, z, scratch])


def _element(r: Routine, array: ir.Value, k: ir.Value) -> ir.Value:
    return r.b.gep(array, [k])


def _get(r: Routine, array: ir.Value, k: ir.Value) -> ir.Value:
    return r.b.load(_element(r, array, k))


def _put(r: Routine, x: ir.Value, array: ir.Value, k: ir.Value) -> None:
    r.b.store(x, _element(r, array, k))


def _fabs(r: Routine, x: ir.Value) -> ir.Value:
    return intrinsic(r.b, "fabs", [x], r.blk.dtype)


def _hypot(r: Routine, x: ir.Value, y: ir.Value) -> ir.Value:
    """√(x² + y²) without overflow: the larger magnitude times √(1 + (smaller / larger)²)."""
    b = r.b
    ax, ay = _fabs(r, x), _fabs(r, y)
    big, small = intrinsic(b, "maxnum", [ax, ay], r.blk.dtype), intrinsic(b, "minnum", [ax, ay], r.blk.dtype)
    ratio = b.fdiv(small, big)
    root = b.fmul(big, intrinsic(b, "sqrt", [b.fadd(r.constant(1.0), b.fmul(ratio, ratio))], r.blk.dtype))
    return b.select(b.fcmp_ordered("==", big, r.constant(0.0)), r.constant(0.0), root)


def norm_of(r: Routine, n: ir.Value, d: ir.Value, e: ir.Value) -> ir.Value:
    """max |d| + 2 max |e|, a bound of ‖T‖ that scales the tests; 1 for T = 0 (any basis will do)."""
    b = r.b
    biggest = r.entry.alloca(r.elem), r.entry.alloca(r.elem)
    for slot in biggest:
        b.store(r.constant(0.0), slot)
    with for_range(b, i64(0), n) as k:
        b.store(intrinsic(b, "maxnum", [b.load(biggest[0]), _fabs(r, _get(r, d, k))], r.blk.dtype), biggest[0])
    with for_range(b, i64(0), b.sub(n, i64(1))) as k:
        b.store(intrinsic(b, "maxnum", [b.load(biggest[1]), _fabs(r, _get(r, e, k))], r.blk.dtype), biggest[1])
    norm = b.fadd(b.load(biggest[0]), b.fmul(r.constant(2.0), b.load(biggest[1])))
    return b.select(b.fcmp_ordered(">", norm, r.constant(0.0)), norm, r.constant(1.0))


def _eigenvalues_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(n, d, e, w, scratch) -> i64: tql1 on copies (w of d, scratch of e), then w sorted."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "tridiagonal_eigenvalues", [I64, ptr, ptr, ptr, ptr], I64)
    if r is None:
        return fn
    n, d, e, w, sub = r.args
    b = r.b
    eps = r.constant(float(np.finfo(blk.dtype.numpy).eps))
    with for_range(b, i64(0), n) as k:
        _put(r, _get(r, d, k), w, k)
        _put(r, r.constant(0.0), sub, k)
    with for_range(b, i64(0), b.sub(n, i64(1))) as k:
        _put(r, _get(r, e, k), sub, k)
    limit = b.fmul(eps, norm_of(r, n, d, e))
    m_slot, count, s_slot, c_slot, p_slot, g_slot, i_slot = (r.entry.alloca(t) for t in (I64, I64, r.elem, r.elem,
                                                                                            r.elem, r.elem, I64))
    fn_ = r.fn
    with for_range(b, i64(0), n) as l:
        b.store(i64(0), count)
        search, found, iterate, done_l = (fn_.append_basic_block(x) for x in ("ql.search", "ql.found", "ql.iterate",
                                                                              "ql.next"))
        b.branch(search)
        # m: the first index from l whose subdiagonal is negligible (n - 1 at the end)
        b.position_at_end(search)
        b.store(l, m_slot)
        scan, advance = fn_.append_basic_block("ql.scan"), fn_.append_basic_block("ql.advance")
        b.branch(scan)
        b.position_at_end(scan)
        m = b.load(m_slot)
        at_end = b.icmp_signed(">=", m, b.sub(n, i64(1)))
        with b.if_then(at_end):
            b.branch(found)
        # (the block after if_then continues here when not at the end)
        em = _fabs(r, _get(r, sub, m))
        dd = b.fadd(_fabs(r, _get(r, w, m)), _fabs(r, _get(r, w, b.add(m, i64(1)))))
        small = b.or_(b.fcmp_ordered("<=", em, b.fmul(eps, dd)), b.fcmp_ordered("<=", em, limit))
        b.cbranch(small, found, advance)
        b.position_at_end(advance)
        b.store(b.add(m, i64(1)), m_slot)
        b.branch(scan)
        b.position_at_end(found)
        m = b.load(m_slot)
        b.cbranch(b.icmp_signed("==", m, l), done_l, iterate)
        b.position_at_end(iterate)
        b.store(b.add(b.load(count), i64(1)), count)
        r.ret_if(b.icmp_signed(">", b.load(count), i64(MAX_ITERATIONS)), i64(1))
        _ql_step(r, l, m, w, sub, s_slot, c_slot, p_slot, g_slot, i_slot)
        b.branch(search)
        b.position_at_end(done_l)
    _sort(r, n, w)
    b.ret(i64(0))
    return fn


def _ql_step(r: Routine, l: ir.Value, m: ir.Value, w: ir.Value, sub: ir.Value, s_slot, c_slot, p_slot, g_slot,
             i_slot) -> None:
    """One implicit QL sweep over rows l..m with Wilkinson's shift (tql1's inner loop)."""
    b = r.b
    one, two = r.constant(1.0), r.constant(2.0)
    el = _get(r, sub, l)
    g = b.fdiv(b.fsub(_get(r, w, b.add(l, i64(1))), _get(r, w, l)), b.fmul(two, el))
    root = _hypot(r, g, one)
    shifted = b.fadd(g, intrinsic(b, "copysign", [root, g], r.blk.dtype))
    b.store(b.fadd(b.fsub(_get(r, w, m), _get(r, w, l)), b.fdiv(el, shifted)), g_slot)
    b.store(one, s_slot)
    b.store(one, c_slot)
    b.store(r.constant(0.0), p_slot)
    b.store(b.sub(m, i64(1)), i_slot)
    fn_ = r.fn
    loop, body, underflow, finished, after = (fn_.append_basic_block(x) for x in (
        "ql.rotate", "ql.rotate.body", "ql.underflow", "ql.finished", "ql.after"))
    b.branch(loop)
    b.position_at_end(loop)
    i = b.load(i_slot)
    b.cbranch(b.icmp_signed(">=", i, l), body, finished)
    b.position_at_end(body)
    ei = _get(r, sub, i)
    f, bb = b.fmul(b.load(s_slot), ei), b.fmul(b.load(c_slot), ei)
    rr = _hypot(r, f, b.load(g_slot))
    following = b.add(i, i64(1))
    _put(r, rr, sub, following)
    rotate = fn_.append_basic_block("ql.rotate.apply")
    b.cbranch(b.fcmp_ordered("==", rr, r.constant(0.0)), underflow, rotate)
    b.position_at_end(rotate)
    s, c = b.fdiv(f, rr), b.fdiv(b.load(g_slot), rr)
    g = b.fsub(_get(r, w, following), b.load(p_slot))
    rr = b.fadd(b.fmul(b.fsub(_get(r, w, i), g), s), b.fmul(two, b.fmul(c, bb)))
    p = b.fmul(s, rr)
    _put(r, b.fadd(g, p), w, following)
    b.store(b.fsub(b.fmul(c, rr), bb), g_slot)
    b.store(s, s_slot)
    b.store(c, c_slot)
    b.store(p, p_slot)
    b.store(b.sub(i, i64(1)), i_slot)
    b.branch(loop)
    b.position_at_end(underflow)        # a rotation of nothing: T splits at i + 1, start again
    _put(r, b.fsub(_get(r, w, following), b.load(p_slot)), w, following)
    _put(r, r.constant(0.0), sub, m)
    b.branch(after)
    b.position_at_end(finished)
    _put(r, b.fsub(_get(r, w, l), b.load(p_slot)), w, l)
    _put(r, b.load(g_slot), sub, l)
    _put(r, r.constant(0.0), sub, m)
    b.branch(after)
    b.position_at_end(after)


def _sort(r: Routine, n: ir.Value, w: ir.Value) -> None:
    """Insertion sort of w[:n], ascending."""
    b = r.b
    slot = r.entry.alloca(I64)
    with for_range(b, i64(1), n) as k:
        x = _get(r, w, k)
        b.store(k, slot)
        loop, shift, place = (r.fn.append_basic_block(x_) for x_ in ("sort.loop", "sort.shift", "sort.place"))
        b.branch(loop)
        b.position_at_end(loop)
        j = b.load(slot)
        before = b.sub(j, i64(1))
        positive = b.icmp_signed(">", j, i64(0))
        larger = b.select(positive, b.fcmp_ordered(">", _get(r, w, b.select(positive, before, i64(0))), x),
                          ir.Constant(I1, 0))
        b.cbranch(larger, shift, place)
        b.position_at_end(shift)
        _put(r, _get(r, w, before), w, j)
        b.store(before, slot)
        b.branch(loop)
        b.position_at_end(place)
        _put(r, x, w, b.load(slot))


def _eigenvectors_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(n, d, e, w, z, scratch): inverse iteration (the module docstring); scratch holds the factors
    of T - w_j I: diagonal, first and second superdiagonals, multipliers, interchanges (n each)."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "tridiagonal_eigenvectors", [I64, ptr, ptr, ptr, I64, ptr, ptr])
    if r is None:
        return fn
    n, d, e, w, count, z, scratch = r.args
    b = r.b
    diagonal, upper, second, multiplier, swapped = (b.gep(scratch, [b.mul(n, i64(k))]) for k in range(5))
    norm = norm_of(r, n, d, e)
    eps = float(np.finfo(blk.dtype.numpy).eps)
    tiny = intrinsic(b, "maxnum", [b.fmul(r.constant(eps), norm), r.constant(float(np.finfo(blk.dtype.numpy).tiny))],
                     blk.dtype)
    cluster = b.fdiv(norm, b.fmul(r.constant(CLUSTER), b.sitofp(n, r.elem)))
    start, seed = r.entry.alloca(I64), r.entry.alloca(I64)
    b.store(i64(0), start)
    b.store(i64(1), seed)
    with for_range(b, i64(0), count) as j:
        lam = _get(r, w, j)
        with b.if_then(b.icmp_signed(">", j, i64(0))):
            gap = _fabs(r, b.fsub(lam, _get(r, w, b.sub(j, i64(1)))))
            b.store(b.select(b.fcmp_unordered(">=", gap, cluster), j, b.load(start)), start)
        _factor(r, n, d, e, lam, tiny, diagonal, upper, second, multiplier, swapped)
        x = b.gep(z, [b.mul(j, n)])
        with for_range(b, i64(0), n) as k:     # a pseudo-random start in [-1/2, 1/2) (64-bit LCG)
            state = b.add(b.mul(b.load(seed), i64(6364136223846793005)), i64(1442695040888963407))
            b.store(state, seed)
            uniform = b.fmul(b.uitofp(b.lshr(state, i64(11)), r.elem), r.constant(2.0 ** -53))
            _put(r, b.fsub(uniform, r.constant(0.5)), x, k)
        with for_range(b, i64(0), i64(SOLVES)):
            _orthogonalize(r, n, z, b.load(start), j, x)
            _solve(r, n, diagonal, upper, second, multiplier, swapped, x)
            _normalize(r, n, x)
        _orthogonalize(r, n, z, b.load(start), j, x)
        _normalize(r, n, x)
    b.ret_void()
    return fn


def _factor(r: Routine, n, d, e, lam, tiny, diagonal, upper, second, multiplier, swapped) -> None:
    """T - lam I = P L U by Gaussian elimination with partial pivoting (dlagtf); |pivots| >= tiny, kept
    as their reciprocals."""
    b = r.b
    zero, one = r.constant(0.0), r.constant(1.0)
    with for_range(b, i64(0), n) as k:
        _put(r, b.fsub(_get(r, d, k), lam), diagonal, k)
        for array in (upper, second, multiplier, swapped):
            _put(r, zero, array, k)
    last = b.sub(n, i64(1))
    with for_range(b, i64(0), last) as k:
        _put(r, _get(r, e, k), upper, k)
    with for_range(b, i64(0), last) as k:
        following = b.add(k, i64(1))
        a_k, c_k = _get(r, diagonal, k), _get(r, e, k)
        with b.if_else(b.fcmp_ordered(">=", _fabs(r, a_k), _fabs(r, c_k))) as (keep, interchange):
            with keep:
                pivot = b.select(b.fcmp_ordered("==", a_k, zero), tiny, a_k)
                _put(r, pivot, diagonal, k)
                mult = b.fdiv(c_k, pivot)
                _put(r, mult, multiplier, k)
                _put(r, b.fsub(_get(r, diagonal, following), b.fmul(mult, _get(r, upper, k))), diagonal, following)
            with interchange:
                mult = b.fdiv(a_k, c_k)
                _put(r, c_k, diagonal, k)
                kept = _get(r, diagonal, following)
                _put(r, b.fsub(_get(r, upper, k), b.fmul(mult, kept)), diagonal, following)
                with b.if_then(b.icmp_signed("<", following, last)):
                    _put(r, _get(r, upper, following), second, k)
                    _put(r, b.fneg(b.fmul(mult, _get(r, upper, following))), upper, following)
                _put(r, kept, upper, k)
                _put(r, mult, multiplier, k)
                _put(r, one, swapped, k)
    with for_range(b, i64(0), n) as k:       # the pivots' reciprocals: the solves multiply
        pivot = _get(r, diagonal, k)
        small = b.fcmp_ordered("<", _fabs(r, pivot), tiny)
        pivot = b.select(small, intrinsic(b, "copysign", [tiny, pivot], r.blk.dtype), pivot)
        _put(r, b.fdiv(one, pivot), diagonal, k)


def _solve(r: Routine, n, diagonal, upper, second, multiplier, swapped, x) -> None:
    """x := (T - lam I)⁻¹ x from _factor's P L U (dlagts), multiplying by the pivots' reciprocals."""
    b = r.b
    last = b.sub(n, i64(1))
    with for_range(b, i64(0), last) as k:
        following = b.add(k, i64(1))
        xk, xf = _get(r, x, k), _get(r, x, following)
        interchange = b.fcmp_ordered("!=", _get(r, swapped, k), r.constant(0.0))
        top, bottom = b.select(interchange, xf, xk), b.select(interchange, xk, xf)
        _put(r, top, x, k)
        _put(r, b.fsub(bottom, b.fmul(_get(r, multiplier, k), top)), x, following)
    with for_range(b, i64(0), n) as step:
        k = b.sub(last, step)
        total = _get(r, x, k)
        following, further = b.add(k, i64(1)), b.add(k, i64(2))
        inside = b.icmp_signed("<", following, n)
        total = b.select(inside, b.fsub(total, b.fmul(_get(r, upper, k), _get(r, x, b.select(inside, following, k)))),
                         total)
        inside = b.icmp_signed("<", further, n)
        total = b.select(inside, b.fsub(total, b.fmul(_get(r, second, k), _get(r, x, b.select(inside, further, k)))),
                         total)
        _put(r, b.fmul(total, _get(r, diagonal, k)), x, k)


def _orthogonalize(r: Routine, n, z, first, j, x) -> None:
    """x -= (z_q · x) z_q for the rows q in [first, j) of z, in order (modified Gram-Schmidt)."""
    b = r.b
    with for_range(b, first, j) as q:
        row = b.gep(z, [b.mul(q, n)])
        axpy(r, n, b.fneg(dot(r, n, row, x)), row, x)


def _normalize(r: Routine, n, x) -> None:
    b = r.b
    scale(r, n, b.fdiv(r.constant(1.0), intrinsic(b, "sqrt", [dot(r, n, x, x)], r.blk.dtype)), x)
