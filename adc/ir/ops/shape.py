"""Shape ops: broadcast, reshape, transpose, slice, slice_add, concat, pad."""
from __future__ import annotations

from adc.ir.ops.record import ALL, define, example, require
from adc.ir.types import BOOL, Dim, TensorType, num_elements


def _broadcast_rule(types, attrs, funcs):
    (t,) = types
    shape, dims = tuple(attrs["shape"]), tuple(attrs["dims"])
    require(len(dims) == t.rank, f"`dims` has {len(dims)} entries for an operand of rank {t.rank}")
    require(all(0 <= d < len(shape) for d in dims) and list(dims) == sorted(set(dims)),
            f"`dims` {list(dims)} must be increasing axes of the result (rank {len(shape)})")
    for src, dst in zip(t.shape, dims):
        require(src == 1 or src == shape[dst],
                f"cannot broadcast dimension {src} to {shape[dst]}")
    return (TensorType(t.dtype, shape),)


define("broadcast", "expand to `shape`; operand axis i maps to result axis dims[i] (size 1 or equal)",
       example("%x: f32[O], %y: f32[B,O]", "  %0 = broadcast %x {dims = [1], shape = [B,O]} : f32[B,O]\n  return %0",
               "f32[B,O]"),
       _broadcast_rule, 1, ("dims", "shape"), traits=("index_map", "cheap"), linear=(0,))


def _reshape_rule(types, attrs, funcs):
    (t,) = types
    shape = tuple(attrs["shape"])
    require(num_elements(shape) == num_elements(t.shape),
            f"cannot reshape {t} to [{','.join(map(str, shape))}]: element counts differ")
    return (TensorType(t.dtype, shape),)


define("reshape", "the same elements in row-major order, in a new shape",
       example("%x: f32[B,H]", "  %0 = reshape %x {shape = [B*H]} : f32[B*H]\n  return %0", "f32[B*H]"),
       _reshape_rule, 1, ("shape",), traits=("index_map", "cheap", "flat"), linear=(0,))


def _transpose_rule(types, attrs, funcs):
    (t,) = types
    perm = tuple(attrs["perm"])
    require(sorted(perm) == list(range(t.rank)), f"`perm` {list(perm)} is not a permutation of rank {t.rank}")
    return (TensorType(t.dtype, tuple(t.shape[p] for p in perm)),)


define("transpose", "permute axes: result axis i is operand axis perm[i]",
       example("%x: f32[M,N]", "  %0 = transpose %x {perm = [1,0]} : f32[N,M]\n  return %0", "f32[N,M]"),
       _transpose_rule, 1, ("perm",), traits=("index_map", "cheap"), linear=(0,))


def _static_le(a: Dim, b: Dim) -> bool:
    """True unless a > b is certain (symbolic cases are checked at call time)."""
    diff = b - a
    return not isinstance(diff, int) or diff >= 0


def _slice_rule(types, attrs, funcs):
    (t,) = types
    start, stop, step = (tuple(attrs[k]) for k in ("start", "stop", "step"))
    require(len(start) == len(stop) == len(step) == t.rank,
            f"`start`, `stop`, `step` need {t.rank} entries each")
    shape = []
    for size, lo, hi, st in zip(t.shape, start, stop, step):
        require(isinstance(st, int) and st >= 1, f"step {st} must be a positive integer")
        require(_static_le(0, lo) and _static_le(lo, hi) and _static_le(hi, size),
                f"slice {lo}:{hi} out of bounds for dimension {size}")
        extent = hi - lo
        if st == 1:
            shape.append(extent)
        else:
            require(isinstance(extent, int), f"a step of {st} needs a static extent, got {extent}")
            shape.append(-(-extent // st))
    return (TensorType(t.dtype, tuple(shape)),)


define("slice", "elements start:stop:step along every axis (static bounds)",
       example("%x: f32[N]", "  %0 = slice %x {start = [1], step = [1], stop = [N]} : f32[N-1]\n  return %0",
               "f32[N-1]"),
       _slice_rule, 1, ("start", "step", "stop"), traits=("index_map",), linear=(0,))


def _slice_add_rule(types, attrs, funcs):
    base, updates = types
    require(base.rank >= 1, f"slice_add needs a base of rank 1 or more, got {base}")
    require(base.dtype is not BOOL, f"cannot add into {base}")
    (sliced,) = _slice_rule((base,), attrs, funcs)
    require(updates == sliced, f"updates must be {sliced} (the slice of {base}), got {updates}")
    return (base,)


define("slice_add", "base with updates added to its elements start:stop:step along every axis (static bounds): "
       "what a slice's cotangent adds to the others, each position written once",
       example("%b: f32[N,5], %u: f32[N,1]",
               "  %0 = slice_add %b, %u {start = [0,2], step = [1,1], stop = [N,3]} : f32[N,5]\n  return %0",
               "f32[N,5]"),
       _slice_add_rule, 2, ("start", "step", "stop"), traits=("updates", "materializes"), linear=ALL)


def _concat_rule(types, attrs, funcs):
    require(len(types) >= 1, "expected at least one operand")
    axis, first = attrs["axis"], types[0]
    require(0 <= axis < first.rank, f"axis {axis} out of range for rank {first.rank}")
    total: Dim = 0
    for t in types:
        require(t.dtype == first.dtype and t.rank == first.rank, f"operand types differ: {first} vs {t}")
        require(all(a == b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis),
                f"operand shapes differ off axis {axis}: {first} vs {t}")
        total = total + t.shape[axis]
    shape = list(first.shape)
    shape[axis] = total
    return (TensorType(first.dtype, tuple(shape)),)


define("concat", "join operands along `axis`",
       example("%x: f32[N], %y: f32[M]", "  %0 = concat %x, %y {axis = 0} : f32[M+N]\n  return %0",
               "f32[M+N]"),
       _concat_rule, None, ("axis",), traits=("selects",), linear=ALL)


def _pad_rule(types, attrs, funcs):
    t, value = types
    low, high = tuple(attrs["low"]), tuple(attrs["high"])
    require(value == TensorType(t.dtype), f"padding value must be a {t.dtype} scalar, got {value}")
    require(len(low) == len(high) == t.rank, f"`low` and `high` need {t.rank} entries each")
    require(all(isinstance(n, int) and n >= 0 for n in low + high), "padding widths must be non-negative ints")
    return (TensorType(t.dtype, tuple(d + lo + hi for d, lo, hi in zip(t.shape, low, high))),)


define("pad", "surround with `low`/`high` copies of a scalar value along each axis",
       example("%x: f32[N], %v: f32", "  %0 = pad %x, %v {high = [2], low = [1]} : f32[N+3]\n  return %0",
               "f32[N+3]"),
       _pad_rule, 2, ("high", "low"), traits=("selects",), linear=ALL)

