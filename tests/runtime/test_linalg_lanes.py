"""cholesky and solve_triangular on stacks of small matrices of static order, which run W matrices
at a time in SIMD lanes and the stack's last < W one by one: values against NumPy for orders
1..9 and stack sizes around multiples of every vector width, f32 and f64, all four triangular
solves with matrix and vector right-hand sides, the bounds-checked build, and a matrix that is not
positive definite among positive definite ones (NaN in its factor only, wherever it sits).
"""
import functools

import numpy as np
import pytest

import adc

ORDERS = range(1, 10)
STACKS = (0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 1003)
# the checked build moves lanes one element at a time (every access checked): two small orders
# over every stack size cover its paths (whole groups of W and the rest) at a fraction of the compiles
BUILDS = [("default", n) for n in ORDERS] + [("checked", n) for n in (1, 4)]


def source(n: int) -> str:
    return f"""
def factor(a: f64[B, {n}, {n}]) -> f64[B, {n}, {n}]:
    return cholesky(a)

def factor32(a: f32[B, {n}, {n}]) -> f32[B, {n}, {n}]:
    return cholesky(a)

def solves(a: f64[B, {n}, {n}], b: f64[B, {n}, 3]) -> (f64[B, {n}, 3], f64[B, {n}, 3], f64[B, {n}, 3], f64[B, {n}]):
    return solve_triangular(a, b, lower=True), solve_triangular(a, b, trans=1), solve_triangular(a, b, unit_diagonal=True, lower=True, trans=1), cho_solve(a, b[:, :, 0])

def solves32(a: f32[B, {n}, {n}], b: f32[B, {n}, 3]) -> f32[B, {n}, 3]:
    return solve_triangular(a, b, trans=1)
"""


@functools.lru_cache(maxsize=None)
def module(build: str, n: int) -> adc.Module:
    return adc.compile(source(n), f"lanes{n}.adc", check_bounds=build == "checked")


def spd(rng, stack: int, n: int) -> np.ndarray:
    g = rng.standard_normal((stack, n, n))
    return g @ g.transpose(0, 2, 1) + n * np.eye(n)


def triangular_solve(a, b, lower, trans, unit):
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t = t - np.diagonal(t, axis1=-2, axis2=-1)[..., None] * np.eye(a.shape[-1]) + np.eye(a.shape[-1])
    return np.linalg.solve(t.transpose(0, 2, 1) if trans else t, b)


@pytest.mark.parametrize("build, n", BUILDS)
def test_cholesky_against_numpy_for_every_stack_size(build, n):
    m = module(build, n)
    rng = np.random.default_rng(n)
    for stack in STACKS:
        a = spd(rng, stack, n)
        want = np.linalg.cholesky(a)
        np.testing.assert_allclose(m.factor(a).numpy(), want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(m.factor32(a.astype(np.float32)).numpy(), want, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("build, n", BUILDS)
def test_triangular_solves_against_numpy_for_every_stack_size(build, n):
    m = module(build, n)
    rng = np.random.default_rng(10 + n)
    for stack in STACKS:
        a = rng.standard_normal((stack, n, n)) + 2 * n * np.eye(n)
        b = rng.standard_normal((stack, n, 3))
        lower, upper_t, unit, vector = (r.numpy() for r in m.solves(a, b))
        np.testing.assert_allclose(lower, triangular_solve(a, b, True, False, False), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(upper_t, triangular_solve(a, b, False, True, False), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(unit, triangular_solve(a, b, True, True, True), rtol=1e-10, atol=1e-12)
        y = triangular_solve(a, b[..., :1], True, False, False)
        np.testing.assert_allclose(vector, triangular_solve(a, y, True, True, False)[..., 0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(m.solves32(a.astype(np.float32), b.astype(np.float32)).numpy(),
                                   upper_t, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("build, n", [("default", 1), ("default", 4), ("default", 9), ("checked", 4)])
def test_a_matrix_not_positive_definite_gives_nan_in_its_factor_only(build, n):
    m = module(build, n)
    rng = np.random.default_rng(20 + n)
    for bad in (0, 5, 16, 17, 32, 36):
        a = spd(rng, 37, n)
        a[bad, n - 1, n - 1] = -1.0
        for factor, dtype in ((m.factor, np.float64), (m.factor32, np.float32)):
            got = factor(a.astype(dtype)).numpy()
            assert np.isnan(got[bad]).all()
            others = np.delete(np.arange(37), bad)
            np.testing.assert_allclose(got[others], np.linalg.cholesky(a[others]), rtol=2e-4, atol=2e-4)
