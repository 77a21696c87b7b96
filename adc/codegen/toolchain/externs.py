"""External functions at link time: load the shared objects that define them, check every symbol.

Codegen declares each `extern_call` symbol as an ordinary C function; this module
makes sure it exists before any machine code can call it. `resolve` loads each
`library` of the module into the process (the JIT then binds the symbols) and looks
every symbol up, so a missing one is a located CompileError at compile time, never
a jump to address 0 at run time. `link_arguments` tells `cc` how to link them into
a shared object (the library itself, and a run path to its folder).

    %0 = extern_call %x {gradient = [], library = "/opt/my/libmy.so", symbol = "my_fn"} : f64[N]
    resolve(module)            # loads /opt/my/libmy.so; CompileError if it lacks my_fn
    link_arguments(module)     # ["/opt/my/libmy.so", "-Wl,-rpath,/opt/my"]
"""
from __future__ import annotations

import functools
import os

import llvmlite.binding as llvm

from adc.errors import CompileError
from adc.ir.core import Module, Op


@functools.lru_cache(maxsize=None)
def libm() -> str:
    """The C math library, which external functions without a library come from. ctypes.util is
    imported here: it imports subprocess (7 ms at every start of a process opening a module)."""
    import ctypes.util

    return ctypes.util.find_library("m") or "libm.so.6"


def extern_calls(module: Module) -> list[Op]:
    return [op for func in module for op in func.ops if op.name == "extern_call"]


def symbols(module: Module) -> list[tuple[str, str]]:
    """The (library, symbol) pairs the module's external functions need, each once."""
    return list(dict.fromkeys((op.attrs["library"], op.attrs["symbol"]) for op in extern_calls(module)))


def bind(pairs) -> bool:
    """Load each library and look up each symbol of `pairs` (from `symbols`); False when one fails
    (the caller recompiles, and `resolve` then reports where)."""
    for library, symbol in pairs:
        try:
            llvm.load_library_permanently(library or libm())
        except RuntimeError:
            return False
        if not llvm.address_of_symbol(symbol):
            return False
    return True


def resolve(module: Module) -> None:
    """Load the libraries the module's external functions name and check that each symbol is defined
    (once per library and symbol; an error points at the first call)."""
    checked: set[tuple[str, str]] = set()
    for op in extern_calls(module):
        library, symbol = op.attrs["library"], op.attrs["symbol"]
        if (library, symbol) in checked:
            continue
        checked.add((library, symbol))
        try:
            llvm.load_library_permanently(library or libm())
        except RuntimeError as err:
            raise CompileError(f"external function '{symbol}': cannot load its library {library!r}: {err}",
                               op.loc) from None
        if not llvm.address_of_symbol(symbol):
            where = f"library {library!r}" if library else "libm or this process"
            raise CompileError(f"external function '{symbol}' is not defined in {where}", op.loc)


def link_arguments(module: Module) -> list[str]:
    """`cc` arguments that link the libraries of the module's external functions into a shared object."""
    arguments: list[str] = []
    for library in dict.fromkeys(op.attrs["library"] for op in extern_calls(module) if op.attrs["library"]):
        if "/" in library:
            arguments += [library, f"-Wl,-rpath,{os.path.dirname(library)}"]
        else:
            arguments.append(f"-l:{library}")
    return arguments
