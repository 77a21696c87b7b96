"""lu_factor and what is composed from it (lu_solve, solve, inv, det, slogdet) in compiled kernels:
values against SciPy and NumPy (LAPACK) on well- and ill-conditioned matrices, f32 and f64,
symbolic sizes; an exactly singular matrix; the bounds-checked build; a `.so` round trip;
Hessians through slogdet and solve, forward against reverse mode, the batch Jacobian, and a
Newton iteration in a `while` loop, each against central differences.
"""
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import adc
from tests.support.gradcheck import central_jacobian

SOURCE = """
def factor(a: f64[B, N, N]) -> (f64[B, N, N], i64[B, N]):
    lu, piv = lu_factor(a)
    return lu, piv

def factor32(a: f32[B, N, N]) -> (f32[B, N, N], i64[B, N]):
    lu, piv = lu_factor(a)
    return lu, piv

def composed(a: f64[B, N, N], b: f64[B, N, K]) -> (f64[B, N, K], f64[B, N, N], f64[B], f64[B], f64[B]):
    sign, logdet = slogdet(a)
    return solve(a, b), inv(a), det(a), sign, logdet

def factored(a: f64[N, N], b: f64[N]) -> f64[N]:
    lu, piv = lu_factor(a)
    return lu_solve(lu, piv, b)

def log_det(a: f64[N, N]) -> f64:
    sign, logdet = slogdet(a @ transpose(a) + 1.0)
    return logdet * sign

def quadratic(a: f64[N, N], y: f64[N]) -> f64:
    return sum(y * solve(a, y)) + sum(inv(a) * inv(a))

"""


def with_condition(rng, n: int, condition: float) -> np.ndarray:
    q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (q1 * np.geomspace(1.0, 1.0 / condition, n)) @ q2.T


@pytest.fixture(scope="module")
def m():
    return adc.compile(SOURCE, "lu.adc")


EPS = np.finfo(np.float64).eps


@pytest.mark.parametrize("condition", [1e1, 1e6, 1e12])
def test_the_factorization_is_scipys_and_its_residual_is_small(m, condition):
    rng = np.random.default_rng(0)
    n = 9
    a = np.stack([with_condition(rng, n, condition) for _ in range(3)])
    lu, piv = (r.numpy() for r in m.factor(a))
    for k in range(3):
        want_lu, want_piv = sl.lu_factor(a[k])
        np.testing.assert_array_equal(piv[k], want_piv)
        p, low, up = sl.lu(a[k])
        ours_l, ours_u = np.tril(lu[k], -1) + np.eye(n), np.triu(lu[k])
        assert np.linalg.norm(p.T @ a[k] - ours_l @ ours_u) <= 10 * n * EPS * np.linalg.norm(a[k])
        np.testing.assert_allclose(lu[k], want_lu, rtol=0, atol=1e3 * n * EPS * condition * np.abs(want_lu).max())


@pytest.mark.parametrize("condition", [1e1, 1e8])
def test_solve_inv_det_slogdet_against_numpy(m, condition):
    rng = np.random.default_rng(1)
    a = np.stack([with_condition(rng, 7, condition) for _ in range(4)])
    b = rng.standard_normal((4, 7, 3))
    x, inverse, det, sign, logdet = (r.numpy() for r in m.composed(a, b))
    bound = 1e2 * 7 * EPS * condition
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=bound, atol=bound * np.abs(x).max())
    np.testing.assert_allclose(inverse, np.linalg.inv(a), rtol=bound, atol=bound * np.abs(inverse).max())
    np.testing.assert_allclose(det, np.linalg.det(a), rtol=bound)       # each rounding error moves it by up to cond·eps
    want_sign, want_logdet = np.linalg.slogdet(a)
    np.testing.assert_array_equal(sign, want_sign)
    np.testing.assert_allclose(logdet, want_logdet, rtol=0, atol=bound)
    np.testing.assert_allclose(m.factored(a[0], b[0, :, 0]).numpy(), sl.lu_solve(sl.lu_factor(a[0]), b[0, :, 0]),
                               rtol=bound)


def test_f32_and_symbolic_sizes(m):
    rng = np.random.default_rng(2)
    for n in (1, 3, 17):
        a = rng.standard_normal((2, n, n)).astype(np.float32)
        lu, piv = (r.numpy() for r in m.factor32(a))
        for k in range(2):
            want_lu, want_piv = sl.lu_factor(a[k])
            np.testing.assert_array_equal(piv[k], want_piv)
            np.testing.assert_allclose(lu[k], want_lu, rtol=1e-4, atol=1e-4)
    lu, piv = m.factor(np.zeros((2, 0, 0)))
    assert lu.numpy().shape == (2, 0, 0) and piv.numpy().shape == (2, 0)


def test_an_exactly_singular_matrix_divides_by_its_zero_pivot_alone(m):
    a = np.stack([np.eye(3) * 2, [[1.0, 2, 3], [2, 4, 6], [1, 0, 1]], np.zeros((3, 3))])
    lu, piv = (r.numpy() for r in m.factor(a))
    for k in range(3):       # LAPACK's factor: finite, a zero on U's diagonal (SciPy warns of it)
        with pytest.warns(sl.LinAlgWarning) if k else warnings.catch_warnings():
            want_lu, want_piv = sl.lu_factor(a[k])
        np.testing.assert_allclose(lu[k], want_lu)
        np.testing.assert_array_equal(piv[k], want_piv)
    assert np.isfinite(lu).all() and (np.diagonal(lu[1:], axis1=-2, axis2=-1) == 0).any(axis=-1).all()
    x, inverse, det, sign, logdet = (r.numpy() for r in m.composed(a, np.ones((3, 3, 2))))
    np.testing.assert_allclose(x[0], 0.5 * np.ones((3, 2)))
    np.testing.assert_allclose(inverse[0], 0.5 * np.eye(3))
    for k in (1, 2):
        assert not np.isfinite(x[k]).all() and not np.isfinite(inverse[k]).all()
    np.testing.assert_array_equal(det, [8.0, 0.0, 0.0])
    np.testing.assert_array_equal(sign, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(logdet, [np.log(8.0), -np.inf, -np.inf])


@pytest.mark.parametrize("kernel", ["log_det", "quadratic"])
def test_hessians_through_slogdet_and_solve_against_differences(m, kernel):
    rng = np.random.default_rng(3)
    a, y = rng.standard_normal((4, 4)) + 3 * np.eye(4), rng.standard_normal(4)
    f = getattr(m, kernel)
    hessian = adc.hessian(f, wrt="a")(a, y).numpy() if kernel == "quadratic" else adc.hessian(f)(a).numpy()
    gradient = adc.grad(f, wrt="a")
    want = central_jacobian(lambda v: gradient(v, y).numpy() if kernel == "quadratic" else gradient(v).numpy(), a)
    np.testing.assert_allclose(hessian, want, rtol=1e-6, atol=1e-7)


def test_forward_against_reverse_and_the_batch_jacobian_against_a_loop():
    module = adc.compile(PER_EXAMPLE, "per_example.adc")
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((3, 4, 4)), rng.standard_normal((3, 4))
    forward = adc.jacfwd(module.per_example, wrt="x")(x, y).numpy()
    reverse = adc.jacobian(module.per_example, wrt="x", mode="reverse")(x, y).numpy()
    np.testing.assert_allclose(forward, reverse, rtol=1e-10, atol=1e-12)
    got = adc.batch_jacobian(module.per_example, wrt="x")(x, y).numpy()
    for k in range(3):
        want = central_jacobian(lambda v: module.per_example(v[None], y[k:k + 1]).numpy()[0], x[k])
        np.testing.assert_allclose(got[k], want, rtol=1e-6, atol=1e-8)


PER_EXAMPLE = """
def per_example(x: f64[B, N, N], y: f64[B, N]) -> f64[B, N]:
    lu, piv = lu_factor(x)
    return lu_solve(lu, piv, y) * 3.0 + solve(x, y[:, :, None])[:, :, 0]
"""

NEWTON = """
def newton(a: f64[N, N], b: f64[N], x0: f64[N], eye: f64[N, N]) -> f64[N]:
    # minimizes ½ xᵀ a x - bᵀ x + Σ softplus(x): gradient a x - b + σ(x), Hessian a + diag(σ(x)(1 - σ(x)))
    x = x0
    step = 1.0
    while step > 1e-24:
        s = sigmoid(x)
        gradient = a @ x - b + s
        hessian = a + broadcast_to(s * (1.0 - s), [N, N]) * eye
        d = solve(hessian, gradient)
        x = x - d
        step = sum(d * d)
    return x
"""


def test_a_newton_iteration_in_a_while_loop_and_its_gradient():
    module = adc.compile(NEWTON, "newton.adc")
    rng = np.random.default_rng(5)
    y = rng.standard_normal((4, 4))
    a, b = y @ y.T + 4 * np.eye(4), rng.standard_normal(4)
    x0, eye = np.zeros(4), np.eye(4)
    x = module.newton(a, b, x0, eye).numpy()
    np.testing.assert_allclose(a @ x - b + 1 / (1 + np.exp(-x)), 0, atol=1e-12)
    in_b = adc.jacobian(module.newton, wrt="b", mode="reverse")(a, b, x0, eye).numpy()
    np.testing.assert_allclose(in_b, central_jacobian(lambda v: module.newton(a, v, x0, eye).numpy(), b),
                               rtol=1e-6, atol=1e-8)


def test_the_bounds_checked_build_and_a_shared_object(m, tmp_path):
    checked = adc.compile(SOURCE, "lu_checked.adc", check_bounds=True)
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 5, 5)), rng.standard_normal((3, 5, 2))
    for got, want in zip(checked.composed(a, b), m.composed(a, b)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-13)     # its code is laid out apart
    np.testing.assert_allclose(adc.hessian(checked.log_det)(a[0]).numpy(), adc.hessian(m.log_det)(a[0]).numpy(),
                               rtol=1e-12)
    adc.batch_jacobian(adc.compile(PER_EXAMPLE, "pe_checked.adc", check_bounds=True).per_example)(
        rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3)))
    path = tmp_path / "lu.adc"
    path.write_text(SOURCE)
    subprocess.run([sys.executable, "-m", "adc", "compile", str(path), "-o", str(tmp_path / "lu.so")], check=True)
    loaded = adc.load(tmp_path / "lu.so")
    for got, want in zip(loaded.composed(a, b), m.composed(a, b)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_allclose(adc.grad(loaded.log_det)(a[0]).numpy(), adc.grad(m.log_det)(a[0]).numpy(), rtol=1e-13)
