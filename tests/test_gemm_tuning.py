"""The gemm's packed blocks measured for this machine (adc/driver/gemm_tuning.py): every block the
search may choose computes every remainder right; the search moves only for a faster block, or
one as fast that moves less memory; the record is measured once per machine, kept in the cache and named in the runtime library's key;
another CPU's target and a damaged record never reach the code generator."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from adc.codegen.native import gemm
from adc.driver import gemm_tuning, runtime_library
from adc.driver.host import host_target
from adc.ir.types import DType
from tests.support.products import around, assert_product

DTYPES = (DType.f32, DType.f64)


@pytest.fixture(scope="module")
def products():
    return gemm_tuning.TunableProducts(host_target())


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """A cache of this test's own, and an install that holds nothing."""
    monkeypatch.setenv("ADC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ADC_CACHE", raising=False)
    monkeypatch.delenv("ADC_CPU", raising=False)
    (tmp_path / "prebuilt").mkdir()
    monkeypatch.setattr(runtime_library, "INSTALLED", tmp_path / "prebuilt")


def blocks_searched(blk) -> list:
    """The table's block and every candidate the search times beside it."""
    return [blk] + gemm_tuning.candidates(blk, None)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_block_the_search_may_choose_computes_every_remainder(products, dtype):
    """Rows around the register tile's MR, columns around the vector width, NR and the block's
    width, depths around its depth, against float64 NumPy within a dot product's rounding."""
    rng = np.random.default_rng(3)
    for blk in blocks_searched(gemm_tuning.table(host_target())[dtype]):
        for rows, columns, depth in [(m, n, k) for m in around(1, blk.mr) for n in around(blk.nc) for k in (1, blk.kc + 1)] + \
                [(blk.mr + 1, n, k) for n in around(blk.vl, blk.nr) for k in around(blk.kc)] + [(3, 2 * blk.nc + 5, 2 * blk.kc + 3)]:
            a = rng.standard_normal((rows, depth)).astype(dtype.numpy)
            b = rng.standard_normal((depth, columns)).astype(dtype.numpy)
            c = np.full((rows, columns), np.nan, dtype.numpy)
            products.multiply(blk, a, b, c)
            assert_product(c, a, b)


def test_candidates_are_whole_panels_within_the_stack_budget_and_the_l2_cache():
    for blk in gemm_tuning.table(host_target()).values():
        for l2_bytes in (None, 256 << 10):
            for cand in gemm_tuning.candidates(blk, l2_bytes):
                assert cand.nc % cand.nr == 0 and cand.nc >= cand.nr and (cand.mr, cand.nr) == (blk.mr, blk.nr)
                assert cand.kc * cand.nc * cand.elem_align <= min(gemm.MAX_PACKED_BYTES, l2_bytes or 1 << 62)
        scaled = {(int(blk.kc * depth), int(blk.nc * width))
                  for depth in gemm_tuning.DEPTH_SCALES for width in gemm_tuning.WIDTH_SCALES}
        found = {(c.kc, c.nc) for c in gemm_tuning.candidates(blk, None)}
        assert found <= scaled - {(blk.kc, blk.nc)}
        assert all(2 * kc * nc >= blk.kc * blk.nc for kc, nc in found), "a candidate under half the table's block"
        # the table's bytes in other shapes: twice as deep and half as wide, four times and a quarter
        for kc, nc in ((blk.kc * 2, blk.nc // 2), (blk.kc * 4, blk.nc // 4)):
            assert (kc, nc) in found or nc < blk.nr or nc % blk.nr


class FakeClock:
    """The search's clock and products at once: each product advances the clock by its block's cost."""

    def __init__(self, cost):
        self.now, self.cost = 0.0, cost

    def perf_counter(self):
        return self.now

    def multiply(self, blk, a, b, c):
        self.now += self.cost(blk)


@pytest.mark.parametrize("gains, expected", [
    ({(1, 1 / 2): 0.995}, (1, 1)),                          # as fast within the margin, more memory: the table's
    ({(2, 1): 0.995}, (2, 1)),                              # as fast within the margin, deeper: less memory
    ({(1 / 2, 2): 0.995, (1, 2): 1.004}, (1, 2)),           # of two ties, the one that moves less memory
    ({(1, 1 / 2): 0.9}, (1, 1 / 2)),                        # a narrower block 10% faster
    ({(2, 1): 0.9}, (2, 1)),                                # a deeper one
    ({(4, 1 / 4): 0.9}, (4, 1 / 4)),                        # the same bytes, two moves from the table's shape
    ({(2, 1): 0.9, (2, 1 / 2): 0.8, (1, 1 / 2): 0.85}, (2, 1 / 2)),    # the fastest of several, not the first
    ({(1, 1): 0.5}, (1, 1)),                                # the table's own block the fastest
])
def test_the_search_keeps_a_faster_block_or_a_tie_that_moves_less_memory(monkeypatch, gains, expected):
    """Each block's cost is 1 for the table's, 1.5 for the others but those in `gains` (keyed by depth
    and width scales of the table's); the search times them all and keeps the fastest beyond MARGIN,
    or among the blocks within it the one that reads and writes the least memory a flop."""
    blk = gemm_tuning.table(host_target())[DType.f64]
    cost = {(int(blk.kc * depth), int(blk.nc * width)): gain for (depth, width), gain in {(1, 1): 1.0, **gains}.items()}
    clock = FakeClock(lambda b: cost.get((b.kc, b.nc), 1.5))
    monkeypatch.setattr(gemm_tuning, "SIZE", 8)
    best = gemm_tuning.search(clock, blk, l2_bytes=None, clock=clock.perf_counter)
    assert (best.kc, best.nc) == (int(blk.kc * expected[0]), int(blk.nc * expected[1]))


@pytest.mark.parametrize("times, expected", [
    # 1024 x 128 ties the fastest within 1% and moves the least memory: 1/1024 + 1/256 of an element a
    # flop against 1/512 + 1/256 (512 x 128) and 1/256 + 1/512 (256 x 256); 512 x 256 moves less but is slower
    ({(256, 256): 1.0, (512, 128): 0.996, (1024, 128): 1.005, (512, 256): 1.03}, (1024, 128)),
    ({(256, 256): 1.0, (512, 128): 0.995}, (256, 256)),     # the same memory: the first, the table's
    ({(256, 256): 1.0, (256, 64): 0.95}, (256, 64)),        # 5% faster: more memory does not matter
    ({(1024, 256): 1.0, (512, 512): 0.999}, (1024, 256)),   # 1/1024 + 1/512 against 1/512 + 1/1024: the first
    ({(256, 512): 1.0, (1024, 256): 1.008, (512, 256): 1.002}, (1024, 256)),
])
def test_the_choice_among_ties_is_the_block_that_moves_the_least_memory(times, expected):
    """`choice` of blocks timed as `times` (kc, nc -> seconds; the first is the table's), the
    expected block worked out by hand from C's passes (1 / kc) and A's (1 / 2 nc)."""
    blk = gemm_tuning.table(host_target())[DType.f64]
    contenders = [dataclasses.replace(blk, kc=kc, nc=nc) for kc, nc in times]
    chosen = gemm_tuning.choice(contenders, list(times.values()))
    assert (chosen.kc, chosen.nc) == expected


@pytest.mark.parametrize("scales, first_rounds, after, others, kept", [
    ((2, 1 / 2), 0.8, 1.0, 1.0, False),     # fast by chance among blocks as fast: not kept
    ((2, 1), 1.015, 0.99, 1.5, True),       # slow by chance, within twice MARGIN: a finalist, kept
])
def test_a_block_timed_again_beside_the_tables_is_judged_by_those_rounds(monkeypatch, scales, first_rounds, after,
                                                                         others, kept):
    """A block whose time in the rounds of all the candidates (`first_rounds`, the table's 1 and
    the others' `others`) is chance: if within twice MARGIN of the fastest it is a finalist, timed
    again beside the table's block, and kept or not by its time there (`after`)."""
    blk = gemm_tuning.table(host_target())[DType.f64]
    block = (int(blk.kc * scales[0]), int(blk.nc * scales[1]))
    runs = {"block": 0}

    def cost(b):
        if (b.kc, b.nc) == (blk.kc, blk.nc):
            return 1.0
        if (b.kc, b.nc) != block:
            return others
        runs["block"] += 1
        return first_rounds if runs["block"] <= gemm_tuning.ROUNDS else after

    clock = FakeClock(cost)
    monkeypatch.setattr(gemm_tuning, "SIZE", 8)
    best = gemm_tuning.search(clock, blk, l2_bytes=None, clock=clock.perf_counter)
    assert (best.kc, best.nc) == (block if kept else (blk.kc, blk.nc))
    assert runs["block"] > gemm_tuning.ROUNDS           # it was timed again


@pytest.mark.parametrize("record", [b"not json", b'{"f32": [256]}', b'{"f64": [256, 256]}',
                                    b'{"f32": [256, 100], "f64": [256, 256]}', b'{"f32": [4096, 4096], "f64": [256, 256]}',
                                    b'{"f32": [0, 512], "f64": [256, 256]}'])
def test_a_record_that_does_not_fit_the_tiles_is_refused(record):
    with pytest.raises(ValueError, match="gemm blocks"):
        gemm_tuning.blockings(host_target(), record)


def test_a_machine_measures_once_and_the_record_is_in_the_librarys_key(empty_cache, monkeypatch):
    measurements = []

    def measured(target):
        measurements.append(target)
        return {"f32": [128, 256], "f64": [512, 128]}

    monkeypatch.setattr(gemm_tuning, "measured", measured)
    target = host_target()
    key = runtime_library.library_key(target)
    assert runtime_library.library_key(target) == key and len(measurements) == 1
    assert json.loads(runtime_library.gemm_blocks(target)) == {"f32": [128, 256], "f64": [512, 128]}
    blockings = runtime_library.gemm_blockings(target)
    assert (blockings[DType.f32].kc, blockings[DType.f32].nc, blockings[DType.f64].kc) == (128, 256, 512)
    assert len(measurements) == 1
    assert runtime_library.library_key(target, "shared object") != key


def test_the_key_changes_with_the_measured_blocks(tmp_path, monkeypatch):
    monkeypatch.delenv("ADC_CPU", raising=False)        # this machine's blocks: measured ones
    keys = []
    for k, blocks in enumerate(({"f32": [128, 256], "f64": [512, 128]}, {"f32": [256, 256], "f64": [512, 128]})):
        monkeypatch.setenv("ADC_CACHE_DIR", str(tmp_path / f"cache{k}"))
        monkeypatch.setattr(runtime_library, "INSTALLED", tmp_path / "nothing installed")
        monkeypatch.setattr(gemm_tuning, "measured", lambda target, blocks=blocks: blocks)
        keys.append(runtime_library.library_key(host_target()))
    assert keys[0] != keys[1]


def test_another_cpus_target_is_built_with_the_table_without_measuring(empty_cache, monkeypatch):
    def measured(target):
        raise AssertionError("measured a CPU that is not this machine's")

    monkeypatch.setattr(gemm_tuning, "measured", measured)
    monkeypatch.setenv("ADC_CPU", "x86-64-v2")
    other = host_target()
    assert runtime_library.gemm_blocks(other) == b""
    assert runtime_library.gemm_blockings(other) == gemm_tuning.table(other)
