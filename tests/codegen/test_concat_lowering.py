"""A nest storing a concat along its last axis walks each operand in a loop of its own
(loops.pieced_loop_nest): values equal NumPy's on every shape — symbolic and static sizes, empty
operands, one-element operands, ranks 1 to 3, each dtype — on 1 and 2 threads (the thread split
cuts the pieces), in the default and the bounds-checked build; and the nest has a loop per
operand, up to MAX_PIECES of them (more would cost LLVM time in proportion)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import adc
from adc.codegen.lowering.lower import lower_module
from adc.codegen.lowering.rules.shape import MAX_PIECES
from adc.codegen.toolchain.target import Target
from tests.support.ir_kernels import kernel

SOURCE = """
def shifted(u: f64[N]) -> f64[3*N-5]:
    return concat([u[1:N-1] * 2.0, u[:N-2] - 3.0, u[2:], reshape(f64(7.0), [1])], axis=0)

def rolled(u: f32[R, N]) -> f32[R, N]:
    return concat([u[:, N-1:], u[:, :N-1]], axis=1)

def joined(a: i64[R, C, K], b: i64[R, C, M], c: i64[R, C, L]) -> i64[R, C, K+M+L]:
    return concat([a, b + 1, c], axis=2)

def masks(a: bool[N], b: bool[M]) -> bool[N+M]:
    return concat([a, b], axis=0)
"""


@pytest.fixture(scope="module", params=[False, True], ids=["default", "check_bounds"])
def module(request):
    return adc.compile(SOURCE, check_bounds=request.param)


@pytest.mark.parametrize("threads", [1, 2])
def test_concats_along_the_last_axis_equal_numpy(module, threads):
    rng = np.random.default_rng(0)
    adc.set_num_threads(threads)
    try:
        for n in (2, 3, 17, 200_003):            # 2: two empty operands; 200,003: split across threads
            u = rng.standard_normal(n)
            want = np.concatenate([u[1:n - 1] * 2.0, u[:n - 2] - 3.0, u[2:], [7.0]])
            np.testing.assert_array_equal(module.shifted(u), want)
        for rows, n in ((1, 1), (3, 5), (300, 1001)):
            u = rng.standard_normal((rows, n)).astype(np.float32)
            np.testing.assert_array_equal(module.rolled(u), np.roll(u, 1, axis=1))
        for k, m, l in ((0, 3, 1), (2, 0, 0), (5, 7, 3)):
            a, b, c = (rng.integers(-9, 9, (4, 3, s)) for s in (k, m, l))
            np.testing.assert_array_equal(module.joined(a, b, c), np.concatenate([a, b + 1, c], axis=2))
        a, b = rng.random(100_001) < 0.5, rng.random(3) < 0.5
        np.testing.assert_array_equal(module.masks(a, b), np.concatenate([a, b]))
    finally:
        adc.set_num_threads(0)


@pytest.mark.parametrize("operands, loops", [(3, 3), (MAX_PIECES, MAX_PIECES), (MAX_PIECES + 1, 1)])
def test_the_nest_of_a_concat_has_a_loop_per_operand_up_to_max_pieces(operands, loops):
    def body(b, x, y):
        parts = [b.op("exp", x), y, x] * operands
        return b.op("concat", *parts[:operands], axis=0)
    llvm = str(lower_module(kernel("x: f64[N], y: f64[M]", body), '{"abi": 1}', Target.host().vector_bits))
    start = llvm.index('define internal void @"adc.concat')
    nest = llvm[start:llvm.index("\n}\n", start)]
    assert len(re.findall(r"^loop\.header[.0-9]*:", nest, re.MULTILINE)) == loops
