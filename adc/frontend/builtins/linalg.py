"""The linear-algebra builtins: matmul, which `@` shares.

Part of the builtins (`adc/frontend/builtins/__init__.py` gathers the families' tables), and
of the elaborator's operators. NumPy's rules: a 1-D operand gains an axis and loses it after,
batch dimensions broadcast; the `matmul` op itself takes operands of one batch shape:

    v @ m          %0 = reshape %v {shape = [1,N]} : f32[1,N]           (v: f32[N], m: f32[N,M])
                   %1 = matmul %0, %m : f32[1,M]
                   %2 = reshape %1 {shape = [M]} : f32[M]
"""
from __future__ import annotations

from adc.frontend.arguments import Builtin, registrar
from adc.frontend.scope import Scope
from adc.ir.core import Value
from adc.ir.types import TensorType

builtin_rules: dict[str, Builtin] = {}
builtin = registrar(builtin_rules)


@builtin("matmul", "a", "b")
def matmul_expand(cx, a):
    return matmul(cx, a.tensor("a"), a.tensor("b"))


def matmul(cx: Scope, x: Value, y: Value) -> Value:
    """NumPy's matmul: 1-D operands gain then lose an axis; batch dimensions broadcast."""
    if x.type.rank == 0 or y.type.rank == 0:
        raise cx.error(f"matmul needs operands of rank >= 1, got {x.type} and {y.type}")
    cx.common_dtype([x, y])
    xs, ys = x.type.shape, y.type.shape
    x2 = cx.reshape(x, (1,) + xs) if x.type.rank == 1 else x
    y2 = cx.reshape(y, ys + (1,)) if y.type.rank == 1 else y
    if x2.type.shape[-1] != y2.type.shape[-2]:
        raise cx.error(f"matmul: contracted dimensions differ: {x.type} @ {y.type} ({x2.type.shape[-1]} "
                       f"against {y2.type.shape[-2]})")
    batch = cx.broadcast_shape([TensorType(x.type.dtype, x2.type.shape[:-2]), TensorType(x.type.dtype, y2.type.shape[:-2])])
    product = cx.op("matmul", cx.broadcast(x2, batch + x2.type.shape[-2:]), cx.broadcast(y2, batch + y2.type.shape[-2:]))
    out = batch + (xs[-2:-1] if x.type.rank > 1 else ()) + (ys[-1:] if y.type.rank > 1 else ())
    return cx.reshape(product, out)
