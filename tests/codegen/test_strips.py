"""Row strips (codegen/lowering/strips.py): nests over the same rows that read each other only at their own
row run strip by strip, on one thread and split across the pool, and give NumPy's values; a nest
reading other rows of what a queued nest writes waits for the whole pass; nests over stacked small
matrices (factorizations, solves, products: a VJP's) join them, the values they share in slots."""
import re

import numpy as np
import pytest

from adc.codegen.lowering.lower import lower_module
from adc.codegen.lowering.strips import share_slots
from adc.codegen.native.parallel import RING_BYTES
from adc.codegen.toolchain.target import Target
from adc.compiler import optimize
from adc.frontend import compile_source
from adc.ir.core import Module
from adc.passes.jacobian import gradient
from tests.support.native import run

LAYER_NORM = """
def layer_norm(x: f64[B, C]) -> f64[B, C]:
    m = sum(x, axis=1) / f64(C)
    d = x - m[:, None]
    v = sum(d * d, axis=1) / f64(C)
    return d / sqrt(v + 1e-5)[:, None]
"""

NORMALIZED_TWICE = """
def normalized_twice(x: f64[B, C]) -> f64[B, C]:
    y = x
    for i in range(2):
        m = sum(y, axis=1) / f64(C)
        d = y - m[:, None]
        y = d / sqrt(sum(d * d, axis=1) / f64(C) + 1e-5)[:, None]
    return y
"""

COLUMN_SCALE = """
def column_scale(x: f64[N, N]) -> f64[N, N]:
    return x * sum(x, axis=1)[None, :]
"""

SOFTMAX_CROSS_ENTROPY = """
def loss_and_gradient(x: f64[B, C], t: f64[B, C]) -> (f64, f64[B, C]):
    m = max(x, axis=1)
    e = exp(x - m[:, None])
    s = sum(e, axis=1)
    loss = mean(log(s) + m - sum(x * t, axis=1))
    return loss, e / s[:, None] - t
"""


def _compiled(source: str):
    module = optimize(compile_source(source, "strips.adc"))
    return module, str(lower_module(module, '{"abi": 1}', Target.host().vector_bits))


def _strip_tasks(text: str) -> list[str]:
    """The bodies of the strip tasks an LLVM module defines."""
    return re.findall(r'define internal void @"adc\.strip\.\d+\.task".*?\n}', text, re.S)


@pytest.mark.parametrize("rows", [0, 1, 7, 300], ids=["no-rows", "one-row", "a-few-strips", "threaded"])
def test_a_row_norm_runs_its_three_passes_strip_by_strip(rows):
    """Mean, variance and the normalized rows: each later nest reads the earlier ones' results at
    its own row. 300 rows of 1,500 reach the threading threshold; every row count leaves a short
    last strip."""
    module, text = _compiled(LAYER_NORM)
    (task,) = _strip_tasks(text)
    assert len(re.findall(r"call void @\"adc\.reduce_sum", task)) == 2
    x = np.random.default_rng(rows).standard_normal((rows, 1500))
    d = x - x.mean(1, keepdims=True)
    np.testing.assert_allclose(run(module, x)[0], d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5),
                               rtol=1e-12, atol=1e-12)


def test_a_nest_reading_other_rows_of_a_queued_result_waits_for_its_whole_pass():
    """Row i of x * s[None, :] reads every row's sum: the sums are computed first, over all rows."""
    module, text = _compiled(COLUMN_SCALE)
    assert not _strip_tasks(text)
    x = np.random.default_rng(1).standard_normal((400, 400))
    np.testing.assert_allclose(run(module, x)[0], x * x.sum(1)[None, :], rtol=1e-12)


@pytest.mark.parametrize("rows, columns", [(257, 1000), (3, 40_000)], ids=["on-the-stack", "too-wide-for-it"])
def test_a_returned_mean_waits_so_the_softmax_and_its_gradient_share_strips(rows, columns):
    """The mean loss, a scalar only returned, is computed after the gradient's nest: the max, the
    sum of exps and the gradient run strip by strip. The exps, which only they read, are kept in a
    strip's rows on the thread's stack (RING_BYTES), or, rows too wide for it, in their buffer."""
    module, text = _compiled(SOFTMAX_CROSS_ENTROPY)
    (task,) = _strip_tasks(text)
    assert re.search(r'call void @"adc\.reduce_max', task) and re.search(r'call void @"adc\.(sub|div)', task)
    assert f"alloca [{RING_BYTES} x i8]" in task
    rng = np.random.default_rng(2)
    x, t = rng.standard_normal((rows, columns)) * 3, rng.dirichlet(np.ones(columns), rows)
    loss, gradient = run(module, x, t)
    e = np.exp(x - x.max(1, keepdims=True))
    s = e.sum(1)
    np.testing.assert_allclose(loss, np.mean(np.log(s) + x.max(1) - (x * t).sum(1)), rtol=1e-12)
    np.testing.assert_allclose(gradient, e / s[:, None] - t, rtol=1e-10, atol=1e-14)


def test_a_loop_body_runs_its_nests_one_by_one():
    """A body's nests run once per iteration over the loop's state, mostly small: no strips there
    (their bookkeeping cost an RK4 step of one pendulum 10-30%); the values are the same."""
    module, text = _compiled(NORMALIZED_TWICE)
    assert not _strip_tasks(text)
    x = np.random.default_rng(3).standard_normal((9, 700))
    y = x
    for _ in range(2):
        d = y - y.mean(1, keepdims=True)
        y = d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5)
    kernel_first = Module({"normalized_twice": module["normalized_twice"], **module.funcs}, module.name)  # run's kernel
    np.testing.assert_allclose(run(kernel_first, x)[0], y, rtol=1e-12, atol=1e-12)


SPD_GRADIENT = """
def spd_objective(a: f64[B, 4, 4], b: f64[B, 4]) -> f64:
    l = cholesky(a)
    k = linspace(0.0, 3.0, 4)
    return sum(cho_solve(l, b)) + 2.0 * sum(log(sum(l * f64(k[:, None] == k[None, :]), axis=2)))
"""


@pytest.mark.parametrize("systems", [0, 5, 8, 1003, 40_000], ids=["none", "fewer-than-W", "W", "a-few-strips",
                                                                  "threaded"])
def test_the_vjp_of_small_stacked_systems_runs_as_one_strip(systems):
    """The gradient of a Cholesky, two solves and a log determinant over [B, 4, 4]: factor, solves,
    products and masks read each other only at their own system, so they run strip by strip, the
    4x4 identity (another shape, read by them, reading none of them) running ahead of them; every
    intermediate stays in a strip's rows. Values against the closed form: x = A⁻¹b, and adc's
    gradient w.r.t. a (which reads a's lower triangle) G satisfies G + Gᵀ = F + Fᵀ, F = A⁻¹ - (A⁻¹1)xᵀ."""
    derived, func, _ = gradient(compile_source(SPD_GRADIENT, "spd.adc"), "spd_objective")
    module = optimize(Module({func.name: derived[func.name]}, derived.name))
    text = str(lower_module(module, '{"abi": 1}', Target.host().vector_bits))
    (task,) = _strip_tasks(text)
    for nest in ("cholesky", "triangular_solve", "matmul"):
        assert re.search(rf'call fastcc void @"adc\.{nest}\.', task) or re.search(rf'call void @"adc\.{nest}\.', task)
    rng = np.random.default_rng(systems)
    y = rng.standard_normal((systems, 4, 4))
    a, b = y @ y.transpose(0, 2, 1) + 4 * np.eye(4), rng.standard_normal((systems, 4))
    ga, gb = run(module, a, b)
    inverse = np.linalg.inv(a)
    ones = inverse @ np.ones(4)
    full = inverse - ones[:, :, None] * (inverse @ b[..., None])[:, None, :, 0]
    np.testing.assert_allclose(gb, ones, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ga + ga.transpose(0, 2, 1), full + full.transpose(0, 2, 1), rtol=1e-9, atol=1e-11)


def test_values_never_live_at_once_share_a_slot_of_the_ring():
    """Live ranges (first step, last step), closed: a value dying where another is born overlaps it."""
    assert share_slots([(0, 1), (2, 3), (1, 2), (4, 5), (3, 4)]) == [0, 0, 1, 0, 1]
    assert share_slots([(0, 9), (1, 2), (3, 4), (3, 3)]) == [0, 1, 1, 2]
    assert share_slots([]) == []
