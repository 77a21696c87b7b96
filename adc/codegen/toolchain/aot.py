"""Ahead-of-time linking: object code → a shared object, linked by the system C compiler driver.

The last stage of `adc compile`: the module's object code (codegen/emit.py, built for a
position-independent `Target`) and the runtime library's (native/runtime_library.py)
are linked into one `.so` that exports only `adc_kernel_<f>`,
`adc_module_metadata`, `adc_set_num_threads` and `adc_watch_interrupts` (see
runtime/adc.h), and in a bounds-checked build `adc_bounds_<f>`: a version
script keeps the runtime library's symbols local, so the file is self-contained
and never binds to another module's copy of them. Its SONAME is its file name, so
a C program linked with `build/kernels.so` needs `kernels.so`, found by its rpath
(`-Wl,-rpath,'$ORIGIN'`: next to the program), not `build/kernels.so` relative to
wherever it runs.

    link_shared_object([module_obj, runtime_obj], "kernels.so")
    # $CC -shared -Wl,-soname,kernels.so -Wl,--version-script=... -o kernels.so module.o runtime.o -lm -lpthread

The JIT's shared objects (see driver/linking.py) are linked here too: the runtime library
alone, exporting its functions, and one kernel each, which calls the runtime
library's functions without containing them (the process has loaded it first).
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

from adc.abi import BOUNDS_PREFIX, KERNEL_PREFIX, METADATA_SYMBOL, SET_NUM_THREADS_SYMBOL, WATCH_INTERRUPTS_SYMBOL
from adc.codegen.toolchain.scratch import scratch_folder
from adc.errors import ToolchainError

MODULE_EXPORTS = (f"{KERNEL_PREFIX}*", f"{BOUNDS_PREFIX}*", METADATA_SYMBOL, SET_NUM_THREADS_SYMBOL,
                  WATCH_INTERRUPTS_SYMBOL)


def c_compiler() -> list[str]:
    """The C compiler driver that links: `$CC` (which may carry arguments), else `cc`, by its full
    path. (Given a bare name, subprocess searches PATH through os.get_exec_path, which swaps the
    process's warning filters: from the background linker's thread that undid whatever a caller's
    `warnings.catch_warnings` set meanwhile, its record of warnings included.)"""
    command = shlex.split(os.environ.get("CC", "")) or ["cc"]
    found = shutil.which(command[0])
    if found is None:
        where = "$CC" if os.environ.get("CC") else "`cc`"
        raise ToolchainError(f"cannot link a shared object: the C compiler driver {where} "
                             f"({command[0]}) is not found (install gcc or clang, or set CC)")
    return [found, *command[1:]]


def link_shared_object(objects: Sequence[bytes], out_path: str | os.PathLike, libraries: Sequence[str] = (),
                       exports: Sequence[str] = MODULE_EXPORTS, runtime_loaded: bool = False) -> None:
    """Link object files into a shared object exporting `exports` (names or glob patterns) only;
    `libraries` are further linker arguments (see externs.link_arguments). Every symbol must
    resolve (--no-undefined), except with `runtime_loaded`: the code calls the runtime library
    the loading process has already loaded (with its symbols global) and leaves those calls to it."""
    cc = c_compiler()
    with scratch_folder() as tmp:
        paths = []
        for k, data in enumerate(objects):
            paths.append(tmp / f"part{k}.o")
            paths[-1].write_bytes(data)
        script = tmp / "exports.map"
        script.write_text(f"{{ global: {'; '.join(exports)}; local: *; }};\n")
        resolution = [] if runtime_loaded else ["-Wl,--no-undefined"]
        result = subprocess.run([*cc, "-shared", *resolution, f"-Wl,-soname,{Path(out_path).name}",
                                 f"-Wl,--version-script={script}",
                                 "-o", str(out_path), *map(str, paths), *libraries, "-lm", "-lpthread"],
                                capture_output=True, text=True)
    if result.returncode != 0:
        raise ToolchainError(f"`{' '.join(cc)} -shared` failed (exit {result.returncode}) linking {out_path}:\n"
                             f"{result.stderr.strip()}")
