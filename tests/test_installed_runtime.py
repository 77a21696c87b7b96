"""The runtime library compiled at install (setup.py → runtime_library.build_installed) is what a
first-ever process copies into its empty cache instead of compiling it; a file under another key
(another machine, another adc or llvmlite) is never taken."""
from __future__ import annotations

import pytest

from adc import compile_log
from adc.codegen.toolchain.cache import Cache
from adc.codegen.toolchain.dynamic import DynamicLibrary
from adc.driver import runtime_library
from adc.driver.host import host_target
from adc.ir.types import DType


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ADC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ADC_CACHE", raising=False)
    return Cache(tmp_path / "cache")


def test_a_cache_miss_copies_the_file_installed_under_its_key(tmp_path, monkeypatch, empty_cache, caplog):
    installed = tmp_path / "prebuilt"
    installed.mkdir()
    target = host_target()
    (installed / runtime_library.blocks_key(target)).write_bytes(b'{"f32": [128, 256], "f64": [256, 128]}')
    monkeypatch.setattr(runtime_library, "INSTALLED", installed)
    key = runtime_library.library_key(target)
    (installed / key).write_bytes(b"object code compiled at install")
    (installed / ("0" * 64)).write_bytes(b"another machine's")
    with caplog.at_level("INFO", logger=compile_log.LOGGER_NAME):
        assert runtime_library.runtime_object(target) == b"object code compiled at install"
    assert "copied from the install" in caplog.text and "gemm tuning" not in caplog.text     # nothing measured
    assert empty_cache.get("runtime", key) == b"object code compiled at install"     # kept: copied once
    assert runtime_library.gemm_blockings(target)[DType.f64].kc == 256          # the install's blocks


def test_the_install_step_writes_a_loadable_library_under_the_keys_the_driver_looks_for(tmp_path, monkeypatch,
                                                                                        empty_cache, caplog):
    monkeypatch.delenv("ADC_CPU", raising=False)        # the install builds for this machine
    folder = tmp_path / "prebuilt"
    written = runtime_library.build_installed(folder)
    monkeypatch.setattr(runtime_library, "INSTALLED", folder)
    target = host_target()
    with caplog.at_level("INFO", logger=compile_log.LOGGER_NAME):
        keys = [runtime_library.blocks_key(target), runtime_library.library_key(target),
                runtime_library.library_key(target, "shared object")]
        assert runtime_library.runtime_object(target) == (folder / keys[1]).read_bytes()
    assert "gemm tuning" not in caplog.text         # the blocks measured at install were found there
    assert sorted(written) == sorted(folder / key for key in keys)
    library = DynamicLibrary(folder / keys[2], runtime=True)
    assert library.address("adc_rt_gemm_f32") and library.address("adc_rt_parallel_for")
