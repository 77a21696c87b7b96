"""The runtime library's blocked Householder QR (LAPACK's dgeqrf and dorgqr, compact WY).

    void adc_rt_geqrf_<dtype>(i64 m, i64 n, T* q, i64 ldq, T* r, i64 ldr, i64 nb)     (Q formed too)
        q[m, n] (m >= n, row-major, row stride ldq) holds a on entry and Q on exit, r[n, n] gets R:
        the reduced QR, Q R = a, with the reflectors of the unblocked rule (lowering/rules/orthogonal.py):
        H_k = I - 2 v vᵀ, ‖v‖ = 1 (or v = 0: nothing below the diagonal), r[k, k] = -sign(a[k, k]) ‖x‖

    factor: for each panel of nb columns: the unblocked reflectors of the panel (in a contiguous copy:
            a column of q walked at a power-of-two stride thrashes a few cache sets); T with
            H_j ⋯ H_{j+nb-1} = I - V T Vᵀ (T[k, k] = 2, T[:k, k] = -2 T[:k, :k] Vᵀ v_k); the trailing
            columns C -= V Tᵀ (Vᵀ C) by two gemm updates, column chunks split across threads
    form Q: the panels last to first: their block reflector applied to the columns already formed
            (C -= V T (Vᵀ C)), then the panel's own columns from its reflectors (dorg2r)
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.native import gemm, parallel
from adc.codegen.native.blocked import (CHUNK_VECTORS, MAX_BLOCK, PARALLEL_WORK, Routine, View, clamp_block, copy,
                                        declare, exported, internal, update)
from adc.codegen.lowering.declarations import intrinsic
from adc.codegen.lowering.loops import I1, I64, PTR, for_range, i64
from adc.ir.types import DType

CHUNK_COLUMNS = 128     # trailing columns one thread updates at a time (its W = Vᵀ C on its stack)


def qr_type(dtype: DType) -> ir.FunctionType:
    ptr = gemm.ELEMENT_TYPES[dtype].as_pointer()
    return ir.FunctionType(ir.VoidType(), [I64, I64, ptr, I64, ptr, I64, I64])


def declare_qr(module: ir.Module, dtype: DType) -> ir.Function:
    """`adc_rt_geqrf_<dtype>` declared in a kernel module (lowering's qr)."""
    return declare(module, "geqrf", dtype, qr_type(dtype))


def define_qr(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """Define `adc_rt_geqrf_<dtype>` (the module docstring) in the runtime library."""
    r = exported(module, blk, "geqrf", qr_type(blk.dtype))
    m, n, q, ldq, r_, ldr, nb = r.args
    b = r.b
    nb = clamp_block(b, nb)
    with for_range(b, i64(0), n) as i:         # R's zeros below the diagonal
        with for_range(b, i64(0), i) as j:
            r.store(r.constant(0.0), View(r_, ldr, i64(1)), i, j)
    block, workspace = r.allocate(b.mul(m, nb))     # panels' copies (or none: in place)
    whole = View(q, ldq, i64(1))
    reflector, gram = r.tile(MAX_BLOCK * MAX_BLOCK), r.tile(MAX_BLOCK * MAX_BLOCK)
    r.ret_if(b.icmp_signed("<=", n, i64(0)))
    with for_range(b, i64(0), n, nb) as j:          # factor, panel by panel
        width = r.min(nb, b.sub(n, j))
        rows = b.sub(m, j)
        panel = whole.block(b, j, j)
        _panel_call(r, _factor_panel_function(module, blk), rows, width, panel, workspace,
                    [b.gep(r_, [b.add(b.mul(j, ldr), j)]), ldr])
        right = b.add(j, width)
        with b.if_then(b.icmp_signed("<", right, n)):
            block_reflector(r, rows, width, panel, reflector, gram)
            apply_reflectors(r, rows, width, panel, reflector, whole.block(b, j, right), b.sub(n, right), True)
            with for_range(b, j, right) as k:       # rows j.. of R right of the panel are final
                with for_range(b, right, n) as c:
                    r.store(r.load(whole, k, c), View(r_, ldr, i64(1)), k, c)
    last = b.mul(b.sdiv(b.sub(n, i64(1)), nb), nb)
    with for_range(b, i64(0), b.add(b.sdiv(b.sub(n, i64(1)), nb), i64(1))) as step:      # form Q, last panel first
        j = b.sub(last, b.mul(step, nb))
        width = r.min(nb, b.sub(n, j))
        rows = b.sub(m, j)
        panel, right = whole.block(b, j, j), b.add(j, width)
        with b.if_then(b.icmp_signed("<", right, n)):
            block_reflector(r, rows, width, panel, reflector, gram)
            apply_reflectors(r, rows, width, panel, reflector, whole.block(b, j, right), b.sub(n, right), False)
        _panel_call(r, _form_panel_function(module, blk), rows, width, panel, workspace, [])
        with for_range(b, i64(0), j) as i:
            with for_range(b, j, right) as c:
                r.store(r.constant(0.0), whole, i, c)
    r.release(block)
    b.ret_void()
    return r.fn


def _panel_call(r: Routine, fn: ir.Function, rows: ir.Value, width: ir.Value, panel: View, workspace: ir.Value,
                extra: list[ir.Value]) -> None:
    """fn(rows, width, a, lda, *extra) on the panel, through a copy in the workspace when there is one."""
    b = r.b
    with b.if_else(b.icmp_unsigned("==", b.ptrtoint(workspace, I64), i64(0))) as (in_place, copied):
        with in_place:
            b.call(fn, [rows, width, panel.ptr, panel.rs, *extra])
        with copied:
            contiguous = View(workspace, width, i64(1))
            copy(r, rows, width, panel, contiguous)
            b.call(fn, [rows, width, workspace, width, *extra])
            copy(r, rows, width, contiguous, panel)


def _reflect(r: Routine, v: View, rows: ir.Value, k: ir.Value, first: ir.Value, last: ir.Value,
             sums: ir.Value) -> None:
    """Columns [first, last) of v over rows [k, rows) times H = I - 2 u uᵀ, u column k over those rows:
    s = uᵀ C along the rows (each row's columns together, `sums` their accumulators), C -= 2 u s."""
    b = r.b
    with for_range(b, first, last) as c:
        b.store(r.constant(0.0), b.gep(sums, [c]))
    with for_range(b, k, rows) as i:
        u = r.load(v, i, k)
        with for_range(b, first, last) as c:
            b.store(r.scalar_fma(u, r.load(v, i, c), b.load(b.gep(sums, [c]))), b.gep(sums, [c]))
    with for_range(b, k, rows) as i:
        u = b.fmul(r.constant(-2.0), r.load(v, i, k))
        with for_range(b, first, last) as c:
            r.store(r.scalar_fma(u, b.load(b.gep(sums, [c])), r.load(v, i, c)), v, i, c)


def _factor_panel_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(rows, width, a, lda, r, ldr): the panel's reflectors, as the unblocked rule makes them, stored
    over its columns (zeros above the diagonal); its rows of R (columns [0, width)) into r."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "qr_panel", [I64, I64, ptr, I64, ptr, I64])
    if r is None:
        return fn
    rows, width, a, lda, r_, ldr = r.args
    b, v, out = r.b, View(a, lda, i64(1)), View(r_, ldr, i64(1))
    sums = r.tile(MAX_BLOCK)
    with for_range(b, i64(0), width) as k:
        below = b.add(k, i64(1))
        alpha = householder_vector(r, v, k, rows, k)
        _reflect(r, v, rows, k, below, width, sums)
        r.store(alpha, out, k, k)
        with for_range(b, below, width) as c:       # row k of R in the panel, zeros left in its place
            r.store(r.load(v, k, c), out, k, c)
            r.store(r.constant(0.0), v, k, c)
    b.ret_void()
    return fn


def householder_vector(r: Routine, v: View, first: ir.Value, last: ir.Value, column: ir.Value) -> ir.Value:
    """x = v[first:last, column] replaced by the unit u of H = I - 2 u uᵀ with H x = alpha e_0 (u = 0
    when nothing below x_0 is nonzero: H = I, alpha = x_0, as LAPACK's dlarfg keeps its sign); alpha,
    -sign(x_0) ‖x‖, returned. x is scaled by its largest magnitude (no overflow in Σ x²), and
    v_0 = x_0 - alpha has no cancellation, ‖x - alpha e_0‖² = 2 ‖x‖ |v_0|."""
    b, dtype = r.b, r.blk.dtype
    zero, one, two = r.constant(0.0), r.constant(1.0), r.constant(2.0)
    scale, tail = r.entry.alloca(r.elem), r.entry.alloca(r.elem)

    def fabs(x: ir.Value) -> ir.Value:
        return intrinsic(b, "fabs", [x], dtype)
    below = b.add(first, i64(1))
    b.store(zero, scale)
    with for_range(b, first, last) as i:
        b.store(intrinsic(b, "maxnum", [b.load(scale), fabs(r.load(v, i, column))], dtype), scale)
    big = b.load(scale)
    unit = b.select(b.fcmp_ordered(">", big, zero), b.fdiv(one, big), zero)
    b.store(zero, tail)
    with for_range(b, below, last) as i:
        x = b.fmul(r.load(v, i, column), unit)
        b.store(b.fadd(b.load(tail), b.fmul(x, x)), tail)
    x0, rest = r.load(v, first, column), b.load(tail)
    scaled = b.fmul(x0, unit)
    norm = b.fmul(big, intrinsic(b, "sqrt", [b.fadd(b.fmul(scaled, scaled), rest)], dtype))
    reflects = b.fcmp_unordered("!=", rest, zero)
    alpha = b.select(reflects, b.fneg(intrinsic(b, "copysign", [norm, x0], dtype)), x0)
    v0 = b.fsub(x0, alpha)
    length = b.fmul(intrinsic(b, "sqrt", [b.fmul(two, norm)], dtype), intrinsic(b, "sqrt", [fabs(v0)], dtype))
    inverse = b.select(reflects, b.fdiv(one, length), zero)
    r.store(b.fmul(v0, inverse), v, first, column)
    with for_range(b, below, last) as i:
        r.store(b.fmul(r.load(v, i, column), inverse), v, i, column)
    return alpha


def _form_panel_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(rows, width, a, lda): the panel's columns of H_0 ⋯ H_{width-1} [I; 0] in place of its reflectors,
    last reflector first (dorg2r): H_k touches rows k.. only, and column k is H_k e_k = e_k - 2 v v_0."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "qr_form_panel", [I64, I64, ptr, I64])
    if r is None:
        return fn
    rows, width, a, lda = r.args
    b, v = r.b, View(a, lda, i64(1))
    sums = r.tile(MAX_BLOCK)
    with for_range(b, i64(0), width) as step:
        k = b.sub(b.sub(width, i64(1)), step)
        below = b.add(k, i64(1))
        _reflect(r, v, rows, k, below, width, sums)
        v0 = r.load(v, k, k)
        scale = b.fmul(r.constant(-2.0), v0)
        with for_range(b, below, rows) as i:
            r.store(b.fmul(scale, r.load(v, i, k)), v, i, k)
        r.store(b.fsub(r.constant(1.0), b.fmul(r.constant(2.0), b.fmul(v0, v0))), v, k, k)
    b.ret_void()
    return fn


def block_reflector(r: Routine, rows: ir.Value, width: ir.Value, panel: View, t: ir.Value, gram: ir.Value) -> None:
    """T (width x width, upper, in tile t of row stride MAX_BLOCK) with H_0 ⋯ H_{width-1} = I - V T Vᵀ, V
    the panel's reflectors (unit vectors, or zero, row-major with zeros above the diagonal):
    T[k, k] = 2, T[p, k] = -2 Σ_{p<=q<k} T[p, q] (Vᵀ V)[q, k] (gram: a tile for Vᵀ V)."""
    b = r.b
    tv, g = View(t, i64(MAX_BLOCK), i64(1)), View(gram, i64(MAX_BLOCK), i64(1))
    total = r.entry.alloca(r.elem)
    r.fill(g, width, width, 0.0)
    update(r, width, width, rows, panel.T, panel, g)             # g = -Vᵀ V
    with for_range(b, i64(0), width) as k:
        r.store(r.constant(2.0), tv, k, k)
        with for_range(b, i64(0), k) as p:
            b.store(r.constant(0.0), total)
            with for_range(b, p, k) as q:
                b.store(r.scalar_fma(r.load(tv, p, q), r.load(g, q, k), b.load(total)), total)
            r.store(b.fmul(r.constant(2.0), b.load(total)), tv, p, k)      # T below its diagonal is never read


def apply_reflectors(r: Routine, rows: ir.Value, width: ir.Value, panel: View, t: ir.Value, c: View, columns: ir.Value,
           transpose: bool) -> None:
    """C[rows, columns] := (I - V T Vᵀ)ᵀ C (`transpose`) or (I - V T Vᵀ) C, chunk by chunk of columns, the
    chunks split across threads once the update is large. V is a row-major panel (zeros above its
    diagonal), T its block reflector (`block_reflector`), C row- or column-major."""
    b = r.b
    fn = _apply_chunks_function(r.module, r.blk)
    ctx = r.context([rows, width, panel.ptr, panel.rs, t, c.ptr, c.rs, c.cs, columns, ir.Constant(I64, int(transpose))])
    chunks = b.sdiv(b.add(columns, i64(CHUNK_COLUMNS - 1)), i64(CHUNK_COLUMNS))
    with b.if_else(b.icmp_signed(">=", b.mul(b.mul(rows, columns), width), i64(PARALLEL_WORK))) as (split, alone):
        with split:
            parallel.call_parallel_for(b, fn, ctx, i64(0), chunks, i64(1))
        with alone:
            b.call(fn, [ctx, i64(0), chunks])


def _apply_chunks_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """task(ctx, start, end): column chunks [start, end) of `apply_reflectors`'s C: W = -Vᵀ C; W = -op(T) W; C -= V W."""
    fn, r = internal(module, blk, "qr_apply", [PTR, I64, I64])
    if r is None:
        return fn
    ctx, start, end = r.args
    b = r.b
    rows, width, v, ldv, t, c, rsc, csc, columns, transpose = r.unpack(ctx, 10)
    panel, tv = View(r.element_pointer(v), ldv, i64(1)), View(r.element_pointer(t), i64(MAX_BLOCK), i64(1))
    transpose = b.icmp_signed("!=", transpose, i64(0))
    tile = r.tile(MAX_BLOCK * CHUNK_COLUMNS)
    w = View(tile, i64(CHUNK_COLUMNS), i64(1))
    with for_range(b, start, end) as chunk:
        first = b.mul(chunk, i64(CHUNK_COLUMNS))
        count = r.min(i64(CHUNK_COLUMNS), b.sub(columns, first))
        block = View(r.element_pointer(c), rsc, csc).block(b, i64(0), first)
        r.fill(w, width, count, 0.0)
        update(r, width, count, rows, panel.T, block, w)
        b.call(_triangular_product_function(module, blk), [width, count, tv.ptr, tile, transpose])
        update(r, rows, count, width, panel, w, block)
    b.ret_void()
    return fn


def _triangular_product_function(module: ir.Module, blk: gemm.Blocking) -> ir.Function:
    """(width, count, t, w, i1 transpose): w[width, count] := -op(T) w in place (row strides MAX_BLOCK and
    CHUNK_COLUMNS), op(T) = Tᵀ (lower: rows from the last) or T (upper: rows from the first)."""
    ptr = blk.elem.as_pointer()
    fn, r = internal(module, blk, "qr_triangular_product", [I64, I64, ptr, ptr, I1], kernel=True)
    if r is None:
        return fn
    width, count, t, w, transpose = r.args
    b, tv = r.b, View(t, i64(MAX_BLOCK), i64(1))
    accumulators = [r.entry.alloca(r.vector) for _ in range(CHUNK_VECTORS)]

    def chunk(j: ir.Value, masks: list[ir.Value | None]) -> None:
        def vector(i: ir.Value, k: int) -> ir.Value:
            return b.gep(w, [b.add(b.mul(i, i64(CHUNK_COLUMNS)), b.add(j, i64(k * blk.vl)))])
        with for_range(b, i64(0), width) as step:
            i = b.select(transpose, b.sub(b.sub(width, i64(1)), step), step)
            for acc in accumulators:
                b.store(ir.Constant(r.vector, None), acc)
            first, last = b.select(transpose, i64(0), i), b.select(transpose, b.add(i, i64(1)), width)
            with for_range(b, first, last) as p:
                coefficient = r.splat(b.select(transpose, r.load(tv, p, i), r.load(tv, i, p)))
                for k, acc in enumerate(accumulators):
                    b.store(r.fma(coefficient, r.vload(vector(p, k), masks[k]), b.load(acc)), acc)
            for k, acc in enumerate(accumulators):
                r.vstore(b.fneg(b.load(acc)), vector(i, k), masks[k])
    r.chunks(count, CHUNK_VECTORS, chunk)
    b.ret_void()
    return fn


def apply_panels(r: Routine, rows: ir.Value, count: ir.Value, shift: ir.Value, reflectors: View, c: View,
                 columns: ir.Value, nb: ir.Value, t: ir.Value, gram: ir.Value) -> None:
    """c[rows, columns] := H_0 ⋯ H_{count-1} c, H_k's unit vector in column k of `reflectors` from row
    k + shift down (zeros above): panels of nb reflectors, the last first, each a block reflector
    (t, gram: tiles of MAX_BLOCK x MAX_BLOCK). How eigh and svd form their vectors from the reductions'."""
    b = r.b
    panels = b.sdiv(b.add(count, b.sub(nb, i64(1))), nb)
    with for_range(b, i64(0), panels) as step:
        j = b.mul(b.sub(b.sub(panels, i64(1)), step), nb)
        width = r.min(nb, b.sub(count, j))
        first = b.add(j, shift)
        height = b.sub(rows, first)
        panel = reflectors.block(b, first, j)
        block_reflector(r, height, width, panel, t, gram)
        apply_reflectors(r, height, width, panel, t, c.block(b, first, i64(0)), columns, False)
