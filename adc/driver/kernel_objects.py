"""Where a kernel's object code is compiled: in this process or its compile worker, in a forked
child ahead of need (a JIT module's next kernel), or in a pool of forked workers (a `.so`'s
kernels not cached yet).

A kernel's object code is keyed by the digest of its IR and all it calls (`kernel_key`), so
kernels of the same code share it, whatever module they are in. llvmlite runs one LLVM call at a
time in a process: only other processes overlap compiles, forked only while this process runs
one Python thread (see compile_kernels).

    kernel_object(symbol, ir_text, "k.adc", target)     # bytes, compiled now
    child = compile_in_child(cache, {symbol: digest, other: digest2}, ir_text, "k.adc", target)
    child.wait_ready()          # symbol's first-tier code is cached; the full code of both follows
    compile_kernels(sources, "k.adc", target)           # every kernel's bytes, cached or compiled
"""
from __future__ import annotations

import gc
import os
import threading
from itertools import repeat
from typing import TYPE_CHECKING

from adc import compile_log
from adc.driver.cache_keys import open_cache
from adc.driver.host import cache_key, usable_processors

if TYPE_CHECKING:
    from adc.codegen.toolchain.cache import Cache
    from adc.codegen.toolchain.target import Target

_children: set[Child] = set()    # compile_in_child's children not reaped yet


def kernel_key(symbol: str, digest: str, target: Target) -> str:
    """Object code of a kernel (and the shared object linked from it) is cached by the digest of
    its IR and all it calls: kernels of the same code share it, whatever module they are in."""
    return cache_key(target, "kernel", symbol, digest)


def kernel_object(symbol: str, ir_text: str, module_name: str, target: Target) -> bytes:
    """Compile one kernel from its module's `KernelSources.ir` text: in this process or in its
    compile worker (compile_worker.py, imported on a miss only: it imports subprocess)."""
    from adc import compile_worker

    return compile_worker.object_code(symbol, ir_text, module_name, target)


class Child:
    """A forked child compiling kernels into the cache (compile_in_child)."""

    def __init__(self, pid: int, ready: int, first_tier: str):
        self.pid = pid
        self.first_tier = first_tier    # the kernel whose first-tier code it makes first
        self._ready = ready             # a pipe's read end: a byte once that code is cached, EOF if it died

    def wait_ready(self) -> None:
        """Wait until the child has cached `first_tier`'s first-tier code, or is gone."""
        if self._ready >= 0:
            try:
                os.read(self._ready, 1)
            finally:
                self._close()

    def finished(self) -> bool:
        """Whether the child has exited (reaped now if so): all it compiled is in the cache."""
        if self in _children:
            try:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:       # reaped already (SIGCHLD ignored, say)
                done = self.pid
            if not done:
                return False
            _children.discard(self)
        self._close()
        return True

    def _close(self) -> None:
        if self._ready >= 0:
            os.close(self._ready)
            self._ready = -1


def compile_in_child(cache: Cache, kernels: dict[str, str], ir_text: str, module_name: str,
                     target: Target) -> Child:
    """A forked child that compiles `kernels` (symbol -> digest, as `kernel_key` takes) into
    `cache`: the first one's first-tier code (Target.first_tier), which it reports ready, then
    the full code of each — on cores this process leaves idle (`_yield_to_others`), as its
    threads may be running that first tier meanwhile — and exits without running anything of this
    process's (os._exit: no atexit handlers, no buffered output). A fork while native threads run
    draws warnings (Python 3.12's, at any; JAX's, at its own): the child runs only the compile,
    which takes none of those threads' locks (malloc's are held across a fork), so they are not
    shown."""
    import warnings

    for child in list(_children):   # reap those whose kernels were never asked for
        child.finished()
    ready, report = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        pid = _fork()
    if pid == 0:
        status = 1
        try:
            from adc import compile_worker

            os.close(ready)
            first, *rest = kernels
            tiers = compile_worker.kernel_tiers(first, ir_text, module_name, target)
            cache.put("modules", kernel_key(first, kernels[first], target.first_tier), next(tiers))
            os.write(report, b"1")
            _yield_to_others()
            cache.put("modules", kernel_key(first, kernels[first], target), next(tiers))
            for symbol in rest:
                cache.put("modules", kernel_key(symbol, kernels[symbol], target),
                          compile_worker.kernel_object(symbol, ir_text, module_name, target))
            status = 0
        finally:
            os._exit(status)
    os.close(report)
    child = Child(pid, ready, next(iter(kernels)))
    _children.add(child)
    return child


def _fork() -> int:
    """os.fork, the parent's Python objects of now frozen in the child (gc.freeze): its garbage
    collections then never walk them, and a walk writes into every object it visits, so each page
    of the parent's heap it crossed would be copied into the child (copy on write)."""
    gc.freeze()
    pid = -1
    try:
        pid = os.fork()
    finally:
        if pid != 0:
            gc.unfreeze()
    return pid


def _yield_to_others() -> None:
    """Run only where a core is otherwise idle (Linux's SCHED_IDLE; else the lowest nice level).
    At nice 19 a child compiling full code still took its slices of a core from the parent's
    two-thread products: mlp_loss's gradient at B=1000 took 25-28 ms instead of 12-13 on 2 cores
    while it ran; under SCHED_IDLE, 12-15 ms in most runs."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


def compile_kernels(sources, module_name: str, target: Target) -> list[bytes]:
    """The object code of each kernel of `sources` (compiler.KernelSources): from the cache, else
    compiled — in one forked worker process per core when several are missing and this process
    runs one Python thread (a fork copies only the calling thread: with no other Python thread, no
    lock the child needs, llvmlite's included, can be held; native threads such as BLAS's or adc's
    pool hold none). The kernels go to the workers in chunks, about four per worker, so the
    module's IR text is sent a few times, not once per kernel; a worker finds the module this
    process printed from that text in its forked memory, and parses nothing."""
    cache = open_cache()
    kernels = sources.kernels
    keys = {symbol: kernel_key(symbol, digest, target) for symbol, digest in kernels.items()}
    found = {symbol: cache.get("modules", key) if cache else None for symbol, key in keys.items()}
    missing = [symbol for symbol, data in found.items() if data is None]
    for symbol, key in keys.items():
        compile_log.event(f"{module_name}: {symbol}", f"cache {'miss' if symbol in missing else 'hit'} {key[:12]}"
                          if cache else "cache off")
    workers = min(len(missing), usable_processors())
    if workers > 1 and threading.active_count() == 1:
        import concurrent.futures       # only `adc compile` needs them: 14 ms at every start otherwise
        import multiprocessing

        from adc import compile_worker

        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            built = pool.map(compile_worker.kernel_object, missing, repeat(sources.ir), repeat(module_name), repeat(target),
                             chunksize=max(1, len(missing) // (4 * workers)))
            found.update(zip(missing, built))
    else:
        found.update((s, kernel_object(s, sources.ir, module_name, target)) for s in missing)
    if cache:
        for symbol in missing:
            cache.put("modules", keys[symbol], found[symbol])
    return [found[symbol] for symbol in kernels]
