"""adc.jax: the samples' kernels as JAX functions — check_grads of order 2 in forward and reverse
mode (float64, finite differences), eagerly and under jit, on both routes (XLA's FFI and
pure_callback); vmap through the batching pass's kernel; grad under jit and vmap; the FFI handler
built once into the compile cache; and the errors that name a parameter."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from jax.test_util import check_grads  # noqa: E402

import adc  # noqa: E402
import adc.jax  # noqa: E402
from tests.support.sample_arguments import arguments, sample_kernels  # noqa: E402

F64 = sample_kernels("f64")
DIFFERENTIABLE = [name for name, k in F64.items() if k.derivative().wrt]


@pytest.fixture(autouse=True, scope="module")
def x64():
    """The samples' f64 kernels and i64 labels need JAX's 64-bit arrays."""
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", False)


def differentiated(name, route=None):
    """The kernel as a function of its float arguments, the integer ones fixed; those arguments."""
    kernel = F64[name]
    args = arguments(kernel)
    floats = [i for i, a in enumerate(args) if a.dtype.kind == "f"]
    f = adc.jax.function(kernel, route)

    def of_floats(*values):
        full = list(args)
        for i, v in zip(floats, values):
            full[i] = v
        return f(*full)

    return of_floats, [args[i] for i in floats]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_check_grads_order_2_forward_and_reverse(name):
    f, args = differentiated(name)
    check_grads(f, args, order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("route", adc.jax.ROUTES)
@pytest.mark.parametrize("name", ["logsumexp_rows", "classifier_loss"])
def test_check_grads_order_2_under_jit(name, route):
    f, args = differentiated(name, route)
    check_grads(jax.jit(f), args, order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("route", adc.jax.ROUTES)
def test_results_equal_the_kernels_eagerly_and_under_jit(route):
    """To rounding: a jitted call (and an eager one on the FFI route) runs the kernel compiled for
    its shapes, whose sums may be vectorized in another order."""
    kernel = F64["attention"]
    args = arguments(kernel)
    expected = kernel(*args).numpy()
    np.testing.assert_allclose(adc.jax.function(kernel, route)(*args), expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(jax.jit(adc.jax.function(kernel, route))(*args), expected, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("route", adc.jax.ROUTES)
def test_under_jit_each_shape_runs_the_kernel_compiled_for_it(route, monkeypatch):
    made = []
    monkeypatch.setattr(adc.jax, "specialize", lambda k, **sizes: made.append(sizes) or adc.specialize(k, **sizes))
    kernel = F64["logsumexp_rows"]
    f = jax.jit(adc.jax.function(kernel, route))
    for shape in ((3, 4), (5, 2), (3, 4)):
        x = np.random.default_rng(len(made)).standard_normal(shape)
        np.testing.assert_allclose(f(x), kernel(x).numpy(), rtol=1e-14)
    assert made == [{"B": 3, "N": 4}, {"B": 5, "N": 2}]      # the third call: jit's executable for (3, 4)
    if route == "ffi":
        text = f.lower(np.ones((3, 4))).as_text()
        assert 'name = "logsumexp_rows_B3_N4"' in text and "dims = dense<>" in text


def test_the_ffi_route_is_the_default_and_lowers_to_the_handler_with_no_callback():
    kernel = F64["sigmoid_shift"]
    assert adc.jax.function(kernel) is adc.jax.function(kernel, "ffi")
    text = jax.jit(adc.jax.function(kernel)).lower(np.ones(4), 0.5).as_text()
    assert "custom_call @adc_kernel_call" in text and 'name = "sigmoid_shift_N4"' in text and "callback" not in text
    callback = jax.jit(adc.jax.function(kernel, "callback")).lower(np.ones(4), 0.5).as_text()
    assert "adc_kernel_call" not in callback and "callback" in callback


def test_with_jax_persistent_compilation_cache_on_the_ffi_route_lowers_to_a_callback(tmp_path):
    """An executable holding this process's kernel addresses must not be stored for another process."""
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        text = jax.jit(adc.jax.function(F64["sigmoid_shift"], "ffi")).lower(np.ones(7), 0.5).as_text()   # (not lowered before)
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
    assert "adc_kernel_call" not in text and "callback" in text


def test_the_handler_is_compiled_once_into_the_compile_cache(tmp_path, monkeypatch):
    from adc import jax_ffi

    monkeypatch.setenv("ADC_CACHE_DIR", str(tmp_path))
    built = jax_ffi.handler_library()
    assert built.parent == tmp_path / jax_ffi.NAMESPACE
    monkeypatch.setattr(jax_ffi.subprocess, "run", lambda *a, **k: pytest.fail("compiled the handler again"))
    assert jax_ffi.handler_library() == built


def test_an_unknown_route_is_refused():
    with pytest.raises(ValueError, match="route must be one of"):
        adc.jax.function(F64["sigmoid_shift"], "xla")


def test_vmap_runs_the_batched_kernel(monkeypatch):
    made = []
    monkeypatch.setattr(adc.jax, "batched", lambda k, params: made.append(params) or adc.runtime.functional.batched(k, params))
    f = adc.jax.function(F64["logsumexp_rows"])
    xs = np.random.default_rng(1).standard_normal((4, 3, 5))
    np.testing.assert_allclose(jax.vmap(f, in_axes=1)(xs), np.stack([f(xs[:, j]) for j in range(3)]), rtol=1e-14)
    assert made == [(0,)]


@pytest.mark.parametrize("route", adc.jax.ROUTES)
def test_per_example_gradients_by_vmap_of_grad_under_jit(route):
    f = adc.jax.function(F64["sigmoid_shift"], route)
    x = np.random.default_rng(2).standard_normal(6)
    deltas = np.linspace(-1, 1, 5)
    per_example = jax.jit(jax.vmap(jax.grad(lambda d: f(x, d).sum())))(deltas)
    s = 1 / (1 + np.exp(-(x[None] + deltas[:, None])))
    np.testing.assert_allclose(per_example, (s * (1 - s)).sum(1), rtol=1e-13)


def test_grad_of_the_cross_entropy_matches_jax_own():
    kernel = F64["cross_entropy"]
    logits, labels = arguments(kernel)
    f = adc.jax.function(kernel)

    def reference(z):
        return -jax.numpy.mean(jax.nn.log_softmax(z)[np.arange(len(labels)), labels])

    np.testing.assert_allclose(jax.jit(jax.grad(f))(logits, labels), jax.grad(reference)(logits), rtol=1e-13)
    np.testing.assert_allclose(jax.hessian(f)(logits, labels), jax.hessian(reference)(logits), atol=1e-14)


def test_a_jitted_value_and_grad_of_a_loss_calls_one_kernel():
    """The loss's JVP is its value-and-gradient kernel's call: reverse mode transposes only JAX's
    own products with the gradient, so no VJP kernel runs after it."""
    kernel = F64["cross_entropy"]
    text = jax.jit(jax.value_and_grad(adc.jax.function(kernel))).lower(*arguments(kernel)).as_text()
    assert text.count("custom_call @adc_kernel_call") == 1 and 'name = "cross_entropy_value_and_grad_B' in text


@pytest.mark.parametrize("value, error, message", [
    (np.zeros((3, 4), np.float32), TypeError, "parameter 'x' expects dtype f64"),
    (np.zeros(3), ValueError, "parameter 'x' expects rank 2"),
    ([1.0], TypeError, "parameter 'x' expects an array of type f64"),
])
def test_a_wrong_argument_is_named(value, error, message):
    with pytest.raises(error, match=message):
        adc.jax.function(F64["logsumexp_rows"])(value)


def test_without_x64_a_64_bit_parameter_says_how_to_enable_it():
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(TypeError, match="got int64, which JAX holds as int32 unless jax.config.update"):
            adc.jax.function(sample_kernels("f32")["cross_entropy"])(np.zeros((2, 3), np.float32), np.zeros(2, np.int64))
    finally:
        jax.config.update("jax_enable_x64", True)
