"""Shared objects the JIT's cache keeps, linked by the C compiler (codegen/toolchain/aot.py).

A later process maps them with the dynamic loader and never loads LLVM (see jit_module.py). A
kernel's is linked on a thread at the lowest CPU priority while this process goes on; a
machine with no C compiler links none, and the JIT keeps to object code.

    link([runtime_object], runtime_symbols(), "runtime library", runtime_loaded=False)   # bytes or None
    link_later(object_code, "adc_kernel_f", key, "k.adc: adc_kernel_f")   # into the cache's shared/

`ADC_LINK=0` links no kernel: later processes load its object code, with LLVM's loader. That suits
processes whose kernels rarely outlive them, as the test suite's, which saves a C compiler run per
kernel compiled.
"""
from __future__ import annotations

import os
import sys
import threading

from adc import compile_log
from adc.abi import BOUNDS_PREFIX
from adc.driver.cache_keys import open_cache

SWITCH = "ADC_LINK"


def link(objects: list[bytes], exports, subject: str, runtime_loaded: bool = True) -> bytes | None:
    """A shared object linked from `objects` (see aot.link_shared_object), or None when this
    machine cannot link one (no C compiler): the JIT then keeps to object code."""
    from adc.codegen.toolchain import aot
    from adc.codegen.toolchain.scratch import scratch_folder
    from adc.errors import ToolchainError

    with scratch_folder() as folder:
        out = folder / "library.so"
        try:
            with compile_log.stage(subject, "link"):
                aot.link_shared_object(objects, out, exports=exports, runtime_loaded=runtime_loaded)
            return out.read_bytes()
        except (ToolchainError, OSError) as err:
            compile_log.event(subject, f"not linked, object code only: {err}")
            return None


def link_later(object_code: bytes, symbol: str, key: str, subject: str) -> None:
    """Link a kernel's object code into the shared object a later process loads without LLVM, on a
    thread whose C compiler runs as another process at the lowest CPU priority, in the time this
    process's own work leaves (it slowed the kernels running beside it by up to a third); the
    interpreter waits for it at exit. Not with `ADC_LINK=0`."""
    if os.environ.get(SWITCH, "1").strip() == "0":
        compile_log.event(subject, f"not linked ({SWITCH}=0), object code only")
        return

    def link_kernel() -> None:
        _lowest_priority()
        image = link([object_code], [symbol, f"{BOUNDS_PREFIX}*"], subject)
        cache = open_cache()
        if image is not None and cache is not None:
            cache.put("shared", key, image)
    threading.Thread(target=link_kernel, name=f"adc-link-{symbol}").start()


def _lowest_priority() -> None:
    """Run this thread and the processes it starts only when the CPU is otherwise idle: on Linux a
    thread's scheduling policy is its own (set through its thread id), and a child inherits it.
    SCHED_IDLE, not nice 19: a nice-19 linker still took its time slices from the kernels running
    beside it (a pool thread waking behind it waited), and the first call at a new batch size
    right after a compile took 9-23 ms instead of 7 ms."""
    if sys.platform.startswith("linux"):
        try:
            os.sched_setscheduler(threading.get_native_id(), os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass
