"""What a kernel module keeps and what it calls: the gemm kernels and the steps of float sums'
cascades live in the runtime library, compiled once per target; the vector math stays inlined in
the module's fused loops."""
from __future__ import annotations

import re

import pytest

from adc import compiler
from adc.abi import RUNTIME_CASCADE_STEPS, runtime_cascade_symbol, runtime_gemm_symbol, runtime_symbols
from adc.codegen import emit
from adc.codegen.native import runtime_library
from adc.codegen.toolchain.target import Target


def lowered(source: str):
    return compiler.to_llvm(compiler.elaborate(source, "k.adc"), Target.host())


def test_a_matmul_calls_the_runtime_gemm_and_defines_none():
    text = emit.emit_llvm(lowered("def f(x: f32[B, I], w: f32[I, O]) -> f32[B, O]:\n    return x @ w\n"),
                          Target.host())
    assert re.search(rf"declare .*@{runtime_gemm_symbol('f32')}\(", text)
    assert "micro" not in text and not re.search(rf"define .*@{runtime_gemm_symbol('f32')}\(", text)


def test_the_runtime_library_defines_every_exported_symbol():
    text = str(runtime_library.runtime_module(Target.host()))
    for name in runtime_symbols():      # functions, and the interrupt counter's pointer
        assert re.search(rf'define .*@"?{name}"?\(|^@"?{name}"? = global', text, re.MULTILINE), name


@pytest.mark.parametrize("expression, result, nest", [("tanh(exp(x) + d)", "f32[N]", "tanh"),
                                                      ("sin(x) * d", "f32[N]", "mul"),
                                                      ("sum(cos(x) + d)", "f32", "reduce_sum")])
def test_vector_math_stays_inlined_and_vectorized_in_the_kernel_module(expression, result, nest):
    """sin and cos: both the fast loop and the exact rerun are vector code without calls."""
    asm = emit.emit_assembly(lowered(f"def f(x: f32[N], d: f32) -> {result}:\n    return {expression}\n"),
                             Target.host())
    start = re.search(rf"^adc\.{nest}\.\d+(\.task)?:", asm, re.MULTILINE).start()   # the fused expression's nest
    loop = asm[start:asm.index(".Lfunc_end", start)]
    assert re.search(r"%[yz]mm\d+", loop)
    cascade = {runtime_cascade_symbol(step, "f32") for step in RUNTIME_CASCADE_STEPS}    # a sum's, once a block
    assert set(called(loop)) <= cascade, called(loop)


def called(asm: str) -> list[str]:
    """What each call in `asm` calls: its symbol, or, for a call through a register (the JIT's code
    model), the symbol last loaded into that register."""
    loaded, calls = {}, []
    for line in asm.splitlines():
        if load := re.match(r"\s*movabsq\s+\$([\w.]+), (%\w+)", line):
            loaded[load[2]] = load[1]
        elif call := re.match(r"\s*call\w*\s+\*?(\S+)", line):
            calls.append(loaded.get(call[1], call[1]))
    return calls
