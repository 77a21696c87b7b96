"""The runtime library compiled at install (setup.py → runtime_library.build_installed) is what a
first-ever process copies into its empty cache instead of compiling it; a file under another key
(another machine, another adc or llvmlite) is never taken."""
from __future__ import annotations

import pytest

from adc import compile_log
from adc.codegen.toolchain.cache import Cache
from adc.codegen.toolchain.dynamic import DynamicLibrary
from adc.driver import runtime_library
from adc.driver.host import cache_key, host_target


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ADC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ADC_CACHE", raising=False)
    return Cache(tmp_path / "cache")


def test_a_cache_miss_copies_the_file_installed_under_its_key(tmp_path, monkeypatch, empty_cache, caplog):
    installed = tmp_path / "prebuilt"
    installed.mkdir()
    key = cache_key(host_target(), "runtime")
    (installed / key).write_bytes(b"object code compiled at install")
    (installed / ("0" * 64)).write_bytes(b"another machine's")
    monkeypatch.setattr(runtime_library, "INSTALLED", installed)
    with caplog.at_level("INFO", logger=compile_log.LOGGER_NAME):
        assert runtime_library.runtime_object(host_target()) == b"object code compiled at install"
    assert "copied from the install" in caplog.text
    assert empty_cache.get("runtime", key) == b"object code compiled at install"     # kept: copied once


def test_the_install_step_writes_a_loadable_library_under_the_keys_the_driver_looks_for(tmp_path):
    written = runtime_library.build_installed(tmp_path)
    target = host_target()
    assert sorted(written) == sorted(tmp_path / cache_key(target, "runtime", *kind) for kind in ((), ("shared object",)))
    library = DynamicLibrary(tmp_path / cache_key(target, "runtime", "shared object"), runtime=True)
    assert library.address("adc_rt_gemm_f32") and library.address("adc_rt_parallel_for")
