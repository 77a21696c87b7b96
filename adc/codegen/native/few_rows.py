"""Products of few rows or one column, for which the gemm's packed blocks would serve one strip of
rows or fill one lane of each vector: a few rows times a large row-major B stream B row by row
(`stream_function`), and a row-major A times a vector sums rows in a vector's lanes
(`matrix_vector_function`). Both make the block sums the micro-kernels make (gemm.py), so C's bits
do not depend on the path. `blk` is the dtype's gemm.Blocking.
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.lowering.loops import I32, I64, for_range
from adc.codegen.lowering.shuffles import transposed
from adc.codegen.native.simd import (PACK_ALIGN, const, fma_intrinsic, internal_function, is_zero, lanes_below,
                                     masked_intrinsic, masked_store_or_add, minimum, splat, store_or_add)

# The stream of B for a few rows (stream_function): their sums of a chunk of columns fit this
# (in L2), and B's rows are read this many at a time (each row of sums loaded and stored once a group)
STREAM_BYTES = 128 << 10
STREAM_ROWS = 8
# Rows of a matrix-vector product summed at a time, one a vector lane (matrix_vector_function): each
# is a stream of A read at once, and 16 rows a power of two of cache lines apart share the L1 sets
# of 8 (1024 x 1024 f32, one thread, Zen 4: 0.25 ms with 16 rows, 0.12 when rows are 1000
# elements apart; two vectors of 8 f64 rows took 0.43 ms, one 0.17-0.22, NumPy's 0.13)
MATRIX_VECTOR_ROWS = 8


def stream_function(module: ir.Module, blk) -> ir.Function:
    """C[M, N] = A @ B for M <= MR and a large row-major B, B read once, row by row, in the order
    it lies in memory: the blocked nest reads each KC x NC block of B down its columns to pack it,
    runs of NC elements across rows far apart, which streamed a 4096 x 4096 f64 B at 7-8 GB/s
    against OpenBLAS's 23 (8 x 4096 @ 4096 x 4096 f64, one thread, Zen 4), and its packed panels
    serve one strip of rows only. Columns are taken in chunks whose M rows of sums fit
    STREAM_BYTES; within a chunk, each KC-deep block of B's rows (the blocked nest's KC) is summed
    from zero, STREAM_ROWS rows of B at a time, each sum in the order of the rows, then stored or
    added to C: the block sums the micro-kernels make, so C's bits do not depend on the path.
    Arguments: M, N, K > 0, A, rsa, csa, B, rsb (csb = 1), C, ldc, KC."""
    name = f"adc_gemm_{blk.dtype}_stream"
    if name in module.globals:
        return module.globals[name]
    ptr = blk.elem.as_pointer()
    func = internal_function(module, name, [I64, I64, I64, ptr, I64, I64, ptr, I64, ptr, I64, I64])
    m, n, k, a, rsa, csa, b, rsb, c, ldc, block_depth = func.args
    builder = ir.IRBuilder(func.append_basic_block("entry"))
    vl, chunk = blk.vl, STREAM_BYTES // (blk.mr * blk.elem_align) // blk.vl * blk.vl     # rows whole vectors apart
    sums = builder.alloca(blk.elem, size=const(blk.mr * chunk))
    sums.align = PACK_ALIGN
    vector_pointer = blk.vector.as_pointer()

    def vector_at(base: ir.Value, offset: ir.Value) -> ir.Value:
        return builder.bitcast(builder.gep(base, [offset]), vector_pointer)

    def columns(width: ir.Value, body) -> None:
        """body(column, mask) over width's vectors: whole ones (mask None), then a partial one."""
        whole = builder.mul(builder.sdiv(width, const(vl)), const(vl))
        with for_range(builder, const(0), whole, const(vl)) as column:
            body(column, None)
        with builder.if_then(builder.icmp_signed("<", whole, width)):
            body(whole, lanes_below(builder, blk.vl, builder.sub(width, whole)))

    with for_range(builder, const(0), n, const(chunk)) as jc:
        width = minimum(builder, const(chunk), builder.sub(n, jc))
        with for_range(builder, const(0), k, block_depth) as pc:
            kc = minimum(builder, block_depth, builder.sub(k, pc))
            with for_range(builder, const(0), m, const(1)) as row:
                row_sums = builder.gep(sums, [builder.mul(row, const(chunk))])
                columns(width, lambda column, mask: builder.store(
                    ir.Constant(blk.vector, None), vector_at(row_sums, column), align=blk.vector_align))
            grouped = builder.mul(builder.sdiv(kc, const(STREAM_ROWS)), const(STREAM_ROWS))
            for start, end, rows in ((const(0), grouped, STREAM_ROWS), (grouped, kc, 1)):
                with for_range(builder, start, end, const(rows)) as p:
                    first_row = builder.add(pc, p)
                    b_rows = builder.gep(b, [builder.add(builder.mul(first_row, rsb), jc)])
                    a_rows = builder.gep(a, [builder.mul(first_row, csa)])
                    columns(width, lambda column, mask, a_rows=a_rows, b_rows=b_rows, rows=rows: _stream_rows(
                        builder, blk, rows, m, (a_rows, rsa, csa), (b_rows, rsb), (sums, chunk), column, mask))
            first = is_zero(builder, pc)
            with for_range(builder, const(0), m, const(1)) as row:
                row_sums = builder.gep(sums, [builder.mul(row, const(chunk))])
                c_row = builder.gep(c, [builder.add(builder.mul(row, ldc), jc)])

                def store(column, mask, row_sums=row_sums, c_row=c_row):
                    value = builder.load(vector_at(row_sums, column), align=blk.vector_align)
                    dst = vector_at(c_row, column)
                    if mask is None:
                        store_or_add(builder, first, value, dst, blk.elem_align)
                    else:
                        masked_store_or_add(builder, first, value, dst, mask, blk.elem_align)
                columns(width, store)
    builder.ret_void()
    return func


def matrix_vector_function(module: ir.Module, blk) -> ir.Function:
    """C[M, 1] = A @ B[K, 1] for a row-major A, a matrix-vector product, with MATRIX_VECTOR_ROWS rows
    of C in a vector's lanes: the micro-kernels, whose vectors run along C's rows, would fill one
    lane of each (4096 x 4096 f64, one thread, Zen 4: 9.8 -> 5.7 ms, OpenBLAS 6.1). A is read 8 x 8
    elements at a time, 8 rows of 8 consecutive elements, transposed in registers, so each lane's
    sum runs down its row in order, in KC-deep block sums from zero stored or added to C, as the
    micro-kernels' sums do: C has the bits of the blocked path's. Each lane's sum is one chain of
    dependent FMAs, and FMA latency bounds the product of a matrix in cache (1024 x 1024: 0.17 ms
    f64, 0.15 f32; OpenBLAS 0.13, 0.06). Two KC blocks summed at once, two chains, took the f32 one
    to 0.12 ms, but with 16 rows of A streamed at once a 4096 x 4096 one from memory took 9.3 ms
    f64, 7.3 f32. The last M mod 8 rows are summed one at a time. Arguments: M, K > 0, A, rsa
    (csa = 1), B, rsb, C, ldc, KC."""
    name = f"adc_gemm_{blk.dtype}_matrix_vector"
    if name in module.globals:
        return module.globals[name]
    ptr = blk.elem.as_pointer()
    func = internal_function(module, name, [I64, I64, ptr, I64, ptr, I64, ptr, I64, I64])
    m, k, a, rsa, b, rsb, c, ldc, block_depth = func.args
    builder = ir.IRBuilder(func.append_basic_block("entry"))
    lanes = MATRIX_VECTOR_ROWS
    vector = ir.VectorType(blk.elem, lanes)
    fma = fma_intrinsic(module, vector)
    scalar_fma = module.declare_intrinsic("llvm.fma", [blk.elem], ir.FunctionType(blk.elem, [blk.elem] * 3))
    sums, scalar_sum = builder.alloca(vector), builder.alloca(blk.elem)      # in the entry block: registers

    def row_at(row: ir.Value) -> ir.Value:
        return builder.gep(a, [builder.mul(row, rsa)])

    def x_at(p: ir.Value) -> ir.Value:
        return builder.load(builder.gep(b, [builder.mul(p, rsb)]))

    def block_sum(row: ir.Value, pc: ir.Value, depth: ir.Value) -> None:
        """sums = A[row:row + 8, pc:pc + depth] @ x[pc:pc + depth], from zero, lane by row."""
        builder.store(ir.Constant(vector, None), sums)
        whole = builder.add(pc, builder.mul(builder.sdiv(depth, const(lanes)), const(lanes)))
        rows = [row_at(builder.add(row, const(r))) for r in range(lanes)]
        with for_range(builder, pc, whole, const(lanes)) as p:
            tile = [builder.load(builder.bitcast(builder.gep(start, [p]), vector.as_pointer()), align=blk.elem_align)
                    for start in rows]
            total = builder.load(sums)
            for q, column in enumerate(transposed(builder, tile)):
                total = builder.call(fma, [column, splat(builder, vector, x_at(builder.add(p, const(q)))), total])
            builder.store(total, sums)
        with for_range(builder, whole, builder.add(pc, depth), const(1)) as p:
            column = ir.Constant(vector, None)
            for r, start in enumerate(rows):
                column = builder.insert_element(column, builder.load(builder.gep(start, [p])), const(r, I32))
            builder.store(builder.call(fma, [column, splat(builder, vector, x_at(p)), builder.load(sums)]), sums)

    tiled = builder.mul(builder.sdiv(m, const(lanes)), const(lanes))
    with for_range(builder, const(0), tiled, const(lanes)) as row:
        with for_range(builder, const(0), k, block_depth) as pc:
            block_sum(row, pc, minimum(builder, block_depth, builder.sub(k, pc)))
            total = builder.load(sums)
            for r in range(lanes):
                store_or_add(builder, is_zero(builder, pc), builder.extract_element(total, const(r, I32)),
                              builder.gep(c, [builder.mul(builder.add(row, const(r)), ldc)]), blk.elem_align)
    with for_range(builder, tiled, m, const(1)) as row:
        with for_range(builder, const(0), k, block_depth) as pc:
            builder.store(ir.Constant(blk.elem, 0.0), scalar_sum)
            with for_range(builder, pc, builder.add(pc, minimum(builder, block_depth, builder.sub(k, pc))), const(1)) as p:
                element = builder.load(builder.gep(row_at(row), [p]))
                builder.store(builder.call(scalar_fma, [element, x_at(p), builder.load(scalar_sum)]), scalar_sum)
            store_or_add(builder, is_zero(builder, pc), builder.load(scalar_sum), builder.gep(c, [builder.mul(row, ldc)]),
                          blk.elem_align)
    builder.ret_void()
    return func


def _stream_rows(builder: ir.IRBuilder, blk, rows: int, m: ir.Value, a_rows: tuple, b_rows: tuple,
                 sums: tuple, column: ir.Value, mask: ir.Value | None) -> None:
    """sums[r, column:column + VL] += A[r, p + i] * B[p + i, column:column + VL] for i < `rows`, in
    that order, for each of the m rows r: B's `rows` vectors loaded once (the lanes `mask` leaves
    out read as zero, never from memory), a fused multiply-add each, as the micro-kernels make them."""
    (a, rsa, csa), (b, rsb), (row_sums, chunk) = a_rows, b_rows, sums
    vector_pointer = blk.vector.as_pointer()
    fma = fma_intrinsic(builder.module, blk.vector)
    b_vectors = []
    for i in range(rows):
        src = builder.bitcast(builder.gep(b, [builder.add(builder.mul(const(i), rsb), column)]), vector_pointer)
        b_vectors.append(builder.load(src, align=blk.elem_align) if mask is None else builder.call(
            masked_intrinsic(builder.module, blk.vector, "load"),
            [src, ir.Constant(I32, blk.elem_align), mask, ir.Constant(blk.vector, None)]))
    with for_range(builder, const(0), m, const(1)) as r:
        offset = builder.add(builder.mul(r, const(chunk)), column)
        dst = builder.bitcast(builder.gep(row_sums, [offset]), vector_pointer)
        acc = builder.load(dst, align=blk.vector_align)
        for i, b_vector in enumerate(b_vectors):
            x = builder.load(builder.gep(a, [builder.add(builder.mul(r, rsa), builder.mul(const(i), csa))]))
            acc = builder.call(fma, [splat(builder, blk.vector, x), b_vector, acc])
        builder.store(acc, dst, align=blk.vector_align)
