"""cholesky, solve_triangular and matmul on stacks of small matrices of static order, which run W
matrices at a time in SIMD lanes and the stack's last < W one by one: values against NumPy for
orders 1..9 and stack sizes around multiples of every vector width, f32 and f64, all four
triangular solves with matrix and vector right-hand sides, products of transposed operands and
outer products, the bounds-checked build, a matrix that is not positive definite among positive
definite ones (NaN in its factor only, wherever it sits), the gradient of a Cholesky, a solve
and a log determinant (its VJP made of these ops) against the kernel of unknown order's; and eigh
and svd (one-sided Jacobi over lanes) bit for bit the kernel of unknown order's (a matrix at a
time), repeated eigenvalues, zero and NaN matrices among others included.
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

def products(a: f64[B, {n}, {n}], b: f64[B, {n}, 3], x: f64[B, {n}, 1]
             ) -> (f64[B, {n}, 3], f64[B, {n}, 3], f64[B, {n}, {n}], f64[B, 3, 3]):
    at = transpose(a, (0, 2, 1))
    return a @ b, at @ b, x @ transpose(x, (0, 2, 1)), transpose(b, (0, 2, 1)) @ (at @ b)

def products32(a: f32[B, {n}, {n}], b: f32[B, {n}, 3]) -> f32[B, {n}, 3]:
    return transpose(a, (0, 2, 1)) @ b

def spd_objective(a: f64[B, {n}, {n}], b: f64[B, {n}]) -> f64:
    l = cholesky(a)
    k = linspace(0.0, {n} - 1.0, {n})
    return sum(cho_solve(l, b)) + sum(log(sum(l * f64(k[:, None] == k[None, :]), axis=2)))
"""

SPECTRA = """
def spectrum(a: f64[B, {n}, {n}]) -> (f64[B, {n}], f64[B, {n}, {n}]):
    w, v = eigh(a)
    return w, v

def spectrum32(a: f32[B, {n}, {n}]) -> (f32[B, {n}], f32[B, {n}, {n}]):
    w, v = eigh(a)
    return w, v

def singular(a: f64[B, {m}, {n}]) -> (f64[B, {m}, {n}], f64[B, {n}], f64[B, {n}, {n}]):
    u, s, vh = svd(a)
    return u, s, vh

def singular32(a: f32[B, {n}, {n}]) -> (f32[B, {n}, {n}], f32[B, {n}], f32[B, {n}, {n}]):
    u, s, vh = svd(a)
    return u, s, vh
"""

GENERIC = SPECTRA.format(n="N", m="M") + """
def spd_objective(a: f64[B, N, N], b: f64[B, N]) -> f64:
    l = cholesky(a)
    k = linspace(0.0, N - 1.0, N)
    return sum(cho_solve(l, b)) + sum(log(sum(l * f64(k[:, None] == k[None, :]), axis=2)))
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


@pytest.mark.parametrize("build, n", BUILDS)
def test_products_against_numpy_for_every_stack_size(build, n):
    m = module(build, n)
    rng = np.random.default_rng(30 + n)
    for stack in STACKS:
        a, b, x = (rng.standard_normal((stack, n, k)) for k in (n, 3, 1))
        at = a.transpose(0, 2, 1)
        got = [r.numpy() for r in m.products(a, b, x)]
        for g, want in zip(got, (a @ b, at @ b, x @ x.transpose(0, 2, 1), b.transpose(0, 2, 1) @ (at @ b))):
            np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(m.products32(a.astype(np.float32), b.astype(np.float32)).numpy(), at @ b,
                                   rtol=1e-4, atol=1e-4)


@functools.lru_cache(maxsize=None)
def generic(build: str) -> adc.Module:
    return adc.compile(GENERIC, "generic.adc", check_bounds=build == "checked")


@pytest.mark.parametrize("build, n", [("default", 1), ("default", 3), ("default", 8), ("checked", 4)])
def test_the_gradient_at_a_static_order_agrees_with_the_generic_kernels(build, n):
    """The static order's VJP runs over lanes (strip by strip); the generic kernel's one system at a time."""
    lanes = adc.grad(module(build, n).spd_objective, wrt=(0, 1))
    one_by_one = adc.grad(generic(build).spd_objective, wrt=(0, 1))
    rng = np.random.default_rng(40 + n)
    for stack in (1, 7, 8, 17, 1003):
        a, b = spd(rng, stack, n), rng.standard_normal((stack, n))
        for got, want in zip(lanes(a, b), one_by_one(a, b)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


@functools.lru_cache(maxsize=None)
def spectra(build: str, n: int) -> adc.Module:
    return adc.compile(SPECTRA.format(n=n, m=n + 2), f"spectra{n}.adc", check_bounds=build == "checked")


@pytest.mark.parametrize("build, n", [("default", n) for n in (1, 2, 3, 5, 8, 9)] + [("checked", 4)])
def test_eigh_and_svd_over_lanes_are_the_one_by_one_results_bit_for_bit(build, n):
    """Each lane sweeps until its own matrix is done and sorts its own columns: the same operations
    as one matrix at a time, so the same bits, whatever sits in the other lanes (a matrix holding
    NaN, a zero matrix, repeated eigenvalues, a rank-deficient one)."""
    lanes, one_by_one = spectra(build, n), generic(build)
    rng = np.random.default_rng(50 + n)
    for stack in (1, 8, 17, 203):
        g = rng.standard_normal((stack, n + 2, n))
        square = g[:, :n, :]
        a = square + square.transpose(0, 2, 1)
        if stack > 8:
            a[3] = np.nan
            a[4] = 0.0
            a[5] = np.diag(np.repeat([1.0, 2.0], n)[:n])
            g[6, :, -1] = g[6, :, 0]
        for kernel, x in (("spectrum", a), ("singular", g), ("spectrum32", a.astype(np.float32)),
                          ("singular32", square.astype(np.float32))):
            for got, want in zip(getattr(lanes, kernel)(x), getattr(one_by_one, kernel)(x)):
                np.testing.assert_array_equal(got.numpy(), want.numpy())
