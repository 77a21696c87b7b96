"""A kernel's every return goes by one block that gives back what it allocated (Emitter.leave):
a failed check, a region's failure passed on, an interrupt and the normal end. A release at each
way out grew the glue with ways out x blocks: a second-order gradient through a loop had 3,721
calls of free in one kernel, and LLVM took 6.0 s to optimize it (3.9 s now)."""
import dataclasses

import numpy as np
import pytest

import adc
from adc import compiler
from adc.codegen.toolchain.target import Target


def chained_loops(n: int) -> str:
    """A kernel running `n` loops one after another: each call of a loop's body is a way out."""
    lines = ["def chain(x: f64[N], k: i64) -> f64[N]:", "    h = x"]
    for i in range(n):
        lines += ["    for t in range(k):", f"        h = tanh(h) * {i + 1}.0"]
    return "\n".join(lines + ["    return h"]) + "\n"


def _glue(n: int, check_bounds: bool) -> str:
    module = compiler.elaborate(chained_loops(n), "chain.adc")
    target = dataclasses.replace(Target.host(), check_bounds=check_bounds)
    text = str(compiler.lower_kernel(compiler.kernel_sources(module).ir, "chain.adc", "chain", target))
    glue = text[text.index('@"adc_kernel_chain"'):]
    return glue[:glue.index("\n}")]


@pytest.mark.parametrize("check_bounds", [False, True], ids=["default", "checked"])
def test_the_glue_gives_back_its_blocks_in_one_place_however_many_ways_out(check_bounds):
    glues = {n: _glue(n, check_bounds) for n in (2, 4, 8)}
    counts = {n: (glue.count('@"free"'), glue.count("ret i32")) for n, glue in glues.items()}
    assert counts[2] == counts[4] == counts[8], counts
    assert counts[2][0] > 0


@pytest.mark.parametrize("check_bounds", [False, True], ids=["default", "checked"])
def test_chained_loops_compute_what_numpy_does(check_bounds):
    m = adc.compile(chained_loops(4), "chain.adc", check_bounds=check_bounds)
    x = np.linspace(-1.0, 1.0, 11)
    want = x
    for i in range(4):
        for _ in range(3):
            want = np.tanh(want) * (i + 1)
    np.testing.assert_allclose(m.chain(x, 3), want, rtol=1e-12)
