"""Sizes and trip counts at the limits of int64: Python's counts, and errors instead of wrapped sizes.

A kernel counts in i64. `range()` computed its trip count as (stop - start + step -/+ 1) // step,
which wraps for far-apart bounds or a large step (range(N, 0, -2**63) ran no iteration); a
shape's byte size was bounded in elements, so f32[2**62] (2**64 bytes) wrapped to an empty block.
"""
import itertools

import numpy as np
import pytest

import adc
from adc.frontend import compile_source
from adc.ir.interp import run

BIG = 2**63 - 1
STEPS = (1, -1, 2, -3, 2**62, -2**62, BIG, -BIG - 1)
BOUNDS = (0, 5, -5, BIG, -BIG - 1, BIG - 3, -BIG + 2, 2**62, -2**62)

# For each step: the trip count, and the last index the loop saw (0 when it ran none).
COUNTING = "\n".join(f"""
def count_{k}(a: i64, b: i64) -> i64:
    n = 0
    for i in range(a, b, {step}):
        n = n + 1
    return n

def last_{k}(a: i64, b: i64) -> i64:
    last = 0
    for i in range(a, b, {step}):
        last = i
    return last
""" for k, step in enumerate(STEPS))


def _cases():
    """(step index, start, stop, Python's count) for the loops short enough to run."""
    for (k, step), a, b in itertools.product(enumerate(STEPS), BOUNDS, BOUNDS):
        r = range(a, b, step)
        if (r.stop - r.start) // r.step < 1000:
            yield k, a, b, r


def test_range_counts_as_python_does_at_the_limits_of_int64():
    module = adc.compile(COUNTING)
    wrong = []
    for k, a, b, r in _cases():
        got = (int(module[f"count_{k}"](np.int64(a), np.int64(b))), int(module[f"last_{k}"](np.int64(a), np.int64(b))))
        want = (len(r), r[-1] if len(r) else 0)
        if got != want:
            wrong.append(f"range({a}, {b}, {STEPS[k]}): (count, last) {got}, Python {want}")
    assert not wrong, "\n".join(wrong)


def test_the_interpreter_counts_the_same():
    module = compile_source(COUNTING, "counting.adc")
    with np.errstate(over="ignore"):
        for k, a, b, r in _cases():
            assert int(run(module, f"count_{k}", np.int64(a), np.int64(b))[0]) == len(r), (a, b, STEPS[k])


@pytest.mark.parametrize("bounds", ["0, 2**63", "-2**63, 2**63 - 1, 1", "2**63 - 1, -2**63, -1"])
def test_a_static_range_past_int64_counts_is_a_located_error(bounds):
    with pytest.raises(adc.CompileError, match=r"more than the 9223372036854775807 a loop counts") as info:
        adc.compile(f"def f(x: f32) -> f32:\n    for i in range({bounds}):\n        x = x + 1.0\n    return x\n")
    assert ":2:" in str(info.value)


@pytest.mark.parametrize("shape", ["[4611686018427387904]", "[2147483648, 2147483648]", "[N, 2**61]"])
def test_a_static_shape_past_int64_bytes_is_a_located_error(shape):
    with pytest.raises(adc.CompileError, match=r"more than 9223372036854775807 bytes") as info:
        adc.compile(f"def f(x: f32[N]) -> f32:\n    return sum(zeros({shape}) * 2.0)\n")
    assert ":2:" in str(info.value)


def test_an_f32_shape_that_fits_in_elements_but_not_in_bytes_is_refused():
    with pytest.raises(adc.CompileError, match="bytes"):
        adc.compile("def f(x: f32) -> f32:\n    return sum(zeros([2**62]))\n")
    adc.compile("def f(x: f32) -> f32:\n    return sum(zeros([2**60]))\n")      # 2**62 bytes fit


def test_a_symbolic_shape_past_int64_bytes_is_a_memory_error_not_a_crash():
    # N = 2**22: N**3 f32 are 2**68 bytes, which wrapped to a block of 0 bytes
    kernel = adc.compile("def f(x: f32[N]) -> f32[N]:\n"
                         "    y = cumsum(zeros([N, N, N]) + x, axis=1)\n"
                         "    return y[0, 0]\n").f
    np.testing.assert_array_equal(kernel(np.arange(3, dtype=np.float32)).numpy(), [0, 1, 2])
    with pytest.raises(MemoryError, match="f: "):
        kernel(np.ones(2**22, np.float32))


def test_a_scan_whose_stack_would_pass_int64_bytes_is_a_memory_error():
    # storing every state stacks t states of N*N f64: 2**61 * 2**20 * 8 bytes, checked when the scan
    # binds its length, before the loop runs
    kernel = adc.compile("def f(x: f64[N], t: i64) -> f64:\n"
                         "    h = zeros([N, N]) + x\n"
                         "    for i in range(t, checkpoint=1):\n"
                         "        h = tanh(h)\n"
                         "    return sum(h)\n").f
    with pytest.raises(MemoryError):
        adc.grad(kernel, wrt=0)(np.ones(2**10), np.int64(2**61))
