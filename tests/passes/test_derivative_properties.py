"""Property: the VJP and the JVP of random programs agree with central finite differences and with
each other (the dot-product identity), on the interpreter.

Hypothesis draws float64 programs of smooth, domain-guarded ops (tests/support/programs.py:
arithmetic with broadcasting, reductions with keepdims, slicing, transposes, matmuls, pads,
concats, calls of other kernels, of @custom_gradient kernels and of extern functions
with their @gradient); the adjoint pass differentiates the main kernel, the reference interpreter
runs it. First order for every program, second order (the pass applied to its own output)
for some. The compiled route is fuzzed in tests/fuzz/.
"""
from hypothesis import given, settings

from adc.frontend import compile_source
from tests.support.gradcheck import check_jvp, check_vjp
from tests.support.programs import MAIN, programs
from tests.support.vocabulary import Options

# the arithmetic, reduction, matmul and shape forms, calls and extern functions, all of small float inputs;
# no stop_gradient: differences of the IR see through it (the fuzz tests take differences of a twin)
SMOOTH = Options(floats=("f64",), others=(), smooth=True, max_depth=4, max_statements=2, max_helpers=1,
                 stop_gradient=False, forms=("unary", "binary", "reduce", "matmul", "slice", "transpose", "concat",
                                             "pad", "call", "extern"), static=(1, 2, 3), sizes=(1, 3, 4))


@settings(max_examples=100, deadline=None)
@given(programs(SMOOTH))
def test_first_order_random_programs(program):
    check_vjp(compile_source(program.source, "random.adc"), MAIN, program.arguments(), order=1, rtol=1e-4, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(programs(SMOOTH))
def test_second_order_random_programs(program):
    check_vjp(compile_source(program.source, "random.adc"), MAIN, program.arguments(), order=2, rtol=1e-4, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(programs(SMOOTH))
def test_forward_mode_on_random_programs(program):
    # the JVP against finite differences, and ⟨J·t, c⟩ = ⟨t, Jᵀ·c⟩ against the adjoint pass
    check_jvp(compile_source(program.source, "random.adc"), MAIN, program.arguments(), rtol=1e-4, atol=1e-6)
