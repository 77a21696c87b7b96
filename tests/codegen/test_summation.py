"""Float sums keep their rounding error growing like log n (codegen/lowering/summation.py), not n: a sum
of many f32 ones does not stop at 2**24, and random data stays as accurate as NumPy's pairwise
sum. Oracles: exact integers, math.fsum of the float64 values, and the bound
(L + ceil(log2(blocks)) + 1) · eps · Σ|x| the module's docstring proves."""
import math

import numpy as np
import pytest

import adc
from adc.codegen.lowering.summation import BLOCK, ROWS

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


def test_f32_sum_of_2_25_tenths_is_within_a_few_ulps(m):
    got = float(np.asarray(m.tenths_total(*_shaped(2 ** 12, N_ONES // 2 ** 12))))
    exact = float(np.float32(0.1)) * N_ONES
    assert abs(got - exact) <= 4 * np.spacing(np.float32(exact))


def test_f32_row_sums_and_means_over_rows_of_2_25_tenths(m):
    """A row's vectorized loop keeps one accumulator per lane: exact for ones up to 2**24 per lane,
    but not for tenths."""
    args = [np.array([1.0, 0.5], np.float32), np.zeros(N_ONES, np.float32)]
    tenth = np.float32(0.1)
    np.testing.assert_array_max_ulp(np.asarray(m.rows_of(*args)), np.float32(float(tenth) * N_ONES) * np.ones(2, np.float32), 4)
    np.testing.assert_array_max_ulp(np.asarray(m.row_means_of(*args)), tenth * np.ones(2, np.float32), 4)


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
    """Empty rows, partial blocks and several blocks: each a sum of small integers, so exact."""
    x = np.random.default_rng(n).integers(-8, 9, size=(3, 2, n)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(m.inner_axes(x)), [math.fsum(r.ravel()) for r in x])
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
    """Integer-valued columns, wider than one tile of columns: exact sums."""
    x = np.random.default_rng(rows).integers(-8, 9, size=(rows, 3, 1500)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(m.outer_axes(x)), x.astype(np.float64).sum(0))


def test_a_sum_over_no_axes_is_its_operand():
    """A rank-0 sum (axes ()) has no range to cut into blocks: it is its operand, as NumPy's."""
    m = adc.compile("def f(x: f64) -> (f64, f64):\n    return sum(x), mean(broadcast_to(x, [2, 5, 3]), axis=[0, -2, 2])\n")
    assert [float(np.asarray(v)) for v in m.f(0.25)] == [0.25, 0.25]
