"""The compile pipeline (adc/compiler.py) as the driver runs it on a cache miss."""
import numpy as np
import pytest

import adc
from adc import compiler
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
