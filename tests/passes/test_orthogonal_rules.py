"""The derivative, batching and example-axis rules of qr, eigh and svd (and lstsq, composed of qr
and a triangular solve), run by the reference interpreter: first and second order against central
finite differences in float64, the JVP against differences and the VJP, a batch against a loop.

The interpreter's references are NumPy's LAPACK routines, whose column signs are their own, so the
functions checked are invariant under each column's sign (v * v, u * u, the projector of an
eigenvector, singular values); qr's signs are Householder's, smooth in a, and checked as they are.
Directions are random, not symmetric: eigh reads a's lower triangle, and its derivative must be
exactly zero in the other.
"""
import numpy as np
import pytest

from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes.batch import batch
from adc.passes.example_axis import MIXED, example_axes
from tests.support.gradcheck import check_jvp, check_vjp

TOLERANCES = dict(rtol=1e-5, atol=1e-7)
RNG = np.random.default_rng(0)
CASES = {
    "qr": ("def f(a: f64[B, M, N]) -> (f64[B, M, N], f64[B, N, N]):\n    q, r = qr(a)\n    return q, r\n",
           [RNG.standard_normal((2, 5, 3))]),
    "qr_wide": ("def f(a: f64[3, 5]) -> (f64[3, 3], f64[3, 5]):\n    q, r = qr(a)\n    return q, r\n",
                [RNG.standard_normal((3, 5))]),
    "lstsq": ("def f(a: f64[M, N], b: f64[M, K]) -> f64[N, K]:\n    return lstsq(a, b)\n",
              [RNG.standard_normal((5, 3)), RNG.standard_normal((5, 2))]),
    "eigh": ("def f(a: f64[B, N, N]) -> (f64[B, N], f64[B, N, N]):\n    w, v = eigh(a)\n    return w, v * v\n",
             [RNG.standard_normal((2, 4, 4))]),
    "projector": ("def f(a: f64[N, N]) -> f64[N, N]:\n    w, v = eigh(a)\n    p = v[:, 1:2]\n"
                  "    return p @ transpose(p)\n", [RNG.standard_normal((4, 4))]),
    "svd": ("def f(a: f64[B, M, N]) -> (f64[B, M, N], f64[B, N], f64[B, N, N]):\n    u, s, vh = svd(a)\n"
            "    return u * u, s, vh * vh\n", [RNG.standard_normal((2, 5, 3))]),
    "svd_wide": ("def f(a: f64[3, 5]) -> (f64[3, 3], f64[3], f64[3, 5]):\n    u, s, vh = svd(a)\n"
                 "    return u * u, s, vh * vh\n", [RNG.standard_normal((3, 5))]),
    "values": ("def f(a: f64[N, N], c: f64[M, N]) -> (f64[N], f64[N]):\n    return eigvalsh(a), svdvals(c)\n",
               [RNG.standard_normal((4, 4)), RNG.standard_normal((6, 4))]),
}


@pytest.mark.parametrize("case", CASES)
def test_first_and_second_order_and_forward(case):
    source, args = CASES[case]
    module = compile_source(source, f"{case}.adc")
    check_vjp(module, "f", args, order=2, **TOLERANCES)
    check_jvp(module, "f", args, **TOLERANCES)


def test_eigh_reads_the_lower_triangle():
    source, (a,) = CASES["eigh"]
    module = compile_source(source, "lower.adc")
    changed = a.copy()
    changed[..., 0, 3] += 5.0
    for got, want in zip(run(module, "f", a), run(module, "f", changed)):
        np.testing.assert_array_equal(got, want)


def test_repeated_eigenvalues_give_finite_eigenvalue_derivatives_and_unbounded_eigenvector_ones():
    # JAX's convention, F_ij = 1 / (w_j - w_i) inf where eigenvalues repeat, but F_ij x_ij = 0 where x_ij = 0:
    # a zero cotangent of v leaves the eigenvalues' gradient finite
    from adc.passes.adjoint import vjp
    module, grad = vjp(compile_source(CASES["eigh"][0], "degenerate.adc"), "f")
    q = np.linalg.qr(RNG.standard_normal((4, 4)))[0]
    a = np.broadcast_to((q * [1.0, 1.0, 2.0, 3.0]) @ q.T, (2, 4, 4)).copy()
    w_only = run(module, grad.func.name, a, np.ones((2, 4)), np.zeros((2, 4, 4)))[0]
    np.testing.assert_allclose(w_only, np.broadcast_to(np.tril(2 * np.eye(4) - np.eye(4)), (2, 4, 4)), atol=1e-12)
    # the eigenvectors of the repeated pair have no derivative: 1 / (w_j - w_i) of rounding-level gaps, or inf
    through_v = run(module, grad.func.name, a, np.zeros((2, 4)), RNG.standard_normal((2, 4, 4)))[0]
    assert not (np.abs(through_v) < 1e8).all()


@pytest.mark.parametrize("case", ["qr", "eigh", "svd"])
def test_a_batch_is_a_loop_over_examples(case):
    source, (a,) = CASES[case]
    single = source.replace("B, ", "")
    module = compile_source(single, "batch.adc")
    out, func = batch(module, "f", (True,))
    got = run(out, func.name, a)
    for k in range(a.shape[0]):
        for g, want in zip(got, run(module, "f", a[k])):
            np.testing.assert_allclose(g[k], want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("signature, body, axes", [
    ("x: f64[E, N, N]) -> f64[E, N]", "eigvalsh(x)", (0,)),          # stacked matrices
    ("x: f64[E, E]) -> f64[E]", "eigvalsh(x)", (MIXED,)),            # rows of one matrix
    ("x: f64[E, M, N]) -> f64[E, N]", "svdvals(x)", (0,)),
])
def test_examples_mix_only_along_the_matrices_own_axes(signature, body, axes):
    module = compile_source(f"def f({signature}:\n    return {body}\n", "axes.adc")
    assert example_axes(module["f"], 0, 0, module.funcs) == axes
