"""Large kernel results reuse freed blocks (adc/runtime/buffers.py), never one something still reads."""
import numpy as np

import adc
from adc.runtime import buffers

F32 = np.dtype(np.float32)


def _address(array) -> int:
    return np.asarray(array).__array_interface__["data"][0]


def test_a_freed_large_result_block_is_taken_again_by_the_next_of_its_size():
    first = buffers.empty((1031, 1024), F32)        # just over 4 MiB, a size no other test uses
    address = _address(first)
    del first
    again = buffers.empty((1024, 1031), F32)
    assert _address(again) == address and again.shape == (1024, 1031) and again.flags.c_contiguous


def test_a_block_any_view_still_reads_is_never_handed_out():
    first = buffers.empty((1033, 1024), F32)
    first[...] = 7.0
    rows = first[5:9]                   # a view of a view: its base is the block itself
    del first
    second = buffers.empty((1033, 1024), F32)
    second[...] = -1.0
    assert _address(second) != _address(rows) - 5 * 1024 * 4
    np.testing.assert_array_equal(rows, 7.0)


def test_small_arrays_are_not_pooled():
    before = buffers.pooled_bytes()
    buffers.empty((16, 16), F32)
    assert buffers.pooled_bytes() == before


def test_the_pool_stays_within_its_bound_dropping_free_blocks_first(monkeypatch):
    monkeypatch.setattr(buffers, "_blocks", {})
    monkeypatch.setattr(buffers, "_pooled", 0)
    monkeypatch.setattr(buffers, "POOLED_BYTES", 3 * buffers.MIN_BYTES)
    held = buffers.empty((buffers.MIN_BYTES,), np.dtype(np.uint8))
    for k in range(2, 6):       # blocks of growing sizes, each freed at once
        buffers.empty((k * buffers.MIN_BYTES // 2,), np.dtype(np.uint8))
        assert buffers.pooled_bytes() <= buffers.POOLED_BYTES
    assert any(block is held.base for blocks in buffers._blocks.values() for block in blocks)


def test_a_kernel_result_reuses_the_block_of_one_dropped_and_keeps_one_still_read():
    m = adc.compile("def scale(x: f32[N]) -> f32[N]:\n    return x * 3.0\n", "buffers.adc")
    x = np.arange(1 << 21, dtype=np.float32)      # 8 MiB
    first = m.scale(x)
    address = _address(first)
    del first
    second = m.scale(x)
    assert _address(second) == address
    kept = second.numpy()[:4]
    del second
    third = m.scale(x + 1)
    assert _address(third) != address
    np.testing.assert_array_equal(kept, [0.0, 3.0, 6.0, 9.0])
    np.testing.assert_array_equal(third.numpy()[:4], [3.0, 6.0, 9.0, 12.0])
