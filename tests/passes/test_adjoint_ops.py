"""Every differentiable operator and builtin of the language, first and second order, against
central finite differences in float64 (tests/support/gradcheck.py), with broadcasting.

One line per case (tests/support/derivative_cases.py), shared with the forward-mode tests. The
conventions at the kinks are pinned in test_adjoint.py.
"""
import numpy as np
import pytest

from adc.errors import CompileError
from adc.frontend import compile_source
from tests.support.derivative_cases import CASES, inputs, kernel_source
from tests.support.gradcheck import check_jacobian, check_jvp, check_vjp

@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_first_and_second_order(case):
    params, result, expr, domains = CASES[case]
    module = compile_source(kernel_source(params, result, expr), f"{case}.adc")
    check_vjp(module, "f", inputs(params, domains), order=2, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", ["mul", "div", "pow", "atan2", "hypot", "concat", "slice_step", "matmul_vector", "max",
                                  "pad", "logsumexp", "softmax", "log_softmax", "cumsum_flat", "cumprod_zeros"])
def test_full_jacobian(case):
    params, result, expr, domains = CASES[case]
    module = compile_source(kernel_source(params, result, expr), f"{case}.adc")
    check_jacobian(module, "f", inputs(params, domains), rtol=1e-5, atol=1e-7)


def test_digamma_once_and_the_end_of_the_chain():
    # d lgamma = digamma, d digamma = trigamma, which has no derivative: a located error says so
    source = "def f(x: f64[N]) -> f64:\n    return sum(digamma(x))\n"
    check_vjp(compile_source(source, "psi.adc"), "f", [np.linspace(-2.7, 6.0, 7)], order=1, rtol=1e-5, atol=1e-7)
    with pytest.raises(CompileError, match="trigamma has no derivative"):
        check_vjp(compile_source(source, "psi.adc"), "f", [np.linspace(0.5, 6.0, 7)], order=2)


def test_symbolic_shapes():
    # symbolic dimensions: slices with symbolic bounds, broadcasting over B, a dim-valued mean
    source = ("def f(x: f64[B, N], w: f64[N]) -> f64[B, N-3]:\n"
              "    return x[:, 2:-1] * w[1:-2] + mean(x, axis=1, keepdims=True) * x[:, :-3] / N\n")
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((4, 7)), rng.standard_normal(7)]
    check_vjp(compile_source(source, "sym.adc"), "f", args, order=2, rtol=1e-5, atol=1e-7)


def test_slice_with_symbolic_padding():
    # x[1:3] of f64[N] scatters back with a symbolic high width N-3: zeros are concatenated
    source = "def f(x: f64[N]) -> f64[2]:\n    return x[1:3] * x[0:2]\n"
    check_vjp(compile_source(source, "slice.adc"), "f", [np.arange(1.0, 7.0)], order=2, rtol=1e-5, atol=1e-7)


def test_two_results_and_a_call():
    # calls are inlined first; each result gets its own cotangent param
    source = ("def g(a: f64[N]) -> f64[N]:\n    return sin(a) * a\n\n"
              "def f(x: f64[N], y: f64) -> (f64[N], f64):\n    return g(x) * y, sum(g(x))\n")
    check_vjp(compile_source(source, "two.adc"), "f", [np.linspace(-1, 1, 5), np.array(0.7)],
              order=2, rtol=1e-5, atol=1e-7)


def test_cumprod_with_several_zeros_in_a_row():
    # first order stays exact with any number of zeros along the scan; second order only with at
    # most one per row (docs/language.md): a later zero's cotangent is built from products holding
    # the first zero, so it does not vary with that zero
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4)) * np.array([[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]])
    for flags in ("", ", exclusive=True", ", reverse=True"):
        module = compile_source(kernel_source("x", "[3,4]", f"cumprod(x, axis=1{flags})"), "zeros.adc")
        check_vjp(module, "f", [x], order=1, rtol=1e-5, atol=1e-7)
        check_jvp(module, "f", [x], rtol=1e-5, atol=1e-7)
