"""The builtins that rearrange a tensor's elements: transpose, reshape, broadcast_to, concat, stack, pad.

Part of the builtins (`adc/frontend/builtins/__init__.py` gathers the families' tables).
Each checks its sizes against the tensor's type, symbolic ones included (a reshape's -1 is
found only by an exact division), and becomes one shape op, or none when nothing changes:

    reshape(x, [-1, 2])     %0 = reshape %x {shape = [N,2]} : f32[N,2]      (x: f32[2*N])
"""
from __future__ import annotations

from adc.frontend.arguments import Args, Builtin, registrar
from adc.frontend.scope import describe
from adc.ir.types import BOOL, Dim, SymDim, TensorType, num_elements

builtin_rules: dict[str, Builtin] = {}
builtin = registrar(builtin_rules)


@builtin("transpose", "x", perm=None)
def transpose_expand(cx, a):
    x = a.tensor("x")
    rank = x.type.rank
    perm = None if a["perm"] is None else _int_list(a, "perm", rank)
    if perm is not None and sorted(perm) != list(range(rank)):
        raise a.error("perm", f"{list(perm)} is not a permutation of the {rank} axes of {x.type}")
    return cx.transpose(x, perm)


def _int_list(a: Args, key: str, rank: int) -> tuple[int, ...]:
    value = a[key]
    if not isinstance(value, list):
        raise a.error(key, f"'{key}' must be a list of axes, got {describe(value)}")
    return tuple(a.axis(key, rank, v) for v in value)


@builtin("reshape", "x", "shape")
def reshape_expand(cx, a):
    x = a.tensor("x")
    shape = list(a["shape"]) if isinstance(a["shape"], list) else [a["shape"]]
    holes = [i for i, d in enumerate(shape) if d == -1]
    if len(holes) > 1:
        raise a.error("shape", "at most one size can be -1")
    if holes:
        shape[holes[0]] = _infer_size(a, x.type, [d for d in shape if d != -1])
    shape = tuple(a.dim("shape", d) for d in shape)
    if num_elements(shape) != num_elements(x.type.shape):
        raise a.error("shape", f"cannot reshape {x.type} to [{','.join(map(str, shape))}]: element counts differ")
    return cx.reshape(x, shape)


def _infer_size(a: Args, t: TensorType, known: list) -> Dim:
    """The size that makes the element counts agree, when a division finds it exactly."""
    total, part = num_elements(t.shape), num_elements(tuple(a.dim("shape", d) for d in known))
    if isinstance(total, int) and isinstance(part, int) and part and total % part == 0:
        return total // part
    if isinstance(part, SymDim) and len(part.terms) == 1:
        quotient = _divide_monomial(total, *part.terms[0])
        if quotient is not None:
            return quotient
    if isinstance(total, SymDim) and isinstance(part, int) and part and all(c % part == 0 for _, c in total.terms):
        return SymDim.of({m: c // part for m, c in total.terms})
    raise a.error("shape", f"cannot infer the -1 size: {t} has {total} elements, not a multiple of {part}")


def _divide_monomial(total: Dim, mono: tuple[str, ...], coefficient: int) -> Dim | None:
    """total / (coefficient * mono) when every term of total divides exactly, else None."""
    if not isinstance(total, SymDim):
        return None
    terms = {}
    for m, c in total.terms:
        rest = list(m)
        for s in mono:
            if s not in rest:
                return None
            rest.remove(s)
        if c % coefficient:
            return None
        terms[tuple(rest)] = c // coefficient
    return SymDim.of(terms)


@builtin("broadcast_to", "x", "shape")
def broadcast_to_expand(cx, a):
    x, shape = a.tensor("x"), a.shape("shape")
    aligned = shape[len(shape) - x.type.rank:] if x.type.rank <= len(shape) else None
    if aligned is None or any(s != 1 and s != d for s, d in zip(x.type.shape, aligned)):
        raise a.error("shape", f"cannot broadcast {x.type} to [{','.join(map(str, shape))}]")
    return cx.broadcast(x, shape)


@builtin("concat", "values", axis=0)
def concat_expand(cx, a):
    values = a.tensors("values")
    axis = a.axis("axis", values[0].type.rank)
    return values[0] if len(values) == 1 else cx.op("concat", *values, axis=axis)


@builtin("stack", "values", axis=0)
def stack_expand(cx, a):
    # stack = concat of the values, each with a new axis of size 1
    values = a.tensors("values")
    first = values[0].type
    for v in values[1:]:
        if v.type != first:
            raise a.error("values", f"stacked tensors must have one type, got {first} and {v.type}")
    axis = a.axis("axis", first.rank + 1)
    shape = first.shape[:axis] + (1,) + first.shape[axis:]
    expanded = [cx.reshape(v, shape) for v in values]
    return expanded[0] if len(values) == 1 else cx.op("concat", *expanded, axis=axis)


@builtin("pad", "x", "widths", value=None)
def pad_expand(cx, a):
    # the default value is the dtype's zero: False for a bool tensor, as NumPy pads
    x = a.tensor("x")
    low, high = _pad_widths(a, x.type.rank)
    if a["value"] is None:
        value = cx.constant(False if x.type.dtype is BOOL else 0, x.type.dtype)
    else:
        value = a.tensor("value", x.type.dtype)
    if value.type != TensorType(x.type.dtype):
        raise a.error("value", f"the padding value must be a {x.type.dtype} scalar, got {value.type}")
    return cx.op("pad", x, value, low=low, high=high)


def _pad_widths(a: Args, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """NumPy's forms: n, (low, high), or one (low, high) pair per axis."""
    widths = a["widths"]
    if type(widths) is int:
        widths = [[widths, widths]]
    if isinstance(widths, list) and len(widths) == 2 and all(type(w) is int for w in widths):
        widths = [widths]
    if not isinstance(widths, list) or not all(isinstance(w, list) and len(w) == 2 for w in widths):
        raise a.error("widths", "widths must be a list of (low, high) pairs")
    if len(widths) == 1:
        widths = widths * rank
    if len(widths) != rank:
        raise a.error("widths", f"expected {rank} (low, high) pairs, got {len(widths)}")
    pairs = [(a.static_int("widths", lo), a.static_int("widths", hi)) for lo, hi in widths]
    if any(n < 0 for pair in pairs for n in pair):
        raise a.error("widths", "padding widths cannot be negative")
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
