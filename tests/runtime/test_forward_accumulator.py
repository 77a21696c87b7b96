"""adc.ForwardAccumulator, with tf.autodiff.ForwardAccumulator's semantics: tangents of eager ops and
kernel calls inside the block, unconnected values, nesting with GradientTape both ways (TF's
Hessian-vector product recipe) and with another accumulator, custom gradients, argument errors.
Oracles: float64 central finite differences, compiled Hessians, closed forms."""
import numpy as np
import pytest

import adc

STEP = 1e-6
SOURCE = """
def mlp(x: f64[B, I], w: f64[I, O], b: f64[O]) -> f64[B, O]:
    return elu(x @ w + b)

@custom_gradient
def doubled_sin(x: f64[N]) -> f64[N]:
    c = cos(x)
    def backward(ct: f64[N]) -> f64[N]:
        return 2.0 * ct * c
    return sin(x), backward

def loss(w: f64[N]) -> f64:
    return sum(tanh(w) * w * w)
"""


@pytest.fixture(scope="module")
def m():
    return adc.compile(SOURCE, "accumulator.adc")


def eager_and_kernels(m, x, w, b):
    return adc.reduce_sum(adc.sin(m.mlp(x, w, b)) * 3.0, axis=1)


def test_the_smallest_example():
    x = adc.Variable(3.0)
    with adc.ForwardAccumulator(x, adc.constant(1.0)) as acc:
        y = x * x
    assert float(acc.jvp(y)) == 6.0


def test_eager_ops_and_kernels_against_finite_differences(m):
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal(2)
    dw, db = rng.standard_normal((4, 2)), rng.standard_normal(2)
    tx, tw, tb = adc.constant(x), adc.Variable(w), adc.constant(b)
    with adc.ForwardAccumulator([tw, tb], [dw, db]) as acc:
        y = eager_and_kernels(m, tx, tw, tb)
    plus = eager_and_kernels(m, x, w + STEP * dw, b + STEP * db).numpy()
    minus = eager_and_kernels(m, x, w - STEP * dw, b - STEP * db).numpy()
    np.testing.assert_allclose(acc.jvp(y).numpy(), (plus - minus) / (2 * STEP), rtol=1e-6, atol=1e-9)
    assert acc.jvp(tx) is None
    np.testing.assert_array_equal(acc.jvp([tx], unconnected_gradients="zero")[0].numpy(), np.zeros((3, 4)))
    np.testing.assert_array_equal(acc.jvp(tw).numpy(), dw)


def test_only_calls_inside_the_block_are_watched():
    x = adc.constant([1.0, 2.0])
    acc = adc.ForwardAccumulator(x, adc.constant([1.0, 1.0]))
    before = x * x
    with acc:
        inside = x * x
    after = x * x
    assert acc.jvp(before) is None and acc.jvp(after) is None
    np.testing.assert_array_equal(acc.jvp(inside).numpy(), [2.0, 4.0])


def test_forward_over_backward_is_the_hessian_vector_product(m):
    # TF's recipe: a tape inside the accumulator; the accumulator's jvp of the gradient is H·v
    w, v = np.linspace(-1, 1, 5), np.linspace(0.5, 1.5, 5)
    tw = adc.constant(w)
    with adc.ForwardAccumulator(tw, adc.constant(v)) as acc:
        with adc.GradientTape() as tape:
            tape.watch(tw)
            y = m.loss(tw)
        g = tape.gradient(y, tw)
    np.testing.assert_allclose(acc.jvp(g).numpy(), adc.hessian(m.loss)(w).numpy() @ v, rtol=1e-12)


def test_backward_over_forward(m):
    w, v = np.linspace(-1, 1, 5), np.linspace(0.5, 1.5, 5)
    tw = adc.constant(w)
    with adc.GradientTape() as tape:
        tape.watch(tw)
        with adc.ForwardAccumulator(tw, adc.constant(v)) as acc:
            y = m.loss(tw)
        jvp = acc.jvp(y)
    np.testing.assert_allclose(tape.gradient(jvp, tw).numpy(), adc.hessian(m.loss)(w).numpy() @ v, rtol=1e-12)


def test_nested_accumulators_give_second_order_forward_derivatives():
    x = adc.constant(0.7)
    with adc.ForwardAccumulator(x, adc.constant(2.0)) as outer:
        with adc.ForwardAccumulator(x, adc.constant(3.0)) as inner:
            y = adc.sin(x) * x
        first = inner.jvp(y)
    second = outer.jvp(first)
    assert np.isclose(float(first), 3.0 * (np.cos(0.7) * 0.7 + np.sin(0.7)))
    assert np.isclose(float(second), 2.0 * 3.0 * (2 * np.cos(0.7) - 0.7 * np.sin(0.7)))


def test_a_language_custom_gradient_is_transposed_a_python_one_refuses(m):
    x, v = np.linspace(-1, 1, 4), np.ones(4)
    tx = adc.constant(x)
    with adc.ForwardAccumulator(tx, adc.constant(v)) as acc:
        y = m.doubled_sin(tx)
    np.testing.assert_allclose(acc.jvp(y).numpy(), 2.0 * np.cos(x), rtol=1e-14)

    @adc.custom_gradient
    def clip(y):
        return y, lambda dy: adc.clip_by_norm(dy, 0.5)

    with pytest.raises(TypeError, match="cannot push tangents through @adc.custom_gradient 'clip'"):
        with adc.ForwardAccumulator(tx, adc.constant(v)):
            clip(tx * 2.0)


@pytest.mark.parametrize("primals, tangents, error, message", [
    (np.ones(2), np.ones(2), TypeError, r"primals\[0\] must be a Tensor or Variable"),
    (adc.constant([1, 2]), [1, 1], TypeError, r"primals\[0\] is int32; only float values"),
    (adc.constant([1.0, 2.0]), np.ones(3), ValueError, r"tangents\[0\] has shape \(3,\)"),
    ([adc.constant(1.0)], [], ValueError, "primals and tangents differ: 0 entries where a sequence of 1"),
    ({"a": adc.constant(1.0)}, {"b": 1.0}, ValueError, r"keys \['b'\] where a dict with keys \['a'\]"),
    ({"a": adc.constant(1.0)}, [1.0], ValueError, "list where a dict"),
    ([adc.constant(1.0), {"a": adc.constant(1.0)}], [1.0, 1.0], ValueError, "float where a dict"),
])
def test_argument_errors(primals, tangents, error, message):
    with pytest.raises(error, match=message):
        adc.ForwardAccumulator(primals, tangents)


def test_jvp_argument_errors():
    acc = adc.ForwardAccumulator(adc.constant(1.0), adc.constant(1.0))
    with pytest.raises(TypeError, match="expects Tensors or Variables"):
        acc.jvp(np.ones(2))
    with pytest.raises(ValueError, match="unconnected_gradients must be"):
        acc.jvp(adc.constant(1.0), unconnected_gradients="nan")


def test_a_sum_passes_its_moving_operands_tangent_through_without_a_call():
    """The JVP of x + c in x returns x's tangent unchanged (Derivation.passthrough): the same tensor,
    no kernel call — and an enclosing tape still differentiates through it."""
    from adc.compiler import DERIVATIONS
    from adc.frontend import compile_source

    module = compile_source("def f(x: f64[N], y: f64[N]) -> f64[N]:\n    return x + y\n", "sum.adc")
    assert DERIVATIONS["jvp_tangents"](module, "f", (0,)).passthrough == (0,)
    assert DERIVATIONS["jvp_batched"](module, "f", (1,)).passthrough == (0,)
    assert DERIVATIONS["jvp_tangents"](module, "f", (0, 1)).passthrough == (None,)
    x, c = adc.Variable(np.ones((3, 2))), adc.constant(np.arange(2.0))
    v = adc.Variable(np.full((3, 2), 2.0))
    with adc.GradientTape() as tape:
        with adc.ForwardAccumulator(x, v * 1.0) as acc:     # a Tensor tangent: kept, not copied
            y = x + c
            z = x * 3.0
        moved = acc.jvp(y)
        assert moved is acc.jvp(x)
        loss = adc.reduce_sum(moved * moved) + adc.reduce_sum(acc.jvp(z))
    np.testing.assert_array_equal(tape.gradient(loss, v).numpy(), 2 * v.numpy() + 3.0)


Pair = __import__("collections").namedtuple("Pair", "first second")


def test_jvp_mirrors_any_nest_of_lists_tuples_namedtuples_and_dicts():
    """tf.autodiff.ForwardAccumulator.jvp maps over the structure it is given: dicts keep their
    keys (and order), namedtuples their type, and an unconnected value gets None (or zeros)."""
    x = adc.Variable(np.array([0.5, -1.0]))
    dx = np.array([1.0, 2.0])
    with adc.ForwardAccumulator(x, dx) as acc:
        y = adc.sin(x)
        h = x * x
        u = adc.exp(x)
    c = adc.constant([3.0, 4.0])
    nested = acc.jvp([y, {"h": h, "u": u, "c": c}, (Pair(u, c),)])
    assert isinstance(nested, list) and list(nested[1]) == ["h", "u", "c"] and type(nested[2][0]) is Pair
    x64 = x.numpy()
    np.testing.assert_allclose(nested[0].numpy(), np.cos(x64) * dx, rtol=1e-15)
    np.testing.assert_allclose(nested[1]["h"].numpy(), 2 * x64 * dx, rtol=1e-15)
    np.testing.assert_allclose(nested[1]["u"].numpy(), np.exp(x64) * dx, rtol=1e-15)
    np.testing.assert_allclose(nested[2][0].first.numpy(), np.exp(x64) * dx, rtol=1e-15)
    assert nested[1]["c"] is None and nested[2][0].second is None
    zeros = acc.jvp({"c": c, "y": [y]}, unconnected_gradients="zero")
    np.testing.assert_array_equal(zeros["c"].numpy(), np.zeros(2))
    np.testing.assert_allclose(zeros["y"][0].numpy(), np.cos(x64) * dx, rtol=1e-15)
    with pytest.raises(TypeError, match="expects Tensors or Variables"):
        acc.jvp({"y": y, "bad": np.ones(2)})


def test_primals_and_tangents_may_be_any_nest_of_the_same_structure():
    """As TF's: a dict of primals takes a dict of tangents, a nest a nest (a tangent may itself be a
    nested list of numbers); each primal moves along its own tangent, checked by finite differences."""
    rng = np.random.default_rng(3)
    w64, b64, s64 = rng.standard_normal((3, 2)), rng.standard_normal(2), 0.7
    dw, db = rng.standard_normal((3, 2)), [0.25, -0.5]
    x = rng.standard_normal((4, 3))
    w, b, s = adc.Variable(w64), adc.Variable(b64), adc.Variable(np.float64(s64))

    def f(w, b, s):
        return adc.reduce_sum(adc.tanh(adc.matmul(x, w) + b) * s)

    with adc.ForwardAccumulator({"layer": (w, b), "scale": [s]}, {"scale": [2.0], "layer": [dw, db]}) as acc:
        y = f(w, b, s)
    step = 1e-6
    plus = f(w64 + step * dw, b64 + step * np.array(db), s64 + 2 * step).numpy()
    minus = f(w64 - step * dw, b64 - step * np.array(db), s64 - 2 * step).numpy()
    np.testing.assert_allclose(acc.jvp(y).numpy(), (plus - minus) / (2 * step), rtol=1e-7)
    np.testing.assert_array_equal(acc.jvp({"b": b})["b"].numpy(), db)
