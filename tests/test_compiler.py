"""The compile pipeline (adc/compiler.py) as the driver runs it on a cache miss."""
import re

import numpy as np
import pytest

import adc
from adc import compiler
from adc.codegen.emit import optimized
from adc.codegen.toolchain.target import Target
from adc.errors import CompileError
from adc.ir.parser import parse_module


def test_a_cold_compile_and_its_gradient_parse_no_ir_text(monkeypatch):
    """Kernel and metadata texts printed by this process are not parsed back (see compiler._printed):
    the compile and the VJP's derivation use the modules they were printed from."""
    def refuse(text, name):
        raise AssertionError(f"IR text of {name} parsed back")

    monkeypatch.setattr(compiler, "parse_module", refuse)
    monkeypatch.setenv("ADC_CACHE", "0")
    m = adc.compile("def never_parsed_back(x: f64[N]) -> f64:\n    return sum(sin(x) * x)\n")
    x = adc.Variable(np.array([0.5, -1.0, 2.0]))
    with adc.GradientTape() as tape:
        y = m.never_parsed_back(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cos(x.numpy()) * x.numpy() + np.sin(x.numpy()))


def test_an_ir_module_whose_functions_call_each_other_in_a_cycle_is_an_error_before_any_kernel_compiles():
    # the frontend rejects recursion; kernels are inlined only when compiled, so IR is checked here
    calls = {"f": "g", "g": "h", "h": "f"}
    module = parse_module("".join(f"func @{caller}(%x: f32[N]) -> f32[N] {{\n  %0 = call %x {{callee = @{callee}}} : "
                                  f"f32[N]\n  return %0\n}}\n" for caller, callee in calls.items()))
    with pytest.raises(CompileError, match="recursive call: @f -> @g -> @h -> @f"):
        compiler.kernel_sources(module)


def test_llvm_unrolls_the_loops_of_a_kernel_of_fixed_sizes_only():
    """Fixed sizes: constant trip counts, which LLVM's unroller turns into straight code, so the
    loop over rows of 5 is vectorized across rows (vectors wider than a row's); symbolic sizes
    stay rolled (compiler.lowered_kernel)."""
    source = ("def rows(x: f32[B, C]) -> f32[B]:\n    return sum(exp(x), axis=1)\n\n"
              "def rows5(x: f32[64, 5]) -> f32[64]:\n    return rows(x)\n")
    sources = compiler.kernel_sources(compiler.elaborate(source, "rows.adc"))
    target = Target.host()
    _, unroll_symbolic = compiler.lowered_kernel(sources.ir, "rows.adc", "rows", target)
    fixed, unroll_fixed = compiler.lowered_kernel(sources.ir, "rows.adc", "rows5", target)
    assert (unroll_symbolic, unroll_fixed) == (False, True)

    def widest_vector(unroll: bool) -> int:
        with optimized(fixed, target, unroll=unroll) as module:
            return max(map(int, re.findall(r"<(\d+) x float>", str(module))))
    assert widest_vector(True) > widest_vector(False)
    m = adc.compile(source)
    x = np.random.default_rng(0).standard_normal((64, 5)).astype(np.float32)
    np.testing.assert_allclose(m.rows5(x).numpy(), np.exp(x).sum(axis=1), rtol=1e-6)
