"""One-hot seeds: sums over a one-hot axis become gathers, so a seed batch is never multiplied.

Runs in the Jacobian compositions (adc/passes/jacobian.py) after their cleanup. A value
has *one-hot structure* (`OneHot`) when it is known to be

    V[idx] = Π factors[idx]   where lin(idx[A]) == lin(idx[B]) for every pair (A, B)
           = 0                 elsewhere

A and B disjoint tuples of V's axes of equal element count, lin the row-major index over
them, each factor a value broadcast onto some of V's axes (a bool factor joins the
condition, no float factor means 1). `eq` of two iotas starts it — identity_seeds'
convert(eq(iota 0, iota 1)) — and `one_hot_rules` carry it through convert, reshape,
transpose, broadcast, mul and select with zero, where the algebra is exact. matmul and
reduce_sum summing over paired axes are rewritten: each summed index equals its partner,
so the sum has one term, the other operand broadcast with the summed axis read at the
partner's index (a gather) and masked by the remaining pairs.

Contract: a seed's zeros are structural, like JAX's symbolic zero tangents. The rewritten
IR computes what the original does wherever the values the seeds multiply are finite (the
dense product has nan where a seed's 0 meets inf or nan, the gather 0), up to a zero's sign
and the order of the products of several factors.

    %0 = iota {axis = 0, dtype = i64, shape = [N,N]} : i64[N,N]
    %1 = iota {axis = 1, dtype = i64, shape = [N,N]} : i64[N,N]
    %2 = eq %0, %1 : bool[N,N]                                  ==>  %5 = broadcast %x {dims = [0,1],
    %3 = convert %2 {dtype = f32} : f32[N,N]                                   shape = [M,N]} : f32[M,N]
    %4 = matmul %x, %3 : f32[M,N]                                    (x @ I = x, no product)
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

from adc.ir.builder import Builder, full
from adc.ir.core import Func, Op, Value
from adc.ir.types import BOOL, I64, Dim, TensorType
from adc.ir.reshapes import common_digits, quotient, reshape_groups

Factor = tuple[Value, tuple[int, ...]]      # a value and the axes of V its axes map to, increasing


@dataclass(frozen=True)
class OneHot:
    """V's one-hot structure: the axis pairs whose row-major indices must agree, and the factors."""

    pairs: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]
    factors: tuple[Factor, ...] = ()

    def relabel(self, rw: "Structures", new_axis: Mapping[int, int]) -> "OneHot":
        """The structure with axis a renamed new_axis[a] (a permutation or an embedding)."""
        pairs = tuple((tuple(new_axis[a] for a in x), tuple(new_axis[b] for b in y)) for x, y in self.pairs)
        return OneHot(pairs, tuple(rw.factor(v, [new_axis[d] for d in dims]) for v, dims in self.factors))

    def with_factor(self, factor: Factor | None) -> "OneHot":
        return replace(self, factors=self.factors + (factor,)) if factor is not None else self

    @property
    def paired(self) -> frozenset[int]:
        return frozenset(a for pair in self.pairs for group in pair for a in group)


class Structures:
    """What a rule sees: the new body's builder, each value's producer, and the known structures."""

    def __init__(self, builder: Builder):
        self.builder = builder
        self.producers: dict[Value, Op] = {}
        self.one_hot: dict[Value, OneHot] = {}

    def producer_named(self, value: Value, name: str) -> Op | None:
        op = self.producers.get(value)
        return op if op is not None and op.name == name else None

    def is_zero(self, value: Value) -> bool:
        op = self.producers.get(value)
        while op is not None and op.name == "broadcast":
            op = self.producers.get(op.operands[0])
        return op is not None and op.name == "constant" and op.attrs["value"] == 0

    def factor(self, value: Value, dims: Sequence[int]) -> Factor:
        """(value, dims) with dims increasing (the value transposed to match), through broadcasts."""
        inner = self.producer_named(value, "broadcast")
        if inner is not None:
            value, dims = inner.operands[0], [dims[d] for d in inner.attrs["dims"]]
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        if order != list(range(len(dims))):
            value = self.builder.op("transpose", value, perm=order)
        return value, tuple(sorted(dims))

    def whole(self, value: Value) -> Factor:
        return self.factor(value, range(value.type.rank))


# one_hot_rules[op_name](op, operands, st) -> Value | OneHot | None
#   op:       the original op; operands: its operands in the new body
#   st:       the Structures; new ops are built with st.builder (stamped with op.loc)
# A Value replaces the op's result; a OneHot is the structure of its (kept) result; None keeps it as it is.
OneHotRule = Callable[[Op, Sequence[Value], Structures], "Value | OneHot | None"]
one_hot_rules: dict[str, OneHotRule] = {}


def eq_one_hot(op, operands, st):
    # iota_a == iota_b over one shape: 1 where the indices along a and b agree
    iotas = [st.producer_named(v, "iota") for v in operands]
    if None in iotas or iotas[0].attrs["axis"] == iotas[1].attrs["axis"]:
        return None
    (a, b), shape = (i.attrs["axis"] for i in iotas), op.result.type.shape
    if shape[a] != shape[b]:
        return None
    return OneHot(() if shape[a] == 1 else (((a,), (b,)),))      # one index along both: true everywhere


one_hot_rules["eq"] = eq_one_hot


def convert_one_hot(op, operands, st):
    # 1 and 0 in the new dtype; float factors would keep the old one
    s = st.one_hot.get(operands[0])
    return s if s is not None and all(v.type.dtype is BOOL for v, _ in s.factors) else None


one_hot_rules["convert"] = convert_one_hot


def transpose_one_hot(op, operands, st):
    # result axis i is operand axis perm[i]
    s = st.one_hot.get(operands[0])
    perm = op.attrs["perm"]
    return s and s.relabel(st, {p: i for i, p in enumerate(perm)})


one_hot_rules["transpose"] = transpose_one_hot


def broadcast_one_hot(op, operands, st):
    # operand axis i is result axis dims[i]; the new axes are free
    (x,), dims, shape = operands, op.attrs["dims"], op.attrs["shape"]
    s = st.one_hot.get(x)
    if s is None or any(x.type.shape[i] != shape[d] for i, d in enumerate(dims)):
        return None
    return s.relabel(st, dict(enumerate(dims)))


one_hot_rules["broadcast"] = broadcast_one_hot


def reshape_one_hot(op, operands, st):
    # splits and merges within one group of a pair, or of free axes: the row-major index is kept
    s = st.one_hot.get(operands[0])
    return s and reshaped(st, s, operands[0].type.shape, op.result.type.shape)


one_hot_rules["reshape"] = reshape_one_hot


def mul_one_hot(op, operands, st):
    # V * y = y where V's condition holds, else 0: y joins the factors
    x, y = operands
    s, t = st.one_hot.get(x), st.one_hot.get(y)
    if s == OneHot(()) or t == OneHot(()):
        return y if s == OneHot(()) else x       # 1 * y = y (one seed: a one-hot of one element)
    if s is not None and t is not None:
        return OneHot(s.pairs + t.pairs, s.factors + t.factors)
    return s.with_factor(st.whole(y)) if s is not None else t and t.with_factor(st.whole(x))


one_hot_rules["mul"] = mul_one_hot


def select_one_hot(op, operands, st):
    # c ? V : 0 and c ? 0 : V: the condition (or its negation) joins V's
    c, x, y = operands
    if x in st.one_hot and st.is_zero(y):
        return st.one_hot[x].with_factor(st.whole(c))
    if y in st.one_hot and st.is_zero(x):
        c, dims = st.whole(c)     # negated before it is broadcast
        return st.one_hot[y].with_factor((st.builder.op("bitwise_not", c), dims))
    return None


one_hot_rules["select"] = select_one_hot


def sum_one_hot(op, operands, st):
    # V·f ± V·g = V·(f ± g) for one condition V: both sides' factors become one factor, over the axes
    # they span (an elu's VJP adds its two masked branches; a seed block stays one-hot through it)
    s, t = (st.one_hot.get(v) for v in operands)
    if s is None or t is None or s.pairs != t.pairs:
        return None
    dims = sorted({d for _, axes in s.factors + t.factors for d in axes})
    if any(set(a) & set(dims) and set(b) & set(dims) for a, b in s.pairs):
        return None         # the one factor would span both sides of a pair: read on a diagonal, no gather
    where = {d: i for i, d in enumerate(dims)}
    spanned = TensorType(op.result.type.dtype, tuple(op.result.type.shape[d] for d in dims))
    sides = [materialized(st, OneHot((), tuple((v, tuple(where[d] for d in axes)) for v, axes in u.factors)), spanned)
             for u in (s, t)]
    return OneHot(s.pairs, ((st.builder.op(op.name, *sides), tuple(dims)),))


one_hot_rules["add"] = one_hot_rules["sub"] = sum_one_hot


def reduce_sum_one_hot(op, operands, st):
    # Σ_k V[..k..] = V at k = its partner: the one term where the condition can hold
    (x,) = operands
    s = st.one_hot.get(x)
    return s and x.type.dtype.is_float and contracted(st, s, x.type, op.attrs["axes"]) or None


one_hot_rules["reduce_sum"] = reduce_sum_one_hot


def matmul_one_hot(op, operands, st):
    # x @ V = Σ_k x[.., k] V[k, ..]: x read at k = the partner of V's row index, masked by V's other pairs
    # (V @ x alike). V may be seen through a reshape merging its columns (rows), as batched seeds are.
    a, b = operands
    batch = a.type.rank - 2
    for side, one, other in ((1, b, a), (0, a, b)):
        source, s = _through_merge(st, one, batch, side)
        if s is None:
            continue
        k = batch if side == 1 else source.type.rank - 1
        placed = list(range(batch)) + ([FREE, k] if side == 1 else [k, FREE])
        result = contracted(st, s, source.type, [k], (other, placed))
        if result is not None:
            return st.builder.op("reshape", result, shape=op.result.type.shape)
    return None


one_hot_rules["matmul"] = matmul_one_hot


def _through_merge(st: Structures, value: Value, batch: int, side: int) -> tuple[Value, OneHot | None]:
    """A one-hot T, the contracted operand `value` up to a reshape merging its other axis (columns for
    side 1, rows for side 0), as the batching pass makes it: T's axes are the batch axes, then the
    contracted axis first (side 1) or last (side 0). T's first (last) axis is split when it ends in
    (starts with) the contracted one. (value, None) when there is no such T."""
    inner = st.producer_named(value, "reshape")
    source = value if value in st.one_hot else inner.operands[0] if inner is not None else None
    if source not in st.one_hot or source.type.shape[:batch] != value.type.shape[:batch]:
        return value, None
    shape, k = source.type.shape, value.type.shape[batch if side == 1 else -1]
    at = batch if side == 1 else len(shape) - 1
    rest = quotient(shape[at], k) if at < len(shape) else None
    if rest is None:
        return value, None
    parts = [] if rest == 1 else [rest]
    split = shape[:at] + tuple([k] + parts if side == 1 else parts + [k]) + shape[at + 1:]
    s = reshaped(st, st.one_hot[source], shape, split) if split != shape else st.one_hot[source]
    if s is None or len(split) < batch + 2:
        return value, None
    view = source if split == shape else st.builder.op("reshape", source, shape=list(split))
    return view, s


FREE = -1       # in `contracted`'s placement: the other operand's own axis, put where the summed axis was


@dataclass(frozen=True)
class Refined:
    """A structure over a refined shape in which every pair is one axis with one axis: V's axis a is
    split into the axes segments[a] (row-major), of sizes `sizes`; factors are reshaped to match."""

    segments: tuple[tuple[int, ...], ...]
    sizes: tuple[Dim, ...]
    pairs: tuple[tuple[int, int], ...]
    factors: tuple[Factor, ...]


def contracted(st: Structures, s: OneHot, type: TensorType, summed: Sequence[int],
               other: tuple[Value, Sequence[int]] | None = None) -> Value | None:
    """Σ over the `summed` axes of V (structure s, of `type`), times `other` when given — (x, placed):
    x's axis i on V's axis placed[i], its FREE axis in the summed axis' place — as a gather of the
    factors (and x) at the summed indices' partners, masked by the remaining pairs. Returns the value,
    of V's shape without the summed axes (or with x's free axis in their place), or None when a summed
    index has no partner outside them, or a factor would be read on a diagonal."""
    shape = type.shape
    r = refine(st, s, shape)
    if r is None:
        return None
    partner = {a: b for x, y in r.pairs for a, b in ((x, y), (y, x))}
    gone = {seg for axis in summed for seg in r.segments[axis]}
    if any(partner.get(seg, seg) in gone for seg in gone if r.sizes[seg] != 1 or seg in partner):
        return None
    sizes, layout = list(r.sizes), []
    for axis, segs in enumerate(r.segments):
        if other is not None and axis == summed[0]:
            layout.append(len(sizes))
            sizes.append(other[0].type.shape[list(other[1]).index(FREE)])
        layout.extend(seg for seg in segs if seg not in gone)
    where = {seg: i for i, seg in enumerate(layout)}
    where.update({seg: where[partner[seg]] for seg in gone if seg in partner})
    factors = list(r.factors)
    if other is not None:
        x, placed = other
        factors.append(_split(st, x, [[len(r.sizes)] if p == FREE else r.segments[p] for p in placed], sizes))
    moved = [(v, [where[d] for d in dims if d in where]) for v, dims in factors]
    if any(len(set(dims)) < len(dims) or len(dims) < v.type.rank for v, dims in moved):
        return None
    result = OneHot(tuple(((where[a],), (where[b],)) for a, b in r.pairs if a not in gone and b not in gone),
                    tuple(st.factor(v, dims) for v, dims in moved))
    out = tuple(sizes[seg] for seg in layout)
    value = materialized(st, result, TensorType(type.dtype, out))
    natural = [other[0].type.shape[list(other[1]).index(FREE)] if other is not None and a == summed[0] else d
               for a, d in enumerate(shape) if a not in summed or (other is not None and a == summed[0])]
    return _reshape(st, value, result, tuple(natural))


def _reshape(st: Structures, value: Value, s: OneHot, shape: tuple[Dim, ...]) -> Value:
    """value reshaped to `shape`, its structure carried along when the reshape keeps it."""
    if tuple(value.type.shape) == tuple(shape):
        st.one_hot[value] = s
        return value
    out = st.builder.op("reshape", value, shape=list(shape))
    kept = reshaped(st, s, value.type.shape, shape)
    if kept is not None:
        st.one_hot[out] = kept
    return out


def materialized(st: Structures, s: OneHot, type: TensorType) -> Value:
    """The value the structure describes: the product of the float factors (1 when none) where every
    pair's indices agree and every bool factor holds, else 0."""
    b, shape = st.builder, type.shape
    product = None
    for v, dims in s.factors:
        if v.type.dtype is BOOL:
            continue
        spread = b.op("broadcast", v, dims=list(dims), shape=list(shape))
        product = spread if product is None else b.op("mul", product, spread)
    if product is None:
        product = full(b, 1.0, type)
    conditions = [b.op("broadcast", v, dims=list(dims), shape=list(shape)) for v, dims in s.factors
                  if v.type.dtype is BOOL]
    conditions += [b.op("eq", *(_linear_index(b, group, shape) for group in pair)) for pair in s.pairs]
    if not conditions:
        return product
    mask = conditions[0]
    for c in conditions[1:]:
        mask = b.op("bitwise_and", mask, c)
    return b.op("select", mask, product, full(b, 0.0, type))


def _linear_index(b: Builder, axes: tuple[int, ...], shape) -> Value:
    """The row-major index over `axes` at each position of `shape`, as i64."""
    total = None
    for axis in axes:
        index = b.op("iota", axis=axis, dtype=I64, shape=list(shape))
        if total is not None:
            extent = b.op("broadcast", b.op("dim", dtype=I64, value=shape[axis]), dims=[], shape=list(shape))
            index = b.op("add", b.op("mul", total, extent), index)
        total = index
    return total


def _split(st: Structures, value: Value, targets: Sequence[Sequence[int]], sizes: Sequence[Dim]) -> Factor:
    """(value reshaped, dims): value's axis i split into the refined axes targets[i] (all size 1 when
    it is broadcast along them)."""
    shape = [sizes[t] if value.type.shape[i] != 1 else 1 for i, axes in enumerate(targets) for t in axes]
    if value.type.shape != tuple(shape):
        value = st.builder.op("reshape", value, shape=shape)
    return value, tuple(t for axes in targets for t in axes)


def refine(st: Structures, s: OneHot, shape: tuple[Dim, ...]) -> Refined | None:
    """s over the shape in which every pair's groups are split into matching digits, or None when
    their row-major digits do not nest (a group [4, 6] against [6, 4])."""
    split: dict[int, list[Dim]] = {}
    single = []
    for a, b in s.pairs:
        digits = common_digits([shape[i] for i in a], [shape[i] for i in b])
        if digits is None:
            return None
        for group, side in ((a, 0), (b, 1)):
            for position, axis in enumerate(group):
                split[axis] = [d[2] for d in digits if d[side] == position] or [1]
        single.append((a, b, digits))
    segments, sizes = [], []
    for axis, size in enumerate(shape):
        parts = split.get(axis, [size])
        segments.append(tuple(range(len(sizes), len(sizes) + len(parts))))
        sizes.extend(parts)
    pairs = []
    for a, b, digits in single:
        taken = {axis: 0 for axis in a + b}
        for ia, ib, _ in digits:
            x, y = a[ia], b[ib]
            pairs.append((segments[x][taken[x]], segments[y][taken[y]]))
            taken[x], taken[y] = taken[x] + 1, taken[y] + 1
    factors = tuple(_split(st, v, [segments[d] for d in dims], sizes) for v, dims in s.factors)
    return Refined(tuple(segments), tuple(sizes), tuple(pairs), factors)


def reshaped(st: Structures, s: OneHot, old: tuple[Dim, ...], new: tuple[Dim, ...]) -> OneHot | None:
    """s carried through a reshape old -> new: a group's axes may be split, or merged when they are
    consecutive in it; free axes too; a factor follows when it spans whole runs of merged or split
    axes. None otherwise (a paired axis merged with another group's, or with a free one)."""
    groups = reshape_groups(old, new)
    if groups is None:
        return None
    run = {a: (olds, news) for olds, news in groups for a in olds}
    pairs = []
    for pair in s.pairs:
        renamed = []
        for group in pair:
            axes = [a for a in group if old[a] != 1]
            out, i = [], 0
            while i < len(axes):
                olds, news = run[axes[i]]
                if tuple(axes[i:i + len(olds)]) != olds or (len(olds) > 1 and len(news) > 1):
                    return None
                out.extend(news)
                i += len(olds)
            renamed.append(tuple(out))
        pairs.append(tuple(renamed))
    paired = s.paired
    if any(len(olds) > 1 and 0 < len(paired.intersection(olds)) < len(olds) for olds, _ in groups):
        return None     # a paired axis merged with a free one (merges within a group were checked above)
    factors = []
    for v, dims in s.factors:
        covered = [g for g in groups if set(g[0]) & set(dims)]
        full_along = [{v.type.shape[dims.index(a)] != 1 for a in olds} for olds, _ in covered]
        if any(not set(olds) <= set(dims) for olds, _ in covered) or any(len(f) > 1 for f in full_along):
            return None
        shape = [new[n] if f == {True} else 1 for (_, news), f in zip(covered, full_along) for n in news]
        factors.append((v if tuple(shape) == v.type.shape else st.builder.op("reshape", v, shape=shape),
                        tuple(n for _, news in covered for n in news)))
    return OneHot(tuple(pairs), tuple(factors))


def one_hot_func(func: Func, funcs: Mapping[str, Func]) -> Func:
    """func with the consumers of one-hot values that `one_hot_rules` rewrite replaced (the values
    they bypass are left for dead-code elimination)."""
    st = Structures(Builder(funcs))
    replaced: dict[Value, Value] = {}
    for op in func.ops:
        operands = tuple(replaced.get(v, v) for v in op.operands)
        start = len(st.builder.ops)
        rule = one_hot_rules.get(op.name)
        with st.builder.at(op.loc):
            found = rule(op, operands, st) if rule is not None else None
        if isinstance(found, Value):
            replaced[op.result] = found
        else:
            kept = op if operands == op.operands else Op(op.name, operands, op.attrs, op.results, op.loc)
            st.builder.ops.append(kept)
            if found is not None:
                st.one_hot[op.result] = found
        for built in st.builder.ops[start:]:
            st.producers.update((r, built) for r in built.results)
    returns = tuple(replaced.get(v, v) for v in func.returns)
    return Func(func.name, func.params, tuple(st.builder.ops), returns, func.loc)
