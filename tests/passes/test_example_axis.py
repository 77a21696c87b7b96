"""The example-axis analysis (adc/passes/example_axis.py) against the Jacobian it predicts.

Property: over random programs of a batch x: f64[B, N] (gathers, scans, reductions, reshapes,
matmuls, concats, pads, scatters, loops, whiles, branches), the analysis says "no mixing" exactly
when the full Jacobian d y / d x, by central differences of the reference interpreter in float64
at two random points, is zero off its diagonal blocks. Programs with the constructs it is
documented to be conservative about (a branch only one arm of which mixes, one example's values
passed into a nested loop, cancelling terms, a mixed part overwritten) hold the safe direction
only: it never says "no mixing" of a program that mixes, which would make batch_jacobian's
answer wrong. Also: every op of the registry has a rule or is listed as unsupported; the index
forms that prove take_along_axis per example; where a refused batch Jacobian points.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.builder import Builder
from adc.ir.core import Value
from adc.ir.interp import run
from adc.ir.ops import OPS
from adc.ir.types import F64, I64, Dim, SymDim, TensorType
from adc.passes.adjoint import vjp
from adc.passes.example_axis import (MIXED, UNSUPPORTED, example_axes, example_axis_rules, function_example_axes,
                                     where_examples_mix)
from adc.passes.jacobian import batch_jacobian

B, N, K = (SymDim.symbol(s) for s in "BNK")

SIGNATURE = ("def f(x: f64[B, N], w: f64[N, N], idx: i64[N], rows: i64[B, N], back: i64[B], "
             "next_rows: i64[B, N]) -> f64[B, N]:")
STEP = 1e-6

# Each step makes {t}: f64[B, N] from earlier values {a} and {b} such that a dependence in the
# program is a non-zero derivative at random points: none adds to a row a constant (a softmax or a
# centering would cancel it), sums a row (a softmax's is 1) or an odd function of it (of a centered
# row of two, sin's is 0), multiplies into an even function (of centered values, with two
# examples, odd and even parts would cancel), saturates a tanh or shrinks its values towards 0 (a
# derivative below the differences' resolution); no condition or argmax is on a tie (a mean of
# centered rows is 0), where a step of the differences would jump; every step reads all of each
# operand, so no part of a value where examples mixed is sliced or overwritten away (a loop over
# the examples overwrites a row with a function of it).
KEEPING = (
    "{t} = tanh({a}) * ({b} + 2.0)",
    "{t} = sin({a}) + sigmoid({b})",
    "{t} = cumsum({a}, axis=1) * 0.5",
    "{t} = tanh({a} @ w)",
    "{t} = softmax({a}, axis=1)",
    "{t} = {a} - mean({a}, axis=1, keepdims=True)",
    "{t} = take({a}, idx, axis=1)",
    "{t} = take_along_axis({a}, rows, 1)",
    "{t} = transpose(tanh(transpose({a})) * 2.0)",
    "{t} = reshape(sin(reshape({a}, [B * N])), [B, N])",
    "{t} = concat([{a}[:, :1], tanh({b}[:, 1:])], axis=1) * sigmoid({a} + {b})",
    "{t} = pad({a}[:, 1:], [[0, 0], [0, 1]]) + {b} * {a}",
    "{t} = {a} * 1.0\n{t}[:, argmax(sum({b}, axis=0) + w[0])] = tanh(sum(sin({b}), axis=1))",
    "{t} = {a}\nfor i in range(2):\n    {t} = tanh({t} * {b} + {b})",
    "{t} = {a} * 1.0\nfor i in range(N):\n    {t}[:, i] = sin({t}[:, i] + {b}[:, i])",
    "{t} = tanh({a})\nfor s in range(N):\n    {t} = tanh(reshape({b}[:, s], [B, 1]) * {t} + {t})",
    "{t} = {a}\nwhile max(abs({t})) > 0.5:\n    {t} = {t} * 0.5",
    "{t} = {a} * 1.0\nfor r in range(B):\n    {t}[r] = tanh({b}[r]) * sum(sin({a}[r] + 0.5))",
    "{t} = {a} * 1.0\nfor r in range(B):\n    if sum({b}[r]) > 0.1:\n        {t}[r] = tanh({a}[r]) * 2.0",
    "if mean({a}) > 0.1:\n    {t} = tanh({a}) * ({b} + 2.0)\nelse:\n    {t} = sin({a}) + {b}",
)
# (a permutation of the examples keeps the value too: twice, it would give it back)
MIXING = (
    "{t} = {a} - mean({a}, axis=0)",
    "{t} = cumsum({a}, axis=0) * 0.5",
    "{t} = take({a}, back, axis=0) + tanh({a})",
    "{t} = take_along_axis({a}, next_rows, 0) + tanh({a})",
    "{t} = tanh(({a} @ transpose({b})) @ {a} * 0.1)",
    "{t} = concat([{a}[1:], {a}[:1]], axis=0) + tanh({a})",
    "{t} = {a}\nfor i in range(2):\n    {t} = tanh({t} + mean({t}, axis=0))",
    "{t} = {a} * 1.0\nfor r in range(B):\n    {t}[r] = tanh({a}[(r + 1) % B]) + {a}[r]",
    "{t} = {a} * 0.5\nfor r in range(1, B):\n    {t}[r] = tanh({t}[r - 1]) + {a}[r]",
)
# not mixing, but the analysis says they may (documented as conservative)
CONSERVATIVE = (
    "if mean({a}) > 1000.0:\n    {t} = {a} - mean({a}, axis=0)\nelse:\n    {t} = tanh({a})",
    "{t} = {a} * 1.0\nfor r in range(B):\n    u = {a}[r]\n    for k in range(2):\n        u = tanh(u)\n    {t}[r] = u",
    "{t} = ({a} + mean({a}, axis=0)) - mean({a}, axis=0)",
    "{t} = {a} - mean({a}, axis=0)\nfor i in range(N):\n    {t}[:, i] = tanh({b}[:, i])",
)


@st.composite
def programs(draw, steps) -> tuple[str, int, int]:
    """The source of `f`, a random chain of steps from x, and the sizes B, N."""
    names, lines = ["x"], []
    for k in range(draw(st.integers(1, 5))):
        template = draw(st.sampled_from(steps))
        made = template.format(t=f"v{k}", a=draw(st.sampled_from(names)), b=draw(st.sampled_from(names)))
        lines += made.splitlines()
        names.append(f"v{k}")
    return kernel(lines + [f"return {names[-1]}"]), draw(st.sampled_from((2, 3))), draw(st.sampled_from((2, 3, 4)))


def kernel(lines) -> str:
    return f"{SIGNATURE}\n" + "".join(f"    {line}\n" for line in lines)


def arguments(batch: int, size: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    permutations = np.array([rng.permutation(size) for _ in range(batch)])
    return [rng.uniform(-1.5, 1.5, (batch, size)), rng.standard_normal((size, size)) / size,
            rng.permutation(size), permutations, np.arange(batch)[::-1].copy(),
            (np.arange(batch)[:, None] + np.ones((batch, size), int)) % batch]


def mixes_numerically(module, batch: int, size: int) -> bool:
    """Whether d y[b] / d x[c] is non-zero for some b != c, at either of two random points."""
    for seed in (0, 1):
        args = arguments(batch, size, seed)
        columns = []
        for c, j in np.ndindex(batch, size):
            moved = [args[0].copy(), args[0].copy()]
            moved[0][c, j] += STEP
            moved[1][c, j] -= STEP
            plus, minus = (run(module, "f", m, *args[1:])[0] for m in moved)
            columns.append((plus - minus) / (2 * STEP))
        jacobian = np.stack(columns, axis=-1).reshape(batch, size, batch, size)
        off = max((np.abs(jacobian[b, :, c]).max() for b in range(batch) for c in range(batch) if b != c), default=0.0)
        if off > 1e-9 * (1.0 + np.abs(jacobian).max()):
            return True
    return False


def says_no_mixing(module) -> bool:
    return function_example_axes(module, "f", 0)[0] in (None, 0)


@settings(max_examples=150, deadline=None)
@given(programs(KEEPING + MIXING))
def test_no_mixing_is_said_exactly_when_the_jacobian_is_block_diagonal(program):
    source, batch, size = program
    module = compile_source(source, "random.adc")
    assert says_no_mixing(module) == (not mixes_numerically(module, batch, size)), source


@settings(max_examples=100, deadline=None)
@given(programs(KEEPING + MIXING + CONSERVATIVE))
def test_no_mixing_is_never_said_of_a_program_that_mixes(program):
    source, batch, size = program
    module = compile_source(source, "random.adc")
    if says_no_mixing(module):
        assert not mixes_numerically(module, batch, size), source


def test_each_conservative_step_is_block_diagonal_but_called_mixing():
    # what the module's docstring lists as conservative, so that a sharper rule updates the list
    for template in CONSERVATIVE:
        module = compile_source(kernel(template.format(t="y", a="x", b="x").splitlines() + ["return y"]),
                                "conservative.adc")
        assert function_example_axes(module, "f", 0) == (MIXED,) and not mixes_numerically(module, 3, 4), template


def test_every_op_has_a_rule_or_is_listed_as_unsupported():
    assert set(UNSUPPORTED) <= set(OPS)
    assert [name for name in OPS if name not in example_axis_rules and name not in UNSUPPORTED] == []
    assert not set(UNSUPPORTED) & set(example_axis_rules)



def rows_of_flat_x(rows: Dim, high: Dim, put_back: bool = False) -> tuple:
    """take_along_axis's gather: x flattened to [B*N] read at r * N + clamp(i, 0, high) for row r of
    `rows`; `put_back` scatters tanh of what it read into zeros at the same places, as [B, N]."""
    b = Builder()
    x = b.param("x", TensorType(F64, (B, N)))
    i = b.param("i", TensorType(I64, (rows, K)))

    def spread(value: Dim) -> Value:
        return b.op("broadcast", b.op("constant" if isinstance(value, int) else "dim", dtype=I64, value=value),
                    dims=[], shape=[rows, K])
    clamped = b.op("maximum", b.op("minimum", i, spread(high)), spread(0))
    rows_start = b.op("mul", b.op("iota", axis=0, dtype=I64, shape=[rows, K]), spread(N))
    index = b.op("add", clamped, rows_start)
    taken = b.op("gather", b.op("reshape", x, shape=[B * N]), index, axis=0)
    if put_back:
        zeros = b.op("broadcast", b.op("constant", dtype=F64, value=0.0), dims=[], shape=[B * N])
        taken = b.op("reshape", b.op("scatter", zeros, index, b.op("tanh", taken), axis=0), shape=[B, N])
    return example_axes(b.finish("f", [taken]), 0)


def test_a_gather_along_the_example_axis_is_per_example_where_the_indices_stay_in_their_row():
    assert rows_of_flat_x(B, N - 1) == (0,)
    assert rows_of_flat_x(B, N - 1, put_back=True) == (0,)
    assert rows_of_flat_x(B, N) == (MIXED,)            # clamped to N: row b's last index is in row b + 1
    assert rows_of_flat_x(B + 1, N - 1) == (MIXED,)    # row B is clamped into row B - 1


@pytest.mark.parametrize("params, body, result, mixes", [
    ("x: f64[B, N], i: i64[B, K]", "take_along_axis(x, i, 1)", "f64[B, K]", False),
    ("x: f64[B, N], i: i64[K, N]", "take_along_axis(x, i, 0)", "f64[K, N]", True),
    ("x: f64[B, N]", "reshape(tanh(reshape(x, [B * N])), [B, N])", "f64[B, N]", False),   # merged, split back
    ("x: f64[B, N]", "reshape(x, [N, B])", "f64[N, B]", True),
    ("x: f64[B, 6]", "x[:, ::2] * 2.0", "f64[B, 3]", False),
    ("x: f64[6, N]", "x[::2, :] * 2.0", "f64[3, N]", True),
])
def test_example_axes_of_small_kernels(params, body, result, mixes):
    module = compile_source(f"def f({params}) -> {result}:\n    return {body}\n", "small.adc")
    assert (function_example_axes(module, "f", 0)[0] != 0) == mixes


@pytest.mark.parametrize("step, mixes", [("tanh(y * x)", False), ("tanh(y + mean(y, axis=0))", True)])
def test_the_vjp_of_a_loop_its_scan_and_reversed_for_keeps_or_mixes_as_the_loop_does(step, mixes):
    # what a batch Jacobian of a gradient (nested tapes) analyses: scan stacks the states, for runs back
    source = f"def f(x: f64[B, N]) -> f64[B, N]:\n    y = x\n    for i in range(3, checkpoint=1):\n" \
             f"        y = {step}\n    return y\n"
    module, gradient = vjp(compile_source(source, "loop.adc"), "f")
    assert {"scan", "for"} <= {op.name for op in gradient.func.ops}
    for param in (0, 1):        # x, and the cotangent of y
        assert function_example_axes(module, gradient.func.name, param) == ((MIXED,) if mixes else (0,))


@pytest.mark.parametrize("body, line, op", [
    ("    y = tanh(x) * 2.0\n    z = y - mean(y, axis=0)\n    return z * x\n", 3, "reduce_sum"),
    ("    y = x\n    for i in range(2):\n        y = tanh(y + mean(y, axis=0))\n    return y\n", 3, "for"),
    ("    return tanh(x) @ (transpose(x) @ x)\n", 2, "matmul"),
])
def test_a_batch_jacobian_of_examples_that_mix_points_at_where_they_mix(body, line, op):
    module = compile_source(f"def f(x: f64[B, N]) -> f64[B, N]:\n{body}", "mixing.adc")
    assert where_examples_mix(module, "f", 0).name == op
    with pytest.raises(CompileError, match=rf"examples mix here \({op}\)") as error:
        batch_jacobian(module, "f", 0)
    assert error.value.line == line
