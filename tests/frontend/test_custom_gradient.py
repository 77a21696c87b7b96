"""@custom_gradient kernels and external functions in the language: what they elaborate to, and a
CompileError at the right line:col for each misuse."""
import pytest

from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.printer import format_func

CG = "@custom_gradient\ndef f(x: f32[N], s: f32) -> f32[N]:\n"
ERF = "extern def erf(x: f64) -> f64\n"

# source, (line, col), a substring of the message
CASES = [
    # the backward returns one cotangent per input, each of its input's type
    (CG + "    def backward(dy: f32[N]) -> f32[N]:\n        return dy\n    return x, backward\n",
     (4, 9), "must return one cotangent per input of 'f' (2), got 1"),
    (CG + "    def backward(dy: f32[N]) -> (f32[N], f32):\n        return dy, dy\n    return x, backward\n",
     (4, 20), "'backward' returns f32[N] but is declared f32"),
    (CG + "    def backward(dy: f32[N]) -> (f32[N], f32):\n        return dy, f64(sum(dy))\n"
          "    return x, backward\n", (4, 20), "'backward' returns f64 but is declared f32"),
    (CG + "    def backward(dy: f32[N]) -> (f32[N], f64):\n        return dy, 0.0\n    return x, backward\n",
     (3, 42), "the cotangent of an input of type f32 must be declared f32"),
    (CG + "    def backward(dy: f32) -> (f32[N], f32):\n        return dy, dy\n    return x, backward\n",
     (3, 18), "cotangent 'dy' must have the type of its result, f32[N], got f32"),
    (CG + "    def backward(dy: f32[N], e: f32) -> (f32[N], f32):\n        return dy, e\n    return x, backward\n",
     (3, 5), "takes one cotangent per result of 'f' (1), got 2"),
    (CG + "    return x\n", (2, 1), "defines no backward"),
    (CG + "    def backward(in: f32[N]) -> (f32[N], f32):\n        return in, s\n    return x, backward\n",
     (3, 18), "'in' is a Python keyword"),
    (CG + "    def backward(dy: f32[N]) -> (f32[N], f32):\n        return dy, s\n    return x\n",
     (5, 12), "returns its outputs then its backward: `return ..., backward`"),
    (CG + "    def backward(dy: f32[N]) -> (f32[N], f32):\n        return dy, s\n"
          "    def again(dy: f32[N]) -> (f32[N], f32):\n        return dy, s\n    return x, backward\n",
     (5, 5), "already defines its backward, 'backward'"),
    ("def f(x: f32) -> f32:\n    def g(dy: f32) -> f32:\n        return dy\n    return x\n",
     (2, 5), "a nested def is only allowed in a @custom_gradient kernel"),
    ("@custom_gradients\ndef f(x: f32) -> f32:\n    return x\n", (1, 1), "unknown decorator '@custom_gradients'"),
    ("@custom_gradient(x)\ndef f(x: f32) -> f32:\n    return x\n", (1, 1), "write @custom_gradient"),
    ("@custom_gradient\ndef f(x: f32) -> f32:\n    def backward(dy: f32) -> f32:\n        return dy\n"
     "    return x, backward\n\ndef f_backward(x: f32) -> f32:\n    return x\n", (7, 1), "'f_backward' is taken"),
    # external functions
    ("extern def dot(x: f64[N]) -> f64\n", (1, 19), "must take and return scalars of one float dtype"),
    ("extern def ldexp(x: f64, e: i32) -> f64\n", (1, 29), "must take and return scalars of one float dtype"),
    ("extern def erf(x: f64) -> f64\nextern def erf(x: f64) -> f64\n", (2, 1), "has the name of another function"),
    ("extern def hypot(x: f64, x: f64) -> f64\n", (1, 26), "parameter 'x' is defined twice"),
    (ERF + "def f(x: f32[N]) -> f32[N]:\n    return erf(x)\n", (3, 16), "erf() takes f64 values, got f32[N]"),
    (ERF + "def f(x: f64[N]) -> f64[N]:\n    return erf(x, x)\n", (3, 12), "erf() takes 1 argument, got 2"),
    (ERF + "def f(x: f64[N]) -> f64[N]:\n    return erf\n", (3, 12), "'erf' is a function; call it as erf(...)"),
    (ERF + "@gradient(erfc)\ndef g(x: f64, dy: f64) -> f64:\n    return dy\n", (2, 1), "'erfc' is not an external"),
    (ERF + "@gradient\ndef g(x: f64, dy: f64) -> f64:\n    return dy\n", (2, 1), "write @gradient(f)"),
    (ERF + "@gradient(erf)\ndef g(x: f64) -> f64:\n    return x\n", (3, 1), "takes its 1 argument(s) then the cotangent"),
    (ERF + "@gradient(erf)\ndef g(x: f64, dy: f32) -> f64:\n    return x\n", (3, 15), "'dy' must be f64"),
    (ERF + "@gradient(erf)\ndef g(x: f64, dy: f64) -> (f64, f64):\n    return x, dy\n", (3, 28),
     "must return one f64 cotangent per argument (1)"),
    (ERF + "@gradient(erf)\ndef g(x: f64, dy: f64) -> f64:\n    return dy\n@gradient(erf)\ndef h(x: f64, dy: f64) -> f64:\n"
           "    return dy\n", (5, 1), "'erf' already has a gradient, 'g'"),
]


@pytest.mark.parametrize("source, where, message", CASES, ids=[c[2][:40] for c in CASES])
def test_misuse_is_a_located_compile_error(source, where, message):
    with pytest.raises(CompileError) as err:
        compile_source(source, "k.adc")
    assert message in str(err.value)
    line, col = where
    assert (err.value.loc.line, err.value.loc.col) == where, str(err.value)
    assert str(err.value).splitlines()[1:3] == [source.splitlines()[line - 1], " " * (col - 1) + "^"]


def test_the_backward_sees_the_final_value_of_a_name_as_a_python_closure_does():
    module = compile_source("@custom_gradient\ndef f(x: f64) -> f64:\n    e = x * 2.0\n"
                            "    def backward(dy: f64) -> f64:\n        return dy * e\n"
                            "    e = x * 3.0\n    return x, backward\n", "k.adc")
    from adc.ir.interp import run
    from adc.passes.adjoint import vjp

    module, grad = vjp(module, "f")
    assert run(module, grad.func.name, 1.5, 1.0)[0] == 4.5


def test_custom_gradient_kernel_elaborates_to_forward_backward_and_node():
    module = compile_source("@custom_gradient\ndef f(x: f32[N], y: f32[N]) -> f32[N]:\n    e = exp(x)\n"
                            "    t = e * y\n    def backward(dy: f32[N]) -> (f32[N], f32[N]):\n"
                            "        return dy * t, dy * e + x\n    return t + 1.0, backward\n", "k.adc")
    assert list(module.funcs) == ["f_forward", "f_backward", "f"]
    assert format_func(module["f_backward"], locations=False).splitlines()[0] == \
        "func @f_backward(%x: f32[N], %y: f32[N], %t: f32[N], %e: f32[N], %dy: f32[N]) -> (f32[N], f32[N]) {"
    assert format_func(module["f"], locations=False) == (
        "func @f(%x: f32[N], %y: f32[N]) -> f32[N] {\n"
        "  %0, %1, %2 = custom_gradient %x, %y {backward = @f_backward, forward = @f_forward, results = 1}"
        " : f32[N], f32[N], f32[N]\n  return %0\n}\n")


def test_extern_calls_are_elementwise_and_carry_their_gradient():
    # erf and hypot are builtins too: a declaration shadows the builtin of its name in its file
    module = compile_source(ERF + "extern def hypot(x: f64, y: f64) -> f64\n"
                            "@gradient(erf)\ndef g(x: f64, dy: f64) -> f64:\n    return dy\n"
                            "def f(x: f64[B, N], y: f64[N]) -> f64[B, N]:\n    return erf(hypot(x, y)) + hypot(1.0, y)\n",
                            "k.adc")
    text = format_func(module["f"], locations=False)
    assert 'extern_call %x, %0 {gradient = [], library = "", symbol = "hypot"} : f64[B,N]' in text
    assert '{gradient = [@g], library = "", symbol = "erf"} : f64[B,N]' in text
    assert 'extern_call %4, %y {gradient = [], library = "", symbol = "hypot"} : f64[N]' in text
