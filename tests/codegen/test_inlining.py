"""Which functions LLVM inlines and optimizes (codegen/lowering/inlining.py): a small loop body is
inlined into its loop in the kernel's optimized glue; a large one stays a function, called from
glue LLVM does not optimize, and its nests stay functions too; from an optimized caller a nest
is called with its buffers as arguments. Both kinds of body compute what the interpreter does.
"""
from __future__ import annotations

import re

import numpy as np

from adc.codegen import emit
from adc.codegen.lowering.inlining import SMALL_BODY_CALLS
from adc.codegen.lowering.lower import lower_module
from adc.codegen.toolchain.target import Target
from adc.ir import interp
from adc.ir.parser import parse_module
from adc.ir.verify import verify
from tests.support.native import call, compile_module

RNG = np.random.default_rng(3)

# x = x * 0.999 + 0.001 * sin(x), row t of y set to x: two nests (the step, the row's store)
SMALL = """
func @step(%t: i64, %x: f64[P], %y: f64[T,P]) -> (f64[P], f64[T,P]) {
  %0 = constant {dtype = f64, value = 0.999} : f64
  %1 = broadcast %0 {dims = [], shape = [P]} : f64[P]
  %2 = mul %x, %1 : f64[P]
  %3 = sin %x : f64[P]
  %4 = constant {dtype = f64, value = 0.001} : f64
  %5 = broadcast %4 {dims = [], shape = [P]} : f64[P]
  %6 = mul %5, %3 : f64[P]
  %7 = add %2, %6 : f64[P]
  %8 = scatter %y, %t, %7 {axis = 0} : f64[T,P]
  return %7, %8
}

func @k(%n: i64, %x: f64[P], %y: f64[T,P]) -> (f64[P], f64[T,P]) {
  %0, %1 = for %n, %x, %y {body = @step, carried = 2, checkpoint = 0} : f64[P], f64[T,P]
  return %0, %1
}
"""

# h = tanh(((h @ w) @ w ...) @ w), one more matmul than a small body may call
MATMULS = SMALL_BODY_CALLS + 1
LARGE = f"""
func @cell(%i: i64, %h: f32[N,N], %w: f32[N,N]) -> f32[N,N] {{
  %0 = matmul %h, %w : f32[N,N]
{"".join(f"  %{j + 1} = matmul %{j}, %w : f32[N,N]" + chr(10) for j in range(MATMULS - 1))}\
  %{MATMULS} = tanh %{MATMULS - 1} : f32[N,N]
  return %{MATMULS}
}}

func @k(%n: i64, %h: f32[N,N], %w: f32[N,N]) -> f32[N,N] {{
  %0 = for %n, %h, %w {{body = @cell, carried = 1, checkpoint = 0}} : f32[N,N]
  return %0
}}
"""


def lowered(text: str) -> tuple[object, str]:
    module = parse_module(text, "inlining")
    verify(module)
    return module, str(lower_module(module, "{}", Target.host().vector_bits))


def definition(llvm: str, name: str) -> str:
    return re.search(rf'^define .*@"{re.escape(name)}"\(.*$', llvm, re.MULTILINE).group(0)


def test_a_small_body_is_inlined_into_its_loop_in_optimized_glue():
    module, llvm = lowered(SMALL)
    assert "optnone" not in definition(llvm, "adc_kernel_k")
    assert "noinline" not in definition(llvm, "adc.region.step")
    assert '@"adc.region.step"' not in emit.emit_llvm(llvm, Target.host())
    args = np.int64(5), RNG.standard_normal(2), np.zeros((7, 2))
    library = compile_module(module)
    for got, want in zip(call(library.address("adc_kernel_k"), module["k"], *args), interp.run(module, "k", *args),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_large_body_stays_a_function_called_from_glue_llvm_does_not_optimize():
    module, llvm = lowered(LARGE)
    assert "optnone" in definition(llvm, "adc_kernel_k")
    assert "noinline" in definition(llvm, "adc.region.cell")
    args = np.int64(3), RNG.standard_normal((6, 6)).astype(np.float32), RNG.standard_normal((6, 6)).astype(np.float32) / 6
    library = compile_module(module)
    (got,) = call(library.address("adc_kernel_k"), module["k"], *args)
    np.testing.assert_allclose(got, interp.run(module, "k", *args)[0], rtol=1e-5, atol=1e-6)


def test_an_optimized_caller_passes_a_nests_buffers_as_arguments():
    # in the body (optimized) the serial way calls the nest itself; in the kernel's optnone glue, its task
    _, llvm = lowered(SMALL)
    step = llvm[llvm.index('define internal i32 @"adc.region.step"'):]
    step = step[:step.index("\n}\n")]
    assert re.search(r'call void @"adc\.\w+\.\d+"\(i64 0, ', step)
    assert not re.search(r'call void @"adc\.\w+\.\d+\.task"\(', step)
    _, llvm = lowered(LARGE)
    kernel = llvm[llvm.index('define i32 @"adc_kernel_k"'):]
    assert not re.search(r'call void @"adc\.\w+\.\d+"\(i64 0, ', kernel[:kernel.index("\n}\n")])


def _body(llvm: str, region: str) -> str:
    text = llvm[llvm.index(f'define internal i32 @"adc.region.{region}"'):]
    return text[:text.index("\n}\n")]


def _nests_called(llvm: str, region: str) -> set[str]:
    return set(re.findall(r'call void @"(adc\.\w+\.\d+)"\(i64 0, ', _body(llvm, region)))


def test_a_large_bodys_nests_stay_functions_while_a_small_bodys_may_be_inlined():
    _, llvm = lowered(LARGE)
    nests = _nests_called(llvm, "cell")
    assert len(nests) == MATMULS + 1
    assert all("noinline" in definition(llvm, name) for name in nests)
    _, llvm = lowered(SMALL)
    nests = _nests_called(llvm, "step")
    assert nests and not any("noinline" in definition(llvm, name) for name in nests)
