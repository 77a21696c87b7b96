"""The cotangent of a value sliced several times (adc/passes/adjoint.py, `slice_add`): each slice's
cotangent is added into the others' at its own elements, never padded with zeros to the whole
value and summed. slice_add compiled against NumPy (steps, offsets, a base copied or computed in
its buffer, a chain sharing one buffer, f32 and f64, the bounds-checked build); gradients and
Hessians of kernels slicing columns, strided rows and offset blocks against finite differences,
NumPy and the dense Hessian; the IR and the buffers it gets.
"""
import numpy as np
import pytest

import adc
from adc.abi import parse_type
from adc.codegen.lowering.fusion import plan
from adc.frontend import compile_source
from adc.ir.builder import full
from adc.ir.interp import run as interpret
from adc.passes.adjoint import vjp
from tests.support.gradcheck import check_vjp
from tests.support.ir_kernels import kernel
from tests.support.native import jit_module

RNG = np.random.default_rng(3)
BUILDS = pytest.mark.parametrize("check_bounds", [False, True], ids=["default", "check_bounds"])


def _added(base: np.ndarray, updates: np.ndarray, index) -> np.ndarray:
    out = base.copy()
    out[index] += updates
    return out


# (start, stop, step) of a [7, 5] base, and the NumPy index they stand for
SLICES = [((0, 2), (7, 3), (1, 1), np.s_[:, 2:3]),             # a column
          ((1, 0), (7, 5), (2, 1), np.s_[1::2, :]),            # every other row from the second
          ((2, 1), (6, 5), (3, 2), np.s_[2:6:3, 1::2]),         # steps on both axes, an offset
          ((0, 0), (7, 5), (1, 1), np.s_[:, :])]               # all of it


@BUILDS
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("start, stop, step, index", SLICES)
def test_slice_add_adds_into_its_slice_only(start, stop, step, index, dtype, check_bounds):
    base = RNG.standard_normal((7, 5)).astype(np.float32 if dtype == "f32" else np.float64)
    updates = RNG.standard_normal(base[index].shape).astype(base.dtype)

    def body(b, x, u):        # the base computed in the slice_add's buffer (exp of x, read once)
        return b.op("slice_add", b.op("exp", x), b.op("sin", u), start=start, stop=stop, step=step)
    module = kernel(f"x: {dtype}[7,5], u: {dtype}[{','.join(map(str, updates.shape))}]", body)
    expected = _added(np.exp(base), np.sin(updates), index)
    got = jit_module(module, check_bounds).k(base, updates).numpy()
    tolerance = 1e-6 if dtype == "f32" else 1e-14
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(interpret(module, "k", base, updates)[0], expected, rtol=tolerance, atol=tolerance)


@BUILDS
def test_a_chain_shares_one_buffer_and_a_base_read_elsewhere_is_copied(check_bounds):
    # y = x + each column of u added into its own column, then x read again: x keeps its buffer
    # (the first slice_add copies it), the chain of five slice_adds writes one buffer
    def body(b, x, u):
        y = x
        for j in range(5):
            column = b.op("slice", u, start=[0, j], stop=[9, j + 1], step=[1, 1])
            y = b.op("slice_add", y, b.op("mul", column, column), start=[0, j], stop=[9, j + 1], step=[1, 1])
        return b.op("mul", y, x)
    module = kernel("x: f64[9,5], u: f64[9,5]", body)
    func = module["k"]
    adds = [op for op in func.ops if op.name == "slice_add"]
    assert plan(func).scattered_into == {a.result: b.result for a, b in zip(adds, adds[1:])}
    x, u = RNG.standard_normal((9, 5)), RNG.standard_normal((9, 5))
    np.testing.assert_allclose(jit_module(module, check_bounds).k(x, u).numpy(), (x + u * u) * x, rtol=1e-14)


def test_slice_add_into_zeros_is_a_strided_write():
    module = kernel("u: f64[4]", lambda b, u: b.op("slice_add", full(b, 0.0, parse_type("f64[9]")), u,
                                                     start=[1], stop=[9], step=[2]))
    u = np.arange(1.0, 5.0)
    np.testing.assert_array_equal(jit_module(module).k(u).numpy(), [0, 1, 0, 2, 0, 3, 0, 4, 0])


SLICED = """\
def columns(z: T[K, 5]) -> T:
    s = sin(z[:, 1])
    c = cos(z[:, 1])
    return sum(z[:, 3] * z[:, 3] * s + z[:, 4] * c) + sum(z[1:, 0] * z[:K-1, 2]) + sum(z[:, :4] * z[:, 1:])

def strided(x: T[12]) -> T:
    return sum(x[::2] * x[1::2]) + sum(sin(x[1::3])) + sum(x[2:11] * x[:9])
"""


@pytest.mark.parametrize("name, shape", [("columns", (6, 5)), ("strided", (12,))])
def test_gradients_and_second_derivatives_match_finite_differences(name, shape):
    module = compile_source(SLICED.replace("T", "f64"), "sliced.adc")
    check_vjp(module, name, [RNG.standard_normal(shape)], order=2)


def test_the_sum_of_slice_cotangents_is_a_chain_of_slice_adds():
    module = compile_source(SLICED.replace("T", "f64"), "sliced.adc")
    for name, slices in (("columns", 9), ("strided", 5)):       # z read through 9 slices; x, through 5
        _, gradient = vjp(module, name, [0])
        (z,) = gradient.func.params[:1]
        names = [op.name for op in gradient.func.ops if op.result.type == z.type]
        # the first term's pad (steps: its slice_add into zeros), the others added into it: no
        # pad added to a pad, no spread of a strided slice's cotangent through pads
        assert names.count("slice_add") == slices - 1 and names.count("pad") <= 1 and "add" not in names


def _columns_gradient(z: np.ndarray) -> np.ndarray:
    """d/dz of SLICED's `columns`, by hand."""
    g = np.zeros_like(z)
    s, c = np.sin(z[:, 1]), np.cos(z[:, 1])
    g[:, 3] += 2 * z[:, 3] * s
    g[:, 1] += z[:, 3] ** 2 * c - z[:, 4] * s
    g[:, 4] += c
    g[1:, 0] += z[:-1, 2]
    g[:-1, 2] += z[1:, 0]
    g[:, :4] += z[:, 1:]
    g[:, 1:] += z[:, :4]
    return g


@BUILDS
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_compiled_gradients_and_sparse_hessians_equal_numpy_and_the_dense_hessian(dtype, check_bounds):
    module = adc.compile(SLICED.replace("T", dtype), check_bounds=check_bounds)
    z = RNG.standard_normal((11, 5)).astype(np.float32 if dtype == "f32" else np.float64)
    tolerance = 2e-5 if dtype == "f32" else 1e-13
    np.testing.assert_allclose(adc.grad(module.columns, wrt="z")(z).numpy(), _columns_gradient(z.astype(np.float64)),
                               rtol=tolerance, atol=tolerance)
    for name, x in (("columns", z), ("strided", z.ravel()[:12].copy())):
        hessian = adc.hessian(getattr(module, name), sparse=True)
        dense = np.asarray(adc.hessian(getattr(module, name))(x)).reshape(x.size, x.size)
        np.testing.assert_allclose(hessian(x).toarray(), dense, rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(dense, dense.T, rtol=tolerance, atol=tolerance)
