"""adc: an array language for numerical kernels, compiled to native SIMD code.

    m = adc.compile_file("samples/kernels.adc")     # or adc.compile(source_text)
    y = m.dense_relu(x, w, b)                         # an adc.Tensor
    adc.load("kernels.so")                            # a module written by `adc compile`
"""
from __future__ import annotations

import os

from adc.errors import CompileError, ToolchainError, VerifyError
from adc.runtime.module import LoadError, Module, load
from adc.runtime.tensor import Tensor

__version__ = "0.1.0"
__all__ = ["CompileError", "LoadError", "Module", "Tensor", "ToolchainError", "VerifyError",
           "compile", "compile_file", "load"]


def compile(source: str, name: str | None = None) -> Module:
    """Compile adc source text in process; `name` labels diagnostics (default '<string>')."""
    from adc import driver

    return driver.jit(driver.elaborate(source, name or "<string>"))


def compile_file(path: str | os.PathLike) -> Module:
    """Compile an .adc file in process."""
    from adc import driver

    return driver.jit(driver.elaborate(driver.read_source(path), str(path)))
