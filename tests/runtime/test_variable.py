"""adc.Variable: construction with TensorFlow's dtypes, assignments, and use wherever a Tensor is."""
import numpy as np
import pytest

import adc
from tests.support.repository import SAMPLES


def test_construction_and_properties():
    v = adc.Variable(2.0)
    assert v.dtype == np.float32 and v.shape == () and v.trainable and v.name == "Variable"
    w = adc.Variable(np.zeros((2, 3)), trainable=False, name="w")
    assert w.dtype == np.float64 and w.shape == (2, 3) and not w.trainable and w.name == "w"
    assert adc.Variable([1, 2], dtype=np.float32).dtype == np.float32
    assert str(v) == "2.0" and "numpy=2.0" in repr(v)


def test_assignments_replace_the_value():
    v = adc.Variable([1.0, 2.0])
    snapshot = v.value()
    assert v.assign([3.0, 4.0]) is v
    v.assign_add([1.0, 1.0])
    v.assign_sub(np.array([0.5, 0.5], np.float32))
    np.testing.assert_array_equal(v.numpy(), [3.5, 4.5])
    np.testing.assert_array_equal(snapshot.numpy(), [1.0, 2.0])
    with pytest.raises(ValueError, match="has shape \\(2,\\), the new value has shape \\(3,\\)"):
        v.assign([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="cannot convert"):
        adc.Variable([1, 2]).assign([1.5, 2.0])


def test_arithmetic_ops_and_kernels_accept_variables():
    v = adc.Variable([1.0, 2.0])
    np.testing.assert_allclose((v * 2 + v).numpy(), [3.0, 6.0])
    np.testing.assert_allclose((1.0 - v).numpy(), [0.0, -1.0])
    np.testing.assert_allclose(adc.exp(v).numpy(), np.exp([1.0, 2.0]).astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(v), [1.0, 2.0])
    m = adc.compile_file(SAMPLES / "kernels.adc")
    np.testing.assert_allclose(m.sigmoid_shift(v, adc.Variable(0.5)).numpy(),
                               1 / (1 + np.exp(-(np.array([1.0, 2.0]) + 0.5))), rtol=1e-6)


def test_shape_ops_accept_variables_and_record_through_them():
    v = adc.Variable(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    assert v.size == 6
    with adc.GradientTape() as t:
        y = adc.reshape(v, (3, -1)) * adc.transpose(v)
    assert y.shape == (3, 2)
    a = v.numpy()     # d sum(reshape(v) * vᵀ) = vᵀ reshaped back + reshape(v) transposed back
    np.testing.assert_allclose(t.gradient(y, v).numpy(), a.T.reshape(2, 3) + a.reshape(3, 2).T)
