"""adc.Tensor as a NumPy user expects an array to behave: indexing, iteration, methods, NumPy's
functions, dtype names. Values against NumPy on the same data; gradients are in test_ops.py."""
import numpy as np
import pytest

import adc
from adc.runtime import stdlib

X = np.arange(60, dtype=np.float64).reshape(3, 4, 5) * 0.5 - 7

INDICES = [
    0, -1, 2, np.int64(1), slice(1, None), np.s_[:, ::2], np.s_[::-1], np.s_[..., 0], np.s_[..., ::-3],
    None, np.s_[:, None, 1], np.s_[1, 2, 3], np.s_[-1, -2, -5], np.s_[2:0:-1, 1], np.s_[:, 1:1],
    [0, 2, 2], np.s_[:, [1, 3]], np.s_[[0, 1], [1, 2]], np.s_[[0, 1], :, [1, 2]], np.s_[0, :, [1, 2]],
    np.s_[:, [[0, 1], [3, 2]], 1:], np.s_[np.array([[0], [1]]), np.array([1, 2, 3])], np.s_[[-1, -3]],
    X > 10, np.s_[:, X[0] > 0], np.s_[..., [4, 0], None], np.s_[[], :], np.array([], np.int64),
    np.s_[np.array([True, False, True]), 1:3],
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_indexing_matches_numpy(dtype):
    x = (X % 3 == 0) if dtype is np.bool_ else X.astype(dtype)
    t = adc.constant(x)
    for index in INDICES:
        got, want = t[index], x[index]
        assert isinstance(got, adc.Tensor), index
        assert got.dtype == want.dtype and got.shape == want.shape, index
        np.testing.assert_array_equal(got.numpy(), want, err_msg=str(index))


def test_indices_given_as_tensors_and_lists():
    t = adc.constant(X)
    np.testing.assert_array_equal(t[adc.constant([2, 0])].numpy(), X[[2, 0]])
    np.testing.assert_array_equal(t[:, adc.constant(np.array([3, 1], np.int64))].numpy(), X[:, [3, 1]])
    np.testing.assert_array_equal(t[adc.constant(X) > 3].numpy(), X[X > 3])
    v = adc.Variable(X)
    np.testing.assert_array_equal(v[1, [0, 0]].numpy(), X[1, [0, 0]])


@pytest.mark.parametrize("index", [3, -4, np.s_[0, 4], np.s_[0, 0, 0, 0], [5], np.s_[:, [0, 4]],
                                   np.s_[..., ...], X[0] > 0, np.s_[[0, 1], [0, 1, 2]]])
def test_bad_indices_raise_numpys_index_error(index):
    with pytest.raises(IndexError) as numpy_error:
        X[index]
    with pytest.raises(IndexError) as adc_error:
        adc.constant(X)[index]
    assert str(adc_error.value) == str(numpy_error.value)


@pytest.mark.parametrize("index", [1.5, [0.5], np.array([1.0]), "a", adc.constant([1.0])])
def test_indices_that_are_not_integers_raise_index_error(index):
    with pytest.raises(IndexError, match="integer"):
        adc.constant(X)[index]


def test_an_integer_index_compiles_one_kernel_for_every_position():
    t = adc.constant(np.arange(12.0).reshape(6, 2))
    t[0], t[1:3], t[[1, 2]]
    before = stdlib.compiled_count()
    rows = [t[i] for i in range(-6, 6)] + [t[[i, i + 1]] for i in range(5)]
    assert stdlib.compiled_count() == before
    np.testing.assert_array_equal(np.stack([r.numpy() for r in rows[:12]]), np.concatenate([t.numpy()] * 2))


def test_iteration_len_item_and_tolist():
    t = adc.constant(X[0])
    assert len(t) == 4 and [r.shape for r in t] == [(5,)] * 4
    np.testing.assert_array_equal(np.stack([r.numpy() for r in t]), X[0])
    assert t[1, 2].item() == X[0, 1, 2] and isinstance(t[1, 2].item(), float)
    assert t.tolist() == X[0].tolist()
    with pytest.raises(TypeError, match="0-d"):
        iter(adc.constant(1.0))
    with pytest.raises(ValueError):
        t.item()
    v = adc.Variable([[1, 2]], dtype="i64")
    assert v.tolist() == [[1, 2]] and v[0, 1].item() == 2


def test_array_methods_match_numpy():
    t = adc.constant(X)
    cases = [(t.T, X.T), (t.sum(), X.sum()), (t.sum(axis=1, keepdims=True), X.sum(axis=1, keepdims=True)),
             (t.mean(axis=(0, 2)), X.mean(axis=(0, 2))), (t.max(axis=0), X.max(axis=0)), (t.min(), X.min()),
             (t.prod(axis=-1), X.prod(axis=-1)), (t.reshape(6, 10), X.reshape(6, 10)),
             (t.reshape((-1, 5)), X.reshape((-1, 5))), (t.transpose(), X.transpose()),
             (t.transpose(2, 0, 1), X.transpose(2, 0, 1)), (t.transpose((1, 0, 2)), X.transpose((1, 0, 2))),
             (t.astype(np.float32), X.astype(np.float32)), (t.astype("i64"), X.astype(np.int64))]
    for got, want in cases:
        assert isinstance(got, adc.Tensor) and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_numpy_math_ufuncs_are_adc_math_functions_with_gradients():
    x = adc.Variable(np.array([0.25, 0.5, 0.75]))
    xv = x.numpy()
    with adc.GradientTape() as tape:
        y = np.sum(np.arctan2(np.arcsin(x), np.cbrt(x)) + np.log2(x) + np.hypot(x, 2.0))
    np.testing.assert_allclose(y.numpy(), np.sum(np.arctan2(np.arcsin(xv), np.cbrt(xv)) + np.log2(xv) + np.hypot(xv, 2.0)))
    h = 1e-6
    f = lambda v: np.sum(np.arctan2(np.arcsin(v), np.cbrt(v)) + np.log2(v) + np.hypot(v, 2.0))   # noqa: E731
    fd = [(f(xv + h * e) - f(xv - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), fd, rtol=1e-6)


def test_numpy_functions_on_tensors_are_adc_ops_and_recorded():
    x = adc.Variable(np.array([0.5, 1.0, 2.0]))
    with adc.GradientTape() as tape:
        y = np.sum(np.exp(x) * np.array([1.0, 2.0, 3.0])) + np.max(np.stack([x, np.square(x)]))
    assert isinstance(y, adc.Tensor)
    xv = x.numpy()
    np.testing.assert_allclose(y.numpy(), np.sum(np.exp(xv) * [1, 2, 3]) + 4.0)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.exp(xv) * [1, 2, 3] + [0, 0, 4.0])


def test_a_numpy_function_without_an_adc_op_raises_on_a_watched_tensor():
    x = adc.Variable(np.array([0.5, 1.0, 2.0]))
    with adc.GradientTape():
        with pytest.raises(TypeError, match="numpy.diff has no adc op"):
            np.diff(x)
        with pytest.raises(TypeError, match="numpy.sinc has no adc op"):
            np.sinc(x)
        with pytest.raises(TypeError, match="numpy.sin has no adc op"):   # out= is not adc's
            np.sin(x, out=np.empty(3))
        assert np.isnan(x).tolist() == [False, False, False]   # not floating point: nothing to lose
        assert np.shape(x) == (3,) and np.allclose(x, [0.5, 1.0, 2.0])
        np.testing.assert_array_equal(np.diff(adc.constant([1.0, 2.5])), [1.5])   # not watched
    result = np.diff(x)   # no tape: NumPy's function on the values
    assert type(result) is np.ndarray
    np.testing.assert_array_equal(result, [0.5, 1.0])


def test_numpy_operators_with_an_array_on_the_left_are_recorded():
    x = adc.Variable(np.array([1.0, 2.0]))
    with adc.GradientTape() as tape:
        y = np.array([3.0, 4.0]) * x + np.array([[1.0], [1.0]]) @ x[None]
    assert isinstance(y, adc.Tensor)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2 * 3.0 + 2, 2 * 4.0 + 2])   # (2, 2): rows broadcast


def test_adc_dtype_names_are_accepted_wherever_a_dtype_is():
    assert adc.Variable(0.5, dtype="f64").dtype == np.float64
    assert adc.constant([1, 2], dtype="i64").dtype == np.int64
    assert adc.cast(adc.constant(1.5), "f64").dtype == np.float64
    assert adc.Tensor([True], dtype="bool").dtype == np.bool_
    with pytest.raises(TypeError):
        adc.constant(1.0, dtype="f16")


def test_kernel_arguments_convert_python_values_and_say_how_to_convert_arrays():
    m = adc.compile("def f(x: f64[N], k: i32) -> f64[N]:\n    return x * f64(k)\n")
    np.testing.assert_array_equal(m.f([1, 2], 3).numpy(), [3.0, 6.0])   # Python ints to f64 and i32
    with pytest.raises(TypeError, match=r"parameter 'x' expects dtype f64 .*got float32; convert it with "
                                        r"\.astype\(np\.float64\) or adc\.cast\(x, 'f64'\)"):
        m.f(np.ones(2, np.float32), 1)
    with pytest.raises(OverflowError, match="parameter 'k'"):
        m.f([1.0], 2 ** 40)
