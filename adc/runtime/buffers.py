"""Large kernel results reuse freed buffers instead of fresh pages from the system.

A result of a few megabytes or more is an allocation past malloc's mmap threshold (32 MB at
most; lower until a large block has been freed), so each call maps fresh pages and the system
zeroes every one on first touch: the Jacobian of a small dense layer w.r.t. its weights, a
33.5 MB result, spent more time in those page faults than in its own code, and a nested-tape
Hessian took 7,267 of them a call. Here a large result is a view of a block kept in a pool; when
nothing refers to the block but the pool, a later result of the same byte size takes it.

A block is free exactly when the pool holds the only reference to it: NumPy makes every view,
and every view of a view (a Tensor's array, a slice of it, a reshape), hold the block itself as
its base. At most `POOLED_BYTES` stay pooled: a new block past that drops free ones, those of the
sizes seen first going first, and is not pooled itself if it still does not fit.

    a = empty((4096, 2048), np.float32)     # a view of a new 32 MiB block, kept in the pool
    del a                                   # only the pool refers to the block now
    b = empty((2048, 4096), np.float32)     # the same block again: no page is touched anew
"""
from __future__ import annotations

import sys
from math import prod

import numpy as np

from adc import locks

MIN_BYTES = 1 << 22         # 4 MiB: below, malloc reuses its own free memory
POOLED_BYTES = 1 << 28      # 256 MiB of blocks kept at most
_FREE_REFS = 3              # a free block's references in `_take`: the pool's list, the loop, getrefcount's

_lock = locks.lock()
_blocks: dict[int, list[np.ndarray]] = {}     # bytes -> the pooled blocks of that size (uint8 arrays)
_pooled = 0
_new = np.empty


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array, as np.empty; a large one is a view of a pooled block."""
    nbytes = prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES:
        return _new(shape, dtype)
    return _take(nbytes).view(dtype).reshape(shape)


def _take(nbytes: int) -> np.ndarray:
    """A block of `nbytes` nothing else refers to: a pooled one, or a new one (pooled while room)."""
    global _pooled
    with _lock:
        blocks = _blocks.setdefault(nbytes, [])
        for block in blocks:
            if sys.getrefcount(block) == _FREE_REFS:
                return block
        if _pooled + nbytes > POOLED_BYTES:
            _pooled -= _drop_free(_pooled + nbytes - POOLED_BYTES)
        block = np.empty(nbytes, np.uint8)
        if _pooled + nbytes <= POOLED_BYTES:
            blocks.append(block)
            _pooled += nbytes
        return block


def _drop_free(wanted: int) -> int:
    """Drop free blocks, those pooled longest first, until `wanted` bytes are dropped or none is
    free; the bytes dropped. (Called with the lock held.)"""
    dropped = 0
    for size, blocks in list(_blocks.items()):
        kept = []
        for block in blocks:
            if dropped < wanted and sys.getrefcount(block) == _FREE_REFS:
                dropped += size
            else:
                kept.append(block)
        _blocks[size] = kept
    return dropped


def pooled_bytes() -> int:
    """The bytes of the blocks the pool keeps (free or in use)."""
    return _pooled
