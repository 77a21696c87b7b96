"""The sample kernels called from Python: results against NumPy, and argument checking."""
import inspect

import numpy as np
import pytest

import adc
from adc.driver.loading import load_count
from tests.support import references
from tests.support.repository import SAMPLES

KERNELS = ("dense_relu", "mlp_loss", "sigmoid_shift", "batchnorm", "logsumexp_rows")


def as64(args):
    return [np.asarray(a, np.float64) for a in args]


@pytest.mark.parametrize("name", KERNELS)
def test_sample_kernel_matches_numpy(kernels_module, name):
    rng = np.random.default_rng(1)
    for sizes in ({}, {"b": 1, "n": 1}, {"b": 33, "i": 17, "h": 64, "o": 5, "n": 100}):
        args = references.sample_inputs(rng, **sizes)[name]
        got = getattr(kernels_module, name)(*args)
        want = getattr(references, name)(*as64(args))
        assert isinstance(got, adc.Tensor)
        assert got.shape == np.shape(want)
        tol = 1e-12 if got.dtype == np.float64 else 2e-5
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


def test_a_kernel_is_compiled_on_its_first_call_once_for_every_batch_size():
    before = load_count()
    m = adc.compile(SAMPLES.joinpath("kernels.adc").read_text() + "\n# a source of its own\n", "once.adc")
    assert load_count() == before
    rng = np.random.default_rng(2)
    for batch in (1, 7, 256, 1000):
        args = references.sample_inputs(rng, b=batch, i=20, h=16, o=4)["mlp_loss"]
        np.testing.assert_allclose(float(m.mlp_loss(*args)), references.mlp_loss(*as64(args)), rtol=1e-4)
    assert load_count() == before + 1


def test_zero_size_dimensions(kernels_module):
    rng = np.random.default_rng(3)
    x, w, b = references.sample_inputs(rng, b=0)["dense_relu"]
    assert kernels_module.dense_relu(x, w, b).shape == (0, 3)
    x, w, b = references.sample_inputs(rng, i=0)["dense_relu"]
    np.testing.assert_array_equal(kernels_module.dense_relu(x, w, b).numpy(), np.maximum(b, 0)[None].repeat(6, 0))
    assert kernels_module.sigmoid_shift(np.zeros(0, np.float32), 1.0).shape == (0,)


def test_non_contiguous_inputs(kernels_module):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((10, 6), np.float32)
    w = np.asfortranarray(rng.standard_normal((3, 4), np.float32))
    b = rng.standard_normal(8, np.float32)[::2]
    got = kernels_module.dense_relu(x[::2, ::2], w, b)
    np.testing.assert_allclose(got.numpy(), references.dense_relu(*as64([x[::2, ::2], w, b])), rtol=1e-5, atol=1e-6)


def test_numpy_arguments_are_read_where_they_are_and_left_writable(kernels_module):
    """A NumPy argument of the parameter's dtype and rank is read in place (a later write to it is
    seen by the next call), and the call leaves the caller's array writable."""
    x, delta = np.linspace(-2, 2, 7, dtype=np.float32), np.float32(0.25)
    first = kernels_module.sigmoid_shift(x, delta).numpy()
    assert x.flags.writeable
    x[3] = 10.0
    again = kernels_module.sigmoid_shift(x, delta).numpy()
    np.testing.assert_allclose(again, references.sigmoid_shift(x.astype(np.float64), 0.25), rtol=1e-6)
    assert again[3] != first[3] and np.array_equal(np.delete(again, 3), np.delete(first, 3))


def test_python_scalars_lists_and_tensors(kernels_module):
    y = kernels_module.sigmoid_shift([0.0, 1.0], 0)
    np.testing.assert_allclose(y.numpy(), references.sigmoid_shift(np.array([0.0, 1.0]), 0.0), rtol=1e-6)
    again = kernels_module.sigmoid_shift(y, delta=-0.5)
    np.testing.assert_allclose(again.numpy(), references.sigmoid_shift(y.numpy().astype(np.float64), -0.5), rtol=1e-6)


def test_a_python_float_for_an_f64_scalar_takes_the_lean_path_with_the_same_result(monkeypatch):
    m = adc.compile("def scaled(x: f64[n], a: f64) -> f64[n]:\n    return a * x\n")
    x = np.arange(3.0)
    expected = m.scaled(x, np.float64(0.7)).numpy()
    monkeypatch.setattr(type(m.scaled), "_checked_inputs", None)     # the checked path would fail
    np.testing.assert_array_equal(m.scaled(x, 0.7).numpy(), expected)


@pytest.mark.parametrize("call, error, words", [
    (lambda m: m.sigmoid_shift(np.zeros(3), 0.0), TypeError, ["sigmoid_shift", "'x'", "f32", "float64"]),
    (lambda m: m.sigmoid_shift(np.zeros((3, 1), np.float32), 0.0), ValueError, ["'x'", "rank 1", "(3, 1)"]),
    (lambda m: m.sigmoid_shift(np.zeros(3, np.float32), np.zeros(2, np.float32)), ValueError, ["'delta'", "rank 0"]),
    (lambda m: m.sigmoid_shift(np.zeros(3, np.float32)), TypeError, ["sigmoid_shift", "delta"]),
    (lambda m: m.sigmoid_shift(np.zeros(3, np.float32), 0.0, 1.0), TypeError, ["sigmoid_shift"]),
    (lambda m: m.sigmoid_shift(np.zeros(3, np.float32), 0.0, gamma=1.0), TypeError, ["gamma"]),
    (lambda m: m.sigmoid_shift("abc", 0.0), TypeError, ["'x'", "str"]),
    (lambda m: m.dense_relu(np.zeros((2, 4), np.float32), np.zeros((5, 3), np.float32), np.zeros(3, np.float32)),
     ValueError, ["'w'", "dimension 0", "(I)", "5", "I = 4", "'x'"]),
    (lambda m: m.dense_relu(np.zeros((2, 4), np.float32), np.zeros((4, 3), np.float32), np.zeros(2, np.float32)),
     ValueError, ["'b'", "(O)", "O = 3"]),
    (lambda m: m.logsumexp_rows(np.zeros((2, 3), np.float32)), TypeError, ["'x'", "f64"]),
])
def test_bad_arguments_name_the_parameter(kernels_module, call, error, words):
    with pytest.raises(error) as info:
        call(kernels_module)
    for word in words:
        assert word in str(info.value)


def test_module_lists_kernels_with_signatures(kernels_module):
    assert kernels_module.kernels == KERNELS
    assert repr(kernels_module.dense_relu) == "<adc kernel dense_relu(x: f32[B,I], w: f32[I,O], b: f32[O]) -> f32[B,O]>"
    assert list(inspect.signature(kernels_module.mlp_loss).parameters) == ["x", "w1", "b1", "w2", "b2"]
    assert "sigmoid_shift(x: f32[N], delta: f32) -> f32[N]" in repr(kernels_module)
    with pytest.raises(AttributeError, match="no kernel 'nope'"):
        kernels_module.nope


# Kernels named like attributes of adc.Module: `info`, `ir` and `origin` are its data, `kernels`
# a property, `__class__` Python's; `scale` collides with nothing.
SHADOWED = """\
def info(x: f64[N]) -> f64[N]:
    return x * 2.0

def ir(x: f64[N]) -> f64[N]:
    return x + 1.0

def origin(x: f64[N]) -> f64:
    return sum(x)

def kernels(x: f64[N]) -> f64[N]:
    return x * x

def __class__(x: f64[N]) -> f64[N]:
    return -x

def scale(x: f64[N]) -> f64[N]:
    return x * 3.0
"""


def open_shadowing(how, tmp_path):
    if how == "jit":
        return adc.compile(SHADOWED, "shadowed.adc")
    from adc import compiler, driver

    driver.write_shared_object(compiler.elaborate(SHADOWED, "shadowed.adc"), tmp_path / "shadowed.so")
    return adc.load(tmp_path / "shadowed.so")


@pytest.mark.parametrize("opener", ["adc.compile", "adc.compile_file", "adc.load"])
def test_a_module_of_no_kernels_is_a_warning(opener, tmp_path):
    path = tmp_path / "empty.adc"
    path.write_text("# nothing yet\n")
    with pytest.warns(UserWarning) as caught:
        if opener == "adc.compile":
            m = adc.compile("# nothing yet\n", str(path))
        elif opener == "adc.compile_file":
            m = adc.compile_file(path)
        else:
            from adc import compiler, driver

            driver.write_shared_object(compiler.elaborate("", str(path)), tmp_path / "empty.so")
            m = adc.load(tmp_path / "empty.so")
    assert [str(w.message) for w in caught] == [f"{opener}: '{m.origin}' defines no kernels"]
    assert {w.filename for w in caught} == {__file__} and m.kernels == ()


@pytest.mark.parametrize("how, opener", [("jit", "adc.compile"), ("so", "adc.load")])
def test_kernel_named_like_a_module_attribute_is_an_item_and_a_warning(how, opener, tmp_path):
    with pytest.warns(UserWarning) as caught:
        m = open_shadowing(how, tmp_path)
    assert [str(w.message) for w in caught] == [
        f"{opener}: kernel '{name}' of '{m.origin}' has the name of an attribute of adc.Module, so m.{name} "
        f"is that attribute: call the kernel as m['{name}']" for name in ("info", "ir", "origin", "kernels",
                                                                         "__class__")]
    assert {w.filename for w in caught} == {__file__}
    x = np.array([1.0, -2.0, 0.5])
    for name, want in [("info", 2 * x), ("ir", x + 1), ("origin", x.sum()), ("kernels", x * x),
                       ("__class__", -x), ("scale", 3 * x)]:
        np.testing.assert_array_equal(m[name](x).numpy(), want)
        assert name in m
    assert m.scale is m["scale"] and m.kernels == ("info", "ir", "origin", "kernels", "__class__", "scale")
    assert m.info.name == "shadowed.adc" and m.origin in (m.info.name, str(tmp_path / "shadowed.so"))
    assert "nope" not in m
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        m["nope"]
    with pytest.raises(TypeError, match="looked up by name"):
        m[0]


def test_tensor_is_numpy_backed_and_immutable(kernels_module):
    t = kernels_module.sigmoid_shift(np.zeros(4, np.float32), 0.0)
    assert t.shape == (4,) and t.dtype == np.float32 and t.ndim == 1 and len(t) == 4
    np.testing.assert_array_equal(np.asarray(t), np.full(4, 0.5, np.float32))
    with pytest.raises(ValueError):
        t.numpy()[0] = 1.0
    assert "adc.Tensor([0.5, 0.5, 0.5, 0.5], shape=(4,), dtype=float32)" == repr(t)
    assert float(kernels_module.mlp_loss(*references.sample_inputs(np.random.default_rng(0))["mlp_loss"])) >= 0


def test_python_scalar_arguments_keep_their_rank_under_a_tape():
    m = adc.compile("def scale(x: f32, y: f32) -> f32:\n    return x * y\n", "scale.adc")
    x = adc.Variable(2.0)
    with adc.GradientTape() as tape:
        z = m.scale(x, 1.5)
    assert float(tape.gradient(z, x)) == 1.5


@pytest.mark.parametrize("value", [[2 ** 40, 2 ** 32 + 5], 2 ** 31, [-(2 ** 31) - 1, 0], [2 ** 70], [1, 2 ** 64]])
def test_python_integers_that_do_not_fit_the_dtype_raise_overflow_error(value):
    """NumPy's astype would wrap them silently: inc([2**40, 2**32 + 5]) gave [1, 6]."""
    m = adc.compile("def inc(x: i32[N]) -> i32[N]:\n    return x + 1\n", "inc.adc")
    with pytest.raises(OverflowError, match=r"inc: parameter 'x' is i32\[N\]: .* integer"):
        m.inc([value] if isinstance(value, int) else value)
    np.testing.assert_array_equal(m.inc([2 ** 31 - 2, -(2 ** 31)]).numpy(), [2 ** 31 - 1, -(2 ** 31) + 1])


def test_a_call_made_while_another_call_of_the_kernel_fills_its_buffer_gets_its_own(monkeypatch):
    """Each thread reuses one argument buffer per kernel; a call nested in another on the same thread
    (here from a garbage-collector callback, as a signal handler could) must not write into it."""
    import gc
    import time

    # no cache, so no thread linking the kernel's shared object: Python turns the collector off
    # while a thread starts a process (a link thread of an earlier test may still be at it, at
    # low priority), so the calls go on until one was nested, for a few seconds at most
    monkeypatch.setenv("ADC_CACHE", "0")
    m = adc.compile("def affine(x: f64[N], a: f64) -> f64[N]:\n    return a * x + 1.0\n", "nested.adc")
    x = np.arange(5.0)
    nested = []

    def collecting(phase, info):
        if phase == "start" and len(nested) < 50:
            nested.append(m.affine(x, 3.0).numpy())

    threshold = gc.get_threshold()
    gc.callbacks.append(collecting)
    gc.set_threshold(1)     # a collection at nearly every allocation, inside the call too
    deadline, outer = time.monotonic() + 5.0, []
    try:
        while len(outer) < 50 or (not nested and time.monotonic() < deadline):
            outer.append(m.affine(x, 2.0).numpy())
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(collecting)
    assert nested, "no call was nested"
    for got in outer:
        np.testing.assert_array_equal(got, 2.0 * x + 1.0)
    for got in nested:
        np.testing.assert_array_equal(got, 3.0 * x + 1.0)
