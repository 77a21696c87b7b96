"""How many threads large loop nests use: ADC_NUM_THREADS at start, `adc.set_num_threads(n)` later.

Every loaded native library exports `adc_set_num_threads`; JIT modules share the one
runtime library (and its thread pool) of the process, while each shared object carries
its own. A setting applies to every library loaded so far and to those loaded later.

    adc.set_num_threads(1)      # every kernel on the calling thread
    adc.set_num_threads(0)      # back to one thread per processor the process may run on
"""
from __future__ import annotations

import ctypes
import os
import weakref

from adc import locks
from adc.abi import SET_NUM_THREADS_SYMBOL

MAX_REQUEST = 1 << 16
_SETTER = ctypes.CFUNCTYPE(None, ctypes.c_int32)
_libraries: weakref.WeakSet = weakref.WeakSet()
_requested: int | None = None
_lock = locks.lock()


def set_num_threads(n: int) -> None:
    """Split large loop nests and matrix products across `n` threads from now on (capped at the
    runtime's maximum, 64); n <= 0 restores the default, one per processor the process
    may run on (its affinity mask)."""
    global _requested
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"adc.set_num_threads: n must be an int, not {type(n).__name__}")
    with _lock:
        _requested = max(-1, min(n, MAX_REQUEST))
        for library in list(_libraries):
            _apply(library, _requested)


def attach(library) -> None:
    """Give a newly loaded library the current setting (ValueError for a malformed ADC_NUM_THREADS)."""
    with _lock:
        _libraries.add(library)
        n = _requested if _requested is not None else _from_environment()
        if n is not None:
            _apply(library, n)


def _from_environment() -> int | None:
    setting = os.environ.get("ADC_NUM_THREADS", "").strip()
    if not setting:
        return None
    try:
        return max(-1, min(int(setting), MAX_REQUEST))
    except ValueError:
        raise ValueError(f"ADC_NUM_THREADS must be an integer, not {setting!r}") from None


def _apply(library, n: int) -> None:
    setter = library.address(SET_NUM_THREADS_SYMBOL)
    if setter:
        _SETTER(setter)(n)
