"""In-process loading: object code → executable memory in this process, via ORC's JITLink.

One of the JIT's two loaders (the other, dynamic.py, maps the shared objects the
driver links from the same object code): object code from codegen/emit.py or from the
on-disk cache is linked into this process as a library of one process-wide LLJIT;
the runtime then reads symbol addresses (`adc_kernel_<f>`, `adc_module_metadata`,
...) and calls them through ctypes, exactly as it does for a shared object. No
LLVM optimization or code generation happens here.

    publish(runtime_addresses)          # once per process: gemm, thread pool (see driver/loading.py)
    lib = JitLibrary(emit_object(llvm_module, target), target)
    address = lib.address("adc_kernel_sigmoid_shift")

JITLink lays out each object's code, constants, data and GOT in one block, so the
32-bit PC-relative references of its (PIC, small code model) code always reach. MCJIT,
used before, mapped those sections separately: in a process that had mapped gigabytes
of arrays they could land more than 2 GB apart, and loading a kernel aborted the
process inside LLVM (`isInt<32>(RealOffset)`).

Symbols resolve from the runtime library (published by `publish`), then from the
process: libc and libm (aligned_alloc, free, pthread_create, ...; glibc >= 2.34
has the pthread functions in libc itself) and the libraries of external
functions (externs.py loads them first).
"""
from __future__ import annotations

import itertools
import struct

import llvmlite.binding as llvm

from adc import locks
from adc.codegen.toolchain.target import Target

_published: dict[str, int] = {}
_jits: dict[str, llvm.LLJIT] = {}       # per target: the LLJIT its libraries are linked into
_names = itertools.count()
_lock = locks.lock()


def publish(addresses: dict[str, int]) -> None:
    """Tell the linker where the runtime library's functions are, before a module calling them
    is loaded."""
    _published.update(addresses)


def _jit(target: Target) -> llvm.LLJIT:
    key = target.key()
    if key not in _jits:
        _jits[key] = llvm.create_lljit_compiler(target.new_target_machine(), use_jit_link=True)
    return _jits[key]


class JitLibrary:
    """Object code linked into this process's memory; lives as long as this object (its tracker:
    dropping it unloads the code)."""

    def __init__(self, object_code: bytes, target: Target):
        self.target = target
        builder = llvm.JITLibraryBuilder().add_object_img(object_code).add_current_process()
        for name, address in _published.items():
            builder.import_symbol(name, address)
        self._exported = defined_symbols(object_code)
        for name in self._exported:
            builder.export_symbol(name)
        with _lock:
            self._tracker = builder.link(_jit(target), f"adc{next(_names)}")

    def address(self, symbol: str) -> int:
        """The address of an exported function, 0 when the module does not define it."""
        return self._tracker[symbol] if symbol in self._exported else 0


def defined_symbols(object_code: bytes) -> tuple[str, ...]:
    """The global symbols an ELF64 little-endian object defines: what a library exports (the
    linker gives addresses only for names asked for when it links)."""
    (shoff,) = struct.unpack_from("<Q", object_code, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", object_code, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", object_code, shoff + k * shentsize) for k in range(shnum)]
    names = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SHT_SYMTAB:
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize):
            name, info, _, shndx = struct.unpack_from("<IBBH", object_code, at)
            if info >> 4 in (_STB_GLOBAL, _STB_WEAK) and shndx != _SHN_UNDEF and name:
                names.append(object_code[strings + name:object_code.index(b"\0", strings + name)].decode())
    return tuple(names)


_SHT_SYMTAB, _STB_GLOBAL, _STB_WEAK, _SHN_UNDEF = 2, 1, 2, 0
