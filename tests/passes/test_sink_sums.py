"""sink_sums keeps a loop's value (within rounding: it reassociates the sums) for every trip
count, none included, and the compiled loop agrees."""
from pathlib import Path

import numpy as np
import pytest

import adc
from adc.ir.interp import run
from adc.ir.parser import parse_module
from adc.passes.sink_sums import sink_sums

GOLDEN = Path(__file__).parent / "sink_sums" / "accumulated_sums.ir"
SOURCE = """
def f(x: f64[B, H], n: i64) -> (f64[H], f64, f64[H]):
    bias = zeros([H], dtype=f64)
    s = 0.5
    u = zeros([H], dtype=f64)
    v = f64(1.0)
    for i in range(n):
        bias = bias + sum(x * f64(i), axis=0)
        s = s - sum(sin(x) * f64(i))
        for j in range(2):
            u = u + x[0]
            v = v * 0.5
    return bias, s, u * v
"""


@pytest.mark.parametrize("n", [0, 1, 5])
def test_sums_summed_after_the_loop_give_the_loop_value(n):
    module = parse_module(GOLDEN.read_text())
    x = np.linspace(-2, 2, 7)
    after = sink_sums(module)
    assert "reduce_sum %0" not in str(after["f"])
    for got, want in zip(run(after, "f", x, np.int64(n)), run(module, "f", x, np.int64(n)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("n", [0, 3])
def test_a_compiled_loop_accumulating_a_bias_and_a_scalar(n):
    x = np.arange(12.0).reshape(3, 4) / 7
    bias, s, uv = adc.compile(SOURCE, "sums.adc").f(x, n)     # a body with a two-result loop
    np.testing.assert_allclose(bias.numpy(), sum(range(n)) * x.sum(axis=0), rtol=1e-13)
    np.testing.assert_allclose(uv.numpy(), 2 * n * x[0] * 0.25 ** n, rtol=1e-13)
    np.testing.assert_allclose(s.numpy(), 0.5 - sum(range(n)) * np.sin(x).sum(), rtol=1e-13)
