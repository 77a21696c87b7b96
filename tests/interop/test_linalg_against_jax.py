"""adc's derivatives of the linear-algebra builtins against JAX's (jnp.linalg, jax.scipy.linalg),
first order (adc.grad against jax.grad) and second order (adc.hessian against jax.hessian), on
the same scalar functions of the factors: random weights over every result, so each result's
rule is seen. Eigen- and singular vectors enter squared (u * u), so the functions do not depend
on the vectors' signs, which adc and LAPACK may choose differently; the factored matrices are
built symmetric positive definite (x @ x.T + 4 I) or symmetric (x + x.T) where the op reads one
triangle, so both libraries differentiate the same function of x."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402

import adc  # noqa: E402

N, M = 4, 6     # square matrices N x N; tall ones M x N for qr and lstsq

SOURCE = """
def chol(x: f64[N, N], d: f64[N, N], w: f64[N, N]) -> f64:
    return sum(w * cholesky(x @ transpose(x) + d))

def chosolve(x: f64[N, N], d: f64[N, N], b: f64[N, K]) -> f64:
    return sum(b * cho_solve(cholesky(x @ transpose(x) + d), b * b))

def trisolve(x: f64[N, N], b: f64[N, K]) -> f64:
    return sum(b * solve_triangular(x, b, lower=True)) + sum(b * solve_triangular(x, b, trans=1))

def linsolve(x: f64[N, N], b: f64[N, K]) -> f64:
    return sum(b * solve(x, b * b))

def inverse(x: f64[N, N], w: f64[N, N]) -> f64:
    return sum(w * inv(x))

def determinants(x: f64[N, N]) -> f64:
    sign, logdet = slogdet(x)
    return det(x) + sign * logdet

def factors(x: f64[M, N], w: f64[M, N], v: f64[N, N]) -> f64:
    q, r = qr(x)
    return sum(w * q * q) + sum(v * r * r)

def least_squares(x: f64[M, N], b: f64[M]) -> f64:
    return sum(lstsq(x, b * b) * lstsq(x, b))

def spectrum(x: f64[N, N], c: f64[N], w: f64[N, N]) -> f64:
    values, vectors = eigh(x + transpose(x))
    return sum(c * values) + sum(w * vectors * vectors)

def singular(x: f64[M, N], c: f64[N], w: f64[M, N], v: f64[N, N]) -> f64:
    u, s, vh = svd(x)
    return sum(c * s) + sum(w * u * u) + sum(v * vh * vh)
"""


def _jax_functions():
    return {
        "chol": lambda x, d, w: jnp.sum(w * jnp.linalg.cholesky(x @ x.T + d)),
        "chosolve": lambda x, d, b: jnp.sum(b * jsl.cho_solve((jnp.linalg.cholesky(x @ x.T + d), True), b * b)),
        "trisolve": lambda x, b: (jnp.sum(b * jsl.solve_triangular(x, b, lower=True))
                                  + jnp.sum(b * jsl.solve_triangular(x, b, trans=1))),
        "linsolve": lambda x, b: jnp.sum(b * jnp.linalg.solve(x, b * b)),
        "inverse": lambda x, w: jnp.sum(w * jnp.linalg.inv(x)),
        "determinants": lambda x: jnp.linalg.det(x) + jnp.prod(jnp.array(jnp.linalg.slogdet(x))),
        "factors": lambda x, w, v: (lambda q, r: jnp.sum(w * q * q) + jnp.sum(v * r * r))(*jnp.linalg.qr(x)),
        "least_squares": lambda x, b: jnp.sum(jnp.linalg.lstsq(x, b * b)[0] * jnp.linalg.lstsq(x, b)[0]),
        "spectrum": lambda x, c, w: (lambda e, v: jnp.sum(c * e) + jnp.sum(w * v * v))(*jnp.linalg.eigh(x + x.T)),
        "singular": lambda x, c, w, v: (lambda u, s, vh: jnp.sum(c * s) + jnp.sum(w * u * u)
                                        + jnp.sum(v * vh * vh))(*jnp.linalg.svd(x, full_matrices=False)),
    }


def _arguments(name: str, rng) -> tuple:
    """Each function's arguments: well-conditioned x (a lower-triangular one for the triangular
    solves), spread eigen- and singular values so their derivatives are well defined."""
    square = rng.standard_normal((N, N)) + 3 * np.eye(N)
    tall = np.linalg.qr(rng.standard_normal((M, N)))[0] * np.array([4.0, 3.0, 2.0, 1.0]) @ np.linalg.qr(
        rng.standard_normal((N, N)))[0]
    d = 4.0 * np.eye(N)
    return {
        "chol": (square, d, rng.standard_normal((N, N))),
        "chosolve": (square, d, rng.standard_normal((N, 2))),
        "trisolve": (np.tril(square), rng.standard_normal((N, 2))),
        "linsolve": (square, rng.standard_normal((N, 2))),
        "inverse": (square, rng.standard_normal((N, N))),
        "determinants": (square,),
        "factors": (tall, rng.standard_normal((M, N)), rng.standard_normal((N, N))),
        "least_squares": (tall, rng.standard_normal(M)),
        "spectrum": (np.diag([1.0, 2.5, 4.0, 6.0]) + 0.3 * rng.standard_normal((N, N)), rng.standard_normal(N),
                     rng.standard_normal((N, N))),
        "singular": (tall, rng.standard_normal(N), rng.standard_normal((M, N)), rng.standard_normal((N, N))),
    }[name]


NAMES = ["chol", "chosolve", "trisolve", "linsolve", "inverse", "determinants", "factors", "least_squares",
         "spectrum", "singular"]


@pytest.fixture(scope="module")
def kernels():
    jax.config.update("jax_enable_x64", True)
    yield adc.compile(SOURCE, "linalg_vs_jax.adc")
    jax.config.update("jax_enable_x64", False)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_and_hessians_agree_with_jax(kernels, name):
    args = _arguments(name, np.random.default_rng(NAMES.index(name)))
    kernel, reference = getattr(kernels, name), _jax_functions()[name]
    value = float(kernel(*args).numpy())
    np.testing.assert_allclose(value, float(reference(*args)), rtol=1e-10)
    got = adc.grad(kernel, wrt=0)(*args)
    want = np.asarray(jax.grad(reference)(*[jnp.asarray(a) for a in args]))
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-8, atol=1e-9 * scale)
    hessian = np.asarray(adc.hessian(kernel, wrt=0)(*args))
    want = np.asarray(jax.hessian(reference)(*[jnp.asarray(a) for a in args]))
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(hessian, want, rtol=1e-7, atol=1e-8 * scale)
