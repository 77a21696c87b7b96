"""adc.Tensor: an immutable, NumPy-backed array returned by kernels.

A Tensor owns a read-only NumPy array, so values recorded by the runtime cannot
change behind its back; `numpy()` returns that array (read-only), and
`np.asarray(t)` works through `__array__`.

    t = m.sigmoid_shift(np.zeros(3, np.float32), 0.0)
    t.shape, t.dtype, t.numpy()     # (3,), float32, array([0.5, 0.5, 0.5], dtype=float32)
"""
from __future__ import annotations

import numpy as np


class Tensor:
    __slots__ = ("_array",)
    __array_priority__ = 100

    def __init__(self, value, dtype=None):
        array = np.array(value, dtype=dtype, copy=True) if not isinstance(value, Tensor) else value._array
        if dtype is not None and array.dtype != np.dtype(dtype):
            array = array.astype(dtype)
        array.flags.writeable = False
        self._array = array

    @classmethod
    def _wrap(cls, array: np.ndarray) -> "Tensor":
        """Adopt a freshly allocated array without copying it."""
        tensor = cls.__new__(cls)
        array.flags.writeable = False
        tensor._array = array
        return tensor

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

    def __len__(self) -> int:
        return len(self._array)

    def __float__(self) -> float:
        return float(self._array)

    def __int__(self) -> int:
        return int(self._array)

    def __bool__(self) -> bool:
        return bool(self._array)

    def __repr__(self) -> str:
        body = np.array2string(self._array, separator=", ")
        return f"adc.Tensor({body}, shape={self.shape}, dtype={self.dtype})"
