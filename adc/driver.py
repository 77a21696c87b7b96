"""The compiler driver: source → IR → passes → LLVM → native, for the API and the CLI.

Each stage is a small function so the CLI can stop after any of them
(`adc ir --emit ...`) and the Python API can JIT or write a shared object
from the same pipeline; only the `Target` differs (position-independent code
for a `.so`).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TextIO

import llvmlite.ir

from adc.abi import encode_metadata, seal_file
from adc.codegen import aot
from adc.codegen.jit import JitLibrary
from adc.codegen.lower import lower_module
from adc.codegen.target import Target
from adc.frontend import compile_source
from adc.ir.core import Module
from adc.ir.printer import format_module
from adc.passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from adc.runtime.module import Module as RuntimeModule


@dataclass(frozen=True)
class Options:
    """What to observe while compiling: `--print-after-all`, `--print-after=PASS`."""

    print_after_all: bool = False
    print_after: frozenset[str] = field(default_factory=frozenset)
    out: TextIO | None = None


def read_source(path: str | os.PathLike) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def elaborate(source: str, filename: str) -> Module:
    """Parse and elaborate: the verified IR of the program, with locations."""
    return compile_source(source, filename)


def optimize(module: Module, options: Options = Options()) -> Module:
    return run_pipeline(module, DEFAULT_PIPELINE, verify=True, print_after_all=options.print_after_all,
                        print_after=set(options.print_after), out=options.out or sys.stderr)


def to_llvm(module: Module, options: Options = Options()) -> llvmlite.ir.Module:
    """Lower a module to LLVM IR, embedding its metadata (signatures and IR text)."""
    metadata = encode_metadata(module, format_module(module))
    return lower_module(optimize(module, options), metadata)


def jit(module: Module, options: Options = Options()) -> RuntimeModule:
    library = JitLibrary(to_llvm(module, options), Target.host())
    return RuntimeModule(library, module.name)


def write_shared_object(module: Module, out_path: str | os.PathLike, options: Options = Options()) -> None:
    target = Target.host(pic=True)
    aot.link_shared_object(aot.emit_object(to_llvm(module, options), target), out_path)
    seal_file(out_path)
