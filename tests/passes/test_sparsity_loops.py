"""Sparsity of long loops (adc/passes/sparsity/iterations.py): every iteration walked at once.

Exact rows for indices affine in the loop counter (i, i + 1, i - 1, (i + 1) % N) at 1,500 and
100,000 trips; a recurrence the walk cannot follow falls back to the fixed point. Property: over
random loops (overwrites, scatter_add, running sums, branches on floats and calls in the body,
recurrences), no nonzero of the Jacobian is outside the pattern, with the unrolling limit
lowered so that every loop of two trips or more is walked for all its iterations at once.
"""
from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, strategies as st

from adc.frontend import compile_source
from adc.ir.parser import parse_module
from adc.passes.sparsity import control_flow, jacobian_patterns
from tests.fuzz.budget import fuzz_settings
from tests.support.sparse_problems import dense, differences

STENCIL = """
def f(x: f64[N]) -> f64[N]:
    y = x * 0.0
    s = 0.0
    for i in range(1, N - 1):
        y[i] = sin(x[i]) * x[i - 1] + x[(i + 1) % N]
        s = s + x[i]
    y[0] = s
    return y
"""


def stencil_pattern(n: int) -> np.ndarray:
    want = np.eye(n, dtype=bool)            # x * 0.0 keeps its diagonal: cancellation is not seen
    for i in range(1, n - 1):
        want[i, :] = False
        want[i, [i - 1, i, (i + 1) % n]] = True
    want[0, :] = False
    want[0, 1:n - 1] = True
    return want


def test_a_long_loop_writing_y_i_keeps_its_band():
    for n in (7, 1500):         # walked iteration by iteration, then all at once
        (pattern,) = jacobian_patterns(compile_source(STENCIL), "f", [np.zeros(n)], 0)
        assert (dense(pattern) == stencil_pattern(n)).all(), n


def test_a_loop_of_100000_trips_costs_what_its_rows_cost():
    n = 100_000
    (pattern,) = jacobian_patterns(compile_source(STENCIL), "f", [np.zeros(n)], 0)
    assert pattern.nnz == 3 * (n - 2) + (n - 2) + 1
    assert pattern.indices[pattern.indptr[500]:pattern.indptr[501]].tolist() == [499, 500, 501]


def test_a_recurrence_falls_back_to_the_fixed_point():
    # y[i] reads y[i - 1]: a read of an overwritten value; the fixed point covers it (a loop past
    # the walked trips, which a limit of 8 makes of 300 iterations, quickly)
    source = ("def f(x: f64[N]) -> f64[N]:\n    y = x * 1.0\n    for i in range(1, N):\n"
              "        y[i] = y[i - 1] * x[i]\n    return y\n")
    with mock.patch.object(control_flow, "UNROLLED_TRIPS", 8):
        (pattern,) = jacobian_patterns(compile_source(source), "f", [np.zeros(300)], 0)
    assert dense(pattern)[299, [0, 150, 299]].all()


def test_an_output_per_iteration_of_a_long_scan_is_its_own_row():
    text = ('func @body(%i: i64, %x: f64[N]) -> f64 {\n  %0 = gather %x, %i {axis = 0} : f64\n'
            '  %1 = sin %0 : f64\n  return %1\n}\n'
            'func @f(%x: f64[N]) -> f64[N] {\n  %n = dim {dtype = i64, value = N} : i64\n'
            '  %0 = scan %n, %x {axis = 0, body = @body, carried = 0, length = "N"} : f64[N]\n'
            '  return %0\n}\n')
    (pattern,) = jacobian_patterns(parse_module(text, "scan"), "f", [np.zeros(1100)], 0)
    assert (dense(pattern) == np.eye(1100, dtype=bool)).all()


INDICES = ("i", "i + 1", "i - 1", "(i + 2) % N", "N - 1 - i")
TERMS = ("x[{0}]", "sin(x[{0}])", "s", "x[{0}] * s", "g(x[{0}], s)", "y[{0}]")


@st.composite
def loops(draw):
    """A random loop over x: overwrites and scatter_adds of y at indices affine in i, a carried s
    updated by sums, calls and branches on floats, running sums before and after."""
    def term():
        return draw(st.sampled_from(TERMS)).format(draw(st.sampled_from(INDICES)))

    body = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(("write", "add", "carry", "branch", "cumsum")))
        if kind == "write":
            body.append(f"y[{draw(st.sampled_from(INDICES))}] = {term()} + {term()}")
        elif kind == "add":
            body.append(f"y = scatter_add(y, {draw(st.sampled_from(INDICES))}, {term()}, axis=0)")
        elif kind == "carry":
            body.append(draw(st.sampled_from(("s = s + {0}", "s = g(s, {0})", "s = s * {0}"))).format(term()))
        elif kind == "branch":
            body.append(f"if {term()} > 0.0:\n            s = s * {term()}\n        else:\n            s = s + 1.0")
        else:
            body.append("y = cumsum(y, axis=0)")
    start, stop = draw(st.sampled_from(("0", "1"))), draw(st.sampled_from(("N", "N - 1")))
    init = draw(st.sampled_from(("x * 0.0", "x * 1.0", "cumsum(x, axis=0)")))
    statements = "\n        ".join(body)
    return ("def g(a: f64, b: f64) -> f64:\n    return a * b + sin(a)\n\n"
            f"def f(x: f64[N]) -> f64[N]:\n    y = {init}\n    s = x[1]\n"
            f"    for i in range({start}, {stop}):\n        {statements}\n    y[0] = y[0] + s\n    return y\n")


@fuzz_settings(30)
@given(source=loops(), n=st.sampled_from((4, 7)))
def test_no_nonzero_is_outside_the_pattern_of_loops_walked_all_at_once(source, n):
    module = compile_source(source)
    x = np.random.default_rng(n).uniform(0.5, 1.5, n)
    with mock.patch.object(control_flow, "UNROLLED_TRIPS", 1):
        (at_once,) = jacobian_patterns(module, "f", [x], 0)
    (walked,) = jacobian_patterns(module, "f", [x], 0)
    missed = differences(module, "f", [x], 0, 0) & ~dense(at_once)
    assert not missed.any(), f"moves outside the pattern at {np.argwhere(missed)[:5].tolist()}\n{source}"
    assert not (dense(walked) & ~dense(at_once)).any(), source
