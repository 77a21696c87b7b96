"""Float sums keep their rounding error growing like log n (codegen/lowering/summation.py), not n: a sum
of many f32 ones does not stop at 2**24, and random data stays as accurate as NumPy's pairwise
sum. Oracles: exact integers, math.fsum of the float64 values, the bound
(L + ceil(log2(blocks)) + 1) · eps · Σ|x| the module's docstring proves, and for column sums the
documented order of additions replayed in NumPy (`column_sums_in_order`), bit for bit."""
import math

import numpy as np
import pytest

import adc
from adc import compiler
from adc.abi import RUNTIME_CASCADE_STEPS, runtime_cascade_symbol
from adc.codegen.lowering import lower
from adc.codegen.lowering.summation import BLOCK, ROWS
from adc.codegen.native import runtime_library
from adc.codegen.toolchain.target import Target
from adc.driver.host import host_target
from adc.ir.parser import parse_module
from tests.support import memcheck
from tests.support.native import jit_module

N_ONES = 2 ** 25        # 2**24 is where one f32 accumulator stops growing by 1

SOURCE = """
def ones_total(a: f32[A], b: f32[B]) -> f32:
    return sum(zeros([A, B], dtype=f32) + 1.0)

def ones_mean(a: f32[A], b: f32[B]) -> f32:
    return mean(zeros([A, B], dtype=f32) + 1.0)

def tenths_total(a: f32[A], b: f32[B]) -> f32:
    return sum(zeros([A, B], dtype=f32) + 0.1)

def rows_of(a: f32[A], n: f32[N]) -> f32[A]:
    return sum(cos(zeros([A, N], dtype=f32) * a[:, None]) * 0.1, axis=1)

def row_means_of(a: f32[A], n: f32[N]) -> f32[A]:
    return mean(cos(zeros([A, N], dtype=f32) * a[:, None]) * 0.1, axis=1)

def total32(x: f32[N]) -> f32:
    return sum(x)

def total64(x: f64[N]) -> f64:
    return sum(x)

def inner_axes(x: f32[A, B, C]) -> f32[A]:
    return sum(x, axis=(1, 2))

def row_sums(x: f32[A, N]) -> f32[A]:
    return sum(x, axis=1)

def columns_of(a: f32[A], n: f32[N]) -> f32[A]:
    return sum(cos(zeros([N, A], dtype=f32) * a[None, :]) * 0.1, axis=0)

def outer_axes(x: f32[A, B, C]) -> f32[B, C]:
    return sum(x, axis=0)

def activation_total(b: f32[A], n: f32[N]) -> f32:
    return sum(tanh(zeros([N, A], dtype=f32) + b[None, :]))
"""


@pytest.fixture(scope="module")
def m():
    return adc.compile(SOURCE)


def _shaped(*sizes):
    """Arguments that only give a kernel its symbols' sizes (the kernels broadcast a constant). A
    row kernel reads its argument under a cos, cos(0 * a) = 1, so that no simplification sees a
    sum of a broadcast value (it would be the value times the count)."""
    return [np.zeros(n, np.float32) for n in sizes]


@pytest.mark.parametrize("row", [4, 2 ** 13])
def test_f32_sum_and_mean_of_2_25_ones_are_exact(m, row):
    """Rows of 4 (a block gathers rows until it holds BLOCK elements) and of 2**13 (several blocks)."""
    args = _shaped(N_ONES // row, row)
    assert float(np.asarray(m.ones_total(*args))) == N_ONES
    assert float(np.asarray(m.ones_mean(*args))) == 1.0


def tenths_ulps() -> int:
    """The ulps a sum of 2**25 f32 tenths may be off by. Every block adds the same tenths in the
    same order, so every block's sum has the same error and the total's relative error is a
    block's: a lane's chain of BLOCK / (4 * lanes) additions, as long again with half the lanes
    (4 ulps with AVX-512's 16, 8 with AVX2's 8, 13 with SSE's 4; one accumulator: millions)."""
    return 4 * 16 // (host_target().vector_bits // 32)


def test_f32_sum_of_2_25_tenths_is_within_a_few_ulps(m):
    got = float(np.asarray(m.tenths_total(*_shaped(2 ** 12, N_ONES // 2 ** 12))))
    exact = float(np.float32(0.1)) * N_ONES
    assert abs(got - exact) <= tenths_ulps() * np.spacing(np.float32(exact))


def test_f32_row_sums_and_means_over_rows_of_2_25_tenths(m):
    """A row's vectorized loop keeps one accumulator per lane: exact for ones up to 2**24 per lane,
    but not for tenths."""
    args = [np.array([1.0, 0.5], np.float32), np.zeros(N_ONES, np.float32)]
    tenth = np.float32(0.1)
    np.testing.assert_array_max_ulp(np.asarray(m.rows_of(*args)), np.float32(float(tenth) * N_ONES) * np.ones(2, np.float32),
                                    tenths_ulps())
    np.testing.assert_array_max_ulp(np.asarray(m.row_means_of(*args)), tenth * np.ones(2, np.float32), tenths_ulps())


@pytest.mark.parametrize("seed", range(3))
def test_f32_sum_of_random_data_has_a_logarithmic_error_bound(m, seed):
    """10**7 uniform values: within the brief bound 10·eps·Σ|x|·log2(n), and within 2·eps·Σ|x| as
    NumPy's pairwise sum is (one accumulator per lane reached 6·eps·Σ|x| on these seeds)."""
    n = 10 ** 7
    x = np.random.default_rng(seed).random(n, dtype=np.float32)
    exact = math.fsum(x.astype(np.float64))
    error = abs(float(np.asarray(m.total32(x))) - exact)
    eps = float(np.finfo(np.float32).eps)
    assert error <= 10 * eps * exact * math.log2(n)
    assert error <= 2 * eps * exact


def test_f64_sum_of_random_data_is_as_accurate_as_pairwise():
    x = np.random.default_rng(0).random(10 ** 7)
    exact = math.fsum(x)
    got = float(np.asarray(adc.compile(SOURCE).total64(x)))
    assert abs(got - exact) <= 2 * np.finfo(np.float64).eps * exact


@pytest.mark.parametrize("n", [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 5 * BLOCK + 3])
def test_sums_around_the_block_size_match_fsum(m, n):
    """Empty rows, partial blocks and several blocks: each a sum of small integers, so exact (a
    row of at most BLOCK elements is its loop alone, a longer one a cascade of blocks)."""
    x = np.random.default_rng(n).integers(-8, 9, size=(3, 2, n)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(m.inner_axes(x)), [math.fsum(r.ravel()) for r in x])
    np.testing.assert_array_equal(np.asarray(m.row_sums(x.reshape(6, n))), [math.fsum(r) for r in x.reshape(6, n)])
    flat = x.ravel()
    assert float(np.asarray(m.total32(flat))) == math.fsum(flat)


def test_f32_column_sums_over_2_25_rows_keep_the_bound(m):
    """Keeping the last axis, blocks of ROWS rows: within (ROWS + 2·log2(blocks) + 1)·eps·Σ|x|
    (one accumulator per column stopped near 2**21 tenths)."""
    got = np.asarray(m.columns_of(np.ones(3, np.float32), np.zeros(N_ONES, np.float32)))
    exact = float(np.float32(0.1)) * N_ONES
    bound = (ROWS + 2 * math.log2(N_ONES / ROWS) + 1) * float(np.finfo(np.float32).eps) * exact
    np.testing.assert_array_less(np.abs(got - exact), bound)


def test_a_bias_gradient_sums_2_25_rows():
    """d/db Σ tanh(z + b) over 2**25 rows: a column sum in the reverse pass, N·(1 - tanh(b)²)."""
    b = np.array([0.0, 0.5, -1.0], np.float32)
    grad = adc.grad(adc.compile(SOURCE).activation_total, wrt="b")(b, np.zeros(N_ONES, np.float32))
    np.testing.assert_allclose(np.asarray(grad), N_ONES * (1 - np.tanh(b.astype(np.float64)) ** 2), rtol=2e-5)


@pytest.mark.parametrize("rows", [1, ROWS - 1, ROWS, ROWS + 1, 5 * ROWS + 3])
def test_column_sums_around_the_block_size_are_exact(m, rows):
    """Integer-valued columns, 6 KB a row: exact sums."""
    x = np.random.default_rng(rows).integers(-8, 9, size=(rows, 3, 1500)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(m.outer_axes(x)), x.astype(np.float64).sum(0))


def test_a_sum_over_no_axes_is_its_operand():
    """A rank-0 sum (axes ()) has no range to cut into blocks: it is its operand, as NumPy's."""
    m = adc.compile("def f(x: f64) -> (f64, f64):\n    return sum(x), mean(broadcast_to(x, [2, 5, 3]), axis=[0, -2, 2])\n")
    assert [float(np.asarray(v)) for v in m.f(0.25)] == [0.25, 0.25]


COLUMNS = """
def columns(x: f32[R, C]) -> f32[C]:
    return sum(x, axis=0)

def columns64(x: f64[R, C]) -> f64[C]:
    return sum(x, axis=0)

def planes(x: f32[A, B, C]) -> f32[C]:
    return sum(x, axis=(0, 1))

def middle(x: f32[A, R, C]) -> f32[A, C]:
    return sum(exp(x), axis=1)

def in_a_loop(x: f32[R, C], w: f32[C]) -> f32[C]:
    for i in range(3):
        w = w * 0.5 + sum(x * w[None, :], axis=0)
    return w
"""


def column_sums_in_order(x: np.ndarray) -> np.ndarray:
    """The sums over all but the last axis as blocked_column_sums adds them, in x's dtype: runs of
    at most ROWS positions of the last reduced axis added into the output row one row at a time, a
    block flushed into the binary counter once ROWS positions were added since the last, and at the
    end the set levels added to the unfinished block's sums, smallest first."""
    rows = x.reshape((math.prod(x.shape[:-2]),) + x.shape[-2:])
    sums, levels, count, filled = np.zeros(x.shape[-1], x.dtype), {}, 0, 0
    for plane in rows:
        for first in range(0, len(plane), ROWS):
            run = plane[first:first + ROWS]
            for row in run:
                sums = sums + row
            filled += len(run)
            if filled >= ROWS:
                k = 0
                while count >> k & 1:
                    sums = levels[k] + sums
                    k += 1
                levels[k], sums, count, filled = sums, np.zeros_like(sums), count + 1, 0
    for k in range(count.bit_length()):
        if count >> k & 1:
            sums = sums + levels[k]
    return sums


@pytest.fixture(scope="module")
def columns():
    return adc.compile(COLUMNS)


@pytest.mark.parametrize("rows", [ROWS - 1, ROWS, 2 * ROWS, 7 * ROWS + 5, 37 * ROWS + 1])
@pytest.mark.parametrize("width", [1, 3, 1500, 2500])
def test_column_sums_add_in_the_documented_order(columns, rows, width):
    """Random f32 data (whose every rounding shows): the same bits as the order replayed in NumPy,
    rows in order however wide (2500 f32 columns, 10 KB a row), 37 blocks setting
    levels 0, 2 and 5 of the counter."""
    x = np.random.default_rng(rows * width).standard_normal((rows, width)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(columns.columns(x)), column_sums_in_order(x))


@pytest.mark.parametrize("shape", [(3, 100, 7), (40, 3, 5), (300, 1, 2), (2, 129, 1)])
def test_column_sums_over_two_axes_gather_short_rows_into_blocks(columns, shape):
    """Reducing axes 0 and 1, a block is as many runs of the last reduced axis as make ROWS rows."""
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(columns.planes(x)), column_sums_in_order(x))


def test_column_sums_at_each_position_of_a_kept_leading_axis(columns):
    x = np.random.default_rng(1).uniform(-1, 1, (3, 5 * ROWS + 7, 33)).astype(np.float32)
    want = np.stack([column_sums_in_order(np.exp(plane, dtype=np.float64).astype(np.float32)) for plane in x])
    np.testing.assert_allclose(np.asarray(columns.middle(x)), want, rtol=1e-5)


def test_f64_column_sums_over_wide_rows_keep_the_bound(columns):
    """[4096, 3000] f64: 32 blocks of rows, each row one contiguous pass over 24 KB of columns."""
    x = np.random.default_rng(2).random((4096, 3000))
    got = np.asarray(columns.columns64(x))
    exact = np.array([math.fsum(col) for col in x.T])
    bound = (2 * ROWS + 2 * math.log2(4096 / ROWS) + 1) * np.finfo(np.float64).eps * exact
    np.testing.assert_array_less(np.abs(got - exact), bound)
    np.testing.assert_array_equal(got, column_sums_in_order(x))


def test_column_sums_give_the_same_bits_at_any_thread_count(columns):
    x = np.random.default_rng(3).standard_normal((9, 700, 300)).astype(np.float32)
    results = []
    for threads in (1, 2, 4):
        adc.set_num_threads(threads)
        results.append(np.asarray(columns.middle(x)).copy())
    adc.set_num_threads(0)
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])


def test_a_column_sum_in_a_loop_body_uses_its_part_of_the_block(columns):
    """The body's levels are in the part of the kernel's block its loop was given."""
    x = np.random.default_rng(4).uniform(-1, 1, (3 * ROWS + 9, 40)).astype(np.float32)
    w = np.random.default_rng(5).uniform(-1, 1, 40).astype(np.float32)
    want = w
    for _ in range(3):
        want = want * np.float32(0.5) + column_sums_in_order(x * want[None, :])
    np.testing.assert_array_equal(np.asarray(columns.in_a_loop(x, w)), want)


def test_the_checked_build_sums_columns_within_their_levels():
    """Every access to the levels checked against the part of the block sized for them: the same
    bits as the default build, no BoundsError."""
    default, checked = adc.compile(COLUMNS), adc.compile(COLUMNS, check_bounds=True)
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((37 * ROWS + 1, 70)).astype(np.float32), rng.standard_normal(70).astype(np.float32)
    cube = rng.standard_normal((3, 5 * ROWS + 1, 9)).astype(np.float32)
    for name, args in [("columns", (x,)), ("planes", (cube,)), ("middle", (cube,)), ("in_a_loop", (x, w))]:
        np.testing.assert_array_equal(np.asarray(getattr(checked, name)(*args)),
                                      np.asarray(getattr(default, name)(*args)), err_msg=name)


def test_a_store_past_the_levels_raises_bounds_error(monkeypatch):
    """The checked build's hook moves every store into a temporary one element on: a column sum's
    only temporary is its levels, ROWS..2·ROWS-1 rows of 5 columns need one level, 5 elements."""
    monkeypatch.setenv("ADC_BOUNDS_MISINDEX", "temporary")
    m = adc.compile(COLUMNS, "levels.adc", check_bounds=True)
    with pytest.raises(adc.BoundsError, match=r"columns: reduce_sum at levels.adc:3:12: store at index 5 is out of "
                                              r"bounds of the levels of reduce_sum at levels.adc:3:12 \(extent 5\)"):
        m.columns(np.ones((ROWS, 5), np.float32))


def test_sums_call_the_runtime_librarys_cascade_steps():
    """Each float sum's cascade steps are calls of the runtime library's functions for its dtype,
    not loops of its own that LLVM would optimize again in every sum; the library defines them."""
    lowered = str(lower.lower_kernel(compiler.elaborate(COLUMNS + SOURCE, "steps.adc"), "columns", 256))
    for step in RUNTIME_CASCADE_STEPS:
        symbol = runtime_cascade_symbol(step, "f32")
        assert f'declare void @"{symbol}"' in lowered and f'call void @"{symbol}"' in lowered
        assert runtime_cascade_symbol(step, "f64") not in lowered
    assert "adc.cascade" not in lowered and lowered.count("define ") == 2      # the kernel and its sum's nest
    total = str(lower.lower_kernel(compiler.elaborate(COLUMNS + SOURCE, "steps.adc"), "total64", 256))
    assert f'call void @"{runtime_cascade_symbol("push", "f64")}"' in total
    library = str(runtime_library.runtime_module(Target.host()))
    for step in RUNTIME_CASCADE_STEPS:
        for dtype in ("f32", "f64"):
            assert f'define void @"{runtime_cascade_symbol(step, dtype)}"' in library


@pytest.mark.parametrize("rows", [0, 3 * ROWS + 5])
def test_column_sums_of_no_columns_are_empty_in_the_checked_build(rows):
    """A cascade of zero columns still counts its blocks; the checks of the rows it hands the runtime
    library's steps must pass over empty rows, not read element -1 as the last one."""
    m = adc.compile(COLUMNS, "empty.adc", check_bounds=True)
    for name, dtype in (("columns", np.float32), ("columns64", np.float64)):
        out = np.asarray(getattr(m, name)(np.ones((rows, 0), dtype)))
        assert out.shape == (0,) and out.dtype == dtype


OVER_A_SCAN = """
func @record(%i: i64, %h: f32[N], %x: f32[N]) -> (f32[N], f32[N]) {
  %0 = sin %h : f32[N]
  %1 = add %0, %x : f32[N]
  return %1, %0
}

func @k(%x: f32[N], %n: i64) -> f32[N] {
  %0, %1 = scan %n, %x, %x {axis = 0, body = @record, carried = 1, length = "L"} : f32[N], f32[L,N]
  %2 = reduce_sum %1 {axes = [0]} : f32[N]
  return %2
}
"""


def record_in_order(x: np.ndarray, n: int) -> np.ndarray:
    """@record's stacked rows (sin of the carried state before each step), summed in order."""
    h, rows = x, np.zeros((n, len(x)), x.dtype)
    for i in range(n):
        rows[i] = np.sin(h)
        h = rows[i] + x
    return column_sums_in_order(rows)


@pytest.mark.parametrize("check_bounds", [False, True])
def test_levels_sized_by_a_scans_length_are_allocated_where_the_sum_runs(check_bounds):
    """A scan binds its length as it runs, after the kernel's block is sized: the column sum over
    its rows allocates its levels itself."""
    m = jit_module(parse_module(OVER_A_SCAN, "over_a_scan"), check_bounds)
    x = np.random.default_rng(7).uniform(-1, 1, 50).astype(np.float32)
    for n in (0, ROWS + 1, 9 * ROWS):
        np.testing.assert_allclose(np.asarray(m.k(x, np.int64(n))), record_in_order(x, n), rtol=2e-5, atol=1e-4)


HEAP_CHECKED = f"""
import numpy as np, adc
from adc.ir.parser import parse_module
from tests.support.native import jit_module
rng = np.random.default_rng(0)
m = adc.compile({COLUMNS!r})
for rows in (1, {ROWS}, {37 * ROWS + 1}):
    for width in (1, 7, 2500):
        x = rng.standard_normal((rows, width)).astype(np.float32)
        m.columns(x)
        m.columns64(x.astype(np.float64))
        m.planes(x.reshape(1, rows, width))
        m.middle(x.reshape(1, rows, width))
        m.in_a_loop(x, np.ones(width, np.float32))
over_a_scan = jit_module(parse_module({OVER_A_SCAN!r}, "over_a_scan"))
for n in (0, {ROWS + 1}, {9 * ROWS}):
    over_a_scan.k(rng.standard_normal(50).astype(np.float32), np.int64(n))
print("column sums ran")
"""


def test_column_sums_leave_the_heap_intact():
    """Their levels in the kernel's block, in a loop body's part of it, and allocated after a scan."""
    done = memcheck.run_heap_checked(HEAP_CHECKED)
    assert done.returncode == 0 and "column sums ran" in done.stdout, done.stderr[-3000:]
