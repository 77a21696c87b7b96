"""Lowering of the control-flow ops (for, while, if): loops and branches in a kernel's glue.

Each region function (a body, a condition, a branch) is lowered once per LLVM
module into an internal function of the kernel ABI, `i32 (ptr dims, ptr inputs,
ptr outputs)`, with its own fused, outlined loop nests (`Emitter.region`); its
dims are its parent's symbols it reads (Module.region_symbols), and after its
outputs comes the block its temporaries are carved from, a part of its parent's:
a kernel allocates once, however many iterations its loops run, so a region
never fails. The glue of the parent calls it: once for `if`, once per iteration
for the loops, whose carried values alternate between two sets of buffers, the
results' and spares:

    %0 = for %n, %init, %x {body = @step, carried = 1} : f32[N]
      ──▶  a, b = n odd ? (spare, out) : (out, spare);  a = init
           for i in [0, n): step(dims, [&i, i odd ? b : a, x], [i odd ? a : b, scratch])
           (n iterations end in set n % 2: `out`)

Every pointer array is filled before the loop, so an iteration stores its index,
selects two arrays, calls the body and polls for an interrupt (interrupts.py); LLVM
inlines a small body there (inlining.py).
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Callable, Sequence

import llvmlite.ir as ir

from adc.codegen.lowering import bounds, interrupts
from adc.codegen.lowering.loops import I1, I8, I32, I64, PTR, counted_loop, i64
from adc.ir.core import Func, Op, Value
from adc.ir.ops import OPS, with_trait
from adc.ir.types import DType, num_elements

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

# the loops: their carried results get a spare buffer (Emitter.spares)
CARRYING = frozenset(name for name, op in OPS.items() if op.body_leads is not None)
SCATTERS = with_trait("scatter")

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def for_lower(em: Emitter, op: Op, dests: list[ir.Value]) -> None:
    # body(i, carried..., captured...) -> carried, for i in [0, count); a scan's body also returns
    # rows, stacked along a new axis of the trip count: written in place when the axis is the
    # first, else copied from a row buffer, its parts `stride` apart
    k = op.attrs["carried"]
    count, inits, captured = op.operands[0], op.operands[1:1 + k], op.operands[1 + k:]
    body, dims, scratch = em.region(op.attrs["body"])
    loaded = em.load(em.buffers[count], DType.i64, em.index(count))
    n = em.b.select(em.b.icmp_signed(">", loaded, i64(0)), loaded, i64(0))
    stacks = _stacks(em, op, n)
    odd = em.b.trunc(n, I1)
    iteration = bounds.track(em, em.head.alloca(I64), i64(8), "the iteration's index", "slot")
    calls = _alternating_calls(em, op, dests[:k], inits, odd, [iteration], captured, scratch,
                               updated_in_place(em, op), [row for row, _ in stacks])

    def step(i: ir.Value) -> None:
        em.b.store(i, iteration)
        inputs, outputs = _select(em, em.b.trunc(i, I1), calls)
        for j, (row, write) in enumerate(stacks):
            if row is None:         # written in place: the row i of the stack
                bounds.place(em, outputs, k + j, write(i))
        _call(em, body, [dims, inputs, outputs])
        for row, write in stacks:
            if row is not None:
                write(i)
        interrupts.poll(em)
    counted_loop(em.b, i64(0), n, step)


lower_rules["for"] = for_lower
lower_rules["scan"] = for_lower


def _stacks(em: Emitter, op: Op, n: ir.Value) -> list[tuple[ir.Value | None, Callable[[ir.Value], object]]]:
    """A scan's stacked results, each allocated for `n` rows (the symbol it binds is `n`), as (the
    row buffer its body writes, or None when it writes into the stack; what puts row i in place)."""
    if op.name != "scan":
        return []
    em.bind(op.attrs["length"], n)
    k, axis = op.attrs["carried"], op.attrs["axis"]
    stacked = op.results[k:]
    inners = [em.bytes(s.type.shape[axis + 1:], s.type.dtype) for s in stacked]
    outers = [em.dim(num_elements(s.type.shape[:axis])) for s in stacked]     # the parts of a row, `inner` bytes each
    rows = [em.b.mul(outer, inner) for outer, inner in zip(outers, inners)] if axis else []
    sizes = [em.bytes_of(s) for s in stacked] + rows
    blocks = em.allocate_parts(sizes)
    names = [f"stack {j} of the scan at {op.loc}" for j in range(len(stacked))]
    for block, size, name in zip(blocks, sizes, names + [f"row of {name}" for name in names]):
        bounds.track(em, block, size, name, "stack")
    found = []
    for j, (s, stack, inner, outer) in enumerate(zip(stacked, blocks, inners, outers)):
        em.buffers[s] = stack
        if axis == 0:
            found.append((None, lambda i, stack=stack, inner=inner: _row_of(em, stack, i, inner)))
            continue
        row = blocks[len(stacked) + j]
        found.append((row, lambda i, stack=stack, row=row, inner=inner, outer=outer:
                      _scatter_row(em, stack, row, i, n, inner, outer)))
    return found


def _row_of(em: Emitter, stack: ir.Value, i: ir.Value, inner: ir.Value) -> ir.Value:
    """Row i of a stack of rows of `inner` bytes, a buffer of its own (a row's extent)."""
    offset = em.b.mul(i, inner)
    return bounds.track_within(em, em.b.gep(stack, [offset], source_etype=I8), stack, offset, size=inner)


def _scatter_row(em: Emitter, stack: ir.Value, row: ir.Value, i: ir.Value, n: ir.Value, inner: ir.Value,
                 outer: ir.Value) -> None:
    """Row i of a stack whose axis of n rows has `outer` parts before it: part o of the row, `inner`
    bytes, goes to (o n + i) inner."""
    def part(o: ir.Value) -> None:
        offset = em.b.mul(o, inner)
        source = bounds.track_within(em, em.b.gep(row, [offset], source_etype=I8), row, offset)
        offset = em.b.mul(em.b.add(em.b.mul(o, n), i), inner)
        dest = bounds.track_within(em, em.b.gep(stack, [offset], source_etype=I8), stack, offset)
        bounds.copy(em, dest, source, inner)
        _memcpy(em, dest, source, inner)
    counted_loop(em.b, i64(0), outer, part)


def _call(em: Emitter, fn: ir.Function, args: list[ir.Value]) -> None:
    """Call a region function; its nonzero status (a scan's stack it could not allocate, sizes
    breaking its shape constraints) is returned."""
    status = em.b.call(fn, bounds.region_arguments(em, args))
    em.fail_if(em.b.icmp_signed("!=", status, ir.Constant(I32, 0)), status)


def while_lower(em: Emitter, op: Op, dests: list[ir.Value]) -> None:
    # body(carried..., captured...) -> carried while cond(carried..., captured...); an odd number of
    # iterations ends in the spares, copied to the results
    k = op.attrs["carried"]
    inits, captured = op.operands[:k], op.operands[k:]
    (cond, cond_dims, cond_scratch), (body, body_dims, scratch) = map(em.region, (op.attrs["cond"], op.attrs["body"]))
    in_place = updated_in_place(em, op)
    calls = _alternating_calls(em, op, dests, inits, ir.Constant(I1, 0), [], captured, scratch, in_place)
    holds, odd = bounds.track(em, em.head.alloca(I8), i64(1), "the condition's verdict", "slot"), em.head.alloca(I1)
    verdict = _pointer_array(em, [holds, cond_scratch])
    em.b.store(ir.Constant(I1, 0), odd)
    header, block, exit_ = (em.b.append_basic_block(name) for name in ("while.cond", "while.body", "while.exit"))
    em.b.branch(header)
    em.b.position_at_end(header)
    parity = em.b.load(odd, typ=I1)
    inputs, outputs = _select(em, parity, calls)
    _call(em, cond, [cond_dims, inputs, verdict])
    em.b.cbranch(em.b.icmp_unsigned("!=", em.b.load(holds, typ=I8), ir.Constant(I8, 0)), block, exit_)
    em.b.position_at_end(block)
    _call(em, body, [body_dims, inputs, outputs])
    interrupts.poll(em)
    em.b.store(em.b.not_(parity), odd)
    em.b.branch(header)
    em.b.position_at_end(exit_)
    with em.b.if_then(em.b.load(odd, typ=I1)):
        for j, (r, dest) in enumerate(zip(op.results, dests)):
            if j not in in_place:
                _copy(em, dest, em.spares[r], r)


lower_rules["while"] = while_lower


def if_lower(em: Emitter, op: Op, dests: list[ir.Value]) -> None:
    # then_branch(captured...) if pred else else_branch(captured...), into the results
    pred, captured = op.operands[0], op.operands[1:]
    inputs = _pointer_array(em, [em.buffers[v] for v in captured])
    with em.b.if_else(em.load(em.buffers[pred], DType.bool, em.index(pred))) as (then, otherwise):
        for branch, key in ((then, "then_branch"), (otherwise, "else_branch")):
            with branch:
                fn, dims, scratch = em.region(op.attrs[key])
                _call(em, fn, [dims, inputs, _pointer_array(em, [*dests, scratch])])


lower_rules["if"] = if_lower


def _alternating_calls(em: Emitter, op: Op, dests: list[ir.Value], inits: Sequence[Value], odd: ir.Value,
                       leading: list[ir.Value], captured: Sequence[Value], scratch: ir.Value,
                       in_place: frozenset[int], rows: Sequence[ir.Value | None] = ()
                       ) -> list[tuple[ir.Value, ir.Value]]:
    """(inputs, outputs) of a loop body's even and odd iterations: iteration j reads the carried
    values from set j % 2 and writes them into the other (then a scan's `rows`, None for a row
    each iteration points at itself). Set 0 gets the initial values; it is the spares when `odd`,
    so that an odd number of iterations ends in the results. A value the body updates in place
    (`in_place`, from `updated_in_place`) has its result buffer in both sets."""
    spares = [em.spares[r] for r in op.results[:len(dests)]]
    first = [dest if j in in_place else bounds.select(em, odd, spare, dest) for j, (spare, dest) in enumerate(zip(spares, dests))]
    second = [dest if j in in_place else bounds.select(em, odd, dest, spare) for j, (spare, dest) in enumerate(zip(spares, dests))]
    for init, buffer in zip(inits, first):
        _copy(em, buffer, em.buffers[init], init)
    reads = [em.buffers[v] for v in captured]
    placed = [ir.Constant(PTR, None) if row is None else row for row in rows]
    return [(_pointer_array(em, [*leading, *current, *reads]), _pointer_array(em, [*following, *placed, scratch]))
            for current, following in ((first, second), (second, first))]


def updated_in_place(em: Emitter, op: Op) -> frozenset[int]:
    """The carried values of loop `op` that its body updates in place (`in_place_scatters`): the
    body gets one buffer as that value's input and output, and an iteration of `y[t] = x` costs
    its update, not a copy of y."""
    body = em.module[op.attrs["body"]]
    lead, k = (0 if op.name == "while" else 1), op.attrs["carried"]
    scatters = in_place_scatters(body)
    return frozenset(j for j in range(k)
                     if (scatter := scatters.get(body.params[lead + j])) is not None and scatter.result is body.returns[j])


def in_place_scatters(body: Func) -> dict[Value, Op]:
    """param -> the scatter into it that `body` returns, where the scatter may write the param's
    buffer: nothing else reads its result, its indices and updates do not read the param, and the
    param is not returned. The body lowers these scatters last (lower.py), after every
    other read of the param, and a scatter given its base's buffer as its own skips copying it
    (scatter_lower); a loop may then pass one buffer as both (`updated_in_place`)."""
    uses = Counter(v for o in body.ops for v in o.operands) + Counter(body.returns)
    producers = {r: o for o in body.ops for r in o.results}
    params = set(body.params)
    found = {}
    for op in body.ops:
        base = op.operands[0] if op.name in SCATTERS else None
        if (base in params and base not in body.returns and uses[op.result] == 1 and op.result in body.returns
                and base not in _ancestors(op.operands[1:], producers)):
            found[base] = op
    return found


def _ancestors(values: Sequence[Value], producers: dict[Value, Op]) -> set[Value]:
    """`values` and every value computing them reads."""
    seen, stack = set(), list(values)
    while stack:
        v = stack.pop()
        if v not in seen:
            seen.add(v)
            if v in producers:
                stack.extend(producers[v].operands)
    return seen


def _select(em: Emitter, odd: ir.Value, calls: list[tuple[ir.Value, ir.Value]]) -> tuple[ir.Value, ir.Value]:
    (even_in, even_out), (odd_in, odd_out) = calls
    return bounds.select(em, odd, odd_in, even_in), bounds.select(em, odd, odd_out, even_out)


_pointer_array = bounds.pointer_array


def _copy(em: Emitter, dest: ir.Value, source: ir.Value, like: Value) -> None:
    """dest = source, both buffers of `like`'s type."""
    size = em.bytes_of(like)
    bounds.copy(em, dest, source, size)
    _memcpy(em, dest, source, size)


def _memcpy(em: Emitter, dest: ir.Value, source: ir.Value, size: ir.Value) -> None:
    name = "llvm.memcpy.p0.p0.i64"
    memcpy = em.llmod.globals.get(name) or ir.Function(em.llmod, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I1]),
                                                       name)
    em.b.call(memcpy, [dest, source, size, ir.Constant(I1, 0)])
