"""The runtime library's thread pool: `adc_rt_parallel_for`, which cuts a range into at most one
chunk per thread and runs them on persistent workers, and the thread count it reads.

- the workers are started on first need and parked between jobs, so a call costs a wake-up
  rather than thread starts;
- the thread count is read lazily: the processors the process may run on (its affinity mask,
  else sysconf(_SC_NPROCESSORS_ONLN)), capped at MAX_THREADS; `adc_rt_set_num_threads`
  overrides it (n <= 0 restores the default);
- a caller that finds other callers inside adc_rt_parallel_for, each running a job on its own
  thread, splits its job over one thread less for each (`_threads_beside`), and workers do not
  spin after it: application threads that call kernels at once (Dask's threaded scheduler) keep
  the cores without the pool's workers beside them.

    caller                                    worker k (1 <= k < threads)
    callers += 1 (until it returns)           poll generation a while, then sleep on `wake`
    trylock dispatch, else run all serially
    chunks for threads - (callers - 1)
    lock; job := {task, ctx, ..., count};     lock; if generation changed and k < count:
      generation += 1; unlock; wake all         claim `next` chunks, run each unlocked,
    claim and run chunks the same way             `remaining` -= 1 after each
    wait until remaining == 0 (poll, then     unlock; loop
      sleep on `done`); unlock dispatch

Lowering's side, which loops call it and how, is parallel.py.
"""
from __future__ import annotations

from typing import Callable

import llvmlite.ir as ir

from adc.abi import RUNTIME_GET_NUM_THREADS, RUNTIME_PARALLEL_FOR, RUNTIME_SET_NUM_THREADS
from adc.codegen.lowering.loops import I8, I32, I64, NOWRAP, PTR, i64

MAX_THREADS = 64
SC_NPROCESSORS_ONLN = 84  # glibc's value of _SC_NPROCESSORS_ONLN
AFFINITY_WORDS = 16       # a glibc cpu_set_t (1024 processors) as 64-bit words

VOID = ir.VoidType()
TASK = ir.FunctionType(VOID, [PTR, I64, I64])  # loop.task(ctx, start, end)
TASK_PTR = TASK.as_pointer()

# The pool's job record, guarded by adc_rt.pool.lock: chunk k is [start + k*size, min(start + (k+1)*size, end)).
JOB = ir.LiteralStructType([TASK_PTR, PTR, I64, I64, I64, I64, I64, I64])
TASK_FIELD, CTX_FIELD, START_FIELD, END_FIELD, SIZE_FIELD, COUNT_FIELD, NEXT_FIELD, REMAINING_FIELD = range(8)
MUTEX_BYTES, COND_BYTES = 40, 48   # sizeof(pthread_mutex_t), sizeof(pthread_cond_t) on glibc x86_64
# Pause-polls of a counter before sleeping on a condition variable: about 1-2 ms (a pause is
# 10-140 cycles by CPU). Calls in a row then find the workers awake: waking a sleeping one
# costs a halted virtual CPU's wake-up. With 256 polls (~15 us) 256x784 @ 784x512 on two threads
# took 1.67 ms (p10) against 1.88 on one, OpenBLAS 1.0; with 32768, 0.8-1.3 ms, level with
# OpenBLAS, whose threads spin the same way (16384: 1.3). The price is a core kept busy that
# long after a parallel call.
SPIN_POLLS = 32768
_POOL_LIBC = {  # libc functions the pool calls: name -> (result, parameters)
    "pthread_mutex_init": (I32, [PTR, PTR]), "pthread_mutex_lock": (I32, [PTR]),
    "pthread_mutex_unlock": (I32, [PTR]), "pthread_mutex_trylock": (I32, [PTR]),
    "pthread_cond_init": (I32, [PTR, PTR]), "pthread_cond_wait": (I32, [PTR, PTR]),
    "pthread_cond_broadcast": (I32, [PTR]), "pthread_cond_signal": (I32, [PTR]),
    "pthread_create": (I32, [PTR, PTR, PTR, PTR]), "getpid": (I32, []),
}


def _set_num_threads_body(fn: ir.Function) -> None:
    """Store min(n, MAX_THREADS) into the thread count, or 0 (the default) when n <= 0."""
    module = fn.module
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    (n,) = fn.args
    capped = b.select(b.icmp_signed(">", n, ir.Constant(I32, MAX_THREADS)), ir.Constant(I32, MAX_THREADS), n)
    positive = b.select(b.icmp_signed(">", n, ir.Constant(I32, 0)), capped, ir.Constant(I32, 0))
    b.store_atomic(positive, _num_threads_global(module), "monotonic", 4)
    b.ret_void()


def define_runtime(module: ir.Module) -> None:
    """Define the pool's exported functions in `module` (the runtime library): adc_rt_parallel_for,
    adc_rt_set_num_threads and adc_rt_get_num_threads.

    Why it is race-free:
    - The job record and `generation` are written only under `lock`, and the job is read only under
      it. The spins also poll `generation` and `remaining` unlocked, so those are always accessed
      atomically; a poll only decides when to take `lock`, every decision is re-made under it, and
      taking it orders a finished chunk's writes before the caller returns.
    - A chunk is claimed by incrementing `next` under `lock` while next < count: it runs once. Only
      the `dispatch` holder publishes a job, and it lets go only once `remaining` is 0, so the record
      never changes while one of its chunks is claimed: a late worker finds the finished job (nothing
      left to claim) or a whole new one. `workers` is touched only by the `dispatch` holder (and by
      initialisation, which precedes it).
    - Nobody blocks on `dispatch` (trylock: a caller that fails runs serially, as does a nested call
      from a task), and `lock` is never held while a task runs, so no call waits on another job.
    - `callers` (atomic) only sizes a job (`_threads_beside`) and a worker's spin: a stale count
      changes how many chunks a job has, never which elements run or how often.
    - fork: the child has none of the workers, and may hold copies of locked locks; `pid` records
      which process initialised the pool, and a call from any other re-initialises it first. (Not
      pthread_atfork: JIT code cannot unregister a handler before it is freed, and glibc links
      pthread_atfork statically.) The check costs a getpid system call per pooled call, and misses
      only a descendant that never used the pool passing the record on to a process that reuses
      the recorded (dead) pid.
    """
    pool = _Pool(module)
    get_num_threads = _get_num_threads_body(_exported(module, ir.FunctionType(I32, []), RUNTIME_GET_NUM_THREADS))
    _set_num_threads_body(_exported(module, ir.FunctionType(VOID, [I32]), RUNTIME_SET_NUM_THREADS))
    run_chunks = _run_chunks(pool)
    start_workers = _start_workers(pool, _worker(pool, run_chunks))
    fn = _exported(module, ir.FunctionType(VOID, [TASK_PTR, PTR, I64, I64, I64]), RUNTIME_PARALLEL_FOR)
    task, ctx, start, end, grain = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    serial, pooled, contended, owned, alone, split = (fn.append_basic_block(name) for name in (
        "serial", "pooled", "contended", "owned", "alone", "split"))
    length = b.select(b.icmp_signed(">", end, start), b.sub(end, start), i64(0))
    threads = b.call(get_num_threads, [])
    _, count = _chunking(b, threads, length, grain)
    b.cbranch(b.icmp_signed(">", count, i64(1)), pooled, serial)
    b.position_at_end(serial)   # one chunk
    b.call(task, [ctx, start, end])
    b.ret_void()
    b.position_at_end(pooled)
    b.call(_ensure_initialised(pool), [])
    b.atomic_rmw("add", pool.callers, i64(1), "monotonic")
    taken = pool.libc(b, "pthread_mutex_trylock", pool.dispatch)
    b.cbranch(b.icmp_signed("==", taken, ir.Constant(I32, 0)), owned, contended)
    b.position_at_end(contended)   # another job holds the pool (a nested call included): run it here
    b.call(task, [ctx, start, end])
    b.atomic_rmw("sub", pool.callers, i64(1), "monotonic")
    b.ret_void()
    b.position_at_end(owned)
    size, count = _chunking(b, _threads_beside(b, pool, threads), length, grain)
    b.cbranch(b.icmp_signed(">", count, i64(1)), split, alone)
    b.position_at_end(alone)      # every thread but this one is another caller's
    pool.libc(b, "pthread_mutex_unlock", pool.dispatch)
    b.call(task, [ctx, start, end])
    b.atomic_rmw("sub", pool.callers, i64(1), "monotonic")
    b.ret_void()
    b.position_at_end(split)
    b.call(start_workers, [b.sub(count, i64(1))])
    _publish(b, pool, {TASK_FIELD: task, CTX_FIELD: ctx, START_FIELD: start, END_FIELD: end,
                       SIZE_FIELD: size, COUNT_FIELD: count, NEXT_FIELD: i64(0)})
    pool.libc(b, "pthread_mutex_lock", pool.lock)
    b.call(run_chunks, [])
    _await_chunks(b, pool)
    pool.libc(b, "pthread_mutex_unlock", pool.lock)
    pool.libc(b, "pthread_mutex_unlock", pool.dispatch)
    b.atomic_rmw("sub", pool.callers, i64(1), "monotonic")
    b.ret_void()


def _threads_beside(b: ir.IRBuilder, pool: _Pool, threads: ir.Value) -> ir.Value:
    """The pool's share of `threads` (i32) for the job of the caller holding it: one thread less for
    each other caller inside adc_rt_parallel_for, each running its job on its own thread, and at
    least one. Application threads calling kernels at once (Dask's threaded scheduler) then keep
    the cores busy without the pool's workers beside them: on two cores, two threads of Dask
    running adc.dask's blocks took 212.7 ms with the pool's two threads and 174.4 ms with one."""
    others = b.trunc(b.sub(b.load_atomic(pool.callers, "monotonic", 8, typ=I64), i64(1)), I32)
    share = b.sub(threads, others)
    return b.select(b.icmp_signed(">", share, ir.Constant(I32, 1)), share, ir.Constant(I32, 1))


class _Pool:
    """The pool's internal globals in one module, and calls of the libc functions that guard them."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.dispatch = _zeroed(module, "adc_rt.pool.dispatch", ir.ArrayType(I8, MUTEX_BYTES))
        self.lock = _zeroed(module, "adc_rt.pool.lock", ir.ArrayType(I8, MUTEX_BYTES))
        self.wake = _zeroed(module, "adc_rt.pool.wake", ir.ArrayType(I8, COND_BYTES))
        self.done = _zeroed(module, "adc_rt.pool.done", ir.ArrayType(I8, COND_BYTES))
        self.job = _zeroed(module, "adc_rt.pool.job", JOB)
        self.generation = _zeroed(module, "adc_rt.pool.generation", I64)
        self.workers = _zeroed(module, "adc_rt.pool.workers", I64)
        self.pid = _zeroed(module, "adc_rt.pool.pid", I32)
        # callers inside adc_rt_parallel_for's pooled path (the holder of `dispatch` and those that
        # found it held), counted atomically; reset with the pool in a forked child
        self.callers = _zeroed(module, "adc_rt.pool.callers", I64)

    def libc(self, b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
        return b.call(_libc(self.module, name, *_POOL_LIBC[name]), list(args))

    def field(self, b: ir.IRBuilder, k: int) -> ir.Value:
        return b.gep(self.job, [i64(0), ir.Constant(I32, k)])

    def remaining(self, b: ir.IRBuilder) -> ir.Value:
        return b.load_atomic(self.field(b, REMAINING_FIELD), "monotonic", 8, typ=I64)


def _run_chunks(pool: _Pool) -> ir.Function:
    """`void adc_rt.pool.run_chunks()`: with the lock held, claim and run chunks until none is left unclaimed."""
    fn = internal(pool.module, ir.FunctionType(VOID, []), "adc_rt.pool.run_chunks")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    claim, run, exit_ = (fn.append_basic_block(name) for name in ("claim", "run", "exit"))
    b.branch(claim)
    b.position_at_end(claim)
    k = b.load(pool.field(b, NEXT_FIELD), typ=I64)
    b.cbranch(b.icmp_signed("<", k, b.load(pool.field(b, COUNT_FIELD), typ=I64)), run, exit_)
    b.position_at_end(run)
    b.store(b.add(k, i64(1)), pool.field(b, NEXT_FIELD))
    task, ctx, start, end, size = (b.load(pool.field(b, f), typ=JOB.elements[f])
                                   for f in (TASK_FIELD, CTX_FIELD, START_FIELD, END_FIELD, SIZE_FIELD))
    pool.libc(b, "pthread_mutex_unlock", pool.lock)
    lo = b.add(start, b.mul(k, size, flags=NOWRAP), flags=NOWRAP)
    hi = b.add(lo, size, flags=NOWRAP)
    b.call(task, [ctx, lo, b.select(b.icmp_signed("<", hi, end), hi, end)])
    pool.libc(b, "pthread_mutex_lock", pool.lock)
    left = b.sub(pool.remaining(b), i64(1))
    b.store_atomic(left, pool.field(b, REMAINING_FIELD), "monotonic", 8)
    with b.if_then(b.icmp_signed("==", left, i64(0))):
        pool.libc(b, "pthread_cond_signal", pool.done)
    b.branch(claim)
    b.position_at_end(exit_)
    b.ret_void()
    return fn


def _worker(pool: _Pool, run_chunks: ir.Function) -> ir.Function:
    """`ptr adc_rt.pool.worker(ptr k)`: the start routine of worker k >= 1, serving jobs for the process's life.

    It joins a job when k < its chunk count, and spins before sleeping only after a job it joined.
    """
    fn = internal(pool.module, ir.FunctionType(PTR, [PTR]), "adc_rt.pool.worker")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    top, wait, sleep, claim = (fn.append_basic_block(name) for name in ("top", "wait", "sleep", "claim"))
    k = b.ptrtoint(fn.args[0], I64)
    seen, polls = b.alloca(I64), b.alloca(I64)
    b.store(i64(0), seen)
    b.store(i64(0), polls)
    b.branch(top)
    b.position_at_end(top)
    _spin(b, b.load(polls, typ=I64), lambda: b.icmp_signed(
        "==", b.load_atomic(pool.generation, "monotonic", 8, typ=I64), b.load(seen, typ=I64)))
    pool.libc(b, "pthread_mutex_lock", pool.lock)
    b.branch(wait)
    b.position_at_end(wait)
    generation = b.load_atomic(pool.generation, "monotonic", 8, typ=I64)
    b.cbranch(b.icmp_signed("==", generation, b.load(seen, typ=I64)), sleep, claim)
    b.position_at_end(sleep)
    pool.libc(b, "pthread_cond_wait", pool.wake, pool.lock)
    b.branch(wait)
    b.position_at_end(claim)
    b.store(generation, seen)
    joins = b.icmp_signed("<", k, b.load(pool.field(b, COUNT_FIELD), typ=I64))
    # no spin beside other callers' jobs: their threads want this core
    alone = b.icmp_signed("<=", b.load_atomic(pool.callers, "monotonic", 8, typ=I64), i64(1))
    b.store(b.select(b.and_(joins, alone), i64(SPIN_POLLS), i64(0)), polls)
    with b.if_then(joins):
        b.call(run_chunks, [])
    pool.libc(b, "pthread_mutex_unlock", pool.lock)
    b.branch(top)
    return fn


def _start_workers(pool: _Pool, worker: ir.Function) -> ir.Function:
    """`void adc_rt.pool.start_workers(i64 want)`: with the dispatch lock held, start workers
    until `want` exist or pthread_create fails (their chunks then run on the threads that do)."""
    fn = internal(pool.module, ir.FunctionType(VOID, [I64]), "adc_rt.pool.start_workers")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    check, start, started, exit_ = (fn.append_basic_block(name) for name in ("check", "start", "started", "exit"))
    thread = b.alloca(I64)   # the pthread_t: workers are never joined
    b.branch(check)
    b.position_at_end(check)
    have = b.load(pool.workers, typ=I64)
    b.cbranch(b.icmp_signed("<", have, fn.args[0]), start, exit_)
    b.position_at_end(start)
    index = b.add(have, i64(1))
    failed = pool.libc(b, "pthread_create", thread, ir.Constant(PTR, None), worker, b.inttoptr(index, PTR))
    b.cbranch(b.icmp_signed("==", failed, ir.Constant(I32, 0)), started, exit_)
    b.position_at_end(started)
    b.store(index, pool.workers)
    b.branch(check)
    b.position_at_end(exit_)
    b.ret_void()
    return fn


def _ensure_initialised(pool: _Pool) -> ir.Function:
    """`void adc_rt.pool.ensure_initialised()`: initialise the pool once per process (pid), so a
    forked child starts with fresh locks and no workers.

    `pid` is 0 before first use, -p while process p initialises and p once it has: the thread
    whose compare-exchange claims it initialises, the others poll until it publishes p (release).
    """
    fn = internal(pool.module, ir.FunctionType(VOID, []), "adc_rt.pool.ensure_initialised")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    check, other, claim, init, ready = (fn.append_basic_block(name)
                                        for name in ("check", "other", "claim", "init", "ready"))
    me = pool.libc(b, "getpid")
    b.branch(check)
    b.position_at_end(check)
    seen = b.load_atomic(pool.pid, "acquire", 4, typ=I32)
    b.cbranch(b.icmp_signed("==", seen, me), ready, other)
    b.position_at_end(other)   # -me: another thread of this process is initialising
    _pause(b)
    b.cbranch(b.icmp_signed("==", seen, b.neg(me)), check, claim)
    b.position_at_end(claim)
    claimed = b.extract_value(b.cmpxchg(pool.pid, seen, b.neg(me), "acquire", "monotonic"), 1)
    b.cbranch(claimed, init, check)
    b.position_at_end(init)
    for mutex in (pool.dispatch, pool.lock):
        pool.libc(b, "pthread_mutex_init", mutex, ir.Constant(PTR, None))
    for cond in (pool.wake, pool.done):
        pool.libc(b, "pthread_cond_init", cond, ir.Constant(PTR, None))
    b.store(i64(0), pool.workers)
    b.store_atomic(i64(0), pool.callers, "monotonic", 8)
    b.store(ir.Constant(JOB, None), pool.job)
    b.store_atomic(me, pool.pid, "release", 4)
    b.branch(ready)
    b.position_at_end(ready)
    b.ret_void()
    return fn


def _publish(b: ir.IRBuilder, pool: _Pool, fields: dict[int, ir.Value]) -> None:
    """Store a new job (all of it, `remaining` = count) under the lock, then wake the workers."""
    pool.libc(b, "pthread_mutex_lock", pool.lock)
    for field, value in fields.items():
        b.store(value, pool.field(b, field))
    b.store_atomic(fields[COUNT_FIELD], pool.field(b, REMAINING_FIELD), "monotonic", 8)
    generation = b.load_atomic(pool.generation, "monotonic", 8, typ=I64)
    b.store_atomic(b.add(generation, i64(1)), pool.generation, "monotonic", 8)
    pool.libc(b, "pthread_mutex_unlock", pool.lock)
    pool.libc(b, "pthread_cond_broadcast", pool.wake)


def _await_chunks(b: ir.IRBuilder, pool: _Pool) -> None:
    """With the lock held, wait until every chunk of the job has run: spin unlocked, then sleep."""
    fn = b.function
    spin, wait, sleep, exit_ = (fn.append_basic_block(name) for name in ("await.spin", "await", "await.sleep",
                                                                         "await.exit"))
    b.cbranch(b.icmp_signed("==", pool.remaining(b), i64(0)), exit_, spin)
    b.position_at_end(spin)
    pool.libc(b, "pthread_mutex_unlock", pool.lock)
    _spin(b, i64(SPIN_POLLS), lambda: b.icmp_signed("!=", pool.remaining(b), i64(0)))
    pool.libc(b, "pthread_mutex_lock", pool.lock)
    b.branch(wait)
    b.position_at_end(wait)
    b.cbranch(b.icmp_signed("==", pool.remaining(b), i64(0)), exit_, sleep)
    b.position_at_end(sleep)
    pool.libc(b, "pthread_cond_wait", pool.done, pool.lock)
    b.branch(wait)
    b.position_at_end(exit_)


def _spin(b: ir.IRBuilder, polls: ir.Value, busy: Callable[[], ir.Value]) -> None:
    """Evaluate `busy()` (an atomic load and a compare) up to `polls` times while it holds; leaves `b` after."""
    before = b.block
    poll, wait, after = (b.append_basic_block(name) for name in ("spin", "spin.pause", "spin.exit"))
    b.branch(poll)
    b.position_at_end(poll)
    i = b.phi(I64)
    i.add_incoming(i64(0), before)
    b.cbranch(b.and_(b.icmp_signed("<", i, polls), busy()), wait, after)
    b.position_at_end(wait)
    _pause(b)
    i.add_incoming(b.add(i, i64(1), flags=NOWRAP), wait)
    b.branch(poll)
    b.position_at_end(after)


def _pause(b: ir.IRBuilder) -> None:
    """x86's spin-wait hint: frees the core's resources for a few dozen cycles (the pool is x86_64-only)."""
    b.call(_libc(b.module, "llvm.x86.sse2.pause", VOID, []), [])


def _chunking(b: ir.IRBuilder, threads: ir.Value, length: ir.Value, grain: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Chunk size (ceil(length / threads) rounded up to `grain`) and chunk count (>= 1, <= threads)."""
    n = b.zext(threads, I64)
    per_thread = b.udiv(b.add(length, b.sub(n, i64(1))), n)
    size = b.mul(b.udiv(b.add(per_thread, b.sub(grain, i64(1))), grain), grain)
    size = b.select(b.icmp_signed(">", size, i64(0)), size, grain)
    count = b.udiv(b.add(length, b.sub(size, i64(1))), size)
    return size, b.select(b.icmp_signed(">", count, i64(0)), count, i64(1))


def _get_num_threads_body(fn: ir.Function) -> ir.Function:
    """Read the thread count, caching the processors this process may use (capped) when it is 0."""
    module = fn.module
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    slot = _num_threads_global(module)
    mask = b.alloca(I64, size=AFFINITY_WORDS)
    current = b.load_atomic(slot, "monotonic", 4, typ=I32)
    with b.if_then(b.icmp_signed("==", current, ir.Constant(I32, 0)), likely=False):
        usable = _usable_processors(b, mask)
        usable = b.select(b.icmp_signed(">", usable, i64(MAX_THREADS)), i64(MAX_THREADS), usable)
        usable = b.select(b.icmp_signed("<", usable, i64(1)), i64(1), usable)
        b.store_atomic(b.trunc(usable, I32), slot, "monotonic", 4)
    b.ret(b.load_atomic(slot, "monotonic", 4, typ=I32))
    return fn


def _usable_processors(b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
    """The processors this process may run on: the count of its affinity mask (sched_getaffinity
    into `mask`, AFFINITY_WORDS i64s), which taskset, cgroup cpusets and batch schedulers narrow
    below the machine's (a process pinned to one of two processors ran two threads on it); the
    online processors where the call fails (a mask wider than a cpu_set_t)."""
    module = b.module
    for k in range(AFFINITY_WORDS):    # read whatever the call leaves: zero where it writes nothing
        b.store(i64(0), b.gep(mask, [i64(k)], source_etype=I64))
    status = b.call(_libc(module, "sched_getaffinity", I32, [I32, I64, PTR]),
                    [ir.Constant(I32, 0), i64(AFFINITY_WORDS * 8), mask])
    popcount = module.declare_intrinsic("llvm.ctpop", [I64])
    count = i64(0)
    for k in range(AFFINITY_WORDS):
        word = b.load(b.gep(mask, [i64(k)], source_etype=I64), typ=I64)
        count = b.add(count, b.call(popcount, [word]))
    online = b.call(_libc(module, "sysconf", I64, [I32]), [ir.Constant(I32, SC_NPROCESSORS_ONLN)])
    counted = b.and_(b.icmp_signed("==", status, ir.Constant(I32, 0)), b.icmp_signed(">", count, i64(0)))
    return b.select(counted, count, online)


def _num_threads_global(module: ir.Module) -> ir.GlobalVariable:
    """The i32 thread count; 0 until first use or after adc_set_num_threads(0)."""
    if "adc.num_threads" in module.globals:
        return module.globals["adc.num_threads"]
    slot = ir.GlobalVariable(module, I32, "adc.num_threads")
    slot.linkage = "internal"
    slot.initializer = ir.Constant(I32, 0)
    return slot


def internal(module: ir.Module, fnty: ir.FunctionType, name: str) -> ir.Function:
    """A function only its module calls."""
    fn = ir.Function(module, fnty, name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    return fn


def _exported(module: ir.Module, fnty: ir.FunctionType, name: str) -> ir.Function:
    fn = ir.Function(module, fnty, name)
    fn.attributes.add("nounwind")
    return fn


def _zeroed(module: ir.Module, name: str, ty: ir.Type) -> ir.GlobalVariable:
    """An internal zero-initialised global on its own cache line."""
    slot = ir.GlobalVariable(module, ty, name)
    slot.linkage = "internal"
    slot.initializer = ir.Constant(ty, None)
    slot.align = 64
    return slot


def _libc(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    return declared(module, name, ir.FunctionType(ret, args))


def declared(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    """The function `name` of `module`, declared (to be resolved by the linker or the JIT) on first use."""
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, fnty, name)
