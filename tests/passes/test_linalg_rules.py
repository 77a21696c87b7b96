"""The derivative, batching and example-axis rules of cholesky and triangular_solve, run by the
reference interpreter: first and second order against central finite differences in float64, the
JVP against differences and the VJP, a batch against a loop over examples.

Directions are random matrices, not symmetric ones: each op reads one triangle of `a`, and its
derivative must be exactly zero in the other (a Hessian through cho_solve and the log-determinant
is checked the same way).
"""
import numpy as np
import pytest

from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes.batch import batch
from adc.passes.example_axis import MIXED, example_axes
from tests.support.gradcheck import check_jvp, check_vjp

TOLERANCES = dict(rtol=1e-5, atol=1e-7)


def spd(rng, n: int, lead=()) -> np.ndarray:
    x = rng.standard_normal(lead + (n, n))
    return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)


def triangular(rng, n: int, lead=()) -> np.ndarray:
    return rng.standard_normal(lead + (n, n)) + 3 * np.eye(n)


SOLVES = [f"solve_triangular(a, b, trans={trans}, lower={lower}, unit_diagonal={unit})"
          for trans in (0, 1) for lower in (True, False) for unit in (False, True)]


@pytest.mark.parametrize("expr", SOLVES)
def test_triangular_solve_first_and_second_order_and_forward(expr):
    source = f"def f(a: f64[B, N, N], b: f64[B, N, K]) -> f64[B, N, K]:\n    return {expr}\n"
    rng = np.random.default_rng(0)
    module = compile_source(source, "solve.adc")
    args = [triangular(rng, 4, (2,)), rng.standard_normal((2, 4, 3))]
    check_vjp(module, "f", args, order=2, **TOLERANCES)
    check_jvp(module, "f", args, **TOLERANCES)


def test_cholesky_reads_the_lower_triangle_first_and_second_order_and_forward():
    source = "def f(a: f64[B, N, N]) -> f64[B, N, N]:\n    return cholesky(a)\n"
    rng = np.random.default_rng(1)
    a = spd(rng, 4, (2,))
    a[..., 0, 3] += 5.0     # the upper triangle is never read
    module = compile_source(source, "chol.adc")
    symmetric = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    np.testing.assert_allclose(run(module, "f", a)[0], np.linalg.cholesky(symmetric))
    check_vjp(module, "f", [a], order=2, **TOLERANCES)
    check_jvp(module, "f", [a], **TOLERANCES)


def test_hessian_through_cho_solve_and_the_log_determinant():
    # second order of a Gaussian's negative log-likelihood, in a and y together
    source = ("def f(a: f64[N, N], y: f64[N]) -> f64:\n    l = cholesky(a)\n"
              "    d = sum(l * transpose(l), axis=1)\n"
              "    return 0.5 * sum(y * cho_solve(l, y)) + 0.5 * sum(log(d))\n")
    rng = np.random.default_rng(2)
    module = compile_source(source, "nll.adc")
    check_vjp(module, "f", [spd(rng, 5), rng.standard_normal(5)], order=2, **TOLERANCES)


def test_the_log_determinant_is_the_log_of_numpys():
    source = ("def f(a: f64[N, N]) -> f64:\n    l = cholesky(a)\n"
              "    return 2.0 * sum(log(sum(l * transpose(l), axis=1)) * 0.5)\n")
    a = spd(np.random.default_rng(3), 6)
    (got,) = run(compile_source(source, "logdet.adc"), "f", a)
    np.testing.assert_allclose(got, np.linalg.slogdet(a)[1], rtol=1e-12)


@pytest.mark.parametrize("flags", [(True, True), (True, False), (False, True)])
def test_a_batch_is_a_loop_over_examples(flags):
    source = ("def f(a: f64[N, N], b: f64[N, K]) -> (f64[N, N], f64[N, K]):\n"
              "    l = cholesky(a)\n    return l, solve_triangular(l, b, lower=True, trans=1)\n")
    module = compile_source(source, "batch.adc")
    rng = np.random.default_rng(4)
    a, b = (spd(rng, 3, (4,)), rng.standard_normal((4, 3, 2)))
    args = [x if flag else x[0] for x, flag in zip((a, b), flags)]
    out, func = batch(module, "f", flags)
    got = run(out, func.name, *args)
    for k, example in enumerate(zip(a if flags[0] else [a[0]] * 4, b if flags[1] else [b[0]] * 4)):
        for g, want in zip(got, run(module, "f", *example)):
            np.testing.assert_allclose(g[k], want, rtol=1e-12)


@pytest.mark.parametrize("signature, body, axes", [
    ("x: f64[E, N, N]) -> f64[E, N, N]", "cholesky(x)", (0,)),                        # stacked matrices
    ("x: f64[E, E]) -> f64[E, E]", "cholesky(x)", (MIXED,)),                          # rows of one matrix
    ("x: f64[E, N], w: f64[E, E]) -> f64[E, N]", "solve_triangular(w, x)", (MIXED,)),  # rows of b
    ("x: f64[E, N], w: f64[N, N]) -> f64[N, E]", "solve_triangular(w, transpose(x))", (1,)),   # columns of b
])
def test_examples_mix_only_along_the_matrices_own_axes(signature, body, axes):
    module = compile_source(f"def f({signature}:\n    return {body}\n", "axes.adc")
    assert example_axes(module["f"], 0, 0, module.funcs) == axes
