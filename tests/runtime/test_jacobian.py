"""tape.jacobian and tape.batch_jacobian: the guide's Jacobian sections with its numbers, Hessians
through nested tapes, the cross-example rule, and the errors. Oracles: NumPy formulas, finite
differences in float64, tape.gradient, and the one-seed-at-a-time route (experimental_use_pfor=False)."""
import numpy as np
import pytest

import adc
from tests.support.repository import SAMPLES

ROUTES = [True, False]      # experimental_use_pfor: all seeds in one walk, or one walk per seed


@pytest.fixture(scope="module")
def layers():
    return adc.compile_file(SAMPLES / "layers.adc")


def dense(rng, ins, outs, dtype=np.float32):
    return (adc.Variable((rng.standard_normal((ins, outs)) * 0.5).astype(dtype)),
            adc.Variable((rng.standard_normal(outs) * 0.1).astype(dtype)))


def batch_norm(h):
    """Training-mode batch normalization in eager ops: every example depends on all of them."""
    mean = adc.reduce_mean(h, axis=0, keepdims=True)
    var = adc.reduce_mean((h - mean) ** 2, axis=0, keepdims=True)
    return (h - mean) * adc.rsqrt(var + 1e-3)


@pytest.mark.parametrize("pfor", ROUTES)
def test_scalar_source_gives_the_targets_shape(pfor):
    x = adc.constant(np.linspace(-10.0, 10.0, 201).astype(np.float32))
    delta = adc.Variable(0.0)
    with adc.GradientTape() as tape:
        y = adc.nn.sigmoid(x + delta)
    dy_dx = tape.jacobian(y, delta, experimental_use_pfor=pfor)
    assert y.shape == dy_dx.shape == (201,)
    s = 1 / (1 + np.exp(-np.linspace(-10.0, 10.0, 201)))
    np.testing.assert_allclose(dy_dx.numpy(), s * (1 - s), atol=1e-6)


def test_tensor_source_sums_to_the_gradient(layers):
    rng = np.random.default_rng(1)
    x = adc.constant(rng.standard_normal((7, 5)).astype(np.float32))
    kernel, bias = dense(rng, 5, 10)
    with adc.GradientTape(persistent=True) as tape:
        y = layers.dense_relu(x, kernel, bias)
    j = tape.jacobian(y, kernel)
    assert y.shape == (7, 10) and j.shape == (7, 10, 5, 10)
    g = tape.gradient(y, kernel)
    np.testing.assert_allclose(adc.reduce_sum(j, axis=[0, 1]).numpy(), g.numpy(), atol=1e-5)
    # d y[b, o] / d kernel[i, p] = x[b, i] [o == p] where the unit is active
    active = (x.numpy() @ kernel.numpy() + bias.numpy()) > 0
    expected = np.einsum("bo,bi,op->bopi", active, x.numpy(), np.eye(10)).transpose(0, 1, 3, 2)
    np.testing.assert_allclose(j.numpy(), expected, atol=1e-6)


def numpy_gradient(x, w1, b1, w2, b2):
    """d mean(relu(relu(x w1 + b1) w2 + b2) ** 2) / d w1, in float64: the oracle."""
    z1 = x @ w1 + b1
    z2 = np.maximum(z1, 0) @ w2 + b2
    y = np.maximum(z2, 0)
    dz1 = ((2 * y / y.size * (z2 > 0)) @ w2.T) * (z1 > 0)
    return x.T @ dz1


def test_hessian_is_symmetric_and_matches_finite_differences_of_the_gradient(layers):
    rng = np.random.default_rng(2)
    x = adc.constant(rng.standard_normal((7, 5)).astype(np.float32))
    (w1, b1), (w2, b2) = dense(rng, 5, 8), dense(rng, 8, 6)
    with adc.GradientTape() as t2:
        with adc.GradientTape() as t1:
            y = layers.dense_relu(layers.dense_relu(x, w1, b1), w2, b2)
            loss = adc.reduce_mean(y ** 2)
        g = t1.gradient(loss, w1)
    h = t2.jacobian(g, w1)
    assert g.shape == (5, 8) and h.shape == (5, 8, 5, 8)
    h_mat = h.numpy().reshape(40, 40)
    np.testing.assert_allclose(h_mat, h_mat.T, atol=1e-6)
    args = [np.asarray(a, np.float64) for a in (x, w1, b1, w2, b2)]
    np.testing.assert_allclose(g.numpy(), numpy_gradient(*args), atol=1e-6)
    step, columns = 1e-6, []
    for k in range(40):
        e = step * np.eye(40)[k].reshape(5, 8)
        columns.append((numpy_gradient(args[0], args[1] + e, *args[2:])
                        - numpy_gradient(args[0], args[1] - e, *args[2:])).ravel() / (2 * step))
    assert np.abs(h_mat).max() > 0.05
    np.testing.assert_allclose(h_mat, np.stack(columns, axis=1), atol=1e-5)


def elu_mlp(layers, x, rng, norm=False):
    (w1, b1), (w2, b2) = dense(rng, 5, 8), dense(rng, 8, 6)
    tape = adc.GradientTape(persistent=True, watch_accessed_variables=False)
    with tape:
        tape.watch(x)
        h = layers.dense_elu(x, w1, b1)
        y = layers.dense_elu(batch_norm(h) if norm else h, w2, b2)
    return tape, y


@pytest.mark.parametrize("pfor", ROUTES)
def test_batch_jacobian_is_the_full_jacobian_summed_over_the_source_batch(layers, pfor):
    x = adc.constant(np.random.default_rng(3).standard_normal((7, 5)).astype(np.float32))
    tape, y = elu_mlp(layers, x, np.random.default_rng(4))
    j = tape.jacobian(y, x)
    assert j.shape == (7, 6, 7, 5)
    off_diagonal = j.numpy() * (1 - np.eye(7))[:, None, :, None]
    assert not off_diagonal.any()
    jb = tape.batch_jacobian(y, x, experimental_use_pfor=pfor)
    assert jb.shape == (7, 6, 5)
    np.testing.assert_allclose(jb.numpy(), j.numpy().sum(axis=2), atol=1e-6)
    np.testing.assert_allclose(jb.numpy(), np.einsum("bxby->bxy", j.numpy()), atol=1e-6)


def test_batch_normalization_mixing_examples_is_detected(layers):
    x = adc.constant(np.random.default_rng(3).standard_normal((7, 5)).astype(np.float32))
    tape, y = elu_mlp(layers, x, np.random.default_rng(4), norm=True)
    j = tape.jacobian(y, x).numpy()
    assert (j * (1 - np.eye(7))[:, None, :, None]).any()      # the (batch, batch) slices are not diagonal
    with pytest.raises(ValueError, match="examples mix in eager_reduce_mean.*allow_cross_example=True"):
        tape.batch_jacobian(y, x)
    with pytest.warns(UserWarning, match="examples mix"):
        jb = tape.batch_jacobian(y, x, allow_cross_example=True)
    # what TensorFlow returns: result[i] = sum over k of d y[k] / d x[i]
    np.testing.assert_allclose(jb.numpy(), j.sum(axis=0).transpose(1, 0, 2), atol=1e-5)


def test_a_compiled_kernel_mixing_examples_is_detected_from_its_ir(kernels_module):
    x = adc.constant(np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32))
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = kernels_module.batchnorm(adc.tanh(x))
    with pytest.raises(ValueError, match="examples mix in batchnorm"):
        tape.batch_jacobian(y, x)
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = adc.transpose(adc.tanh(adc.transpose(x)))      # the example axis moves and comes back
    np.testing.assert_allclose(tape.batch_jacobian(y, x).numpy(),
                               np.einsum("bi,ij->bij", 1 - np.tanh(x.numpy()) ** 2, np.eye(3)), atol=1e-6)


@pytest.mark.parametrize("pfor", ROUTES)
def test_reference_batch_jacobian_of_x_squared(pfor):
    with adc.GradientTape() as g:
        x = adc.constant([[1., 2.], [3., 4.]])
        g.watch(x)
        y = x * x
    batch_jacobian = g.batch_jacobian(y, x, experimental_use_pfor=pfor)
    assert batch_jacobian.numpy().tolist() == [[[2, 0], [0, 4]], [[6, 0], [0, 8]]]


@pytest.mark.parametrize("pfor", ROUTES)
def test_reference_higher_order_batch_jacobian_through_nested_tapes(pfor):
    x = adc.constant([[4, 2], [1, 3]], dtype=np.float32)
    with adc.GradientTape() as gfg:
        gfg.watch(x)
        with adc.GradientTape() as gg:
            gg.watch(x)
            y = x * x * x
        first_order = gg.batch_jacobian(y, x, experimental_use_pfor=pfor)
    second_order = gfg.batch_jacobian(first_order, x, experimental_use_pfor=pfor)
    assert first_order.numpy().tolist() == [[[48, 0], [0, 12]], [[3, 0], [0, 27]]]
    assert second_order.numpy().tolist() == [[[[24, 0], [0, 0]], [[0, 0], [0, 12]]],
                                             [[[6, 0], [0, 0]], [[0, 0], [0, 18]]]]


@pytest.mark.parametrize("pfor", ROUTES)
def test_unconnected_sources_give_none_or_zeros(pfor):
    x, z = adc.constant([[1.0, 2.0]]), adc.constant([[3.0, 4.0, 5.0]])
    with adc.GradientTape(persistent=True) as tape:
        tape.watch([x, z])
        y = adc.sin(x)
    found = tape.jacobian(y, {"x": x, "z": z}, experimental_use_pfor=pfor)
    assert found["z"] is None and found["x"].shape == (1, 2, 1, 2)
    zeros = tape.jacobian(y, [z], unconnected_gradients=adc.UnconnectedGradients.ZERO,
                          experimental_use_pfor=pfor)
    assert zeros[0].shape == (1, 2, 1, 3) and not zeros[0].numpy().any()
    assert tape.batch_jacobian(y, z, experimental_use_pfor=pfor) is None
    zeros = tape.batch_jacobian(y, z, unconnected_gradients="zero", experimental_use_pfor=pfor)
    assert zeros.shape == (1, 2, 3) and not zeros.numpy().any()


def test_routes_and_chunks_agree_on_nested_sources():
    rng = np.random.default_rng(6)
    a = adc.Variable(rng.standard_normal((3, 4)).astype(np.float32))
    b = adc.Variable(rng.standard_normal(4).astype(np.float32))
    with adc.GradientTape(persistent=True) as tape:
        y = adc.tanh(a * adc.sin(b) + a) * adc.reduce_sum(b)
    reference = tape.jacobian(y, {"a": a, "pair": (b, a)}, experimental_use_pfor=False)
    for chunk in (None, 1, 5):
        found = tape.jacobian(y, {"a": a, "pair": (b, a)}, parallel_iterations=chunk)
        assert found["pair"][0].shape == (3, 4, 4)
        for got, want in [(found["a"], reference["a"]), *zip(found["pair"], reference["pair"])]:
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)


def test_non_persistent_tape_computes_one_jacobian():
    x = adc.constant([[1.0, 2.0]])
    for method in ("jacobian", "batch_jacobian"):
        with adc.GradientTape() as tape:
            tape.watch(x)
            y = x * 3.0
        getattr(tape, method)(y, x)
        with pytest.raises(RuntimeError, match="only be used to compute one set"):
            getattr(tape, method)(y, x)


def test_batch_jacobian_errors():
    x, v = adc.constant([[1.0, 2.0], [3.0, 4.0]]), adc.constant([1.0, 2.0])
    with adc.GradientTape(persistent=True) as tape:
        tape.watch([x, v])
        y, w = x * 2.0, v * 2.0
    with pytest.raises(ValueError, match="rank >= 2"):
        tape.batch_jacobian(w, x)
    with pytest.raises(ValueError, match="rank >= 2"):
        tape.batch_jacobian(y, v)
    with pytest.raises(ValueError, match="first dimension"):
        tape.batch_jacobian(adc.reshape(y, (1, 4)), x)
    with pytest.raises(TypeError, match="one adc.Tensor"):
        tape.jacobian([y], x)
    with pytest.raises(TypeError, match="sources must be"):
        tape.jacobian(y, [x, 3.0])
    with pytest.raises(ValueError, match="parallel_iterations"):
        tape.jacobian(y, x, parallel_iterations=0)


def test_a_variable_target():
    x = adc.Variable([[1.0, 2.0]])
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
    assert tape.jacobian(x, x).numpy().tolist() == [[[[1, 0]], [[0, 1]]]]


def test_a_custom_gradient_call_takes_the_per_seed_route():
    @adc.custom_gradient
    def clip_gradients(y):
        def backward(dy):
            return adc.clip_by_value(dy, -0.5, 0.5)
        return y, backward

    x = adc.constant([[1.0, 2.0], [3.0, 4.0]])
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = clip_gradients(adc.sin(x)) * 2.0
    j = tape.jacobian(y, x)
    expected = np.diag(0.5 * np.cos(x.numpy()).ravel()).reshape(2, 2, 2, 2)   # each seed's 2 is clipped
    np.testing.assert_allclose(j.numpy(), expected, atol=1e-6)
    np.testing.assert_allclose(tape.batch_jacobian(y, x).numpy(), np.einsum("bxby->bxy", expected), atol=1e-6)


MOVING = """
def normalize_then_transpose(x: f64[B, D]) -> f64[D, B]:
    return transpose(x - mean(x, axis=0))

def tanh_then_transpose(x: f64[B, D]) -> f64[D, B]:
    return transpose(tanh(x))

def back(y: f64[D, B]) -> f64[B, D]:
    return transpose(y)

@custom_gradient
def straight_through(x: f64[B, D]) -> f64[B, D]:
    def backward(dy: f64[B, D]) -> f64[B, D]:
        return dy
    return round(x), backward
"""


@pytest.fixture(scope="module")
def moving():
    return adc.compile(MOVING, "moving.adc")


def recorded(fn, x):
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = fn(x)
    return tape, y


def test_examples_mixing_behind_a_moved_axis_are_detected(moving):
    x = adc.constant(np.random.default_rng(7).standard_normal((3, 4)))
    tape, y = recorded(lambda v: moving.back(moving.normalize_then_transpose(v)), x)
    assert (tape.jacobian(y, x).numpy() * (1 - np.eye(3))[:, None, :, None]).any()    # it does mix
    with pytest.raises(ValueError, match="examples mix in normalize_then_transpose"):
        tape.batch_jacobian(y, x)
    tape, y = recorded(lambda v: moving.back(moving.tanh_then_transpose(v)), x)     # moves, no mixing
    np.testing.assert_allclose(tape.batch_jacobian(y, x).numpy(),
                               np.einsum("bi,ij->bij", 1 - np.tanh(x.numpy()) ** 2, np.eye(4)), rtol=1e-14)


@pytest.mark.parametrize("through", ["eager", "kernel"])
def test_examples_must_end_on_the_targets_first_axis(moving, through):
    x = adc.constant(np.random.default_rng(8).standard_normal((3, 3)))
    fn = adc.transpose if through == "eager" else (lambda v: moving.back(v * 1.0))
    tape, y = recorded(fn, x)
    with pytest.raises(ValueError, match=r"examples mix in the target \(the examples end on its axis 1\)"):
        tape.batch_jacobian(y, x)


def test_a_compiled_custom_gradient_is_checked_by_its_forward(moving):
    x = adc.constant(np.random.default_rng(9).standard_normal((3, 2)))
    tape, y = recorded(lambda v: moving.straight_through(v) * v, x)
    expected = np.einsum("bi,ij->bij", np.round(x.numpy()) + x.numpy(), np.eye(2))
    np.testing.assert_allclose(tape.batch_jacobian(y, x).numpy(), expected, rtol=1e-14)


def test_an_empty_batch_gives_empty_jacobians_and_unconnected_stays_none():
    x, u = adc.constant(np.zeros((0, 2))), adc.constant([1.0])
    tape, y = recorded(adc.sin, x)
    assert tape.batch_jacobian(y, x).shape == (0, 2, 2)
    assert tape.jacobian(y, x).shape == (0, 2, 0, 2)
    assert tape.jacobian(y, u) is None
    assert tape.jacobian(y, u, unconnected_gradients="zero").shape == (0, 2, 1)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(unconnected_gradients="bogus"), ValueError, "unconnected_gradients must be 'none', 'zero'"),
    (dict(experimental_use_pfor="no"), TypeError, "experimental_use_pfor must be True or False, got 'no'"),
    (dict(allow_cross_example="maybe"), TypeError, "allow_cross_example must be True or False"),
    (dict(parallel_iterations=True), ValueError, "parallel_iterations must be a positive int or None, got True"),
    (dict(parallel_iterations=1.5), ValueError, "parallel_iterations must be a positive int"),
])
def test_argument_errors_name_the_parameter(kwargs, error, message):
    x = adc.constant([[1.0, 2.0]])
    tape, y = recorded(adc.sin, x)
    with pytest.raises(error, match=message):
        tape.batch_jacobian(y, x, **kwargs)
    if "allow_cross_example" not in kwargs:
        with pytest.raises(error, match=message):
            tape.jacobian(y, x, **kwargs)
    assert tape.batch_jacobian(y, x, parallel_iterations=np.int64(1)).shape == (1, 2, 2)
    with pytest.raises(ValueError, match="GradientTape.gradient: unconnected_gradients must be"):
        tape.gradient(y, x, unconnected_gradients="bogus")


def test_all_seeds_go_through_one_walk_and_parallel_iterations_bounds_them(monkeypatch):
    """The vectorized route: one walk per block of seeds, each recorded call's batched VJP taking
    the whole block; parallel_iterations bounds the block; the per-seed route walks once per seed."""
    from adc.runtime import jacobians

    blocks = []
    real_walk, real_walk_one = jacobians._walk, jacobians._walk_one
    monkeypatch.setattr(jacobians, "_walk", lambda nodes, t, seeds, s: blocks.append(seeds.shape[0])
                        or real_walk(nodes, t, seeds, s))
    monkeypatch.setattr(jacobians, "_walk_one", lambda nodes, t, seeds, s: blocks.append(("one", seeds.shape[0]))
                        or real_walk_one(nodes, t, seeds, s))
    x = adc.constant(np.random.default_rng(10).standard_normal((4, 3)))
    tape, y = recorded(lambda v: adc.tanh(adc.sin(v) * v), x)
    full = tape.jacobian(y, x).numpy()
    assert blocks == [12]
    blocks.clear()
    np.testing.assert_array_equal(tape.jacobian(y, x, parallel_iterations=5).numpy(), full)
    assert blocks == [5, 5, 2]
    blocks.clear()
    assert tape.batch_jacobian(y, x).shape == (4, 3, 3) and blocks == [3]     # per-example seeds
    blocks.clear()
    np.testing.assert_allclose(tape.jacobian(y, x, experimental_use_pfor=False).numpy(), full, rtol=1e-14)
    assert blocks == [("one", 1)] * 12


def test_a_target_the_tape_did_not_record_warns_at_the_callers_line():
    x = adc.constant([[1.0, 2.0]])
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * 3.0
    z = y * 2.0     # after the block: not recorded
    for method in ("jacobian", "batch_jacobian", "gradient"):
        with pytest.warns(UserWarning, match=f"GradientTape.{method}: the target was not recorded") as caught:
            assert getattr(tape, method)(z, x) is None
        assert caught[0].filename == __file__


MLP = ("def mlp(x: f64[B, I], w1: f64[I, H], w2: f64[H, O]) -> f64[B, O]:\n"
       "    return elu(tanh(x @ w1) @ w2)\n")


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_batch_jacobian_through_one_kernel_call_is_its_compiled_batch_jacobian(mode, monkeypatch):
    """One recorded call from source to target: adc.batch_jacobian of that kernel, one fused call with
    folded seeds, not a walk; the same values as the seed-at-a-time walk, and recorded by an outer tape
    (its gradient as the walk's route gives it)."""
    from adc.runtime import functional

    m = adc.compile(MLP, "mlp.adc")
    rng = np.random.default_rng(12)
    x, w2 = adc.constant(rng.standard_normal((5, 3))), rng.standard_normal((4, 2))
    w1 = adc.Variable(rng.standard_normal((3, 4)))
    compiled = []
    real = functional.batch_jacobian
    monkeypatch.setattr(functional, "batch_jacobian", lambda *a: compiled.append(a[1:]) or real(*a))

    def outer_gradient(**route):
        with adc.GradientTape() as outer:
            with adc.GradientTape(persistent=True) as tape:
                tape.watch(x)
                y = m.mlp(x, w1, w2)
            j = tape.batch_jacobian(y, x, mode=mode, **route)
            loss = adc.reduce_sum(j * j)
        return j.numpy(), outer.gradient(loss, w1).numpy()

    j, dw1 = outer_gradient()
    assert compiled == [(0, mode)]
    walked, dw1_walked = outer_gradient(parallel_iterations=1)
    assert compiled == [(0, mode)]          # the walk, one seed per block
    np.testing.assert_allclose(j, walked, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dw1, dw1_walked, rtol=1e-10, atol=1e-12)
    assert j.shape == (5, 2, 3)


def test_a_call_taking_the_source_twice_is_walked(monkeypatch):
    from adc.runtime import functional

    m = adc.compile("def f(a: f64[B, I], b: f64[B, I]) -> f64[B, I]:\n    return a * b + sin(a)\n", "twice.adc")
    monkeypatch.setattr(functional, "batch_jacobian", lambda *a: pytest.fail("compiled route taken"))
    x = adc.constant(np.random.default_rng(13).standard_normal((3, 2)))
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = m.f(x, x)
    np.testing.assert_allclose(tape.batch_jacobian(y, x).numpy(),
                               np.einsum("bi,ij->bij", 2 * x.numpy() + np.cos(x.numpy()), np.eye(2)), rtol=1e-12)


@pytest.mark.parametrize("route", [{}, {"experimental_use_pfor": False}, {"mode": "forward"}, {"mode": "reverse"},
                                   {"parallel_iterations": 1}, {"mode": "forward", "parallel_iterations": 1}])
def test_a_source_a_call_takes_but_its_result_ignores_is_unconnected_on_every_route(route):
    """Forward mode agrees with reverse mode: no tangent reaches the result (the JVP's results are
    all symbolic zeros), so None, or zeros when asked; the one-call compiled route steps aside."""
    m = adc.compile("def f(x: f64[B, I], y: f64[B, O]) -> f64[B, O]:\n    return y * 2.0\n", "ignored.adc")
    x, y = adc.constant(np.ones((2, 3))), adc.constant(np.ones((2, 4)))
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        z = m.f(x, y)
    assert tape.jacobian(z, x, **route) is None and tape.batch_jacobian(z, x, **route) is None
    zeros = tape.batch_jacobian(z, x, unconnected_gradients="zero", **route)
    np.testing.assert_array_equal(zeros.numpy(), np.zeros((2, 4, 3)))
    with adc.ForwardAccumulator(x, adc.constant(np.ones((2, 3)))) as acc:
        z = m.f(x, y)
    assert acc.jvp(z) is None
