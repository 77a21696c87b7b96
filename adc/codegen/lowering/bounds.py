"""Bounds-checked builds: every access checked against its buffer's real extent, every heap block redzoned.

A checked build (`Target.check_bounds`: `adc compile --check-bounds`, `adc.compile(...,
check_bounds=True)`, ADC_CHECK_BOUNDS=1) is what Julia's --check-bounds=yes and Rust's debug
builds are: lowering calls this module at its choke points (Emitter.load/store, the outlined
nests' arguments, region calls, copies, the gemm call, the blocks it allocates), and an
unchecked build calls nothing here that emits IR, so its code is unchanged.

Extents travel with the pointers. Where a buffer is made — a parameter, a result, a part of a
block, an allocation, a row of a scan's stack — its extent in bytes and its name (an id into the
module's table of buffers) are recorded next to the pointer (`track`); a select of two buffers
selects their extents. An outlined nest gets one more argument, a descriptor: the address of
its caller's failure flag, then (extent, buffer id) per buffer argument; a region function two,
the descriptors of its inputs and of its outputs (its block's part last). A region checks its
temporaries against the part of its parent's block it was given, so a part sized too small for
the region's layout is an error where the region overruns it, not a corrupted neighbour.

    store x, p[i]   ──▶   if i >=u extent(p) / size: record(site, buffer, i, n); stop
                          store x, p[i]

On a failed check nothing is accessed: the first failure's details go to the module's error
record (site, buffer, index, extent); a kernel or region frees its blocks and returns
STATUS_BOUNDS; a nest sets its caller's flag and returns, and its caller returns STATUS_BOUNDS
when it finishes. Every heap block carries REDZONE bytes of PATTERN before and after, verified
when it is given back. The runtime reads the record through the kernel's `adc_bounds_<name>()`,
whose last field is the table of sites and buffers (JSON), and raises adc.BoundsError.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Callable, Sequence

import llvmlite.ir as ir

from adc.abi import BOUNDS_KIND_BITS, BOUNDS_PREFIX, STATUS_BOUNDS
from adc.codegen.lowering import kept_blocks
from adc.codegen.lowering.loops import I1, I8, I32, I64, PTR, i64, outline as outline_loop, stack_array

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.ir.core import Func, Op, Value

REDZONE = 64                        # bytes of PATTERN before and after each heap block's contents
PATTERN = 0x5A5A5A5A5A5A5A5A
# The kinds of buffer a name is of: the low bits of its id, so a descriptor's id tells its kind.
KINDS = ("parameter", "result", "temporary", "spare", "block", "stack", "slot")
MISINDEX_KINDS = ("temporary", "result", "stack", "redzone")    # Target.misindex (redzone: temporaries, unchecked)
RECORD = ir.ArrayType(I64, 5)       # site + 1 (0: none), buffer id, index, extent, the table's address


class ModuleChecks:
    """The checks of one LLVM module: its sites (function, op, location, access) and buffers, numbered
    as lowering meets them, its error record, and the accessor each of its kernels exports."""

    def __init__(self, llmod: ir.Module, misindex: str = ""):
        if misindex and misindex not in MISINDEX_KINDS:
            raise ValueError(f"misindex: {misindex!r} is none of {', '.join(MISINDEX_KINDS)}")
        self.llmod, self.misindex = llmod, misindex
        self.sites: dict[tuple[str, str, str, str], int] = {}
        self.buffers: dict[tuple[str, str], int] = {}
        self.record = ir.GlobalVariable(llmod, RECORD, "adc.bounds.record")
        self.record.linkage = "internal"

    def site(self, function: Func, op: Op | None, access: str) -> int:
        """The id of an access by `op` (None: a copy of a value made elsewhere, located at its function)."""
        loc = op.loc if op is not None else function.loc
        key = (function.name, op.name if op is not None else "copy", str(loc) if loc else "?", access)
        return self.sites.setdefault(key, len(self.sites))

    def buffer(self, name: str, kind: str) -> ir.Constant:
        index = self.buffers.setdefault((name, kind), len(self.buffers))
        return i64((index << BOUNDS_KIND_BITS) | KINDS.index(kind))

    def export(self, kernels: Sequence[str]) -> None:
        """The table (JSON: sites, buffers) in the record, and `ptr adc_bounds_<kernel>()` per kernel."""
        table = json.dumps({"sites": [list(s) for s in self.sites], "buffers": [list(b) for b in self.buffers]})
        data = bytearray(table.encode("utf-8") + b"\0")
        text = ir.GlobalVariable(self.llmod, ir.ArrayType(I8, len(data)), "adc.bounds.table")
        text.global_constant, text.linkage = True, "private"
        text.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)
        self.record.initializer = ir.Constant(RECORD, [i64(0), i64(0), i64(0), i64(0), text.ptrtoint(I64)])
        for kernel in kernels:
            fn = ir.Function(self.llmod, ir.FunctionType(PTR, []), BOUNDS_PREFIX + kernel)
            ir.IRBuilder(fn.append_basic_block("entry")).ret(self.record)


class Frame:
    """The checks of one emitted function: the extents of its pointers and pointer arrays, the flag
    its nests set on failure, and whether it stops by returning a status (a kernel, a region) or
    by returning from a nest."""

    def __init__(self, checks: ModuleChecks, failed: ir.Value, nest: bool):
        self.checks, self.failed, self.nest = checks, failed, nest
        self.extents: dict[int, tuple[ir.Value, ir.Value, ir.Value]] = {}    # id(ptr) -> (ptr, bytes, buffer id)
        self.arrays: dict[int, tuple[ir.Value, ir.Value]] = {}              # id(pointer array) -> (it, descriptor)
        self.exit: ir.Block | None = None       # a kernel's or region's one way out on failure (`status` fills it)

    def extent(self, ptr: ir.Value) -> tuple[ir.Value, ir.Value]:
        found = self.extents.get(id(ptr))
        if found is None or found[0] is not ptr:
            raise AssertionError(f"bounds: an access through a pointer with no known extent ({ptr!r})")
        return found[1], found[2]


def function_frame(em: Emitter, checks: ModuleChecks | None) -> Frame | None:
    """The frame of a kernel or region function (its failure flag cleared at entry)."""
    if checks is None:
        return None
    failed = em.head.alloca(I8)
    em.head.store(ir.Constant(I8, 0), failed)
    return Frame(checks, failed, nest=False)


def region_type(checks: ModuleChecks | None) -> ir.FunctionType:
    """A region function: `i32 (dims, inputs, outputs)`, and in a checked build their descriptors."""
    return ir.FunctionType(I32, [PTR] * (5 if checks is not None else 3))


def track(em: Emitter, ptr: ir.Value, size: ir.Value, name: str, kind: str) -> ir.Value:
    """Record that `ptr` holds `size` bytes of buffer `name` (a `kind` of KINDS)."""
    if em.bounds is not None:
        em.bounds.extents[id(ptr)] = (ptr, size, em.bounds.checks.buffer(name, kind))
    return ptr


def track_parts(em: Emitter, pointers: Sequence[ir.Value], sizes: Sequence[ir.Value], offsets: Sequence[ir.Value],
                names: Sequence[tuple[str, str]], given: ir.Value | None) -> None:
    """Parts of a block, each `sizes[k]` bytes at `offsets[k]`; of a region's `given` part of its
    parent's block, each no further than that part reaches (a part sized too small is found where
    the region overruns it)."""
    if em.bounds is None:
        return
    room = None if given is None else em.bounds.extent(given)[0]
    for ptr, size, offset, (name, kind) in zip(pointers, sizes, offsets, names):
        if room is not None:
            left = em.b.sub(room, offset)
            left = em.b.select(em.b.icmp_signed("<", left, i64(0)), i64(0), left)
            size = em.b.select(em.b.icmp_signed("<", left, size), left, size)
        track(em, ptr, size, name, kind)


def track_within(em: Emitter, ptr: ir.Value, base: ir.Value, offset: ir.Value, element_bytes: int = 1,
                 size: ir.Value | None = None) -> ir.Value:
    """`ptr`, `offset` elements into `base`'s buffer: what of it is left (or `size` bytes, no further)."""
    if em.bounds is None:
        return ptr
    whole, buffer = em.bounds.extent(base)
    left = em.b.sub(whole, em.b.mul(offset, i64(element_bytes)))
    left = em.b.select(em.b.icmp_signed("<", left, i64(0)), i64(0), left)
    if size is not None:
        left = em.b.select(em.b.icmp_signed("<", left, size), left, size)
    em.bounds.extents[id(ptr)] = (ptr, left, buffer)
    return ptr


def track_arguments(em: Emitter, fn: ir.Function, params: list[ir.Value], results: list[ir.Value],
                    given: ir.Value | None) -> None:
    """A kernel's parameters and results, of the sizes their types give (the caller allocated and
    checked them so); a region's, and the part of its parent's block it was `given`, of the
    extents its caller passed."""
    if em.bounds is None:
        return
    if given is None:
        for p, ptr in zip(em.func.params, params):
            track(em, ptr, em.bytes_of(p), f"parameter '{p.name}'", "parameter")
        for k, (v, ptr) in enumerate(zip(em.func.returns, results)):
            track(em, ptr, em.bytes_of(v), f"result {k}", "result")
        return
    for k, ptr in enumerate(params):
        region_buffer(em, fn, False, k, ptr)
    for k, ptr in enumerate([*results, given]):
        region_buffer(em, fn, True, k, ptr)


def track_block(em: Emitter, pointers: Sequence[ir.Value], sizes: Sequence[ir.Value], offsets: Sequence[ir.Value],
                temps: Sequence[Value], spares: Sequence[Value], column_sums: Sequence[Value], regions: Sequence[str],
                given: ir.Value | None) -> None:
    """The parts of a function's block (temporaries.place_temporaries): its temporaries, its loops'
    spares, its column sums' levels, its regions' blocks."""
    if em.bounds is None:
        return
    names = ([(describe(em, v), "temporary") for v in temps] + [("the spare of " + describe(em, v), "spare") for v in spares]
             + [(describe_levels(em, v), "temporary") for v in column_sums]
             + [(f"block of region @{name}", "block") for name in regions])
    track_parts(em, pointers, sizes, offsets, names, given)


def describe(em: Emitter, value: Value) -> str:
    """A buffer's name: the op making its value, and where."""
    op = em.plan.producers.get(value)
    return f"the temporary of {op.name} at {op.loc}" if op is not None else "a copy of a parameter"


def describe_levels(em: Emitter, value: Value) -> str:
    """The name of the levels of the column sum making `value` (summation.blocked_column_sums)."""
    op = em.plan.producers[value]
    return f"the levels of {op.name} at {op.loc}"


def select(em: Emitter, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    """cond ? a : b of two buffers or pointer arrays, with their extents or descriptors."""
    chosen = em.b.select(cond, a, b)
    frame = em.bounds
    if frame is not None:
        if id(a) in frame.arrays:
            frame.arrays[id(chosen)] = (chosen, em.b.select(cond, frame.arrays[id(a)][1], frame.arrays[id(b)][1]))
        else:
            (size_a, id_a), (size_b, id_b) = frame.extent(a), frame.extent(b)
            frame.extents[id(chosen)] = (chosen, em.b.select(cond, size_a, size_b), em.b.select(cond, id_a, id_b))
    return chosen


# ---------------------------------------------------------------- the checks

def access(em: Emitter, base: ir.Value, element_bytes: int, offset: ir.Value, store: bool) -> ir.Value:
    """The element offset to load or store at, once checked to lie in `base`'s buffer."""
    frame = em.bounds
    if frame is None:
        return offset
    size, buffer = frame.extent(base)
    b = em.b
    n = b.udiv(size, i64(element_bytes))
    offset, unchecked = _misindexed(em, buffer, offset) if store else (offset, ir.Constant(I1, 0))
    bad = b.and_(b.icmp_unsigned(">=", offset, n), b.not_(unchecked))
    _fail_if(em, bad, frame.checks.site(em.func, em.op, "store" if store else "load"), buffer, offset, n)
    return offset


def _misindexed(em: Emitter, buffer: ir.Value, offset: ir.Value) -> tuple[ir.Value, ir.Value]:
    """A store's offset as the test hook (Target.misindex) moves it, one on in buffers of its kind,
    and whether that store goes unchecked (the "redzone" hook's, which the redzones must catch)."""
    b, hook = em.b, em.bounds.checks.misindex
    if not hook:
        return offset, ir.Constant(I1, 0)
    kind = KINDS.index("temporary" if hook == "redzone" else hook)
    hit = b.icmp_unsigned("==", b.and_(buffer, i64((1 << BOUNDS_KIND_BITS) - 1)), i64(kind))
    return b.add(offset, b.zext(hit, I64)), hit if hook == "redzone" else ir.Constant(I1, 0)


def span(em: Emitter, base: ir.Value, element_bytes: int, first: ir.Value, last: ir.Value, nonempty: ir.Value,
         what: str, store: bool = False) -> None:
    """Check that elements first..last of `base`'s buffer exist, when `nonempty` (a copy, a gemm operand,
    a row a runtime function is given); with `store`, the test hook moves `last` one on, as `access` does."""
    frame = em.bounds
    if frame is None:
        return
    size, buffer = frame.extent(base)
    b = em.b
    n = b.udiv(size, i64(element_bytes))
    last, unchecked = _misindexed(em, buffer, last) if store else (last, ir.Constant(I1, 0))
    outside = b.or_(b.icmp_signed("<", first, i64(0)), b.icmp_unsigned(">=", last, n))
    _fail_if(em, b.and_(b.and_(nonempty, outside), b.not_(unchecked)), frame.checks.site(em.func, em.op, what),
             buffer, last, n)


def gemm_operands(em: Emitter, element_bytes: int, rows: tuple[ir.Value, ir.Value],
                  columns: tuple[ir.Value, ir.Value], depth: tuple[ir.Value, ir.Value],
                  a: tuple[ir.Value, ir.Value, ir.Value], b_: tuple[ir.Value, ir.Value, ir.Value],
                  c: tuple[ir.Value, ir.Value]) -> None:
    """Check what a gemm call of a block of C = A @ B will read and write, its `rows`, `columns` and
    `depth` half-open ranges: A[rows, depth] and B[depth, columns] (each a base and its row and
    column strides), and C[rows, columns] (row-major: a base and its row stride)."""
    if em.bounds is None:
        return
    b = em.b
    (r0, r1), (c0, c1), (p0, p1) = rows, columns, depth
    heights, widths, depths = b.sub(r1, r0), b.sub(c1, c0), b.sub(p1, p0)
    last_row, last_column, last_depth = b.sub(r1, i64(1)), b.sub(c1, i64(1)), b.sub(p1, i64(1))

    def positive(*values: ir.Value) -> ir.Value:
        every = ir.Constant(I1, 1)
        for v in values:
            every = b.and_(every, b.icmp_signed(">", v, i64(0)))
        return every

    def corner(row: ir.Value, col: ir.Value, strides: tuple[ir.Value, ir.Value]) -> ir.Value:
        return b.add(b.mul(row, strides[0]), b.mul(col, strides[1]))
    base_a, *strides_a = a
    base_b, *strides_b = b_
    base_c, ldc = c
    span(em, base_a, element_bytes, corner(r0, p0, strides_a), corner(last_row, last_depth, strides_a),
         positive(heights, widths, depths), "gemm reads A")
    span(em, base_b, element_bytes, corner(p0, c0, strides_b), corner(last_depth, last_column, strides_b),
         positive(heights, widths, depths), "gemm reads B")
    span(em, base_c, element_bytes, corner(r0, c0, (ldc, i64(1))), corner(last_row, last_column, (ldc, i64(1))),
         positive(heights, widths), "gemm writes C")


def copy(em: Emitter, dest: ir.Value, source: ir.Value, size: ir.Value) -> None:
    """Check a copy of `size` bytes from `source`'s buffer to `dest`'s."""
    if em.bounds is None:
        return
    nonempty = em.b.icmp_signed(">", size, i64(0))
    last = em.b.sub(size, i64(1))
    span(em, source, 1, i64(0), last, nonempty, "copy from")
    span(em, dest, 1, i64(0), last, nonempty, "copy to")


def _fail_if(em: Emitter, bad: ir.Value, site: int, buffer: ir.Value, index: ir.Value, extent: ir.Value) -> None:
    """When `bad`: record the failure (the first one since the record was read), and stop."""
    frame = em.bounds
    b = em.b
    with b.if_then(bad, likely=False):
        _record(em, site, buffer, index, extent)
        if frame.nest:
            b.atomic_rmw("xchg", frame.failed, ir.Constant(I8, 1), "monotonic")
            b.ret_void()
        else:       # one block frees the blocks: a copy per check grew with checks x blocks
            frame.exit = frame.exit or b.function.append_basic_block("bounds.exit")
            b.branch(frame.exit)


def _record(em: Emitter, site: int, buffer: ir.Value, index: ir.Value, extent: ir.Value) -> None:
    """Fill the module's error record, unless it holds a failure not read yet (the first one stays)."""
    b, record = em.b, em.bounds.checks.record
    first = b.cmpxchg(b.gep(record, [i64(0), ir.Constant(I32, 0)]), i64(0), i64(site + 1), "monotonic", "monotonic")
    with b.if_then(b.extract_value(first, 1)):
        for k, value in ((1, buffer), (2, index), (3, extent)):
            b.store(value, b.gep(record, [i64(0), ir.Constant(I32, k)]))


def leave_from_exit(em: Emitter) -> None:
    """A kernel's or region's way out from a failed check of its own: it leaves with STATUS_BOUNDS."""
    if em.bounds is not None and em.bounds.exit is not None:
        with em.b.goto_block(em.bounds.exit):
            em.leave(ir.Constant(I32, STATUS_BOUNDS))


def status(em: Emitter, leaving: ir.Value) -> ir.Value:
    """What a kernel or region returns once it released its blocks: the status it left with, or
    STATUS_BOUNDS when that is 0 but a nest it called, or a redzone it verified (as late as when
    the blocks were given back), failed."""
    if em.bounds is None:
        return leaving
    failed = em.b.icmp_unsigned("!=", em.b.load(em.bounds.failed, typ=I8), ir.Constant(I8, 0))
    ok = em.b.icmp_unsigned("==", leaving, ir.Constant(I32, 0))
    return em.b.select(em.b.and_(failed, ok), ir.Constant(I32, STATUS_BOUNDS), leaving)


# ---------------------------------------------------------------- nests and regions

def outline(em: Emitter, stem: str, n_buffers: int) -> ir.Function:
    """loops.outline, with the descriptor argument of a checked build last."""
    return outline_loop(em.llmod, stem, n_buffers + (em.bounds is not None))


def nest_frame(parent: Emitter, child: Emitter, fn: ir.Function) -> Frame | None:
    """The frame of a nest outlined by `parent`: its buffers' extents, and the flag it sets on
    failure, read from its descriptor (its last argument)."""
    if parent.bounds is None:
        return None
    descriptor = fn.args[-1]
    head = child.head

    def word(k: int) -> ir.Value:
        return head.load(head.gep(descriptor, [i64(k)], source_etype=I64), typ=I64)
    frame = Frame(parent.bounds.checks, head.inttoptr(word(0), PTR), nest=True)
    for k, arg in enumerate(fn.args[3:-1]):
        frame.extents[id(arg)] = (arg, word(1 + 2 * k), word(2 + 2 * k))
    return frame


def nest_arguments(em: Emitter, buffers: list[ir.Value]) -> list[ir.Value]:
    """The arguments after a nest's range: `buffers` (dims, then the buffers), and in a checked build
    its descriptor."""
    frame = em.bounds
    if frame is None:
        return buffers
    words = [em.b.ptrtoint(frame.failed, I64)]
    for ptr in buffers[1:]:
        words.extend(frame.extent(ptr))
    return [*buffers, stack_array(em.head, em.b, I64, words)]


def pointer_array(em: Emitter, pointers: list[ir.Value]) -> ir.Value:
    """An array of buffers for a region's call; in a checked build with its descriptor (a null
    pointer, a row placed later by `place`, has none yet)."""
    array = stack_array(em.head, em.b, PTR, pointers)
    frame = em.bounds
    if frame is not None:
        words = []
        for ptr in pointers:
            words.extend((i64(0), i64(0)) if isinstance(ptr, ir.Constant) else frame.extent(ptr))
        frame.arrays[id(array)] = (array, stack_array(em.head, em.b, I64, words))
    return array


def place(em: Emitter, array: ir.Value, k: int, ptr: ir.Value) -> None:
    """Put buffer `ptr` at slot `k` of a pointer array (a scan's row for this iteration)."""
    em.b.store(ptr, em.b.gep(array, [i64(k)], source_etype=PTR))
    frame = em.bounds
    if frame is not None:
        descriptor = frame.arrays[id(array)][1]
        for j, word in enumerate(frame.extent(ptr)):
            em.b.store(word, em.b.gep(descriptor, [i64(2 * k + j)], source_etype=I64))


def region_arguments(em: Emitter, args: list[ir.Value]) -> list[ir.Value]:
    """(dims, inputs, outputs) of a region's call, and in a checked build their descriptors."""
    frame = em.bounds
    if frame is None:
        return args
    return [*args, frame.arrays[id(args[1])][1], frame.arrays[id(args[2])][1]]


def region_buffer(em: Emitter, fn: ir.Function, outputs: bool, k: int, ptr: ir.Value) -> ir.Value:
    """Buffer `k` of a region's inputs (or outputs), with the extent its caller passed."""
    frame = em.bounds
    if frame is not None:
        descriptor = fn.args[4 if outputs else 3]

        def word(j: int) -> ir.Value:
            return em.head.load(em.head.gep(descriptor, [i64(2 * k + j)], source_etype=I64), typ=I64)
        frame.extents[id(ptr)] = (ptr, word(0), word(1))
    return ptr


# ---------------------------------------------------------------- blocks and their redzones

def take(em: Emitter, name: str, need: ir.Value, allocate: Callable, free: Callable) -> ir.Value:
    """kept_blocks.take of a block of `need` bytes; in a checked build with REDZONE bytes of
    PATTERN before and after (and `need` in the block's header, for `give_back`)."""
    if em.bounds is None:
        return kept_blocks.take(em.b, em.llmod, name, need, allocate, free)
    b = em.b
    start = kept_blocks.take(b, em.llmod, name, b.add(need, i64(2 * REDZONE)), allocate, free)
    b.store(need, b.gep(start, [i64(8 - kept_blocks.HEADER)], source_etype=I8))
    contents = b.gep(start, [i64(REDZONE)], source_etype=I8)
    for zone in _redzones(em, contents, need):
        for k in range(REDZONE // 8):
            b.store(i64(PATTERN), b.gep(zone, [i64(8 * k)], source_etype=I8))
    return contents


def give_back(em: Emitter, name: str, contents: ir.Value, free: Callable) -> None:
    """kept_blocks.give_back; in a checked build once the block's redzones are verified: a damaged
    one is recorded (site: the function's `free` of block `name`) and fails the call."""
    frame = em.bounds
    if frame is None:
        kept_blocks.give_back(em.b, em.llmod, name, contents, free)
        return
    b = em.b
    start = b.gep(contents, [i64(-REDZONE)], source_etype=I8)
    need = b.load(b.gep(start, [i64(8 - kept_blocks.HEADER)], source_etype=I8), typ=I64)
    damaged, where = ir.Constant(I1, 0), i64(0)
    for zone, offset in zip(_redzones(em, contents, need), (i64(-REDZONE), need)):
        for k in range(REDZONE // 8):
            word = b.load(b.gep(zone, [i64(8 * k)], source_etype=I8), typ=I64)
            hit = b.and_(b.icmp_unsigned("!=", word, i64(PATTERN)), b.not_(damaged))
            where = b.select(hit, b.add(offset, i64(8 * k)), where)
            damaged = b.or_(damaged, hit)
    with b.if_then(damaged, likely=False):
        owner = em.func.name
        buffer = frame.checks.buffer(f"the block of temporaries of @{owner}" if name == owner else
                                     f"allocation {name[len(owner) + 1:]} of @{owner}", "block")
        _record(em, frame.checks.site(em.func, None, f"redzone of block {name}"), buffer, where, need)
        b.store(ir.Constant(I8, 1), frame.failed)
    kept_blocks.give_back(b, em.llmod, name, start, free)


def _redzones(em: Emitter, contents: ir.Value, need: ir.Value) -> tuple[ir.Value, ir.Value]:
    b = em.b
    return b.gep(contents, [i64(-REDZONE)], source_etype=I8), b.gep(contents, [need], source_etype=I8)

