"""Jacobians as batch ∘ adjoint: jacobian(f) against central finite differences (float64) and
against one-seed-at-a-time VJPs; per-example seeds giving the batch Jacobian; the batched VJP
staying one matmul per product; depends_across on examples that mix and examples that don't;
golden batched-VJP IR; the compiled route.

Golden cases: tests/passes/batch/<case>.adc, whose first line is a `#` comment saying what the
case proves; the batched VJP of every kernel of the file is printed to <case>.ir after that
comment (as `//`). ADC_UPDATE_GOLDEN=1 rewrites them; review the diff.
"""
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.core import Func, Module
from adc.ir.interp import run
from adc.ir.parser import parse_module
from adc.ir.verify import verify
from adc.passes.adjoint import vjp
from adc.passes.inline import inline_func
from adc.passes.example_axis import depends_across
from adc.passes.jacobian import gradient, hessian, jacobian, vjp_batched
from tests.support.goldens import assert_golden_functions
from tests.support.ir_programs import programs
from tests.support.native import jit_module

GOLDEN = Path(__file__).parent / "batch"
GOLDEN_CASES = sorted(GOLDEN.glob("*.adc"))
STEP = 1e-6

SOURCE = """
def mlp(x: f64[B, I], w1: f64[I, H], w2: f64[H, O]) -> f64[B, O]:
    return elu(tanh(x @ w1) @ w2)

def loss(x: f64[B, N], y: f64[N]) -> f64:
    return sum(exp(x) * y) / 3.0 + max(x)

def shapes(x: f64[B, 5], y: f64[5]) -> f64[B, 3]:
    z = concat([x * y, pad(x[:, 1:], [[0, 0], [1, 2]], value=0.5)], axis=1)
    return max(z, axis=1, keepdims=True) * z[:, ::4] + tanh(sum(z, axis=1, keepdims=True))

def batchnorm(h: f64[B, H]) -> f64[B, H]:
    mu = mean(h, axis=0)
    return (h - mu) / sqrt(mean((h - mu) ** 2, axis=0) + 0.001)

def rows(x: f64[B, N]) -> f64[B]:
    return log(sum(exp(x), axis=1)) * sin(x[:, 0])
"""
SHAPES = {"mlp": [(3, 4), (4, 5), (5, 2)], "loss": [(3, 4), (4,)], "shapes": [(3, 5), (5,)],
          "batchnorm": [(4, 3)], "rows": [(3, 4)]}


@pytest.fixture(scope="module")
def module():
    return compile_source(SOURCE, "jac.adc")


def inputs(name, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in SHAPES[name]]


def finite_difference_jacobian(module, name, args, i):
    """d f(args) / d args[i], of shape result.shape + args[i].shape, by central differences."""
    (y,) = run(module, name, *args)
    out = np.zeros(y.shape + args[i].shape)
    for j in np.ndindex(args[i].shape):
        moved = [[a.copy() for a in args] for _ in range(2)]
        moved[0][i][j] += STEP
        moved[1][i][j] -= STEP
        (up,), (down,) = run(module, name, *moved[0]), run(module, name, *moved[1])
        out[(...,) + j] = (up - down) / (2 * STEP)
    return out


def one_seed_at_a_time(module, name, args, i):
    """The Jacobian w.r.t. args[i] row by row: the VJP run once per unit seed."""
    out, grad = vjp(module, name)
    (y,) = run(out, name, *args)
    rows = []
    for k in range(y.size):
        seed = np.zeros(y.size)
        seed[k] = 1.0
        cts = run(out, grad.func.name, *args, seed.reshape(y.shape))
        rows.append(cts[grad.wrt.index(i)] if i in grad.wrt else np.zeros(args[i].shape))   # unconnected
    return np.stack(rows).reshape(y.shape + args[i].shape)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_jacobian_equals_finite_differences_and_row_by_row_vjps(module, name):
    args = inputs(name)
    out, func, wrt = jacobian(module, name)
    assert func.name == f"{name}_jacobian" and wrt == tuple(range(len(args)))
    for i, got in zip(wrt, run(out, func.name, *args), strict=True):
        np.testing.assert_allclose(got, finite_difference_jacobian(module, name, args, i), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(got, one_seed_at_a_time(module, name, args, i), rtol=1e-12, atol=1e-12)


def per_example_seeds(shape):
    """Seeds [O, B, O]: seed o is 1 at output o of every example."""
    batch, size = shape
    return np.broadcast_to(np.eye(size)[:, None, :], (size, batch, size)).copy()


@pytest.mark.parametrize("name, mixes", [("mlp", False), ("batchnorm", True)])
def test_per_example_seeds_give_the_batch_jacobian(module, name, mixes):
    # always: the per-example pullback is the full Jacobian summed over its first batch axis;
    # and exactly when examples do not mix, the full Jacobian is zero off the diagonal blocks
    args = inputs(name)
    out, func, wrt = vjp_batched(module, name, wanted=[0])
    assert wrt == (0,) and func.name == f"{name}_vjp_batched"
    (y,) = run(out, name, *args)
    (pulled,) = run(out, func.name, *args, per_example_seeds(y.shape))    # [O, B, I]
    full = finite_difference_jacobian(module, name, args, 0)                # [B, O, B, I]
    np.testing.assert_allclose(pulled.transpose(1, 0, 2), full.sum(axis=0).transpose(1, 0, 2), atol=1e-6)
    diagonal = np.stack([full[b, :, b, :] for b in range(y.shape[0])])
    assert np.allclose(pulled.transpose(1, 0, 2), diagonal, atol=1e-6) != mixes
    assert depends_across(inline_func(module[name], module), 0) == mixes


def test_batched_vjp_of_an_mlp_is_one_matmul_per_layer():
    # seeds folded into the rows: [S*B, O] @ [O, H] and [S*B, H] @ [H, I], weights never copied per seed
    source = ("def mlp(x: f32[B, I], w1: f32[I, H], b1: f32[H], w2: f32[H, O], b2: f32[O]) -> f32[B, O]:\n"
              "    return elu(elu(x @ w1 + b1) @ w2 + b2)\n")
    _, func, _ = vjp_batched(compile_source(source, "mlp.adc"), "mlp", wanted=[0])
    seeded = [op for op in func.ops if op.name == "matmul" and "S" in str(op.result.type)]
    assert [str(op.result.type) for op in seeded] == ["f32[B*S,H]", "f32[B*S,I]"]
    producers = {r: op for op in func.ops for r in op.results}
    assert all(producers[v].name != "broadcast" for op in seeded for v in op.operands if v in producers)


def test_jacobian_of_a_scalar_result_has_the_param_shape(module):
    out, func, wrt = jacobian(module, "loss")
    assert [str(t) for t in func.result_types] == ["f64[B,N]", "f64[N]"]


@pytest.mark.parametrize("source, name, message", [
    ("def f(x: f64) -> (f64, f64):\n    return x, x\n", "f", "needs a single float result, it returns f64, f64"),
    ("def f(x: f64) -> bool:\n    return x > 0.0\n", "f", "needs a single float result, it returns bool"),
    ("def f(x: f64) -> f64:\n    return x\n", "g", "no function @g to differentiate"),
])
def test_jacobian_misuse_is_a_clear_error(source, name, message):
    with pytest.raises(CompileError, match=message):
        jacobian(compile_source(source, "t.adc"), name)


@settings(max_examples=25, deadline=None)
@given(programs(), st.integers(0, 2**16))
def test_random_compositions_jacobian_equals_finite_differences(program, seed):
    random_module, _ = program
    f = random_module["f"]
    module = Module({"g": Func("g", f.params, f.ops, f.returns[:1])}, "random")
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal((2, 3)), rng.standard_normal((2, 3)), rng.standard_normal((3, 3))]
    out, func, wrt = jacobian(module, "g")
    for i, got in zip(wrt, run(out, func.name, *args), strict=True):
        np.testing.assert_allclose(got, finite_difference_jacobian(module, "g", args, i), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got, one_seed_at_a_time(module, "g", args, i), rtol=1e-12, atol=1e-12)


def test_compiled_jacobian_matches_the_interpreter(module):
    out, func, wrt = jacobian(module, "shapes")
    native = jit_module(out.reachable(func.name))
    args = inputs("shapes")
    for got, want in zip(getattr(native, func.name)(*args), run(out, func.name, *args), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- examples that mix

@pytest.mark.parametrize("body, result, param, mixes", [
    ("tanh(x) * 2.0", "f64[B, I]", 0, False),                               # elementwise
    ("elu(x @ w + b)", "f64[B, O]", 0, False),                              # a dense layer keeps rows apart
    ("elu(x @ w + b)", "f64[B, O]", 1, True),                               # every row uses all of w
    ("x - mean(x, axis=0)", "f64[B, I]", 0, True),                          # batch normalization: mean over axis 0
    ("x - mean(x, axis=1, keepdims=True)", "f64[B, I]", 0, False),          # a mean over axis 1 stays per example
    ("transpose(x) @ x", "f64[I, I]", 0, True),                             # matmul contracting over axis 0
    ("x[1:, :] - x[:-1, :]", "f64[B-1, I]", 0, True),                       # neighbours along axis 0
    ("transpose(transpose(x) * 3.0)", "f64[B, I]", 0, False),               # the axis moves and comes back
    ("transpose(x)", "f64[I, B]", 0, True),                                 # examples along axis 1 of the result
    ("reshape(x, [B * I])", "f64[B*I]", 0, True),                           # conservative: axis 0 is gone
    ("concat([x, x * 2.0], axis=1)", "f64[B, 2*I]", 0, False),              # joined along another axis
    ("concat([x, x], axis=0)", "f64[2*B, I]", 0, True),                     # joined along the example axis
    ("x + sum(w)", "f64[B, I]", 0, False),                                  # w is shared, x stays per example
    ("b * sum(x)", "f64[O]", 0, True),                                      # a sum over all examples
    ("b * 2.0", "f64[O]", 0, False),                                        # no dependence at all
])
def test_depends_across(body, result, param, mixes):
    source = f"def f(x: f64[B, I], w: f64[I, O], b: f64[O]) -> {result}:\n    return {body}\n"
    assert depends_across(compile_source(source, "t.adc")["f"], param) == mixes


# ---------------------------------------------------------------- goldens

@pytest.mark.parametrize("path", GOLDEN_CASES, ids=[p.stem for p in GOLDEN_CASES])
def test_golden_batched_vjp_ir(path):
    got = assert_golden_functions(path, lambda module: [vjp_batched(module, name)[1] for name in module.funcs])
    verify(parse_module(got))


def test_golden_cases_exist():
    assert {p.stem for p in GOLDEN_CASES} >= {"dense_relu", "elu_mlp"}


# ---------------------------------------------------------------- gradient and hessian

def test_gradient_of_a_scalar_function_against_finite_differences(module):
    args = inputs("loss")
    out, func, wanted = gradient(module, "loss")
    assert func.name == "loss_grad" and wanted == (0, 1)
    for i, got in zip(wanted, run(out, func.name, *args), strict=True):
        np.testing.assert_allclose(got, finite_difference_jacobian(module, "loss", args, i), rtol=1e-6, atol=1e-8)


def test_hessian_is_the_jacobian_of_the_gradient_and_symmetric(module):
    args = inputs("loss")
    out, func = hessian(module, "loss", 0)
    assert func.name == "loss_hessian" and [str(t) for t in func.result_types] == ["f64[B,N,B,N]"]
    (got,) = run(out, func.name, *args)
    grad_module, grad, _ = gradient(module, "loss", [0])
    np.testing.assert_allclose(got, finite_difference_jacobian(grad_module, grad.name, args, 0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got, got.transpose(2, 3, 0, 1), atol=1e-12)


def test_unconnected_params_get_zeros_of_their_shape():
    source = "def f(x: f64[N], y: f64[M], k: i32) -> f64:\n    return sum(x * x)\n"
    module = compile_source(source, "t.adc")
    out, func, wanted = gradient(module, "f")
    assert wanted == (0, 1)                       # the integer param is not differentiated
    x, y = np.array([1.0, -2.0]), np.arange(3.0)
    dx, dy = run(out, func.name, x, y, np.int32(1))
    np.testing.assert_array_equal(dx, 2 * x)
    np.testing.assert_array_equal(dy, np.zeros(3))
    out, func, _ = jacobian(module, "f", [1])
    np.testing.assert_array_equal(run(out, func.name, x, y, np.int32(1))[0], np.zeros(3))


def test_gradient_of_a_non_scalar_function_is_a_clear_error(module):
    with pytest.raises(CompileError, match=r"gradient of @mlp needs a scalar result, it returns f64\[B,O\]"):
        gradient(module, "mlp")
