"""Region functions of one body merged (adc/passes/merge_regions.py): the VJP of a VJP through a
checkpointed loop holding an `if` has copies of its regions (its stored steps and recomputed
segments each differentiate the body); merged, the module has fewer regions and computes the same
bits, interpreted and compiled. Only text that is the same, locations included, merges."""
from __future__ import annotations

import dataclasses

import numpy as np

import adc
from adc import compiler
from adc.errors import Location
from adc.frontend import compile_source
from adc.ir.core import Attrs, FuncRef, Module, Op
from adc.ir.interp import run
from adc.ir.printer import format_func
from adc.ir.verify import verify
from adc.passes.merge_regions import merged_regions
from adc.passes.pipeline import LOWERING, run_pipeline

SOURCE = """
def loss(x: f64[N], n: i64) -> f64:
    h = x
    total = 0.0
    for t in range(n, checkpoint=2):
        h = tanh(h) + x
        if sum(h) > 0.0:
            total = total + sum(h * h)
        else:
            total = total - sum(h)
    return total
"""


def second_order() -> tuple[Module, str]:
    """The VJP of loss's VJP, cleaned up as lowering cleans it, without merging."""
    first = compiler.DERIVATIONS["vjp"](compile_source(SOURCE, "loops.adc"), "loss", None)
    second = compiler.DERIVATIONS["vjp"](first.module, first.function.name, (0,))
    module = second.module.reachable(second.function.name)
    return run_pipeline(module, [p for p in LOWERING if p.name != "merge_regions"]), second.function.name


def test_copies_of_a_region_merge_and_compute_the_same_bits():
    module, name = second_order()
    merged = merged_regions(module)
    verify(merged)
    assert len(merged.regions()) < len(module.regions()) - 10      # 99 -> 78 when written
    assert name in merged.funcs
    rng = np.random.default_rng(0)
    func = module[name]
    args = [np.int64(7) if p.type.dtype.is_int else rng.standard_normal([3] * p.type.rank)
            for p in func.params]
    for want, got in zip(run(module, name, *args), run(merged, name, *args), strict=True):
        np.testing.assert_array_equal(got, want)


def test_merging_repeats_until_no_two_regions_are_alike():
    module, _ = second_order()
    merged = merged_regions(module)
    assert merged_regions(merged).funcs.keys() == merged.funcs.keys()
    texts = {format_func(f).replace(f"@{f.name}(", "@(", 1) for f in merged if f.name in merged.regions()}
    assert len(texts) == len(merged.regions())


def test_regions_at_other_locations_or_kernels_stay_apart():
    """A copy of a region whose ops carry another location is not merged (a bounds error names
    the op it comes from); nor is a kernel, which keeps its name."""
    module = compile_source("def f(x: f64[N]) -> f64[N]:\n    if sum(x) > 0.0:\n        y = x * 2.0\n"
                            "    else:\n        y = x - 1.0\n    return y\n", "f.adc")
    func = module["f"]
    branch = next(op for op in func.ops if op.name == "if")
    then = module[str(branch.attrs["then_branch"])]
    moved = dataclasses.replace(then, name="moved", ops=tuple(
        dataclasses.replace(op, loc=Location("g.adc", 9, 1)) for op in then.ops))
    same = dataclasses.replace(then, name="same")
    ops = []
    for op in func.ops:
        ops.append(op)
        if op is branch:
            for copy in (same, moved):
                attrs = dict(op.attrs, then_branch=FuncRef(copy.name))
                ops.append(Op("if", op.operands, Attrs(attrs), tuple(type(r)(r.type) for r in op.results), op.loc))
    twice = Module({**module.funcs, "f": dataclasses.replace(func, ops=tuple(ops)), "same": same, "moved": moved})
    merged = merged_regions(twice)
    assert "same" not in merged.funcs and "moved" in merged.funcs and "f" in merged.funcs
    assert [str(op.attrs["then_branch"]) for op in merged["f"].ops if op.name == "if"] == [then.name, then.name, "moved"]


def test_a_second_order_gradient_through_the_loop_compiles_merged():
    kernel = adc.compile(SOURCE, "loops.adc").loss
    x = adc.Variable(np.random.default_rng(1).standard_normal(4))
    with adc.GradientTape() as outer:
        with adc.GradientTape() as inner:
            y = kernel(x, 7)
        g = inner.gradient(y, x)
    hessian = outer.jacobian(g, x).numpy()
    gradient = adc.grad(kernel, wrt="x")
    step, x0 = 1e-6, x.numpy()
    by_differences = np.array([(gradient(x0 + step * e, 7).numpy() - gradient(x0 - step * e, 7).numpy()) / (2 * step)
                               for e in np.eye(4)])
    np.testing.assert_allclose(hessian, by_differences, rtol=1e-5, atol=1e-6)
