"""Kernel: a callable compiled kernel that checks its arguments before native code runs.

A call binds the arguments to the signature, converts Python scalars and lists
to the parameter's dtype (NumPy arrays and Tensors must already have it), binds
the dimension symbols from the arguments' shapes, checks the shape constraints,
allocates the results and calls the native function through the C ABI
(`int32_t adc_kernel_<name>(const int64_t *dims, void **inputs, void **outputs)`).
Every mistake is a TypeError or ValueError naming the parameter and dimension.

    m.dense_relu(x, w, b)   # ValueError: dense_relu: parameter 'w' dimension 0 (I) is 5,
                            #             but I = 4 from parameter 'x'
"""
from __future__ import annotations

import ctypes
import inspect
from typing import Any

import numpy as np

from adc.abi import KernelSignature
from adc.ir.types import TensorType, evaluate_dim
from adc.runtime.tensor import Tensor

_KERNEL_CFUNC = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_PYTHON_VALUES = (bool, int, float, list, tuple)


class Kernel:
    """One kernel of a compiled module; call it like a Python function."""

    def __init__(self, signature: KernelSignature, address: int, owner: Any):
        self.signature = signature
        self._owner = owner  # keeps the native library alive as long as the kernel
        self._cfunc = _KERNEL_CFUNC(address)
        self._np_dtypes = tuple(t.dtype.numpy for t in signature.param_types)
        self.__name__ = signature.name
        self.__doc__ = f"adc kernel {signature}"
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str(t))
             for n, t in zip(signature.param_names, signature.param_types)],
            return_annotation=", ".join(str(t) for t in signature.result_types))

    def __repr__(self) -> str:
        return f"<adc kernel {self.signature}>"

    def __call__(self, *args, **kwargs):
        try:
            bound = self.__signature__.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{self.signature.name}(): {err}") from None
        arrays = [self._convert(name, value, i) for i, (name, value) in enumerate(bound.arguments.items())]
        env = self._bind_dims(arrays)
        results = self._run(arrays, env)
        wrapped = tuple(Tensor._wrap(r) for r in results)
        return wrapped[0] if len(wrapped) == 1 else wrapped

    def _where(self, name: str) -> str:
        return f"{self.signature.name}: parameter '{name}'"

    def _convert(self, name: str, value: Any, index: int) -> np.ndarray:
        want = self._np_dtypes[index]
        ptype = self.signature.param_types[index]
        if isinstance(value, Tensor):
            array = value.numpy()
        elif isinstance(value, (np.ndarray, np.generic)):
            array = np.asarray(value)
        elif isinstance(value, _PYTHON_VALUES):
            array = np.asarray(value)
            if array.dtype.kind in "biuf" and np.can_cast(array.dtype, want, "same_kind"):
                array = array.astype(want)
        else:
            raise TypeError(f"{self._where(name)} expects an array of type {ptype}, got {type(value).__name__}")
        if array.dtype != want:
            raise TypeError(f"{self._where(name)} expects dtype {ptype.dtype} ({want}), got {array.dtype}")
        if array.ndim != ptype.rank:
            raise ValueError(f"{self._where(name)} expects rank {ptype.rank} ({ptype}), "
                             f"got an array of shape {array.shape}")
        return np.ascontiguousarray(array)

    def _bind_dims(self, arrays: list[np.ndarray]) -> dict[str, int]:
        env: dict[str, int] = {}
        origin: dict[str, str] = {}
        sig = self.signature
        for name, ptype, array in zip(sig.param_names, sig.param_types, arrays):
            for axis, (dim, size) in enumerate(zip(ptype.shape, array.shape)):
                if isinstance(dim, int):
                    if size != dim:
                        raise ValueError(f"{self._where(name)} dimension {axis} must be {dim}, got {size}")
                    continue
                symbol = str(dim)
                if symbol in env and env[symbol] != size:
                    raise ValueError(f"{self._where(name)} dimension {axis} ({symbol}) is {size}, "
                                     f"but {symbol} = {env[symbol]} from parameter '{origin[symbol]}'")
                env[symbol] = size
                origin.setdefault(symbol, name)
        for constraint in sig.constraints:
            if evaluate_dim(constraint, env) < 0:
                sizes = ", ".join(f"{s} = {env[s]}" for s in sorted(constraint.symbols))
                raise ValueError(f"{sig.name}: the shapes need {constraint} >= 0, but {sizes}")
        return env

    def _run(self, arrays: list[np.ndarray], env: dict[str, int]) -> list[np.ndarray]:
        sig = self.signature
        results = [np.empty(_shape(t, env), t.dtype.numpy) for t in sig.result_types]
        dims = (ctypes.c_int64 * max(1, len(sig.dims)))(*(env[s] for s in sig.dims))
        inputs = (ctypes.c_void_p * max(1, len(arrays)))(*(a.ctypes.data for a in arrays))
        outputs = (ctypes.c_void_p * max(1, len(results)))(*(r.ctypes.data for r in results))
        status = self._cfunc(ctypes.addressof(dims), ctypes.addressof(inputs), ctypes.addressof(outputs))
        if status != 0:
            raise MemoryError(f"{sig.name}: native code could not allocate its temporaries")
        return results


def _shape(t: TensorType, env: dict[str, int]) -> tuple[int, ...]:
    return tuple(evaluate_dim(d, env) for d in t.shape)
