"""`adc compile`: a module compiled to a sealed, self-contained shared object.

Kernels are compiled one LLVM module each, cached by their code and all it calls (the ones not
cached in parallel processes, kernel_objects.py), then linked by the C compiler with the
module's metadata and the runtime library's object code (codegen/toolchain/aot.py). The file
is sealed with the target's triple, CPU and required features, which `adc.load` checks.

    write_shared_object(module, "kernels.so")       # -> its ModuleInfo
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from adc import compile_log
from adc.abi import GRADIENTS_EMBEDDED, GRADIENTS_NONE, ModuleInfo, decode_metadata, seal_file, with_check_bounds
from adc.driver.cache_keys import cached
from adc.driver.host import cache_key
from adc.driver.kernel_objects import compile_kernels
from adc.driver.runtime_library import runtime_object
from adc.ir.core import Module

if TYPE_CHECKING:
    from adc.codegen.toolchain.target import Target


def write_shared_object(module: Module, out_path: str | os.PathLike, gradients: bool = True,
                        target: Target | None = None, sparse: tuple[tuple[str, int, bool], ...] = ()) -> ModuleInfo:
    """Compile to a sealed shared object with the runtime library linked in, and return its metadata;
    with `gradients`, each kernel's VJP kernel is exported next to it (`adc_kernel_<name>_vjp`), so
    `adc.load` differentiates without the compiler; per (kernel, param, hessian) of `sparse`, a sparse
    Jacobian (or Hessian) at fixed sizes with its pattern (compiler.with_sparse_derivatives). Kernels
    are compiled one LLVM module each, cached by their code and all it calls, the ones not cached in
    parallel processes (see `compile_kernels`)."""
    from adc import compiler
    from adc.codegen import emit
    from adc.codegen.toolchain import aot, externs     # aot, the linker's driver: only `adc compile` needs it (5 ms)
    from adc.codegen.toolchain.target import Target

    externs.resolve(module)
    target = target or Target.host(pic=True)
    sources = compiler.kernel_sources(module, GRADIENTS_EMBEDDED if gradients else GRADIENTS_NONE, sparse)
    objects = compile_kernels(sources, module.name, target)
    for export in sources.sparse:
        objects.append(cached(cache_key(target, "sparse", export.key()), f"{module.name}: {export.entry.kernel.name}",
                              lambda export=export: emit.emit_object(export.lower(), target)))
    metadata = with_check_bounds(sources.metadata) if target.check_bounds else sources.metadata
    objects.append(cached(cache_key(target, "metadata", metadata), f"{module.name}: metadata",
                          lambda: emit.emit_object(compiler.metadata_module(metadata), target)))
    objects.append(runtime_object(target.unchecked))
    with compile_log.stage(module.name, "link"):
        aot.link_shared_object(objects, out_path, externs.link_arguments(module))
    seal_file(out_path, {"triple": target.triple, "cpu": target.cpu, "features": list(target.required_features)})
    return decode_metadata(metadata)
