"""A reshape read at a per-axis position (a nest over rows, a broadcast or transpose of it) maps
each run of axes whose sizes multiply to the same product on its own (ir/reshapes.py): a unit
axis added or dropped costs nothing, and only an axis split into several divides (rules/shape.py)."""
from __future__ import annotations

import numpy as np

from tests.support.ir_kernels import kernel
from tests.support.native import compile_module, run
from tests.support.random_arrays import randn


def test_a_reshape_dropping_a_unit_axis_in_a_nest_over_rows_divides_nowhere():
    # y[s, i, j] = x[s, 1, i, j] * w[i, j], as the JVP of x[1] seeded S times: the slice reads x at
    # the reshape's per-axis position, the broadcast of w makes the nest one over rows
    def body(b, x, w):
        s, _, n, _ = x.type.shape
        row = b.op("slice", x, start=[0, 1, 0, 0], stop=[s, 2, n, n], step=[1, 1, 1, 1])
        shape = [s, n, n]
        return b.op("mul", b.op("reshape", row, shape=shape), b.op("broadcast", w, dims=[1, 2], shape=shape))
    module = kernel("x: f64[S,2,N,N], w: f64[N,N]", body)
    x, w = randn(3, 2, 5, 5).astype(np.float64), randn(5, 5).astype(np.float64)
    (got,) = run(module, x, w)
    np.testing.assert_array_equal(got, x[:, 1] * w)
    text = compile_module(module).llvm_ir
    assert "udiv" not in text and "urem" not in text


def test_reshapes_splitting_merging_and_regrouping_axes_read_per_axis():
    cases = [  # (operand shape, reshaped to, the permutation read through)
        ((4, 6), (4, 2, 3), (2, 0, 1)), ((4, 2, 3), (8, 3), (1, 0)), ((4, 6), (2, 12), (1, 0)),
        ((2, 1, 3, 1), (1, 3, 2), (2, 1, 0)), ((6, 1), (2, 3), (1, 0)), ((2, 3, 5), (5, 6), (1, 0))]
    for shape, to, perm in cases:
        params = "x: f64[" + ",".join(map(str, shape)) + "]"
        module = kernel(params, lambda b, x: b.op("transpose", b.op("reshape", x, shape=list(to)), perm=list(perm)))
        x = randn(*shape).astype(np.float64)
        (got,) = run(module, x)
        np.testing.assert_array_equal(got, x.reshape(to).transpose(perm))


def test_a_reshape_of_symbolic_sizes_read_through_a_broadcast():
    # [A, B*C] -> [A, B, C], read at each (a, b, c, d) of a broadcast: the merged axis splits by C
    def body(b, x, c):
        a, bc = x.type.shape
        split = b.op("reshape", x, shape=[a, 3, c.type.shape[0]])
        shape = [a, 3, c.type.shape[0], 2]
        return b.op("broadcast", split, dims=[0, 1, 2], shape=shape)
    x = randn(4, 15).astype(np.float64)
    (got,) = run(kernel("x: f64[A,3*C], c: f64[C]", body), x, np.zeros(5))
    np.testing.assert_array_equal(got, np.broadcast_to(x.reshape(4, 3, 5)[..., None], (4, 3, 5, 2)))
