"""A JIT module's manifest, and the JIT modules made from source text or IR through it.

A manifest is what a JitModule is opened from: the module's metadata, its optimized IR text,
per kernel symbol the digest of the kernel and all it calls (`compiler.KernelSources`), and the
external symbols it calls. It is IR, not machine code, so it is cached under an `ir_key` of what
it is built from; a warm `adc.compile` elaborates nothing and imports neither the compiler nor
LLVM (the compiler is imported on a miss only).

    jit_source(text, "k.adc")       # key: the source text and the file's absolute path
    jit(ir_module)                  # key: the IR text
"""
from __future__ import annotations

import json
import os
from typing import Callable

from adc.driver.cache_keys import cached, ir_key
from adc.driver.host import jit_target
from adc.driver.jit_module import JitModule
from adc.ir.core import Module
from adc.ir.printer import format_module


def build_manifest(module: Module) -> dict:
    """The manifest of an IR module: its external functions resolved (a missing one is a located
    CompileError), its kernels optimized and digested."""
    from adc import compiler       # the pipeline: on a miss only
    from adc.codegen.toolchain import externs

    externs.resolve(module)
    sources = compiler.kernel_sources(module)
    return {"metadata": sources.metadata, "externs": externs.symbols(module), "ir": sources.ir,
            "kernels": sources.kernels}


def cached_manifest(key: str, subject: str, build: Callable[[], dict]) -> dict:
    """A JIT module's manifest, decoded once. One whose external functions no longer resolve
    counts as a miss, so building it reports the located error."""
    manifest: dict = {}

    def accept(data: bytes) -> bool:
        manifest.update(json.loads(data))
        pairs = manifest.get("externs", ())
        if not pairs:
            return True
        from adc.codegen.toolchain import externs     # loads LLVM: only for modules calling external functions

        return externs.bind(pairs)

    def encoded() -> bytes:
        manifest.clear()
        manifest.update(build())
        return json.dumps(manifest, sort_keys=True).encode()
    cached(key, subject, encoded, accept)
    return manifest


def jit_source(source: str, filename: str, check_bounds: bool = False) -> JitModule:
    """adc source text as a JIT module (cached by the text, the file's absolute path — external
    libraries are found relative to it). Every error in the program is reported here; machine code
    is made on each kernel's first call (bounds-checked: see `jit_target`)."""
    def build() -> dict:
        from adc import compiler       # the pipeline: on a miss only

        return build_manifest(compiler.elaborate(source, filename))
    key = ir_key("source", os.path.abspath(filename), source)
    return JitModule(cached_manifest(key, filename, build), jit_target(check_bounds))


def jit(module: Module, check_bounds: bool = False) -> JitModule:
    """An IR module as a JIT module (cached by its IR text)."""
    key = ir_key("ir", module.name, format_module(module))
    return JitModule(cached_manifest(key, module.name, lambda: build_manifest(module)), jit_target(check_bounds))
