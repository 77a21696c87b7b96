"""The types of kernels written in Python files: `f32["B, N"]`, `f32[B, N]` with dimensions from
`adc.dims("B N")`, and `f32` alone for a scalar (`f64`, `i32`, `i64` alike).

They evaluate on any Python — the shapes are strings, or dimension objects — and each prints as
the adc type it stands for, which is what @adc.kernel writes into the source it compiles
(adc/python_kernels.py). A dimension is a name or an expression in a string (`"N-1"`), a
non-negative int, or a dimension object; anything else is refused where Python evaluates it.

    from adc import f32, i64
    B, N = adc.dims("B N")
    str(f32[B, N]), str(i64["B"]), str(f32)     # 'f32[B, N]', 'i64[B]', 'f32'
"""
from __future__ import annotations

import operator


class Dim:
    """A dimension symbol: `f32[N]` prints as `f32[N]`."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        if not name.isidentifier():
            raise ValueError(f"adc.dims: {name!r} is not a name (a dimension is a name such as N or batch)")
        self.name = name

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"adc.dims({self.name!r})"


def dims(names: str) -> Dim | tuple[Dim, ...]:
    """Dimension symbols from names separated by spaces or commas: `B, N = adc.dims("B N")`;
    one name gives one Dim."""
    parts = names.replace(",", " ").split()
    if not parts:
        raise ValueError("adc.dims: no names given (e.g. adc.dims(\"B N\"))")
    found = tuple(Dim(p) for p in parts)
    return found[0] if len(found) == 1 else found


class TensorType:
    """`dtype[shape]`: an adc tensor type, printed in adc's syntax."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype: str, shape: tuple[str, ...]):
        self.dtype, self.shape = dtype, shape

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(self.shape)}]"

    __repr__ = __str__


class DType:
    """An element type (`f32`): a scalar's annotation, subscripted for a tensor's."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __getitem__(self, entries) -> TensorType:
        entries = entries if isinstance(entries, tuple) else (entries,)
        return TensorType(self.name, tuple(self._dimension(e) for e in entries))

    def _dimension(self, entry) -> str:
        if isinstance(entry, (str, Dim)):
            return str(entry).strip()
        if not isinstance(entry, bool):
            try:
                size = operator.index(entry)
            except TypeError:
                pass
            else:
                if size >= 0:
                    return str(size)
        raise TypeError(f"{self.name}[...]: a dimension is a name or expression in a string ('B', 'N-1'), "
                        f"a non-negative int, or a dimension from adc.dims; got {entry!r}")

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


f32, f64, i32, i64 = DType("f32"), DType("f64"), DType("i32"), DType("i64")


def adc_type(annotation) -> str | None:
    """The adc type text of an annotation: a DType or TensorType, or (a result's) a tuple of them;
    None for anything else."""
    if isinstance(annotation, (DType, TensorType)):
        return str(annotation)
    if isinstance(annotation, tuple) and annotation and all(isinstance(a, (DType, TensorType)) for a in annotation):
        return f"({', '.join(map(str, annotation))})"
    return None
