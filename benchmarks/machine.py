"""The machine a benchmark run measured: what its figures depend on, printed at the head of the run.

A gemm's speed depends on the CPU's vector width and FMA units, a peer's on the BLAS it was built
with; figures from two machines compare only next to these lines (docs/performance.md keeps them
per CPU family).

    for line in describe(): print(line)
    #   cpu: AMD EPYC (family 26 model 2), 2 cores; AVX2 yes, AVX-512F yes, FMA yes; LLVM host CPU znver5
    #   numpy 2.4.6 BLAS: scipy-openblas 0.3.31 (OpenBLAS ... DYNAMIC_ARCH Haswell MAX_THREADS=64)
    #   torch 2.14 BLAS: mkl; CPU capability AVX512
"""
from __future__ import annotations

import os
import re
from importlib.util import find_spec

FLAGS = {"avx2": "AVX2", "avx512f": "AVX-512F", "fma": "FMA"}      # /proc/cpuinfo flag -> name


def cpu_info() -> dict[str, str]:
    """The first processor of /proc/cpuinfo as fields (empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            first = f.read().split("\n\n")[0]
    except OSError:
        return {}
    return {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in first.splitlines())}


def cpu_model() -> str:
    return cpu_info().get("model name", "unknown CPU")


def describe() -> list[str]:
    """One line for the CPU, then one per installed peer with the BLAS it calls."""
    info = cpu_info()
    flags = set(info.get("flags", "").split())
    features = ", ".join(f"{name} {'yes' if flag in flags else 'no'}" for flag, name in FLAGS.items())
    family = f" (family {info.get('cpu family', '?')} model {info.get('model', '?')})" if info else ""
    lines = [f"cpu: {cpu_model()}{family}, {cores()}; {features}; LLVM host CPU {llvm_host_cpu()}"]
    return lines + [f"numpy {numpy_blas()}"] + [line for line in (threadpools(), torch_blas()) if line]


def cores() -> str:
    """The machine's processors, and those this process may run on where fewer (taskset, a
    cpuset): adc's threads default to the latter, so a pinned run's figures say so."""
    from adc.driver.host import usable_processors

    usable = usable_processors()
    return f"{os.cpu_count()} cores" + (f", {usable} usable by this process" if usable != os.cpu_count() else "")


def llvm_host_cpu() -> str:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    return llvm.get_host_cpu_name()


def numpy_blas() -> str:
    import numpy as np

    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except (TypeError, KeyError):       # NumPy before 1.26: no dicts
        return f"{np.__version__} BLAS: unknown"
    configuration = blas.get("openblas configuration", "")
    return f"{np.__version__} BLAS: {blas.get('name')} {blas.get('version')}" + \
           (f" ({configuration.strip()})" if configuration else "")


def threadpools() -> str | None:
    """threadpoolctl's view of the BLAS libraries loaded so far, where it is installed."""
    if find_spec("threadpoolctl") is None:
        return None
    from threadpoolctl import threadpool_info

    pools = [f"{p.get('internal_api')} {p.get('version')} {p.get('architecture', '')} {p.get('num_threads')} threads"
             for p in threadpool_info()]
    return f"threadpoolctl: {'; '.join(pools) or 'none loaded'}"


def torch_blas() -> str | None:
    if find_spec("torch") is None:
        return None
    import torch

    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    capability = re.search(r"CPU capability usage: (\w+)", config)
    return (f"torch {torch.__version__} BLAS: {blas.group(1) if blas else 'unknown'}; "
            f"CPU capability {capability.group(1) if capability else 'unknown'}; {torch.get_num_threads()} threads")
