"""The runtime library built ahead: from `import adc`, on a machine whose cache lacks it.

A first-ever process (a new machine, a new adc) needs the runtime library (codegen/native/) before
its first kernel runs, and building it is most of that first call's wait. So `import adc` looks,
in well under a millisecond and without the driver or LLVM, for a marker this module leaves once
the library is in the cache; when it is missing, a child process (`python -c`, never a fork:
the importing process may have threads) builds the library into the cache while the program goes
on importing, elaborating and lowering its kernels on the other core. The driver, needing the
library, waits for whoever builds it (the cache's lock of namespace "runtime"), then finds it.

    import adc      # marker missing: `python -c "...build_ahead.build()"` started, holding the lock
    ...             # adc.compile_file(...), lowering: the child builds meanwhile
    m.f(x)          # the driver takes the lock (the child is done), and the library is a cache hit

The marker's name digests what the library's cache key is likely to change with and is cheap to
read: adc's version, the CPU as /proc/cpuinfo describes it, llvmlite's and the runtime library's
source files (their paths, sizes and modification times). It is a hint, not a key: a marker
missing wrongly costs one child that finds the library cached; one present wrongly (an edit of
another source file) leaves the build where it was, in the first call. `ADC_BUILD_AHEAD=0` turns
it off; so do a cache turned off and `ADC_CPU` (a target the marker does not describe).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from adc.abi import ADC_VERSION
from adc.codegen.toolchain.cache import Cache

NAMESPACE = "runtime"       # the library's namespace in the cache, and the lock its builders share
MARKERS = "ahead"           # the cache's folder of markers: one empty entry per library built ahead
SWITCH = "ADC_BUILD_AHEAD"
_RUNTIME_SOURCES = ("abi.py", "codegen/native/gemm.py", "codegen/native/parallel.py", "codegen/native/pool.py",
                    "codegen/native/runtime_library.py", "codegen/lowering/loops.py", "codegen/lowering/summation.py")


_child: subprocess.Popen | None = None     # the builder this process started: kept, so it is reaped


def start() -> subprocess.Popen | None:
    """Start the child that builds the runtime library when this machine's cache has no marker of
    it and no other process builds it; the child holds the cache's lock until it is done."""
    global _child
    cache = None if os.environ.get(SWITCH, "1").strip() == "0" or os.environ.get("ADC_CPU") else _cache()
    marker = _marker() if cache is not None else None
    if marker is None or cache.path(MARKERS, marker).exists():
        return None
    lock = cache.try_lock(NAMESPACE)
    if lock is None:            # another process builds it (or its driver does): nothing to add
        return None
    try:
        _child = subprocess.Popen(
            [sys.executable, "-c", f"from adc import build_ahead; build_ahead.build({lock})"],
            env={**os.environ, SWITCH: "0"}, pass_fds=(lock,), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, close_fds=True)
    except OSError:
        return None
    finally:
        os.close(lock)      # the child's copy holds the lock now
    return _child


def build(lock: int) -> None:
    """The child: the runtime library into the cache, under the lock its parent handed over, then
    the marker. Quiet on failure: the driver builds it again where it is needed, and reports."""
    try:
        from adc.driver.runtime_library import build_shared_runtime

        build_shared_runtime(locked=True)
        cache, marker = _cache(), _marker()
        if cache is not None and marker is not None:
            cache.put(MARKERS, marker, b"")
    except Exception:       # noqa: BLE001 (see the docstring)
        sys.exit(1)
    finally:
        os.close(lock)


def _cache() -> Cache | None:
    try:
        return Cache.from_environment()
    except ValueError:
        return None


def _marker() -> str | None:
    """The marker's name (see the module docstring), or None where the machine cannot be described."""
    import importlib.util

    package = os.path.dirname(os.path.abspath(__file__))
    try:
        cpu = [line for line in open("/proc/cpuinfo", encoding="utf-8").read().split("\n\n")[0].splitlines()
               if not line.startswith(("processor", "cpu MHz"))]
        spec = importlib.util.find_spec("llvmlite")
        files = [spec.origin] + [os.path.join(package, name) for name in _RUNTIME_SOURCES]
        stats = [f"{path} {os.stat(path).st_size} {os.stat(path).st_mtime_ns}" for path in files]
    except (OSError, AttributeError, TypeError, ValueError):
        return None
    return hashlib.sha256("\n".join([ADC_VERSION, os.uname().machine, *cpu, *stats]).encode()).hexdigest()
