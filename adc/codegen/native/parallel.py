"""Multithreaded loop nests: large outlined loops split their outer range across threads.

Lowering (lowering/nests.py) outlines every loop nest into `loop(start, end, dims, out, in...)`
over its outermost range; this module decides at run time whether a call runs
on one thread or is split:

    %work = ...                             ; elements the nest touches, from the dims
    store dims, out, in... into %ctx
    br (%work >= 131072), parallel, serial
    parallel: call @adc_rt_parallel_for(@loop.task, %ctx, 0, %outer, %grain)
    serial:   call @loop.task(%ctx, 0, %outer)        ; in an optimized caller: @loop(0, %outer, dims, out, in...)

- `@loop.task(ptr ctx, i64 start, i64 end)` unpacks the buffer pointers and runs the loop,
  inlined into it (from an optimized caller, calling it);
- `adc_rt_parallel_for` lives in the runtime library (pool.py), declared only in kernel
  modules: it cuts [start, end) into at most one chunk per thread (chunk sizes a multiple of
  `grain`, 64 for flat loops, so vector loops stay aligned) and runs them on its pool's threads.

Which loops may be split is lowering's decision: only nests whose outer
iterations each write their own output elements and read none (see
`nests.emit_loop` and `rules/reductions._reduction`).
"""
from __future__ import annotations

from typing import Callable

import llvmlite.ir as ir

from adc.abi import RUNTIME_PARALLEL_FOR, RUNTIME_SET_NUM_THREADS, SET_NUM_THREADS_SYMBOL
from adc.codegen.lowering.loops import I8, I32, I64, NOWRAP, PTR, for_range, i64, stack_array
from adc.codegen.native.pool import TASK, TASK_PTR, VOID, declared, internal

THRESHOLD = 1 << 17   # elements below which waking the pool's workers costs more than it saves
FLAT_GRAIN = 64       # chunk multiple for flat loops: whole vectors and cache lines per thread
# Of the nests' work per strip of rows: their rows stay in a core's L1 between them (a softmax
# cross-entropy's 8 nests over 1000 columns take one row at a time). At 32768 the strips sat in
# L2: its loss and gradient over 4096 x 1000 f32 took 1.76-1.88 ms on one thread, 1.38-1.43 now.
STRIP_ELEMENTS = 4096
RING_BYTES = 1 << 17    # a thread's stack space for a strip's rows of the values only its nests read


def call_loop(b: ir.IRBuilder, head: ir.IRBuilder, loop: ir.Function, outer: ir.Value, work: ir.Value,
              grain: int | ir.Value, buffers: list[ir.Value]) -> None:
    """loop(0, outer, *buffers), split across threads when `work` elements reach THRESHOLD, each
    thread's share a multiple of `grain` (a constant, or a value the caller chose at run time).

    `head` builds in the caller's entry block (for the context's stack slot);
    `buffers` are the loop's arguments after its range: dims, out, in....
    From a caller LLVM does not optimize (a kernel's glue, `optnone`), both ways call
    `loop.task`, and `loop` is inlined into it: one function per nest for LLVM to optimize
    and generate code for, not two (the `noalias` of the loop's buffers survives inlining
    as alias metadata). From an optimized caller (a loop's body, run once per iteration)
    the serial way calls `loop` itself, its buffers in registers rather than stored into
    a context and loaded back, and LLVM inlines a small one there: a step writing one row
    of a trajectory then costs its stores, not a call.
    """
    loop.attributes.discard("noinline")
    task = _task(loop)
    if "optnone" in b.function.attributes:
        loop.attributes.add("alwaysinline")
        ctx = _context(b, head, buffers)
        _dispatch(b, task, lambda: ctx, outer, work, grain, lambda: b.call(task, [ctx, i64(0), outer]))
    else:
        _dispatch(b, task, lambda: _context(b, head, buffers), outer, work, grain,
                  lambda: b.call(loop, [i64(0), outer, *buffers]))


def call_strip(b: ir.IRBuilder, head: ir.IRBuilder, nests: list[tuple[ir.Function, list[ir.Value]]],
               outer: ir.Value, work: ir.Value, local: list[tuple[ir.Value, ir.Value, int]], grain: int = 1) -> None:
    """Each of `nests` (a loop and its buffers after its range, as `call_loop` takes them) over
    [0, outer), strip by strip (strips.py): rows [s, s + strip) of the first, of the second, ...,
    then the next strip; a strip holds about STRIP_ELEMENTS of their `work`, which decides, as
    in `call_loop`, whether the rows are split across threads (a thread's share goes strip by
    strip). The loops stay functions of their own, called once per strip.

    `local` are (buffer, bytes per row, slot) of values only these nests read, the values of one
    slot never live at once: each slot whose strip of rows still fits in RING_BYTES, each thread
    keeps on its stack, every strip in the same place, so its values stay in cache and never reach
    memory; the loops get the buffer moved so that row s lands at its start. Strips and threads'
    shares are whole multiples of `grain` rows (a nest's group of matrices computed across SIMD
    lanes)."""
    per_row = b.udiv(work, at_least_one(b, outer))
    strip = at_least_one(b, b.udiv(i64(STRIP_ELEMENTS), at_least_one(b, per_row)))
    if grain > 1:
        strip = b.mul(b.udiv(b.add(strip, i64(grain - 1)), i64(grain)), i64(grain), flags=NOWRAP)
    sizes = stack_array(head, b, I64, [strip, *(row_bytes for _, row_bytes, _ in local)])
    buffers = [sizes] + [ptr for _, nest_buffers in nests for ptr in nest_buffers]
    places = [[next((j for j, (ptr, _, _) in enumerate(local) if ptr is buffer), None) for buffer in nest_buffers]
              for _, nest_buffers in nests]
    task = _strip_task(b.module, [loop for loop, _ in nests], places, [slot for _, _, slot in local])
    ctx = _context(b, head, buffers)
    _dispatch(b, task, lambda: ctx, outer, work, grain, lambda: b.call(task, [ctx, i64(0), outer]))


def call_parallel_for(b: ir.IRBuilder, task: ir.Function, ctx: ir.Value, start: ir.Value, end: ir.Value,
                      grain: ir.Value) -> None:
    """task(ctx, start', end') over [start, end) cut in chunks across the pool's threads (from the
    runtime library itself: its blocked factorizations' updates, blocked.py)."""
    b.call(declared(b.module, RUNTIME_PARALLEL_FOR, ir.FunctionType(VOID, [TASK_PTR, PTR, I64, I64, I64])),
           [task, ctx, start, end, grain])


def at_least_one(b: ir.IRBuilder, n: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", n, i64(1)), n, i64(1))


def _context(b: ir.IRBuilder, head: ir.IRBuilder, buffers: list[ir.Value]) -> ir.Value:
    """The array of `buffers` a task unpacks (its stack slot made in the entry block, `head`)."""
    ctx = head.alloca(PTR, size=len(buffers))
    for k, ptr in enumerate(buffers):
        b.store(ptr, b.gep(ctx, [i64(k)], source_etype=PTR))
    return ctx


def _dispatch(b: ir.IRBuilder, task: ir.Function, context: Callable[[], ir.Value], outer: ir.Value, work: ir.Value,
              grain: int | ir.Value, serial: Callable[[], object]) -> None:
    """task(context(), 0, outer) split across the pool's threads when `work` reaches THRESHOLD, else
    serial() on this thread."""
    with b.if_else(b.icmp_signed(">=", work, i64(THRESHOLD))) as (parallel, on_this_thread):
        with parallel:
            call_parallel_for(b, task, context(), i64(0), outer, i64(grain) if isinstance(grain, int) else grain)
        with on_this_thread:
            serial()


def define_set_num_threads(module: ir.Module) -> None:
    """A shared object's exported `void adc_set_num_threads(i32 n)`: its runtime library's setter."""
    fn = ir.Function(module, ir.FunctionType(VOID, [I32]), SET_NUM_THREADS_SYMBOL)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.call(declared(module, RUNTIME_SET_NUM_THREADS, fn.function_type), list(fn.args))
    b.ret_void()


def _task(loop: ir.Function) -> ir.Function:
    """`void loop.task(ptr ctx, i64 start, i64 end)`: loop(start, end, ctx[0], ctx[1], ...).

    `noinline` says what holds anyway: the pool calls it through its address, and glue LLVM does
    not optimize calls it directly (`call_loop`); so identical tasks fold before the pipeline."""
    name = f"{loop.name}.task"
    if name in loop.module.globals:
        return loop.module.globals[name]
    fn = internal(loop.module, TASK, name)
    fn.attributes.add("noinline")
    ctx, start, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    n = len(loop.args) - 2
    buffers = [b.load(b.gep(ctx, [i64(k)], source_etype=PTR), typ=PTR) for k in range(n)]
    b.call(loop, [start, end, *buffers])
    b.ret_void()
    return fn


def _strip_task(module: ir.Module, loops: list[ir.Function], places: list[list[int | None]], slots: list[int]
                ) -> ir.Function:
    """`void strip.task(ptr ctx, i64 start, i64 end)`: ctx[0] points to the strip's rows and the
    bytes per row of the strip-local values, then come each loop's buffers; for each strip of
    [start, end), each loop over it in turn. `places[i][k]` is the strip-local value loop i's
    buffer k is (None: a buffer as given); `slots[j]` the slot of scratch value j shares."""
    fn = internal(module, TASK, f"adc.strip.{len(module.globals)}.task")
    ctx, start, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ring = b.alloca(ir.ArrayType(I8, RING_BYTES))
    ring.align = 64
    pointers = iter(b.load(b.gep(ctx, [i64(k)], source_etype=PTR), typ=PTR)
                    for k in range(1 + sum(len(loop.args) - 2 for loop in loops)))
    sizes = next(pointers)
    strip = b.load(sizes, typ=I64)
    row_bytes = [b.load(b.gep(sizes, [i64(1 + j)], source_etype=I64), typ=I64) for j in range(len(slots))]
    widest = [i64(0)] * (max(slots, default=-1) + 1)      # each slot's bytes per row: its widest value's
    for slot, size in zip(slots, row_bytes):
        widest[slot] = b.select(b.icmp_unsigned(">", size, widest[slot]), size, widest[slot])
    offsets, fits, total = [], [], i64(0)
    for size in widest:             # each slot's strip of rows, 64-byte aligned, after those that fit
        offsets.append(total)
        end_ = b.add(total, b.and_(b.add(b.mul(strip, size), i64(63)), i64(-64)))
        fits.append(b.icmp_unsigned("<=", end_, i64(RING_BYTES)))
        total = b.select(fits[-1], end_, total)
    buffers = [[next(pointers) for _ in loop.args[2:]] for loop in loops]
    count = b.udiv(b.add(b.sub(end, start), b.sub(strip, i64(1))), strip)
    with for_range(b, i64(0), count) as k:
        first = b.add(start, b.mul(k, strip))
        last = b.select(b.icmp_signed("<", b.sub(end, first), strip), end, b.add(first, strip))
        moved = [b.gep(ring, [b.sub(offsets[slot], b.mul(first, size))], source_etype=I8)   # row `first` at its slot
                 for slot, size in zip(slots, row_bytes)]
        for loop, loop_buffers, loop_places in zip(loops, buffers, places):
            args = [buffer if j is None else b.select(fits[slots[j]], moved[j], buffer)
                    for buffer, j in zip(loop_buffers, loop_places)]
            b.call(loop, [first, last, *args])
    b.ret_void()
    return fn
