"""Ctrl-C stops a running kernel: SIGINT moves a counter every loaded library's loops watch.

A kernel runs with the GIL released, so Python's SIGINT handler, which only notes the signal
for the interpreter, cannot stop it. adc's C extension (native_call.c) puts a handler of its
own in front of Python's, which increments a counter and runs Python's; each library gets the
counter's address before its first kernel runs (`adc_watch_interrupts`: JIT modules share the runtime
library's, each shared object has its own), and every loop of its kernels stops when the
counter moves while the kernel runs (adc/codegen/lowering/interrupts.py). The kernel lets go of what it
allocated and returns STATUS_INTERRUPTED; the call raises KeyboardInterrupt — in the main
thread what Python's handler raises, in another thread KeyboardInterrupt itself: SIGINT stops
every kernel running when it comes, whatever thread runs it (a thread's endless kernel would
otherwise keep the process alive at exit). Where the extension is not built (no C compiler at
install), nothing moves the counter and kernels run to their end, as Python code's C calls do.
"""
from __future__ import annotations

import ctypes

from adc import locks
from adc.abi import WATCH_INTERRUPTS_SYMBOL

try:
    from adc.runtime import native_call
except ImportError:
    native_call = None

_WATCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_counter: int | None = None
_lock = locks.lock()


def attach(library) -> None:
    """Point a library's loops at the process's interrupt counter: before its kernel's first run
    (Kernel.entry_address; at its module's load, a JIT module would load the runtime library that
    adc.compile of a cached program does not need yet)."""
    global _counter
    if native_call is None:
        return
    with _lock:
        if _counter is None:
            _counter = native_call.interrupt_counter()
    setter = library.address(WATCH_INTERRUPTS_SYMBOL)
    if setter:
        _WATCH(setter)(_counter)
