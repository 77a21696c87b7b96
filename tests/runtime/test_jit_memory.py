"""Compiling fresh kernels keeps no native memory: each module's LLVM context, execution engine and
code pages go when the module does (when every module shared LLVM's global context, each compile
kept ~99 KB for good), and what llvmlite's optimization pipeline never frees (~70 KB a run) is
held by the compile worker past the process's first few compiles (adc/compile_worker.py). The
cache is off, so each of the 500 kernels runs LLVM; 10 KB kept per compile would add 5 MB."""
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
for k in range(50, 550):
    compile_and_call(k)
gc.collect()
print((rss() - before) / 2**20)
"""


def test_five_hundred_fresh_jit_compiles_grow_rss_by_less_than_5_mb():
    environ = {**os.environ, "ADC_CACHE": "0"}
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600,
                            env=environ)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) < 5.0
