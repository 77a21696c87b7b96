"""Where kernels are compiled: a process compiles its first few, a worker process the rest (so
llvmlite's per-compile leak stays bounded, see adc/compile_worker.py). The worker's object code is
this process's, its errors come back as they are raised, a worker that dies is replaced, one is
retired after its share of compiles, and a forked child does not talk to its parent's worker."""
from __future__ import annotations

import gc
import itertools
import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import adc
from adc import compile_worker, driver
from adc.errors import CompileError
from tests.support.repository import ROOT

SOURCE = "def triple(x: f32[N]) -> f32[N]:\n    return x * 3.0 + 1.0\n"


def triple_request():
    """What the JIT asks to compile for `triple`: its symbol, its module's IR text, the host target."""
    from adc import compiler

    sources = compiler.kernel_sources(compiler.elaborate(SOURCE, "triple.adc"))
    (symbol,) = sources.kernels
    return symbol, sources.ir, "triple.adc", driver.host_target()


@pytest.fixture
def all_in_worker(monkeypatch):
    monkeypatch.setenv("ADC_IN_PROCESS_COMPILES", "0")


def test_the_worker_compiles_what_this_process_would(all_in_worker):
    request = triple_request()
    from_worker = compile_worker.object_code(*request)
    assert compile_worker.worker_pid() not in (None, os.getpid())
    assert from_worker == compile_worker.kernel_object(*request)


def test_a_kernel_compiled_in_the_worker_runs(all_in_worker, monkeypatch):
    monkeypatch.setenv("ADC_CACHE", "0")
    module = adc.compile(SOURCE.replace("3.0", "5.0"), "five.adc")
    x = np.linspace(-1, 1, 37, dtype=np.float32)
    np.testing.assert_allclose(module.triple(x).numpy(), x * 5 + 1, rtol=1e-6)


def test_the_workers_errors_come_back_as_raised(all_in_worker):
    symbol, _, name, target = triple_request()
    with pytest.raises(CompileError, match="bad.ir"):
        compile_worker.object_code(symbol, "func @broken(", "bad.ir", target)


def test_a_dead_worker_is_replaced(all_in_worker):
    request = triple_request()
    compile_worker.object_code(*request)
    dead = compile_worker.worker_pid()
    os.kill(dead, signal.SIGKILL)
    os.waitpid(dead, 0)
    assert compile_worker.object_code(*request) == compile_worker.kernel_object(*request)   # compiled here
    compile_worker.object_code(*request)
    assert compile_worker.worker_pid() not in (None, dead)


def test_a_worker_is_retired_after_its_share_of_compiles(all_in_worker, monkeypatch):
    """Retired workers are reaped: none is left for the collector, which would warn wherever it
    dropped it (a test elsewhere in the process saw an unexpected ResourceWarning)."""
    monkeypatch.setattr(compile_worker, "WORKER_COMPILES", 2)
    request = triple_request()
    serving = []                        # after each compile, the worker that serves the next one
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(6):
            compile_worker.object_code(*request)
            serving.append(compile_worker.worker_pid())
        gc.collect()
    runs = [len(list(same)) for _, same in itertools.groupby(serving)]
    assert len(runs) >= 3 and runs[1:-1] == [2] * (len(runs) - 2), serving     # the first may be part-used
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


BUDGET = """
import os, adc
from adc import compile_worker
os.environ["ADC_CACHE"] = "0"

def compile_fresh(k):
    return adc.compile(f"def k{k}(x: f32[N]) -> f32[N]:\\n    return x * {k}.0\\n", f"k{k}.adc")

seen = []
for k in range(16):
    module = compile_fresh(k)
    assert getattr(module, f"k{k}")([1.0]).numpy()[0] == k      # .numpy(): indexing a Tensor compiles
    seen.append(compile_worker.worker_pid() is not None)
pid = os.fork()
if pid == 0:                            # a forked child compiles on its own
    assert compile_worker.worker_pid() is None
    assert compile_fresh(99).k99([1.0]).numpy()[0] == 99.0
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(seen.index(True), status)
"""


def test_the_worker_starts_ahead_of_the_in_process_budget():
    environ = {**os.environ, "ADC_IN_PROCESS_COMPILES": "12"}
    result = subprocess.run([sys.executable, "-c", BUDGET], capture_output=True, text=True, env=environ,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    started_at, child_status = map(int, result.stdout.split())
    assert started_at == 12 - compile_worker.START_AHEAD - 1      # the compile that reaches 12 - 8 starts it
    assert child_status == 0


def test_a_budget_that_is_not_a_number_is_named(monkeypatch):
    monkeypatch.setenv("ADC_IN_PROCESS_COMPILES", "many")
    with pytest.raises(ValueError, match="ADC_IN_PROCESS_COMPILES"):
        compile_worker.object_code(*triple_request())


def test_the_worker_exits_with_its_process():
    code = ("import os, adc\nos.environ['ADC_IN_PROCESS_COMPILES'] = '0'\nos.environ['ADC_CACHE'] = '0'\n"
            "m = adc.compile('def f(x: f32[N]) -> f32[N]:\\n    return x + 1.0\\n', 'f.adc')\n"
            "m.f([1.0])\nfrom adc import compile_worker\nprint(compile_worker.worker_pid())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    pid = int(result.stdout)
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}") or " Z " in open(f"/proc/{pid}/stat").read():
            return
        time.sleep(0.05)
    pytest.fail(f"the compile worker {pid} outlived its process")


NO_WORKER = """
import os, sys, adc
from adc import compile_worker
sys.executable = {executable!r}
os.environ.update(ADC_IN_PROCESS_COMPILES="0", ADC_CACHE="0")
for k in range(3):
    module = adc.compile(f"def k{{k}}(x: f32[N]) -> f32[N]:\\n    return x * {{k}}.0\\n", f"k{{k}}.adc")
    assert getattr(module, f"k{{k}}")([2.0]).numpy()[0] == 2 * k
print(compile_worker.worker_pid())
"""


@pytest.mark.parametrize("executable", ["/nonexistent/python", "/bin/false"])
def test_without_a_worker_the_process_compiles_everything_itself(executable):
    """No Python to start (Popen fails), or a worker that dies before its first answer."""
    result = subprocess.run([sys.executable, "-c", NO_WORKER.format(executable=executable)], capture_output=True,
                            text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "None"
