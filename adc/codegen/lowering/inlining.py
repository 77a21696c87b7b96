"""Which functions of a kernel's module LLVM inlines and optimizes: a small loop body into its loop.

A loop calls its body's function (a region, rules/control_flow.py) once per iteration. For a
small body the call, the body's prologue and its loading of every buffer pointer from the
loop's pointer arrays cost as much as its arithmetic (a trajectory's step over a state of two,
forward and reverse: 626 instructions an iteration called, 527 inlined; callgrind). So a region
making at most SMALL_BODY_CALLS calls of outlined functions (its nests, its own loops' bodies; a
small one counted by the calls it makes) may be inlined, and a kernel running a loop of such a
body has its glue optimized; any other kernel's glue is `optnone` (lower.py). A larger body
stays a function of its own: with a dozen nests inlined into its loop, LLVM's loop strength
reduction took the RNN VJP's code generation from 0.5 to 1.8 s, and the call is a small part of
what such an iteration costs. Nor are a large body's nests inlined into it: a function of many
inlined loops costs LLVM more than the loops alone (superlinear passes, and a nest both inlined
and kept for its task), and a call is again a small part of such an iteration (the Hessian
through a loop holding an if: its second-order kernel's optimization and code generation took
5.5-5.9 + 3.1-3.4 s with them inlined, 4.8 + 2.4-2.5 s without; the RNN's cell of 12 nests over
32 x 128 ran no slower, best of 40 calls).

    for %n, %x {body = @step}   @step: 2 nests   ──▶  the loop in the kernel's optimized glue, @step inlined
    for %n, %h {body = @cell}   @cell: 12 nests  ──▶  noinline @cell called from the `optnone` glue,
                                                     its 12 nests noinline
"""
from __future__ import annotations

from typing import Iterable, Iterator

import llvmlite.ir as ir

from adc.codegen.lowering.emitter import REGION_PREFIX

SMALL_BODY_CALLS = 4


def _outlined_callees(fn: ir.Function) -> Iterator[tuple[ir.Function, bool]]:
    """Each call of an outlined function `fn` makes (not of always-inline vector math, nor of a
    declaration), as (callee, whether it is an inlinable region)."""
    for block in fn.blocks:
        for instr in block.instructions:
            callee = getattr(instr, "callee", None) if isinstance(instr, ir.CallInstr) else None
            if isinstance(callee, ir.Function) and callee.blocks and "alwaysinline" not in callee.attributes:
                yield callee, callee.name.startswith(REGION_PREFIX) and "noinline" not in callee.attributes


def calls(fn: ir.Function) -> int:
    """The calls of outlined functions `fn` makes, an inlinable region's counted by the calls it makes."""
    return sum(calls(callee) if inlined else 1 for callee, inlined in _outlined_callees(fn))


def _keep_nests_outlined(fn: ir.Function) -> None:
    """The nests `fn` calls, and those of the inlinable regions it calls, stay functions of their own."""
    for callee, inlined in _outlined_callees(fn):
        if inlined:
            _keep_nests_outlined(callee)
        elif not callee.name.startswith(REGION_PREFIX):
            callee.attributes.add("noinline")


def is_small(region: ir.Function) -> bool:
    return calls(region) <= SMALL_BODY_CALLS


def settle_region(region: ir.Function) -> None:
    """Once `region` is lowered: a large one is never inlined, nor inlines its nests."""
    if not is_small(region):
        region.attributes.add("noinline")
        _keep_nests_outlined(region)


def settle_kernel(kernel: ir.Function, looped: Iterable[ir.Function]) -> None:
    """Before `kernel`'s glue is lowered, given the regions its loops run each iteration: the glue is
    optimized only when one of them is small (and so inlined into its loop)."""
    kernel.attributes.add("noinline")
    if not any(is_small(region) for region in looped):
        kernel.attributes.add("optnone")
