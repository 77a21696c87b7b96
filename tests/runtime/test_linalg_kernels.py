"""cholesky, solve_triangular and cho_solve in compiled kernels: values against SciPy (LAPACK) on
well- and ill-conditioned matrices, f32 and f64, symbolic sizes; NaN for a matrix that is not
positive definite; the bounds-checked build; a `.so` round trip; the Hessian, forward against
reverse mode, the batch Jacobian against a loop over examples, and a factorization inside a loop, each
against central differences.
"""
import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg as sl

import adc
from tests.support.gradcheck import central_jacobian

SOURCE = """
def factor(a: f64[B, N, N]) -> f64[B, N, N]:
    return cholesky(a)

def factor32(a: f32[B, N, N]) -> f32[B, N, N]:
    return cholesky(a)

def triangular(a: f64[N, N], b: f64[N, K]) -> (f64[N, K], f64[N, K], f64[N, K], f64[N]):
    return solve_triangular(a, b, lower=True), solve_triangular(a, b, trans=1), solve_triangular(a, b, unit_diagonal=True, lower=True, trans=1), solve_triangular(a, b[:, 0])

def spd_solve(a: f64[B, N, N], b: f64[B, N]) -> f64[B, N]:
    return cho_solve(cholesky(a), b)

def nll(a: f64[N, N], y: f64[N]) -> f64:
    l = cholesky(a @ transpose(a) + 1.0)
    return 0.5 * sum(y * cho_solve(l, y)) + 0.5 * sum(log(sum(l * transpose(l), axis=1)))

def per_example(x: f64[B, N, N], y: f64[B, N]) -> f64[B, N]:
    return cho_solve(cholesky(x @ transpose(x, [0, 2, 1]) + 2.0), y) * 3.0
"""


@pytest.fixture(scope="module")
def m():
    return adc.compile(SOURCE, "linalg.adc")


def spd_with_condition(rng, n: int, condition: float) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (q * np.geomspace(1.0, 1.0 / condition, n)) @ q.T


@pytest.mark.parametrize("condition", [1e1, 1e6, 1e12])
def test_cholesky_residual_is_bounded_by_the_condition_number(m, condition):
    rng = np.random.default_rng(0)
    a = np.stack([spd_with_condition(rng, n, condition) for n in (7,) * 3])
    l = m.factor(a).numpy()
    eps = np.finfo(np.float64).eps
    for k in range(3):
        assert np.array_equal(l[k], np.tril(l[k]))
        assert np.linalg.norm(l[k] @ l[k].T - a[k]) <= 50 * 7 * eps * np.linalg.norm(a[k])
        np.testing.assert_allclose(l[k], sl.cholesky(a[k], lower=True), atol=1e3 * eps * condition ** 0.5)


def test_f32_cholesky_and_symbolic_sizes(m):
    rng = np.random.default_rng(1)
    for n in (1, 3, 17):
        a = np.stack([spd_with_condition(rng, n, 10.0) for _ in range(2)]).astype(np.float32)
        np.testing.assert_allclose(m.factor32(a).numpy(), np.linalg.cholesky(a), rtol=1e-4, atol=1e-5)
    assert m.factor(np.zeros((2, 0, 0))).numpy().shape == (2, 0, 0)


@pytest.mark.parametrize("condition", [1e1, 1e8])
def test_triangular_solves_against_scipy(m, condition):
    rng = np.random.default_rng(2)
    n = 9
    a = np.linalg.cholesky(spd_with_condition(rng, n, condition)) + np.triu(rng.standard_normal((n, n)), 1)
    b = rng.standard_normal((n, 4))
    lower, upper_t, unit, vector = (r.numpy() for r in m.triangular(a, b))
    bound = 1e3 * np.finfo(np.float64).eps * condition
    for got, want in ((lower, sl.solve_triangular(a, b, lower=True)), (upper_t, sl.solve_triangular(a, b, trans=1)),
                      (unit, sl.solve_triangular(a, b, lower=True, trans=1, unit_diagonal=True)),
                      (vector, sl.solve_triangular(a, b[:, 0]))):
        np.testing.assert_allclose(got, want, rtol=bound, atol=bound * np.abs(want).max())


def test_cho_solve_against_scipy_batched(m):
    rng = np.random.default_rng(3)
    a = np.stack([spd_with_condition(rng, 6, 1e4) for _ in range(5)])
    b = rng.standard_normal((5, 6))
    want = np.stack([sl.cho_solve(sl.cho_factor(a[k], lower=True), b[k]) for k in range(5)])
    np.testing.assert_allclose(m.spd_solve(a, b).numpy(), want, rtol=1e-9)


def test_a_matrix_not_positive_definite_gives_nan_in_its_factor_only(m):
    rng = np.random.default_rng(4)
    a = np.stack([spd_with_condition(rng, 4, 10.0), -np.eye(4), spd_with_condition(rng, 4, 10.0)])
    a[2, 3, 3] = np.nan
    l = m.factor(a).numpy()
    assert np.isnan(l[1]).all() and np.isnan(l[2]).all()
    np.testing.assert_allclose(l[0], np.linalg.cholesky(a[0]))
    assert np.isnan(m.spd_solve(a, np.ones((3, 4))).numpy()[1:]).all()


def test_the_bounds_checked_build_and_its_derivatives_stay_in_bounds():
    checked = adc.compile(SOURCE, "linalg_checked.adc", check_bounds=True)
    rng = np.random.default_rng(5)
    a = np.stack([spd_with_condition(rng, 5, 10.0) for _ in range(3)])
    np.testing.assert_allclose(checked.factor(a).numpy(), np.linalg.cholesky(a))
    x, y = rng.standard_normal((3, 4)), rng.standard_normal(3)
    np.testing.assert_allclose(adc.hessian(checked.nll)(x[:, :3], y).numpy(),
                               adc.hessian(adc.compile(SOURCE, "linalg.adc").nll)(x[:, :3], y).numpy(), rtol=1e-12)
    adc.batch_jacobian(checked.per_example)(rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3)))


def test_hessian_of_the_negative_log_likelihood_against_differences_and_forward_against_reverse(m):
    rng = np.random.default_rng(6)
    a, y = rng.standard_normal((4, 4)), rng.standard_normal(4)
    hessian = adc.hessian(m.nll, wrt="a")(a, y).numpy()
    gradient = adc.grad(m.nll, wrt="a")
    np.testing.assert_allclose(hessian, central_jacobian(lambda v: gradient(v, y).numpy(), a), rtol=1e-6, atol=1e-7)
    forward = adc.jacfwd(m.spd_solve, wrt="a")
    reverse = adc.jacobian(m.spd_solve, wrt="a", mode="reverse")
    spd = a @ a.T + 4 * np.eye(4)
    np.testing.assert_allclose(forward(spd[None], y[None]).numpy(), reverse(spd[None], y[None]).numpy(), rtol=1e-10,
                               atol=1e-12)


def test_batch_jacobian_is_a_loop_over_examples(m):
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((3, 4, 4)), rng.standard_normal((3, 4))
    got = adc.batch_jacobian(m.per_example, wrt="x")(x, y).numpy()
    for k in range(3):
        want = central_jacobian(lambda v: m.per_example(v[None], y[k:k + 1]).numpy()[0], x[k])
        np.testing.assert_allclose(got[k], want, rtol=1e-6, atol=1e-8)


def test_a_shared_object_round_trip(m, tmp_path):
    path = tmp_path / "linalg.adc"
    path.write_text(SOURCE)
    subprocess.run([sys.executable, "-m", "adc", "compile", str(path), "-o", str(tmp_path / "linalg.so")], check=True)
    loaded = adc.load(tmp_path / "linalg.so")
    rng = np.random.default_rng(8)
    a, y = rng.standard_normal((4, 4)), rng.standard_normal(4)
    np.testing.assert_array_equal(loaded.nll(a, y).numpy(), m.nll(a, y).numpy())
    np.testing.assert_allclose(adc.grad(loaded.nll)(a, y)[0].numpy(), adc.grad(m.nll)(a, y)[0].numpy(), rtol=1e-13)


def test_a_factorization_in_a_loop_first_and_second_order():
    loop = adc.compile("def f(a: f64[N, N], x0: f64[N]) -> f64:\n    x = x0\n    for i in range(3):\n"
                       "        x = cho_solve(cholesky(a + 0.1 * sum(x * x)), x) + x0\n    return sum(x * x)\n", "loop.adc")
    rng = np.random.default_rng(9)
    y, x0 = rng.standard_normal((4, 4)), rng.standard_normal(4)
    a = y @ y.T + 4 * np.eye(4)
    gradient = adc.grad(loop.f, wrt="a")(a, x0).numpy()
    np.testing.assert_allclose(gradient, central_jacobian(lambda v: loop.f(v, x0).numpy(), a), rtol=1e-6, atol=1e-9)
    in_x0 = adc.grad(loop.f, wrt="x0")
    np.testing.assert_allclose(adc.hessian(loop.f, wrt="x0")(a, x0).numpy(),
                               central_jacobian(lambda v: in_x0(a, v).numpy(), x0), rtol=1e-6, atol=1e-8)
