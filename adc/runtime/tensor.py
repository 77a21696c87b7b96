"""adc.Tensor: an immutable, NumPy-backed array returned by kernels and eager ops.

A Tensor owns a read-only, C-contiguous NumPy array, so values recorded by the
runtime cannot change behind its back; `numpy()` returns that array (read-only),
and `np.asarray(t)` works through `__array__`, `np.from_dlpack(t)` (torch.from_dlpack, ...)
through `__dlpack__`, without a copy. Its Python operators (`+ - * / **
@`, comparisons) are the eager ops of adc/runtime/ops.py, installed there.

`constant(value, dtype=None)` follows TensorFlow's defaults: Python floats become
f32, Python ints i32, NumPy arrays keep their dtype.

    t = adc.constant([1.0, 2.0])
    t.shape, t.dtype, t.numpy()     # (2,), float32, array([1., 2.], dtype=float32)
"""
from __future__ import annotations

import ctypes

import numpy as np

from adc.ir.types import DType

_PYTHON_DEFAULTS = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32)}
_DTYPES = frozenset(np.dtype(n) for n in ("float32", "float64", "int32", "int64", "bool"))
_ADC_NAMES = {d.value: d.numpy for d in DType}
_new = object.__new__


def numpy_dtype(dtype) -> np.dtype:
    """The NumPy dtype of adc's names ("f32", "i64", ...) or of anything NumPy reads as one."""
    return _ADC_NAMES[dtype] if isinstance(dtype, str) and dtype in _ADC_NAMES else np.dtype(dtype)


class Tensor:
    __slots__ = ("_array", "_ptr")
    __array_priority__ = 100

    def __init__(self, value, dtype=None):
        dtype = None if dtype is None else numpy_dtype(dtype)
        array = value._array if isinstance(value, Tensor) else np.array(value, dtype=dtype, order="C")
        if dtype is not None and array.dtype != dtype:
            array = array.astype(dtype)
        array.setflags(False)
        self._array = array
        self._ptr = 0

    @classmethod
    def _wrap(cls, array: np.ndarray, ptr: int = 0) -> "Tensor":
        """Adopt a freshly allocated array without copying it; `ptr` is its address if known."""
        tensor = _new(cls)
        array.setflags(False)       # write=False, positional: NumPy parses keywords 4x slower
        tensor._array = array
        tensor._ptr = ptr
        return tensor

    @classmethod
    def view_of(cls, array: np.ndarray, address: int) -> "Tensor":
        """A Tensor over a C-contiguous array's memory at `address`, not copied: for a caller that
        keeps that memory unchanged while the Tensor lives (a framework bridge's argument for one
        kernel call, adc/torch.py). A kernel takes it on its fastest path, checks included."""
        return cls._wrap(array, address)

    def _pointer(self) -> int:
        """The address of the data, made C-contiguous first (a Tensor never changes, so this is safe)."""
        if not self._array.flags.c_contiguous:
            self._array = np.ascontiguousarray(self._array)
            self._array.setflags(False)
        self._ptr = self._array.ctypes.data
        return self._ptr

    def numpy(self) -> np.ndarray:
        return self._array

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def size(self) -> int:
        return self._array.size

    def __array__(self, dtype=None, copy=None):
        if dtype is not None and np.dtype(dtype) != self._array.dtype:
            return self._array.astype(dtype)
        return self._array.copy() if copy else self._array

    def __dlpack__(self, **kwargs):
        """DLPack out, zero copy: its NumPy array's export, read-only (a consumer speaking DLPack 1.0,
        as NumPy 2 does, is told so; NumPy refuses an older one rather than hand out writable memory)."""
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._array.__dlpack_device__()

    def __len__(self) -> int:
        return len(self._array)

    def item(self):
        """The one element as a Python number (ValueError unless the size is 1, as NumPy)."""
        return self._array.item()

    def tolist(self):
        return self._array.tolist()

    def __float__(self) -> float:
        return float(self._array)

    def __int__(self) -> int:
        return int(self._array)

    def __bool__(self) -> bool:
        return bool(self._array)

    def __str__(self) -> str:
        return str(self._array)

    def __repr__(self) -> str:
        body = np.array2string(self._array, separator=", ")
        return f"adc.Tensor({body}, shape={self.shape}, dtype={self.dtype})"


def as_array(value, dtype=None) -> np.ndarray:
    """A NumPy array of `value` with TensorFlow's default dtypes for Python values (f32, i32)."""
    if isinstance(value, Tensor):
        array = value._array
    elif hasattr(value, "_value") and isinstance(value._value, Tensor):   # a Variable
        array = value._value._array
    else:
        array = np.asarray(value)
        if dtype is None and not isinstance(value, (np.ndarray, np.generic)):
            array = array.astype(_PYTHON_DEFAULTS.get(array.dtype, array.dtype), copy=False)
    if dtype is not None and array.dtype != numpy_dtype(dtype):
        array = _cast(array, numpy_dtype(dtype))
    if array.dtype not in _DTYPES:
        raise TypeError(f"adc tensors hold float32, float64, int32, int64 or bool, not {array.dtype}")
    return array


def _cast(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if not np.can_cast(array.dtype, dtype, "same_kind") and not np.array_equal(array, array.astype(dtype)):
        raise TypeError(f"cannot convert a {array.dtype} value to {dtype} without changing it")
    return array.astype(dtype)


def constant(value, dtype=None) -> Tensor:
    """A Tensor holding (a copy of) `value`; Python floats are f32 and ints i32 unless `dtype` says."""
    array = np.array(as_array(value, dtype), order="C", copy=True)
    return Tensor._wrap(array, data_address(array))


def data_address(array: np.ndarray) -> int:
    """The data address of a fresh (writable, C-contiguous) array, 0 when it is empty;
    ctypes' buffer path is several times faster than `array.ctypes.data`."""
    return ctypes.addressof(ctypes.c_char.from_buffer(array)) if array.nbytes else 0
