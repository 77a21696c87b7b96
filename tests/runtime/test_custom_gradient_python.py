"""@adc.custom_gradient: the guide's cases, nesting under outer tapes, several inputs and outputs,
variables, and the errors of a malformed backward. Oracles: the guide's numbers, closed forms
in float64, and finite differences."""
import numpy as np
import pytest

import adc


@adc.custom_gradient
def clip_gradients(y):
    def backward(dy):
        return adc.clip_by_norm(dy, 0.5)
    return y, backward


@adc.custom_gradient
def log1pexp(x):
    e = adc.exp(x)

    def backward(upstream):
        return upstream * (1 - 1 / (1 + e))
    return adc.log(1 + e), backward


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_guide_clip_gradients_gives_two():
    v = adc.Variable(2.0)
    with adc.GradientTape() as t:
        output = clip_gradients(v * v)
    assert float(t.gradient(output, v)) == 2.0     # backward clips 4 to 2


def test_vector_clip_gradients_matches_numpy_clip_by_norm():
    x = adc.constant([3.0, -4.0, 1.0])
    with adc.GradientTape() as t:
        t.watch(x)
        y = clip_gradients(x * 2.0)
    g = t.gradient(y, x, output_gradients=adc.constant([1.0, 2.0, -2.0]))
    dy = np.array([1.0, 2.0, -2.0])
    np.testing.assert_allclose(g.numpy(), 2.0 * dy * 0.5 / np.linalg.norm(dy), rtol=1e-6)


def test_log1pexp_is_stable_where_the_naive_gradient_is_nan():
    x = adc.constant(100.0)
    with adc.GradientTape(persistent=True) as t:
        t.watch(x)
        naive = adc.log(1 + adc.exp(x))
        stable = log1pexp(x)
    assert np.isnan(float(t.gradient(naive, x)))
    assert float(t.gradient(stable, x)) == 1.0


def test_nested_tapes_differentiate_the_backward_for_a_second_derivative():
    for value in (-1.5, 0.5, 2.0):
        x = adc.Variable(value)
        with adc.GradientTape() as t2:
            with adc.GradientTape() as t1:
                y = log1pexp(x)
            g = t1.gradient(y, x)
        h = t2.gradient(g, x)
        np.testing.assert_allclose(float(g), sigmoid(value), rtol=1e-6)
        np.testing.assert_allclose(float(h), sigmoid(value) * (1 - sigmoid(value)), rtol=1e-5)


def test_one_node_the_forward_ops_are_not_on_the_gradient_path():
    calls = []

    @adc.custom_gradient
    def triple_gradient(x):
        def backward(dy):
            calls.append(dy)
            return 3.0 * dy
        return x * 1.0, backward

    x = adc.constant([1.0, 2.0])
    with adc.GradientTape() as t:
        t.watch(x)
        y = triple_gradient(x)
    np.testing.assert_array_equal(t.gradient(y, x).numpy(), [3.0, 3.0])   # not 1 + 3
    assert len(calls) == 1


def test_two_inputs_each_get_their_cotangent_against_finite_differences():
    @adc.custom_gradient
    def hypot(a, b):
        r = adc.sqrt(a * a + b * b)

        def backward(dr):
            return dr * a / r, dr * b / r
        return r, backward

    a, b = adc.Variable(3.0, dtype=np.float64), adc.Variable(4.0, dtype=np.float64)
    with adc.GradientTape() as t:
        r = hypot(a, b)
    ga, gb = t.gradient(r, [a, b])
    h = 1e-6
    np.testing.assert_allclose([float(ga), float(gb)],
                               [(np.hypot(3 + h, 4) - np.hypot(3 - h, 4)) / (2 * h),
                                (np.hypot(3, 4 + h) - np.hypot(3, 4 - h)) / (2 * h)], rtol=1e-8)


def test_two_outputs_the_backward_gets_both_cotangents():
    @adc.custom_gradient
    def split(x):
        def backward(d_first, d_second):
            return d_first + 10.0 * d_second
        return (x * 2.0, x * 3.0), backward

    x = adc.constant(1.0)
    with adc.GradientTape(persistent=True) as t:
        t.watch(x)
        first, second = split(x)
        total = first + second
    assert float(t.gradient(total, x)) == 11.0
    assert float(t.gradient(first, x)) == 1.0      # the unused output's cotangent is zero


def test_straight_through_round():
    @adc.custom_gradient
    def round_through(x):
        return adc.round(x), lambda dy: dy

    x = adc.constant([0.3, 1.7])
    with adc.GradientTape() as t:
        t.watch(x)
        y = round_through(x) * x
    np.testing.assert_allclose(t.gradient(y, x).numpy(), np.round([0.3, 1.7]) + [0.3, 1.7], rtol=1e-6)


def test_variables_read_inside_get_gradients_through_the_variables_keyword():
    w = adc.Variable(2.0)

    @adc.custom_gradient
    def scale(x):
        def backward(dy, variables):
            assert variables == [w]
            return dy * w, [dy * x * 100.0]
        return x * w, backward

    x = adc.constant(3.0)
    with adc.GradientTape() as t:
        t.watch(x)
        y = scale(x)
    gx, gw = t.gradient(y, [x, w])
    assert (float(gx), float(gw)) == (2.0, 300.0)


def test_backward_without_variables_keyword_is_a_type_error():
    w = adc.Variable(2.0)

    @adc.custom_gradient
    def scale(x):
        return x * w, lambda dy: dy

    with pytest.raises(TypeError, match="keyword argument 'variables'"):
        scale(adc.constant(1.0))


@pytest.mark.parametrize("backward, message", [
    (lambda dy: (dy, dy), "must return 1 gradients, one per input, but returned 2"),
    (lambda dy: adc.constant([1.0, 2.0]), r"gradient of shape \(2,\) for input 0 of shape \(\)"),
])
def test_malformed_backward_is_a_value_error(backward, message):
    @adc.custom_gradient
    def f(x):
        return x * 1.0, backward

    x = adc.constant(1.0)
    with adc.GradientTape() as t:
        t.watch(x)
        y = f(x)
    with pytest.raises(ValueError, match=message):
        t.gradient(y, x)


def test_unwatched_calls_are_not_recorded_and_the_result_is_a_new_tensor():
    x = adc.constant(5.0)
    with adc.GradientTape() as t:
        y = clip_gradients(x)
    assert y is not x and float(y) == 5.0
    with pytest.warns(UserWarning, match="the target was not recorded by this tape"):
        assert t.gradient(y, x) is None


def test_second_order_differentiates_the_backward_not_the_forward():
    """The backward 10 sin(x) x dy is not the derivative of x³: the second derivative is that of the
    backward, checked against float64 central finite differences of it."""
    @adc.custom_gradient
    def odd(x):
        def backward(dy):
            return 10.0 * adc.sin(x) * x * dy
        return x * x * x, backward

    def user_gradient(v):
        return 10.0 * np.sin(v) * v

    for value in (-1.3, 0.4, 2.2):
        x = adc.Variable(np.float64(value))
        with adc.GradientTape() as t2:
            with adc.GradientTape() as t1:
                y = odd(x)
            g = t1.gradient(y, x)
        h = t2.gradient(g, x)
        assert float(g) == pytest.approx(user_gradient(value), rel=1e-14)
        fd = (user_gradient(value + 1e-6) - user_gradient(value - 1e-6)) / 2e-6
        assert float(h) == pytest.approx(fd, rel=1e-7)


def test_a_function_that_does_not_return_result_and_backward_is_a_type_error():
    @adc.custom_gradient
    def forgot_backward(x):
        return x * 2.0

    with pytest.raises(TypeError, match="forgot_backward must return \\(result, backward\\) with a callable "
                                        "backward, got Tensor"):
        forgot_backward(adc.constant([1.0]))
