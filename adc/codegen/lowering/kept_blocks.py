"""A function's blocks — its temporaries, a scan's stacks — kept between its calls.

A kernel allocates its temporaries as one block (temporaries.py), and a scan, once its trip count is
known, its stacks as another. Freed on return, a large block goes back to the system (glibc maps
blocks past its mmap threshold apart, and trims the top of its heap), and the next call takes
every page fault again: a softmax cross-entropy's 16 MB of temporaries took 10 ms a call this
way, 3 ms kept; an RNN's 32 MB of stacks over 1,000 steps, 41 ms a call, 26 ms kept. So each
allocation site keeps its last block in a global slot of its own (named after the function and
the site) and takes it back on the next call when it is large enough:

    kept = atomicrmw xchg @adc.kept.K, null         ; entry: take the kept block, if any
    block = kept if kept's size >= need else (free(kept); aligned_alloc(need))
    ...
    old = atomicrmw xchg @adc.kept.K, block         ; return: keep this one
    free(old)                                       ; another thread's, kept meanwhile

Threads calling one kernel at once each get a block of their own (the one that finds the slot
empty allocates); the last to return keeps its block. A block's size is in its first bytes,
before the temporaries. Blocks past KEPT_MAX bytes are freed as before, not kept.
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.lowering.loops import I64, PTR, i64, if_then_else

HEADER = 64             # bytes before the temporaries: the block's size, and their alignment kept
KEPT_MAX = 1 << 28      # bytes: larger blocks are freed on return


def take(b: ir.IRBuilder, llmod: ir.Module, kernel: str, need: ir.Value, allocate, free) -> ir.Value:
    """The start of a block of at least `need` bytes of temporaries for `kernel`: the one it kept,
    or a new one from `allocate(bytes)` (which returns on failure); `free(ptr)` frees."""
    slot = _slot(llmod, kernel)
    size = b.and_(b.add(need, i64(HEADER + HEADER - 1)), i64(-HEADER))     # a multiple of the alignment
    kept = b.atomic_rmw("xchg", slot, ir.Constant(PTR, None), "acquire")
    has = if_then_else(b, b.icmp_unsigned("!=", kept, ir.Constant(PTR, None)),
                       lambda: b.load(kept, typ=I64), lambda: i64(0))
    fits = b.icmp_unsigned(">=", has, size)

    def fresh() -> ir.Value:
        free(kept)
        block = allocate(size)
        b.store(size, block)
        return block

    block = if_then_else(b, fits, lambda: kept, fresh)
    return b.gep(block, [i64(HEADER)], source_etype=ir.IntType(8), inbounds=True)


def give_back(b: ir.IRBuilder, llmod: ir.Module, kernel: str, temporaries: ir.Value, free) -> None:
    """Keep the block of `temporaries` for `kernel`'s next call (freeing the one kept meanwhile),
    or free it when it is larger than KEPT_MAX."""
    block = b.gep(temporaries, [i64(-HEADER)], source_etype=ir.IntType(8), inbounds=True)
    with b.if_else(b.icmp_unsigned("<=", b.load(block, typ=I64), i64(KEPT_MAX))) as (keep, drop):
        with keep:
            free(b.atomic_rmw("xchg", _slot(llmod, kernel), block, "acq_rel"))
        with drop:
            free(block)


def _slot(llmod: ir.Module, kernel: str) -> ir.GlobalVariable:
    name = f"adc.kept.{kernel}"
    slot = llmod.globals.get(name)
    if slot is None:
        slot = ir.GlobalVariable(llmod, PTR, name)
        slot.linkage = "internal"
        slot.initializer = ir.Constant(PTR, None)
    return slot
