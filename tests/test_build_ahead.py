"""`import adc` on a machine whose cache lacks the runtime library starts a child that builds it
(adc/build_ahead.py), holding the cache's lock the driver waits on; once built, a marker stops
later imports from starting another, and the driver finds the library in the cache."""
from __future__ import annotations

import os
import subprocess
import sys

from adc.codegen.toolchain.cache import Cache
from adc.driver.host import host_target
from adc.driver.runtime_library import library_key
from tests.support.repository import ROOT

START = "from adc import build_ahead; print(build_ahead.start() is not None)"
MATMUL = ("import adc, numpy as np\n"
          "m = adc.compile('def f(a: f32[M, K], b: f32[K, N]) -> f32[M, N]:\\n    return a @ b\\n')\n"
          "print(np.asarray(m.f(np.eye(3, dtype=np.float32), np.ones((3, 2), np.float32))).sum())\n")


def run(code: str, cache_dir, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter; its output is read to the end, so a builder it started, which
    shares its stderr, has finished too."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("ADC_CPU", "ADC_BUILD_AHEAD", "ADC_CACHE", "ADC_LOG")}
    environment.update(PYTHONPATH=str(ROOT), ADC_CACHE_DIR=str(cache_dir), **env)
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                          check=True, timeout=300)


def test_a_fresh_cache_gets_the_runtime_library_from_a_child_of_import(tmp_path, monkeypatch):
    assert "runtime library: cache miss" in run("import adc", tmp_path, ADC_LOG="compile").stderr
    with Cache(tmp_path).lock("runtime"):       # free once the child is done
        # the shared object (compiled, or copied from the install's adc/prebuilt/), and the marker
        monkeypatch.setenv("ADC_CACHE_DIR", str(tmp_path))      # the gemm blocks the child found or measured
        monkeypatch.delenv("ADC_CPU", raising=False)            # the child built for this machine, as run() asks
        assert Cache(tmp_path).locate("runtime", library_key(host_target(), "shared object"))
        assert len(list((tmp_path / "ahead").iterdir())) == 1
    assert run(START, tmp_path).stdout == "False\n"                 # marked: no second child
    used = run(MATMUL, tmp_path, ADC_LOG="compile")
    assert used.stdout == "6.0\n" and "runtime library: cache miss" not in used.stderr


def test_no_child_when_switched_off_or_without_a_cache(tmp_path):
    assert run(START, tmp_path, ADC_BUILD_AHEAD="0").stdout == "False\n"
    assert run(START, tmp_path, ADC_CACHE="0").stdout == "False\n"
    assert not (tmp_path / "ahead").exists()
