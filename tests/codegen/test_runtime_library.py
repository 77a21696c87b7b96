"""What a kernel module keeps and what it calls: the gemm kernels live in the runtime library,
compiled once per target; the vector math stays inlined in the module's fused loops."""
from __future__ import annotations

import re

from adc import compiler
from adc.abi import runtime_gemm_symbol
from adc.codegen import emit, runtime_library
from adc.codegen.target import Target


def lowered(source: str):
    return compiler.to_llvm(compiler.elaborate(source, "k.adc"), Target.host())


def test_a_matmul_calls_the_runtime_gemm_and_defines_none():
    text = emit.emit_llvm(lowered("def f(x: f32[B, I], w: f32[I, O]) -> f32[B, O]:\n    return x @ w\n"),
                          Target.host())
    assert re.search(rf"declare .*@{runtime_gemm_symbol('f32')}\(", text)
    assert "micro" not in text and not re.search(rf"define .*@{runtime_gemm_symbol('f32')}\(", text)


def test_the_runtime_library_defines_every_exported_symbol():
    text = str(runtime_library.runtime_module(Target.host()))
    for name in runtime_library.exported_symbols():
        assert re.search(rf'define .*@"?{name}"?\(', text), name


def test_vector_math_stays_inlined_and_vectorized_in_the_kernel_module():
    asm = emit.emit_assembly(lowered("def f(x: f32[N], d: f32) -> f32[N]:\n    return tanh(exp(x) + d)\n"),
                             Target.host())
    start = re.search(r"^adc\.tanh\.\d+:", asm, re.MULTILINE).start()   # the fused expression's nest
    loop = asm[start:asm.index(".Lfunc_end", start)]
    assert re.search(r"%[yz]mm\d+", loop)
    assert not re.search(r"^\s*call", loop, re.MULTILINE)
