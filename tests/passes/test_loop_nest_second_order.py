"""Second derivatives through nests of loops, by the reference interpreter: a `for` (every checkpoint
policy) inside a data-dependent `while` and the other way round, whose state reads a vector only
through a sum the `hoist` pass moves out. Every route (forward-over-reverse, reverse-over-reverse,
a VJP of a VJP) goes through the whole pipeline, verified after each pass, and gives the second
derivative of central differences in float64, of the gradient and of the function twice.

What it guards: a pass that makes region functions (pruned copies of a loop's body) and then
supersedes some must not leave them in the module, where, run by nothing, they were verified (and
compiled) as kernels missing the dimensions their parent gave them."""
import numpy as np
import pytest

from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes.adjoint import vjp
from adc.passes.jacobian import hessian
from adc.passes.pipeline import DEFAULT_PIPELINE, run_pipeline

LOOPS = {"while": ("k{d} = 0", "while s < {limit} and k{d} < 6:", "k{d} += 1"),
         "for": ("", "for i{d} in range(3):", ""),
         "for1": ("", "for i{d} in range(3, checkpoint=1):", ""),
         "for2": ("", "for i{d} in range(3, checkpoint=2):", ""),
         "for3": ("", "for i{d} in range(3, checkpoint=3):", "")}
X, W = 0.3, np.array([0.4, -0.7, 0.2])
STEP = 1e-4


def nest(outer: str, inner: str) -> str:
    """f(x, w): a scalar state updated in the `inner` loop inside the `outer` one; a `while` stops
    on the state's value (its trip count depends on x) or after 6 iterations."""
    loops = list(enumerate((outer, inner)))
    lines = ["s = x"]
    for d, kind in loops:
        before, head, _ = LOOPS[kind]
        lines += [f"{'    ' * d}{before.format(d=d)}"] * bool(before)
        lines.append("    " * d + head.format(d=d, limit=4.0 + d))
    lines.append("        s = s + 0.3 * sin(s) + 0.2 + 0.01 * sum(w)")
    for d, kind in reversed(loops):      # a while's counter ends its body
        after = LOOPS[kind][2]
        lines += ["    " * (d + 1) + after.format(d=d)] * bool(after)
    body = "".join(f"    {line}\n" for line in lines)
    return f"def f(x: f64, w: f64[N]) -> f64:\n{body}    return s * s\n"


def _compiled(module, name):
    """The derivative `name` through the whole pipeline, verified after each pass."""
    return run_pipeline(module.reachable(name), DEFAULT_PIPELINE), name


def _second_derivatives(module) -> dict[str, float]:
    routes = {}
    for mode in ("forward", "reverse"):
        extended, func = hessian(module, "f", 0, mode=mode)
        compiled, name = _compiled(extended, func.name)
        routes[f"hessian {mode}"] = float(run(compiled, name, X, W)[0])
    first, grad = vjp(module, "f", [0])
    second, grad2 = vjp(first, grad.func.name, [0])      # d/dx of <c, df/dx>, c = 1
    compiled, name = _compiled(second, grad2.func.name)
    routes["vjp of vjp"] = float(run(compiled, name, X, W, 1.0, 1.0)[0])
    return routes


@pytest.mark.parametrize("outer, inner", [("while", "for2"), ("while", "for"), ("while", "for1"),
                                          ("while", "for3"), ("for2", "while"), ("for", "for2"),
                                          ("while", "while")])
def test_second_derivatives_through_a_loop_nest_match_differences(outer, inner):
    module = compile_source(nest(outer, inner), "nest.adc")
    first, grad = vjp(module, "f", [0])

    def f(x):
        return float(run(module, "f", x, W)[0])

    def gradient(x):
        return float(run(first, grad.func.name, x, W, 1.0)[0])

    of_gradient = (gradient(X + STEP) - gradient(X - STEP)) / (2 * STEP)
    of_function = (f(X + STEP) - 2 * f(X) + f(X - STEP)) / STEP ** 2
    assert of_gradient == pytest.approx(of_function, rel=1e-4, abs=1e-5)
    for route, value in _second_derivatives(module).items():
        assert value == pytest.approx(of_gradient, rel=1e-6, abs=1e-9), route
