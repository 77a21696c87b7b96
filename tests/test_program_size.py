"""Programs as long and as deep as a user may write them compile and compute the right numbers.

No stage recurses on Python's stack (about 1,000 frames, the default limit, which these tests
keep): structures as deep as the program is long are walked on stacks of their own. Each program
is checked against NumPy in float64 through the reference interpreter, or natively; derivatives
against central differences. The 10,000-statement kernel runs through the front and middle end
and is lowered to LLVM IR (about 3 s); LLVM then takes about 4 s on it and 8 s on its gradient
(docs/language.md, "Program size"), so the native test uses 1,000 statements, past every old limit.
A chain of kernels is compiled natively too: each kernel's callees are inlined when it is compiled,
not all of them when the module is.
"""
from __future__ import annotations

import sys

import llvmlite.binding as llvm
import numpy as np
import pytest

import adc
from adc.codegen.lowering.lower import lower_kernel
from adc.codegen.toolchain.target import Target
from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes.adjoint import vjp
from adc.passes.batch import batch
from adc.passes.pipeline import run_pipeline

X = np.linspace(0.5, 1.4, 7)


def kernel(expression: str, result: str = "f64[N]") -> str:
    return f"def f(x: f64[N]) -> {result}:\n    return {expression}\n"


def statements(n: int, line: str) -> str:
    """A kernel of n statements, y{i} = `line` (in terms of y{i-1} as `y` and x)."""
    body = [f"    y{i} = {line.format(y=f'y{i - 1}')}" for i in range(1, n)]
    return "\n".join(["def f(x: f64[N]) -> f64[N]:", "    y0 = x", *body, f"    return y{n - 1}"]) + "\n"


def repeat(f, n: int):
    def oracle(x):
        y = x
        for _ in range(n):
            y = f(y, x)
        return y
    return oracle


def computed(source: str, name: str = "f") -> np.ndarray:
    """What the program computes on X, elaborated and optimized (the interpreter runs its IR)."""
    (got,) = run(run_pipeline(compile_source(source, "long.adc")), name, X)
    return got


def central_difference(oracle, x, h=1e-6):
    return (oracle(x + h) - oracle(x - h)) / (2 * h)


@pytest.fixture(autouse=True)
def default_recursion_limit():
    """Python's default limit while these tests run: another library imported into the same test
    process (PyTorch's compiler raises it to 3000) must not let a recursion pass unseen."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(min(before, 1000))
    yield
    sys.setrecursionlimit(before)


def test_the_default_recursion_limit_is_in_force():
    assert sys.getrecursionlimit() <= 1000


DEEP = {   # name: (source, NumPy oracle)
    "500-term ** tower (right-nested)": (kernel(" ** ".join(["x"] * 500)), repeat(lambda y, x: x ** y, 499)),
    "500 left-nested additions": (kernel("(" * 500 + "x" + " + 1.0)" * 500), lambda x: x + 500.0),
    "a sum of 10,000 terms": (kernel(" + ".join(["x"] * 10_000)), repeat(lambda y, x: y + x, 9_999)),
    "501 nested negations": (kernel("-(" * 501 + "x" + ")" * 501), lambda x: -x),
    "501 bare minus signs": (kernel("-" * 501 + "x"), lambda x: -x),
    "500 nested calls": (kernel("sin(" * 500 + "x" + ")" * 500), repeat(lambda y, x: np.sin(y), 500)),
    "2,000 chained slices": (kernel("x" + "[:]" * 2_000), lambda x: x),
    "a 1,000-term result dimension": (kernel("x", "f64[" + "N" + " + 1 - 1" * 500 + "]"), lambda x: x),
}


@pytest.mark.parametrize("name", DEEP)
def test_deep_expressions_compute_what_numpy_does(name):
    source, oracle = DEEP[name]
    np.testing.assert_allclose(computed(source), oracle(X), rtol=1e-12)


def test_the_gradient_of_a_500_term_tower_matches_central_differences():
    source, oracle = DEEP["500-term ** tower (right-nested)"]
    module, gradient = vjp(compile_source(source), "f")
    (got,) = run(module, gradient.func.name, X, np.ones_like(X))
    np.testing.assert_allclose(got, central_difference(oracle, X), rtol=1e-6)


def test_a_10000_statement_kernel_through_the_front_and_middle_end_to_llvm_ir():
    module = run_pipeline(compile_source(statements(10_000, "{y} + x"), "long.adc"))
    (got,) = run(module, "f", X)
    np.testing.assert_allclose(got, 10_000 * X, rtol=1e-12)
    context = llvm.create_context()
    try:
        llvm.parse_assembly(str(lower_kernel(module, "f", Target.host().vector_bits)), context=context).verify()
    finally:
        context.close()


def chain(n: int) -> str:
    """k0 .. k{n-1}: each kernel calls the one before it."""
    kernels = ["def k0(x: f64[N]) -> f64[N]:\n    return x * 1.01\n"]
    kernels += [f"def k{k}(x: f64[N]) -> f64[N]:\n    return k{k - 1}(x) * 0.99 + 0.01\n" for k in range(1, n)]
    return "".join(kernels)


def chain_oracle(n: int):
    """What k{n-1} of chain(n) computes."""
    return lambda x: repeat(lambda y, x: y * 0.99 + 0.01, n - 1)(x * 1.01)


def test_a_chain_of_500_kernels_runs_call_by_call_and_differentiates():
    module = compile_source(chain(500), "chain.adc")
    (got,) = run(module, "k499", X)             # the interpreter follows 500 nested calls
    np.testing.assert_allclose(got, chain_oracle(500)(X), rtol=1e-12)
    extended, gradient = vjp(module, "k499")    # inlines them
    (got,) = run(extended, gradient.func.name, X, np.ones_like(X))
    np.testing.assert_allclose(got, 1.01 * 0.99 ** 499, rtol=1e-12)


def test_a_chain_of_300_kernels_natively():
    module = adc.compile(chain(300), "chain.adc")
    np.testing.assert_allclose(module.k299(X).numpy(), chain_oracle(300)(X), rtol=1e-12)
    np.testing.assert_allclose(module.k150(X).numpy(), chain_oracle(151)(X), rtol=1e-12)


def test_a_chain_of_300_custom_gradients_batches():
    # batching a custom gradient batches its forward, which holds the next one
    kernels = ["@custom_gradient\ndef k0(x: f64[N]) -> f64[N]:\n    def backward(dy: f64[N]) -> f64[N]:\n"
               "        return dy * 2.0\n    return x * 2.0, backward\n"]
    kernels += [f"@custom_gradient\ndef k{k}(x: f64[N]) -> f64[N]:\n    def backward(dy: f64[N]) -> f64[N]:\n"
                f"        return dy\n    return k{k - 1}(x) + 1.0, backward\n" for k in range(1, 300)]
    module = compile_source("".join(kernels) + "def f(x: f64[N]) -> f64[N]:\n    return k299(x) * x\n")
    extended, batched = batch(module, "f", [True])
    examples = np.stack([X, 2 * X, X - 1])
    (got,) = run(extended, batched.name, examples)
    np.testing.assert_allclose(got, (2 * examples + 299) * examples, rtol=1e-12)


def test_a_backward_may_name_a_list_nested_3000_deep():
    deep = "[" * 3_000 + "x" + "]" * 3_000
    source = ("@custom_gradient\ndef f(x: f64[N]) -> f64[N]:\n    saved = " + deep + "\n"
              "    def backward(dy: f64[N]) -> f64[N]:\n        kept = saved\n        return dy * 3.0\n"
              "    return x * 2.0, backward\n")
    module, gradient = vjp(compile_source(source), "f")
    (got,) = run(module, gradient.func.name, X, np.ones_like(X))
    np.testing.assert_array_equal(got, np.full_like(X, 3.0))


def test_a_1000_statement_kernel_and_its_gradient_natively():
    module = adc.compile(statements(1_000, "{y} + sin(x)"), "long.adc")
    oracle = repeat(lambda y, x: y + np.sin(x), 999)
    np.testing.assert_allclose(module.f(X).numpy(), oracle(X), rtol=1e-12)
    x = adc.Variable(X)
    with adc.GradientTape() as tape:
        y = adc.reduce_sum(module.f(x))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), central_difference(oracle, X), rtol=1e-7)
