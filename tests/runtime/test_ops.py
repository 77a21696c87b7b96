"""The eager op library against NumPy: values, and gradients through the tape in float64.

Each case gives an adc function, its NumPy twin and inputs inside the op's smooth domain.
First order: ⟨u, grad f(x)⟩ from the tape equals the central difference of the NumPy twin
along u. Second order: the gradient of ⟨v, grad f⟩ from a nested tape (a Hessian-vector
product) equals the NumPy twin's mixed second difference ⟨u, H v⟩.
"""
import numpy as np
import pytest
import scipy.special

import adc

H1, H2 = 1e-6, 1e-4


def pos(*shape):
    return lambda rng: rng.uniform(0.5, 2.0, shape)


def normal(*shape):
    return lambda rng: rng.standard_normal(shape)


def away(*shape):
    """Away from 0, where abs/relu/elu/sign have a kink."""
    return lambda rng: rng.choice([-1.0, 1.0], shape) * rng.uniform(0.2, 2.0, shape)


def softplus(x):
    return np.logaddexp(x, 0.0)


def elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def clip_by_norm(t, c, axes=None):
    n = np.sqrt(np.sum(t * t, axis=axes, keepdims=True))
    return t * c / np.maximum(n, c)


UNARY = {
    "sin": (np.sin, normal(3, 2)), "cos": (np.cos, normal(3, 2)), "tan": (np.tan, lambda r: r.uniform(-1, 1, (4,))),
    "exp": (np.exp, normal(4)), "log": (np.log, pos(4)), "log1p": (np.log1p, pos(4)), "expm1": (np.expm1, normal(4)),
    "sqrt": (np.sqrt, pos(4)), "rsqrt": (lambda x: 1 / np.sqrt(x), pos(2, 2)), "abs": (np.abs, away(5)),
    "tanh": (np.tanh, normal(4)), "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), normal(4)),
    "relu": (lambda x: np.maximum(x, 0), away(5)), "elu": (elu, away(5)), "softplus": (softplus, normal(2, 3)),
    "negative": (np.negative, normal(3)),
}

# name: (adc function, NumPy function, input makers)
CASES = {f"{name}": (getattr(adc, name), f, [make]) for name, (f, make) in UNARY.items()}
CASES.update({
    "add_broadcast": (adc.add, np.add, [normal(3, 1), normal(4)]),
    "subtract_broadcast": (adc.subtract, np.subtract, [normal(2, 3), normal(1, 3)]),
    "multiply_broadcast": (adc.multiply, np.multiply, [normal(3, 1), normal(1, 4)]),
    "divide_broadcast": (adc.divide, np.divide, [normal(2, 3), away(3)]),
    "pow_tensor": (adc.pow, np.power, [pos(3), normal(3)]),
    "pow_literal": (lambda x: x ** 3, lambda x: x ** 3, [normal(4)]),
    "pow_negative_literal": (lambda x: x ** -2, lambda x: x ** -2.0, [pos(4)]),
    "rpow": (lambda x: 2.0 ** x, lambda x: 2.0 ** x, [normal(3)]),
    "maximum": (adc.maximum, np.maximum, [lambda r: np.array([1.0, -2.0, 0.5]), lambda r: np.array([0.0, 1.0, 2.0])]),
    "minimum": (adc.minimum, np.minimum, [lambda r: np.array([[1.0], [-2.0]]), lambda r: np.array([0.0, 3.0])]),
    "where": (lambda x, y: adc.where(adc.constant(np.array([True, False, True])), x, y),
              lambda x, y: np.where([True, False, True], x, y), [normal(2, 3), normal(3)]),
    "clip": (lambda x: adc.clip_by_value(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5),
             [lambda r: np.array([-1.0, -0.2, 0.3, 0.9])]),
    "matmul": (adc.matmul, np.matmul, [normal(3, 4), normal(4, 2)]),
    "matmul_operator": (lambda a, b: a @ b, np.matmul, [normal(2, 3, 4), normal(4, 2)]),
    "reduce_sum": (adc.reduce_sum, np.sum, [normal(3, 4)]),
    "reduce_sum_axis": (lambda x: adc.reduce_sum(x, axis=-1, keepdims=True),
                        lambda x: np.sum(x, axis=-1, keepdims=True), [normal(3, 4)]),
    "reduce_mean_axis": (lambda x: adc.reduce_mean(x, axis=0), lambda x: np.mean(x, axis=0), [normal(3, 4)]),
    "reduce_max_axis": (lambda x: adc.reduce_max(x, axis=1), lambda x: np.max(x, axis=1), [normal(3, 4)]),
    "reduce_min": (adc.reduce_min, np.min, [normal(5)]),
    "reduce_prod_axis": (lambda x: adc.reduce_prod(x, axis=[0, 2]), lambda x: np.prod(x, axis=(0, 2)),
                         [pos(2, 3, 2)]),
    "norm": (adc.norm, np.linalg.norm, [normal(3, 2)]),
    "norm_axis": (lambda x: adc.norm(x, axis=1), lambda x: np.linalg.norm(x, axis=1), [normal(3, 2)]),
    "clip_by_norm": (lambda t: adc.clip_by_norm(t, 0.5), lambda t: clip_by_norm(t, 0.5), [normal(2, 3)]),
    "clip_by_norm_axes": (lambda t: adc.clip_by_norm(t, 1.0, axes=[1]),
                          lambda t: clip_by_norm(t, 1.0, axes=1), [normal(4, 3)]),
    "transpose": (adc.transpose, np.transpose, [normal(2, 3)]),
    "transpose_perm": (lambda x: adc.transpose(x, perm=[1, 2, 0]), lambda x: np.transpose(x, (1, 2, 0)),
                       [normal(2, 3, 2)]),
    "reshape": (lambda x: adc.reshape(x, [3, -1]), lambda x: np.reshape(x, (3, -1)), [normal(2, 3)]),
    "concat": (lambda a, b: adc.concat([a, b], axis=1), lambda a, b: np.concatenate([a, b], axis=1),
               [normal(2, 3), normal(2, 1)]),
    "stack": (lambda a, b: adc.stack([a, b], axis=1), lambda a, b: np.stack([a, b], axis=1), [normal(3), normal(3)]),
    # indexing, the array methods and NumPy's functions on Tensors: each written once, run on both
    **{name: (f, f, makers) for name, (f, makers) in {
        "getitem_slices": (lambda x: x[1:, ::-2] * x[:-1, 1:4], [normal(3, 5)]),
        "getitem_repeated_indices": (lambda x: x[[0, 2, 2, 0]] * x[::-1][[1, 1, 0, 2]], [normal(3, 2)]),
        "getitem_two_index_arrays": (lambda x: x[[0, 1, 1], [2, 0, 2]] ** 2, [normal(2, 3)]),
        "getitem_apart_index_arrays": (lambda x: x[[1, 0], :, [0, 1]] * x[0, :, [1, 1]], [normal(2, 3, 2)]),
        "getitem_newaxis_ellipsis_mask": (lambda x: x[None, ..., 1] * x[np.array([True, False, True])][:, None, 0],
                                          [normal(3, 2)]),
        "array_methods": (lambda x: (x.T * x.T).sum(axis=0) + x.reshape(2, 3).max(axis=1).mean(), [normal(3, 2)]),
        "numpy_ufuncs_and_functions": (lambda x: np.sum(np.sin(x) * np.exp(x), axis=1) + np.add.reduce(np.square(x)),
                                       [normal(2, 2)]),
        "numpy_take_and_reshape": (lambda x: np.reshape(np.take(x, [2, 0, 2], axis=1), (-1,)) ** 3, [normal(2, 3)]),
        "iteration": (lambda x: sum(row * row[0] for row in x), [normal(3, 2)]),
    }.items()},
    # the softmax family and integer indexing, against NumPy twins
    "softmax": (lambda x: adc.nn.softmax(x, axis=0), lambda x: np.exp(x) / np.exp(x).sum(0), [normal(3, 2)]),
    "log_softmax": (adc.nn.log_softmax, lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True)), [normal(2, 3)]),
    "reduce_logsumexp": (lambda x: adc.reduce_logsumexp(x, axis=1, keepdims=True),
                         lambda x: np.log(np.exp(x).sum(1, keepdims=True)), [normal(2, 3)]),
    "sparse_softmax_cross_entropy": (
        lambda x: adc.nn.sparse_softmax_cross_entropy_with_logits([2, 0, 2], x),
        lambda x: np.log(np.exp(x).sum(-1)) - x[[0, 1, 2], [2, 0, 2]], [normal(3, 4)]),
    "gather_repeated": (lambda x: adc.gather(x, [2, 0, 2], axis=1) ** 2, lambda x: x[:, [2, 0, 2]] ** 2,
                        [normal(2, 3)]),
    "take_along_axis": (lambda x: adc.take_along_axis(x, np.array([[1], [0]]), 1) * x,
                        lambda x: np.take_along_axis(x, np.array([[1], [0]]), 1) * x, [normal(2, 3)]),
    # scans (tf.math.cumsum's arguments; NumPy's np.cumsum flattens when axis is None)
    "cumsum": (lambda x: adc.math.cumsum(x * x, axis=1), lambda x: np.cumsum(x * x, axis=1), [normal(2, 3)]),
    "cumsum_exclusive_reverse": (lambda x: adc.math.cumsum(x, axis=0, exclusive=True, reverse=True) ** 2,
                                 lambda x: (np.cumsum(x[::-1], axis=0)[::-1] - x) ** 2, [normal(3, 2)]),
    "cumprod": (lambda x: adc.math.cumprod(x, axis=-1), lambda x: np.cumprod(x, axis=-1), [away(2, 4)]),
    "numpy_cumsum_cumprod": (lambda x: np.cumsum(x) * np.cumprod(x, axis=0).reshape(-1),
                             lambda x: np.cumsum(x) * np.cumprod(x, axis=0).reshape(-1), [away(3, 2)]),
    "composition": (lambda x, y: adc.reduce_mean(adc.tanh(x @ y) ** 2 + adc.exp(-x) @ y),
                    lambda x, y: np.mean(np.tanh(x @ y) ** 2 + np.exp(-x) @ y), [normal(2, 3), normal(3, 3)]),
})
# adc.math: the elementwise functions without a top-level name
unit = lambda r: r.uniform(-0.9, 0.9, (4,))
CASES.update({f"math_{name}": (getattr(adc.math, name), f, [make]) for name, (f, make) in {
    "log2": (np.log2, pos(4)), "log10": (np.log10, pos(4)), "exp2": (np.exp2, normal(4)), "cbrt": (np.cbrt, away(4)),
    "sinh": (np.sinh, normal(4)), "cosh": (np.cosh, normal(4)), "asinh": (np.arcsinh, normal(4)),
    "acosh": (np.arccosh, lambda r: 1.5 + r.random(4)), "atanh": (np.arctanh, unit), "atan": (np.arctan, normal(4)),
    "asin": (np.arcsin, unit), "acos": (np.arccos, unit), "erf": (scipy.special.erf, normal(4)),
    "erfc": (scipy.special.erfc, normal(4)), "lgamma": (scipy.special.gammaln, pos(4)),
    "digamma": (scipy.special.psi, pos(4)),
}.items()})
CASES["math_atan2"] = (adc.math.atan2, np.arctan2, [normal(2, 3), away(3)])
CASES["math_hypot"] = (adc.math.hypot, np.hypot, [normal(3), away(3)])
SECOND_ORDER = sorted(set(CASES) - {"matmul_operator", "composition", "reduce_max_axis",
                                    "reduce_min", "array_methods", "math_digamma"})   # digamma: differentiable once


def inputs(name, seed=0):
    rng = np.random.default_rng(seed)
    return [np.asarray(make(rng), np.float64) for make in CASES[name][2]]


def tape_gradient(f, args, cotangent):
    xs = [adc.constant(a) for a in args]
    with adc.GradientTape() as tape:
        tape.watch(xs)
        y = f(*xs)
    return y, tape.gradient(y, xs, output_gradients=adc.constant(cotangent))


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_value_and_gradient_match_numpy(name):
    f, f_np, _ = CASES[name]
    args = inputs(name)
    rng = np.random.default_rng(1)
    want = f_np(*args)
    cotangent = rng.standard_normal(np.shape(want))
    y, grads = tape_gradient(f, args, cotangent)
    assert y.dtype == np.float64 and y.shape == np.shape(want)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12, atol=1e-12)
    assert [g.shape for g in grads] == [a.shape for a in args]
    u = [rng.standard_normal(a.shape) for a in args]
    adjoint = sum(np.vdot(ui, g.numpy()) for ui, g in zip(u, grads))
    moved = [[a + s * H1 * ui for a, ui in zip(args, u)] for s in (1, -1)]
    fd = (np.vdot(cotangent, f_np(*moved[0])) - np.vdot(cotangent, f_np(*moved[1]))) / (2 * H1)
    assert np.isclose(adjoint, fd, rtol=1e-6, atol=1e-7), (adjoint, fd)


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_op_second_derivative_matches_numpy(name):
    """⟨u, H v⟩ of s(x) = ⟨c, f(x)⟩ by nested tapes against NumPy's mixed second difference."""
    f, f_np, _ = CASES[name]
    args = inputs(name, seed=2)
    rng = np.random.default_rng(3)
    c = rng.standard_normal(np.shape(f_np(*args)))
    u = [rng.standard_normal(a.shape) for a in args]
    v = [rng.standard_normal(a.shape) for a in args]
    xs = [adc.constant(a) for a in args]
    with adc.GradientTape() as outer:
        outer.watch(xs)
        with adc.GradientTape() as inner_tape:
            inner_tape.watch(xs)
            y = f(*xs)
        grads = inner_tape.gradient(y, xs, output_gradients=adc.constant(c))
        gv = adc.constant(0.0, np.float64)
        for g, vi in zip(grads, v):
            gv = gv + adc.reduce_sum(g * vi)
    hv = outer.gradient(gv, xs, unconnected_gradients=adc.UnconnectedGradients.ZERO)
    got = sum(np.vdot(ui, h.numpy()) for ui, h in zip(u, hv))

    def s(a, b):
        return np.vdot(c, f_np(*[x + a * H2 * ui + b * H2 * vi for x, ui, vi in zip(args, u, v)]))

    want = (s(1, 1) - s(1, -1) - s(-1, 1) + s(-1, -1)) / (4 * H2 * H2)
    assert np.isclose(got, want, rtol=1e-4, atol=1e-5), (got, want)


@pytest.mark.parametrize("name", ["sign", "round", "floor"])
def test_piecewise_constant_ops_have_zero_gradient(name):
    x = adc.constant(np.array([-1.7, -0.5, 0.3, 2.5]))
    with adc.GradientTape() as tape:
        tape.watch(x)
        y = getattr(adc, name)(x)
    np.testing.assert_array_equal(y.numpy(), {"sign": np.sign, "round": np.round, "floor": np.floor}[name](x.numpy()))
    g = tape.gradient(y, x, unconnected_gradients="zero")
    np.testing.assert_array_equal(g.numpy(), np.zeros(4))


def test_operators_against_numpy_with_broadcasting_and_python_scalars():
    rng = np.random.default_rng(4)
    a_np, b_np = rng.standard_normal((3, 1)).astype(np.float32), rng.uniform(1, 2, (4,)).astype(np.float32)
    a, b = adc.constant(a_np), adc.constant(b_np)
    cases = [(a + b, a_np + b_np), (a - b, a_np - b_np), (a * b, a_np * b_np), (a / b, a_np / b_np),
             (b ** 2, b_np ** 2), (b ** 0.5, b_np ** 0.5), (-a, -a_np), (abs(a), np.abs(a_np)),
             (2.0 * a, 2 * a_np), (a + 1, a_np + 1), (1 - a, 1 - a_np), (1.0 / b, 1 / b_np), (2 ** b, 2 ** b_np),
             (a_np + b, a_np + b_np), (b * np.float32(3), b_np * 3), (np.float32(3) * b, 3 * b_np),
             (a.numpy().T @ a, a_np.T @ a_np), (a < b, a_np < b_np), (a >= 0.0, a_np >= 0),
             (a == a, np.ones((3, 1), bool)), (b != 1.5, b_np != 1.5)]
    for got, want in cases:
        assert isinstance(got, adc.Tensor)
        assert got.dtype == want.dtype, (got, want)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_dtypes_follow_tensorflow():
    assert adc.constant(1.0).dtype == np.float32
    assert adc.constant(1).dtype == np.int32
    assert adc.constant([1.0, 2.0]).dtype == np.float32
    assert adc.constant(np.arange(3.0)).dtype == np.float64
    assert (adc.constant(np.arange(3.0)) * 2.5).dtype == np.float64
    assert (adc.constant(2.0) * 3).dtype == np.float32
    assert (adc.constant(2) + 3).dtype == np.int32
    assert adc.cast(adc.constant(2.5), np.float64).dtype == np.float64


def test_mixed_dtypes_and_shapes_are_errors():
    x32, x64 = adc.constant([1.0, 2.0]), adc.constant(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="different dtypes float32 and float64"):
        x32 + x64
    with pytest.raises(ValueError, match=r"adc.add: incompatible shapes \(2,\) vs. \(3,\)"):
        x32 + adc.constant([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="Matrix size-incompatible"):
        adc.matmul(adc.constant(np.ones((2, 3))), adc.constant(np.ones((2, 3))))
    with pytest.raises(TypeError, match="adc.sin expects a floating tensor, got int32"):
        adc.sin(adc.constant([1, 2]))
    with pytest.raises(TypeError, match="cannot convert"):
        adc.constant([1, 2]) * 2.5
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        adc.reduce_sum(x32, axis=2)


def test_eager_kernels_are_compiled_once_per_signature():
    from adc.runtime import stdlib

    x = adc.constant(np.ones((2, 3)))
    adc.sin(x)
    before = stdlib.compiled_count()
    for shape in [(5, 7), (1, 1), (0, 3)]:
        np.testing.assert_allclose(adc.sin(adc.constant(np.ones(shape))).numpy(), np.sin(np.ones(shape)))
    assert stdlib.compiled_count() == before


def test_namespaces():
    np.testing.assert_allclose(adc.nn.relu(adc.constant([-1.0, 2.0])).numpy(), [0.0, 2.0])
    np.testing.assert_allclose(adc.math.sin(adc.constant(0.5)).numpy(), np.sin(np.float32(0.5)))
    assert adc.nn.sigmoid(adc.constant(0.0)).numpy() == 0.5
