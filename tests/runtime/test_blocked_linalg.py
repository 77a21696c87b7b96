"""The runtime library's blocked factorizations and solves (codegen/native/: cholesky, trsm, getrf, qr, eigh, svd) as
kernels run them: large matrices by default, any matrix in blocks of a few rows under the test hook
ADC_LINALG_BLOCK (Target.linalg_block), so the recursion is exercised cheaply — orders 1, not a
multiple of the block, symbolic, stacked; f32 and f64. Oracles: NumPy, SciPy (LAPACK) and the
interpreter's references, to condition-scaled bounds; derivatives through the blocked path against
central differences; the bounds-checked build; valgrind's memcheck over one blocked program.
"""
import numpy as np
import pytest
import scipy.linalg as sl

import adc
from adc.ir.ops.lu import lu_factor_reference
from tests.support import memcheck
from tests.support.gradcheck import central_jacobian

SOURCE = """
def factor(a: f64[B, N, N]) -> f64[B, N, N]:
    return cholesky(a)

def factor32(a: f32[N, N]) -> f32[N, N]:
    return cholesky(a)

def solves(a: f64[N, N], b: f64[N, K]) -> (f64[N, K], f64[N, K], f64[N, K], f64[N, K], f64[N]):
    lower = solve_triangular(a, b, lower=True)
    unit = solve_triangular(a, b, unit_diagonal=True, lower=True, trans=1)
    return lower, solve_triangular(a, b), solve_triangular(a, b, trans=1), unit, cho_solve(a, b[:, 0])

def solves32(a: f32[N, N], b: f32[N, K]) -> f32[N, K]:
    return solve_triangular(a, b, lower=True, trans=1)

def lu(a: f64[B, N, N]) -> (f64[B, N, N], i64[B, N]):
    factors, pivots = lu_factor(a)
    return factors, pivots

def lu32(a: f32[N, N]) -> f32[N, N]:
    factors, pivots = lu_factor(a)
    return factors

def solved(a: f64[N, N], b: f64[N]) -> (f64[N], f64):
    return solve(a, b), det(a)

def orthogonal(a: f64[B, M, N]) -> (f64[B, M, N], f64[B, N, N]):
    q, r = qr(a)
    return q, r

def orthogonal32(a: f32[M, N]) -> (f32[M, N], f32[N, N]):
    q, r = qr(a)
    return q, r

def least_squares(a: f64[M, N], b: f64[M]) -> f64[N]:
    return lstsq(a, b)

def spectrum(a: f64[B, N, N]) -> (f64[B, N], f64[B, N, N]):
    w, v = eigh(a)
    return w, v

def spectrum32(a: f32[N, N]) -> (f32[N], f32[N, N]):
    w, v = eigh(a)
    return w, v

def singular(a: f64[B, M, N]) -> (f64[B, M, N], f64[B, N], f64[B, N, N]):
    u, s, vh = svd(a)
    return u, s, vh

def singular32(a: f32[M, N]) -> f32[N]:
    u, s, vh = svd(a)
    return s

def nll(a: f64[N, N], y: f64[N]) -> f64:
    l = cholesky(a @ transpose(a) + 1.0)
    return 0.5 * sum(y * cho_solve(l, y)) + sum(log(sum(l * transpose(l), axis=1)))

def newton(a: f64[N, N], y: f64[N]) -> f64:
    return sum(solve(a @ transpose(a) + 3.0, y) ** 2)

def triangular_products(a: f64[N, N], b: f64[N, K]) -> (f64[N, N], f64[N, K], f64[N, K], f64[N, N], f64[N, K], f64[N, K]):
    l = cholesky(a)
    q, r = qr(a)
    return l, l @ b, transpose(l) @ b, r, r @ b, transpose(r) @ b

def rayleigh(a: f64[N, N], y: f64[N]) -> f64:
    w, v = eigh(a + transpose(a))
    return sum(w * w) + sum((transpose(v) @ y) ** 2 * w)

def nuclear(a: f64[M, N], y: f64[M]) -> f64:
    u, s, vh = svd(a)
    return sum(s * s * s) + sum((transpose(u) @ y) ** 2 * s)

def projection(a: f64[M, N], y: f64[M]) -> f64:
    q, r = qr(a)
    return sum((q @ (transpose(q) @ y)) ** 2) + sum(r * r)
"""
ORDERS = (1, 2, 3, 4, 7, 16, 29)


@pytest.fixture(scope="module")
def blocked():
    """The kernels with every matrix factored in blocks of 3 rows (and a second build, blocks of 1)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ADC_LINALG_BLOCK", "3")
        three = adc.compile(SOURCE, "blocked3.adc")
        patch.setenv("ADC_LINALG_BLOCK", "1")
        one = adc.compile(SOURCE, "blocked1.adc")
    return {3: three, 1: one}


def spd(rng, n: int, lead=()) -> np.ndarray:
    g = rng.standard_normal(lead + (n, n))
    return g @ np.swapaxes(g, -1, -2) + n * np.eye(n)


def spd_with_condition(rng, n: int, condition: float) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (q * np.geomspace(1.0, 1.0 / condition, n)) @ q.T


@pytest.mark.parametrize("block", [3, 1])
def test_cholesky_in_blocks_for_every_order(blocked, block):
    m, rng = blocked[block], np.random.default_rng(block)
    for n in ORDERS:
        a = spd(rng, n, (3,))
        np.testing.assert_allclose(m.factor(a).numpy(), np.linalg.cholesky(a), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(m.factor32(a[0].astype(np.float32)).numpy(), np.linalg.cholesky(a[0]),
                                   rtol=2e-4, atol=2e-4 * n)
    assert m.factor(np.zeros((2, 0, 0))).numpy().shape == (2, 0, 0)


@pytest.mark.parametrize("block", [3, 1])
def test_triangular_solves_in_blocks_for_every_order(blocked, block):
    m, rng = blocked[block], np.random.default_rng(10 + block)
    for n in ORDERS:
        a = np.linalg.cholesky(spd(rng, n)) + np.triu(rng.standard_normal((n, n)), 1)
        for k in (1, 5, 70):        # right-hand sides: one, a few, more than a tile holds
            b = rng.standard_normal((n, k))
            lower, upper, upper_t, unit, vector = (r.numpy() for r in m.solves(a, b))
            for got, want in ((lower, sl.solve_triangular(a, b, lower=True)), (upper, sl.solve_triangular(a, b)),
                              (upper_t, sl.solve_triangular(a, b, trans=1)),
                              (unit, sl.solve_triangular(a, b, lower=True, trans=1, unit_diagonal=True)),
                              (vector, sl.cho_solve((a, True), b[:, 0]))):
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
            np.testing.assert_allclose(m.solves32(a.astype(np.float32), b.astype(np.float32)).numpy(),
                                       sl.solve_triangular(a, b, lower=True, trans=1), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("block", [3, 1])
def test_lu_in_blocks_pivots_as_lapack(blocked, block):
    m, rng = blocked[block], np.random.default_rng(20 + block)
    for n in ORDERS:
        a = rng.standard_normal((2, n, n))
        if n > 4:
            a[1, :, 3] = 0.0                # an exactly singular matrix: a zero column stays
        factors, pivots = (r.numpy() for r in m.lu(a))
        want, want_pivots = lu_factor_reference(a)
        np.testing.assert_array_equal(pivots, want_pivots)
        np.testing.assert_allclose(factors, want, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(m.lu32(a[0].astype(np.float32)).numpy(), want[0], rtol=1e-3, atol=1e-3 * n)
        b = rng.standard_normal(n)
        x, determinant = (r.numpy() for r in m.solved(a[0], b))
        np.testing.assert_allclose(x, np.linalg.solve(a[0], b), rtol=1e-9)
        np.testing.assert_allclose(determinant, np.linalg.det(a[0]), rtol=1e-9)


@pytest.mark.parametrize("block", [3, 1])
def test_qr_in_blocks_for_tall_and_square_matrices(blocked, block):
    m, rng = blocked[block], np.random.default_rng(25 + block)
    for rows, n in ((1, 1), (3, 2), (7, 7), (16, 5), (29, 29), (40, 17)):
        a = rng.standard_normal((2, rows, n))
        if n > 3:
            a[1, :, 2] = 0.0                # a column with nothing to reflect
        q, r = (x.numpy() for x in m.orthogonal(a))
        for k in range(2):
            np.testing.assert_allclose(q[k] @ r[k], a[k], atol=1e-13 * n * np.abs(a[k]).max())
            np.testing.assert_allclose(q[k].T @ q[k], np.eye(n), atol=1e-13 * n)
            np.testing.assert_array_equal(r[k], np.triu(r[k]))
            np.testing.assert_allclose(np.abs(r[k]), np.abs(np.linalg.qr(a[k])[1]), atol=1e-12 * n)
        q32, r32 = (x.numpy() for x in m.orthogonal32(a[0].astype(np.float32)))
        np.testing.assert_allclose(q32 @ r32, a[0], atol=1e-5 * n)
        b = rng.standard_normal(rows)
        np.testing.assert_allclose(m.least_squares(a[0], b).numpy(), np.linalg.lstsq(a[0], b, rcond=None)[0],
                                   rtol=1e-9, atol=1e-11)
    a = rng.standard_normal((2, 9, 8))
    a[1, 4, 4] = np.nan
    q, r = (x.numpy() for x in m.orthogonal(a))
    assert np.isnan(q[1]).all() and np.isnan(r[1]).all() and not np.isnan(q[0]).any()


def test_products_with_a_triangular_factor_skip_its_zeros():
    # a cholesky factor or qr's r (and their transposes) times a matrix: row blocks of
    # matmul.TRIANGLE_ROWS, each reading only the triangle's columns; blocks taken from both ends
    m = adc.compile(SOURCE, "triangular.adc")
    rng = np.random.default_rng(45)
    for n in (1, 5, 255, 256, 257, 600):
        a, b = spd(rng, n), rng.standard_normal((n, 3))
        l, lb, ltb, r, rb, rtb = (x.numpy() for x in m.triangular_products(a, b))
        for got, want in ((lb, l @ b), (ltb, l.T @ b), (rb, r @ b), (rtb, r.T @ b)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * n * np.abs(want).max())


def check_eigh(a: np.ndarray, w: np.ndarray, v: np.ndarray, tolerance: float = 20) -> None:
    """Eigenvalues against LAPACK's, residual and orthogonality: each within tolerance n eps ‖a‖."""
    n, eps = a.shape[-1], np.finfo(np.float64).eps
    scale = tolerance * max(n, 1) * eps * max(np.linalg.norm(a, 2), np.finfo(np.float64).tiny)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=scale)
    assert np.all(np.diff(w) >= 0)
    assert np.linalg.norm(a @ v - v * w) <= scale * max(n, 1) ** 0.5
    assert np.linalg.norm(v.T @ v - np.eye(n)) <= tolerance * max(n, 1) ** 1.5 * eps


@pytest.mark.parametrize("block", [3, 1])
def test_eigh_by_tridiagonal_reduction_for_every_order(blocked, block):
    m, rng = blocked[block], np.random.default_rng(35 + block)
    q, _ = np.linalg.qr(rng.standard_normal((29, 29)))
    g = rng.standard_normal((29, 3))
    special = [np.eye(29), g @ g.T, np.zeros((29, 29)), np.diag(np.arange(29.0)),
               (q * np.repeat([1.0, 2.0, 2.0 + 1e-10, 3.0], [7, 7, 7, 8])) @ q.T,      # clusters
               (q * np.geomspace(1.0, 1e-12, 29)) @ q.T, (q * np.linspace(-1, 1, 29)) @ q.T * 1e-300]
    for n in ORDERS:
        g = rng.standard_normal((2, n, n))
        a = g + np.swapaxes(g, -1, -2)
        upper = np.triu(rng.standard_normal((n, n)), 1)         # read from the lower triangle only
        w, v = (x.numpy() for x in m.spectrum(np.stack([a[0], np.tril(a[1]) + upper])))
        for k in range(2):
            check_eigh(a[k], w[k], v[k])
        w32, _ = (x.numpy() for x in m.spectrum32(a[0].astype(np.float32)))
        np.testing.assert_allclose(w32, np.linalg.eigvalsh(a[0]), atol=1e-5 * n * np.abs(a[0]).max())
    for a in special:
        w, v = (x.numpy()[0] for x in m.spectrum(a[None]))
        check_eigh(a, w, v)


def check_svd(a: np.ndarray, u: np.ndarray, s: np.ndarray, vh: np.ndarray, tolerance: float = 20) -> None:
    """Singular values against LAPACK's, the reconstruction and orthogonality: each within tolerance n eps ‖a‖."""
    n, eps = a.shape[-1], np.finfo(np.float64).eps
    scale = tolerance * max(n, 1) * eps * max(np.linalg.norm(a, 2), np.finfo(np.float64).tiny)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=scale)
    assert np.all(np.diff(s) <= 0) and np.all(s >= 0)
    assert np.linalg.norm(a - (u * s) @ vh) <= scale * max(n, 1) ** 0.5
    assert np.linalg.norm(u.T @ u - np.eye(n)) <= tolerance * max(n, 1) ** 1.5 * eps
    assert np.linalg.norm(vh @ vh.T - np.eye(n)) <= tolerance * max(n, 1) ** 1.5 * eps


@pytest.mark.parametrize("block", [3, 1])
def test_svd_by_bidiagonalization_for_tall_and_square_matrices(blocked, block):
    m, rng = blocked[block], np.random.default_rng(55 + block)
    q1, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    q2, _ = np.linalg.qr(rng.standard_normal((29, 29)))
    g = rng.standard_normal((40, 3))
    special = [np.eye(29), g @ rng.standard_normal((3, 29)), np.zeros((31, 29)),
               (q1[:, :29] * np.repeat([1.0, 2.0, 2.0 + 1e-10], [10, 10, 9])) @ q2.T,       # clusters
               (q1[:, :29] * np.geomspace(1.0, 1e-12, 29)) @ q2.T, rng.standard_normal((33, 29)) * 1e-300]
    for rows, n in ((1, 1), (2, 1), (3, 2), (7, 7), (16, 5), (29, 29), (40, 17)):
        a = rng.standard_normal((2, rows, n))
        u, s, vh = (x.numpy() for x in m.singular(a))
        for k in range(2):
            check_svd(a[k], u[k], s[k], vh[k])
        np.testing.assert_allclose(m.singular32(a[0].astype(np.float32)).numpy(), np.linalg.svd(a[0], compute_uv=False),
                                   atol=1e-5 * n * np.abs(a[0]).max())
    for a in special:
        u, s, vh = (x.numpy()[0] for x in m.singular(a[None]))
        check_svd(a, u, s, vh)


def test_a_failed_factorization_is_nan_in_its_matrix_only(blocked):
    rng = np.random.default_rng(30)
    a = spd(rng, 7, (3,))
    a[1, 5, 5] = -100.0
    a[2, 6, 2] = np.nan
    got = blocked[3].factor(a).numpy()
    assert np.isnan(got[1]).all() and np.isnan(got[2]).all()
    np.testing.assert_allclose(got[0], np.linalg.cholesky(a[0]), rtol=1e-12)


def test_large_orders_cross_to_the_blocked_routines_by_default():
    # the default thresholds (rules/matrices.py: 32 for cholesky, 48 for lu_factor, 24 for qr and svd,
    # 12 for eigh, 64 for solves of a few right-hand sides) decided at run time for symbolic orders, at compile time for a static one
    m = adc.compile(SOURCE + "\ndef static(a: f64[65, 65]) -> f64[65, 65]:\n    return cholesky(a)\n", "large.adc")
    rng = np.random.default_rng(40)
    for n in (11, 12, 23, 24, 31, 32, 47, 63, 64, 100, 129):
        a = spd(rng, n, (1,))
        np.testing.assert_allclose(m.factor(a).numpy(), np.linalg.cholesky(a), rtol=1e-11, atol=1e-11)
        g = rng.standard_normal((n, n))
        factors, pivots = (r.numpy() for r in m.lu(g[None]))
        want, want_pivots = lu_factor_reference(g[None])
        np.testing.assert_array_equal(pivots, want_pivots)
        np.testing.assert_allclose(factors, want, rtol=1e-9, atol=1e-9)
        t, b = np.linalg.cholesky(a[0]), rng.standard_normal((n, 3))
        np.testing.assert_allclose(m.solves(t, b)[2].numpy(), sl.solve_triangular(t, b, trans=1), rtol=1e-9)
        q, r = (x.numpy()[0] for x in m.orthogonal(g[None]))
        np.testing.assert_allclose(q @ r, g, atol=1e-12 * n)
        np.testing.assert_allclose(q.T @ q, np.eye(n), atol=1e-12 * n)
        w, v = (x.numpy()[0] for x in m.spectrum((g + g.T)[None]))
        check_eigh(g + g.T, w, v)
        u, s, vh = (x.numpy()[0] for x in m.singular(g[None]))
        check_svd(g, u, s, vh)
    a = spd(rng, 65)
    np.testing.assert_allclose(m.static(a).numpy(), np.linalg.cholesky(a), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("condition", [1e2, 1e8, 1e13])
def test_residuals_are_bounded_by_the_condition_number(condition):
    m = adc.compile(SOURCE, "conditioned.adc")
    rng = np.random.default_rng(50)
    n, eps = 100, np.finfo(np.float64).eps
    a = spd_with_condition(rng, n, condition)
    l = m.factor(a[None]).numpy()[0]
    assert np.linalg.norm(l @ l.T - a) <= 10 * n * eps * np.linalg.norm(a)
    np.testing.assert_allclose(l, sl.cholesky(a, lower=True), atol=10 * n * eps * condition ** 0.5)
    b = rng.standard_normal(n)
    x, _ = (r.numpy() for r in m.solved(a, b))
    assert np.linalg.norm(a @ x - b) <= 10 * n * eps * np.linalg.norm(a) * np.linalg.norm(x)


def test_derivatives_through_the_blocked_routines(blocked):
    m, rng = blocked[3], np.random.default_rng(60)
    a, y = rng.standard_normal((7, 7)), rng.standard_normal(7)
    for kernel, x in ((m.nll, a), (m.newton, a), (m.rayleigh, a), (m.projection, rng.standard_normal((9, 6))),
                      (m.nuclear, rng.standard_normal((9, 6)))):
        gradient = adc.grad(kernel, wrt="a")
        target = y if x.shape[0] == 7 else rng.standard_normal(9)
        np.testing.assert_allclose(gradient(x, target).numpy(),
                                   central_jacobian(lambda v: kernel(v, target).numpy(), x), rtol=1e-6, atol=1e-8)
    hessian = adc.hessian(m.nll, wrt="y")(a, y).numpy()
    np.testing.assert_allclose(hessian, central_jacobian(lambda v: adc.grad(m.nll, wrt="y")(a, v).numpy(), y),
                               rtol=1e-6, atol=1e-8)


def test_the_bounds_checked_build_runs_the_blocked_routines(monkeypatch, blocked):
    monkeypatch.setenv("ADC_LINALG_BLOCK", "2")
    checked = adc.compile(SOURCE, "blocked_checked.adc", check_bounds=True)
    rng = np.random.default_rng(70)
    for n in (1, 5, 9):
        a = spd(rng, n, (2,))
        np.testing.assert_allclose(checked.factor(a).numpy(), np.linalg.cholesky(a), rtol=1e-12)
        b = rng.standard_normal((n, 4))
        for got, want in zip(checked.solves(a[0], b), blocked[3].solves(a[0], b)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
        g = rng.standard_normal((2, n, n))
        for got, want in zip(checked.lu(g), blocked[3].lu(g)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
        np.testing.assert_allclose(adc.grad(checked.newton, wrt="a")(g[0], b[:, 0]).numpy(),
                                   adc.grad(blocked[3].newton, wrt="a")(g[0], b[:, 0]).numpy(), rtol=1e-10)
        tall = rng.standard_normal((2, n + 3, n))
        for got, want in zip(checked.orthogonal(tall), blocked[3].orthogonal(tall)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
        w, v = (x.numpy() for x in checked.spectrum(a))
        u, s, vh = (x.numpy() for x in checked.singular(tall))
        for k in range(2):
            check_eigh(a[k], w[k], v[k])
            check_svd(tall[k], u[k], s[k], vh[k])


@pytest.mark.skipif(memcheck.valgrind() is None, reason="valgrind is not installed")
def test_a_blocked_program_is_clean_under_valgrind(tmp_path, valgrind_cache):
    program = tmp_path / "blocked.py"
    program.write_text(
        "import numpy as np, adc\n"
        f"m = adc.compile({SOURCE!r}, 'memcheck.adc')\n"
        "rng = np.random.default_rng(0)\n"
        "n = 70\n"                  # past the default threshold, not a multiple of the block
        "g = rng.standard_normal((n, n))\n"
        "a = g @ g.T + n * np.eye(n)\n"
        "m.factor(a[None]); m.solves(np.linalg.cholesky(a), g[:, :9]); m.lu(g[None]); m.solved(g, g[0])\n"
        "m.orthogonal(g[None, :, :40]); m.spectrum(a[None]); m.singular(g[None, :, :50])\n"
        "adc.grad(m.newton, wrt='a')(g, g[1])\n"
        "print('blocked ran')\n")
    status, reports, last = memcheck.run_under_valgrind([str(program)], valgrind_cache)
    assert status == 0 and not reports and last == "blocked ran", "\n\n".join(map(str, reports))
