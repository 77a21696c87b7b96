"""adc: an array language for numerical kernels, compiled to native SIMD code.

    m = adc.compile_file("samples/kernels.adc")     # or adc.compile(source_text)
    y = m.dense_relu(x, w, b)                         # an adc.Tensor
    adc.load("kernels.so")                            # a module written by `adc compile`

    x = adc.Variable(3.0)
    with adc.GradientTape() as t:                     # records kernel calls and eager ops
        y = adc.sin(x) * x
    t.gradient(y, x)                                  # through each call's compiled VJP kernel

    adc.grad(m.loss), adc.jacobian(m.f), adc.hessian(m.loss)   # derivative kernels, compiled
    y, dy = adc.jvp(m.f, (x,), (dx,))                 # forward mode
    adc.vmap(m.f, in_axes=(0, None))                  # a kernel over a batch, compiled (jax.vmap)
    adc.specialize(m.f, N=64)                         # the kernel compiled for N = 64 only
"""
from __future__ import annotations

import os

from adc import build_ahead
from adc.annotations import dims, f32, f64, i32, i64
from adc.errors import BoundsError, CompileError, ToolchainError, VerifyError
from adc.python_kernels import kernel
from adc.runtime.custom_gradient import custom_gradient
from adc.runtime.forward_accumulator import ForwardAccumulator
from adc.runtime.functional import (batch_jacobian, grad, hessian, hvp, jacfwd, jacobian, jacobian_sparsity, jvp,
                                    value_and_grad, vmap)
from adc.runtime.module import LoadError, Module, from_source, load, warn_on_open
from adc.runtime import numpy_interop   # NumPy's functions on Tensors: the adc ops they name
from adc.runtime.axis_ops import (argmax, argmin, gather, one_hot, reduce_logsumexp, take_along_axis)
from adc.runtime.namespaces import linalg, math_ops as math, nn
from adc.runtime.ops import (abs_ as abs, add, cast, clip, clip_by_norm, clip_by_value, concat,
                             convert_to_tensor, cos, divide, elu, equal, exp, expm1, floor, greater,
                             greater_equal, less, less_equal, log, log1p, matmul,
                             maximum, minimum, multiply, negative, norm, not_equal, pow_ as pow,
                             reduce_max, reduce_mean, reduce_min, reduce_prod, reduce_sum, relu, reshape,
                             round_ as round, rsqrt, sigmoid, sign, sin, softplus, sqrt, stack,
                             stop_gradient, subtract, tan, tanh, transpose, where)
from adc.runtime.specialization import specialize
from adc.runtime.tape import GradientTape, UnconnectedGradients
from adc.runtime.tensor import Tensor, constant
from adc.runtime.threads import set_num_threads
from adc.runtime.variable import Variable
from adc.version import __version__

__all__ = ["__version__", "BoundsError", "CompileError", "ForwardAccumulator", "GradientTape", "LoadError", "Module", "Tensor", "ToolchainError",
           "UnconnectedGradients", "Variable", "VerifyError", "abs", "add", "argmax", "argmin", "batch_jacobian", "cast", "clip", "clip_by_norm",
           "clip_by_value", "compile", "compile_file", "concat", "constant", "convert_to_tensor", "cos",
           "custom_gradient", "dims", "divide", "elu", "equal", "exp", "expm1", "f32", "f64", "floor", "gather", "grad", "greater", "greater_equal",
           "hessian", "hvp", "i32", "i64", "jacfwd", "jacobian", "jacobian_sparsity", "jvp", "kernel",
           "less", "less_equal", "linalg", "load", "log", "log1p", "math", "matmul", "maximum", "minimum", "multiply",
           "negative", "nn", "norm", "not_equal", "one_hot", "pow", "reduce_logsumexp", "reduce_max", "reduce_mean", "reduce_min",
           "reduce_prod", "reduce_sum", "relu", "reshape", "round", "rsqrt", "set_num_threads", "sigmoid", "sign", "sin",
           "softplus", "specialize", "sqrt", "stack", "stop_gradient", "subtract", "take_along_axis", "tan", "tanh", "transpose", "value_and_grad", "vmap", "where"]


build_ahead.start()     # a machine's first import: the runtime library built meanwhile, in a child


def compile(source: str, name: str | None = None, check_bounds: bool = False) -> Module:
    """Compile adc source text in process; `name` labels diagnostics (default '<string>').
    Compiled code is kept in the on-disk cache (docs/architecture.md), so the same source
    compiles once per machine. `check_bounds`: a bounds-checked build, its derivatives too (an
    access outside its buffer raises adc.BoundsError; ADC_CHECK_BOUNDS=1 checks every JIT compile)."""
    return warn_on_open(from_source(source, name or "<string>", check_bounds), "adc.compile")


def compile_file(path: str | os.PathLike, check_bounds: bool = False) -> Module:
    """Compile an .adc file in process (`check_bounds`: as adc.compile's)."""
    from adc import driver      # the compiler (llvmlite) is optional for loading .so files

    return warn_on_open(from_source(driver.read_source(path), str(path), check_bounds), "adc.compile_file")


def load_ipython_extension(ipython) -> None:
    """`%load_ext adc`: the %%adc cell magic, adc source compiled and its kernels bound (adc/notebook.py)."""
    from adc.notebook import load

    load(ipython)
