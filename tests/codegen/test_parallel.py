"""Multithreaded loop nests and the runtime library's thread pool.

Loop nests: results match the one-thread path and NumPy at every split. Thread
counts are set through the module's exported `adc_set_num_threads`, as the
runtime does for ADC_NUM_THREADS; sizes straddle parallel.THRESHOLD and the
FLAT_GRAIN chunk rounding.

The pool (`pool.define_runtime`) is tested on its own, with tasks written in
LLVM IR: every element runs exactly once, workers persist, concurrent and nested
callers complete, and a forked child gets a working pool. Scenarios that count
threads or fork run in a fresh interpreter, under a timeout, so a deadlock fails.
"""
from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import sys
import textwrap
import threading
import time

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

import adc
from adc.abi import RUNTIME_GET_NUM_THREADS, RUNTIME_PARALLEL_FOR, RUNTIME_SET_NUM_THREADS, SET_NUM_THREADS_SYMBOL
from adc.codegen.lowering.loops import I32, I64, for_range, i64
from adc.codegen.native.parallel import FLAT_GRAIN, THRESHOLD
from adc.codegen.native.pool import MAX_THREADS, TASK, define_runtime
from adc.codegen.toolchain.target import Target
from adc.compiler import elaborate
from adc.driver import write_shared_object
from tests.support.ir_kernels import kernel
from tests.support.native import call, compile_module
from tests.support.random_arrays import randn
from tests.support.repository import ROOT

SET_THREADS = ctypes.CFUNCTYPE(None, ctypes.c_int32)
THREADS = (1, 2, 3, 7)
FLAT_SIZES = (THRESHOLD - 1, THRESHOLD, THRESHOLD + 1, THRESHOLD + 3 * FLAT_GRAIN + 5, 1_000_003, 4_000_000)


def sigmoid_shift(b, x, d):
    return b.op("sigmoid", b.op("add", x, b.op("broadcast", d, dims=[], shape=x.type.shape)))


@pytest.fixture(scope="module")
def elementwise():
    module = kernel("x: f32[N], d: f32", sigmoid_shift)
    return compile_module(module), next(iter(module))


def set_threads(lib, n: int) -> None:
    SET_THREADS(lib.address(SET_NUM_THREADS_SYMBOL))(n)


@pytest.mark.parametrize("n", FLAT_SIZES)
def test_flat_loop_is_bitwise_identical_for_every_thread_count(elementwise, n):
    lib, func = elementwise
    x, d = randn(n), np.float32(0.25)
    set_threads(lib, 1)
    (serial,) = call(lib.address("adc_kernel_k"), func, x, d)
    np.testing.assert_allclose(serial, 1 / (1 + np.exp(-(x.astype(np.float64) + 0.25))), rtol=2e-6, atol=2e-6)
    for threads in THREADS[1:]:
        set_threads(lib, threads)
        (got,) = call(lib.address("adc_kernel_k"), func, x, d)
        np.testing.assert_array_equal(got.view(np.uint32), serial.view(np.uint32), err_msg=f"{threads} threads")
    set_threads(lib, 0)


@pytest.mark.parametrize("shape", [(THRESHOLD // 64 + 1, 64), (7, 40_000), (100_003, 3)])
def test_nested_loop_over_rows_matches_numpy(shape):
    # a row-broadcast add is not flat: the outer range is the rows
    module = kernel("x: f32[B,N], r: f32[N]",
                    lambda b, x, r: b.op("mul", x, b.op("broadcast", r, dims=[1], shape=x.type.shape)))
    lib, func = compile_module(module), next(iter(module))
    x, r = randn(*shape), randn(shape[1])
    for threads in THREADS:
        set_threads(lib, threads)
        (got,) = call(lib.address("adc_kernel_k"), func, x, r)
        np.testing.assert_array_equal(got, x * r)


@pytest.mark.parametrize("axes, shape", [([1], (5_001, 40)), ([0], (40_000, 9)), ([0], (3, 300_000))])
def test_reductions_stay_correct_at_large_sizes(axes, shape):
    # axes=[1] splits the rows (each output element within one chunk); axes=[0] accumulates into
    # the whole output across the outer axis and must stay serial
    module = kernel("x: f64[B,N]", lambda b, x: b.op("reduce_sum", x, axes=axes))
    lib, func = compile_module(module), next(iter(module))
    x = randn(*shape, dtype=np.float64)
    set_threads(lib, 1)
    (serial,) = call(lib.address("adc_kernel_k"), func, x)
    np.testing.assert_allclose(serial, x.sum(axis=axes[0]), rtol=1e-10, atol=1e-9)
    for threads in THREADS[1:]:
        set_threads(lib, threads)
        (got,) = call(lib.address("adc_kernel_k"), func, x)
        np.testing.assert_array_equal(got, serial, err_msg=f"{threads} threads")


def test_thread_count_is_capped_and_zero_restores_the_default(elementwise):
    lib, func = elementwise
    x = randn(THRESHOLD * 2 + 1)
    results = []
    for threads in (1 << 20, -5, 0):
        set_threads(lib, threads)
        results.append(call(lib.address("adc_kernel_k"), func, x, np.float32(1.0))[0])
    np.testing.assert_allclose(results[0], 1 / (1 + np.exp(-(x.astype(np.float64) + 1))), rtol=2e-6, atol=2e-6)
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])


SOURCE = "def sigmoid_shift(x: f32[N], delta: f32) -> f32[N]:\n    return sigmoid(x + delta)\n"


def test_shared_object_runs_in_parallel_and_honours_adc_num_threads(tmp_path, monkeypatch):
    path = tmp_path / "par.so"
    write_shared_object(elaborate(SOURCE, "par.adc"), path)
    x = randn(THRESHOLD * 3 + 17)
    want = 1 / (1 + np.exp(-(x.astype(np.float64) - 0.5)))
    outputs = []
    for setting in ("1", "2", "3", "7"):
        monkeypatch.setenv("ADC_NUM_THREADS", setting)
        m = adc.load(path)
        outputs.append(m.sigmoid_shift(x, np.float32(-0.5)))
    np.testing.assert_allclose(outputs[0], want, rtol=2e-6, atol=2e-6)
    for got in outputs[1:]:
        np.testing.assert_array_equal(got, outputs[0])


def test_a_malformed_adc_num_threads_is_a_load_error():
    # in a fresh process: the variable is read until a program calls adc.set_num_threads, as tests here do
    script = f"import adc\ntry:\n    adc.compile({SOURCE!r})\nexcept adc.LoadError as err:\n    print(err)\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "ADC_NUM_THREADS": "two"})
    assert result.returncode == 0, result.stderr
    assert "ADC_NUM_THREADS must be an integer, not 'two'" in result.stdout


# --- the runtime library's thread pool -----------------------------------------------------------

PARALLEL_FOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_int64)
GET_THREADS = ctypes.CFUNCTYPE(ctypes.c_int32)
POOL_THREADS = (1, 2, 3, 5, 16)
RANGES = ((0, 0), (9, 9), (0, 1), (3, 5), (0, 7), (5, 133), (0, 4096), (11, 100_003))
JOBS = tuple((start, end, grain) for start, end in RANGES for grain in (1, 3, FLAT_GRAIN))   # [start, end), grain


def _task(module: ir.Module, name: str, body) -> None:
    """`void name(ptr ctx, i64 lo, i64 hi)` running body(b, ctx, lo, hi)."""
    fn = ir.Function(module, TASK, name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    body(b, *fn.args)
    b.ret_void()


def _fill(b, out, lo, hi):
    # out[i] = 2i + 1 (i64)
    with for_range(b, lo, hi) as i:
        b.store(b.add(b.mul(i, i64(2)), i64(1)), b.gep(out, [i], source_etype=I64))


def _count(b, counters, lo, hi):
    # counters[i] += 1 (i32, atomically: a chunk run twice, even concurrently, shows as 2)
    with for_range(b, lo, hi) as i:
        b.atomic_rmw("add", b.gep(counters, [i], source_etype=I32), ir.Constant(I32, 1), "monotonic")


def _log_chunk(b, log, lo, hi):
    # log = {n, lo0, hi0, lo1, hi1, ...}: append this chunk
    slot = b.atomic_rmw("add", log, i64(1), "monotonic")
    at = b.add(b.mul(slot, i64(2)), i64(1))
    b.store(lo, b.gep(log, [at], source_etype=I64))
    b.store(hi, b.gep(log, [b.add(at, i64(1))], source_etype=I64))


def _hold(b, flags, lo, hi):
    # flags = {release, entered}: entered += 1, then wait until release is set
    b.atomic_rmw("add", b.gep(flags, [i64(1)], source_etype=I64), i64(1), "monotonic")
    pause = b.module.globals.get("llvm.x86.sse2.pause") or ir.Function(b.module, ir.FunctionType(ir.VoidType(), []),
                                                                         "llvm.x86.sse2.pause")
    wait, done = b.append_basic_block("wait"), b.append_basic_block("released")
    b.branch(wait)
    b.position_at_end(wait)
    b.call(pause, [])
    released = b.load_atomic(flags, "monotonic", 8, typ=I64)
    b.cbranch(b.icmp_signed("==", released, i64(0)), wait, done)
    b.position_at_end(done)


def _pool_module() -> ir.Module:
    """The pool and the test tasks; `nested` runs `fill` over its chunk through the pool again."""
    module = ir.Module(name="pool_test")
    define_runtime(module)
    for name, body in (("fill", _fill), ("count", _count), ("log_chunk", _log_chunk), ("hold", _hold)):
        _task(module, name, body)
    _task(module, "nested", lambda b, out, lo, hi: b.call(
        module.globals[RUNTIME_PARALLEL_FOR], [module.globals["fill"], out, lo, hi, i64(1)]))
    return module


class PoolLibrary:
    """The pool module compiled into this process, with ctypes entry points."""

    def __init__(self):
        target = Target.host()
        ref = llvm.parse_assembly(str(_pool_module()))
        target.optimize(ref)
        self._engine = llvm.create_mcjit_compiler(ref, target.new_target_machine())
        self._engine.finalize_object()
        address = self._engine.get_function_address
        self.parallel_for = PARALLEL_FOR(address(RUNTIME_PARALLEL_FOR))
        self.set_threads = SET_THREADS(address(RUNTIME_SET_NUM_THREADS))
        self.get_threads = GET_THREADS(address(RUNTIME_GET_NUM_THREADS))
        self.tasks = {name: address(name) for name in ("fill", "count", "log_chunk", "nested", "hold")}

    def run(self, task: str, buffer: np.ndarray, start: int, end: int, grain: int) -> np.ndarray:
        self.parallel_for(self.tasks[task], buffer.ctypes.data, start, end, grain)
        return buffer


@functools.cache
def pool_library() -> PoolLibrary:
    """One per process and never freed: the workers run its code for the process's life."""
    return PoolLibrary()


def assert_each_element_runs_once(lib: PoolLibrary, start: int, end: int, grain: int, task: str = "count") -> None:
    """Run `task` over [start, end): "count" counts each element's runs, "fill" and "nested" write 2i + 1."""
    if task == "count":
        got, want = np.zeros(end + 3, np.int32), np.zeros(end + 3, np.int32)
        want[start:end] = 1
    else:
        got, want = np.zeros(end + 3, np.int64), np.zeros(end + 3, np.int64)
        want[start:end] = 2 * np.arange(start, end) + 1
    lib.run(task, got, start, end, grain)
    np.testing.assert_array_equal(got, want, err_msg=f"{task} over [{start}, {end}) grain {grain}")


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def run_python(script: str) -> None:
    """Run `script` in a fresh interpreter at the repository root; a hang fails after 60 s."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def finishes(*fns, seconds: float = 60) -> None:
    """Run each fn on a daemon thread of its own: a deadlock fails the test instead of hanging it."""
    errors = []

    def run(fn):
        try:
            fn()
        except BaseException as err:  # re-raised on the test's thread
            errors.append(err)

    threads = [threading.Thread(target=run, args=(fn,), daemon=True) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds)
        assert not t.is_alive(), f"did not finish within {seconds} s"
    if errors:
        raise errors[0]


def bounded(test):
    """Run the test through `finishes`, so a deadlocked pool fails it instead of hanging the run."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        finishes(functools.partial(test, *args, **kwargs))
    return run


@pytest.fixture
def pool():
    lib = pool_library()
    yield lib
    lib.set_threads(0)


@pytest.mark.parametrize("threads", POOL_THREADS)
@bounded
def test_pool_runs_every_element_exactly_once(pool, threads):
    pool.set_threads(threads)
    for start, end, grain in JOBS:
        assert_each_element_runs_once(pool, start, end, grain)
        assert_each_element_runs_once(pool, start, end, grain, task="fill")


@pytest.mark.parametrize("threads", POOL_THREADS)
@bounded
def test_pool_chunks_tile_the_range_in_multiples_of_the_grain(pool, threads):
    pool.set_threads(threads)
    for start, end, grain in JOBS:
        log = pool.run("log_chunk", np.zeros(1 + 2 * MAX_THREADS, np.int64), start, end, grain)
        chunks = sorted(zip(log[1:1 + 2 * log[0]:2], log[2:2 + 2 * log[0]:2]))
        where = f"[{start}, {end}) grain {grain}"
        assert 1 <= len(chunks) <= threads, where
        assert chunks[0][0] == start and chunks[-1][1] == end, where
        assert all(hi == lo for (_, hi), (lo, _) in zip(chunks, chunks[1:])), where
        assert all((hi - lo) % grain == 0 for lo, hi in chunks[:-1]), where
        if threads > 1 and end - start > grain:
            assert len(chunks) > 1, f"{where} ran on one thread"


@bounded
def test_pool_back_to_back_jobs_never_rerun_or_lose_a_chunk(pool):
    # a worker waking late must not run a chunk of a finished job
    pool.set_threads(3)
    counters = np.zeros(1000, np.int32)
    for _ in range(3000):
        pool.run("count", counters, 0, 1000, 1)
    np.testing.assert_array_equal(counters, 3000)


def test_pool_thread_count_is_capped_and_zero_or_negative_restores_the_default(pool):
    default = min(len(os.sched_getaffinity(0)), MAX_THREADS)
    for n, want in ((3, 3), (1, 1), (MAX_THREADS, MAX_THREADS), (1 << 20, MAX_THREADS), (0, default),
                    (7, 7), (-5, default)):
        pool.set_threads(n)
        assert pool.get_threads() == want, f"set {n}"


def test_the_default_thread_count_is_the_processors_the_caller_may_run_on(pool):
    """A process pinned to fewer processors than the machine has (taskset, a cpuset) runs as many
    threads as it may use, not one per online one; read again after set_threads(0)."""
    allowed = os.sched_getaffinity(0)
    try:
        for pinned in ({min(allowed)}, set(sorted(allowed)[:2]), allowed):
            os.sched_setaffinity(0, pinned)     # the calling thread's mask, which the runtime reads
            pool.set_threads(0)
            assert pool.get_threads() == min(len(pinned), MAX_THREADS), pinned
    finally:
        os.sched_setaffinity(0, allowed)
        pool.set_threads(0)


def wait_until(condition, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def chunks_of(pool: PoolLibrary, end: int) -> int:
    """How many chunks the pool cut [0, end) into (grain 1)."""
    return int(pool.run("log_chunk", np.zeros(1 + 2 * MAX_THREADS, np.int64), 0, end, 1)[0])


@pytest.mark.parametrize("threads", (2, 3))
@bounded
def test_a_job_beside_another_callers_takes_one_thread_less(pool, threads):
    """While a caller that found the pool held runs its job on its own thread, the next holder of
    the pool splits its job over one thread less (never fewer than one); once that caller is done,
    over all of them again. The callers' threads and the pool's then add up to the thread count."""
    pool.set_threads(threads)
    first, beside = np.zeros(2, np.int64), np.zeros(2, np.int64)      # {release, entered}
    holder = threading.Thread(target=pool.run, args=("hold", first, 0, threads, 1), daemon=True)
    holder.start()
    wait_until(lambda: first[1] == threads)           # the holder's job runs a chunk on each thread
    other = threading.Thread(target=pool.run, args=("hold", beside, 0, threads, 1), daemon=True)
    other.start()
    wait_until(lambda: beside[1] == 1)                # the pool is held: its whole job on its own thread
    first[0] = 1
    holder.join()
    assert chunks_of(pool, 1000) == threads - 1
    beside[0] = 1
    other.join()
    assert chunks_of(pool, 1000) == threads


def test_pool_serves_many_calling_threads_at_once(pool):
    # one job holds the pool at a time; the other callers run theirs serially, never wait
    pool.set_threads(3)

    def caller(k: int) -> None:
        end = 1000 + 97 * k
        counters, filled = np.zeros(end, np.int32), np.zeros(end, np.int64)
        for _ in range(200):
            pool.run("count", counters, 0, end, 1 + k % 3)
            pool.run("fill", filled, 0, end, 64)
        np.testing.assert_array_equal(counters, 200)
        np.testing.assert_array_equal(filled, 2 * np.arange(end) + 1)

    finishes(*(functools.partial(caller, k) for k in range(8)))


@bounded
def test_pool_nested_call_completes(pool):
    pool.set_threads(4)
    for start, end in RANGES:
        for grain in (1, 64):
            assert_each_element_runs_once(pool, start, end, grain, task="nested")


def test_pool_workers_start_once_and_persist():
    run_python("""
        from tests.codegen.test_parallel import pool_library, assert_each_element_runs_once, thread_count
        lib = pool_library()
        lib.set_threads(4)
        before = thread_count()
        assert_each_element_runs_once(lib, 0, 10_000, 1)
        first = thread_count()
        assert first == before + 3, (before, first)
        for _ in range(100):
            assert_each_element_runs_once(lib, 0, 10_000, 1)
        assert thread_count() == first, (first, thread_count())
        lib.set_threads(6)                       # raised: two more workers
        assert_each_element_runs_once(lib, 0, 10_000, 1)
        assert thread_count() == first + 2
        lib.set_threads(2)                       # lowered: the extra workers stay parked
        for _ in range(20):
            assert_each_element_runs_once(lib, 0, 10_000, 1)
        assert thread_count() == first + 2
    """)


def test_pool_survives_fork_even_mid_call():
    # the child of a fork has no workers and may inherit held locks: it must rebuild the pool
    run_python("""
        import os, signal, threading
        from tests.codegen.test_parallel import pool_library, assert_each_element_runs_once, thread_count
        lib = pool_library()
        lib.set_threads(4)
        assert_each_element_runs_once(lib, 0, 10_000, 1)
        stop = threading.Event()

        def hammer():
            while not stop.is_set():
                assert_each_element_runs_once(lib, 0, 3_000, 1)

        busy = threading.Thread(target=hammer)
        busy.start()
        for _ in range(20):
            pid = os.fork()
            if pid == 0:
                signal.alarm(20)                 # a deadlocked child dies instead of lingering
                try:
                    for n in (2, 4):
                        lib.set_threads(n)
                        for _ in range(50):
                            assert_each_element_runs_once(lib, 0, 5_000, 1)
                    assert thread_count() == 4   # this thread and three new workers
                except BaseException as err:
                    print(repr(err), flush=True)
                    os._exit(1)
                os._exit(0)
            assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        stop.set()
        busy.join()
        assert_each_element_runs_once(lib, 0, 10_000, 1)
    """)


def test_pool_runs_every_chunk_when_threads_cannot_start():
    # no address space left for an 8 MB thread stack: pthread_create fails, the caller runs it all
    run_python("""
        import resource
        from tests.codegen.test_parallel import pool_library, assert_each_element_runs_once, thread_count
        lib = pool_library()
        lib.set_threads(4)
        before = thread_count()
        with open("/proc/self/status") as status:
            size = next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size + (4 << 20), resource.RLIM_INFINITY))
        for _ in range(10):
            assert_each_element_runs_once(lib, 0, 10_000, 1)
        assert thread_count() == before
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        assert_each_element_runs_once(lib, 0, 10_000, 1)      # the next call starts them
        assert thread_count() == before + 3
    """)
