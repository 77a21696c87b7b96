"""adc.Variable: mutable state (model parameters) usable wherever a Tensor is.

A Variable holds one immutable Tensor, its current value; `assign`, `assign_add`
and `assign_sub` replace that Tensor (shape and dtype never change), so a value
recorded on a tape stays what it was. Passed to a kernel or an eager op, a
Variable is read: the tape sees the Variable itself (and, when the tape has
`watch_accessed_variables=True` and the Variable is trainable, watches it).

    v = adc.Variable(2.0)          # f32, like tf.Variable
    v.assign_add(1.0); v.numpy()   # 3.0
"""
from __future__ import annotations

import numpy as np

from adc.runtime.tensor import Tensor, as_array, constant

class Variable:
    __slots__ = ("_value", "trainable", "name", "__weakref__")
    __array_priority__ = 100

    def __init__(self, initial_value, trainable: bool = True, name: str | None = None, dtype=None):
        self._value = constant(initial_value, dtype)
        self.trainable = bool(trainable)
        self.name = name or "Variable"

    def value(self) -> Tensor:
        """The current value, a Tensor (not recorded: reading through ops is)."""
        return self._value

    read_value = value

    def numpy(self) -> np.ndarray:
        return self._value._array

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return self._value.size

    def assign(self, value) -> "Variable":
        self._value = self._checked(as_array(value, self.dtype), "assign")
        return self

    def assign_add(self, delta) -> "Variable":
        return self._update(delta, np.add, "assign_add")

    def assign_sub(self, delta) -> "Variable":
        return self._update(delta, np.subtract, "assign_sub")

    def _update(self, delta, ufunc, what: str) -> "Variable":
        self._value = self._checked(ufunc(self._value._array, as_array(delta, self.dtype)), what)
        return self

    def _checked(self, array: np.ndarray, what: str) -> Tensor:
        if array.shape != self.shape:
            raise ValueError(f"{what}: variable '{self.name}' has shape {self.shape}, "
                             f"the new value has shape {array.shape}")
        return constant(array, self.dtype)

    def __array__(self, dtype=None, copy=None):
        return self._value.__array__(dtype, copy)

    def __len__(self) -> int:
        return len(self._value)

    def item(self):
        return self._value.item()

    def tolist(self):
        return self._value.tolist()

    def __float__(self) -> float:
        return float(self._value)

    def __int__(self) -> int:
        return int(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __str__(self) -> str:
        return str(self._value)

    def __repr__(self) -> str:
        return f"<adc.Variable '{self.name}' shape={self.shape} dtype={self.dtype}, numpy={self.numpy()}>"
