"""A product in a loop's body splits across threads only when large (rules/matmul.py): its
operands were written on this thread the iteration before, so a split hands them to another core
every iteration. Which regions run once per iteration is Module.looped_regions: loops' bodies, a
while's condition, and what those run; a branch of the kernel itself runs once per call."""
import re

import numpy as np
import pytest

import adc
from adc import compiler
from adc.codegen.lowering.rules.matmul import GEMM_WORK_SHIFT, LOOP_GEMM_WORK_SHIFT
from adc.codegen.toolchain.target import Target

SOURCE = """
def stepped(a: f32[M, K], w: f32[K, K], flag: bool, n: i64) -> f32[M, K]:
    if flag:
        y = a @ w
    else:
        y = a @ w * 2.0
    h = y
    for t in range(n):
        if flag:
            h = tanh(h @ w)
        else:
            h = h @ w * 0.5
    while sum(h @ w) > 1.0e6:
        h = h * 0.5
    return h
"""


def _functions(llvm_text: str) -> dict[str, str]:
    """Each LLVM function's name -> its body's text."""
    found = {}
    for m in re.finditer(r'define [^@]*@"?([\w.]+)"?\(', llvm_text):
        found[m.group(1)] = llvm_text[m.end():llvm_text.find("\n}", m.end())]
    return found


def _shifts(body: str) -> set[int]:
    """The constant right shifts of a function: how its products' multiply-adds are weighed."""
    return {int(s) for s in re.findall(r"lshr i64 [^,\n]+, (\d+)", body)}


def test_loops_bodies_and_what_they_run_are_the_looped_regions():
    module = compiler.elaborate(SOURCE, "stepped.adc")
    regions = module.regions()
    looped = module.looped_regions()
    branches = [name for name in regions if "_if" in name]
    assert len(branches) == 4 and looped < regions
    # the kernel's own if runs once per call; the if in the for's body, the for's body, and the
    # while's condition and body once per iteration
    assert sorted(regions - looped) == sorted(branches)[:2]
    assert set(sorted(branches)[2:]) <= looped and any("_for" in name for name in looped)
    assert any("_while" in name for name in looped) and any("_cond" in name for name in looped)


def test_a_product_in_a_loops_body_is_weighed_for_splitting_as_a_loops():
    module = compiler.elaborate(SOURCE, "stepped.adc")
    looped = module.looped_regions()
    ir_text = compiler.kernel_sources(module).ir
    functions = _functions(str(compiler.lower_kernel(ir_text, "stepped.adc", "stepped", Target.host())))
    weighed = {name.removeprefix("adc.region."): _shifts(body) for name, body in functions.items()
               if name.startswith("adc.region.") and "matmul_rows" in body}
    assert len(weighed) == 5        # both top-level branches, both looped branches, the while's condition
    for name, shifts in weighed.items():
        assert shifts == ({LOOP_GEMM_WORK_SHIFT} if name in looped else {GEMM_WORK_SHIFT}), name


@pytest.mark.parametrize("flag", [True, False])
def test_a_loops_products_compute_the_same_on_any_thread_count(flag):
    m = adc.compile(SOURCE)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 512)).astype(np.float32)
    w = (rng.standard_normal((512, 512)) / 24).astype(np.float32)
    results = []
    for threads in (1, 2, 3):
        adc.set_num_threads(threads)
        try:
            results.append(np.asarray(m.stepped(a, w, flag, 4)))
        finally:
            adc.set_num_threads(0)
    y = a @ w.astype(np.float64) * (1.0 if flag else 2.0)
    for _ in range(4):
        y = np.tanh(y @ w) if flag else y @ w * 0.5
    while np.sum(y @ w) > 1.0e6:
        y = y * 0.5
    np.testing.assert_allclose(results[0], y, rtol=2e-3, atol=2e-4)
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])
