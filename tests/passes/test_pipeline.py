"""The pipeline runner: passes in order, the verifier after each naming the culprit, IR printed on request."""
import io

import pytest

from adc.errors import VerifyError
from adc.ir.core import Func, Module
from adc.ir.parser import parse_module
from adc.ir.printer import format_func
from adc.passes.pipeline import DEFAULT_PIPELINE, Pass, run_pipeline

SOURCE = """\
func @sq(%x: f32[N]) -> f32[N] {
  %0 = mul %x, %x : f32[N]
  return %0
}

func @f(%y: f32[M]) -> f32[M] {
  %0 = call %y {callee = @sq} : f32[M]
  %1 = neg %0 : f32[M]
  %2 = neg %1 : f32[M]
  return %2
}
"""
FINAL_F = "func @f(%y: f32[M]) -> f32[M] {\n  %0 = mul %y, %y : f32[M]\n  return %0\n}\n"


def test_default_pipeline_order_and_result():
    assert [p.name for p in DEFAULT_PIPELINE] == ["expand", "inline", "simplify", "cse", "combine_sums", "hoist", "dce", "prune_loops", "sink_sums",
                                                    "sink_transposes", "merge_regions"]
    out = io.StringIO()
    module = run_pipeline(parse_module(SOURCE), out=out)
    assert out.getvalue() == ""
    assert run_pipeline(module, (), out=out) is module
    assert format_func(module["f"]) == FINAL_F


def test_print_after_all_and_print_after():
    out = io.StringIO()
    run_pipeline(parse_module(SOURCE), print_after_all=True, out=out)
    banners = [line for line in out.getvalue().splitlines() if line.startswith("// -----")]
    assert banners == [f"// ----- IR after {p.name} -----" for p in DEFAULT_PIPELINE]
    assert out.getvalue().endswith(FINAL_F)
    out = io.StringIO()
    run_pipeline(parse_module(SOURCE), print_after={"inline"}, out=out)
    text = out.getvalue()
    assert text.startswith("// ----- IR after inline -----\nfunc @sq") and text.count("// -----") == 1
    assert "%1 = neg %0 : f32[M]" in text


def test_unknown_pass_in_print_after_is_refused():
    with pytest.raises(ValueError, match="unknown pass adjoint"):
        run_pipeline(parse_module(SOURCE), print_after={"adjoint"})


def drop_first_op(module: Module) -> Module:
    """A broken pass: removes the definition of a value that stays in use."""
    f = module["f"]
    return module.replace(Func(f.name, f.params, f.ops[1:], f.returns, f.loc))


def test_verifier_names_the_pass_that_broke_the_ir():
    broken = (DEFAULT_PIPELINE[0], Pass("drop_first_op", drop_first_op))
    with pytest.raises(VerifyError, match="after pass 'drop_first_op': in @f: operand 0 of 'neg'"):
        run_pipeline(parse_module(SOURCE), broken)
    assert run_pipeline(parse_module(SOURCE), broken, verify=False)["f"].ops
