"""Matrix products: `adc_rt_gemm_<dtype>`, a register-blocked kernel in the runtime library.

Lowering turns each IR `matmul` into calls of one function per dtype, defined
once per target in the shared runtime library (runtime_library.py) and only
declared in kernel modules, so no module re-optimizes it:

    void adc_rt_gemm_f32(i64 M, i64 N, i64 K, float* A, i64 rsa, i64 csa, float* B, i64 rsb, i64 csb,
                         float* C, i64 ldc)
        ; C[M,N] = A[M,K] @ B[K,N]; A[i,p] at A[i*rsa + p*csa], B[p,j] at B[p*rsb + j*csb]
        ; (a transposed operand is read in place); C[i,j] at C[i*ldc + j], overwritten

The kernel is the classic Goto/BLIS loop nest, shaped for row-major C
with SIMD vectors along N:

    for jc in 0..N step NC:                    # columns of B and C
      for pc in 0..K step KC:                  # depth block
        pack B[pc:pc+kc, jc:jc+nc] into panels of NR columns (zero padded)
        for ic in 0..M step MR:                # rows of A and C
          for each panel: micro-kernel MRxNR   # accumulators in vector registers

The micro-kernel keeps MR x (NR/VL) vector accumulators and, per k, loads NR/VL vectors of the
packed panel, broadcasts MR elements of A and issues `llvm.fma` on generic LLVM vectors as wide as
the target's registers (`<16 x float>` with AVX-512, `<8 x float>` with AVX2: `blocking(dtype,
Target.vector_bits)`). Rows left over (M mod MR) use micro-kernels of fewer rows, the last, narrower
panel a micro-kernel of fewer vectors; its padding lanes are zeroed when packed (defined values, no
denormal or NaN garbage from the stack) and never stored. The packed block (at most
MAX_PACKED_BYTES) and a strip of A live on the stack; the one heap block, for the strips of a large
A read down its columns (`_copy_strips_once`), has the stack's strip to fall back on, so the kernel
cannot fail. A small row-major B (`Blocking.direct_bytes`) is not packed: the micro-kernels read
its whole panels in place, rows `rsb` apart, and only the last, narrower panel is packed. A larger
row-major B times at most MR rows (a vector-matrix product, a small batch), or one past
FEW_ROWS_STREAM_BYTES times one or two rows, is streamed instead, row by row in memory order, into
the same block sums (few_rows.py). Only ordinary IEEE arithmetic is used (no fast-math flags), so
NaN and inf propagate as in BLAS. Why not call a BLAS: docs/architecture.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from adc.abi import RUNTIME_GEMM_DTYPES, runtime_gemm_symbol
from adc.codegen.lowering.loops import I1, I64, PTR, for_range
from adc.codegen.native import heap
from adc.codegen.native.few_rows import matrix_vector_function, stream_function
from adc.codegen.native.simd import (PACK_ALIGN, const, fma_intrinsic, internal_function, is_zero, lanes_below,
                                     masked_store_or_add, minimum, splat, store_or_add)
from adc.ir.types import DType

ELEMENT_TYPES = {DType.f32: ir.FloatType(), DType.f64: ir.DoubleType()}
# One or two rows times a row-major B of more than this many bytes stream B (few_rows.py), where
# a B of up to Blocking.direct_bytes serves more rows in place: a strip of one or two rows loads a
# vector of B for one or two FMAs, and B's rows a power of two of cache lines apart share L1 sets
# (one thread, Zen 4, read in place -> streamed: 1 x 128 x 512 f64 39.6 -> 8.2 us, 1 x 256 x 256
# f64 15.5 -> 9.0, 1 x 128 x 512 f32 8.3 -> 4.1; at 128 KiB and less streaming lost up to 30%)
FEW_ROWS_STREAM_BYTES = 128 << 10
# The packed block's stack space at most: an eighth of a thread's default 8 MiB stack, and the L2
# cache of every AVX-512 CPU (gemm_tuning.py measures blocks up to this size)
MAX_PACKED_BYTES = 1 << 20
# An A read down its columns across three or more blocks of B has the copy of its full strips on the heap
# (_copy_strips_once) when it takes this many bytes: from where huge pages pay (heap.py) up to a bound
# on the memory a product borrows; outside it each block of B copies the strips it reads on the stack
STRIP_COPY_BYTES = (4 << 20, 64 << 20)


@dataclass(frozen=True)
class Blocking:
    """Tile sizes of the built-in kernel for one dtype and vector width.

    `vl` lanes per vector; the micro-kernel computes `mr` rows x `nr` columns
    (`nr` a multiple of `vl`) with `mr * nr / vl` accumulators, chosen to fill
    most of the vector registers (32 with AVX-512, 16 with AVX2 or SSE, counting
    the `nr / vl` panel vectors and one broadcast) and to hide the FMA latency.
    `kc` x `nc` is the packed block of B, kept on the stack (in L2, one panel in L1). Every row
    strip of A is read once per block: f64's 128 columns (256 KiB) stream A a quarter as often as
    32 did (one thread, 2048 x 2048 x 2048: 211 -> 167 ms with AVX-512, 358 -> 311 with AVX2; no
    size measured slower, 64 x 64 to 4096 x 128 x 4096; f32's 64 -> 256 changed nothing on Zen 5).
    With 512-bit vectors the block is 512 KiB, half the L2 of every AVX-512 CPU (1 MiB and more):
    on Zen 4, one thread, 2048 x 2048 x 2048 went from 95 to 107 GFLOP/s f32 (nc 64 -> 512) and
    from 51 to 53 f64 (nc 128 -> 256), level with OpenBLAS; AVX2 CPUs have 256-512 KiB of L2.
    The table's `kc` and `nc` are where the search starts: the runtime library's first build on
    a machine times blocks around them and keeps the fastest (driver/gemm_tuning.py).

    A row-major B of at most `direct_bytes` is read in place, not packed: half the L2 of every CPU
    with these vectors (1 MiB and more with AVX-512, 256-512 KiB with AVX2), so it stays in L2
    whatever its layout. Packing cost a 32 x 128 @ 128 x 128 product an eighth of its time, and
    with AVX-512 a 256 x 256 f64 B read in place instead of packed took 9 x 256 @ 256 x 256 from
    37.1 to 23.6 us, 32 rows from 89.1 to 74.5, 256 rows from 600 to 588 (one thread, Zen 4).
    """

    dtype: DType
    elem: ir.Type
    vl: int
    mr: int
    nr: int
    kc: int
    nc: int
    direct_bytes: int

    @property
    def vector(self) -> ir.VectorType:
        return ir.VectorType(self.elem, self.vl)

    @property
    def elem_align(self) -> int:
        return 4 if isinstance(self.elem, ir.FloatType) else 8

    @property
    def vector_align(self) -> int:
        """A vector's bytes: the alignment of vectors a whole number of vectors into an aligned block."""
        return self.vl * self.elem_align

    @property
    def vectors_per_row(self) -> int:
        return self.nr // self.vl


# (dtype, vector bits) -> tiles: 8x32 f32 = 16 zmm accumulators; 6x16 f32 = 12 ymm (Haswell..Zen)
BLOCKINGS = {
    (DType.f32, 512): Blocking(DType.f32, ir.FloatType(), vl=16, mr=8, nr=32, kc=256, nc=512, direct_bytes=512 << 10),
    (DType.f64, 512): Blocking(DType.f64, ir.DoubleType(), vl=8, mr=8, nr=16, kc=256, nc=256, direct_bytes=512 << 10),
    (DType.f32, 256): Blocking(DType.f32, ir.FloatType(), vl=8, mr=6, nr=16, kc=256, nc=64, direct_bytes=256 << 10),
    (DType.f64, 256): Blocking(DType.f64, ir.DoubleType(), vl=4, mr=6, nr=8, kc=256, nc=128, direct_bytes=256 << 10),
    (DType.f32, 128): Blocking(DType.f32, ir.FloatType(), vl=4, mr=6, nr=8, kc=256, nc=64, direct_bytes=256 << 10),
    (DType.f64, 128): Blocking(DType.f64, ir.DoubleType(), vl=2, mr=6, nr=4, kc=256, nc=32, direct_bytes=256 << 10),
}


def blocking(dtype: DType, vector_bits: int) -> Blocking:
    """The tiles for `dtype` on a target whose widest vectors have `vector_bits` (Target.vector_bits)."""
    if (dtype, vector_bits) not in BLOCKINGS:
        raise ValueError(f"matmul is defined for f32 and f64 with 128-, 256- or 512-bit vectors, "
                         f"not {dtype} with {vector_bits}")
    return BLOCKINGS[dtype, vector_bits]


def table(vector_bits: int) -> dict[DType, Blocking]:
    """The tiles of every dtype the runtime library's gemm serves, for `vector_bits` (BLOCKINGS)."""
    return {dtype: blocking(dtype, vector_bits) for dtype in RUNTIME_GEMM_DTYPES}


def _gemm_type(dtype: DType) -> ir.FunctionType:
    ptr = ELEMENT_TYPES[dtype].as_pointer()
    return ir.FunctionType(ir.VoidType(), [I64, I64, I64, ptr, I64, I64, ptr, I64, I64, ptr, I64])


def declare_gemm(module: ir.Module, dtype: DType) -> ir.Function:
    """The runtime library's `adc_rt_gemm_<dtype>`, declared in a kernel module that calls it."""
    name = runtime_gemm_symbol(str(dtype))
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, _gemm_type(dtype), name)


def define_gemm(module: ir.Module, blk: Blocking) -> ir.Function:
    """Define `void adc_rt_gemm_<dtype>(i64 M, i64 N, i64 K, T* A, i64 rsa, i64 csa, T* B, i64 rsb,
    i64 csb, T* C, i64 ldc)` in the runtime library (runtime_library.py), with the tiles of `blk`; the
    blocked nest stays internal. A[i, p] is A[i*rsa + p*csa] and B[p, j] is B[p*rsb + j*csb], so
    either operand may be read transposed (rsa = 1, csa = M: A stored as its M-column transpose)
    without a copy; C[i, j] is C[i*ldc + j] (ldc >= N), so C may be a band of columns of a larger
    row-major matrix, which is how lowering splits a product of a few rows across threads.

    A and B may be the same buffer; C must overlap neither (noalias).
    """
    func = declare_gemm(module, blk.dtype)
    m, n, k, a, rsa, csa, b, rsb, csb, c, ldc = func.args
    for arg, arg_name in zip(func.args, ("M", "N", "K", "A", "rsa", "csa", "B", "rsb", "csb", "C", "ldc")):
        arg.name = arg_name
    for pointer in (a, b, c):
        pointer.add_attribute("noalias")
    builder = ir.IRBuilder(func.append_basic_block("entry"))
    _return_if(builder, builder.or_(is_zero(builder, m), is_zero(builder, n)))
    with builder.if_then(is_zero(builder, k)):
        with for_range(builder, const(0), m, const(1)) as row:
            _fill_zero(builder, blk, builder.gep(c, [builder.mul(row, ldc)]), n)
        builder.ret_void()
    builder.call(_kernel_function(module, blk), [*func.args, ir.Constant(I1, 0), *_block_sizes(blk), _no_strips(blk)])
    builder.ret_void()
    return func


def define_tunable_gemm(module: ir.Module, blk: Blocking, name: str) -> ir.Function:
    """Define `void <name>(<adc_rt_gemm_<dtype>'s arguments>, i64 KC, i64 NC)`: C = A @ B with `blk`'s
    register tile and a packed block of KC x NC elements (NC a multiple of NR, KC * NC at most
    MAX_PACKED_BYTES), both given at run time, for gemm_tuning.py to time candidate blocks with one
    compile. M, N, K > 0."""
    func = ir.Function(module, ir.FunctionType(ir.VoidType(), [*_gemm_type(blk.dtype).args, I64, I64]), name)
    builder = ir.IRBuilder(func.append_basic_block("entry"))
    *gemm_args, block_depth, block_width = func.args
    builder.call(_kernel_function(module, blk), [*gemm_args, ir.Constant(I1, 0), block_depth, block_width, _no_strips(blk)])
    builder.ret_void()
    return func


def define_subtract(module: ir.Module, blk: Blocking) -> ir.Function:
    """Define the runtime library's internal `void adc_gemm_<dtype>_subtract(i64 M, i64 N, i64 K, T* A,
    i64 rsa, i64 csa, T* B, i64 rsb, i64 csb, T* C, i64 ldc)`: C[M,N] -= A @ B, C[i, j] at C[i*ldc + j]
    (a block of a larger row-major matrix), the update of every blocked factorization (blocked.py).
    B is packed negated and the products added, so C - Σ a b is rounded as a subtraction would be."""
    name = f"adc_gemm_{blk.dtype}_subtract"
    if name in module.globals:
        return module.globals[name]
    ptr = ELEMENT_TYPES[blk.dtype].as_pointer()
    func = internal_function(module, name, [I64, I64, I64, ptr, I64, I64, ptr, I64, I64, ptr, I64])
    m, n, k = func.args[:3]
    builder = ir.IRBuilder(func.append_basic_block("entry"))
    _return_if(builder, builder.or_(builder.or_(is_zero(builder, m), is_zero(builder, n)), is_zero(builder, k)))
    builder.call(_kernel_function(module, blk), [*func.args, ir.Constant(I1, 1), *_block_sizes(blk), _no_strips(blk)])
    builder.ret_void()
    return func


def _kernel_function(module: ir.Module, blk: Blocking) -> ir.Function:
    """The blocked loop nest for M, N, K > 0 (adc_rt_gemm_<dtype>'s arguments, C's row stride last,
    then `subtract`: C -= A @ B instead of C = A @ B, the packed block's depth KC and width NC,
    which its callers in the library pass as constants and the optimizer propagates, and `strips`:
    null, or room for the copy of every full strip of an A read down its columns (_copy_strips_once))."""
    name = f"adc_gemm_{blk.dtype}_kernel"
    if name in module.globals:
        return module.globals[name]
    func = internal_function(module, name, [*_gemm_type(blk.dtype).args, I1, I64, I64, blk.elem.as_pointer()])
    m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, subtract, block_depth, block_width, strips = func.args
    builder = ir.IRBuilder(func.append_basic_block("entry"))
    b_elements = builder.mul(k, n)
    small = builder.icmp_signed("<=", b_elements, const(blk.direct_bytes // blk.elem_align))
    row_major = builder.icmp_signed("==", csb, const(1))
    few_rows = builder.icmp_signed("<=", m, const(blk.mr))
    one_or_two = builder.icmp_signed("<=", m, const(2))
    past_stream_bytes = builder.icmp_signed(">", b_elements, const(FEW_ROWS_STREAM_BYTES // blk.elem_align))
    streams = builder.and_(few_rows, builder.select(one_or_two, past_stream_bytes, builder.not_(small)))
    with builder.if_then(builder.and_(builder.and_(streams, row_major), builder.not_(subtract))):
        builder.call(stream_function(module, blk), [m, n, k, a, rsa, csa, b, rsb, c, ldc, block_depth])
        builder.ret_void()
    one_column = builder.and_(builder.icmp_signed("==", n, const(1)), builder.not_(subtract))
    # A @ x with A stored as its transpose, and C contiguous: xᵀ @ Aᵀ, a row times a row-major matrix
    c_contiguous = builder.and_(builder.icmp_signed("==", ldc, const(1)), builder.icmp_signed("==", rsa, const(1)))
    with builder.if_then(builder.and_(one_column, c_contiguous)):
        builder.call(stream_function(module, blk), [const(1), m, k, b, const(0), rsb, a, csa, c, m, block_depth])
        builder.ret_void()
    with builder.if_then(builder.and_(one_column, builder.icmp_signed("==", csa, const(1)))):
        builder.call(matrix_vector_function(module, blk), [m, k, a, rsa, b, rsb, c, ldc, block_depth])
        builder.ret_void()
    full_rows = builder.mul(builder.sdiv(m, const(blk.mr)), const(blk.mr))
    _copy_strips_once(builder, blk, func, full_rows)
    on_heap = builder.icmp_unsigned("!=", strips, _no_strips(blk))
    packed = builder.alloca(blk.elem, size=builder.mul(block_depth, block_width))
    packed.align = PACK_ALIGN
    strip = builder.alloca(blk.elem, size=builder.mul(block_depth, const(blk.mr)))
    strip.align = PACK_ALIGN
    direct = builder.and_(builder.and_(small, row_major), builder.not_(subtract))
    nr = const(blk.nr)
    with for_range(builder, const(0), n, block_width) as jc:
        nc = minimum(builder, block_width, builder.sub(n, jc))
        # direct: only the last panel, if narrower than NR, is packed (zero padded)
        packed_from = builder.select(direct, builder.mul(builder.sdiv(nc, nr), nr), const(0))
        with for_range(builder, const(0), k, block_depth) as pc:
            kc = minimum(builder, block_depth, builder.sub(k, pc))
            b_block = builder.gep(b, [builder.add(builder.mul(pc, rsb), builder.mul(jc, csb))])
            builder.call(_pack_function(module, blk),
                         [builder.gep(b_block, [builder.mul(packed_from, csb)]), rsb, csb, kc,
                          builder.sub(nc, packed_from), builder.gep(packed, [builder.mul(packed_from, kc)]), subtract])
            first = builder.and_(is_zero(builder, pc), builder.not_(subtract))
            a_block = builder.gep(a, [builder.mul(pc, csa)])
            c_block = builder.gep(c, [jc])
            # an A copied strip by strip: the strips of this depth block at pc * full_rows, each kc deep
            strip_copies = builder.select(on_heap, builder.gep(strips, [builder.mul(pc, full_rows)]), strip)
            copies = (strip_copies, builder.select(on_heap, kc, const(0)), builder.and_(on_heap, builder.icmp_signed(">", jc, const(0))))
            builder.call(_block_function(module, blk),
                         [m, rsa, csa, ldc, kc, nc, a_block, packed, c_block, first, b_block, rsb, direct, *copies])
    builder.ret_void()
    return func


def _copy_strips_once(builder: ir.IRBuilder, blk: Blocking, kernel: ir.Function, full_rows: ir.Value) -> None:
    """Where A is read down its columns across more than two NC-wide blocks of B, and the copy of
    its full strips takes STRIP_COPY_BYTES: `kernel` again with room for the copy on the heap, then
    return. Each block of B would read every strip from A again, its elements a stored row apart a
    k, and copy it for its own panels (_strip); with the room, the first block of B copies every
    strip once and the others read the copies: the same elements in the same order, the same bits.
    Writing the copy and the fresh pages under it cost about one more pass over A, so two blocks
    of B gain nothing (2048 x 2048 x 256 f64, one thread, Zen 4: 46 ms either way, 48 with the copy).
    Where malloc fails, the kernel goes on without the room."""
    m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, subtract, block_depth, block_width, strips = kernel.args
    size = builder.mul(builder.mul(full_rows, k), const(blk.elem_align))
    fits = builder.and_(builder.icmp_signed(">=", size, const(STRIP_COPY_BYTES[0])),
                        builder.icmp_signed("<=", size, const(STRIP_COPY_BYTES[1])))
    three_blocks = builder.icmp_signed(">", n, builder.mul(const(2), block_width))
    across = builder.and_(builder.icmp_signed("!=", csa, const(1)), three_blocks)
    with builder.if_then(builder.and_(builder.and_(across, fits), builder.icmp_unsigned("==", strips, _no_strips(blk)))):
        block = heap.allocate(builder, size)
        with builder.if_then(builder.icmp_unsigned("!=", block, ir.Constant(PTR, None))):
            builder.call(kernel, [*kernel.args[:-1], builder.inttoptr(builder.ptrtoint(block, I64), strips.type)])
            heap.release(builder, block)
            builder.ret_void()


def _no_strips(blk: Blocking) -> ir.Constant:
    return ir.Constant(blk.elem.as_pointer(), None)


def _block_sizes(blk: Blocking) -> tuple[ir.Constant, ir.Constant]:
    return const(blk.kc), const(blk.nc)


def _pack_function(module: ir.Module, blk: Blocking) -> ir.Function:
    """Copy a kc x nc block of B (strides rsb, csb) into NR-column panels, zero padded, each
    element negated when `negate`.

    Panel p holds columns p*NR .. p*NR+NR-1 as kc rows of NR contiguous
    elements, so the micro-kernel reads whole aligned vectors. A row-major B's whole panels are
    copied a row of the block at a time, in vectors: its rows are read in order, as they lie in
    memory (a block of 256 x 2048 @ 2048 x 2048 f64: 43.1 -> 41.5 ms, one thread, Zen 4; 8 x 784 @
    784 x 512, mostly packing: 0.28 -> 0.24 ms). The rest, a B read transposed or the last, narrower
    panel, is copied element by element.
    """
    ptr = blk.elem.as_pointer()
    func = internal_function(module, f"adc_gemm_{blk.dtype}_pack", [ptr, I64, I64, I64, I64, ptr, I1])
    src, rsb, csb, kc, nc, dst, negate = func.args
    builder = ir.IRBuilder(func.append_basic_block("entry"))
    nr = const(blk.nr)
    row_major = builder.icmp_signed("==", csb, const(1))
    whole = builder.select(row_major, builder.mul(builder.sdiv(nc, nr), nr), const(0))
    vector_pointer = blk.vector.as_pointer()
    with for_range(builder, const(0), kc, const(1)) as row:
        from_row = builder.gep(src, [builder.mul(row, rsb)])
        to_row = builder.gep(dst, [builder.mul(row, nr)])
        with for_range(builder, const(0), whole, nr) as col:
            panel_row = builder.gep(to_row, [builder.mul(col, kc)])
            for v in range(blk.vectors_per_row):
                x = builder.load(builder.bitcast(builder.gep(from_row, [builder.add(col, const(v * blk.vl))]),
                                                 vector_pointer), align=blk.elem_align)
                builder.store(builder.select(negate, builder.fneg(x), x),
                              builder.bitcast(builder.gep(panel_row, [const(v * blk.vl)]), vector_pointer),
                              align=blk.vector_align)     # panel rows are whole vectors apart
    with for_range(builder, whole, nc, nr) as col:
        width = minimum(builder, nr, builder.sub(nc, col))
        panel = builder.gep(dst, [builder.mul(col, kc)])
        with for_range(builder, const(0), kc, const(1)) as row:
            from_row = builder.gep(src, [builder.add(builder.mul(row, rsb), builder.mul(col, csb))])
            to_row = builder.gep(panel, [builder.mul(row, nr)])
            with for_range(builder, const(0), width, const(1)) as j:
                x = builder.load(builder.gep(from_row, [builder.mul(j, csb)]))
                builder.store(builder.select(negate, builder.fneg(x), x), builder.gep(to_row, [j]))
            with for_range(builder, width, nr, const(1)) as j:
                builder.store(ir.Constant(blk.elem, 0.0), builder.gep(to_row, [j]))
    builder.ret_void()
    return func


def _block_function(module: ir.Module, blk: Blocking) -> ir.Function:
    """All rows of C times one block of B, packed or (`direct`) read in place: full MR-row strips,
    then the leftover rows. Fewer than MR / 2 rows left over and the last full strip are two strips
    of about equal rows (MR = 8, 10 rows: 5 and 5, not 8 and 2): a strip of one or two rows has too
    few accumulators to hide the FMAs' latency and loads a panel's vectors for little arithmetic
    (one thread, Zen 4: 9 x 256 @ 256 x 256 f32 13.8 -> 11.4 us, 33 x 128 @ 128 x 128 f64 21.2 ->
    19.8 us). The last arguments are room for the copies of A's strips (MR x KC each, _strip), how
    far apart they are (0: one room for every strip) and whether they hold the copies already."""
    ptr = blk.elem.as_pointer()
    func = internal_function(module, f"adc_gemm_{blk.dtype}_block",
                              [I64, I64, I64, I64, I64, I64, ptr, ptr, ptr, I1, ptr, I64, I1, ptr, I64, I1])
    m = func.args[0]
    builder = ir.IRBuilder(func.append_basic_block("entry"))
    mr = const(blk.mr)
    full_rows = builder.mul(builder.sdiv(m, mr), mr)
    left = builder.sub(m, full_rows)
    after_full = builder.and_(builder.icmp_signed(">", left, const(0)), builder.icmp_signed(">", full_rows, const(0)))
    short_tail = builder.and_(after_full, builder.icmp_signed("<", builder.mul(left, const(2)), mr))
    strips_end = builder.select(short_tail, builder.sub(full_rows, mr), full_rows)
    with for_range(builder, const(0), strips_end, mr) as row:
        _strip(builder, module, blk, blk.mr, row, func.args)
    done = func.append_basic_block("done")
    switch = builder.switch(builder.sub(m, strips_end), done)
    for rows in [*range(1, blk.mr), *range(blk.mr + 1, blk.mr + (blk.mr + 1) // 2)]:
        case = func.append_basic_block(f"rows{rows}")
        switch.add_case(const(rows), case)
        builder.position_at_end(case)
        row = strips_end
        for part in (rows,) if rows < blk.mr else ((rows + 1) // 2, rows // 2):
            _strip(builder, module, blk, part, row, func.args)
            row = builder.add(row, const(part))
        builder.branch(done)
    builder.position_at_end(done)
    builder.ret_void()
    return func


def _strip(builder: ir.IRBuilder, module: ir.Module, blk: Blocking, rows: int, row: ir.Value, args) -> None:
    """`rows` rows of C starting at `row`, one micro-kernel call per packed panel.

    A panel narrower than NR (the last one) gets the micro-kernel with just
    enough vectors for its width, so e.g. N = 10 does not pay for 32 lanes. With `direct`, whole
    panels are read from B in place (rows `rsb` apart) and only the last, narrower one was packed.

    A read down its columns (csa != 1; transpose(A) @ B, every matmul's VJP) has each k's elements a
    stored row apart, a stride no prefetcher follows: every panel read the strip from memory again.
    So a full strip's first panel copies it into `strip_copy` (MR x KC) as it goes, and the other
    panels read the copy: the same elements, so the same bits (one thread, Zen 4, 2048^3 f64
    Aᵀ @ B: 42.7-43.5 -> 46.3-46.9 GFLOP/s, A @ B 54; 1024^3 45.6-49.1 -> 48.8-50.8). With a room
    for each strip (`copy_stride` = KC) the first block of B copies them and the others, `copied`,
    read the copies from their first panel (_copy_strips_once).
    """
    _, rsa, csa, ldc, kc, nc, a, packed, c, first, b, rsb, direct, strip_copy, copy_stride, copied = args
    nr = const(blk.nr)
    a_rows = builder.gep(a, [builder.mul(row, rsa)])
    c_rows = builder.gep(c, [builder.mul(row, ldc)])
    start = const(0)
    if rows == blk.mr:
        strip_copy = builder.gep(strip_copy, [builder.mul(row, copy_stride)])
        # the first panel is whole (nc > NR, or B's first block when each strip has a room); in place when B is
        wide = builder.or_(builder.icmp_signed(">", nc, nr), builder.icmp_signed("!=", copy_stride, const(0)))
        copies = builder.and_(builder.and_(builder.icmp_signed("!=", csa, const(1)), wide), builder.not_(copied))
        with builder.if_then(copies):
            panel, ldp = builder.select(direct, b, packed), builder.select(direct, rsb, nr)
            builder.call(_micro_kernel(module, blk, rows, blk.vectors_per_row, copies_strip=True),
                         [a_rows, rsa, csa, panel, ldp, kc, c_rows, ldc, nr, first, strip_copy])
        start = builder.select(copies, nr, start)
        from_copy = builder.or_(copies, copied)
        a_rows = builder.select(from_copy, strip_copy, a_rows)
        rsa, csa = builder.select(from_copy, const(1), rsa), builder.select(from_copy, const(blk.mr), csa)
    with for_range(builder, start, nc, nr) as col:
        width = minimum(builder, nr, builder.sub(nc, col))
        vectors = builder.sdiv(builder.add(width, const(blk.vl - 1)), const(blk.vl))
        in_place = builder.and_(direct, builder.icmp_signed("==", width, nr))
        panel = builder.select(in_place, builder.gep(b, [col]), builder.gep(packed, [builder.mul(col, kc)]))
        ldp = builder.select(in_place, rsb, nr)
        call_args = [a_rows, rsa, csa, panel, ldp, kc, builder.gep(c_rows, [col]), ldc, width, first]
        after = builder.append_basic_block("panel.done")
        switch = builder.switch(vectors, after)
        for count in range(1, blk.vectors_per_row + 1):
            case = builder.append_basic_block(f"panel.vectors{count}")
            switch.add_case(const(count), case)
            builder.position_at_end(case)
            builder.call(_micro_kernel(module, blk, rows, count), call_args)
            builder.branch(after)
        builder.position_at_end(after)


def _micro_kernel(module: ir.Module, blk: Blocking, rows: int, vectors: int, copies_strip: bool = False) -> ir.Function:
    """C[rows, :width] (=|+=) A[rows, :kc] @ panel[:kc, :vectors*VL], accumulated in vector registers;
    the panel's rows `ldp` elements apart (NR packed, B's row stride read in place). `copies_strip`:
    a last argument takes A[rows, :kc] too, A[r, p] at p * rows + r, for _strip's other panels."""
    ptr = blk.elem.as_pointer()
    name = f"adc_gemm_{blk.dtype}_micro{rows}x{vectors}" + ("_copying" if copies_strip else "")
    if name in module.globals:
        return module.globals[name]
    func = internal_function(module, name, [ptr, I64, I64, ptr, I64, I64, ptr, I64, I64, I1] + [ptr] * copies_strip)
    # Kept out of the block function: inlined, its 16 micro-kernels made one function whose
    # optimization and code generation cost the library's build 0.5 s of CPU a dtype (Zen 5),
    # for a call per panel that no paired measurement told apart from noise.
    func.attributes.add("noinline")
    a, rsa, csa, panel, ldp, kc, c, ldc, width, first = func.args[:10]
    builder = ir.IRBuilder(func.append_basic_block("entry"))
    accs = [[builder.alloca(blk.vector) for _ in range(vectors)] for _ in range(rows)]
    for acc in (slot for row in accs for slot in row):
        builder.store(ir.Constant(blk.vector, None), acc)
    fma = fma_intrinsic(module, blk.vector)
    vptr = blk.vector.as_pointer()
    with for_range(builder, const(0), kc, const(1)) as p:
        b_row = builder.bitcast(builder.gep(panel, [builder.mul(p, ldp)]), vptr)
        bs = [builder.load(builder.gep(b_row, [const(v)]), align=blk.elem_align) for v in range(vectors)]
        for r in range(rows):
            a_elem = builder.load(builder.gep(a, [builder.add(builder.mul(const(r), rsa), builder.mul(p, csa))]))
            if copies_strip:
                builder.store(a_elem, builder.gep(func.args[10], [builder.add(builder.mul(p, const(rows)), const(r))]))
            a_vec = splat(builder, blk.vector, a_elem)
            for v, b_vec in enumerate(bs):
                builder.store(builder.call(fma, [a_vec, b_vec, builder.load(accs[r][v])]), accs[r][v])
    for r in range(rows):
        c_row = builder.gep(c, [builder.mul(const(r), ldc)])
        _store_row(builder, blk, [builder.load(acc) for acc in accs[r]], c_row, width, first)
    builder.ret_void()
    return func


def _store_row(builder: ir.IRBuilder, blk: Blocking, values: list, c_row: ir.Value,
               width: ir.Value, first: ir.Value) -> None:
    """C[row, :width] = values (first depth block) or += values; never touches C past width.

    A partial row (the last panel's) is stored with masked vector stores, whose lanes past
    `width` are left alone: straight-line code, where a loop over the lanes had LLVM vectorize
    and version it again in every micro-kernel (most of the library's build time).
    """
    full = const(len(values) * blk.vl)
    with builder.if_else(builder.icmp_signed("==", width, full)) as (whole, partial):
        with whole:
            for v, value in enumerate(values):
                dst = builder.bitcast(builder.gep(c_row, [const(v * blk.vl)]), blk.vector.as_pointer())
                store_or_add(builder, first, value, dst, blk.elem_align)
        with partial:
            for v, value in enumerate(values):
                dst = builder.bitcast(builder.gep(c_row, [const(v * blk.vl)]), blk.vector.as_pointer())
                mask = lanes_below(builder, blk.vl, builder.sub(width, const(v * blk.vl)))
                masked_store_or_add(builder, first, value, dst, mask, blk.elem_align)


def _fill_zero(builder: ir.IRBuilder, blk: Blocking, dst: ir.Value, count: ir.Value) -> None:
    with for_range(builder, const(0), count, const(1)) as i:
        builder.store(ir.Constant(blk.elem, 0.0), builder.gep(dst, [i]), align=blk.elem_align)


def _return_if(builder: ir.IRBuilder, condition: ir.Value) -> None:
    with builder.if_then(condition):
        builder.ret_void()
