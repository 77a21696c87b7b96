"""Direct nonzeros: a sparse Jacobian computed where its nonzeros lie, no seeds pushed.

Stencils, elementwise physics and boundary slices move each element of x to at most one place
per op. Then every value v of the kernel has a Jacobian that is a sum of a few index-mapped
diagonals, J_v = Σ_t diag(w_t) P_t: *terms*, each a weight w_t of v's shape (IR, computed at
run time) and a column map c_t (NumPy, planned at the call's sizes: element i of v depends
through the term on x[c_t[i]]; -1: on nothing). An op maps its operands' terms to its result's
with two tables it already has:
- which operand element each result element reads: the op's sparsity rule (sparsity_rules)
  on an identity pattern -- at most one per result element, else the kernel is not direct
  (sums, products and matmuls read many: `NotDirect`, and the Jacobian is colored instead);
- the weight: the op's tangent rule (tangent_rules) given the term's weight as that operand's
  tangent -- the JVP is linear, and with one element read it is exactly ∂y_r/∂a_s · w_s.
Terms of one map merge (their weights add); the operands of an op whose result elements they
fill apart (concat, stack, pad) share terms, position by position.

    func @f(%x: f64[N]) -> f64[N-1]            terms (weight, column map)
      %0 = slice %x [1:N]                        (1, i+1)
      %1 = slice %x [0:N-1]                      (1, i)
      %2 = mul %0, %1                            (%1, i+1), (%0, i)

`nonzeros` builds the function returning the result's weights, flat: the terms that vary, then
one number per term that simplification folds into a constant (`Diagonals`); `gather_sources`
plans where each nonzero of the pattern (CSR order) is among them: one gather (a second, added,
where two terms land on one nonzero), as a coloring's products are decompressed. Where the
coloring pushes each of its seeds through the whole tangent program, this computes each nonzero
once: the Brusselator's 12,288 nonzeros are 2 varying weights of 2,048 elements and 4 constants,
where 12 seeds push 24,576 tangents.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from adc.ir.builder import Builder, full, sum_present
from adc.ir.core import Func, Module, Op, Value
from adc.ir.interp import Context
from adc.ir.ops import OPS
from adc.ir.types import I32, TensorType
from adc.ir.verify import verify_func
from adc.passes.adjoint import cleanup, unique_name
from adc.passes.sparsity import SPARSITY
from adc.passes.sparsity.dependence import Dependence
from adc.passes.sparsity.patterns import Pattern
from adc.passes.specialize import specialize
from adc.passes.tangent_rules import tangent_rules

MAX_TERMS = 64      # a value with more is not a few diagonals: its Jacobian is colored instead
MAX_SOURCES = 8     # a RowLayout with more takes a select per source per nonzero: gathered instead


class NotDirect(Exception):
    """Why a kernel's Jacobian is not a few index-mapped diagonals (it is then colored)."""


@dataclass(frozen=True, eq=False)
class Term:
    """One diagonal of a value's Jacobian: its `weight` (a value of the function being built)
    and, per element of the value (flat, row-major), the column of x it stands for, or -1."""

    weight: Value
    columns: np.ndarray


@dataclass(frozen=True)
class Diagonals:
    """The terms of a result's Jacobian as `nonzeros` lays them out: per term its column map, and
    its value where the whole term is one constant (a linear stencil's coefficient, folded by
    simplification), else None. The varying terms' weights come first, each the result's size,
    then one slot per constant term: a constant is computed once, not once per element."""

    columns: tuple[np.ndarray, ...]
    constants: tuple[float | None, ...]

    def slots(self, size: int) -> np.ndarray:
        """Where each term's weight of row r is: its start (+ r for a varying term)."""
        varying = [k for k, c in enumerate(self.constants) if c is None]
        fixed = [k for k, c in enumerate(self.constants) if c is not None]
        starts = np.zeros(len(self.constants), np.int64)
        starts[varying] = np.arange(len(varying)) * size
        starts[fixed] = len(varying) * size + np.arange(len(fixed))
        return starts


def result_diagonals(module: Module, name: str, wrt: int, sizes: Mapping[str, int]) -> Diagonals:
    """The terms of the Jacobian of kernel `name`'s result w.r.t. param `wrt` at these sizes of
    its dimension symbols (NotDirect if it has none, or is not a few index-mapped diagonals)."""
    specialized, b, _, terms = _terms(module, name, wrt, sizes)
    return Diagonals(tuple(t.columns for t in terms), _constants(specialized, b, terms))


def nonzeros(module: Module, name: str, wrt: int, sizes: Mapping[str, int],
             rows: tuple[int, tuple[tuple[int, ...], ...]] | None = None) -> tuple[Module, Func]:
    """`module` plus `{name}_nonzeros`: the kernel's params at these sizes, returning the weights
    of the terms of the Jacobian of its result w.r.t. param `wrt`, flat, laid out as
    `result_diagonals` says (what `gather_sources` indexes); and that function. With `rows`, a
    `RowLayout`'s (width, sources): it takes the layout's `source` table after the params and
    returns the nonzeros themselves, in the pattern's (CSR) order."""
    specialized, b, result, terms = _terms(module, name, wrt, sizes)
    size = int(np.prod(result.type.shape, dtype=np.int64))
    with b.at(b.loc):
        if rows is None:
            constants = _constants(specialized, b, terms)
            laid = [b.op("reshape", t.weight, shape=(size,)) for t, c in zip(terms, constants) if c is None]
            laid += [full(b, c, TensorType(result.type.dtype, (1,))) for c in constants if c is not None]
            returned = b.op("concat", *laid, axis=0) if len(laid) > 1 else laid[0]
        else:
            returned = _laid_in_rows(b, terms, result.type.dtype, size, *rows)
    funcs = dict(specialized.funcs)
    func = cleanup(b.finish(unique_name(specialized, f"{name}_nonzeros"), [returned]), funcs)
    verify_func(func, funcs, pass_name="nonzeros")
    return specialized.replace(func), func


def _laid_in_rows(b: Builder, terms: list[Term], dtype, size: int, width: int,
                  sources: tuple[tuple[int, ...], ...]) -> Value:
    """The nonzeros of a RowLayout: per entry of its source table (a new param), the weight of
    the source it names at that row, picked by a select per source (vectorized over the rows,
    where a gather would read each by its address), flattened."""
    table = TensorType(dtype, (size, width))
    taken = {p.name for p in b.params}
    source = b.param(next(n for k in range(len(taken) + 1) if (n := f"source{k or ''}") not in taken),
                     TensorType(I32, (size, width)))

    def weight(ids: tuple[int, ...]) -> Value:
        summed = sum_present(b, *(terms[t].weight for t in ids))
        if summed is None:      # a structural zero
            return full(b, 0.0, table)
        return b.op("broadcast", b.op("reshape", summed, shape=(size,)), dims=[0], shape=(size, width))
    chosen = weight(sources[-1])
    for k in reversed(range(len(sources) - 1)):
        picked = b.op("eq", source, full(b, k, source.type))
        chosen = b.op("select", picked, weight(sources[k]), chosen)
    return b.op("reshape", chosen, shape=(size * width,))


def _constants(specialized: Module, b: Builder, terms: list[Term]) -> tuple[float | None, ...]:
    """Each term's value where simplification folds its whole weight into one constant, else None."""
    weights = cleanup(b.finish("weights", [t.weight for t in terms]), dict(specialized.funcs))
    producers = {r: op for op in weights.ops for r in op.results}
    found = []
    for v in weights.returns:
        op = producers.get(v)
        while op is not None and op.name == "broadcast":
            op = producers.get(op.operands[0])
        found.append(op.attrs["value"] if op is not None and op.name == "constant" else None)
    return tuple(found)


@dataclass(frozen=True)
class Sources:
    """Where each nonzero of a pattern (CSR order) is among the weights `nonzeros` returns: `first[k]`
    the slot of nonzero k (0 for one no term reaches, listed in `empty`: a structural zero), and
    per further term landing on nonzeros already reached, their positions and slots (`extra`,
    added)."""

    first: np.ndarray
    empty: np.ndarray
    extra: tuple[tuple[np.ndarray, np.ndarray], ...]

    def gather(self, weights: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The nonzeros, from the flat weights into `out`."""
        # every slot is in range by construction; mode "raise" with `out` gathers into a temporary
        # first and checks each index (4x the time of "wrap", which never reads outside either)
        weights.take(self.first, out=out, mode="wrap")
        if len(self.empty):
            out[self.empty] = 0
        for positions, slots in self.extra:
            out[positions] += weights[slots]
        return out


def gather_sources(diagonals: Diagonals, pattern: Pattern) -> Sources:
    """Where each nonzero of `pattern` is among the weights `nonzeros` returns for these
    diagonals. NotDirect if a term lies outside the pattern (see `_positions`)."""
    starts = diagonals.slots(pattern.rows)
    slots, positions = [], []
    for t, (rows, at) in enumerate(_positions(diagonals, pattern)):
        slots.append(starts[t] + (rows if diagonals.constants[t] is None else np.zeros_like(rows)))
        positions.append(at)
    slot, position = np.concatenate(slots), np.concatenate(positions)
    order = np.argsort(position, kind="stable")
    slot, position = slot[order], position[order]
    layer = np.arange(len(position)) - np.searchsorted(position, position)
    first = np.full(pattern.nnz, -1, np.int64)
    first[position[layer == 0]] = slot[layer == 0]
    extra = tuple((position[layer == k], slot[layer == k]) for k in range(1, int(layer.max(initial=0)) + 1))
    return Sources(np.maximum(first, 0), np.flatnonzero(first < 0), extra)


@dataclass(frozen=True)
class RowLayout:
    """The nonzeros as a table [rows, width], where every row of the pattern has `width` of them
    (a periodic stencil's): entry (r, j), nonzero r * width + j, is the sum of the weights at row
    r of the terms `sources[source[r, j]]` (none: a structural zero). Sums of the same constants are
    one source (a stencil's equal coefficients), so a few selects place every nonzero."""

    width: int
    sources: tuple[tuple[int, ...], ...]
    source: np.ndarray


def row_layout(diagonals: Diagonals, pattern: Pattern) -> RowLayout | None:
    """The RowLayout of the nonzeros of `pattern` for these diagonals; None when its rows differ
    in length or their entries need more than MAX_SOURCES sources (`gather_sources` serves those).
    NotDirect if a term lies outside the pattern (see `_positions`)."""
    rows = pattern.rows
    width = pattern.nnz // rows if rows else 0
    if not width or (np.diff(pattern.indptr) != width).any():
        return None
    landing = np.zeros(pattern.nnz, np.uint64)       # per nonzero, a bit per term landing on it
    for t, (_, at) in enumerate(_positions(diagonals, pattern)):
        landing[at] |= np.uint64(1) << np.uint64(t)
    masks, which = np.unique(landing, return_inverse=True)
    if len(masks) > 4 * MAX_SOURCES:     # each a Python step below; so many are not a few sources
        return None
    by_value: dict[tuple, int] = {}         # the sum a source computes -> the source
    sources: list[tuple[int, ...]] = []
    chosen = np.empty(len(masks), np.int32)
    for k, mask in enumerate(masks.tolist()):
        ids = tuple(t for t in range(len(diagonals.constants)) if mask >> t & 1)
        # the terms added in order, a constant by its value (-0.0 apart): one sum, to the last bit
        value = tuple(t if diagonals.constants[t] is None else float(diagonals.constants[t]).hex() for t in ids)
        if value not in by_value:
            by_value[value] = len(sources)
            sources.append(ids)
        chosen[k] = by_value[value]
    if len(sources) > MAX_SOURCES:
        return None
    return RowLayout(width, tuple(sources), chosen[which].reshape(rows, width))


def _positions(diagonals: Diagonals, pattern: Pattern) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per term, the rows it has a column in and the nonzero (of the pattern's CSR order) each
    lands on. NotDirect if a term lies outside the pattern (which covers every nonzero the
    Jacobian can have: only a rule disagreeing with the sparsity rules would put one there)."""
    width = max(pattern.columns, 1)
    keys = pattern.row_ids() * width + pattern.indices          # sorted: CSR rows, sorted columns
    found = []
    for cols in diagonals.columns:
        rows = np.flatnonzero(cols >= 0)
        wanted = rows * width + cols[rows]
        at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
        if len(wanted) and (not len(keys) or (keys[at] != wanted).any()):
            raise NotDirect("a term of the result lies outside its detected pattern")
        found.append((rows, at))
    return found


def _terms(module: Module, name: str, wrt: int,
           sizes: Mapping[str, int]) -> tuple[Module, Builder, Value, list[Term]]:
    """The kernel specialized to `sizes`, a builder holding its ops and the terms' weights, its
    float result, and the terms of that result."""
    specialized, func = specialize(module, name, sizes)
    results = [v for v in func.returns if v.type.dtype.is_float]
    if len(results) != 1 or not func.params[wrt].type.dtype.is_float:
        raise NotDirect(f"@{name} needs one float result and a float param {wrt}")
    b = Builder(dict(specialized.funcs), func.loc)
    b.params = list(func.params)
    walk = _Walk(b, Context({}, specialized, SPARSITY))
    x = func.params[wrt]
    size = int(np.prod(x.type.shape, dtype=np.int64))
    walk.terms[x] = [Term(full(b, 1.0, x.type), np.arange(size, dtype=np.int64))]
    walk.states.update({p: Dependence(p.type.shape) for p in func.params})     # integer values unknown
    for op in func.ops:
        walk.step(op)
    terms = walk.terms.get(results[0], [])
    if not terms:
        raise NotDirect(f"the result of @{name} does not depend on param {wrt}")
    return specialized, b, results[0], terms


class _Walk:
    """The terms of each value, op by op, and each value's `Dependence` (its shape, and its
    elements where the constants fix them: the indices a gather reads)."""

    def __init__(self, b: Builder, ctx: Context):
        self.b, self.ctx = b, ctx
        self.terms: dict[Value, list[Term]] = {}
        self.states: dict[Value, Dependence] = {}

    def step(self, op: Op) -> None:
        self.b.ops.append(op)
        states = [self.states[v] for v in op.operands]
        moving = [k for k, v in enumerate(op.operands) if self.terms.get(v)]
        if OPS[op.name].regions:
            if moving:
                raise NotDirect(f"'{op.name}' runs a region")
            self.states.update({r: Dependence(self.ctx.shape(r.type.shape)) for r in op.results})
            return
        for result, state in zip(op.results, SPARSITY.apply(op, states, self.ctx), strict=True):
            self.states[result] = SPARSITY.keep(op.name, result, state, self.ctx)
        if not moving or not op.results[0].type.dtype.is_float:
            return
        if len(op.results) != 1:
            raise NotDirect(f"'{op.name}' has {len(op.results)} results")
        reads = {k: self._reads(op, states, k) for k in moving}
        terms = [t for group in self._groups(op, reads) if (t := self._term(op, group, reads)) is not None]
        self.terms[op.results[0]] = self._merged(terms, op)

    def _reads(self, op: Op, states: list[Dependence], k: int) -> np.ndarray:
        """Per result element, the element of operand k it reads (-1: none), by the op's
        sparsity rule on an identity pattern; NotDirect where one reads several."""
        probe = list(states)
        probe[k] = Dependence(states[k].shape, Pattern.identity(states[k].size))
        (state,) = SPARSITY.apply(op, probe, self.ctx)
        size = int(np.prod(self.ctx.shape(op.results[0].type.shape), dtype=np.int64))
        read = np.full(size, -1, np.int64)
        if state.pattern is None:
            return read
        counts = np.diff(state.pattern.indptr)
        if counts.max(initial=0) > 1:
            raise NotDirect(f"'{op.name}' reads several elements of an operand into one")
        read[counts == 1] = state.pattern.indices
        return read

    def _groups(self, op: Op, reads: dict[int, np.ndarray]) -> list[list[tuple[int, Term]]]:
        """The operands' terms, each alone; or, where the moving operands fill apart elements of
        the result (concat, stack, pad), the k-th term of each together."""
        lists = {k: self.terms[op.operands[k]] for k in reads}
        filled = np.stack([r >= 0 for r in reads.values()])
        if len(reads) > 1 and (filled.sum(axis=0) <= 1).all():
            longest = max(map(len, lists.values()))
            return [[(k, ts[j]) for k, ts in lists.items() if j < len(ts)] for j in range(longest)]
        return [[(k, t)] for k, ts in lists.items() for t in ts]

    def _term(self, op: Op, group: list[tuple[int, Term]], reads: dict[int, np.ndarray]) -> Term | None:
        """The result's term of these operand terms: the tangent rule on their weights, the
        columns of the elements each result element reads."""
        incoming: list[Value | None] = [None] * len(op.operands)
        columns = np.full(len(next(iter(reads.values()))), -1, np.int64)
        for k, term in group:
            incoming[k] = term.weight
            read = reads[k]
            columns = np.where(read >= 0, term.columns[np.maximum(read, 0)], columns)
        with self.b.at(op.loc):
            (weight,) = tangent_rules[op.name](self.b, op, tuple(incoming))
        if weight is None or (columns < 0).all():
            return None
        return Term(weight, columns)

    def _merged(self, terms: list[Term], op: Op) -> list[Term]:
        """Terms of one column map as one, their weights added; NotDirect past MAX_TERMS."""
        by_columns: dict[bytes, Term] = {}
        for term in terms:
            key = term.columns.tobytes()
            same = by_columns.get(key)
            if same is None:
                by_columns[key] = term
                continue
            with self.b.at(op.loc):
                by_columns[key] = Term(self.b.op("add", same.weight, term.weight), same.columns)
        if len(by_columns) > MAX_TERMS:
            raise NotDirect(f"a value after '{op.name}' has {len(by_columns)} diagonals (over {MAX_TERMS})")
        return list(by_columns.values())
