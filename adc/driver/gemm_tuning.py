"""The gemm's packed block measured on this machine, as ATLAS and BLIS tune theirs.

gemm.BLOCKINGS fixes each dtype's register tile by the vector width (the register file decides
it) and gives a packed block of B — KC deep, NC wide — that suits the machines it was tuned on.
How large a block pays depends on the cache sizes and the memory system, which the vector width
does not tell. So the runtime library's build for this machine (runtime_library.py) times a few
blocks around the table's with `gemm.define_tunable_gemm`, one compile for all of them, and keeps
the fastest in the cache and in the library's key:

    blocks = measured(target)       # {"f32": [256, 512], "f64": [256, 256]}: KC and NC, ~2 s
    blockings(target, encode(blocks))   # {DType.f32: Blocking(kc=256, nc=512, ...), ...}: what gemm.py builds

The record is plain JSON (`encode`), so a process that finds the library cached reads its key
without importing the code generator.

The search is by coordinates: the width first (half, the table's, twice), then the depth at the
best width, each candidate timed in interleaved rounds on a 1024 x 1024 x 1024 product (the best
of `ROUNDS`), a move made only when it is `MARGIN` faster, so noise keeps the table's block.
Candidates are whole panels and fit the L2 cache (sysfs) and gemm.MAX_PACKED_BYTES.
"""
from __future__ import annotations

import ctypes
import dataclasses
import json
import time
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
    """`blk` with half and twice its width, then half and twice its depth: those that are whole
    panels and fit the stack budget and the L2 cache."""
    budget = min(gemm.MAX_PACKED_BYTES, l2_bytes or gemm.MAX_PACKED_BYTES)
    moves = [dataclasses.replace(blk, nc=nc) for nc in (blk.nc // 2, blk.nc * 2)]
    moves += [dataclasses.replace(blk, kc=kc) for kc in (blk.kc // 2, blk.kc * 2)]
    return [b for b in moves if b.nc >= b.nr and b.nc % b.nr == 0 and b.kc * b.nc * b.elem_align <= budget]


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
    """The width, then the depth: each move kept only when it is MARGIN faster than the best so far
    (`clock`: seconds, as time.perf_counter gives them)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((SIZE, SIZE)).astype(blk.dtype.numpy) for _ in range(2))
    c = np.empty((SIZE, SIZE), blk.dtype.numpy)
    best = blk
    for axis in ("nc", "kc"):
        contenders = [best] + [cand for cand in candidates(best, l2_bytes) if getattr(cand, axis) != getattr(best, axis)]
        times = _best_times(lambda contender: products.multiply(contender, a, b, c), contenders, clock)
        fastest = min(range(len(contenders)), key=times.__getitem__)
        if times[fastest] < times[0] * (1 - MARGIN):
            best = contenders[fastest]
    return best


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
