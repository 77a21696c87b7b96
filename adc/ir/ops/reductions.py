"""Reductions, arg-reductions, scans and the matrix product: the ops that combine elements along axes."""
from __future__ import annotations

from adc.ir.ops.record import define, example, require
from adc.ir.types import BOOL, I64, TensorType


def _reduce_rule(types, attrs, funcs):
    (t,) = types
    axes = tuple(attrs["axes"])
    require(list(axes) == sorted(set(axes)) and all(0 <= a < t.rank for a in axes),
            f"`axes` {list(axes)} must be increasing axes of rank {t.rank}")
    require(t.dtype is not BOOL, f"cannot reduce {t}")
    return (TensorType(t.dtype, tuple(d for i, d in enumerate(t.shape) if i not in axes)),)


REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod")
for _name, _what in zip(REDUCTIONS, ("sum", "maximum (-inf when empty)", "minimum (inf when empty)", "product")):
    define(_name, f"{_what} over `axes`",
           example("%x: f32[B,N]", f"  %0 = {_name} %x {{axes = [1]}} : f32[B]\n  return %0", "f32[B]"),
           _reduce_rule, 1, ("axes",), traits=("reduction", "materializes"),
           linear=(0,) if _name == "reduce_sum" else ())


def _arg_reduce_rule(types, attrs, funcs):
    # `axes` names one axis, so the rules keyed on the "reduction" trait (batching, example axes) apply
    (t,) = types
    axes = tuple(attrs["axes"])
    require(len(axes) == 1 and 0 <= axes[0] < t.rank, f"`axes` must name one axis of rank {t.rank}, got {list(axes)}")
    require(t.dtype is not BOOL, f"cannot reduce {t}")
    return (TensorType(I64, tuple(d for i, d in enumerate(t.shape) if i != axes[0])),)


ARG_REDUCTIONS = ("argmax", "argmin")
for _name, _what in zip(ARG_REDUCTIONS, ("maximum", "minimum")):
    define(_name, f"the i64 index of the first {_what} along the one axis in `axes` (of the first nan, "
           "if any; 0 when the axis is empty)",
           example("%x: f32[B,N]", f"  %0 = {_name} %x {{axes = [1]}} : i64[B]\n  return %0", "i64[B]"),
           _arg_reduce_rule, 1, ("axes",), traits=("reduction", "materializes", "index_result"))


def _scan_rule(types, attrs, funcs):
    (t,) = types
    axis = attrs["axis"]
    require(isinstance(axis, int) and not isinstance(axis, bool) and 0 <= axis < t.rank,
            f"axis {axis!r} out of range for {t}")
    require(all(isinstance(attrs[k], bool) for k in ("exclusive", "reverse")),
            "`exclusive` and `reverse` must be true or false")
    require(t.dtype is not BOOL, f"cannot scan {t}")
    return (t,)


SCANS = ("cumsum", "cumprod")
for _name, _what in zip(SCANS, ("sums", "products")):
    define(_name, f"running {_what} along `axis` (np.{_name}): element k combines elements 0..k, or 0..k-1 "
           "when `exclusive` (the identity first); `reverse` runs from the end",
           example("%x: f32[B,N]", f"  %0 = {_name} %x {{axis = 1, exclusive = false, reverse = false}} : f32[B,N]"
                   "\n  return %0", "f32[B,N]"),
           _scan_rule, 1, ("axis", "exclusive", "reverse"), traits=("scan", "materializes"),
           linear=(0,) if _name == "cumsum" else ())


def _matmul_rule(types, attrs, funcs):
    a, b = types
    require(a.dtype == b.dtype and a.dtype.is_float, f"expected float operands of one dtype, got {a} and {b}")
    require(a.rank == b.rank >= 2, f"expected operands of one rank >= 2, got {a} and {b}")
    require(a.shape[:-2] == b.shape[:-2], f"batch dimensions differ: {a} and {b}")
    require(a.shape[-1] == b.shape[-2], f"contracted dimensions differ: {a} and {b}")
    return (TensorType(a.dtype, a.shape[:-1] + b.shape[-1:]),)


define("matmul", "matrix product over the last two axes, batched over the leading ones",
       example("%x: f32[B,I], %w: f32[I,O]", "  %0 = matmul %x, %w : f32[B,O]\n  return %0", "f32[B,O]"),
       _matmul_rule, 2, traits=("materializes",), products=(0, 1))

