"""The adjoint pass: its rule table, its interface (names, wrt, purity), the conventions at kinks,
stop_gradient and unconnected params, golden adjoint IRs, and agreement of the compiled VJP
with the interpreter.

Golden cases: tests/passes/adjoint/<case>.adc, whose first line is a `#` comment saying what
the case proves; every kernel of the file is differentiated and the VJP functions are printed
to <case>.ir after that comment (as `//`). ADC_UPDATE_GOLDEN=1 rewrites them; review the diff.
"""
from pathlib import Path

import numpy as np
import pytest

from adc import compiler, driver
from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.core import Module
from adc.ir.interp import run
from adc.ir.ops import OPS
from adc.ir.parser import parse_module
from adc.ir.printer import format_module
from adc.ir.verify import verify
from adc.passes.adjoint import adjoint, vjp
from adc.passes import adjoint_rules as adjoint_rule_families
from adc.passes.adjoint_rules import adjoint_rules
from tests.support.family_tables import lost_rows
from tests.support.goldens import assert_golden_functions
from tests.support.native import jit_module
from tests.support.references import sample_inputs
from tests.support.repository import SAMPLES

GOLDEN = Path(__file__).parent / "adjoint"
GOLDEN_CASES = sorted(GOLDEN.glob("*.adc"))


def grad_of(source: str, *args, name: str = "f"):
    """The VJP of `name` in `source`, run by the interpreter with cotangent 1 (scalar results)."""
    module, grad = vjp(compile_source(source, "t.adc"), name)
    ones = [np.ones_like(r) for r in run(module, name, *args)]
    return grad.wrt, run(module, grad.func.name, *args, *ones)


def test_every_op_has_a_rule_or_is_listed_non_differentiable():
    missing = sorted(set(OPS) - set(adjoint_rules))
    assert not missing, f"ops without an entry in adjoint_rules: {missing}"
    assert not set(adjoint_rules) - set(OPS), "adjoint_rules has entries for unknown ops"


def test_the_table_holds_every_familys_rows():
    assert not lost_rows(adjoint_rule_families, "adjoint_rules"), "ops with a rule in two families, or a rule lost"


def test_interface_names_params_and_purity():
    # a param named like a cotangent pushes the cotangents to the next prefix
    source = "def f(x: f64[N], ct1: f64) -> (f64[N], f64):\n    return x * ct1, sum(x)\n"
    module = compile_source(source, "t.adc")
    before = format_module(module)
    out, grad = vjp(module, "f")
    assert format_module(module) == before and "f_vjp" not in module.funcs
    assert [p.name for p in grad.func.params] == ["x", "ct1", "dct0", "dct1"]
    assert grad.func.name == "f_vjp" and out["f_vjp"] is grad.func and grad.wrt == (0, 1)
    assert [str(t) for t in grad.func.result_types] == ["f64[N]", "f64"]
    again, second = vjp(out, "f")
    assert second.func.name == "f_vjp1" and {"f", "f_vjp", "f_vjp1"} == set(again.funcs)
    verify(again)
    assert format_module(parse_module(format_module(again))) == format_module(again)


def test_unknown_function_is_a_clear_error():
    with pytest.raises(CompileError, match="no function @g to differentiate"):
        vjp(compile_source("def f(x: f64) -> f64:\n    return x\n", "t.adc"), "g")


def test_a_call_left_in_the_body_is_a_located_error():
    source = "def g(a: f64) -> f64:\n    return a * a\n\ndef f(x: f64) -> f64:\n    return g(x)\n"
    module = compile_source(source, "t.adc")
    with pytest.raises(CompileError, match="met a call of @g: inline calls first") as err:
        adjoint(module["f"], "f_vjp", module.funcs)
    assert (err.value.line, err.value.col) == (5, 12)


@pytest.mark.parametrize("source, args, wrt", [
    ("def f(x: f64, y: f64) -> f64:\n    return x * x\n", (2.0, 3.0), (0,)),
    ("def f(x: f64, y: f64) -> f64:\n    return x * stop_gradient(y)\n", (2.0, 3.0), (0,)),
    ("def f(x: f64[N], y: f64[N]) -> f64[N]:\n    return where(x > 0.0, y, 2.0 * y)\n", (np.ones(2), np.ones(2)), (1,)),
    ("def f(x: f64[N], n: i64[N]) -> f64[N]:\n    return x * f64(n) + f64(floor(x))\n", (np.ones(2), np.ones(2, np.int64)), (0,)),
    ("def f(x: f64) -> f64:\n    return sign(x) + round(x)\n", (2.0,), ()),
    ("def f(x: f64, y: f64) -> bool:\n    return x < y\n", (2.0, 3.0), ()),
], ids=["unused", "stop_gradient", "condition_only", "integer_param", "piecewise_constant", "bool_result"])
def test_unconnected_params_are_not_in_wrt(source, args, wrt):
    assert grad_of(source, *args)[0] == wrt


def test_stop_gradient_blocks_only_its_path():
    # d(x * stop_gradient(x)) = stop_gradient(x) = x, not 2x
    wrt, (dx,) = grad_of("def f(x: f64[N]) -> f64:\n    return sum(x * stop_gradient(x))\n", np.array([1.0, -3.0]))
    np.testing.assert_array_equal(dx, [1.0, -3.0])


@pytest.mark.parametrize("source, args, expected", [
    # relu'(0) = 0, as TensorFlow's relu
    ("def f(x: f64[N]) -> f64:\n    return sum(relu(x))\n", (np.array([0.0, 1.0, -1.0]),), [[0.0, 1.0, 0.0]]),
    # maximum/minimum ties send the cotangent to the first operand, as TensorFlow's Maximum/Minimum
    ("def f(x: f64, y: f64) -> f64:\n    return maximum(x, y)\n", (1.0, 1.0), [1.0, 0.0]),
    ("def f(x: f64, y: f64) -> f64:\n    return minimum(x, y)\n", (1.0, 1.0), [1.0, 0.0]),
    # elu'(0) = 1, as tf.nn.elu
    ("def f(x: f64[N]) -> f64:\n    return sum(elu(x))\n", (np.array([0.0, 1.0, -1.0]),),
     [[1.0, 1.0, np.exp(-1.0)]]),
    # clip passes the gradient at its bounds, and to a bound where x is past it, as tf.clip_by_value
    ("def f(x: f64[N], lo: f64, hi: f64) -> f64:\n    return sum(clip(x, lo, hi))\n",
     (np.array([-1.0, 2.0, 0.5, -3.0, 5.0]), -1.0, 2.0), [[1.0, 1.0, 1.0, 0.0, 0.0], 1.0, 1.0]),
    # tied extrema of a reduction split the cotangent
    ("def f(x: f64[N]) -> f64:\n    return max(x)\n", (np.array([1.0, 3.0, 3.0]),), [[0.0, 0.5, 0.5]]),
    ("def f(x: f64[N]) -> f64:\n    return min(x)\n", (np.array([-2.0, 3.0, -2.0, -2.0]),), [[1 / 3, 0.0, 1 / 3, 1 / 3]]),
    # |x|'(0) = 0
    ("def f(x: f64[N]) -> f64:\n    return sum(abs(x))\n", (np.array([0.0, -2.0]),), [[0.0, -1.0]]),
    # x**p at x <= 0: the exponent's derivative is 0, never nan
    ("def f(x: f64[N], p: f64[N]) -> f64:\n    return sum(x ** p)\n", (np.array([0.0, -2.0]), np.array([2.0, 2.0])),
     [[0.0, -4.0], [0.0, 0.0]]),
    # clip_by_norm at t = 0 keeps a finite gradient (TensorFlow's formula)
    ("def f(t: f64[N]) -> f64:\n    return sum(clip_by_norm(t, 1.0))\n", (np.zeros(2),), [[1.0, 1.0]]),
    # convert between float dtypes passes the cotangent back converted
    ("def f(x: f64[N]) -> f64:\n    return sum(f64(f32(x)) * 3.0)\n", (np.array([0.1, 2.0]),), [[3.0, 3.0]]),
    # prod: ct*y/x, nan at an exact zero (documented)
    ("def f(x: f64[N]) -> f64:\n    return prod(x)\n", (np.array([0.0, 2.0]),), [[np.nan, 0.0]]),
], ids=["relu_at_0", "maximum_tie", "minimum_tie", "elu_at_0", "clip_at_bounds", "max_ties", "min_ties",
        "abs_at_0", "pow_at_nonpositive",
        "clip_by_norm_at_0", "convert", "prod_at_0"])
def test_conventions_and_exact_values(source, args, expected):
    _, grads = grad_of(source, *args)
    for got, want in zip(grads, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_second_derivative_of_a_polynomial():
    # d²(x**3)/dx² = 6x; the pass applied to its own output
    module, first = vjp(compile_source("def f(x: f64) -> f64:\n    return x * x * x\n", "t.adc"), "f")
    module, second = vjp(module, first.func.name)
    dx, dct = run(module, second.func.name, 2.0, 1.0, 1.0)
    assert (dx, dct) == (12.0, 12.0)


@pytest.mark.parametrize("path", GOLDEN_CASES, ids=[p.stem for p in GOLDEN_CASES])
def test_golden_adjoint_ir(path):
    assert_golden_functions(path, lambda module: [vjp(module, name)[1].func for name in module.funcs])


def test_golden_cases_exist():
    assert {p.stem for p in GOLDEN_CASES} >= {"x_squared", "dense_relu", "stop_gradient", "broadcast"}


# ---------------------------------------------------------------- compiled route

ROUTE_SOURCE = """
def shapes(x: f64[B, 5], y: f64[5]) -> f64[B, 3]:
    z = concat([x * y, pad(x[:, 1:], [[0, 0], [1, 2]], value=0.5)], axis=1)
    return max(z, axis=1, keepdims=True) * z[:, ::4] + tanh(sum(z, axis=1, keepdims=True))

def shapes32(x: f32[B, 5], y: f32[5]) -> f32[B, 3]:
    z = concat([x * y, pad(x[:, 1:], [[0, 0], [1, 2]], value=0.5)], axis=1)
    return max(z, axis=1, keepdims=True) * z[:, ::4] + tanh(sum(z, axis=1, keepdims=True))
"""


def _compiled_and_interpreted(module, name, args, rng):
    with_vjp, grad = vjp(module, name)
    cts = [rng.standard_normal(r.shape).astype(r.dtype) for r in run(with_vjp, name, *args)]
    native = jit_module(Module({grad.func.name: grad.func}, module.name))      # the VJP is call-free
    compiled = getattr(native, grad.func.name)(*args, *cts)
    compiled = compiled if isinstance(compiled, tuple) else (compiled,)
    return [c.numpy() for c in compiled], run(with_vjp, grad.func.name, *args, *cts)


@pytest.mark.parametrize("name, dtype", [("shapes", np.float64), ("shapes32", np.float32)])
def test_compiled_vjp_matches_interpreter(name, dtype):
    rng = np.random.default_rng(5)
    args = [rng.standard_normal((3, 5)).astype(dtype), rng.standard_normal(5).astype(dtype)]
    compiled, interpreted = _compiled_and_interpreted(compile_source(ROUTE_SOURCE, "route.adc"), name, args, rng)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    for c, i in zip(compiled, interpreted, strict=True):
        assert c.dtype == dtype
        np.testing.assert_allclose(c, i, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["mlp_loss", "batchnorm", "logsumexp_rows", "sigmoid_shift"])
def test_compiled_sample_vjps_match_interpreter(name):
    rng = np.random.default_rng(6)
    module = compiler.elaborate(driver.read_source(SAMPLES / "kernels.adc"), "kernels.adc")
    args = sample_inputs(rng)[name]
    compiled, interpreted = _compiled_and_interpreted(module, name, args, rng)
    for c, i in zip(compiled, interpreted, strict=True):
        np.testing.assert_allclose(c, i, rtol=2e-4, atol=2e-4)
