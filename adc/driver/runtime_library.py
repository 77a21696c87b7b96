"""The native runtime library (codegen/native/) as the driver serves it: its object code, compiled
once per target and cached, and the one copy this process's JIT kernels call.

A `.so` links the object code in (shared_objects.py); the JIT loads it once per process, as the
shared object the cache keeps (its symbols global, so kernels mapped by the dynamic loader bind
to it), else — cache off, no C compiler — as object code through the JIT linker.

    runtime_object(target)      # bytes: from the cache, else compiled and stored
    runtime_library()           # this process's copy (a DynamicLibrary or a JitLibrary)
    require(runtime_library(), "adc_rt_parallel_for")   # its address, or RuntimeError

Compiling it takes seconds, the whole wait of a first-ever process; so `pip install` compiles it
too (setup.py calls `build_installed`), into the installed package's
adc/prebuilt/, each file named by its cache key. A cache miss copies the installed file when its
key matches — same machine, same adc sources, same llvmlite — and compiles only when none does
(a wheel built elsewhere, no compiler at install).

    build_installed(Path("adc/prebuilt"))    # what setup.py's build step runs

The gemm's packed blocks are measured the first time the library is built on a machine
(gemm_tuning.py: ~4 s, at install for most users), kept as a record in the cache (and in
adc/prebuilt/) and named in the library's key, so a library built with other blocks is never
taken for it:

    gemm_blocks(target)     # b'{"f32": [256, 512], "f64": [512, 256]}'; b"" (the table's) for another CPU
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from adc import compile_log, locks
from adc.abi import runtime_symbols
from adc.driver.cache_keys import cached, open_cache
from adc.driver.host import cache_key, host_target, is_this_machine
from adc.driver.linking import link

if TYPE_CHECKING:       # imported where the library is made or loaded (see the package docstring)
    from adc.codegen.toolchain.dynamic import DynamicLibrary
    from adc.codegen.toolchain.jit import JitLibrary
    from adc.codegen.toolchain.target import Target

NAMESPACE = "runtime"           # the library's folder in the cache, and the lock its builders share
TUNING = "gemm-blocks"          # the cache's folder of the gemm's measured blocks, and the lock of who measures them
INSTALLED = Path(__file__).resolve().parent.parent / "prebuilt"     # adc/prebuilt/, written at install
_runtime = None                 # this process's runtime library, loaded once (see runtime_library)
_runtime_lock = locks.lock()


def runtime_object(target: Target) -> bytes:
    """The runtime library's object code for `target`: from the cache, else compiled once and stored
    (a process building it ahead, build_ahead.py, waited for)."""
    cache = open_cache()
    with cache.lock(NAMESPACE) if cache else contextlib.nullcontext():
        return _runtime_object(target)


def build_shared_runtime(locked: bool = False) -> Path | None:
    """The cache's shared object of this machine's runtime library, linked (and its object code
    compiled) and stored if missing; None with the cache off or no C compiler. Builders wait for
    each other (the cache's lock); `locked`: the caller holds that lock (build_ahead.py's child)."""
    cache = open_cache()
    if cache is None:
        return None
    target = host_target()
    key = library_key(target, "shared object")
    path = cache.locate(NAMESPACE, key)
    if path is not None:
        return path
    with contextlib.nullcontext() if locked else cache.lock(NAMESPACE):
        path = cache.locate(NAMESPACE, key)      # built meanwhile, by the process we waited for
        if path is None:
            compile_log.event("runtime library", f"cache miss {key[:12]} (shared object)")
            image = _installed(key) or _linked(_runtime_object(target))
            if image is None:
                return None
            cache.put(NAMESPACE, key, image)
            path = cache.locate(NAMESPACE, key)
    return path


def build_installed(folder: Path) -> list[Path]:
    """This machine's runtime library compiled into `folder` — the gemm blocks measured for it, its
    object code and, where a C compiler links one, its shared object — each named by the key a
    cache miss looks for there."""
    from adc.driver import gemm_tuning

    target = host_target()
    blocks = gemm_tuning.encode(gemm_tuning.measured(target))
    code = _compiled(target, blocks)
    entries = {blocks_key(target): blocks, _library_key(target, blocks): code,
               _library_key(target, blocks, "shared object"): _linked(code)}
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for key, data in entries.items():
        if data is not None:
            (folder / key).write_bytes(data)
            written.append(folder / key)
    return written


def library_key(target: Target, *kind: str) -> str:
    """The cache key of the runtime library for `target` (`kind`: "shared object" for the linked
    one): it names the gemm's packed blocks, measured for this machine (see gemm_blocks)."""
    return _library_key(target, gemm_blocks(target), *kind)


def gemm_blocks(target: Target) -> bytes:
    """The gemm's packed blocks for `target`, as gemm_tuning.encode writes them: for this machine
    the cache's record, else the install's, else measured now and kept (the measuring process
    holding the cache's lock of TUNING, so others wait for its record rather than time the gemm
    while it does); b"" — the table's blocks — for another CPU, or with the cache off and none
    installed."""
    if not is_this_machine(target):
        return b""
    cache, key = open_cache(), blocks_key(target)
    if cache is None:
        return _installed(key) or b""
    blocks = cache.get(TUNING, key)
    if blocks is not None:
        return blocks
    with cache.lock(TUNING):
        blocks = cache.get(TUNING, key)      # measured meanwhile, by the process we waited for
        if blocks is None:
            blocks = _installed(key)
            if blocks is None:
                from adc.driver import gemm_tuning

                compile_log.event("gemm blocks", f"cache miss {key[:12]}")
                blocks = gemm_tuning.encode(gemm_tuning.measured(target))
            cache.put(TUNING, key, blocks)
    return blocks


def blocks_key(target: Target) -> str:
    """The cache key of the record of the gemm blocks measured for `target`."""
    return cache_key(target, TUNING)


def gemm_blockings(target: Target) -> dict:
    """The gemm tiles (gemm.Blocking by dtype) the runtime library for `target` is built with."""
    from adc.driver import gemm_tuning     # the code generator's gemm: where it is built or tested

    return gemm_tuning.blockings(target, gemm_blocks(target))


def _library_key(target: Target, blocks: bytes, *kind: str) -> str:
    return cache_key(target, "runtime", blocks.decode(), *kind)


def _runtime_object(target: Target) -> bytes:
    blocks = gemm_blocks(target)
    key = _library_key(target, blocks)
    return cached(key, "runtime library", lambda: _installed(key) or _compiled(target, blocks), namespace=NAMESPACE)


def _compiled(target: Target, blocks: bytes) -> bytes:
    from adc.codegen import emit    # llvmlite.ir and the code generator: on a miss only
    from adc.codegen.native import runtime_library
    from adc.driver import gemm_tuning

    module = runtime_library.runtime_module(target, gemm_tuning.blockings(target, blocks))
    return emit.emit_object(module, target, "runtime library", unroll=True)


def _linked(object_code: bytes) -> bytes | None:
    return link([object_code], runtime_symbols(), "runtime library", runtime_loaded=False)


def _installed(key: str) -> bytes | None:
    """The file compiled at install under `key` (adc/prebuilt/), if there is one."""
    try:
        data = (INSTALLED / key).read_bytes()
    except OSError:
        return None
    compile_log.event("runtime library", f"copied from the install ({INSTALLED / key[:12]}...)")
    return data


def runtime_library():
    """The runtime library every JIT kernel of this process calls, loaded on first use: the shared
    object the cache keeps (its symbols global, so kernels loaded as shared objects bind to it),
    else — cache off, no C compiler to link one — its object code through the JIT linker (jit.py)."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            target = host_target()
            _runtime = _shared_runtime() or _jit_library(runtime_object(target), target)
        return _runtime


def require(library, symbol: str) -> int:
    """The address of `symbol` in the runtime library `library`, which must define it."""
    address = library.address(symbol)
    if not address:
        raise RuntimeError(f"the adc runtime library does not define {symbol}")
    return address


def _shared_runtime() -> DynamicLibrary | None:
    from adc.codegen.toolchain.dynamic import DynamicLibrary

    path = build_shared_runtime()
    try:
        return DynamicLibrary(path, runtime=True) if path else None
    except OSError:
        return None


def _jit_library(object_code: bytes, target: Target) -> JitLibrary:
    """Object code through the JIT linker; llvmlite is imported here, only when this loader is needed."""
    from adc.codegen.toolchain.jit import JitLibrary

    return JitLibrary(object_code, target)
