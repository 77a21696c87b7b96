"""Multithreaded loop nests: results match the one-thread path and NumPy at every split.

Thread counts are set through the module's exported `adc_set_num_threads`, as
the runtime does for ADC_NUM_THREADS; sizes straddle parallel.THRESHOLD and
the FLAT_GRAIN chunk rounding.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import adc
from adc.codegen.parallel import FLAT_GRAIN, SET_NUM_THREADS_SYMBOL, THRESHOLD
from adc.driver import elaborate, write_shared_object
from tests.codegen.test_lower import call, compile_module, kernel, randn

SET_THREADS = ctypes.CFUNCTYPE(None, ctypes.c_int32)
THREADS = (1, 2, 3, 7)
FLAT_SIZES = (THRESHOLD - 1, THRESHOLD, THRESHOLD + 1, THRESHOLD + 3 * FLAT_GRAIN + 5, 1_000_003, 4_000_000)


def sigmoid_shift(b, x, d):
    return b.op("sigmoid", b.op("add", x, b.op("broadcast", d, dims=[], shape=x.type.shape)))


@pytest.fixture(scope="module")
def elementwise():
    module = kernel("x: f32[N], d: f32", sigmoid_shift)
    return compile_module(module), next(iter(module))


def set_threads(lib, n: int) -> None:
    SET_THREADS(lib.address(SET_NUM_THREADS_SYMBOL))(n)


@pytest.mark.parametrize("n", FLAT_SIZES)
def test_flat_loop_is_bitwise_identical_for_every_thread_count(elementwise, n):
    lib, func = elementwise
    x, d = randn(n), np.float32(0.25)
    set_threads(lib, 1)
    (serial,) = call(lib.address("adc_kernel_k"), func, x, d)
    np.testing.assert_allclose(serial, 1 / (1 + np.exp(-(x.astype(np.float64) + 0.25))), rtol=2e-6, atol=2e-6)
    for threads in THREADS[1:]:
        set_threads(lib, threads)
        (got,) = call(lib.address("adc_kernel_k"), func, x, d)
        np.testing.assert_array_equal(got.view(np.uint32), serial.view(np.uint32), err_msg=f"{threads} threads")
    set_threads(lib, 0)


@pytest.mark.parametrize("shape", [(THRESHOLD // 64 + 1, 64), (7, 40_000), (100_003, 3)])
def test_nested_loop_over_rows_matches_numpy(shape):
    # a row-broadcast add is not flat: the outer range is the rows
    module = kernel("x: f32[B,N], r: f32[N]",
                    lambda b, x, r: b.op("mul", x, b.op("broadcast", r, dims=[1], shape=x.type.shape)))
    lib, func = compile_module(module), next(iter(module))
    x, r = randn(*shape), randn(shape[1])
    for threads in THREADS:
        set_threads(lib, threads)
        (got,) = call(lib.address("adc_kernel_k"), func, x, r)
        np.testing.assert_array_equal(got, x * r)


@pytest.mark.parametrize("axes, shape", [([1], (5_001, 40)), ([0], (40_000, 9)), ([0], (3, 300_000))])
def test_reductions_stay_correct_at_large_sizes(axes, shape):
    # axes=[1] splits the rows (each output element within one chunk); axes=[0] accumulates into
    # the whole output across the outer axis and must stay serial
    module = kernel("x: f64[B,N]", lambda b, x: b.op("reduce_sum", x, axes=axes))
    lib, func = compile_module(module), next(iter(module))
    x = randn(*shape, dtype=np.float64)
    set_threads(lib, 1)
    (serial,) = call(lib.address("adc_kernel_k"), func, x)
    np.testing.assert_allclose(serial, x.sum(axis=axes[0]), rtol=1e-10, atol=1e-9)
    for threads in THREADS[1:]:
        set_threads(lib, threads)
        (got,) = call(lib.address("adc_kernel_k"), func, x)
        np.testing.assert_array_equal(got, serial, err_msg=f"{threads} threads")


def test_thread_count_is_capped_and_zero_restores_the_default(elementwise):
    lib, func = elementwise
    x = randn(THRESHOLD * 2 + 1)
    results = []
    for threads in (1 << 20, -5, 0):
        set_threads(lib, threads)
        results.append(call(lib.address("adc_kernel_k"), func, x, np.float32(1.0))[0])
    np.testing.assert_allclose(results[0], 1 / (1 + np.exp(-(x.astype(np.float64) + 1))), rtol=2e-6, atol=2e-6)
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])


SOURCE = "def sigmoid_shift(x: f32[N], delta: f32) -> f32[N]:\n    return sigmoid(x + delta)\n"


def test_shared_object_runs_in_parallel_and_honours_adc_num_threads(tmp_path, monkeypatch):
    path = tmp_path / "par.so"
    write_shared_object(elaborate(SOURCE, "par.adc"), path)
    x = randn(THRESHOLD * 3 + 17)
    want = 1 / (1 + np.exp(-(x.astype(np.float64) - 0.5)))
    outputs = []
    for setting in ("1", "2", "3", "7"):
        monkeypatch.setenv("ADC_NUM_THREADS", setting)
        m = adc.load(path)
        outputs.append(m.sigmoid_shift(x, np.float32(-0.5)))
    np.testing.assert_allclose(outputs[0], want, rtol=2e-6, atol=2e-6)
    for got in outputs[1:]:
        np.testing.assert_array_equal(got, outputs[0])


def test_a_malformed_adc_num_threads_is_a_load_error(monkeypatch):
    monkeypatch.setenv("ADC_NUM_THREADS", "two")
    with pytest.raises(adc.LoadError, match="ADC_NUM_THREADS"):
        adc.compile(SOURCE)
