"""The split VJP (adc/passes/split_vjp.py): its forward gives the primal results, its backward given
the forward's residuals gives what the VJP gives, and free ops are recomputed rather than saved."""
import numpy as np
import pytest

from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes.adjoint import vjp
from adc.passes.split_vjp import RECOMPUTED, split_vjp
from tests.support.references import sample_inputs
from tests.support.repository import SAMPLES

KERNELS = compile_source((SAMPLES / "kernels.adc").read_text(), "kernels.adc")
CUSTOM = compile_source((SAMPLES / "custom_gradients.adc").read_text(), "custom_gradients.adc")
MIXED = compile_source("""
def mixed(x: f64[N], y: f64[N], k: i32) -> (f64, f64[N]):
    t = tanh(x * y)
    return sum(t * exp(x)), t * t
""", "mixed.adc")


def _cotangents(results, rng):
    return [np.asarray(rng.standard_normal(r.shape)).astype(r.dtype) for r in results]


def _check(module, name, args, wanted=None):
    halves, split = split_vjp(module, name, wanted)
    results = run(module, name, *args)
    outputs = run(halves, split.forward.name, *args)
    for got, want in zip(outputs, results):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    cts = _cotangents(results, np.random.default_rng(1))
    extended, gradient = vjp(module, name, wanted)
    assert split.wrt == gradient.wrt
    expected = run(extended, gradient.func.name, *args, *cts)
    got = run(halves, split.backward.name, *args, *outputs[len(results):], *cts)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    return halves, split


@pytest.mark.parametrize("name", ["dense_relu", "mlp_loss", "sigmoid_shift", "batchnorm", "logsumexp_rows"])
def test_the_halves_of_a_sample_kernel_agree_with_its_vjp(name):
    _check(KERNELS, name, sample_inputs(np.random.default_rng(0))[name])


def test_only_the_wanted_params_are_differentiated():
    _, split = _check(KERNELS, "mlp_loss", sample_inputs(np.random.default_rng(0))["mlp_loss"], wanted=(1, 3))
    assert split.wrt == (1, 3)


def test_several_results_and_an_integer_param():
    x, y = np.linspace(-1, 1, 5), np.linspace(0.5, 2, 5)
    _check(MIXED, "mixed", (x, y, np.int32(3)))


def test_a_compiled_custom_gradient_splits_with_the_functions_it_references():
    name = next(iter(CUSTOM.custom_gradients()))
    func = CUSTOM[name]
    rng = np.random.default_rng(2)
    args = [rng.standard_normal([3 if not isinstance(d, int) else d for d in p.type.shape]).astype(p.type.dtype.numpy)
            for p in func.params]
    halves, _ = _check(CUSTOM, name, args)
    assert set(CUSTOM.custom_gradients()[name]) <= set(halves.funcs)


def test_free_ops_are_recomputed_by_the_backward_not_saved():
    """mlp_loss's backward reads relu(x @ w1 + b1) transposed: the forward saves it untransposed."""
    halves, split = split_vjp(KERNELS, "mlp_loss")
    n_results = len(KERNELS["mlp_loss"].returns)
    producers = {op.result: op for op in split.forward.ops}
    saved = split.forward.returns[n_results:]
    assert saved and all(producers[v].name not in RECOMPUTED for v in saved if v in producers)
    assert any(op.name == "transpose" for op in split.backward.ops)
