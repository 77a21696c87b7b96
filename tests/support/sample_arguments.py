"""The samples' kernels (samples/kernels.adc, samples/nn.adc) and arguments that fit their
signatures, for the framework bridges' tests: every dimension symbol a small size of its own
(at least 3), integer parameters (labels, tokens) in [0, 3), so every index is in bounds."""
from __future__ import annotations

import numpy as np

import adc
from tests.support.repository import SAMPLES

SIZES = {"B": 4, "I": 3, "O": 3, "H": 5, "N": 6, "C": 3, "V": 4, "D": 3, "T": 3, "S": 4, "E": 3}
FILES = ("kernels.adc", "nn.adc")


def sample_modules(dtype: str = "f32") -> dict[str, adc.Module]:
    """The sample files compiled, their float types made `dtype` (f64: what gradcheck needs)."""
    return {name: adc.compile((SAMPLES / name).read_text().replace("f32", dtype), name) for name in FILES}


def sample_kernels(dtype: str = "f32") -> dict[str, adc.runtime.kernel.Kernel]:
    return {kernel: getattr(module, kernel) for module in sample_modules(dtype).values() for kernel in module.kernels}


def arguments(kernel, seed: int = 0) -> list[np.ndarray]:
    """One argument per parameter of `kernel`, NumPy arrays of its dtypes and shapes."""
    rng = np.random.default_rng(seed)
    made = []
    for t in kernel.signature.param_types:
        shape = tuple(d if isinstance(d, int) else SIZES[str(d)] for d in t.shape)
        dtype = t.dtype.numpy
        made.append(rng.standard_normal(shape).astype(dtype) if dtype.kind == "f" else rng.integers(0, 3, shape, dtype))
    return made
