"""A bounds-checked kernel's failure (STATUS_BOUNDS) as an adc.BoundsError: its error record read.

A checked build's kernel `k` exports `adc_bounds_k()`, the address of its module's error record:
the failed check's site + 1 (0: none), the buffer's id, the index and the extent, and the address
of the table (JSON) naming each site — function, op, source location, access — and each buffer
(codegen/lowering/bounds.py). Reading it clears it, so the next failure is recorded. The record is its
module's, not a thread's: of failures on several threads at once, one is reported.
"""
from __future__ import annotations

import ctypes
import json

from adc.abi import BOUNDS_KIND_BITS, KernelSignature, bounds_symbol
from adc.errors import BoundsError

_ACCESSOR = ctypes.CFUNCTYPE(ctypes.c_void_p)


def bounds_error(library, signature: KernelSignature) -> BoundsError:
    """The error kernel `signature` of `library` reported by returning STATUS_BOUNDS."""
    address = library.address(bounds_symbol(signature.symbol))
    if not address:
        return BoundsError(f"{signature.name}: an access was out of bounds (its library has no error record)")
    record = (ctypes.c_int64 * 5).from_address(_ACCESSOR(address)())
    site, buffer, index, extent, table = list(record)
    record[0] = 0
    if site == 0:
        return BoundsError(f"{signature.name}: an access was out of bounds (the record was read meanwhile)")
    found = json.loads(ctypes.string_at(table).decode("utf-8"))
    function, op, loc, access = found["sites"][site - 1]
    name, _ = found["buffers"][buffer >> BOUNDS_KIND_BITS]
    where = "" if function == signature.name else f" (in @{function})"
    if access.startswith("redzone"):
        side = "before" if index < 0 else "after"
        return BoundsError(f"{signature.name}{where}: the redzone {side} {name} was damaged when it was given "
                           f"back (byte {index} of its {extent}): something wrote past a buffer in it")
    return BoundsError(f"{signature.name}{where}: {op} at {loc}: {access} at index {index} is out of bounds "
                       f"of {name} (extent {extent})")
