"""Ahead-of-time compilation: LLVM IR → object file → shared object linked by the system `cc`.

The last stage of `adc compile`: the same optimized code as the JIT, built
for a position-independent `Target`, written as an ELF object and linked into
a `.so` that exports `adc_kernel_<f>`, `adc_module_metadata` and
`adc_set_num_threads` (see runtime/adc.h).

    obj = emit_object(llvm_module, Target.host(pic=True))
    link_shared_object(obj, "kernels.so")       # cc -shared -o kernels.so kernels.o -lm -lpthread
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import llvmlite.ir

from adc.codegen.jit import parse
from adc.codegen.target import Target
from adc.errors import ToolchainError


def _optimized(llvm_ir: llvmlite.ir.Module | str, target: Target):
    module = parse(llvm_ir)
    target.optimize(module)
    return module


def emit_object(llvm_ir: llvmlite.ir.Module | str, target: Target) -> bytes:
    """An ELF object of the optimized module; `target` should have `pic=True` for a shared object."""
    return target.target_machine().emit_object(_optimized(llvm_ir, target))


def emit_assembly(llvm_ir: llvmlite.ir.Module | str, target: Target) -> str:
    return target.target_machine().emit_assembly(_optimized(llvm_ir, target))


def link_shared_object(object_bytes: bytes, out_path: str | os.PathLike, libraries: list[str] = ()) -> None:
    """Link an object into a shared object with the system C compiler driver (`cc`); `libraries` are
    further `cc` arguments (see externs.link_arguments). Every symbol must resolve (--no-undefined)."""
    cc = shutil.which("cc")
    if cc is None:
        raise ToolchainError("cannot link a shared object: the C compiler driver `cc` is not on PATH "
                             "(install gcc or clang)")
    with tempfile.TemporaryDirectory(prefix="adc-") as tmp:
        obj = Path(tmp) / "module.o"
        obj.write_bytes(object_bytes)
        result = subprocess.run([cc, "-shared", "-Wl,--no-undefined", "-o", str(out_path), str(obj),
                                 *libraries, "-lm", "-lpthread"], capture_output=True, text=True)
    if result.returncode != 0:
        raise ToolchainError(f"`cc -shared` failed (exit {result.returncode}) linking {out_path}:\n"
                             f"{result.stderr.strip()}")
