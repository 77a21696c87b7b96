"""adc.linalg, the eager linear algebra: NumPy's and SciPy's values and errors (LinAlgError where
a kernel would give NaN), np.linalg.cholesky on Tensors, and gradients through the tape."""
import numpy as np
import pytest
import scipy.linalg as sl

import adc


def spd(rng, lead=(), n: int = 4) -> np.ndarray:
    x = rng.standard_normal(lead + (n, n))
    return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)


def test_values_are_numpys_and_scipys():
    rng = np.random.default_rng(0)
    a, b = spd(rng, (3,)), rng.standard_normal((3, 4))
    factor = adc.linalg.cholesky(a)
    np.testing.assert_allclose(factor.numpy(), np.linalg.cholesky(a), rtol=1e-13)
    np.testing.assert_allclose(adc.linalg.cho_solve(factor, b).numpy(), np.linalg.solve(a, b[..., None])[..., 0],
                               rtol=1e-10)
    upper = np.linalg.cholesky(a[0], upper=True)
    np.testing.assert_allclose(adc.linalg.cho_solve((upper, False), b[0]).numpy(),
                               sl.cho_solve((upper, False), b[0]), rtol=1e-10)
    for trans in (0, 1, 2, "N", "T", "C"):
        for lower in (False, True):
            np.testing.assert_allclose(adc.linalg.solve_triangular(a[0], b[:, :, None][0], trans, lower).numpy(),
                                       sl.solve_triangular(a[0], b[:, :, None][0], trans, lower), rtol=1e-10)
    assert adc.linalg.cholesky(a.astype(np.float32)).dtype == np.float32


def test_numpys_cholesky_on_a_tensor_is_adcs():
    a = spd(np.random.default_rng(1))
    source = adc.Variable(a)
    with adc.GradientTape() as tape:
        lower, upper = np.linalg.cholesky(source), np.linalg.cholesky(source, upper=True)
        total = adc.reduce_sum(lower * lower) + adc.reduce_sum(upper)
    assert isinstance(lower, adc.Tensor)
    np.testing.assert_allclose(upper.numpy(), np.linalg.cholesky(a).T, rtol=1e-13)
    assert tape.gradient(total, source) is not None


def test_failures_raise_as_numpy_and_scipy_do():
    rng = np.random.default_rng(2)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        adc.linalg.cholesky(-spd(rng))
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        np.linalg.cholesky(adc.constant(np.array([[1.0, 2.0], [2.0, 1.0]])))
    singular = np.triu(rng.standard_normal((3, 3)))
    singular[1, 1] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match="singular matrix: resolution failed at diagonal 1"):
        adc.linalg.solve_triangular(singular, np.ones(3))
    adc.linalg.solve_triangular(singular, np.ones(3), unit_diagonal=True)     # the diagonal is not read
    with pytest.raises(np.linalg.LinAlgError, match="square matrices"):
        adc.linalg.cholesky(np.ones((2, 3)))
    with pytest.raises(ValueError, match="right-hand sides"):
        adc.linalg.solve_triangular(np.eye(3), np.ones(4))
    with pytest.raises(ValueError, match="trans must be"):
        adc.linalg.solve_triangular(np.eye(3), np.ones(3), trans="X")
    with pytest.raises(TypeError, match="floating"):
        adc.linalg.cholesky(np.eye(3, dtype=np.int64))


def test_tape_gradient_against_central_differences():
    rng = np.random.default_rng(3)
    a, y = spd(rng), rng.standard_normal(4)

    def nll(m):
        factor = adc.linalg.cholesky(m)
        return 0.5 * adc.reduce_sum(y * adc.linalg.cho_solve(factor, y)) + adc.reduce_sum(
            adc.math.log(adc.reduce_sum(factor * adc.transpose(factor), 1)) * 0.5)

    source = adc.Variable(a)
    with adc.GradientTape() as tape:
        value = nll(source)
    gradient = tape.gradient(value, source).numpy()
    direction = rng.standard_normal(a.shape)
    h = 1e-6
    difference = (nll(a + h * direction).numpy() - nll(a - h * direction).numpy()) / (2 * h)
    np.testing.assert_allclose(np.vdot(gradient, direction), difference, rtol=1e-6)
    assert np.all(np.triu(gradient, 1) == 0.0)      # the upper triangle is never read
