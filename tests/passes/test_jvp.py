"""The forward-mode pass: its rule table, its interface, every rule against central finite
differences in float64 (first order, and second order as forward-over-reverse: the JVP of a
VJP), the dot-product identity ⟨J·t, c⟩ = ⟨t, Jᵀ·c⟩ against the adjoint pass, custom gradients
through their transposed backwards, and golden JVP IRs.

Golden cases: tests/passes/jvp/<case>.adc, whose first line is a `#` comment saying what the
case proves; every kernel of the file gets its JVP printed to <case>.ir after that comment (as
`//`). ADC_UPDATE_GOLDEN=1 rewrites them; review the diff.
"""
from pathlib import Path

import numpy as np
import pytest

from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.interp import run
from adc.ir.ops import OPS
from adc.passes.adjoint import vjp
from adc.passes.jvp import jvp
from adc.passes.tangent_rules import tangent_rules
from tests.support.derivative_cases import CASES, inputs, kernel_source
from tests.support.goldens import assert_golden_functions
from tests.support.gradcheck import check_jvp

GOLDEN = Path(__file__).parent / "jvp"
GOLDEN_CASES = sorted(GOLDEN.glob("*.adc"))


def test_every_op_has_a_tangent_rule():
    missing = sorted(set(OPS) - set(tangent_rules))
    assert not missing, f"ops without an entry in tangent_rules: {missing}"
    assert not set(tangent_rules) - set(OPS), "tangent_rules has entries for unknown ops"


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_first_order(case):
    params, result, expr, domains = CASES[case]
    module = compile_source(kernel_source(params, result, expr), f"{case}.adc")
    check_jvp(module, "f", inputs(params, domains), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_forward_over_reverse(case):
    # the JVP of the VJP function: second derivatives, every rule applied to adjoint IR
    params, result, expr, domains = CASES[case]
    module = compile_source(kernel_source(params, result, expr), f"{case}.adc")
    args = inputs(params, domains)
    extended, grad = vjp(module, "f")
    cts = [np.random.default_rng(7).standard_normal(np.shape(o)) for o in run(module, "f", *args)]
    check_jvp(extended, grad.func.name, args + cts, rtol=1e-5, atol=1e-7)


def test_interface_names_and_what_gets_a_tangent():
    source = "def f(x: f64[N], dx: f64, n: i64[N]) -> (f64[N], i64[N], f64):\n    return x * dx, n, 2.0\n"
    module = compile_source(source, "t.adc")
    out, t = jvp(module, "f")
    assert [p.name for p in t.func.params] == ["x", "dx", "n", "ddx", "dddx"]
    assert t.wrt == (0, 1) and t.outputs == (0, 2) and t.func.name == "f_jvp" and "f_jvp" not in module.funcs
    assert [str(ty) for ty in t.func.result_types] == ["f64[N]", "i64[N]", "f64", "f64[N]", "f64"]
    x, n = np.array([1.0, 2.0]), np.array([3, 4])
    y, m, c, ty, tc = run(out, "f_jvp", x, np.array(3.0), n, np.array([1.0, 0.0]), np.array(1.0))
    np.testing.assert_array_equal(ty, [3.0 + 1.0, 2.0])
    assert tc == 0.0 and list(m) == [3, 4]
    only, t1 = jvp(module, "f", wanted=[1], primals=False)
    assert t1.wrt == (1,) and [p.name for p in t1.func.params] == ["x", "dx", "n", "ddx"]
    np.testing.assert_array_equal(run(only, t1.func.name, x, np.array(3.0), n, np.array(2.0))[0], [2.0, 4.0])


def test_untouched_ops_cost_nothing():
    # an op none of whose operands moves gets no tangent ops: only the product with dw is built
    source = "def f(x: f64[N], w: f64) -> f64[N]:\n    return exp(sin(x)) * w\n"
    _, t = jvp(compile_source(source, "t.adc"), "f", wanted=[1], primals=False)
    assert [op.name for op in t.func.ops].count("cos") == 0


def test_unknown_function_and_call_left_in_body_are_clear_errors():
    with pytest.raises(CompileError, match="no function @g to differentiate"):
        jvp(compile_source("def f(x: f64) -> f64:\n    return x\n", "t.adc"), "g")


CUSTOM = """\
@custom_gradient
def custom(x: f64[N]) -> f64[N]:
    c = cos(x)
    def backward(ct: f64[N]) -> f64[N]:
        return {backward}
    return sin(x), backward

def f(x: f64[N], y: f64[N]) -> f64[N]:
    return custom(x * y) * y
"""


def test_forward_mode_through_a_custom_gradient_uses_its_transposed_backward():
    module = compile_source(CUSTOM.format(backward="ct * c"), "custom.adc")
    x, y = np.linspace(-1, 1, 5), np.linspace(0.5, 1.5, 5)
    check_jvp(module, "f", [x, y], rtol=1e-6, atol=1e-9)


def test_the_transpose_follows_the_backward_not_the_forward():
    # a backward that scales its cotangent by 3: the JVP scales the tangent by 3, whatever the forward does
    module = compile_source(CUSTOM.format(backward="3.0 * ct"), "custom.adc")
    x, y, dx = np.linspace(-1, 1, 5), np.ones(5), np.linspace(0, 1, 5)
    out, t = jvp(module, "f", wanted=[0], primals=False)
    np.testing.assert_allclose(run(out, t.func.name, x, y, dx)[0], 3.0 * dx)


@pytest.mark.parametrize("backward, why", [
    ("ct * ct", "multiplies cotangents together"),
    ("exp(ct)", "'exp' is applied to a cotangent"),
    ("ct + c", "affine, not linear"),
    ("c / ct", "divides by a cotangent"),
    ("c", "does not depend on them and is not zero"),
])
def test_a_backward_not_linear_in_its_cotangent_is_a_located_error(backward, why):
    module = compile_source(CUSTOM.format(backward=backward), "custom.adc")
    with pytest.raises(CompileError, match="must be linear in its cotangents") as err:
        jvp(module, "f")
    assert why in str(err.value) and "forward mode through the custom gradient at custom.adc:2:1" in str(err.value)
    assert err.value.line in (4, 5) and err.value.file == "custom.adc"


def test_extern_function_with_attached_gradient():
    source = ("extern def erf(x: f64) -> f64\n\n"
              "@gradient(erf)\ndef erf_grad(x: f64, ct: f64) -> f64:\n"
              "    return ct * 1.1283791670955126 * exp(-x * x)\n\n"
              "def f(x: f64[N]) -> f64[N]:\n    return erf(x * x)\n")
    check_jvp(compile_source(source, "erf.adc"), "f", [np.linspace(-1, 1, 5)], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("path", GOLDEN_CASES, ids=[p.stem for p in GOLDEN_CASES])
def test_golden(path):
    assert_golden_functions(path, lambda module: [jvp(module, name)[1].func for name in module.funcs])


def test_there_are_golden_cases():
    assert GOLDEN_CASES
