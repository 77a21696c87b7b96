"""The vmap composition: batch with the batch axis moved by transposes, verified, and equal to the
unbatched function run example by example (NumPy interpreter as the oracle)."""
import numpy as np
import pytest

from adc.frontend import compile_source
from adc.ir.interp import run
from adc.ir.printer import format_func
from adc.passes.vmap import vmap

SOURCE = "def f(x: f64[N, M], w: f64[M]) -> (f64[N], f64):\n    y = x @ w\n    return y, sum(y)\n"
rng = np.random.default_rng(0)


def test_axes_moved_by_transposes_match_the_examples_one_by_one():
    module = compile_source(SOURCE, "f.adc")
    module, func = vmap(module, "f", (2, None), (1, 0))
    text = format_func(func)
    assert text.startswith("func @f_vmap(%x: f64[N,M,NB], %w: f64[M]) -> (f64[N,NB], f64[NB])")
    assert "transpose" in text
    xs, w = rng.standard_normal((3, 2, 5)), rng.standard_normal(2)
    y, s = run(module, "f_vmap", xs, w)
    for b in range(5):
        want_y, want_s = run(module, "f", xs[..., b], w)
        np.testing.assert_allclose(y[:, b], want_y)
        np.testing.assert_allclose(s[b], want_s)


def test_leading_axes_are_the_batching_pass_alone():
    module, func = vmap(compile_source(SOURCE, "f.adc"), "f", (0, 0), (0, 0))
    assert func.name == "f_vmap" and "transpose" not in format_func(func)


@pytest.mark.parametrize("in_axes, out_axes", [((0,), (0, 0)), ((None, None), (0, 0)), ((3, None), (0, 0)),
                                               ((0, None), (2, 0))])
def test_axes_that_do_not_fit_the_function(in_axes, out_axes):
    with pytest.raises(ValueError, match="vmap of @f"):
        vmap(compile_source(SOURCE, "f.adc"), "f", in_axes, out_axes)
