"""DLPack in: any CPU array that exports `__dlpack__` (PyTorch, JAX, CuPy's host arrays, ...) is a
kernel argument, read where it lies.

A kernel's argument check (kernel.py, `Kernel._convert`) takes NumPy arrays and Tensors as they
are; anything else with `__dlpack__` comes here and leaves as a NumPy array viewing the producer's
memory (`np.from_dlpack`: no copy), which the check then treats like any array — its dtype and
rank compared with the parameter's, made C-contiguous only when it is strided. An array on
another device is refused before any copy, naming the parameter: adc kernels run on the CPU.
(DLPack out is `Tensor.__dlpack__`, adc/runtime/tensor.py.)

    m.sigmoid_shift(torch.arange(4.0), 0.5)      # the tensor's memory, read in place
"""
from __future__ import annotations

import numpy as np

CPU = 1     # DLDeviceType kDLCPU
# The DLDeviceType codes (dlpack.h) a refusal names.
DEVICE_NAMES = {2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
                10: "ROCm", 11: "ROCm host (pinned)", 13: "CUDA managed", 14: "oneAPI", 15: "WebGPU",
                16: "Hexagon", 17: "MAIA"}


def exports_dlpack(value) -> bool:
    return hasattr(type(value), "__dlpack__")


def from_dlpack(value, where: str) -> np.ndarray:
    """`value`'s data as a NumPy array sharing its memory; TypeError beginning with `where` (the
    kernel and parameter) when it lives on another device or its producer refuses to export it."""
    device = getattr(value, "__dlpack_device__", None)
    if device is not None:
        kind, number = device()
        if kind != CPU:
            name = DEVICE_NAMES.get(int(kind), f"DLPack device type {int(kind)}")
            raise TypeError(f"{where} is on a {name} device ({number}); adc kernels run on the CPU: "
                            f"copy it to host memory first (in PyTorch `.cpu()`, in JAX `jax.device_get`)")
    try:
        return np.from_dlpack(value)
    except (TypeError, ValueError, RuntimeError, BufferError) as err:
        raise TypeError(f"{where}: its DLPack export failed: {err}") from None
