"""Every tile shape and remainder the gemm's blocking makes, through compiled kernels: sizes 1, just
under, at and just over each block of this host's blocking (the register tile's MR rows, the vector
width and NR columns, the packed block's NC columns and KC depth, as measured for this machine), K = 0, 1xN and Mx1, a transposed
operand read in place and a batched product; large products split across 1 to 8 threads
(adc.set_num_threads). Each against NumPy in float64, in the default and the bounds-checked build."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import adc
from adc.codegen.lowering.rules.matmul import WIDE_RATIO
from adc.codegen.native import few_rows, gemm
from adc.driver import host_target
from adc.driver.runtime_library import gemm_blockings
from adc.ir.types import DType
from tests.support.products import around, assert_product

SOURCE = """
def product(a: {t}[M, K], b: {t}[K, N]) -> {t}[M, N]:
    return a @ b

def product_of_transpose(at: {t}[K, M], b: {t}[K, N]) -> {t}[M, N]:
    return transpose(at) @ b

def batched(a: {t}[S, M, K], b: {t}[S, K, N]) -> {t}[S, M, N]:
    return a @ b

def product_with_transpose(a: {t}[M, K], bt: {t}[N, K]) -> {t}[M, N]:
    return a @ transpose(bt)

def matrix_vector(a: {t}[M, K], x: {t}[K]) -> {t}[M]:
    return a @ x

def transpose_vector(at: {t}[K, M], x: {t}[K]) -> {t}[M]:
    return transpose(at) @ x
"""
DTYPES = (DType.f32, DType.f64)


def edges(dtype: DType) -> tuple[list[int], list[int], list[int]]:
    """Rows, columns and depths at this host's block boundaries."""
    blk = gemm_blockings(host_target())[dtype]
    # MR + (MR - 1) // 2 and 2 MR + 1: the longest and the shortest tail shorter than half a strip,
    # which shares the rows of the last full strip (gemm._block_function)
    rows = around(1, blk.mr) + [blk.mr + (blk.mr - 1) // 2, 2 * blk.mr + 1, 2 * blk.mr + 3]
    columns = around(1, blk.vl, blk.nr, blk.nc) + [2 * blk.nc + blk.nr + 3]
    depths = [0] + around(1, blk.kc) + [2 * blk.kc + 3]
    return rows, columns, depths


@pytest.fixture(scope="module", params=[False, True], ids=["default", "checked"])
def modules(request):
    return {dtype: adc.compile(SOURCE.format(t=dtype), f"gemm_{dtype}.adc", check_bounds=request.param)
            for dtype in DTYPES}


@pytest.fixture
def threads():
    yield adc.set_num_threads
    adc.set_num_threads(0)


def operands(rng, dtype: DType, *shapes):
    return [rng.standard_normal(shape).astype(dtype.numpy) for shape in shapes]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_remainder_of_the_blocking(modules, dtype):
    m = modules[dtype]
    rng = np.random.default_rng(0)
    rows, columns, depths = edges(dtype)
    for rows_, columns_, depth in itertools.product(rows, columns, depths):
        a, b = operands(rng, dtype, (rows_, depth), (depth, columns_))
        assert_product(m.product(a, b), a, b)
    for rows_, columns_, depth in itertools.product(rows, columns[::3], depths[::2]):
        at, b = operands(rng, dtype, (depth, rows_), (depth, columns_))
        assert_product(m.product_of_transpose(at, b), np.ascontiguousarray(at.T), b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_read_transposed_gives_the_bits_of_a_stored_by_rows(modules, dtype):
    """transpose(at) @ b reads A's strips a stored row apart, and copies a strip in its first panel
    for the others: each C element is the same sums in the same order as with A stored by rows."""
    m = modules[dtype]
    rng = np.random.default_rng(2)
    rows, columns, depths = edges(dtype)
    for rows_, columns_, depth in itertools.product(rows[::2], columns[1::2], depths[1::2]):
        at, b = operands(rng, dtype, (depth, rows_), (depth, columns_))
        by_rows = np.asarray(m.product(np.ascontiguousarray(at.T), b))
        assert np.array_equal(np.asarray(m.product_of_transpose(at, b)), by_rows), (rows_, columns_, depth)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("count", [1, 2])
def test_an_a_read_transposed_copied_once_to_the_heap_gives_the_bits_of_a_stored_by_rows(modules, threads, dtype, count):
    """Past gemm.STRIP_COPY_BYTES of full strips, transpose(at) @ b copies every strip of A to the
    heap in its first block of B and the other blocks read the copies: over three blocks of B and
    more than one of depth, with rows left over, each C element is the sums of a product of A
    stored by rows, bit for bit; on two threads each thread's rows have their own copy, or none."""
    threads(count)
    m = modules[dtype]
    rng = np.random.default_rng(3)
    blk = gemm_blockings(host_target())[dtype]
    rows = 1024 + blk.mr + 3
    depth = max(blk.kc + 5, gemm.STRIP_COPY_BYTES[0] // (1024 * dtype.numpy.itemsize) + 5)
    at, b = operands(rng, dtype, (depth, rows), (depth, 2 * blk.nc + blk.nr + 3))
    assert 1024 * depth * dtype.numpy.itemsize >= gemm.STRIP_COPY_BYTES[0]
    by_rows = np.asarray(m.product(np.ascontiguousarray(at.T), b))
    assert np.array_equal(np.asarray(m.product_of_transpose(at, b)), by_rows)
    assert_product(by_rows, np.ascontiguousarray(at.T), b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_b_read_in_place_up_to_its_limit_and_packed_past_it(modules, dtype):
    """A row-major B of at most the blocking's direct_bytes is read in place, its last, narrower panel packed;
    one element more, or a B read transposed, is packed whole. Widths around NR and the vector
    width, depths around KC, so both routes meet every remainder."""
    m = modules[dtype]
    rng = np.random.default_rng(1)
    blk = gemm_blockings(host_target())[dtype]
    limit = blk.direct_bytes // dtype.numpy.itemsize
    for columns in around(blk.vl, blk.nr, 3 * blk.nr):
        for depth in (limit // columns, limit // columns + 1, 1, blk.kc + 1):
            for rows in (1, blk.mr + 1):
                a, b = operands(rng, dtype, (rows, depth), (depth, columns))
                assert_product(m.product(a, b), a, b)
                assert_product(m.product_with_transpose(a, np.ascontiguousarray(b.T)), a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_few_rows_stream_b_and_give_the_blocked_products_bits(modules, dtype):
    """Up to MR rows times a row-major B past the blocking's direct_bytes stream B row by row
    (few_rows.stream_function), one or two rows already past gemm.FEW_ROWS_STREAM_BYTES: over
    several KC blocks and column chunks, with a partial vector at the end, each row equals, bit
    for bit, that row of a product with one more strip of rows, which the blocked nest computes;
    a B read transposed is packed as before."""
    m = modules[dtype]
    rng = np.random.default_rng(2)
    blk = gemm_blockings(host_target())[dtype]
    chunk = few_rows.STREAM_BYTES // (blk.mr * dtype.numpy.itemsize) // blk.vl * blk.vl
    for depth, columns in ((2 * blk.kc + 3, chunk + blk.vl + 3), (blk.kc - 1, 2 * chunk), (few_rows.STREAM_ROWS + 1, 16000),
                           (3, blk.direct_bytes // dtype.numpy.itemsize // 3 + 1),
                           (blk.kc + 1, gemm.FEW_ROWS_STREAM_BYTES // dtype.numpy.itemsize // (blk.kc + 1) + blk.vl + 1)):
        assert depth * columns * dtype.numpy.itemsize > gemm.FEW_ROWS_STREAM_BYTES
        a, b = operands(rng, dtype, (blk.mr + 1, depth), (depth, columns))
        blocked = np.asarray(m.product(a, b))
        assert_product(blocked, a, b)
        for rows in (1, 2, blk.mr - 1, blk.mr):
            streamed = np.asarray(m.product(a[:rows], b))
            assert np.array_equal(streamed, blocked[:rows]), (rows, depth, columns)
        assert np.array_equal(np.asarray(m.product_with_transpose(a[:3], np.ascontiguousarray(b.T))), blocked[:3])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("count", [1, 2, 3, 5, 8])
def test_products_split_across_threads(modules, threads, dtype, count):
    """From 2^19 multiply-adds the rows split across threads in multiples of MR: odd row counts
    leave each thread's share, and the last, a remainder; products just past the threshold have
    fewer rows than threads' shares (those of fewer than two strips, and wide ones, split their
    columns: the next test)."""
    m = modules[dtype]
    threads(count)
    blk = gemm_blockings(host_target())[dtype]
    rng = np.random.default_rng(count)
    for rows, depth, columns in ((40 * blk.mr + 5, 2 * blk.kc + 3, blk.nc * 2 + blk.nr + 1), (301, 129, 131),
                                 (2 * blk.mr + 1, 128, 257), (blk.mr - 3, 1024, 131)):
        a, b = operands(rng, dtype, (rows, depth), (depth, columns))
        assert_product(m.product(a, b), a, b)
    a, b = operands(rng, dtype, (3, 37, 260), (3, 260, 150))      # rows of three products share threads
    got = np.asarray(m.batched(a, b))
    for s in range(3):
        assert_product(got[s], a[s], b[s])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("count", [2, 8])
def test_a_few_rows_split_their_columns_across_threads(modules, threads, dtype, count):
    """Fewer rows than two strips of MR, or C more than WIDE_RATIO times wider than tall, split C's
    columns across threads instead, in panels of NR: each thread's band (the last narrower, ending in
    a partial vector) streamed (up to MR rows) or packed (more rows, or B read transposed), A read
    whole, C's rows written a band at a time. Every entry has the bits of the product on one thread,
    whose sums run in the same order."""
    m = modules[dtype]
    blk = gemm_blockings(host_target())[dtype]
    rng = np.random.default_rng(3 + count)
    # at least four of the measured block's NC-wide blocks, and enough of them for one row to split
    blocks = max(4, -(-(1 << 19) // ((2 * blk.kc + 1) * blk.nc)))
    for rows in (1, blk.mr, 2 * blk.mr - 1, 4 * blk.mr):
        # one row of 1024 x 512 reaches the split's 2^19 multiply-adds whatever the vector width
        for depth, columns in ((1024, max(40 * blk.nr, 512) + 3), (2 * blk.kc + 1, blocks * blk.nc + blk.vl - 1)):
            assert rows * depth * columns >= 1 << 19 and columns > WIDE_RATIO * rows    # split, by columns
            a, b = operands(rng, dtype, (rows, depth), (depth, columns))
            bt, at = np.ascontiguousarray(b.T), np.ascontiguousarray(a.T)
            threads(1)
            alone = [np.asarray(m.product(a, b)), np.asarray(m.product_with_transpose(a, bt)),
                     np.asarray(m.product_of_transpose(at, b))]
            threads(count)
            shared = [np.asarray(m.product(a, b)), np.asarray(m.product_with_transpose(a, bt)),
                      np.asarray(m.product_of_transpose(at, b))]
            for one, many in zip(alone, shared):
                assert_product(many, a, b)
                assert np.array_equal(one, many), (rows, depth, columns)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("count", [1, 2, 8])
def test_matrix_vector_products_have_the_bits_of_a_wider_products_column(modules, threads, dtype, count):
    """A @ x and transpose(A) @ x (a matrix-vector path each: rows in lanes, or a row times a
    row-major matrix) equal, bit for bit, the first column of A @ [x, y], on any number of threads:
    rows around the 8 summed at a time and past the threshold where rows split, depths around KC."""
    m = modules[dtype]
    threads(count)
    blk = gemm_blockings(host_target())[dtype]
    rng = np.random.default_rng(11 + count)
    for rows in (1, few_rows.MATRIX_VECTOR_ROWS + 1, 1001):
        for depth in (few_rows.MATRIX_VECTOR_ROWS - 1, blk.kc + 3, 3 * blk.kc + 5):
            a, b = operands(rng, dtype, (rows, depth), (depth, 2))
            column = np.asarray(m.product(a, b))[:, 0]
            x = np.ascontiguousarray(b[:, 0])
            assert np.array_equal(np.asarray(m.matrix_vector(a, x)), column), (rows, depth)
            assert np.array_equal(np.asarray(m.transpose_vector(np.ascontiguousarray(a.T), x)), column), (rows, depth)
