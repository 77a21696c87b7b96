"""A loop nest runs after the nests that store what it reads.

Fusion moves a value's loop down into a later nest (a sibling of its shape, or a nest reading it
at each element) and a later nest up into an earlier one. A nest moved up above the nest that had
taken a value it reads read that buffer before anything wrote it. The outer jacobian of an inner
gradient through a checkpointed loop did: the mask of a batched loop (iteration < its count per
example), stored by the nest of a later comparison, was read by the select of the carried values
in the nest of the step before it. valgrind reported the uninitialised read; a kernel reading its
kept block reads the previous call's mask.
"""
import numpy as np
import pytest

import adc
from adc import compiler
from adc.codegen.lowering.fusion import CONTROL_FLOW, plan
from adc.ir.builder import full
from adc.ir.core import Func
from adc.ir.printer import format_module
from tests.support import memcheck
from tests.support.ir_kernels import kernel
from tests.support.native import call, compile_module

LOOP = """
def loss(x: f64[N], w: f64[N, N], n: i64) -> f64:
    h = x
    total = 0.0
    for t in range(n, checkpoint={checkpoint}):
        h = tanh(w @ h) + x
        if sum(h) > 0.0:
            total = total + sum(h * h)
        else:
            total = total - sum(h)
{after}    return total
"""
WHILE = """    while total > 10.0:
        total = total * 0.5
"""
RNG = np.random.default_rng(3)
ARGS = (RNG.standard_normal(4), RNG.standard_normal((4, 4)) * 0.6, 9)


def unwritten_reads(func: Func) -> list[tuple[str, str]]:
    """(op, value) for each buffer a nest (or a matmul, a loop, ...) of `func` reads before the
    nest or op storing it has run, in the order lowering runs them."""
    fusion = plan(func)
    written, found = set(func.params), []
    for op in func.ops:
        if len(op.results) > 1 or op.name in CONTROL_FLOW:
            reads, stores = [v for v in op.operands if v in fusion.materialized], op.results
        elif op.result in fusion.views:
            reads, stores = [fusion.views[op.result]], [op.result]
        elif op.result in fusion.materialized and fusion.has_own_loop(op.result):
            reads, stores = fusion.leaves(op), [op.result, *fusion.stored_by.get(op.result, ())]
        else:
            continue
        found += [(op.name, str(v.type)) for v in reads if v not in written]
        written.update(stores)
    return found


def _masked_step(b, xt, c, z):
    """A batched loop's step, reduced: a mask read through a broadcast by the select of an [S, N]
    value, and a comparison of that value's row sums, of the mask's shape."""
    mask = b.op("gt", c, full(b, 0.0, c.type))
    e = b.op("exp", b.op("transpose", xt, perm=[1, 0]))
    positive = b.op("gt", b.op("reduce_sum", e, axes=[1]), full(b, 0.0, c.type))
    kept = b.op("select", b.op("broadcast", mask, dims=[0], shape=z.type.shape), e, z)
    return e, positive, kept


def test_a_nest_moved_up_never_reads_a_value_moved_down_below_it():
    """The mask moves down into the comparison's nest (its sibling); the select, reading exp at each
    element, may not then move up into exp's nest, which runs before the comparison's."""
    module = kernel("xt: f64[N,S], c: f64[S], z: f64[S,N]", _masked_step)
    func = next(iter(module))
    assert unwritten_reads(func) == []
    lib = compile_module(module)            # kept: its code lives as long as it does
    address = lib.address("adc_kernel_k")
    xt, z = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 3))
    for c in (np.array([1.0, -1.0, 1.0, -1.0]), -np.array([1.0, -1.0, 1.0, -1.0])):     # the block is kept
        e, positive, kept = call(address, func, xt, c, z)
        np.testing.assert_array_equal(kept, np.where(c[:, None] > 0, e, z))
        np.testing.assert_allclose(e, np.exp(xt.T), rtol=1e-15)


def _jacobian_of_gradient(source: str) -> list[Func]:
    """The functions codegen plans for the batched VJP of the VJP of `loss`: what an outer tape's
    jacobian of an inner tape's gradient runs."""
    first = compiler.derive(adc.compile(source, "loops.adc").ir, "loops.adc", "vjp", "loss", (0,))
    second = compiler.derive(format_module(first.module), "loops.adc", "vjp_batched", first.function.name, (0,))
    sources = compiler.kernel_sources(second.module)
    return list(compiler.inlined_kernel(sources.ir, "loops.adc", second.function.name))


@pytest.mark.parametrize("checkpoint, after", [(2, ""), (3, ""), (5, ""), (3, WHILE)],
                         ids=["for-checkpoint-2", "for-checkpoint-3", "for-checkpoint-5", "for-while-checkpoint-3"])
def test_the_jacobian_of_a_gradient_through_checkpointed_loops_reads_only_written_buffers(checkpoint, after):
    """Segments reversed, reversed again and batched: the recording of a segment's stored steps
    runs per example, masked (every K >= 2 builds the same loops; a while after the for too)."""
    late = {f.name: found for f in _jacobian_of_gradient(LOOP.format(checkpoint=checkpoint, after=after))
            if (found := unwritten_reads(f))}
    assert not late, late


@pytest.mark.skipif(memcheck.valgrind() is None, reason="valgrind is not installed")
def test_the_jacobian_of_a_gradient_through_a_checkpointed_loop_is_clean_under_valgrind(tmp_path, valgrind_cache):
    memcheck.assert_clean_under_valgrind(
        "import numpy as np, adc\n"
        f"m = adc.compile({LOOP.format(checkpoint=3, after='')!r}, 'loops.adc')\n"
        f"x, w = adc.Variable(np.array({ARGS[0].tolist()!r})), np.array({ARGS[1].tolist()!r})\n"
        "with adc.GradientTape() as outer:\n"
        "    with adc.GradientTape() as inner:\n"
        f"        y = m.loss(x, w, {ARGS[2]})\n"
        "    g = inner.gradient(y, x)\n"
        "print(outer.jacobian(g, x).numpy().sum())\n", tmp_path, valgrind_cache)
