"""adc kernels called by XLA through its FFI: the lowering of adc.jax's `adc_call` under jit.

    lowering = jax_ffi.lowering()      # None where the handler cannot be built (no C compiler)
    lowering(ctx, *args, kernel=k)     # a custom call of `adc_kernel_call` on k's entry point

The handler (adc/jax_ffi.c) is one C function for every kernel: it reads the kernel's entry point
and the values of its dimension symbols from the call's attributes and calls it on XLA's buffers,
so a jitted call runs no Python. It is compiled at first use by the system C compiler against the
XLA FFI C header jaxlib ships (`jax.ffi.include_dir()`), kept in adc's compile cache (a second
process compiles nothing), loaded with ctypes and registered as the CPU target `adc_kernel_call`.

The dims are fixed when the call is lowered (JAX's shapes are static under jit), after the shapes
and constraints were checked (Kernel.bind_shapes): a shape error shows while tracing, as on the
callback route. Index arguments of gathers are not range-checked on this route: native code clamps
them, as XLA's own gathers do. Each kernel whose address an executable holds is kept alive here,
since XLA's executables hold no Python object.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import jax
import numpy as np

from adc import errors, locks
from adc.codegen.toolchain.aot import c_compiler
from adc.driver.cache_keys import open_cache
from adc.runtime.kernel import Kernel

TARGET = "adc_kernel_call"          # the handler's symbol, and its name as XLA's custom-call target
NAMESPACE = "xla_ffi"               # its folder in the compile cache
SOURCE = Path(__file__).with_name("jax_ffi.c")

_called: dict[int, Kernel] = {}     # entry point -> kernel, for every kernel an executable calls
_lock = locks.lock()


@functools.lru_cache(maxsize=None)
def lowering():
    """The lowering rule calling a kernel through the handler, or None when it cannot be built
    (then adc.jax lowers to pure_callback)."""
    try:
        library = ctypes.CDLL(str(handler_library()))
    except (OSError, errors.ToolchainError):
        return None
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(getattr(library, TARGET)), platform="cpu")
    rule = jax.ffi.ffi_lowering(TARGET)

    def lower(ctx, *args, kernel: Kernel):
        env = kernel.bind_shapes([a.shape for a in ctx.avals_in])
        address = kernel.entry_address()
        with _lock:
            _called[address] = kernel
        return rule(ctx, *args, fn=np.uint64(address), name=kernel.signature.name,
                    dims=np.array([env[s] for s in kernel.signature.dims], dtype=np.int64))

    lower.library = library         # (the handler's code stays mapped)
    return lower


def executables_persist() -> bool:
    """Whether JAX stores compiled executables on disk (its persistent compilation cache), where
    another process could load one holding this process's addresses."""
    return bool(jax.config.jax_compilation_cache_dir) and jax.config.jax_enable_compilation_cache


def handler_library() -> Path:
    """The handler's shared object: from the compile cache, else compiled (and stored)."""
    source = SOURCE.read_bytes()
    include = Path(jax.ffi.include_dir())
    header = (include / "xla" / "ffi" / "api" / "c_api.h").read_bytes()
    cc = c_compiler()
    key = hashlib.sha256(b"\0".join([source, header, " ".join(cc).encode()])).hexdigest()
    cache = open_cache()
    path = cache.locate(NAMESPACE, key) if cache else None
    if path is not None:
        return path
    folder = Path(tempfile.mkdtemp(prefix="adc-xla-ffi-"))
    built = folder / "adc_jax_ffi.so"
    result = subprocess.run([*cc, "-O2", "-shared", "-fPIC", f"-I{include}", "-o", str(built), str(SOURCE)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise errors.ToolchainError(f"compiling the XLA FFI handler {SOURCE} failed:\n{result.stderr.strip()}")
    if cache is None:
        return built
    cache.put(NAMESPACE, key, built.read_bytes())
    stored = cache.locate(NAMESPACE, key)
    if stored is None:          # (a cache that cannot be written: the built file serves this process)
        return built
    shutil.rmtree(folder, ignore_errors=True)
    return stored
