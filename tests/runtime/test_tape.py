"""adc.GradientTape: the guide's sections with its numbers, the tape's options, and its errors."""
import contextlib
import threading

import numpy as np
import pytest

import adc
from tests.support.repository import SAMPLES


def test_stop_recording():
    x, y = adc.Variable(2.0), adc.Variable(3.0)
    with adc.GradientTape() as t:
        x_sq = x * x
        with t.stop_recording():
            y_sq = y * y
        z = x_sq + y_sq
    grad = t.gradient(z, {'x': x, 'y': y})
    assert float(grad['x']) == 4.0 and grad['y'] is None


def test_reset():
    x, y = adc.Variable(2.0), adc.Variable(3.0)
    with adc.GradientTape() as t:
        y_sq = y * y
        t.reset()
        z = x * x + y_sq
    grad = t.gradient(z, {'x': x, 'y': y})
    assert float(grad['x']) == 4.0 and grad['y'] is None


def test_stop_gradient():
    x, y = adc.Variable(2.0), adc.Variable(3.0)
    with adc.GradientTape() as t:
        y_sq = y ** 2
        z = x ** 2 + adc.stop_gradient(y_sq)
    grad = t.gradient(z, {'x': x, 'y': y})
    assert float(grad['x']) == 4.0 and grad['y'] is None


def test_multiple_tapes():
    x0, x1 = adc.constant(0.0), adc.constant(0.0)
    with adc.GradientTape() as tape0, adc.GradientTape() as tape1:
        tape0.watch(x0)
        tape1.watch(x1)
        ys = adc.reduce_sum(adc.math.sin(x0) + adc.nn.sigmoid(x1))
    assert float(tape0.gradient(ys, x0)) == 1.0
    assert float(tape1.gradient(ys, x1)) == 0.25


def test_nested_tapes_give_second_and_third_derivatives():
    x = adc.Variable(1.0)
    with adc.GradientTape() as t3:
        with adc.GradientTape() as t2:
            with adc.GradientTape() as t1:
                y = x * x * x
            dy_dx = t1.gradient(y, x)
        d2y_dx2 = t2.gradient(dy_dx, x)
    d3y_dx3 = t3.gradient(d2y_dx2, x)
    assert (float(dy_dx), float(d2y_dx2), float(d3y_dx3)) == (3.0, 6.0, 6.0)


def test_gradient_through_a_user_kernel_matches_finite_differences():
    m = adc.compile_file(SAMPLES / "layers.adc")
    src = (SAMPLES / "layers.adc").read_text().replace("f32", "f64")
    m64 = adc.compile(src, "layers64.adc")
    rng = np.random.default_rng(0)
    x, w0, b0 = rng.standard_normal((4, 3)), rng.standard_normal((3, 2)), rng.standard_normal(2)
    w, b = adc.Variable(w0), adc.Variable(b0)
    with adc.GradientTape() as t:
        loss = adc.reduce_sum(m64.dense_softplus(x, w, b) ** 2)
    gw, gb = t.gradient(loss, [w, b])

    def f(w_, b_):
        return np.sum(np.logaddexp(x @ w_ + b_, 0) ** 2)

    for got, p, i in ((gw, w0, 0), (gb, b0, 1)):
        want = np.zeros_like(p)
        for j in np.ndindex(p.shape):
            e = np.zeros_like(p)
            e[j] = 1e-6
            args = [(w0 + e, b0), (w0 - e, b0)] if i == 0 else [(w0, b0 + e), (w0, b0 - e)]
            want[j] = (f(*args[0]) - f(*args[1])) / 2e-6
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-8)
    # float32, as the guide: the shapes of the gradients are the variables'
    w32, b32 = adc.Variable(w0.astype(np.float32)), adc.Variable(b0.astype(np.float32))
    with adc.GradientTape() as t:
        loss = adc.reduce_mean(m.dense_relu(x.astype(np.float32), w32, b32))
    assert [g.shape for g in t.gradient(loss, (w32, b32))] == [(3, 2), (2,)]


def test_sources_keep_their_structure_and_unconnected_gradients():
    a, b, c = adc.Variable(1.0), adc.Variable(2.0), adc.Variable([1.0, 2.0])
    with adc.GradientTape(persistent=True) as t:
        z = a * b
    got = t.gradient(z, {"p": [a, (b, c)], "q": a})
    assert float(got["p"][0]) == 2.0 and float(got["p"][1][0]) == 1.0 and got["p"][1][1] is None
    assert isinstance(got["p"][1], tuple) and float(got["q"]) == 2.0
    zero = t.gradient(z, [c], unconnected_gradients=adc.UnconnectedGradients.ZERO)
    np.testing.assert_array_equal(zero[0].numpy(), [0.0, 0.0])
    assert zero[0].dtype == np.float32


def test_non_scalar_target_is_summed_and_output_gradients_weight_it():
    x = adc.constant([1.0, 2.0, 3.0])
    with adc.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
    np.testing.assert_allclose(t.gradient(y, x).numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_allclose(t.gradient(y, x, output_gradients=[1.0, 0.0, -1.0]).numpy(), [2.0, 0.0, -6.0])
    np.testing.assert_allclose(t.gradient([y, x], x).numpy(), [3.0, 5.0, 7.0])   # a list of targets is summed


def test_persistent_tape_can_be_used_twice():
    x = adc.constant(3.0)
    with adc.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
        z = y * y
    assert float(t.gradient(z, x)) == 108.0
    assert float(t.gradient(y, x)) == 6.0


def test_watch_accessed_variables_false_and_watched_variables():
    a, b = adc.Variable(2.0), adc.Variable(5.0, trainable=False)
    with adc.GradientTape(watch_accessed_variables=False) as t:
        y = a * a
    with pytest.warns(UserWarning, match="the target was not recorded by this tape"):
        assert t.gradient(y, a) is None and t.watched_variables() == ()
    with adc.GradientTape() as t:
        y = a * b
    assert t.watched_variables()[0] is a and len(t.watched_variables()) == 1
    assert float(t.gradient(y, a)) == 5.0
    with adc.GradientTape(watch_accessed_variables=False) as t:
        t.watch(b)
        y = a * b
    assert float(t.gradient(y, b)) == 2.0 and t.watched_variables()[0] is b


def test_tapes_are_thread_local():
    x = adc.Variable(2.0)
    started, done = threading.Event(), threading.Event()
    other = {}

    def worker():
        with adc.GradientTape() as t:
            started.set()
            done.wait(10)
        other["tape"] = t

    thread = threading.Thread(target=worker)
    thread.start()
    started.wait(10)
    with adc.GradientTape() as mine:
        y = x * x            # recorded by this thread's tape only
    done.set()
    thread.join()
    assert other["tape"].watched_variables() == () and other["tape"]._nodes == []
    assert float(mine.gradient(y, x)) == 4.0


def test_gradient_inside_a_non_persistent_tape_stops_recording():
    x = adc.Variable(3.0)
    with adc.GradientTape() as t:
        y = x * x
        assert float(t.gradient(y, x)) == 6.0
        x * x       # not recorded anymore, and no error
    with pytest.raises(RuntimeError):
        t.gradient(y, x)


def test_variable_assignments_between_calls():
    x = adc.Variable(2.0)
    with adc.GradientTape() as t:
        y = x * x
        x.assign(10.0)      # the recorded value stays 2.0
    assert float(t.gradient(y, x)) == 4.0


@pytest.mark.parametrize("nested", [False, True])
def test_a_numpy_argument_changed_after_the_call_keeps_its_recorded_value(nested):
    """A tape keeps a copy of an argument that is neither a Tensor nor a Variable (its owner may
    change it afterwards). One tape runs the split VJP's backward, nested tapes the kernel's VJP."""
    m = adc.compile("def dot(w: f64[N], x: f64[N]) -> f64:\n    return sum(w * x)\n", "dot.adc")
    w, x = adc.Variable(np.array([1.0, 2.0])), np.array([3.0, 4.0])
    with adc.GradientTape() if nested else contextlib.nullcontext():
        with adc.GradientTape() as t:
            y = m.dot(w, x)
    x[:] = [30.0, 40.0]
    np.testing.assert_array_equal(t.gradient(y, w).numpy(), [3.0, 4.0])


def test_reused_non_persistent_tape_is_a_runtime_error():
    x = adc.Variable(2.0)
    with adc.GradientTape() as t:
        y = x * x
    t.gradient(y, x)
    with pytest.raises(RuntimeError, match="A non-persistent GradientTape can only be used to compute one "
                                           r"set of gradients \(or jacobians\)"):
        t.gradient(y, x)


def test_integer_source_warns_and_gets_none():
    x = adc.constant(3)
    with adc.GradientTape() as t:
        with pytest.warns(UserWarning, match="watched tensor must be floating.*got int32"):
            t.watch(x)
        y = x * x
    with pytest.warns(UserWarning, match="source tensor must be floating.*got int32"):
        assert t.gradient(y, x) is None


def test_target_that_is_not_a_tensor_is_a_type_error():
    x = adc.Variable(2.0)
    with adc.GradientTape(persistent=True) as t:
        x * x
    with pytest.raises(TypeError, match="the target must be adc.Tensor or adc.Variable.*got str"):
        t.gradient("abc", x)
    with pytest.raises(TypeError, match="got str"):
        t.gradient(["a", "b"], x)
    with pytest.raises(ValueError, match="not adc.Tensor or adc.Variable"):
        t.watch(1.5)


def test_stop_recording_needs_a_recording_tape():
    t = adc.GradientTape()
    with pytest.raises(RuntimeError, match="not recording"):
        with t.stop_recording():
            pass


SPLIT_SOURCE = """
def layer(x: f64[B, I], w: f64[I, O], b: f64[O]) -> f64:
    return sum(tanh(x @ w + b) ** 2)
"""


def _layer_gradient_reference(x, w, b):
    t = np.tanh(x @ w + b)
    g = 2 * t * (1 - t * t)
    return x.T @ g, g.sum(axis=0)


def test_a_single_tape_runs_the_backward_half_of_a_split_vjp_not_the_vjp(monkeypatch):
    """Recorded by one tape, a JIT kernel's call runs the forward half of its split VJP and the
    gradient the backward half, with the residuals: the kernel's VJP (which replays the forward)
    is never asked for. Persistent tapes reuse the residuals."""
    m = adc.compile(SPLIT_SOURCE)
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2)), rng.standard_normal(2)
    monkeypatch.setattr(type(m.layer), "derivative", lambda *a: pytest.fail("the VJP was asked for"))
    w_, b_ = adc.Variable(w), adc.Variable(b)
    with adc.GradientTape(persistent=True) as tape:
        y = m.layer(x, w_, b_)
    np.testing.assert_allclose(y.numpy(), (np.tanh(x @ w + b) ** 2).sum())
    want = _layer_gradient_reference(x, w, b)
    for _ in range(2):
        for got, expected in zip(tape.gradient(y, [w_, b_]), want):
            np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


def test_a_call_whose_vjp_passes_cotangents_through_keeps_that_on_its_node(monkeypatch):
    """An add's VJP calls nothing: the tape keeps that with the call, as it keeps a split backward,
    so gradient() asks no kernel for a derivative (it did for every such call, at every gradient)."""
    m = adc.compile("def plus(x: f64, y: f64) -> f64:\n    return x + y\n")
    x, y = adc.Variable(np.float64(2.0)), adc.Variable(np.float64(3.0))
    monkeypatch.setattr(type(m.plus), "derivative", lambda *a: pytest.fail("the VJP was asked for"))
    for _ in range(2):
        with adc.GradientTape() as tape:
            z = m.plus(m.plus(x, y), x)
        assert [float(g) for g in tape.gradient(z, [x, y])] == [2.0, 1.0]


def test_gradient_seeds_shared_between_gradients_stay_ones():
    """Small seeds (ones) are made once per shape and dtype: a gradient that is the seed itself
    (d z / d z, or through an add) is read-only, so no caller can change the next one."""
    x = adc.Variable([1.0, 2.0])
    first = []
    for _ in range(2):
        with adc.GradientTape() as tape:
            z = x + x
        g = tape.gradient(z, x)
        np.testing.assert_array_equal(g.numpy(), [2.0, 2.0])
        with adc.GradientTape() as tape:
            tape.watch(x)
            z = x + 0.0
        seed = tape.gradient(z, z)
        first.append(seed)
        with pytest.raises(ValueError):
            seed.numpy()[0] = 5.0
        np.testing.assert_array_equal(seed.numpy(), [1.0, 1.0])
    assert first[0] is first[1]


def test_nested_tapes_differentiate_the_gradient_computation_through_the_kernels_vjp():
    """Under an outer tape the inner gradient is itself recorded, so it runs the kernel's VJP, whose
    own VJP gives the second derivative (d/db of sum(dy/db) for y = sum(tanh(x w + b)^2))."""
    m = adc.compile(SPLIT_SOURCE)
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2)), adc.Variable(rng.standard_normal(2))
    with adc.GradientTape() as outer:
        with adc.GradientTape() as inner:
            y = m.layer(x, w, b)
        g = inner.gradient(y, b)
        s = adc.reduce_sum(g)
    t = np.tanh(x @ w + b.numpy())
    d = 1 - t * t
    np.testing.assert_allclose(outer.gradient(s, b).numpy(), (2 * d * d - 4 * t * t * d).sum(axis=0), rtol=1e-10)


BRANCH_OF_A_CHECK = """\
def f(t0: f64[N], y: i32[N], w: f64) -> f64:
    if w >= t0[0]:
        t13 = sum(t0)
    else:
        t13 = f64(y[-1])
    return w * t13
"""


@pytest.mark.parametrize("w", [5.0, -5.0], ids=["sum-branch", "index-branch"])
def test_a_branch_whose_backward_only_checks_sizes(w, monkeypatch):
    """The split VJP w.r.t. t0 calls the else-branch's VJP for its size check alone (y[-1] needs
    N >= 1): a call with no results, whose IR text the compile worker must read back (found by
    the fuzzer, seed 163)."""
    monkeypatch.setenv("ADC_IN_PROCESS_COMPILES", "0")     # every compile through the IR's text
    monkeypatch.setenv("ADC_CACHE", "0")
    m = adc.compile(BRANCH_OF_A_CHECK, "branch_check.adc")
    t0, y = adc.Variable(np.array([1.0, 2.0, 3.0])), np.array([4, 5, 6], np.int32)
    with adc.GradientTape() as tape:
        value = m.f(t0, y, np.float64(w))
    expected = np.full(3, w) if w >= 1.0 else np.zeros(3)
    np.testing.assert_allclose(value.numpy(), w * 6.0)     # sum(t0) and y[-1] are both 6
    np.testing.assert_allclose(tape.gradient(value, t0).numpy(), expected)
