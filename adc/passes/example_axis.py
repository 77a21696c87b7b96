"""Do the examples of a batch mix? The analysis behind batch_jacobian's cross-example rule.

`example_axes(func, param, axis)` says, per result, along which axis its entry i depends on
entry i of `param` along `axis` only -- or MIXED, when an entry may depend on several
examples, and then a batch Jacobian (per-example seeds) is not the diagonal of the full
Jacobian; `depends_across` asks it for axis 0. "Depends" means through derivatives, what a
Jacobian sees: integer and bool values, and piecewise-constant ops (`floor`, comparisons,
`stop_gradient`), carry none, so an index computed across the batch, a `while` condition on
every example or an `if` on a batch mean do not mix examples: the Jacobian is taken at a
point, where the trip count, the branch taken and the indices are constants.

It tracks, per value, an `Examples(axis, inner)`: entry p depends on example p[axis] // inner
only (inner > 1 when the example axis is merged with the axes after it, as a reshape of
[B, N] to [B*N] does), or, inside a loop's body, `Pinned`: one example's values, x[b] of
`for b in range(B): y[b] = f(x[b])`, which a scatter at b puts back in place. One rule per op
in `example_axis_rules`:

    %0 = tanh %x                  Examples(0)         (elementwise)
    %1 = transpose %0             Examples(1)
    %2 = reshape %x [B*N]         Examples(0, N)
    %3 = gather %2, %i {axis=0}   Examples(0) when %i's row b points into [b*N, b*N+N)
                                  (adc/passes/index_forms.py: take_along_axis)
    %4 = reduce_sum %1 [1]        MIXED               (a batch mean, as in batch normalization)

Control flow is a fixed point: a loop's carried values start at their initial values' states
and take the join with what the body makes of them until nothing changes (states only rise,
None < Examples < MIXED, so this ends in two rounds per carried value); a branch's results
join both branches.

Conservative, answering MIXED although the examples may stay apart: an `if` one of whose
branches mixes (the other may be the one taken); values that cancel (`x - x` of a batch sum);
a value whose mixed part is sliced or overwritten away (states are per value, not per element);
a gather or scatter along the example axis at positions it cannot prove per example; one
example's values (x[b]) passed into a nested loop or branch; a reshape that splits the example
axis into several axes; a shifted slice of it, or a strided one whose step does not divide the merged size.
`call` and `custom_gradient` are not analysed: `function_example_axes` expands and inlines them
first (UNSUPPORTED).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from adc.ir.core import REGION_ATTRS, Func, Module, Op, Value
from adc.ir.ops import OPS, with_trait
from adc.ir.types import Dim, num_elements
from adc.passes.expand import expand_custom_gradients
from adc.passes.index_forms import UNKNOWN, IndexForm, index_form_rules, index_rows, quotient
from adc.passes.inline import callees, inline_func

MIXED = -1      # the value depends on the param, but not example by example along one axis
PUTTING_BACK = with_trait("scatter")       # the ops whose rules read Pinned operands
# calls are inlined, custom gradients expanded to calls of their forward, before the analysis
UNSUPPORTED = with_trait("calls")
NON_DIFFERENTIABLE = with_trait("non_differentiable")


@dataclass(frozen=True)
class Examples:
    """Entry p depends on example p[axis] // inner of the param only."""

    axis: int
    inner: Dim = 1


@dataclass(frozen=True)
class Pinned:
    """Every entry depends on one example only: the one a scalar `index` picks (under the index
    rule) along an example axis of `extent`, as x[b] does in `for b in range(B): y[b] = f(x[b])`.
    Valid inside one function run (one iteration of a loop's body): a region's results and a
    control-flow op's operands that are Pinned are taken as MIXED."""

    index: Value
    extent: Dim


def example_axes(func: Func, param: int, axis: int = 0, funcs: Mapping[str, Func] | None = None
                 ) -> tuple[int | None, ...]:
    """Per result of `func`: None when it does not depend on `param` through derivatives, the
    axis k along which its entry i depends on entry i of `param` along `axis` only, or MIXED.
    `funcs` holds the region functions of its loops and branches. A scalar param mixes."""
    return _analysed(func, param, axis, funcs)[0]


def function_example_axes(module: Module, name: str, param: int, axis: int = 0) -> tuple[int | None, ...]:
    """example_axes of function `name` of `module`, its custom gradients expanded and its calls
    inlined (what the analysis cannot look into otherwise)."""
    func, funcs = _inlined(module, name)
    return _analysed(func, param, axis, funcs)[0]


def where_examples_mix(module: Module, name: str, param: int, axis: int = 0, result: int = 0) -> Op | None:
    """The op where the examples first mix on the way to result `result` of function `name` (an op
    of the function, of one of its regions or of an inlined callee, with its own location), or
    None when they do not: what an error points at. A loop or branch whose results mix though
    its operands do not is itself the place."""
    func, funcs = _inlined(module, name)
    return _analysed(func, param, axis, funcs)[1][result]


def _inlined(module: Module, name: str) -> tuple[Func, dict[str, Func]]:
    expanded = expand_custom_gradients(module)
    clones: dict[str, Func] = {}
    func = inline_func(expanded[name], expanded, clones)
    return func, {**expanded.funcs, **clones}


def _analysed(func: Func, param: int, axis: int, funcs: Mapping[str, Func] | None) -> tuple[tuple, tuple]:
    """The result axes of example_axes, and per result the op its mixing comes from (or None)."""
    p = func.params[param]
    start = None if not p.type.dtype.is_float else Examples(axis) if p.type.rank else MIXED
    walk = _Walk(funcs or {})
    states = walk.run(func, [start if v is p else None for v in func.params], [UNKNOWN] * len(func.params))
    axes = tuple(s.axis if isinstance(s, Examples) and s.inner == 1 else MIXED if s is not None else None
                 for s in states)
    return axes, tuple(walk.origins.get(v) if a == MIXED else None for v, a in zip(func.returns, axes))


def depends_across(func: Func, param: int, result: int = 0, funcs: Mapping[str, Func] | None = None) -> bool:
    """True when result[i] may depend on param[j] for some i != j along axis 0 (examples mix)."""
    return example_axes(func, param, 0, funcs)[result] not in (None, 0)


def join(a, b):
    """The state of a value that is either a or b."""
    return b if a is None else a if b is None or a == b else MIXED


class _Walk:
    """Runs the rules over a function's ops, and over the regions of its control-flow ops."""

    def __init__(self, funcs: Mapping[str, Func]):
        self.funcs = funcs
        self.inlined: dict[str, Func] = {}
        self.memo: dict[tuple, tuple] = {}
        self.forms: dict[Value, IndexForm] = {}
        self.origins: dict[Value, Op] = {}      # a MIXED value -> the op where its examples first mixed

    def form(self, value: Value) -> IndexForm:
        return self.forms.get(value, UNKNOWN)

    def region(self, name: str, states, forms) -> tuple:
        """The states of region `name`'s results, given its params' states and index forms."""
        key = (name, tuple(states), tuple(forms))
        if key not in self.memo:
            found = self.run(self._callable(name), states, forms)
            self.memo[key] = tuple(MIXED if isinstance(s, Pinned) else s for s in found)
        return self.memo[key]

    def _callable(self, name: str) -> Func:
        if name not in self.inlined:
            func = self.funcs[name]
            if callees(func):
                clones: dict[str, Func] = {}
                func = inline_func(func, Module(dict(self.funcs)), clones)
                self.funcs = {**self.funcs, **clones}
            self.inlined[name] = func
        return self.inlined[name]

    def run(self, func: Func, states, forms) -> tuple:
        found = {p: s for p, s in zip(func.params, states) if s is not None}
        self.forms.update(zip(func.params, forms))      # every param's: a region runs again
        for op in func.ops:
            if len(op.results) == 1 and op.result.type.dtype.is_int:
                rule = index_form_rules.get(op.name)
                self.forms[op.result] = rule(op, [self.form(v) for v in op.operands]) if rule else UNKNOWN
            operand_states = [found.get(v) for v in op.operands]
            if all(s is None for s in operand_states):
                continue
            made = [(r, s) for r, s in zip(op.results, self._apply(op, operand_states))
                    if s is not None and r.type.dtype.is_float]
            found.update(made)
            inherited = next((self.origins[v] for v, s in zip(op.operands, operand_states)
                              if s == MIXED and v in self.origins), op)
            self.origins.update((r, inherited) for r, s in made if s == MIXED)
        return tuple(found.get(v) for v in func.returns)

    def _apply(self, op: Op, states) -> tuple:
        if op.name in NON_DIFFERENTIABLE:
            return (None,) * len(op.results)        # no derivative flows through
        rule = example_axis_rules.get(op.name)
        if op.name in REGION_ATTRS:
            return rule(op, [MIXED if isinstance(s, Pinned) else s for s in states], self)
        if rule is None or MIXED in states:
            return (MIXED,) * len(op.results)
        if op.name not in PUTTING_BACK and any(isinstance(s, Pinned) for s in states):
            return (_one(states),) * len(op.results)     # of one example's values: that example's
        return rule(op, states, self)


# example_axis_rules[op_name](op, states, walk) -> the state of each result
#   states: per operand, None (no dependence on the param), MIXED (control-flow ops only; any
#   other op with a MIXED operand mixes), Examples, or Pinned (the ops of PUTTING_BACK only; any
#   other op of one example's values gives that example's); walk.form(v) is an integer operand's
#   IndexForm, walk.region(name, states, forms) a region's result states.
# Called when some operand depends on the param. Non-float results and the ops of
# NON_DIFFERENTIABLE carry no dependence. Every op has a rule or is in UNSUPPORTED.
ExampleAxisRule = Callable[[Op, list, _Walk], tuple]
example_axis_rules: dict[str, ExampleAxisRule] = {}


def _one(states) -> "Examples | int":
    """The common state of the operands that depend on the param, or MIXED."""
    found = {s for s in states if s is not None}
    return found.pop() if len(found) == 1 else MIXED


def _moved(state: Examples, axis: int) -> Examples:
    return Examples(axis, state.inner)


def elementwise_example_axis(op, states, walk):
    # f(x)[i] uses x[i] only: the state stays (all dependent operands must agree)
    return (_one(states),)


def no_dependence(op, states, walk):
    # a source, or an op of NON_DIFFERENTIABLE (listed for completeness: the walk skips them)
    return (None,) * len(op.results)


for _name, _opdef in OPS.items():
    if "elementwise" in _opdef.traits:
        example_axis_rules[_name] = elementwise_example_axis
    if "source" in _opdef.traits or _name in NON_DIFFERENTIABLE:
        example_axis_rules[_name] = no_dependence


def broadcast_example_axis(op, states, walk):
    # axis k moves to dims[k], unless a size-1 example axis is stretched (every entry is example 0)
    (s,), x = states, op.operands[0]
    target = op.attrs["dims"][s.axis]
    return (_moved(s, target) if x.type.shape[s.axis] == op.attrs["shape"][target] else MIXED,)


def reshape_example_axis(op, states, walk):
    # The elements keep their row-major order e, in which entry e is example (e // unit) mod count,
    # unit = inner * (the elements after the axis), count = axis size / inner. In the new shape
    # that is Examples(j, inner'), inner' = unit / (the elements after axis j), when axis j holds
    # count * inner' positions: it takes the axis to [B*N] (merged) and back. An example axis
    # split over several axes mixes (conservative).
    (s,), shape, new = states, op.operands[0].type.shape, op.attrs["shape"]
    count = quotient(shape[s.axis], s.inner)
    unit = s.inner * num_elements(shape[s.axis + 1:])
    for j in range(len(new)):
        inner = quotient(unit, num_elements(new[j + 1:]))
        if count is not None and inner is not None and new[j] == count * inner:
            return (Examples(j, inner),)
    return (MIXED,)


def transpose_example_axis(op, states, walk):
    # result axis j is operand axis perm[j]
    (s,) = states
    return (_moved(s, list(op.attrs["perm"]).index(s.axis)),)


example_axis_rules.update(broadcast=broadcast_example_axis, reshape=reshape_example_axis,
                          transpose=transpose_example_axis)


def slice_example_axis(op, states, walk):
    # entry j of the result is entry start + step*j; along the example axis that stays in example
    # j // (inner / step) when step divides inner and start < step (a prefix when step is 1)
    (s,), a = states, op.attrs
    start, step = a["start"][s.axis], a["step"][s.axis]
    inner = quotient(s.inner, step)
    if inner is None or not (isinstance(start, int) and 0 <= start < step):
        return (MIXED,)
    return (Examples(s.axis, inner),)


def slice_add_example_axis(op, states, walk):
    # base's entries keep their state; update entry j lands at start + step*j, in its own example
    # when that is j along the example axis (start 0, step 1); both must say the same
    (base, updates), a = states, op.attrs
    kept = updates is None or (a["start"][updates.axis] == 0 and a["step"][updates.axis] == 1)
    return (join(base, updates if kept else MIXED),)


def pad_example_axis(op, states, walk):
    # kept when nothing is padded before the example axis and the padding value does not depend
    (s, value), a = states, op.attrs
    return (s if s is not None and value is None and a["low"][s.axis] == 0 else MIXED,)


def concat_example_axis(op, states, walk):
    # kept when joining along another axis, or along the example axis when only the first part
    # depends (the others follow it, each entry at its own place)
    s, axis = _one(states), op.attrs["axis"]
    if s == MIXED or s.axis != axis:
        return (s,)
    return (s if all(t is None for t in states[1:]) else MIXED,)


example_axis_rules.update(slice=slice_example_axis, slice_add=slice_add_example_axis, pad=pad_example_axis,
                          concat=concat_example_axis)


def reduce_example_axis(op, states, walk):
    # reducing over the example axis mixes; otherwise it moves left past the reduced axes before it
    (s,), reduced = states, op.attrs["axes"]
    return (MIXED if s.axis in reduced else _moved(s, s.axis - sum(1 for r in reduced if r < s.axis)),)


def scan_example_axis(op, states, walk):
    # scanning along the example axis mixes; along another axis it stays
    (s,) = states
    return (MIXED if s.axis == op.attrs["axis"] else s,)


for _name, _opdef in OPS.items():
    if "reduction" in _opdef.traits:
        example_axis_rules[_name] = reduce_example_axis
    if "scan" in _opdef.traits:
        example_axis_rules[_name] = scan_example_axis


def matmul_example_axis(op, states, walk):
    # (A @ B)[.., m, n] = sum_k A[.., m, k] B[.., k, n]: batch axes and A's rows / B's columns keep
    # the example axis; the contracted axis mixes
    rank = op.result.type.rank
    left, right = states
    rows = None if left is None else MIXED if left.axis == rank - 1 else left
    columns = None if right is None else MIXED if right.axis == rank - 2 else right
    return (_one([rows, columns]) if MIXED not in (rows, columns) else MIXED,)


example_axis_rules["matmul"] = matmul_example_axis


def stacked_matrices_example_axis(op, states, walk):
    # cholesky, triangular_solve, qr, eigh, svd: the stacking axes keep the example axis (in every
    # result), a matrix's own axes mix, but for the columns of a solve's right-hand sides, each solved on its own
    rank = op.operands[0].type.rank

    def kept(state, columns_apart: bool):
        if state is None or state.axis < rank - 2:
            return state
        return state if columns_apart and state.axis == rank - 1 else MIXED
    return (_one([kept(s, k == 1 and op.name == "triangular_solve") for k, s in enumerate(states)]),) * len(op.results)


example_axis_rules["cholesky"] = stacked_matrices_example_axis
example_axis_rules["triangular_solve"] = stacked_matrices_example_axis
example_axis_rules["qr"] = stacked_matrices_example_axis
example_axis_rules["eigh"] = stacked_matrices_example_axis
example_axis_rules["svd"] = stacked_matrices_example_axis


def lu_factor_example_axis(op, states, walk):
    # the factor as cholesky's (the pivots, integers, carry no dependence)
    return stacked_matrices_example_axis(op, states, walk)[:1] + (None,)


example_axis_rules["lu_factor"] = lu_factor_example_axis


def gather_example_axis(op, states, walk):
    # result = x's axes before `axis`, the indices' axes, x's axes after. Along another axis the
    # examples stay, whatever the indices (computed from the examples or not: they carry no
    # derivative). Along the example axis: where the indices' form proves that index entry p
    # reads row p[a] of m positions, m dividing inner, example p[a] // (inner / m)
    # (take_along_axis); one scalar index picks one example (x[b]).
    (s, _), axis, (x, indices) = states, op.attrs["axis"], op.operands
    if s.axis != axis:
        return (s if s.axis < axis else _moved(s, s.axis + indices.type.rank - 1),)
    rows = index_rows(walk.form(indices), x.type.shape[axis], indices.type.shape)
    inner = None if rows is None else quotient(s.inner, rows[1])
    if inner is not None:
        return (Examples(axis + rows[0], inner),)
    return (Pinned(indices, x.type.shape[axis]) if indices.type.rank == 0 and s.inner == 1 else MIXED,)


def scatter_example_axis(op, states, walk):
    # base with each update written (or added) at its index along `axis`: base's entries keep their
    # state and each update lands where the indices put it; both must say the same. The updates'
    # axes are base's before `axis`, the indices' axes, base's after.
    (base, _, updates), axis, (_, indices, _) = states, op.attrs["axis"], op.operands
    rank = indices.type.rank
    if isinstance(updates, Pinned):     # y[b] = f(x[b]): example b written at position b
        written = Examples(axis) if updates == Pinned(indices, op.result.type.shape[axis]) else updates
    elif updates is None or updates.axis < axis:
        written = updates
    elif updates.axis >= axis + rank:
        written = _moved(updates, updates.axis - rank + 1)
    else:   # examples along an index axis: written in rows of m positions, one row per index entry
        rows = index_rows(walk.form(indices), op.result.type.shape[axis], indices.type.shape)
        fits = rows is not None and rows[0] == updates.axis - axis
        written = Examples(axis, rows[1] * updates.inner) if fits else MIXED
    return (join(base, written),)


example_axis_rules.update(gather=gather_example_axis, scatter=scatter_example_axis,
                          scatter_add=scatter_example_axis)


def _fixed_point(walk: _Walk, op: Op, leading: int, states) -> tuple[list, tuple]:
    """A loop's carried states and its body's other results: the carried values start as the
    operands after the `leading` ones (a trip count) and take the join with what the body returns
    for them until nothing changes. The body's params: an iteration counter when there is a trip
    count, the carried values, the captured values (their index forms passed in)."""
    k, operands = op.attrs["carried"], op.operands[leading:]
    carried, captured = list(states[leading:leading + k]), list(states[leading + k:])
    forms = [UNKNOWN] * (leading + k) + [walk.form(v) for v in operands[k:]]
    while True:
        out = walk.region(op.attrs["body"], [None] * leading + carried + captured, forms)
        joined = [join(c, o) for c, o in zip(carried, out[:k])]
        if joined == carried:
            return carried, out[k:]
        carried = joined


def for_example_axis(op, states, walk):
    return tuple(_fixed_point(walk, op, 1, states)[0])


def scan_loop_example_axis(op, states, walk):
    # also each iteration's rows, stacked along a new axis at `axis` (the iteration's, not an example's)
    carried, rows = _fixed_point(walk, op, 1, states)
    axis = op.attrs["axis"]
    stacked = [_moved(s, s.axis + (s.axis >= axis)) if isinstance(s, Examples) else s for s in rows]
    return tuple(carried) + tuple(stacked)


def while_example_axis(op, states, walk):
    # the condition only sets the trip count, a constant where the Jacobian is taken
    return tuple(_fixed_point(walk, op, 0, states)[0])


def if_example_axis(op, states, walk):
    # either branch may be the one taken: the join of both (the condition carries no derivative)
    forms = [walk.form(v) for v in op.operands[1:]]
    then, other = (walk.region(op.attrs[key], list(states[1:]), forms) for key in ("then_branch", "else_branch"))
    return tuple(join(a, b) for a, b in zip(then, other))


example_axis_rules.update({"for": for_example_axis, "scan": scan_loop_example_axis, "while": while_example_axis,
                           "if": if_example_axis})
