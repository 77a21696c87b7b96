"""Find an ILP64 CBLAS `?gemm` to install as the provider of generated matrix products.

Generated modules compute `matmul` through `adc_gemm_<dtype>` (gemm.py), which
calls the function installed with `adc_set_gemm(sgemm, dgemm)` when there is
one. The runtime installs the OpenBLAS that NumPy already loaded, found here:
the `numpy.libs` folder next to NumPy (manylinux wheels), NumPy's `.dylibs`
(macOS wheels), or the `scipy_openblas64` package when installed.

Why a provider, measured (tests/codegen/test_gemm.py harness, best of 20, f32,
AMD Zen 5 with AVX-512, 2 cores; GFLOP/s):

    A[M,K] @ B[K,N]          built-in (1 thread)   OpenBLAS, 2 threads   OpenBLAS, 1 thread
    256x784 @ 784x512        255                   265                   136
    256x512 @ 512x10          93                   121                    70

The built-in kernel (gemm.py) is near the single-core FMA peak on large
products, twice NumPy's OpenBLAS on one thread; the provider adds the second
core through OpenBLAS's thread pool and is ahead on thin products such as an
MLP's output layer. Installing it also makes adc agree with NumPy's rounding.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import importlib.util
import os

import numpy as np

# ILP64 builds suffix the CBLAS names with 64_ (scipy-openblas also prefixes scipy_).
SYMBOL_PAIRS = (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_"),
                ("cblas_sgemm64_", "cblas_dgemm64_"))
LIBRARY_PATTERNS = ("libscipy_openblas64_*", "libopenblas64_*", "libopenblas*64*")

# The CDLL objects behind returned addresses: keeping them referenced keeps them loaded.
_loaded: list[ctypes.CDLL] = []


@functools.cache
def find_cblas_gemm() -> tuple[int, int] | None:
    """Addresses of an ILP64 `cblas_sgemm` and `cblas_dgemm`, or None when none is found."""
    for path in _candidate_libraries():
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        addresses = _gemm_addresses(library)
        if addresses is not None:
            _loaded.append(library)
            return addresses
    return None


def _candidate_libraries() -> list[str]:
    """Shared libraries that may hold an ILP64 OpenBLAS, NumPy's own first."""
    numpy_dir = os.path.dirname(np.__file__)
    folders = [numpy_dir + ".libs", os.path.join(numpy_dir, ".dylibs")]
    spec = importlib.util.find_spec("scipy_openblas64")
    if spec is not None and spec.submodule_search_locations:
        folders += [os.path.join(location, "lib") for location in spec.submodule_search_locations]
    return sorted({path for folder in folders for pattern in LIBRARY_PATTERNS
                   for path in glob.glob(os.path.join(folder, pattern))})


def _gemm_addresses(library: ctypes.CDLL) -> tuple[int, int] | None:
    for sgemm, dgemm in SYMBOL_PAIRS:
        try:
            return _address(library, sgemm), _address(library, dgemm)
        except AttributeError:
            continue
    return None


def _address(library: ctypes.CDLL, symbol: str) -> int:
    return ctypes.cast(getattr(library, symbol), ctypes.c_void_p).value
