"""In-process loading through the system's dynamic loader: the JIT's shared objects.

The JIT keeps what it compiles in the cache twice: as object code, which the JIT linker
links into a process (jit.py: needs LLVM), and as a shared object linked
from it (aot.py), which the dynamic loader maps with no LLVM at all. A process
whose kernels are all cached loads the shared objects: the runtime library first,
with its symbols global, so that each kernel's calls into it resolve, then each
kernel as it is first called (see driver/jit_module.py).

    runtime = DynamicLibrary(runtime_path, runtime=True)
    kernel = DynamicLibrary(kernel_path)
    kernel.address("adc_kernel_sigmoid_shift")
"""
from __future__ import annotations

import ctypes
import os
import weakref

_libc = ctypes.CDLL(None)       # the POSIX loader's API: ctypes opens libraries but never closes them
_libc.dlopen.argtypes, _libc.dlopen.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_void_p
_libc.dlclose.argtypes = [ctypes.c_void_p]
_libc.dlerror.restype = ctypes.c_char_p


class DynamicLibrary:
    """A shared object mapped into this process (OSError when the loader refuses it).

    A kernel's library is unmapped when nothing refers to it any more, as a JIT-linked one is:
    kernels are called synchronously, so none of its code runs then, and a process compiling
    fresh kernels keeps no memory of the ones it dropped. The `runtime` library is mapped for
    good, its symbols global for the kernels to bind to: its thread pool's threads run its code
    for the life of the process."""

    def __init__(self, path: str | os.PathLike, runtime: bool = False):
        path = os.fspath(path)
        mode = os.RTLD_NOW | (os.RTLD_GLOBAL if runtime else os.RTLD_LOCAL)
        handle = _libc.dlopen(os.fsencode(path), mode)
        if not handle:
            raise OSError(f"{path}: {(_libc.dlerror() or b'cannot be loaded').decode(errors='replace')}")
        self._lib = ctypes.CDLL(path, handle=handle)
        if not runtime:
            weakref.finalize(self, _libc.dlclose, handle).atexit = False

    def address(self, symbol: str) -> int:
        """The address of an exported function, 0 when the library does not define it."""
        try:
            return ctypes.cast(getattr(self._lib, symbol), ctypes.c_void_p).value or 0
        except AttributeError:
            return 0
