"""The gemm's packed blocks measured for this machine (adc/driver/gemm_tuning.py): every block the
search may choose computes every remainder right; the search moves only for a faster block; the
record is measured once per machine, kept in the cache and named in the runtime library's key;
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
    """The table's block, every candidate around it, and every candidate around those."""
    found = [blk] + gemm_tuning.candidates(blk, None)
    return list(dict.fromkeys(found + [c for b in found[1:] for c in gemm_tuning.candidates(b, None)]))


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
        assert {(c.kc, c.nc) for c in gemm_tuning.candidates(blk, None)} <= {
            (blk.kc, blk.nc // 2), (blk.kc, blk.nc * 2), (blk.kc // 2, blk.nc), (blk.kc * 2, blk.nc)}


class FakeClock:
    """The search's clock and products at once: each product advances the clock by its block's cost."""

    def __init__(self, cost):
        self.now, self.cost = 0.0, cost

    def perf_counter(self):
        return self.now

    def multiply(self, blk, a, b, c):
        self.now += self.cost(blk)


@pytest.mark.parametrize("width_gain, depth_gain, expected", [
    (0.995, 0.995, "table"),        # within the margin: noise keeps the table's block
    (0.9, 1.0, "width"),            # the narrower block is 10% faster, deeper ones are not
    (1.0, 0.9, "depth"),
    (0.9, 0.9, "both"),
])
def test_the_search_moves_only_to_a_block_faster_by_the_margin(monkeypatch, width_gain, depth_gain, expected):
    blk = gemm_tuning.table(host_target())[DType.f64]
    narrower = blk.nc // 2

    def cost(b):
        return 1.0 * (width_gain if b.nc == narrower else 1.0) * (depth_gain if b.kc == blk.kc * 2 else 1.0)

    clock = FakeClock(cost)
    monkeypatch.setattr(gemm_tuning, "SIZE", 8)
    best = gemm_tuning.search(clock, blk, l2_bytes=None, clock=clock.perf_counter)
    wanted = {"table": blk, "width": dataclasses.replace(blk, nc=narrower), "depth": dataclasses.replace(blk, kc=blk.kc * 2),
              "both": dataclasses.replace(blk, kc=blk.kc * 2, nc=narrower)}[expected]
    assert (best.kc, best.nc) == (wanted.kc, wanted.nc)


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
