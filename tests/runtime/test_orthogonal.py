"""adc.linalg's qr, lstsq, eigh, eigvalsh and svd: NumPy's values and results, np.linalg.* on
Tensors dispatching to them, LinAlgError where a kernel gives NaN, gradients through the tape."""
import numpy as np
import pytest

import adc


def test_values_and_results_are_numpys():
    rng = np.random.default_rng(0)
    a, wide, s = rng.standard_normal((3, 5, 3)), rng.standard_normal((4, 6)), rng.standard_normal((2, 4, 4))
    for x in (a, wide):
        q, r = np.linalg.qr(adc.constant(x))
        assert isinstance(q, adc.Tensor) and r.shape == np.linalg.qr(x)[1].shape
        np.testing.assert_allclose(q.numpy() @ r.numpy(), x, atol=1e-14)
    for uplo in ("L", "U"):
        w, v = np.linalg.eigh(adc.constant(s), UPLO=uplo)
        np.testing.assert_allclose(w.numpy(), np.linalg.eigh(s, UPLO=uplo)[0], atol=1e-14)
    np.testing.assert_allclose(adc.linalg.eigvalsh(s).numpy(), np.linalg.eigvalsh(s), atol=1e-14)
    u, sv, vh = np.linalg.svd(adc.constant(wide), full_matrices=False)
    np.testing.assert_allclose((u.numpy() * sv.numpy()) @ vh.numpy(), wide, atol=1e-14)
    np.testing.assert_allclose(np.linalg.svd(adc.constant(a), compute_uv=False).numpy(),
                               np.linalg.svd(a, compute_uv=False), atol=1e-14)
    for b in (rng.standard_normal(5), rng.standard_normal((5, 2))):
        got, want = np.linalg.lstsq(adc.constant(a[0]), b), np.linalg.lstsq(a[0], b)
        np.testing.assert_allclose(got[0].numpy(), want[0], atol=1e-14)
        np.testing.assert_allclose(np.asarray(got[1]), want[1], rtol=1e-12)
        assert got[2] == want[2]
        np.testing.assert_allclose(got[3].numpy(), want[3], atol=1e-14)


def test_failures_and_unsupported_forms_raise():
    with pytest.raises(np.linalg.LinAlgError, match="NaN"):
        adc.linalg.eigh(np.full((3, 3), np.nan))
    with pytest.raises(np.linalg.LinAlgError, match="full column rank"):
        adc.linalg.lstsq(np.ones((4, 2)), np.ones(4))
    with pytest.raises(ValueError, match="full_matrices=False"):
        adc.linalg.svd(np.ones((4, 2)))
    with pytest.raises(ValueError, match="reduced"):
        adc.linalg.qr(np.eye(3), mode="complete")
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        adc.linalg.eigh(np.ones((2, 3)))


def test_tape_gradient_of_the_eigenvalues_reads_the_lower_triangle():
    a = np.random.default_rng(1).standard_normal((4, 4))
    source = adc.Variable(a)
    with adc.GradientTape() as tape:
        w, v = adc.linalg.eigh(source)
        total = adc.reduce_sum(w * w)
    gradient = tape.gradient(total, source).numpy()
    s = np.tril(a) + np.tril(a, -1).T
    want = 2 * s              # d Σ w² = d tr(S²) = 2 ⟨S, dS⟩, dS = Φ(da) + Φ(da)ᵀ
    np.testing.assert_allclose(gradient, np.tril(2 * want - np.diag(np.diag(want))), atol=1e-12)
