"""Blocks of memory from malloc for the runtime library's routines, large ones in huge pages.

A fresh block from malloc past its mmap threshold is new pages, each faulted in at its first
write: 8,192 faults for 32 MiB in 4 KiB pages, ~17 ms on Zen 4 under KVM. Linux gives a block
asked for with madvise(MADV_HUGEPAGE) 2 MiB pages where it can, as NumPy asks for its arrays
from 4 MiB up (transparent huge pages "madvise"; with "always" it changes nothing, with "never"
the call fails and the block is used as it is).

    block = allocate(builder, size)     # i8* (opaque pointer), null if there is no memory
    release(builder, block)
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.lowering.declarations import libc
from adc.codegen.lowering.loops import I32, I64, PTR
from adc.codegen.native.simd import const

HUGE_PAGE_BYTES = 4 << 20       # blocks from this size up ask for huge pages, as NumPy's arrays do
MADV_HUGEPAGE = 14              # Linux's (adc's runtime library targets Linux: pyproject.toml)
PAGE = 4096


def allocate(builder: ir.IRBuilder, size: ir.Value) -> ir.Value:
    """A block of `size` bytes from malloc (null if there is no memory: the caller checks), the
    whole pages of a block from HUGE_PAGE_BYTES up asked to be huge pages."""
    module = builder.module
    block = builder.call(libc(module, "malloc", PTR, [I64]), [size])
    large = builder.icmp_signed(">=", size, const(HUGE_PAGE_BYTES))
    with builder.if_then(builder.and_(large, builder.icmp_unsigned("!=", block, ir.Constant(PTR, None)))):
        address = builder.ptrtoint(block, I64)
        start = builder.and_(builder.add(address, const(PAGE - 1)), const(-PAGE))
        madvise = libc(module, "madvise", I32, [PTR, I64, I32])
        builder.call(madvise, [builder.inttoptr(start, PTR), builder.sub(size, builder.sub(start, address)),
                               ir.Constant(I32, MADV_HUGEPAGE)])
    return block


def release(builder: ir.IRBuilder, block: ir.Value) -> None:
    builder.call(libc(builder.module, "free", ir.VoidType(), [PTR]), [block])
