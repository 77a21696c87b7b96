"""The compile cache across processes: a second process runs no LLVM (and opening a cached module
loads none), concurrent compiles are safe, a damaged entry is rebuilt, ADC_CACHE=0 writes nothing,
derived kernels are cached too; a kernel's object code is shared by the modules where it calls the
same code, and by no other; a recorded call's backward is compiled ahead, by a child process."""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import adc
from adc.codegen.toolchain.cache import Cache
from adc.driver.runtime_library import runtime_library
from tests.support.repository import ROOT, SAMPLES

COMPILE_AND_RUN = f"""
import sys
import numpy as np
import adc
m = adc.compile_file({str(SAMPLES / "kernels.adc")!r})
x = np.linspace(-3, 3, 1001, dtype=np.float32)
assert np.allclose(np.asarray(m.sigmoid_shift(x, 0.5)), 1 / (1 + np.exp(-(x + 0.5))), rtol=1e-5, atol=1e-6)
print("compiler imported" if "adc.compiler" in sys.modules else "compiler not imported")
"""

GRADIENT = COMPILE_AND_RUN + """
v = adc.Variable(x)
with adc.GradientTape() as tape:
    y = adc.reduce_sum(m.sigmoid_shift(v, 0.5))
s = 1 / (1 + np.exp(-(x + 0.5)))
assert np.allclose(np.asarray(tape.gradient(y, v)), s * (1 - s), rtol=1e-4, atol=1e-6)
print("compiler imported" if "adc.compiler" in sys.modules else "compiler not imported")
"""


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    """An empty kernel cache holding the JIT's runtime library already (building it takes seconds)."""
    runtime_library()
    for namespace in ("runtime", "host"):
        shutil.copytree(Path(os.environ["ADC_CACHE_DIR"]) / namespace, tmp_path / "cache" / namespace)
    return tmp_path / "cache"


def inherited() -> dict[str, str]:
    """This process's environment for its children, which run on this machine's CPU: a CPU named by
    ADC_CPU needs LLVM to resolve it, which the tests of processes without LLVM would find imported."""
    return {key: value for key, value in os.environ.items() if key != "ADC_CPU"}


def run(code: str, cache_dir: Path, **env) -> subprocess.CompletedProcess:
    environ = {**inherited(), "ADC_CACHE_DIR": str(cache_dir), "ADC_LOG": "compile", "ADC_LINK": "1", **env}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    return result


def entries(cache_dir: Path, namespace: str) -> list[str]:
    folder = cache_dir / namespace
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_second_process_loads_from_the_cache_without_llvm(cache_dir):
    first = run(COMPILE_AND_RUN, cache_dir)
    assert "cache miss" in first.stderr and "llvm-optimize" in first.stderr
    second = run(COMPILE_AND_RUN, cache_dir)
    assert "cache hit" in second.stderr
    assert "llvm-optimize" not in second.stderr and "elaborate" not in second.stderr
    assert second.stdout.split() [-3:] == ["compiler", "not", "imported"]


def test_opening_a_cached_module_loads_no_llvm(cache_dir):
    run(COMPILE_AND_RUN, cache_dir)
    code = (f"import sys, adc\nadc.compile_file({str(SAMPLES / 'kernels.adc')!r})\n"
            f"print(sorted(name for name in sys.modules if name.startswith('llvmlite')))")
    assert run(code, cache_dir).stdout.split() == ["[]"]


def test_a_process_whose_kernels_are_cached_runs_and_differentiates_them_without_llvm(cache_dir):
    first = run(GRADIENT, cache_dir)        # compiles, and links each kernel's shared object before exiting
    assert "llvm-optimize" in first.stderr and "link" in first.stderr
    linked = entries(cache_dir, "shared")   # sigmoid_shift, its VJP and the eager sum's kernels
    assert len(linked) >= 2
    second = run(GRADIENT + "print(sorted(name for name in sys.modules if name.startswith('llvmlite')))\n",
                 cache_dir)
    assert second.stdout.splitlines()[-1] == "[]"
    assert second.stderr.count("(shared object)") == len(linked) and "cache miss" not in second.stderr


def test_derived_kernels_are_cached_too(cache_dir):
    run(GRADIENT, cache_dir)
    second = run(GRADIENT, cache_dir)
    assert "vjp of sigmoid_shift: cache hit" in second.stderr
    assert "llvm-optimize" not in second.stderr and "derive" not in second.stderr.replace("derive ", "")
    assert second.stdout.splitlines()[-1] == "compiler not imported"


def test_without_a_c_compiler_the_jit_keeps_to_object_code(tmp_path):
    result = run(GRADIENT, tmp_path / "cache", CC="no-such-compiler-here")
    assert "not linked, object code only" in result.stderr
    assert entries(tmp_path / "cache", "shared") == []
    again = run(GRADIENT, tmp_path / "cache", CC="no-such-compiler-here")
    assert "llvm-optimize" not in again.stderr
    assert not [line for line in again.stderr.splitlines() if "cache hit" in line and "(shared object)" in line]


def test_adc_link_0_keeps_the_jit_to_object_code(cache_dir):
    first = run(GRADIENT, cache_dir, ADC_LINK="0")
    assert "not linked (ADC_LINK=0), object code only" in first.stderr
    assert entries(cache_dir, "shared") == [] and entries(cache_dir, "modules") != []
    again = run(GRADIENT, cache_dir, ADC_LINK="0")
    assert "llvm-optimize" not in again.stderr and "(shared object)" not in again.stderr


def test_a_reinstall_of_the_same_adc_finds_what_the_first_compiled(cache_dir, tmp_path):
    """Installing again writes the same files with new modification times: the runtime library and
    the kernels compiled by the first installation are cache hits."""
    site = tmp_path / "site-packages"
    installed = site / "adc"
    shutil.copytree(Path(adc.__file__).parent, installed, ignore=shutil.ignore_patterns("__pycache__"))
    environ = {"PYTHONPATH": str(site), "ADC_CACHE_DIR": str(cache_dir), "ADC_LOG": "compile"}
    code = COMPILE_AND_RUN + "print(adc.__file__)\n"

    def run_installed() -> subprocess.CompletedProcess:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                                env={**inherited(), **environ}, timeout=300)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[-1] == str(installed / "__init__.py")
        return result
    assert "llvm-optimize" in run_installed().stderr
    shutil.rmtree(installed)                # pip's reinstall: the same files, written anew an hour later
    shutil.copytree(Path(adc.__file__).parent, installed, ignore=shutil.ignore_patterns("__pycache__"))
    for path in installed.rglob("*"):
        os.utime(path, ns=(path.stat().st_atime_ns + 3600 * 10**9, path.stat().st_mtime_ns + 3600 * 10**9))
    again = run_installed().stderr
    assert "cache miss" not in again and "llvm-optimize" not in again, again


def test_four_processes_compiling_one_module_at_once(cache_dir):
    environ = {**inherited(), "ADC_CACHE_DIR": str(cache_dir)}
    processes = [subprocess.Popen([sys.executable, "-c", COMPILE_AND_RUN], env=environ, cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outcomes = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0] * 4, [err for _, err in outcomes]
    names = entries(cache_dir, "modules")              # the module's manifest and one kernel's object code
    assert len(names) == 2 and all(Cache(cache_dir).get("modules", name) is not None for name in names)
    again = run(COMPILE_AND_RUN, cache_dir).stderr
    assert "cache miss" not in again and "llvm-optimize" not in again


def test_damaged_entries_are_rebuilt(cache_dir):
    run(COMPILE_AND_RUN, cache_dir)
    names = {namespace: entries(cache_dir, namespace) for namespace in ("modules", "shared")}
    assert len(names["modules"]) == 2 and len(names["shared"]) == 1
    for namespace, found in names.items():    # the manifest, the kernel's object code and its shared object
        for name in found:
            path = cache_dir / namespace / name
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0x55
            path.write_bytes(bytes(data))
    again = run(COMPILE_AND_RUN, cache_dir)
    assert again.stderr.count("cache miss") == 2 and "llvm-optimize" in again.stderr
    assert all(Cache(cache_dir).get(namespace, name) is not None              # whole again
               for namespace, found in names.items() for name in found)


def test_a_truncated_runtime_library_is_rebuilt(cache_dir):
    # the JIT's object code and the shared object linked from it, as far as this session has made
    # them (copied from the install's, a session may hold only one; it may hold other targets' too)
    found = entries(cache_dir, "runtime")
    assert found
    for entry in found:
        path = cache_dir / "runtime" / entry
        path.write_bytes(path.read_bytes()[:1000])
    # the install's copy (adc/prebuilt/) hidden: a matching one would stand in for the object code
    hide_install = "import adc.driver.runtime_library as installed\ninstalled.INSTALLED = installed.INSTALLED / 'absent'\n"
    again = run(hide_install + COMPILE_AND_RUN, cache_dir)
    assert again.stderr.count("runtime library: cache miss") == 2
    # counted after the run: the copy may have caught another worker's library half-written (a temporary name)
    assert sum(Cache(cache_dir).get("runtime", entry) is not None for entry in entries(cache_dir, "runtime")) == 2


def test_cache_off_writes_nothing(tmp_path):
    result = run(COMPILE_AND_RUN, tmp_path / "cache", ADC_CACHE="0")
    assert "cache off" in result.stderr
    assert not (tmp_path / "cache").exists()


def test_cli_cache_info_and_clear(cache_dir):
    run(COMPILE_AND_RUN, cache_dir)
    environ = {**inherited(), "ADC_CACHE_DIR": str(cache_dir)}
    info = subprocess.run([sys.executable, "-m", "adc", "cache", "info"], capture_output=True, text=True,
                          env=environ, check=True).stdout
    assert f"location: {cache_dir}" in info and "modules: 2" in info
    assert f"runtime: {len(entries(cache_dir, 'runtime'))}" in info
    assert "shared: 1" in info
    subprocess.run([sys.executable, "-m", "adc", "cache", "clear"], env=environ, check=True, capture_output=True)
    assert entries(cache_dir, "modules") == [] and entries(cache_dir, "runtime") == []
    off = subprocess.run([sys.executable, "-m", "adc", "cache", "info"], capture_output=True, text=True,
                         env={**environ, "ADC_CACHE": "0"}, check=True).stdout
    assert "off" in off


def callee_and_caller(scale: float, after: str = "") -> str:
    return (f"def callee(x: f64[N]) -> f64[N]:\n    return x * {scale}\n"
            f"def caller_of_a_cache_test(x: f64[N]) -> f64[N]:\n    return callee(x) + 1.0\n{after}")


def test_a_kernel_shares_object_code_only_where_all_it_calls_is_the_same(caplog):
    caplog.set_level(logging.INFO, logger="adc.compile")
    x = np.array([0.5, 2.0])

    def caller_cache_lookup(source: str, scale: float) -> str:
        caplog.clear()
        module = adc.compile(source, "shared.adc")
        np.testing.assert_allclose(module.caller_of_a_cache_test(x).numpy(), x * scale + 1.0)
        (lookup,) = [r.getMessage() for r in caplog.records
                     if r.getMessage().startswith("shared.adc: adc_kernel_caller_of_a_cache_test: cache")]
        return lookup.split()[3]

    assert caller_cache_lookup(callee_and_caller(2.0), 2.0) == "miss"
    assert caller_cache_lookup(callee_and_caller(3.0), 3.0) == "miss"     # only the callee differs
    unrelated = "def unrelated(x: f64[N]) -> f64[N]:\n    return x - 1.0\n"
    assert caller_cache_lookup(callee_and_caller(2.0, unrelated), 2.0) == "hit"


# the gradient of a kernel not compiled yet, in a fresh process (after its imports and setup)
SCALED_GRADIENT = """
m = adc.compile("def scaled(x: f64[N], w: f64[N]) -> f64:\\n    return sum(sin(x * w))\\n", "ahead.adc")
x, w = np.linspace(0, 1, 9), adc.Variable(np.linspace(1, 2, 9))

def gradient():
    with adc.GradientTape() as tape:
        y = m.scaled(x, w)
    return tape.gradient(y, w).numpy()
"""

COMPILE_AHEAD = """
import os, sys, threading
import numpy as np
import adc
from adc.codegen.toolchain.cache import Cache

case = sys.argv[1]
if case == "child fails":                   # the child's store fails: the parent compiles the kernel
    parent, put = os.getpid(), Cache.put
    Cache.put = lambda self, *a: (_ for _ in ()).throw(OSError("no room")) if os.getpid() != parent else put(self, *a)
if case == "another thread":                # a fork could copy a lock that thread holds: no child
    gate = threading.Event()
    threading.Thread(target=gate.wait).start()
if case == "one processor":                 # pinned (taskset, a cpuset): a child would share its core
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
""" + SCALED_GRADIENT + """
first = gradient()
np.testing.assert_allclose(first, x * np.cos(x * w.numpy()), rtol=1e-12)
try:
    os.wait()                               # the child, done: the next calls load its full code
except ChildProcessError:
    pass
assert np.array_equal(gradient(), first)    # the first tier's bits, which the full code keeps
if case == "another thread":
    gate.set()
"""


FIRST_TIER_SERVES = """
import os, sys, time
import numpy as np
import adc
from adc import compile_worker

gate, tiers = sys.argv[1], compile_worker.kernel_tiers

def held(*args):                            # the child's full code waits for the gate
    made = tiers(*args)
    yield next(made)
    deadline = time.monotonic() + 120
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
    yield from made

compile_worker.kernel_tiers = held
""" + SCALED_GRADIENT + """
try:
    first = gradient()
    print("MARK held", file=sys.stderr, flush=True)
    again = gradient()
    print("MARK open", file=sys.stderr, flush=True)
finally:
    open(gate, "w").close()
os.wait()
assert np.array_equal(first, again) and np.array_equal(first, gradient())
"""


def test_first_tier_code_serves_until_the_childs_full_code_is_done(cache_dir, tmp_path):
    """While the child compiles the full code (held here until a gate opens), both halves run their
    first-tier code, call after call; the first call after the child is done loads the full code."""
    result = subprocess.run([sys.executable, "-c", FIRST_TIER_SERVES, str(tmp_path / "gate")], capture_output=True,
                            text=True, env={**inherited(), "ADC_CACHE_DIR": str(cache_dir), "ADC_LOG": "compile",
                                            "ADC_COMPILE_AHEAD": "1"},
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    first, held, done = re.split("MARK held|MARK open", result.stderr)
    assert "adc_kernel_scaled_bwd: first tier from the child" in first, result.stderr
    assert "adc_kernel_scaled_fwd: first tier compiled here" in first, result.stderr
    assert not re.search(r"scaled_\w+: cache hit|scaled_fwd: codegen [0-9]", first + held), result.stderr
    for half in ("fwd", "bwd"):
        assert done.count(f"adc_kernel_scaled_{half}: cache hit") == 1, result.stderr


# per case: the backward's cache lookup once settled (or at once, where no first tier served),
# then how many times each half is compiled to first-tier and to full code (the child's and this
# process's)
@pytest.mark.parametrize("case, bwd_lookup, codegens", [
    ("alone", "hit", {"bwd: codegen (first tier) ": 1, "bwd: codegen ": 1, "fwd: codegen (first tier) ": 1, "fwd: codegen ": 1}),
    ("another thread", "miss", {"bwd: codegen (first tier) ": 0, "bwd: codegen ": 1, "fwd: codegen (first tier) ": 0, "fwd: codegen ": 1}),
    ("child fails", "miss", {"bwd: codegen (first tier) ": 1, "bwd: codegen ": 1, "fwd: codegen (first tier) ": 1, "fwd: codegen ": 1}),
    ("turned off", "miss", {"bwd: codegen (first tier) ": 0, "bwd: codegen ": 1, "fwd: codegen (first tier) ": 0, "fwd: codegen ": 1}),
    ("one processor", "miss", {"bwd: codegen (first tier) ": 0, "bwd: codegen ": 1, "fwd: codegen (first tier) ": 0, "fwd: codegen ": 1})])
def test_a_recorded_calls_backward_compiles_in_a_child_meanwhile(cache_dir, case, bwd_lookup, codegens):
    """The tape's first recorded call of a kernel forks a child compiling its backward's first-tier
    code, then the full code of both halves, while this process compiles the forward's first tier
    and runs it; the gradient runs the child's first tier, and once the child is done the next call
    loads the full code, which computes the same bits. Not while another Python thread runs, nor
    in a process pinned to one processor, nor with ADC_COMPILE_AHEAD=0; a child that fails leaves
    the compiles to this process."""
    switch = {"ADC_COMPILE_AHEAD": "0" if case == "turned off" else "1"}
    result = subprocess.run([sys.executable, "-c", COMPILE_AHEAD, case], capture_output=True, text=True,
                            env={**inherited(), "ADC_CACHE_DIR": str(cache_dir), "ADC_LOG": "compile", **switch},
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    (lookup,) = [line for line in result.stderr.splitlines() if "adc_kernel_scaled_bwd: cache" in line]
    assert lookup.split()[4] == bwd_lookup, result.stderr
    for stage, count in codegens.items():
        assert len(re.findall(f"scaled_{re.escape(stage)}[0-9]", result.stderr)) == count, (stage, result.stderr)
    # the child's first tier serves unless its full code was cached first (the child ran ahead)
    if "adc_kernel_scaled_bwd: first tier from the child" in result.stderr:
        assert case == "alone", result.stderr
