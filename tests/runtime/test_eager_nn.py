"""The eager softmax family and integer indexing (adc.nn.softmax, adc.gather, adc.one_hot, ...)
against SciPy and NumPy, at the edges the language's builtins define; gradients are in test_ops.py."""
import numpy as np
import pytest
import scipy.special as sp

import adc

BIG = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4], [3.0, 1.0, 2.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_family_is_stable_at_large_logits(dtype):
    x = BIG.astype(dtype)
    tol = dict(rtol=1e-6 if dtype == np.float32 else 1e-13, atol=0)
    np.testing.assert_allclose(adc.nn.softmax(x).numpy(), sp.softmax(x, axis=-1), **tol)
    np.testing.assert_allclose(adc.nn.log_softmax(x, axis=0).numpy(), sp.log_softmax(x, axis=0), **tol)
    np.testing.assert_allclose(adc.reduce_logsumexp(x, axis=1).numpy(), sp.logsumexp(x, axis=1), **tol)
    np.testing.assert_allclose(adc.reduce_logsumexp(x).numpy(), sp.logsumexp(x), **tol)
    assert adc.nn.softmax(x).dtype == dtype


def test_sparse_softmax_cross_entropy_matches_scipy_and_takes_labels_of_any_rank():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 3, 5)) * 100
    labels = rng.integers(0, 5, (2, 3))
    want = -np.take_along_axis(sp.log_softmax(logits, axis=-1), labels[..., None], -1)[..., 0]
    got = adc.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    assert got.shape == (2, 3) and got.dtype == np.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    got32 = adc.nn.sparse_softmax_cross_entropy_with_logits(labels.astype(np.int32), logits.astype(np.float32))
    np.testing.assert_allclose(got32.numpy(), want, rtol=1e-5)


def test_sparse_softmax_cross_entropy_rejects_bad_labels_before_running():
    logits = np.zeros((2, 3))
    with pytest.raises(IndexError, match="index 3 is out of bounds for an axis of size 3"):
        adc.nn.sparse_softmax_cross_entropy_with_logits([0, 3], logits)
    with pytest.raises(IndexError, match="index -1 is out of bounds"):
        adc.nn.sparse_softmax_cross_entropy_with_logits([0, -1], logits)
    with pytest.raises(ValueError, match=r"labels of shape \(3,\) for logits of shape \(2, 3\)"):
        adc.nn.sparse_softmax_cross_entropy_with_logits([0, 1, 2], logits)
    with pytest.raises(TypeError, match="indices must be int32 or int64, got float64"):
        adc.nn.sparse_softmax_cross_entropy_with_logits(np.array([0.0, 1.0]), logits)


def test_arg_reductions_follow_tensorflow_and_numpy_each_by_its_own_name():
    x = np.array([[1.0, 5.0, 5.0], [7.0, 0.0, 7.0]])
    assert adc.argmax(x).tolist() == [1, 0, 1] and adc.argmax(x).dtype == np.int64   # tf: axis 0
    assert adc.argmin(x, axis=1).tolist() == [0, 1]
    assert adc.math.argmax(x, axis=-1).tolist() == [1, 0]                              # first of ties
    t = adc.constant(x)
    assert np.argmax(t).item() == np.argmax(x) == 3                                     # NumPy: flattened
    assert np.argmin(t, axis=0, keepdims=True).tolist() == np.argmin(x, axis=0, keepdims=True).tolist()


def test_gather_one_hot_and_take_along_axis_match_numpy():
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(adc.gather(x, [[2, 0], [0, 0]]).numpy(), x[[[2, 0], [0, 0]]])
    np.testing.assert_array_equal(adc.gather(x, np.array([-1, 1]), axis=1).numpy(), x[:, [-1, 1]])
    with pytest.raises(IndexError, match="out of bounds"):
        adc.gather(x, [3])
    np.testing.assert_array_equal(adc.one_hot([0, 2, 5, -1], 3).numpy(),
                                  [[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]])   # tf: zero rows outside
    assert adc.one_hot([[1]], 2, dtype="f64").dtype == np.float64
    i = np.array([[3], [0], [-1]])
    np.testing.assert_array_equal(adc.take_along_axis(x, i, 1).numpy(), np.take_along_axis(x, i, 1))
    np.testing.assert_array_equal(np.take_along_axis(adc.constant(x), i, 1).numpy(), np.take_along_axis(x, i, 1))
    with pytest.raises(IndexError, match="index 4 is out of bounds for an axis of size 4"):
        adc.take_along_axis(x, np.array([[4]]), 1)
    with pytest.raises(ValueError, match="indices of rank 1 for an array of rank 2"):
        adc.take_along_axis(x, np.array([1]), 1)


def test_a_cross_entropy_gradient_through_the_eager_ops_is_softmax_minus_one_hot():
    rng = np.random.default_rng(1)
    logits = adc.Variable(rng.standard_normal((4, 6)))
    labels = np.array([5, 0, 0, 3])
    with adc.GradientTape() as tape:
        loss = adc.reduce_mean(adc.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    want = (sp.softmax(logits.numpy(), axis=-1) - np.eye(6)[labels]) / 4
    np.testing.assert_allclose(tape.gradient(loss, logits).numpy(), want, rtol=1e-12, atol=1e-15)
