"""The compiler driver: source → IR → passes → LLVM → native, for the API and the CLI.

Each stage is a small function so the CLI can stop after any of them
(`adc ir --emit ...`) and the Python API can JIT or write a shared object
from the same pipeline; only the `Target` differs (position-independent code
for a `.so`). A `.so` also exports each kernel's VJP kernel (`with_vjps`)
unless written with `gradients=False` (`adc compile --no-gradients`).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TextIO

import llvmlite.ir

from adc.abi import (GRADIENTS_DERIVED, GRADIENTS_EMBEDDED, GRADIENTS_NONE, VjpEntry, encode_metadata,
                     seal_file, signature)
from adc.codegen import aot, externs
from adc.codegen.jit import JitLibrary
from adc.codegen.lower import lower_module
from adc.codegen.target import Target
from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.core import Module
from adc.ir.printer import format_module
from adc.passes.adjoint import vjp
from adc.passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from adc.runtime.derivatives import passthrough
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


def to_llvm(module: Module, target: Target, options: Options = Options(),
            gradients: str = GRADIENTS_DERIVED) -> llvmlite.ir.Module:
    """Lower a module to LLVM IR, embedding its metadata (signatures and IR text); with
    `gradients="embedded"`, also the VJP kernel of each kernel (see `with_vjps`)."""
    full, vjps = with_vjps(module) if gradients == GRADIENTS_EMBEDDED else (module, ())
    metadata = encode_metadata(module, format_module(full), gradients, vjps)
    return lower_module(optimize(full, options), metadata, target.vector_bits)


def with_vjps(module: Module) -> tuple[Module, tuple[VjpEntry, ...]]:
    """`module` plus the VJP function of each kernel with float results (not the forward and
    backward parts of a custom gradient), w.r.t. all its params, and their metadata entries; a
    kernel the adjoint pass rejects (e.g. an external function with no gradient) gets an entry
    saying why, and the module still compiles."""
    full, entries = module, []
    parts = {name for pair in module.custom_gradients().values() for name in pair}
    for func in module:
        if func.name in parts or not any(t.dtype.is_float for t in func.result_types):
            continue    # a custom gradient's forward or backward, or never recorded on a tape
        try:
            extended, gradient = vjp(full, func.name)
        except CompileError as err:
            entries.append(VjpEntry(func.name, None, missing=str(err).splitlines()[0]))
            continue
        if not gradient.wrt:
            entries.append(VjpEntry(func.name, None))
            continue
        full = extended
        entries.append(VjpEntry(func.name, signature(gradient.func), gradient.wrt,
                                passthrough(gradient.func, len(func.returns))))
    return full, tuple(entries)


def jit(module: Module, options: Options = Options()) -> RuntimeModule:
    externs.resolve(module)
    target = Target.host()
    library = JitLibrary(to_llvm(module, target, options), target)
    return RuntimeModule(library, module.name)


def write_shared_object(module: Module, out_path: str | os.PathLike, options: Options = Options(),
                        gradients: bool = True) -> None:
    """Compile to a sealed shared object; with `gradients`, each kernel's VJP kernel is exported
    next to it (`adc_kernel_<name>_vjp`), so `adc.load` differentiates without the compiler."""
    externs.resolve(module)
    target = Target.host(pic=True)
    llvm_module = to_llvm(module, target, options, GRADIENTS_EMBEDDED if gradients else GRADIENTS_NONE)
    aot.link_shared_object(aot.emit_object(llvm_module, target), out_path, externs.link_arguments(module))
    seal_file(out_path)
