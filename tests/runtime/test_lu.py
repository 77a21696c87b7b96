"""adc.linalg's LU family, eager: lu_factor, lu_solve, solve, inv, det, slogdet with NumPy's and
SciPy's values, conventions and errors (LinAlgError("Singular matrix") where NumPy raises, SciPy's
warning from lu_factor), np.linalg.solve/inv/det/slogdet on Tensors, and gradients through the tape."""
import numpy as np
import pytest
import scipy.linalg as sl

import adc


def test_values_are_numpys_and_scipys():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4, 4)), rng.standard_normal((3, 4, 2))
    lu, piv = adc.linalg.lu_factor(a)
    assert piv.dtype == np.int64
    for k in range(3):
        want_lu, want_piv = sl.lu_factor(a[k])
        np.testing.assert_allclose(lu.numpy()[k], want_lu, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(piv.numpy()[k], want_piv)
    np.testing.assert_allclose(adc.linalg.lu_solve((lu, piv), b).numpy(), np.linalg.solve(a, b), rtol=1e-10)
    np.testing.assert_allclose(adc.linalg.lu_solve(sl.lu_factor(a[0]), b[0, :, 0]).numpy(),
                               sl.lu_solve(sl.lu_factor(a[0]), b[0, :, 0]), rtol=1e-10)
    np.testing.assert_allclose(adc.linalg.inv(a).numpy(), np.linalg.inv(a), rtol=1e-10)
    np.testing.assert_allclose(adc.linalg.det(a).numpy(), np.linalg.det(a), rtol=1e-10)
    sign, logdet = adc.linalg.slogdet(a)
    np.testing.assert_array_equal(sign.numpy(), np.linalg.slogdet(a).sign)
    np.testing.assert_allclose(logdet.numpy(), np.linalg.slogdet(a).logabsdet, rtol=1e-12)
    assert adc.linalg.inv(a.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize("a_shape, b_shape", [((4, 4), (4,)), ((3, 4, 4), (4,)), ((3, 4, 4), (3, 4, 2)),
                                               ((4, 4), (3, 4, 2)), ((2, 1, 4, 4), (3, 4, 1))])
def test_solve_broadcasts_as_numpy_2_does(a_shape, b_shape):
    # b is one vector only when 1-D; else a stack of matrices whose stacking axes broadcast with a's
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(a_shape) + 4 * np.eye(4), rng.standard_normal(b_shape)
    got = adc.linalg.solve(a, b).numpy()
    want = np.linalg.solve(a, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_singular_matrices_raise_where_numpy_raises():
    singular = np.array([[[2.0, 0, 0], [0, 2, 0], [0, 0, 2]], [[1.0, 2, 3], [2, 4, 6], [1, 0, 1]]])
    for call in (lambda: adc.linalg.solve(singular, np.ones(3)), lambda: adc.linalg.inv(singular)):
        with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
            call()
    with pytest.warns(RuntimeWarning, match="Diagonal number 3 is exactly zero. Singular matrix."):
        adc.linalg.lu_factor(singular)
    np.testing.assert_array_equal(adc.linalg.det(singular).numpy(), [8.0, 0.0])
    sign, logdet = adc.linalg.slogdet(singular)
    np.testing.assert_array_equal(sign.numpy(), [1.0, 0.0])
    np.testing.assert_array_equal(logdet.numpy(), [np.log(8.0), -np.inf])
    with pytest.raises(np.linalg.LinAlgError, match="square matrices"):
        adc.linalg.inv(np.ones((2, 3)))
    with pytest.raises(ValueError, match="right-hand sides"):
        adc.linalg.solve(np.eye(3), np.ones(4))


def test_numpys_functions_on_a_tensor_are_adcs_and_their_gradients_are_the_tapes():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 4)) + 3 * np.eye(4), rng.standard_normal(4)
    x = adc.Variable(a)
    with adc.GradientTape(persistent=True) as tape:
        solved, inverse, det = np.linalg.solve(x, b), np.linalg.inv(x), np.linalg.det(x)
        sign, logdet = np.linalg.slogdet(x)
        total = adc.reduce_sum(solved) + adc.reduce_sum(inverse) + det + logdet * sign
    assert all(isinstance(t, adc.Tensor) for t in (solved, inverse, det, sign, logdet))
    np.testing.assert_allclose(tape.gradient(logdet, x).numpy(), np.linalg.inv(a).T, rtol=1e-10)
    np.testing.assert_allclose(tape.gradient(det, x).numpy(), np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-10)
    h = 1e-6
    numeric = np.zeros_like(a)
    for i, j in np.ndindex(a.shape):
        step = np.zeros_like(a)
        step[i, j] = h

        def f(m):
            return (np.linalg.solve(m, b).sum() + np.linalg.inv(m).sum() + np.linalg.det(m)
                    + np.linalg.slogdet(m).logabsdet)
        numeric[i, j] = (f(a + step) - f(a - step)) / (2 * h)
    np.testing.assert_allclose(tape.gradient(total, x).numpy(), numeric, rtol=1e-6, atol=1e-8)
