"""Outlined functions that optimize to the same code are generated once (Target.optimize ends
with LLVM's MergeFunctions; emit marks internal functions unnamed_addr, so even the thread tasks
whose addresses go to the pool fold into one), and every caller still gets its own result."""
import re

import numpy as np

import adc
from adc import compiler
from adc.codegen import emit
from adc.codegen.toolchain.target import Target

TWO_PRODUCTS = """
def two(a: f32[M, K], b: f32[M, K], w: f32[K, K]) -> (f32[M, K], f32[M, K]):
    return tanh(a @ w), tanh(b @ w) * 2.0
"""


def _defined(text: str, pattern: str) -> list[str]:
    return [name for name in re.findall(r'^define [^@\n]*@"?([\w.]+)', text, re.M) if re.fullmatch(pattern, name)]


def test_two_identical_products_leave_one_task():
    module = compiler.elaborate(TWO_PRODUCTS, "two.adc")
    llmod = compiler.lower_kernel(compiler.kernel_sources(module).ir, "two.adc", "two", Target.host())
    assert len(_defined(str(llmod), r"adc\.matmul_rows\.\d+\.task")) == 2
    optimized = emit.emit_llvm(llmod, Target.host())
    assert len(_defined(optimized, r"adc\.matmul_rows\.\d+\.task")) == 1
    assert ' unnamed_addr' in optimized


def test_the_merged_products_compute_each_callers_own_result():
    m = adc.compile(TWO_PRODUCTS, "two.adc")
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((300, 64)).astype(np.float32) for _ in range(2))
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    for threads in (1, 2):
        adc.set_num_threads(threads)
        try:
            u, v = m.two(a, b, w)
        finally:
            adc.set_num_threads(0)
        np.testing.assert_allclose(u, np.tanh(a.astype(np.float64) @ w), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(v, np.tanh(b.astype(np.float64) @ w) * 2, rtol=1e-5, atol=1e-6)


def test_internal_definitions_are_unnamed_and_those_llvm_may_inline_are_kept_apart_once():
    text = ('define internal void @"adc.add.3"(i64 %".1", ptr noalias %".2") noinline nounwind\n{\n}\n'
            'define internal void @"adc.add.3.task"(ptr %".1", i64 %".2", i64 %".3") nounwind\n{\n}\n'
            'define internal double @"adc.vm.exp.f64"(double %".1") alwaysinline nounwind readnone\n{\n}\n'
            'define internal i32 @helper(ptr %".1")\n{\n}\n'
            'define i32 @"adc_kernel_k"(ptr %".1") noinline\n{\n}\n'
            'declare void @"free"(ptr %".1")\n')
    once = emit.prepared_for_merging(text)
    lines = once.splitlines()
    assert lines[0] == 'define internal void @"adc.add.3"(i64 %".1", ptr noalias %".2") unnamed_addr noinline nounwind'
    assert lines[3] == 'define internal void @"adc.add.3.task"(ptr %".1", i64 %".2", i64 %".3") unnamed_addr ' \
                       'nounwind "adc.own"="adc.add.3.task"'
    assert lines[6] == 'define internal double @"adc.vm.exp.f64"(double %".1") unnamed_addr alwaysinline nounwind readnone'
    assert lines[9] == 'define internal i32 @helper(ptr %".1") unnamed_addr "adc.own"="helper"'
    assert once.count("unnamed_addr") == 4 and emit.prepared_for_merging(once) == once


# Two copies of one function of ~250 instructions, each with one caller: LLVM inlines a function
# into its only caller whatever its size, not one this large into two.
_BIG_BODY = "\n".join(f"  %v{k} = mul i64 %v{k - 1}, {k + 3}\n  store volatile i64 %v{k}, ptr %p" for k in range(1, 130))
INLINABLE_TWINS = "\n".join(
    f'define internal i64 @"adc.twin.{k}"(i64 %v0, ptr %p) nounwind\n{{\nentry:\n{_BIG_BODY}\n  ret i64 %v129\n}}\n'
    f'define i64 @"caller{k}"(i64 %x, ptr %p) nounwind\n{{\nentry:\n'
    f'  %r = call i64 @"adc.twin.{k}"(i64 %x, ptr %p)\n  ret i64 %r\n}}\n' for k in (1, 2))


def test_twins_llvm_may_inline_are_not_folded_before_the_pipeline():
    """Each stays its only caller's and is inlined there; folded first, one function of two callers
    would be called from both."""
    optimized = emit.emit_llvm(INLINABLE_TWINS, Target.host())
    assert not _defined(optimized, r"adc\.twin\.\d+")
    assert "call i64" not in optimized
