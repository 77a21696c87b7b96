"""The derivative, batching and example-axis rules of lu_factor, and of what is composed from it
(solve, inv, det, slogdet, lu_solve), run by the reference interpreter: first and second order
against central finite differences in float64, the JVP against differences and the VJP, a batch
against a loop over examples. The pivots are piecewise constant: the random matrices keep them
fixed within the differences' steps.
"""
import numpy as np
import pytest
import scipy.linalg as sl

from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes.batch import batch
from adc.passes.example_axis import MIXED, example_axes
from tests.support.gradcheck import check_jvp, check_vjp

TOLERANCES = dict(rtol=1e-5, atol=1e-7)


def test_the_factor_and_pivots_are_scipys():
    source = "def f(a: f64[B, N, N]) -> (f64[B, N, N], i64[B, N]):\n    lu, piv = lu_factor(a)\n    return lu, piv\n"
    a = np.random.default_rng(0).standard_normal((3, 6, 6))
    lu, piv = run(compile_source(source, "lu.adc"), "f", a)
    for k in range(3):
        want_lu, want_piv = sl.lu_factor(a[k])
        np.testing.assert_allclose(lu[k], want_lu, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(piv[k], want_piv)


def test_lu_factor_first_and_second_order_and_forward():
    source = "def f(a: f64[B, N, N]) -> f64[B, N, N]:\n    lu, piv = lu_factor(a)\n    return lu\n"
    module = compile_source(source, "lu.adc")
    args = [np.random.default_rng(1).standard_normal((2, 4, 4))]
    check_vjp(module, "f", args, order=2, **TOLERANCES)
    check_jvp(module, "f", args, **TOLERANCES)


COMPOSED = [
    ("solve(a, b)", "f64[N, K]"),
    ("inv(a) @ b", "f64[N, K]"),
    ("det(a) * b", "f64[N, K]"),
    ("lu_solve(lu, piv, b)", "f64[N, K]"),
    ("slogdet(a)", "(f64, f64)"),
]


@pytest.mark.parametrize("body, result", COMPOSED, ids=[c[0] for c in COMPOSED])
def test_composed_functions_first_and_second_order_and_forward(body, result):
    source = (f"def f(a: f64[N, N], b: f64[N, K]) -> {result}:\n    lu, piv = lu_factor(a)\n"
              + ("    s, l = slogdet(a)\n    return s * sum(b), l\n" if body == "slogdet(a)" else f"    return {body}\n"))
    rng = np.random.default_rng(2)
    module = compile_source(source, "composed.adc")
    args = [rng.standard_normal((4, 4)), rng.standard_normal((4, 2))]
    check_vjp(module, "f", args, order=2, **TOLERANCES)
    check_jvp(module, "f", args, **TOLERANCES)


def test_a_batch_is_a_loop_over_examples():
    source = ("def f(a: f64[N, N], b: f64[N]) -> (f64[N], f64, i64[N]):\n    lu, piv = lu_factor(a)\n"
              "    return solve(a, b), det(a), piv\n")
    module = compile_source(source, "batch.adc")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 3, 3)), rng.standard_normal((4, 3))
    for flags in [(True, True), (True, False), (False, True)]:
        args = [x if flag else x[0] for x, flag in zip((a, b), flags)]
        out, func = batch(module, "f", flags)
        got = run(out, func.name, *args)
        for k in range(4):
            example = [x[k] if flag else x[0] for x, flag in zip((a, b), flags)]
            for g, want in zip(got, run(module, "f", *example)):
                np.testing.assert_allclose(g[k], want, rtol=1e-12)


@pytest.mark.parametrize("signature, body, axes", [
    ("x: f64[E, N, N]) -> f64[E, N, N]", "inv(x)", (0,)),                      # stacked matrices
    ("x: f64[E, E]) -> f64[E, E]", "inv(x)", (MIXED,)),                        # rows of one matrix
    ("x: f64[E, K], w: f64[E, E]) -> f64[E, K]", "solve(w, x)", (MIXED,)),                 # rows of b
    ("x: f64[E, N], w: f64[N, N]) -> f64[N, E]", "solve(w, transpose(x))", (1,)),       # columns of b, apart
])
def test_examples_mix_along_the_matrices_own_axes(signature, body, axes):
    module = compile_source(f"def f({signature}:\n    return {body}\n", "axes.adc")
    assert example_axes(module["f"], 0, 0, module.funcs) == axes
