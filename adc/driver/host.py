"""This machine: the JIT's target and what compiles for it, which every object-code key holds.

LLVM answers both (loading it takes ~35 ms), once per machine: the answers are kept in the cache
under what they depend on, read without LLVM (`_machine_identity`), so a process whose code is
all cached never loads LLVM. `ADC_CPU` picks another CPU for the JIT, `ADC_CHECK_BOUNDS` its
bounds-checked build; `require_llvm` asks whether llvmlite is installed, without importing it.

    host_target()                       # Target(triple="x86_64-unknown-linux-gnu", cpu="znver5", pic=True, ...)
    cache_key(target, "kernel", ...)    # the key of object code compiled for `target`
    usable_processors()                 # 2: the processors this process may run on
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from adc.driver.cache_keys import digest, fingerprint, ir_key, open_cache

if TYPE_CHECKING:       # imported where a target is made (see the module docstring)
    from adc.codegen.toolchain.target import Target


def require_llvm() -> None:
    """ImportError when llvmlite, which makes object code, is not installed: for callers that can do
    without compiling (a shared object's embedded gradients) to ask before anything is derived.
    It is looked up, not imported: a process whose code is all cached never loads it."""
    import importlib.util

    if importlib.util.find_spec("llvmlite") is None:
        raise ImportError("No module named 'llvmlite'")


@functools.lru_cache(maxsize=None)
def llvm_versions() -> str:
    """What else compiles object code: llvmlite's and LLVM's versions."""
    import llvmlite
    import llvmlite.binding as llvm

    return f"llvmlite {llvmlite.__version__} llvm {'.'.join(map(str, llvm.llvm_version_info))}"


def usable_processors() -> int:
    """The processors this process may run on: its affinity mask, which taskset, cpusets and batch
    schedulers narrow below the machine's (the runtime library's thread pool counts the same);
    os.cpu_count() where the platform has no mask."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cache_key(target: Target, *parts: str) -> str:
    """The key of object code compiled from `parts` for `target`."""
    return digest(f"{fingerprint()}\0{_host().compiler}\0{target.key()}", parts)


class _Host(NamedTuple):
    target: Target          # this machine, for the JIT
    compiler: str           # llvm_versions(): what compiles for it


@functools.cache
def _host() -> _Host:
    """This machine's JIT target and what compiles for it, remembered in the cache under
    `_machine_identity` (see the module docstring). The JIT's code is position-independent: the
    object code the JIT linker loads is the code the cache links into a shared object."""
    from adc.codegen.toolchain.target import Target

    cache, identity = open_cache(), _machine_identity()
    key = ir_key("host", identity) if identity else None
    remembered = cache.get("host", key) if cache and key else None
    if remembered is not None:
        fields = json.loads(remembered)
        return _Host(Target(**fields["target"], pic=True), fields["compiler"])
    host = _Host(Target.host(pic=True), llvm_versions())
    if cache and key:
        target = {"triple": host.target.triple, "cpu": host.target.cpu, "features": host.target.features}
        cache.put("host", key, json.dumps({"target": target, "compiler": host.compiler}).encode())
    return host


def _machine_identity() -> str | None:
    """What LLVM's answers about this machine depend on, read without LLVM: the CPU as the kernel
    describes it (/proc/cpuinfo's first processor, but for its clock) and llvmlite's installation
    (its package file's path, size and modification time, as Python tells sources apart); None
    where either is unknown, and LLVM is asked."""
    import importlib.util

    try:
        cpu = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
        spec = importlib.util.find_spec("llvmlite")
        package = os.stat(spec.origin) if spec and spec.origin else None
    except OSError:
        return None
    if package is None:
        return None
    described = [line for line in cpu.splitlines() if not line.startswith(("processor", "cpu MHz"))]
    return "\n".join([os.uname().machine, spec.origin, f"{package.st_size} {package.st_mtime_ns}", *described])


def host_target() -> Target:
    """The JIT's target: this machine's (see _host), or the CPU `ADC_CPU` names as `adc compile
    --cpu` takes it (an x86-64 level such as x86-64-v3, or an LLVM CPU name), so that a tool which
    cannot decode this machine's widest instructions (valgrind 3.19 and AVX-512) runs the JIT's code."""
    cpu = os.environ.get("ADC_CPU", "").strip()
    return _host().target if cpu in ("", "native") else _target_for_cpu(cpu)


@functools.cache
def _target_for_cpu(cpu: str) -> Target:
    from adc.codegen.toolchain.target import Target

    try:
        return Target.for_cpu(cpu, pic=True)
    except ValueError as error:
        raise ValueError(f"ADC_CPU={cpu}: {error}") from None


def is_this_machine(target: Target) -> bool:
    """Whether `target` is this machine's own CPU (not one ADC_CPU or --cpu names): code built
    for it may be timed here for choices that depend on the machine (gemm_tuning.py)."""
    native = _host().target
    return (target.triple, target.cpu, target.features) == (native.triple, native.cpu, native.features)


def jit_target(check_bounds: bool = False) -> Target:
    """The JIT's target: the host's, bounds-checked when asked, or for every JIT compile of the
    process under ADC_CHECK_BOUNDS=1. Two test hooks: ADC_LINALG_BLOCK=n sends every matrix to the
    runtime library's blocked factorizations in blocks of order n (Target.linalg_block), and
    ADC_FIRST_TIER=1 compiles every kernel to first-tier code only (Target.first_tier)."""
    wanted = check_bounds or os.environ.get("ADC_CHECK_BOUNDS", "0") not in ("", "0")
    target = checked(host_target()) if wanted else host_target()
    block = int(os.environ.get("ADC_LINALG_BLOCK", "0") or 0)
    if block:
        import dataclasses

        target = dataclasses.replace(target, linalg_block=block)
    if os.environ.get("ADC_FIRST_TIER", "0") not in ("", "0"):
        target = target.first_tier
    return target


def checked(target: Target) -> Target:
    """`target`'s bounds-checked build (codegen/bounds.py), with ADC_BOUNDS_MISINDEX, the test hook
    of checked builds (bounds.MISINDEX_KINDS: stores into such buffers go one element further)."""
    import dataclasses

    return dataclasses.replace(target, check_bounds=True, misindex=os.environ.get("ADC_BOUNDS_MISINDEX", ""))
