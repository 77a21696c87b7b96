"""Custom gradients and external functions through the passes: the VJP uses the user's backward
(checked against analytic values and float64 finite differences), higher order differentiates it,
the interpreter and the JIT agree, and goldens show the IR of samples/custom_gradients.adc."""
import os
from pathlib import Path

import numpy as np
import pytest

from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.interp import run
from adc.ir.parser import parse_module
from adc.ir.printer import format_func, format_module
from adc.passes.adjoint import vjp
from adc.passes.pipeline import run_pipeline
from tests.support.gradcheck import check_vjp
from tests.support.native import jit_module
from tests.support.repository import SAMPLES

SAMPLE = SAMPLES / "custom_gradients.adc"
GOLDEN = Path(__file__).parent / "custom_gradient"


@pytest.fixture(scope="module")
def sample():
    return compile_source(SAMPLE.read_text(), "custom_gradients.adc")


@pytest.fixture(scope="module")
def compiled(sample):
    """Every VJP the tests call, JIT-compiled once."""
    module = sample
    for name in ("clipped_square", "clipped_square_vector", "log1pexp", "gelu", "gram_energy"):
        module, _ = vjp(module, name)
    return jit_module(module)


def gradient(module, name, *args):
    """The VJP of `name` with a unit cotangent per result, by the interpreter."""
    module, grad = vjp(module, name)
    cts = [np.ones_like(o) for o in run(module, name, *args)]
    return run(module, grad.func.name, *args, *cts)


def test_clip_gradients_as_in_the_guide(sample, compiled):
    # d(v*v)/dv = 4 at v = 2, clipped to norm 0.5, times 2v: 2.0
    assert gradient(sample, "clipped_square", np.float32(2.0)) == (2.0,)
    assert compiled.clipped_square_vjp(np.float32(2.0), np.float32(1.0)) == 2.0


def test_clip_gradients_vector(sample, compiled):
    v = np.array([1.0, 2.0, 3.0], np.float32)
    expected = 2 * v * 0.5 / np.sqrt(3.0)     # the cotangent ones(3) clipped to norm 0.5, times 2v
    (got,) = gradient(sample, "clipped_square_vector", v)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    np.testing.assert_allclose(compiled.clipped_square_vector_vjp(v, np.float32(1.0)), expected, rtol=1e-6)


def test_stable_log1pexp_where_the_naive_gradient_is_nan(sample, compiled):
    x = np.float32(100.0)
    assert np.isnan(gradient(sample, "log1pexp_naive", x)[0])
    assert gradient(sample, "log1pexp", x) == (1.0,)
    assert compiled.log1pexp_vjp(x, np.float32(1.0)) == 1.0


def test_straight_through_round(sample):
    x = np.array([0.2, 1.7, -2.5], np.float32)
    ct = np.array([1.0, -2.0, 3.0], np.float32)
    module, grad = vjp(sample, "round_straight_through")
    np.testing.assert_array_equal(run(module, "round_straight_through", x)[0], np.round(x))
    np.testing.assert_array_equal(run(module, grad.func.name, x, ct)[0], ct)


def test_second_order_differentiates_the_custom_backward(sample):
    # d²/dx² log(1 + eˣ) = σ(x)(1 - σ(x)): the backward's e = exp(x) is differentiated too
    module, first = vjp(sample, "log1pexp")
    module, second = vjp(module, first.func.name)
    x = np.float32(0.5)
    d2x, _ = run(module, second.func.name, x, np.float32(1.0), np.float32(1.0))
    s = 1 / (1 + np.exp(-0.5))
    np.testing.assert_allclose(d2x, s * (1 - s), rtol=1e-6)


def test_expensive_forward_value_against_finite_differences(sample):
    w = np.random.default_rng(0).standard_normal((3, 3))
    check_vjp(sample, "gram_energy", [w], order=2)
    (got,) = gradient(sample, "gram_energy", w)
    np.testing.assert_allclose(got, 4 * (w @ w.T) @ w, rtol=1e-12)


def test_external_function_gradient(sample, compiled):
    x = np.linspace(-2.0, 2.0, 7)
    check_vjp(sample, "gelu", [x], order=2)
    ct = np.ones_like(x)
    (expected,) = gradient(sample, "gelu", x)
    np.testing.assert_allclose(compiled.gelu_vjp(x, ct), expected, rtol=1e-14)
    np.testing.assert_allclose(compiled.gelu(x), run(sample, "gelu", x)[0], rtol=1e-15)


def test_external_function_without_gradient_is_an_error():
    module = compile_source("extern def cbrt(x: f64) -> f64\n\ndef f(x: f64[N]) -> f64[N]:\n"
                            "    return cbrt(x) * 2.0\n", "k.adc")
    np.testing.assert_allclose(run(module, "f", np.array([8.0, 27.0]))[0], [4.0, 6.0])
    with pytest.raises(CompileError, match=r"no gradient for external function 'cbrt': attach one with "
                                           r"@gradient\(cbrt\)") as err:
        vjp(module, "f")
    assert (err.value.loc.line, err.value.loc.col) == (4, 12)


def test_pipeline_expands_custom_gradients(sample):
    optimized = run_pipeline(sample)
    assert not any(op.name == "custom_gradient" for f in optimized for op in f.ops)
    w = np.random.default_rng(1).standard_normal((4, 4))
    np.testing.assert_allclose(run(optimized, "gram_energy", w)[0], np.sum((w @ w.T) ** 2), rtol=1e-12)


def test_sample_ir_round_trips(sample):
    text = format_module(sample)
    assert format_module(parse_module(text, "custom_gradients.ir")) == text


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ADC_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text()


def test_golden_custom_gradient_node_and_its_adjoint(sample):
    # the kernel is one custom_gradient node; its VJP calls the forward once and passes the saved
    # g = w wᵀ to the user's backward; compiled, the VJP has two matmuls (g, then g @ w), not three
    module, grad = vjp(sample, "gram_energy")
    optimized = run_pipeline(module)[grad.func.name]
    text = "".join(format_func(f, locations=False) + "\n" for f in
                   (sample["gram_energy_forward"], sample["gram_energy_backward"], sample["gram_energy"], grad.func,
                    optimized))
    assert_golden("gram_energy.ir", text)
    assert sum(op.name == "matmul" for op in optimized.ops) == 2


def test_golden_extern_call_and_its_adjoint(sample):
    module, grad = vjp(sample, "gelu")
    assert_golden("gelu.ir", format_func(sample["gelu"], locations=False) + "\n"
           + format_func(grad.func, locations=False))


def test_two_argument_external_function_with_a_tuple_gradient():
    module = compile_source(
        "extern def hypot(x: f64, y: f64) -> f64\n\n@gradient(hypot)\n"
        "def hypot_grad(x: f64, y: f64, dh: f64) -> (f64, f64):\n    h = sqrt(x * x + y * y)\n"
        "    return dh * x / h, dh * y / h\n\n"
        "def f(x: f64[N], y: f64) -> f64[N]:\n    return hypot(x, y) * x\n", "k.adc")
    x, y = np.array([3.0, -1.0, 0.5]), np.float64(4.0)
    check_vjp(module, "f", [x, y], order=2)
    module, grad = vjp(module, "f")
    ct = np.array([1.0, 2.0, -1.0])
    compiled = jit_module(module)
    for got, want in zip(compiled.f_vjp(x, y, ct), run(module, grad.func.name, x, y, ct)):
        np.testing.assert_allclose(got, want, rtol=1e-14)


def test_a_custom_gradient_of_constants_is_called_not_folded():
    # simplify folds scalar ops of constants with the interpreter; a custom_gradient node runs a
    # function of the module, like a call, so it is kept (folding it looked up the forward in an
    # empty module)
    source = ("@custom_gradient\ndef triple(x: f64) -> f64:\n    def backward(dy: f64) -> f64:\n"
              "        return dy\n    return x * 3.0, backward\n\n"
              "def f(y: f64[N]) -> f64[N]:\n    return y * triple(2.0)\n")
    (dy,) = gradient(compile_source(source), "f", np.array([1.0, 2.0]))
    np.testing.assert_array_equal(dy, [6.0, 6.0])
