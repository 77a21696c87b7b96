"""Multithreaded loop nests: large outlined loops split their outer range across pthreads.

Lowering (lower.py) outlines every loop nest into `loop(start, end, dims, out, in...)`
over its outermost range; this module decides at run time whether a call runs
on one thread or is split, and emits the threading runtime each module carries:

    %work = ...                             ; elements the nest touches, from the dims
    br (%work >= 131072), parallel, serial
    parallel: store dims, out, in... into %ctx
              call @adc.parallel_for(@loop.task, %ctx, 0, %outer, %grain)
    serial:   call @loop(0, %outer, dims, out, in...)

- `@loop.task(ptr ctx, i64 start, i64 end)` unpacks the buffer pointers and calls the loop;
- `@adc.parallel_for(task, ctx, start, end, grain)` cuts [start, end) into one chunk
  per thread (chunk sizes a multiple of `grain`: 64 for flat loops, so vector
  loops stay aligned), starts threads-1 pthreads through `@adc.thread_entry`
  on a {task, ctx, start, end} chunk, runs the last chunk itself and joins; a
  chunk whose thread could not be started runs on the calling thread;
- `@adc.num_threads` is read lazily from sysconf(_SC_NPROCESSORS_ONLN), capped at
  MAX_THREADS; the exported `void adc_set_num_threads(int32_t n)` overrides it
  (n <= 0 restores the default).

Which loops may be split is lower.py's decision: only nests whose outer
iterations each write their own output elements and read none (see
`lower._emit_loop` and `lower._reduction`).
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.loops import I8, I32, I64, NOWRAP, PTR, counted_loop, i64

SET_NUM_THREADS_SYMBOL = "adc_set_num_threads"
THRESHOLD = 1 << 17   # elements below which starting threads (tens of µs) costs more than it saves
MAX_THREADS = 64
FLAT_GRAIN = 64       # chunk multiple for flat loops: whole vectors and cache lines per thread
SC_NPROCESSORS_ONLN = 84  # glibc's value of _SC_NPROCESSORS_ONLN

VOID = ir.VoidType()
TASK = ir.FunctionType(VOID, [PTR, I64, I64])  # loop.task(ctx, start, end)
TASK_PTR = TASK.as_pointer()
CHUNK = ir.LiteralStructType([TASK_PTR, PTR, I64, I64])  # task, ctx, start, end


def call_loop(b: ir.IRBuilder, head: ir.IRBuilder, loop: ir.Function, outer: ir.Value, work: ir.Value,
              grain: int, buffers: list[ir.Value]) -> None:
    """loop(0, outer, *buffers), split across threads when `work` elements reach THRESHOLD.

    `head` builds in the caller's entry block (for the context's stack slot);
    `buffers` are the loop's arguments after its range: dims, out, in....
    """
    ctx = head.alloca(PTR, size=len(buffers))
    with b.if_else(b.icmp_signed(">=", work, i64(THRESHOLD))) as (parallel, serial):
        with parallel:
            for k, ptr in enumerate(buffers):
                b.store(ptr, b.gep(ctx, [i64(k)], source_etype=PTR))
            b.call(_parallel_for(b.module), [_task(loop), ctx, i64(0), outer, i64(grain)])
        with serial:
            b.call(loop, [i64(0), outer, *buffers])


def define_set_num_threads(module: ir.Module) -> None:
    """The exported `void adc_set_num_threads(i32 n)`: n threads from now on, n <= 0 the default."""
    fn = ir.Function(module, ir.FunctionType(VOID, [I32]), SET_NUM_THREADS_SYMBOL)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    (n,) = fn.args
    capped = b.select(b.icmp_signed(">", n, ir.Constant(I32, MAX_THREADS)), ir.Constant(I32, MAX_THREADS), n)
    positive = b.select(b.icmp_signed(">", n, ir.Constant(I32, 0)), capped, ir.Constant(I32, 0))
    b.store_atomic(positive, _num_threads_global(module), "monotonic", 4)
    b.ret_void()


def _task(loop: ir.Function) -> ir.Function:
    """`void loop.task(ptr ctx, i64 start, i64 end)`: loop(start, end, ctx[0], ctx[1], ...)."""
    name = f"{loop.name}.task"
    if name in loop.module.globals:
        return loop.module.globals[name]
    fn = _internal(loop.module, TASK, name)
    ctx, start, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    n = len(loop.args) - 2
    buffers = [b.load(b.gep(ctx, [i64(k)], source_etype=PTR), typ=PTR) for k in range(n)]
    b.call(loop, [start, end, *buffers])
    b.ret_void()
    return fn


def _parallel_for(module: ir.Module) -> ir.Function:
    """`void adc.parallel_for(ptr task, ptr ctx, i64 start, i64 end, i64 grain)`, defined once per module."""
    if "adc.parallel_for" in module.globals:
        return module.globals["adc.parallel_for"]
    fn = _internal(module, ir.FunctionType(VOID, [TASK_PTR, PTR, I64, I64, I64]), "adc.parallel_for")
    task, ctx, start, end, grain = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    chunks, threads, started = (b.alloca(t, size=MAX_THREADS) for t in (CHUNK, I64, I8))
    size, count = _chunking(b, b.call(_get_num_threads(module), []), b.sub(end, start), grain)
    create = _libc(module, "pthread_create", I32, [PTR, PTR, PTR, PTR])
    join = _libc(module, "pthread_join", I32, [I64, PTR])
    last = b.sub(count, i64(1))

    def bounds(k: ir.Value) -> tuple[ir.Value, ir.Value]:
        lo = b.add(start, b.mul(k, size, flags=NOWRAP), flags=NOWRAP)
        hi = b.add(lo, size, flags=NOWRAP)
        return lo, b.select(b.icmp_signed("<", hi, end), hi, end)

    def spawn(k: ir.Value) -> None:
        lo, hi = bounds(k)
        chunk = b.gep(chunks, [k])
        for field, x in enumerate((task, ctx, lo, hi)):
            b.store(x, b.gep(chunk, [i64(0), ir.Constant(I32, field)]))
        rc = b.call(create, [b.gep(threads, [k]), ir.Constant(PTR, None), _thread_entry(module), chunk])
        ok = b.icmp_signed("==", rc, ir.Constant(I32, 0))
        b.store(b.zext(ok, I8), b.gep(started, [k]))
        with b.if_then(b.not_(ok), likely=False):
            b.call(task, [ctx, lo, hi])

    def wait(k: ir.Value) -> None:
        flag = b.load(b.gep(started, [k]), typ=I8)
        with b.if_then(b.icmp_unsigned("!=", flag, ir.Constant(I8, 0))):
            tid = b.load(b.gep(threads, [k]), typ=I64)
            b.call(join, [tid, ir.Constant(PTR, None)])

    counted_loop(b, i64(0), last, spawn)
    b.call(task, [ctx, *bounds(last)])
    counted_loop(b, i64(0), last, wait)
    b.ret_void()
    return fn


def _chunking(b: ir.IRBuilder, threads: ir.Value, length: ir.Value, grain: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Chunk size (ceil(length / threads) rounded up to `grain`) and chunk count (>= 1, <= threads)."""
    n = b.zext(threads, I64)
    per_thread = b.udiv(b.add(length, b.sub(n, i64(1))), n)
    size = b.mul(b.udiv(b.add(per_thread, b.sub(grain, i64(1))), grain), grain)
    size = b.select(b.icmp_signed(">", size, i64(0)), size, grain)
    count = b.udiv(b.add(length, b.sub(size, i64(1))), size)
    return size, b.select(b.icmp_signed(">", count, i64(0)), count, i64(1))


def _thread_entry(module: ir.Module) -> ir.Function:
    """`ptr adc.thread_entry(ptr chunk)`: the pthread start routine, running one {task, ctx, start, end}."""
    if "adc.thread_entry" in module.globals:
        return module.globals["adc.thread_entry"]
    fn = _internal(module, ir.FunctionType(PTR, [PTR]), "adc.thread_entry")
    (chunk,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    task, ctx, lo, hi = (b.load(b.gep(chunk, [i64(0), ir.Constant(I32, k)], source_etype=CHUNK), typ=t)
                         for k, t in enumerate(CHUNK.elements))
    b.call(task, [ctx, lo, hi])
    b.ret(ir.Constant(PTR, None))
    return fn


def _get_num_threads(module: ir.Module) -> ir.Function:
    """`i32 adc.get_num_threads()`: the set count, else the online processors (cached), in [1, MAX_THREADS]."""
    if "adc.get_num_threads" in module.globals:
        return module.globals["adc.get_num_threads"]
    fn = _internal(module, ir.FunctionType(I32, []), "adc.get_num_threads")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    slot = _num_threads_global(module)
    current = b.load_atomic(slot, "monotonic", 4, typ=I32)
    with b.if_then(b.icmp_signed("==", current, ir.Constant(I32, 0)), likely=False):
        online = b.call(_libc(module, "sysconf", I64, [I32]), [ir.Constant(I32, SC_NPROCESSORS_ONLN)])
        online = b.select(b.icmp_signed(">", online, i64(MAX_THREADS)), i64(MAX_THREADS), online)
        online = b.select(b.icmp_signed("<", online, i64(1)), i64(1), online)
        b.store_atomic(b.trunc(online, I32), slot, "monotonic", 4)
    b.ret(b.load_atomic(slot, "monotonic", 4, typ=I32))
    return fn


def _num_threads_global(module: ir.Module) -> ir.GlobalVariable:
    """The i32 thread count; 0 until first use or after adc_set_num_threads(0)."""
    if "adc.num_threads" in module.globals:
        return module.globals["adc.num_threads"]
    slot = ir.GlobalVariable(module, I32, "adc.num_threads")
    slot.linkage = "internal"
    slot.initializer = ir.Constant(I32, 0)
    return slot


def _internal(module: ir.Module, fnty: ir.FunctionType, name: str) -> ir.Function:
    fn = ir.Function(module, fnty, name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    return fn


def _libc(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, ir.FunctionType(ret, args), name)
