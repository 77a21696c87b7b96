"""The compiler driver: compiled code for the runtime and the CLI, through the on-disk cache.

The driver sits under the runtime and knows nothing of it: it returns native
libraries (anything with `address(symbol) -> int`) and the runtime wraps them.
The JIT and `adc compile` differ only in the `Target` (position-independent code
for a `.so`) and in what happens to the object code: loaded into this process
(codegen/jit.py) or linked with the runtime library's object code into a shared
object (codegen/aot.py).

Object code is kept in the on-disk cache (codegen/cache.py), keyed by what it is
compiled from, the target and the versions of everything that compiles it
(`fingerprint`), so a second process never runs LLVM:

    jit_source(text, "k.adc")                  # key: the source text and file
    jit(ir_module)                             # key: the IR text
    derive(ir_text, "k.adc", "vjp", "f", None) # key: the IR text and the request
    runtime_object(target)                     # the shared runtime library, once per target

`derive` runs a composition of passes (compiler.DERIVATIONS: the VJP, the batched
VJP, the gradient, the Jacobian, the Hessian of a kernel) on the IR a compiled
module carries; its key is the request, so a warm derivation parses no IR. The
pipeline itself (compiler.py: frontend, passes, lowering) is imported on the first
miss only, so a process whose code is all cached starts in milliseconds.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import llvmlite
import llvmlite.binding as llvm

from adc import compile_log
from adc.abi import ADC_VERSION, GRADIENTS_EMBEDDED, GRADIENTS_NONE, seal_file
from adc.codegen import aot, emit, externs, runtime_library
from adc.codegen.cache import Cache
from adc.codegen.jit import JitLibrary, install_runtime, runtime_installed
from adc.codegen.target import Target
from adc.ir.core import Module
from adc.ir.printer import format_module

compile_log.enable_from_environment()


def read_source(path: str | os.PathLike) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _compiler():
    """The compile pipeline, imported on the first cache miss (see the module docstring)."""
    from adc import compiler

    return compiler


# ---------------------------------------------------------------- the cache

@functools.lru_cache(maxsize=None)
def fingerprint() -> str:
    """What compiles the code, as text: adc's version and sources, llvmlite's and LLVM's versions.
    Hashing the sources means a changed compiler never reuses another's entries, version bump or not."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".lark"):
            digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    llvm_version = ".".join(map(str, llvm.llvm_version_info))
    return f"adc {ADC_VERSION} {digest.hexdigest()[:16]} llvmlite {llvmlite.__version__} llvm {llvm_version}"


def cache_key(target: Target, *parts: str) -> str:
    digest = hashlib.sha256(f"{fingerprint()}\0{target.key()}".encode())
    for part in parts:
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()


def open_cache() -> Cache | None:
    """The cache the environment asks for (read on every compile, so tests and tools may change it)."""
    return Cache.from_environment()


def _pack(manifest: dict, object_code: bytes) -> bytes:
    text = json.dumps(manifest, sort_keys=True).encode()
    return struct.pack("<I", len(text)) + text + object_code


def _unpack(entry: bytes) -> tuple[dict, bytes]:
    (length,) = struct.unpack_from("<I", entry)
    return json.loads(entry[4:4 + length]), entry[4 + length:]


def _cached_object(key: str, subject: str, build: Callable[[], tuple[dict, bytes]]) -> tuple[dict, bytes]:
    """The (manifest, object code) under `key`, built and stored on a miss. An entry whose external
    functions no longer resolve counts as a miss, so building reports the located error."""
    cache = open_cache()
    entry = cache.get("modules", key) if cache else None
    if entry is not None:
        manifest, object_code = _unpack(entry)
        if externs.bind(manifest.get("externs", ())):
            compile_log.event(subject, f"cache hit {key[:12]}")
            return manifest, object_code
    compile_log.event(subject, f"cache miss {key[:12]}" if cache else "cache off")
    manifest, object_code = build()
    if cache:
        cache.put("modules", key, _pack(manifest, object_code))
    return manifest, object_code


def runtime_object(target: Target) -> bytes:
    """The runtime library's object code for `target`: from the cache, else compiled once and stored."""
    key = cache_key(target, "runtime")
    cache = open_cache()
    found = cache.get("runtime", key) if cache else None
    if found is not None:
        return found
    compile_log.event("runtime library", f"cache miss {key[:12]}" if cache else "cache off")
    object_code = emit.emit_object(runtime_library.runtime_module(target), target, "runtime library")
    if cache:
        cache.put("runtime", key, object_code)
    return object_code


# ---------------------------------------------------------------- in-process compilation

def load_object(object_code: bytes, target: Target) -> JitLibrary:
    """Link object code into this process, after the runtime library it calls."""
    if not runtime_installed():
        install_runtime(runtime_object(target), target, runtime_library.exported_symbols())
    return JitLibrary(object_code, target)


def _build(module: Module, target: Target, options=None, manifest: dict | None = None):
    def build() -> tuple[dict, bytes]:
        externs.resolve(module)
        llvm_module = _compiler().to_llvm(module, target, options or _compiler().Options())
        object_code = emit.emit_object(llvm_module, target, module.name)
        return {"externs": externs.symbols(module), **(manifest or {})}, object_code
    return build


def jit_source(source: str, filename: str, options=None) -> JitLibrary:
    """Compile adc source text into this process (cached by the text, the file's absolute path —
    external libraries are found relative to it — and the target)."""
    target = Target.host()
    if options is not None and options.prints:
        return load_object(_build(_compiler().elaborate(source, filename), target, options)()[1], target)
    key = cache_key(target, "source", os.path.abspath(filename), source)

    def build() -> tuple[dict, bytes]:
        return _build(_compiler().elaborate(source, filename), target)()
    return load_object(_cached_object(key, filename, build)[1], target)


def jit(module: Module, options=None) -> JitLibrary:
    """Compile an IR module into this process (cached by its IR text and the target)."""
    target = Target.host()
    if options is not None and options.prints:
        return load_object(_build(module, target, options)()[1], target)
    key = cache_key(target, "ir", module.name, format_module(module))
    return load_object(_cached_object(key, module.name, _build(module, target))[1], target)


# ---------------------------------------------------------------- derived kernels

@dataclass(frozen=True)
class Derived:
    """A derivative of a kernel compiled into this process: `library` exports `function`, which
    returns the derivatives w.r.t. the params `wrt`; for VJPs, `passthrough[i]` (not None) says the
    i-th of them is that result's cotangent unchanged. No library: nothing to call (no param has
    a derivative, or a VJP only passes its cotangents through)."""

    library: JitLibrary | None
    function: str
    wrt: tuple[int, ...]
    passthrough: tuple[int | None, ...] = ()


def derive(ir_text: str, module_name: str, derivation: str, kernel: str,
           wanted: tuple[int, ...] | None = None) -> Derived:
    """A derivative of `kernel` from the IR text a compiled module carries, compiled into this process.
    Cached by the request (IR text, derivation, kernel, wanted), so a warm call parses nothing."""
    target = Target.host()
    request = json.dumps([derivation, kernel, wanted])
    key = cache_key(target, "derive", module_name, ir_text, request)
    subject = f"{module_name}: {derivation} of {kernel}"

    def build() -> tuple[dict, bytes]:
        extended, func, wrt, through = _compiler().derive(ir_text, module_name, derivation, kernel, wanted)
        manifest = {"function": func.name, "wrt": list(wrt),
                    "passthrough": None if through is None else list(through)}
        if not wrt or (through is not None and None not in through):
            return manifest, b""                    # nothing to compile
        return _build(extended.reachable(func.name), target, manifest=manifest)()

    manifest, object_code = _cached_object(key, subject, build)
    through = manifest["passthrough"]
    library = load_object(object_code, target) if object_code else None
    return Derived(library, manifest["function"], tuple(manifest["wrt"]), tuple(through or ()))


# ---------------------------------------------------------------- shared objects

def write_shared_object(module: Module, out_path: str | os.PathLike, options=None,
                        gradients: bool = True, target: Target | None = None) -> None:
    """Compile to a sealed shared object with the runtime library linked in; with `gradients`, each
    kernel's VJP kernel is exported next to it (`adc_kernel_<name>_vjp`), so `adc.load`
    differentiates without the compiler."""
    externs.resolve(module)
    target = target or Target.host(pic=True)
    mode = GRADIENTS_EMBEDDED if gradients else GRADIENTS_NONE
    key = cache_key(target, "shared-object", mode, format_module(module))

    compiler = _compiler()
    options = options or compiler.Options()

    def build() -> tuple[dict, bytes]:
        return {}, emit.emit_object(compiler.to_llvm(module, target, options, mode), target, module.name)

    _, object_code = build() if options.prints else _cached_object(key, module.name, build)
    runtime = runtime_object(target)
    with compile_log.stage(module.name, "link"):
        aot.link_shared_object([object_code, runtime], out_path, externs.link_arguments(module))
    seal_file(out_path, {"triple": target.triple, "cpu": target.cpu, "features": list(target.required_features)})
