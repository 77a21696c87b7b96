"""qr, lstsq, eigh and svd in compiled kernels: values against NumPy (LAPACK) on well- and
ill-conditioned matrices, residuals and orthogonality in ulps times n, f32, symbolic sizes, NaN
semantics; sign and order conventions on invariants; the bounds-checked build; a `.so` round trip;
derivatives of sign-invariant functions against central differences, forward against reverse, the
Hessian, and the batch Jacobian against a loop over examples.
"""
import subprocess
import sys

import numpy as np
import pytest

import adc
from tests.support.gradcheck import central_jacobian

SOURCE = """
def factor(a: f64[B, M, N]) -> (f64[B, M, N], f64[B, N, N]):
    q, r = qr(a)
    return q, r

def least_squares(a: f64[M, N], b: f64[M]) -> f64[N]:
    return lstsq(a, b)

def spectrum(a: f64[B, N, N]) -> (f64[B, N], f64[B, N, N]):
    w, v = eigh(a)
    return w, v

def spectrum32(a: f32[B, N, N]) -> (f32[B, N], f32[B, N, N]):
    w, v = eigh(a)
    return w, v

def singular(a: f64[B, M, N]) -> (f64[B, M, N], f64[B, N], f64[B, N, N]):
    u, s, vh = svd(a)
    return u, s, vh

def invariants(a: f64[N, N]) -> f64:
    w, v = eigh(a)
    u, s, vh = svd(a)
    p = v[:, 0:1]
    return sum(w * w) + sum(p @ transpose(p) * a) + sum(s) + sqrt(sum((u * s) @ vh * a))

def per_example(x: f64[B, M, N]) -> f64[B, N]:
    q, r = qr(x)
    return svdvals(x) + eigvalsh(transpose(x, [0, 2, 1]) @ x) + sum(r * r, axis=1)
"""
EPS = np.finfo(np.float64).eps


@pytest.fixture(scope="module")
def m():
    return adc.compile(SOURCE, "orthogonal.adc")


def with_singular_values(rng, shape, condition: float) -> np.ndarray:
    m, n = shape
    u, _ = np.linalg.qr(rng.standard_normal((m, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (u * np.geomspace(1.0, 1.0 / condition, n)) @ v.T


def orthogonality(q: np.ndarray) -> float:
    return np.abs(np.swapaxes(q, -1, -2) @ q - np.eye(q.shape[-1])).max()


@pytest.mark.parametrize("condition", [1e1, 1e8, 1e14])
def test_qr_residual_orthogonality_and_lapacks_signs(m, condition):
    rng = np.random.default_rng(0)
    a = np.stack([with_singular_values(rng, (12, 7), condition) for _ in range(3)])
    q, r = (x.numpy() for x in m.factor(a))
    assert np.all(np.tril(r, -1) == 0) and orthogonality(q) <= 12 * 4 * EPS
    assert np.abs(q @ r - a).max() <= 12 * 4 * EPS * np.abs(a).max()
    want_q, want_r = np.linalg.qr(a)
    np.testing.assert_allclose(np.sign(np.diagonal(r, axis1=1, axis2=2)), np.sign(np.diagonal(want_r, axis1=1, axis2=2)))
    if condition < 1e10:
        np.testing.assert_allclose(q, want_q, atol=1e3 * EPS * condition)


def test_lstsq_against_numpy(m):
    rng = np.random.default_rng(1)
    a, b = with_singular_values(rng, (9, 4), 1e4), rng.standard_normal(9)
    np.testing.assert_allclose(m.least_squares(a, b).numpy(), np.linalg.lstsq(a, b, rcond=None)[0], rtol=1e-9)


@pytest.mark.parametrize("condition", [1e1, 1e8, 1e14])
def test_eigh_ascending_residual_orthogonality(m, condition):
    rng = np.random.default_rng(2)
    n = 9
    q = np.stack([np.linalg.qr(rng.standard_normal((n, n)))[0] for _ in range(2)])
    w_true = np.geomspace(1.0, 1.0 / condition, n) * np.where(np.arange(n) % 2, -1.0, 1.0)
    a = (q * w_true) @ np.swapaxes(q, 1, 2)
    a[..., 0, 5] += 3.0             # the upper triangle is never read
    s = np.tril(a) + np.swapaxes(np.tril(a, -1), 1, 2)
    w, v = (x.numpy() for x in m.spectrum(a))
    assert np.all(np.diff(w, axis=-1) >= 0) and orthogonality(v) <= n * 4 * EPS
    assert np.abs(s @ v - v * w[:, None, :]).max() <= n * 8 * EPS
    np.testing.assert_allclose(w, np.linalg.eigvalsh(s), atol=n * 4 * EPS)


def test_eigh_f32_repeated_eigenvalues_and_sizes(m):
    rng = np.random.default_rng(3)
    for n in (1, 2, 17):
        a = rng.standard_normal((2, n, n)).astype(np.float32)
        s = np.tril(a) + np.swapaxes(np.tril(a, -1), 1, 2)
        w, v = (x.numpy() for x in m.spectrum32(a))
        np.testing.assert_allclose(w, np.linalg.eigvalsh(s), atol=n * 8 * np.finfo(np.float32).eps * 4)
    w, v = (x.numpy() for x in m.spectrum(np.eye(5)[None] * 2.0))
    np.testing.assert_allclose(w, 2.0) and np.testing.assert_allclose(v[0] @ v[0].T, np.eye(5), atol=1e-15)
    assert m.spectrum(np.zeros((3, 0, 0)))[1].numpy().shape == (3, 0, 0)


@pytest.mark.parametrize("shape, condition", [((2, 6, 6), 1e2), ((2, 30, 8), 1e12), ((1, 5, 1), 1.0)])
def test_svd_descending_reconstruction_and_subspaces(m, shape, condition):
    rng = np.random.default_rng(4)
    a = np.stack([with_singular_values(rng, shape[1:], condition) for _ in range(shape[0])])
    u, s, vh = (x.numpy() for x in m.singular(a))
    n = shape[-1]
    assert np.all(np.diff(s, axis=-1) <= 0) and orthogonality(u) <= shape[1] * 4 * EPS
    assert orthogonality(np.swapaxes(vh, 1, 2)) <= n * 4 * EPS
    assert np.abs((u * s[:, None, :]) @ vh - a).max() <= shape[1] * 4 * EPS
    want_u, want_s, want_vh = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(s, want_s, rtol=0, atol=shape[1] * 4 * EPS)
    # each singular pair up to its sign: |u_kᵀ u'_k| = 1
    np.testing.assert_allclose(np.abs(np.einsum("bik,bik->bk", u, want_u)), 1.0, atol=1e-8 * condition)


def test_a_matrix_holding_nan_gives_nan_in_its_results_only(m):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 4, 4))
    a[1, 2, 1] = np.nan
    for results in (m.factor(a), m.spectrum(a), m.singular(a)):
        outs = [x.numpy() for x in results]
        assert all(np.isnan(o[1]).all() for o in outs)
        assert all(np.isfinite(o[0]).all() for o in outs)


def test_the_bounds_checked_build_and_its_derivatives_stay_in_bounds(m):
    checked = adc.compile(SOURCE, "orthogonal_checked.adc", check_bounds=True)
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2, 5, 3))
    for got, want in zip(checked.singular(a), m.singular(a)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    x = rng.standard_normal((4, 4))
    np.testing.assert_allclose(adc.grad(checked.invariants)(x).numpy(), adc.grad(m.invariants)(x).numpy(), rtol=1e-12)
    adc.batch_jacobian(checked.per_example)(rng.standard_normal((2, 4, 3)))


def test_gradient_and_hessian_of_sign_invariant_functions_against_differences(m):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 4))
    gradient = adc.grad(m.invariants)
    np.testing.assert_allclose(gradient(x).numpy(), central_jacobian(lambda v: m.invariants(v).numpy(), x),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(adc.hessian(m.invariants)(x).numpy(),
                               central_jacobian(lambda v: gradient(v).numpy(), x), rtol=1e-5, atol=1e-7)


def test_forward_against_reverse_and_the_batch_jacobian_against_a_loop(m):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 5, 3))
    forward = adc.jacfwd(m.per_example)(x).numpy()
    reverse = adc.jacobian(m.per_example, mode="reverse")(x).numpy()
    np.testing.assert_allclose(forward, reverse, rtol=1e-10, atol=1e-12)
    got = adc.batch_jacobian(m.per_example)(x).numpy()
    for k in range(3):
        want = central_jacobian(lambda v: m.per_example(v[None]).numpy()[0], x[k])
        np.testing.assert_allclose(got[k], want, rtol=1e-6, atol=1e-8)


def test_a_shared_object_round_trip(m, tmp_path):
    path = tmp_path / "orthogonal.adc"
    path.write_text(SOURCE)
    subprocess.run([sys.executable, "-m", "adc", "compile", str(path), "-o", str(tmp_path / "orthogonal.so")],
                   check=True)
    loaded = adc.load(tmp_path / "orthogonal.so")
    x = np.random.default_rng(9).standard_normal((4, 4))
    np.testing.assert_array_equal(loaded.invariants(x).numpy(), m.invariants(x).numpy())
    np.testing.assert_allclose(adc.grad(loaded.invariants)(x).numpy(), adc.grad(m.invariants)(x).numpy(), rtol=1e-13)
