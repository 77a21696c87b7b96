"""The gemm's packed block measured on this machine, as ATLAS and BLIS tune theirs.

gemm.BLOCKINGS fixes each dtype's register tile by the vector width (the register file decides
it) and gives a packed block of B — KC deep, NC wide — that suits the machines it was tuned on.
How large a block pays depends on the cache sizes and the memory system, which the vector width
does not tell. So the runtime library's build for this machine (runtime_library.py) times a few
blocks around the table's with `gemm.define_tunable_gemm`, one compile for all of them, and keeps
the fastest in the cache and in the library's key:

    blocks = measured(target)       # {"f32": [1024, 256], "f64": [1024, 128]}: KC and NC, ~4 s
    blockings(target, encode(blocks))   # {DType.f32: Blocking(kc=1024, nc=256, ...), ...}: what gemm.py builds

The record is plain JSON (`encode`), so a process that finds the library cached reads its key
without importing the code generator.

The search times the table's block and every candidate around it — depths and widths the
table's times a power of two (`DEPTH_SCALES`, `WIDTH_SCALES`), whole panels that fit the L2
cache (sysfs) and gemm.MAX_PACKED_BYTES, at least half the table's block — in interleaved rounds
on a 1024 x 1024 x 1024 product (the best of `ROUNDS`). All at once, not a step at a time: on
Zen 4 a block 1024 deep and 128 wide ran f64 products 1.4-2.8% faster than 512 x 256 at every
size from 256 x 784 x 512 to 2048^3, two moves from the table's 256 x 256, and a search that
moved the width and then the depth once each stopped at 512 x 256 or short of it.

Blocks within `MARGIN` of the fastest are ties, and the tie that moves the least memory a flop
once the operands outgrow the caches wins (`memory_per_flop`): at 1024^3 C and A sit in Zen 4's
32 MiB L3, so a shallow block's extra passes over C cost nothing there, but at 2048^3 they go to
memory. There f64 1024 x 128 and 512 x 128 tied within 0.4% at 1024^3 and the first ran 53.6
GFLOP/s at 2048^3 to the second's 51.6; the fastest at 1024^3 alone was either, by the noise.
The rounds of all the blocks pick finalists, those within twice MARGIN of the fastest, and
rounds of the finalists beside the table's block make the choice: a block fast by chance in the
first rounds is timed again before it is kept, and one slow by chance there, if near enough,
gets a second chance (one build picked f64 512 x 128 over 1024 x 128 from the first rounds alone).
"""
from __future__ import annotations

import ctypes
import dataclasses
import json
import time
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from adc.codegen.native import gemm
from adc.ir.types import DType

if TYPE_CHECKING:
    from adc.codegen.toolchain.target import Target

SIZE = 1024         # M = K = N of the timed product: 20-40 ms a call with AVX-512 (Zen 4)
ROUNDS = 3
MARGIN = 0.01
DEPTH_SCALES = (1 / 2, 1, 2, 4)     # the candidates' KC: the table's times these
WIDTH_SCALES = (1 / 4, 1 / 2, 1, 2)     # and their NC
L2_SIZE = Path("/sys/devices/system/cpu/cpu0/cache/index2/size")
_SIGNATURE = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 3, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                              ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                              *[ctypes.c_int64] * 3)


def table(target: Target) -> dict[DType, gemm.Blocking]:
    """gemm.BLOCKINGS' tiles for `target`: what a target other than this machine is built with."""
    return gemm.table(target.vector_bits)


def measured(target: Target) -> dict[str, list[int]]:
    """The blocks that ran fastest here, `target` being this machine's (see the module docstring)."""
    from adc import compile_log

    start = time.perf_counter()
    products = TunableProducts(target)
    blocks = {str(dtype): [best.kc, best.nc] for dtype, best in
              ((dtype, search(products, blk, _l2_bytes())) for dtype, blk in table(target).items())}
    compile_log.event("gemm tuning", f"{encode(blocks).decode()} in {time.perf_counter() - start:.2f} s")
    return blocks


class TunableProducts:
    """gemm.define_tunable_gemm for each dtype's tiles, compiled for `target` and loaded here."""

    def __init__(self, target: Target):
        import llvmlite.ir as ir

        from adc.codegen import emit
        from adc.codegen.toolchain.jit import JitLibrary

        module = ir.Module(name="adc_gemm_tuning")
        for dtype, blk in table(target).items():
            gemm.define_tunable_gemm(module, blk, _symbol(dtype))
        self._library = JitLibrary(emit.emit_object(module, target, "gemm tuning", unroll=True), target)
        self._functions = {dtype: _SIGNATURE(self._library.address(_symbol(dtype))) for dtype in table(target)}

    def multiply(self, blk: gemm.Blocking, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        """c = a @ b in `blk`'s blocks: row-major contiguous arrays of blk.dtype, none of them empty."""
        (m, k), n = a.shape, b.shape[1]
        self._functions[blk.dtype](m, n, k, a.ctypes.data, k, 1, b.ctypes.data, n, 1, c.ctypes.data, n, blk.kc, blk.nc)


def candidates(blk: gemm.Blocking, l2_bytes: int | None) -> list[gemm.Blocking]:
    """The blocks other than `blk` whose depth and width are its own times DEPTH_SCALES and
    WIDTH_SCALES: whole panels that fit the stack budget and the L2 cache, and at least half the
    size of `blk` (a smaller block streams A more often, and none has run faster)."""
    budget = min(gemm.MAX_PACKED_BYTES, l2_bytes or gemm.MAX_PACKED_BYTES)
    blocks = [dataclasses.replace(blk, kc=int(blk.kc * depth), nc=int(blk.nc * width))
              for depth in DEPTH_SCALES for width in WIDTH_SCALES if (depth, width) != (1, 1)]
    return [b for b in blocks if b.kc >= 1 and b.nc >= b.nr and b.nc % b.nr == 0
            and blk.kc * blk.nc <= 2 * b.kc * b.nc and b.kc * b.nc * b.elem_align <= budget]


def blockings(target: Target, record: bytes) -> dict[DType, gemm.Blocking]:
    """`target`'s tiles with the packed blocks of `record` (`encode`'s; b"": the table's); ValueError
    for a record that is not JSON of whole panels within gemm.MAX_PACKED_BYTES."""
    chosen = table(target)
    if not record:
        return chosen
    try:
        blocks = json.loads(record)
        for dtype, blk in chosen.items():
            kc, nc = blocks[str(dtype)]
            chosen[dtype] = dataclasses.replace(blk, kc=int(kc), nc=int(nc))
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"not a record of gemm blocks: {record[:80]!r} ({error})") from None
    for dtype, blk in chosen.items():
        if not (blk.kc > 0 and blk.nc >= blk.nr and blk.nc % blk.nr == 0
                and blk.kc * blk.nc * blk.elem_align <= gemm.MAX_PACKED_BYTES):
            raise ValueError(f"gemm blocks kc {blk.kc} nc {blk.nc} do not fit {dtype}'s {blk.mr} x {blk.nr} tiles")
    return chosen


def encode(blocks: dict[str, list[int]]) -> bytes:
    """The record kept in the cache and named in the runtime library's key."""
    return json.dumps(blocks, sort_keys=True).encode()


def search(products: TunableProducts, blk: gemm.Blocking, l2_bytes: int | None,
           clock=time.perf_counter) -> gemm.Blocking:
    """`blk` or one of its candidates: the rounds of all of them find the finalists, those within
    twice MARGIN of the fastest, and the rounds of the finalists and `blk` alone make the `choice`
    (`clock`: seconds, as time.perf_counter gives them)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((SIZE, SIZE)).astype(blk.dtype.numpy) for _ in range(2))
    c = np.empty((SIZE, SIZE), blk.dtype.numpy)

    def times(contenders: list[gemm.Blocking]) -> list[float]:
        return _best_times(lambda contender: products.multiply(contender, a, b, c), contenders, clock)

    contenders = [blk] + candidates(blk, l2_bytes)
    first = times(contenders)
    near = min(first) * (1 + 2 * MARGIN)
    finalists = [blk] + [contender for contender, t in zip(contenders[1:], first[1:]) if t <= near]
    return blk if len(finalists) == 1 else choice(finalists, times(finalists))


def choice(contenders: list[gemm.Blocking], times: list[float]) -> gemm.Blocking:
    """Of the contenders within MARGIN of the fastest time, the one with the least
    `memory_per_flop`; between equals the first (the table's block), then the faster."""
    ties = [k for k, t in enumerate(times) if t <= min(times) * (1 + MARGIN)]
    return contenders[min(ties, key=lambda k: (memory_per_flop(contenders[k]), k != 0, times[k]))]


def memory_per_flop(blk: gemm.Blocking) -> Fraction:
    """Elements of C and A moved to and from memory a flop, in `blk`'s blocks, once C and A outgrow
    the caches: C is read and written once a KC-deep pass (2 M N elements for 2 M N KC flops), A
    read once an NC-wide block of B (M K elements for 2 M K NC flops). B, packed once, moves least."""
    return Fraction(1, blk.kc) + Fraction(1, 2 * blk.nc)


def _best_times(multiply, contenders: list[gemm.Blocking], clock) -> list[float]:
    """Each contender's best time over ROUNDS, the rounds interleaved so drift affects all alike."""
    multiply(contenders[0])       # a first call: pages and caches warm
    times = [float("inf")] * len(contenders)
    for _ in range(ROUNDS):
        for k, contender in enumerate(contenders):
            start = clock()
            multiply(contender)
            times[k] = min(times[k], clock() - start)
    return times


def _l2_bytes() -> int | None:
    """This CPU's L2 cache per core as sysfs gives it ("1024K"), or None."""
    try:
        text = L2_SIZE.read_text().strip()
    except OSError:
        return None
    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
    digits = text.rstrip("KM")
    return int(digits) * scale if digits.isdigit() else None


def _symbol(dtype: DType) -> str:
    return f"adc_gemm_tuning_{dtype}"
