"""Where a function's temporaries live: parts of one block, laid out from the run-time dims.

A function's temporaries (materialized values with no buffer of their own), the spare
buffers of its loops' carried results and the blocks of the regions it runs are parts of
one block, each at a 64-byte aligned offset (`layout`). A kernel allocates its block at
entry and gives it back at exit, kept for its next call (kept_blocks.py); it returns 1 when
the block could not be allocated. A region's block is a part of its parent's, so a loop
allocates nothing per iteration. Values a scan's length sizes are allocated apart, once
the scan ran.

    block: | temporary 0 | temporary 1 | spare of a carried result | levels of a column sum | block of region @body |
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import llvmlite.ir as ir

from adc.abi import STATUS_NO_MEMORY
from adc.codegen.lowering import bounds
from adc.codegen.lowering.declarations import libc
from adc.codegen.lowering.element_types import ELEMENT_BYTES
from adc.codegen.lowering.fusion import Plan
from adc.codegen.lowering.loops import I8, I32, I64, NOWRAP, PTR, i64
from adc.codegen.lowering.rules.control_flow import CARRYING
from adc.codegen.lowering.schedule import as_lowered
from adc.codegen.lowering.summation import column_levels_bytes
from adc.ir.core import Func, Op, Value, children_first
from adc.ir.types import num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter

ALIGNMENT = 64


def share_scatter_buffers(em: Emitter) -> None:
    """The scatter bases filled in their scatter's buffer get it (once it has one): the last of a
    chain of scatters first, whose base is the one before's result."""
    for value, scatter in reversed(em.plan.scattered_into.items()):
        if scatter in em.buffers:
            em.buffers[value] = em.buffers[scatter]


def _filled(plan: Plan, value: Value) -> Value:
    """The value whose buffer `value` is computed in: the last scatter of the chain it is a base of, or itself."""
    while value in plan.scattered_into:
        value = plan.scattered_into[value]
    return value


def allocate_sized_by_scans(em: Emitter, values: Sequence[Value], spares: bool = False) -> None:
    """Buffers for those of `values` a scan's length sizes, which no block holds (its size is known
    only once the scan ran), and with `spares` (a loop's carried results) their spare buffers:
    allocated here, freed when the function returns."""
    late = [v for v in values if v.type.symbols & em.late]
    for v in late:
        scatter = _filled(em.plan, v)      # a scatter's base is made in the scatter's buffer
        if scatter not in em.buffers:
            size = em.bytes_of(scatter)
            em.buffers[scatter] = bounds.track(em, em.allocate(size), size, bounds.describe(em, scatter), "temporary")
        em.buffers[v] = em.buffers[scatter]
        if spares and v not in em.spares:
            size = em.bytes_of(v)
            em.spares[v] = bounds.track(em, em.allocate(size), size, "the spare of " + bounds.describe(em, v), "spare")


def place_temporaries(em: Emitter, given: ir.Value | None) -> None:
    """Give each temporary, spare and region block of `em`'s function its part of one block: the
    `given` one (a region's, from its parent) or, in a kernel, its own (unless it needs none),
    kept for its next call (kept_blocks.py)."""
    temps, spares = _block_contents(em.func, em.plan, em.late)
    sizes = _block_sizes(em, em.func, em.plan)
    total, offsets = layout(em, sizes)
    owned = None
    if given is None and sizes:
        free = libc(em.llmod, "free", ir.VoidType(), [PTR])
        owned = bounds.take(em, em.func.name, total, lambda size: _allocate(em, size), lambda ptr: em.b.call(free, [ptr]))
    block = given if given is not None else owned
    if owned is not None:
        slot = em.head.alloca(PTR)
        em.head.store(ir.Constant(PTR, None), slot)     # null until allocated: what leave frees
        em.b.store(owned, slot)
        em.owned.append(slot)
        em.kept[slot] = em.func.name
    pointers = [em.b.gep(block, [offset], source_etype=I8, inbounds=True) for offset in offsets]
    sums = [op.result for op in column_sums(em.func, em.late)]
    bounds.track_block(em, pointers, sizes, offsets, temps, spares, sums, em.func.regions(), given)
    em.buffers.update(zip(temps, pointers))
    em.spares = dict(zip(spares, pointers[len(temps):]))
    em.levels = dict(zip(sums, pointers[len(temps) + len(spares):]))
    em.scratch = dict(zip(em.func.regions(), pointers[len(temps) + len(spares) + len(sums):]))


def _block_contents(func: Func, fusion: Plan, late: frozenset[str]) -> tuple[list[Value], list[Value]]:
    """The values a function's block of temporaries holds: the materialized ones with no buffer of
    their own (a parameter's, an output, a view, a scatter's), and its loops' carried results,
    whose spare buffers are there. Not those a scan's length sizes (`late`: the block is sized
    when the kernel starts): a scan's stacks are its own, the others are allocated where made."""
    own = set(func.returns) | set(fusion.into) | set(fusion.views) | set(fusion.scattered_into)
    temps = [r for op in func.ops for r in op.results
             if r in fusion.materialized and r not in own and not r.type.symbols & late]
    return temps, [r for op in func.ops if op.name in CARRYING for r in op.results[:op.attrs["carried"]]
                   if not r.type.symbols & late]


def _block_sizes(em: Emitter, func: Func, fusion: Plan) -> list[ir.Value]:
    """The bytes of each part of `func`'s block, from `em`'s symbols: its temporaries and spares,
    then the block of each region it runs, which that region's calls share. A region's block holds
    its regions' in turn; each region's size is computed once, its regions' first (in a nest of
    loops, a reversed loop's body runs in both of its reversals: summed path by path, the sizes
    would double per level), without recursion (a nest is as deep as the program)."""
    totals: dict[str, ir.Value] = {}
    for name in children_first(func.regions(), lambda name: em.module[name].regions()):
        region, region_plan = as_lowered(em.module[name])
        totals[name] = layout(em, _own_sizes(em, region, region_plan) + [totals[r] for r in region.regions()])[0]
    return _own_sizes(em, func, fusion) + [totals[name] for name in func.regions()]


def _own_sizes(em: Emitter, func: Func, fusion: Plan) -> list[ir.Value]:
    """The bytes of `func`'s temporaries and spares, then of its column sums' levels, from `em`'s symbols."""
    temps, spares = _block_contents(func, fusion, em.late)
    return [em.bytes_of(v) for v in temps + spares] + [levels_bytes(em, op) for op in column_sums(func, em.late)]


def column_sums(func: Func, late: frozenset[str]) -> list[Op]:
    """Its column sums whose levels its block holds: not those a scan's length sizes (allocated where made)."""
    return [op for op in func.ops if sums_columns(op) and not op.operands[0].type.symbols & late]


def sums_columns(op: Op) -> bool:
    """A float sum keeping its last axis (summation.blocked_column_sums)."""
    if op.name != "reduce_sum":
        return False
    (x,), axes = op.operands, op.attrs["axes"]
    return x.type.dtype.is_float and bool(axes) and x.type.rank - 1 not in axes


def levels_bytes(em: Emitter, op: Op) -> ir.Value:
    """The bytes of column sum `op`'s levels, from `em`'s symbols: what sizes its part of the block
    (or its allocation after a scan) and what the sum then reaches."""
    (x,) = op.operands
    rows = em.dim(num_elements(tuple(x.type.shape[k] for k in op.attrs["axes"])))
    return column_levels_bytes(em.b, rows, em.dim(x.type.shape[-1]), ELEMENT_BYTES[x.type.dtype])


def layout(em: Emitter, sizes: list[ir.Value]) -> tuple[ir.Value, list[ir.Value]]:
    """The total size of parts of `sizes` bytes and their offsets, each aligned. A part a region
    sizes with dims its sizes break counts as 0: the region fails its shape check if it runs, and
    a negative size would move the parts after it onto those before."""
    total, offsets = i64(0), []
    for size in sizes:
        size = em.b.select(em.b.icmp_signed("<", size, i64(0)), i64(0), size)
        offsets.append(total)
        total = em.b.add(total, em.b.and_(em.b.add(size, i64(ALIGNMENT - 1)), i64(-ALIGNMENT)), flags=NOWRAP)
    return total, offsets


def _allocate(em: Emitter, total: ir.Value) -> ir.Value:
    """A kernel's one block of temporaries (its regions' included): one allocation to check and one
    to free (LLVM's time on a check and a free per temporary grows with the square of their
    number); the kernel returns 1 when it cannot be allocated."""
    block = em.b.call(libc(em.llmod, "aligned_alloc", PTR, [I64, I64]), [i64(ALIGNMENT), total])
    failed = em.b.and_(em.b.icmp_unsigned("==", block, ir.Constant(PTR, None)), em.b.icmp_unsigned("!=", total, i64(0)))
    with em.b.if_then(failed, likely=False):
        em.b.ret(ir.Constant(I32, STATUS_NO_MEMORY))
    return block
