"""Interrupts: a running loop stops when the process's interrupt counter moves.

A kernel notes the counter when it starts; every iteration of its `for`, `scan` and `while`
loops (control_flow.py), and of its loop bodies' loops, reads it again and, when it moved,
returns STATUS_INTERRUPTED through the failure path (`Emitter.fail_if`), so each function
frees what it allocated and each region returns the status to its parent. One atomic load,
a compare and a branch never taken per iteration, beside a call of the body.

    runtime library                                 kernel
    @adc.own_interrupts = internal i32 0            start = load atomic *@adc_rt_interrupts
    @adc_rt_interrupts = ptr @adc.own_interrupts    loop: body(...)
    adc_rt_watch_interrupts(ptr c): c or own              if load atomic *counter != start: fail(4)

A counter, not a flag: a kernel stops on interrupts that come while it runs, whatever
others do meanwhile, so nothing clears it and one started after an interrupt runs in full.
The runtime (adc/runtime/interrupts.py) points every library it loads at the one counter its
SIGINT handler increments (`adc_watch_interrupts`, exported by each shared object: each
carries its runtime library and so its own pointer); a C program may point a module at its
own. A region gets the counter's address and the start after its symbols in its dims.
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.abi import RUNTIME_INTERRUPTS, RUNTIME_WATCH_INTERRUPTS, STATUS_INTERRUPTED, WATCH_INTERRUPTS_SYMBOL
from adc.codegen.lowering.loops import I32, I64, PTR, i64

VOID = ir.VoidType()
WATCH_TYPE = ir.FunctionType(VOID, [PTR])


def define_runtime(module: ir.Module) -> None:
    """The runtime library's counter pointer, at its own counter (which nothing moves) until
    `adc_rt_watch_interrupts` points it at another."""
    own = ir.GlobalVariable(module, I32, "adc.own_interrupts")
    own.linkage, own.initializer = "internal", ir.Constant(I32, 0)
    counter = ir.GlobalVariable(module, PTR, RUNTIME_INTERRUPTS)
    counter.initializer = own
    fn = ir.Function(module, WATCH_TYPE, RUNTIME_WATCH_INTERRUPTS)
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    (given,) = fn.args
    chosen = b.select(b.icmp_unsigned("==", given, ir.Constant(PTR, None)), own, given)
    b.store(chosen, counter)        # before the library's kernels run (a module's load)
    b.ret_void()


def define_watch_interrupts(module: ir.Module) -> None:
    """A shared object's exported `void adc_watch_interrupts(const volatile int32_t *counter)`."""
    fn = ir.Function(module, WATCH_TYPE, WATCH_INTERRUPTS_SYMBOL)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    watch = module.globals.get(RUNTIME_WATCH_INTERRUPTS) or ir.Function(module, WATCH_TYPE, RUNTIME_WATCH_INTERRUPTS)
    b.call(watch, list(fn.args))
    b.ret_void()


class Watch:
    """The counter one function's loops read and its value when the kernel started: a kernel reads
    both in its entry, a region from the two dims after its `symbols` (`for_regions`)."""

    def __init__(self, head: ir.IRBuilder, dims: ir.Value, symbols: int | None):
        self.head, self.dims, self.symbols = head, dims, symbols
        self.counter: ir.Value | None = None
        self.start: ir.Value | None = None

    def _read(self) -> None:
        if self.counter is not None:
            return
        head = self.head
        if self.symbols is None:
            module = head.module
            slot = module.globals.get(RUNTIME_INTERRUPTS) or ir.GlobalVariable(module, PTR, RUNTIME_INTERRUPTS)
            self.counter = head.load(slot, typ=PTR)
            self.start = head.load_atomic(self.counter, "monotonic", 4, typ=I32)
            return
        address, start = (head.load(head.gep(self.dims, [i64(self.symbols + k)], source_etype=I64), typ=I64)
                          for k in range(2))
        self.counter, self.start = head.inttoptr(address, PTR), head.trunc(start, I32)

    def for_regions(self) -> list[ir.Value]:
        """What a region's dims hold after its symbols: the counter's address, the start."""
        self._read()
        return [self.head.ptrtoint(self.counter, I64), self.head.zext(self.start, I64)]

    def moved(self, b: ir.IRBuilder) -> ir.Value:
        """Whether an interrupt came since the kernel started (an i1, at `b`)."""
        self._read()
        return b.icmp_unsigned("!=", b.load_atomic(self.counter, "monotonic", 4, typ=I32), self.start)


def poll(em) -> None:
    """At a loop's back-edge: return STATUS_INTERRUPTED, freeing what the function allocated, when
    an interrupt came since the kernel started."""
    em.fail_if(em.watch.moved(em.b), STATUS_INTERRUPTED)
