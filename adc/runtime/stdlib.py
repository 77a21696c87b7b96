"""The eager ops' kernels: adc-language source written per signature, compiled once per process.

An eager op (adc/runtime/ops.py) asks for the kernel of a key — the op, the
dtypes, the ranks, which dimensions are 1 (broadcasting), static attributes —
and, the first time, supplies its source with symbolic dimensions:

    ("multiply", float32, float32, (False, False), (False,))   ==>
    def eager_multiply(x: f32[D0, D1], y: f32[D1]) -> f32[D0, D1]:
        return x * y

One compilation serves every size, so a key is compiled once and the Kernel is
kept in memory for the life of the process. The compiler is imported on first use.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from adc import locks
from adc.ir.types import DType
from adc.runtime.kernel import Kernel
from adc.runtime.module import from_source

_kernels: dict[tuple, Kernel] = {}
_lock = locks.lock()


def kernel(key: tuple, source: Callable[[], tuple[str, str]]) -> Kernel:
    """The kernel of `key`; `source()` gives (kernel name, adc source) when it is not compiled yet."""
    found = _kernels.get(key)
    return found if found is not None else _compile(key, source)


compiled = _kernels.get   # (key) -> the kernel if compiled already, else None: an op's fast path


def _compile(key: tuple, source: Callable[[], tuple[str, str]]) -> Kernel:
    with _lock:
        if key not in _kernels:
            name, text = source()
            origin = f"<eager {name}>"
            _kernels[key] = from_source(text, origin)[name]
        return _kernels[key]


def compiled_count() -> int:
    """How many eager kernels this process has compiled."""
    return len(_kernels)


def tensor_type(dtype: np.dtype, dims: Sequence[str]) -> str:
    """`f32[D0, 1]` for float32 and ("D0", "1"); a bare dtype for rank 0."""
    name = str(DType.from_numpy(dtype))
    return f"{name}[{', '.join(dims)}]" if dims else name


def definition(name: str, params: Sequence[tuple[str, str]], result: str, body: str,
               setup: Sequence[str] = ()) -> tuple[str, str]:
    """(name, source) of a kernel `def name(params) -> result: return body`, after the statements `setup`."""
    args = ", ".join(f"{p}: {t}" for p, t in params)
    lines = "".join(f"    {line}\n" for line in setup)
    return name, f"def {name}({args}) -> {result}:\n{lines}    return {body}\n"
