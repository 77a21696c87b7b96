"""A JIT module: a compiled module whose kernels are made on their first call.

What the runtime opens for `adc.compile` and for derived kernels (manifests.py,
derivations.py): a library with `metadata()`, `defines(symbol)` and `address(symbol)`, like a
`.so`. A kernel comes from the cheapest source there is: its shared object from the cache
(the dynamic loader, no LLVM), else its object code from the cache, else compiled from the
module's IR text (kernel_objects.py), loaded through the JIT linker (loading.py) while the
shared object for the next process is linked (linking.py).

    module = JitModule(manifest, jit_target())
    module.address("adc_kernel_f")      # loaded on first use; 0 if the module has no such symbol
"""
from __future__ import annotations

import json
import os
import sys
import threading
from typing import TYPE_CHECKING

from adc import compile_log, locks
from adc.abi import (BOUNDS_PREFIX, KERNEL_PREFIX, RUNTIME_SET_NUM_THREADS, RUNTIME_WATCH_INTERRUPTS,
                     SET_NUM_THREADS_SYMBOL, WATCH_INTERRUPTS_SYMBOL, with_check_bounds)
from adc.driver.cache_keys import cached, open_cache
from adc.driver.host import usable_processors
from adc.driver.kernel_objects import Child, compile_in_child, kernel_key, kernel_object
from adc.driver.linking import link_later
from adc.driver.loading import load_object, open_shared
from adc.driver.runtime_library import require, runtime_library

if TYPE_CHECKING:       # imported where a kernel is loaded (see the package docstring)
    from adc.codegen.toolchain.dynamic import DynamicLibrary
    from adc.codegen.toolchain.jit import JitLibrary
    from adc.codegen.toolchain.target import Target

# what a shared object exports (lower.lower_metadata) -> the runtime library's function JIT modules share
_RUNTIME_SETTERS = {SET_NUM_THREADS_SYMBOL: RUNTIME_SET_NUM_THREADS, WATCH_INTERRUPTS_SYMBOL: RUNTIME_WATCH_INTERRUPTS}


class JitModule:
    """A module compiled into this process kernel by kernel, each on its first use.

    Its manifest — built by elaborating and optimizing the module, or read from the cache — holds
    the module's metadata, its optimized IR text once and, per kernel symbol, the digest of the
    kernel and all it calls (`compiler.KernelSources`); `address(symbol)` loads the kernel the
    first time it is asked for: its shared object from the cache, with no LLVM, else its object
    code (from the cache, or compiled from the IR text) through the JIT linker, linking the shared
    object for the next process meanwhile. So opening a module of twenty kernels compiles none, a
    process pays LLVM only for the kernels it compiles, and one whose kernels are all cached
    loads no LLVM. JIT modules share the process's runtime library, so `adc_set_num_threads` and
    `adc_watch_interrupts` are the runtime's. (Kernels calling external functions keep to the JIT
    linker, which binds them.)
    """

    def __init__(self, manifest: dict, target: Target):
        self.target = target            # what its kernels compile for (a bounds-checked build's, say)
        self._metadata = with_check_bounds(manifest["metadata"]) if target.check_bounds else manifest["metadata"]
        self._name = json.loads(self._metadata)["module"]
        self._ir: str = manifest["ir"]
        self._kernels: dict[str, str] = manifest["kernels"]
        self._calls_externs = bool(manifest.get("externs"))
        self._loaded: dict[str, JitLibrary | DynamicLibrary] = {}
        self._lock = locks.lock()
        self._ahead: dict[str, Child] = {}          # symbol -> the child compiling it (compile_ahead)
        self._provisional: dict[str, Child] = {}    # symbol serving first-tier code -> the child compiling its own
        self._retired: list[JitLibrary] = []        # first-tier code replaced: kept, a thread may still run it

    def metadata(self) -> str:
        return self._metadata

    def defines(self, symbol: str) -> bool:
        return symbol in self._kernels or symbol in _RUNTIME_SETTERS

    def address(self, symbol: str) -> int:
        if symbol in _RUNTIME_SETTERS:
            return require(runtime_library(), _RUNTIME_SETTERS[symbol])
        if symbol.startswith(BOUNDS_PREFIX):        # a checked kernel's error record: in its library
            kernel = self._loaded.get(KERNEL_PREFIX + symbol[len(BOUNDS_PREFIX):])
            return kernel.address(symbol) if kernel is not None else 0
        if symbol not in self._kernels:
            return 0
        with self._lock:
            if symbol not in self._loaded:
                self._loaded[symbol] = self._load(symbol)
            elif symbol in self._provisional and self._provisional[symbol].finished():
                del self._provisional[symbol]
                self._retired.append(self._loaded[symbol])
                self._loaded[symbol] = self._load(symbol)
            return self._loaded[symbol].address(symbol)

    def settled(self, symbol: str) -> bool:
        """Whether `address(symbol)` is the kernel's address for good: not while first-tier code
        serves (compile_ahead), which a later `address` replaces once the full code is compiled."""
        return symbol not in self._provisional

    def compile_ahead(self, symbol: str, also: tuple[str, ...] = ()) -> None:
        """Start compiling kernel `symbol`, which the caller needs next (the tape: a split VJP's
        backward), and the kernels `also` it needs at once (the forward), in a forked child that
        leaves their object code in the cache: llvmlite runs one LLVM call at a time in a process,
        so only another process overlaps two compiles. Both start on first-tier code
        (Target.first_tier: the same optimized IR, code generation in a few milliseconds, not
        tens): the child makes `symbol`'s first, which `address` waits for, while this process
        makes those of `also` as they are asked for; the child then compiles the full code of
        each, which a later `address` loads in their place (`settled`).

        Only where it is safe and pays: a fork copies the calling thread alone, so this process
        must run no other Python thread (one may hold a lock the child needs); several cores that
        it may run on (`usable_processors`); the cache on; the code not cached yet; not turned off
        (`ADC_COMPILE_AHEAD=0`: a process under valgrind, whose forked child would run LLVM under
        it). `address` compiles a kernel itself if the child left nothing."""
        if symbol not in self._kernels or symbol in self._loaded or symbol in self._ahead:
            return
        cache = open_cache()
        if cache is None or not sys.platform.startswith("linux") or usable_processors() < 2 \
                or threading.active_count() != 1 or os.environ.get("ADC_COMPILE_AHEAD", "1").strip() == "0":
            return
        wanted = {s: self._kernels[s] for s in (symbol, *also) if s in self._kernels and s not in self._loaded
                  and s not in self._ahead and not cache.path("modules", self._key(s)).exists()}
        if symbol in wanted:
            child = compile_in_child(cache, wanted, self._ir, self._name, self.target)
            self._ahead.update(dict.fromkeys(wanted, child))

    def _key(self, symbol: str, target: Target | None = None) -> str:
        return kernel_key(symbol, self._kernels[symbol], target or self.target)

    def _load(self, symbol: str):
        from adc.codegen.toolchain.dynamic import DynamicLibrary

        target, subject = self.target, f"{self._name}: {symbol}"
        key = self._key(symbol)
        cache = open_cache()
        child = self._ahead.pop(symbol, None)
        if child is not None and cache is not None and not cache.path("modules", key).exists():
            first_tier = self._first_tier(symbol, child, cache)
            if first_tier is not None:
                self._provisional[symbol] = child
                return load_object(first_tier, target)
        usable = cache is not None and not self._calls_externs
        path = cache.locate("shared", key) if usable else None
        if path is not None and isinstance(runtime_library(), DynamicLibrary):
            try:
                library = open_shared(path)
                compile_log.event(subject, f"cache hit {key[:12]} (shared object)")
                return library
            except OSError:
                pass                # removed or replaced meanwhile: load the object code
        # compiled before the runtime library is asked for: a first-ever process compiles while
        # the child of `import adc` builds the library (build_ahead.py), not after
        object_code = cached(key, subject, lambda: kernel_object(symbol, self._ir, self._name, target))
        shared = usable and isinstance(runtime_library(), DynamicLibrary)
        library = load_object(object_code, target)
        if shared:
            link_later(object_code, symbol, key, subject)
        return library

    def _first_tier(self, symbol: str, child: Child, cache) -> bytes | None:
        """`symbol`'s first-tier code while `child` compiles its full code: the child's own if it
        makes it first (None if it died before), else compiled here."""
        subject = f"{self._name}: {symbol}"
        if child.first_tier != symbol:
            compile_log.event(subject, "first tier compiled here, the full code in a child")
            return kernel_object(symbol, self._ir, self._name, self.target.first_tier)
        child.wait_ready()
        code = cache.get("modules", self._key(symbol, self.target.first_tier))
        if code is not None:
            compile_log.event(subject, "first tier from the child compiling the full code")
        return code
