"""Property: the VJP of random compositions of ops agrees with central finite differences.

Hypothesis draws small expression trees over three inputs of broadcast-compatible shapes
(x: [3,4], y: [4], s: scalar) mixing smooth unary functions, arithmetic, reductions with
keepdims, slicing, transposes and matmuls; divisions, logs, roots and powers are guarded so
every input is in their domain. First order for every tree, second order for some.
"""
import numpy as np
from hypothesis import given, settings, strategies as st

from adc.frontend import compile_source
from tests.support.gradcheck import check_vjp

INPUTS = {"x": (3, 4), "y": (4,), "s": ()}
UNARY = ["sin({})", "cos({})", "tanh({})", "sigmoid({})", "softplus({})", "exp(tanh({}))",
         "log(1.0 + {0} * {0})", "sqrt(2.0 + {0} * {0})", "-{}", "({0} * {0})", "rsqrt(1.0 + {0} * {0})"]
BINARY = ["({} + {})", "({} - {})", "({} * {})", "({} / (2.0 + sin({})))",
          "((1.5 + cos({})) ** tanh({}))", "where({0} > {1}, {0} * {1}, {1})"]


def broadcast(a, b):
    """The NumPy broadcast of two shapes, all of them subsets of (3, 4) here."""
    return np.broadcast_shapes(a, b)


@st.composite
def expression(draw, depth=3):
    """(adc expression text, its shape)."""
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        name = draw(st.sampled_from(sorted(INPUTS)))
        return name, INPUTS[name]
    kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "shape"]))
    a, shape = draw(expression(depth - 1))
    if kind == "unary":
        return draw(st.sampled_from(UNARY)).format(a), shape
    if kind == "binary":
        b, other = draw(expression(depth - 1))
        return draw(st.sampled_from(BINARY)).format(a, b), broadcast(shape, other)
    if kind == "reduce" and shape:
        fn = draw(st.sampled_from(["sum", "mean", "max"]))
        return f"{fn}({a}, axis=-1, keepdims=True)", shape[:-1] + (1,)
    return _shape_op(draw, a, shape)


def _shape_op(draw, a, shape):
    if shape == (3, 4):
        form = draw(st.sampled_from(["slice", "matmul", "transpose"]))
        if form == "slice":
            return f"concat([{a}[:, 1:], {a}[:, :1]], axis=1)", shape
        if form == "matmul":
            return f"({a} @ transpose({a}))[:, :1]", (3, 1)
        return f"transpose(transpose({a}) * 0.5)", shape
    if shape == (4,):
        return f"pad({a}[1:], [[0, 1]], value=0.25)", shape
    return f"({a} * 2.0)", shape


def kernel(expr: str, shape) -> str:
    result = "f64" + (f"[{', '.join(map(str, shape))}]" if shape else "")
    return f"def f(x: f64[3, 4], y: f64[4], s: f64) -> {result}:\n    return {expr}\n"


def args(seed: int):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in INPUTS.values()]


@settings(max_examples=40, deadline=None)
@given(expression(), st.integers(0, 2**16))
def test_first_order_random_compositions(tree, seed):
    expr, shape = tree
    check_vjp(compile_source(kernel(expr, shape), "random.adc"), "f", args(seed), order=1, rtol=1e-4, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(expression(depth=2), st.integers(0, 2**16))
def test_second_order_random_compositions(tree, seed):
    expr, shape = tree
    check_vjp(compile_source(kernel(expr, shape), "random.adc"), "f", args(seed), order=2, rtol=1e-4, atol=1e-6)
