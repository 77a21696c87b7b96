"""Compiling fresh kernels keeps no native memory of adc's: each module's LLVM context, execution
engine and code pages go when the module does (when every module shared LLVM's global context,
each compile kept ~99 KB for good).

The 1,000 kernels are compiled once to fill a cache, then compiled again in a fresh process, whose
growth is measured: a cache miss also runs LLVM's optimization pipeline, whose llvmlite binding
never frees the PassInstrumentationCallbacks of a PassBuilder (~60 KB a run, outside adc's reach;
docs/architecture.md)."""
from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import gc, os
import numpy as np
import adc

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

x = np.arange(16, dtype=np.float32)

def compile_and_call(k):
    m = adc.compile(f"def kern{k}(x: f32[N]) -> f32:\\n    return sum(x * {k}.0)\\n", f"kern{k}.adc")
    assert float(getattr(m, f"kern{k}")(x)) == 120.0 * k

for k in range(50):                    # warm up: the runtime library, parsers, allocator pools
    compile_and_call(k)
gc.collect()
before = rss()
for k in range(50, 1050):
    compile_and_call(k)
gc.collect()
print((rss() - before) / 2**20)
"""


def test_a_thousand_fresh_jit_compiles_grow_rss_by_less_than_10_mb(tmp_path):
    environ = {**os.environ, "ADC_CACHE_DIR": str(tmp_path)}
    for _ in range(2):                  # the first run fills the cache, the second is measured
        result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600,
                                env=environ)
        assert result.returncode == 0, result.stderr
    assert float(result.stdout) < 10.0
