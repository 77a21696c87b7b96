"""Where integer index tensors point: the value analysis behind gathers and scatters along an
example axis (adc/passes/example_axis.py).

An index tensor's `IndexForm` says its entry at position p is `scale * p[axis] + r` with r in
[lo, max(hi)] — an affine function of one coordinate plus a bounded remainder. That is what
proves a gather keeps examples apart when it reads along the example axis itself, as
`take_along_axis` does: it clamps the indices to [0, N-1] and offsets row b by b*N into x
flattened to [B*N], so row b reads inside example b:

    %13 = maximum (minimum %i, N-1), 0        r in [0, max(N-1, 0)]
    %16 = mul (iota {axis = 0}), N            N * p[0]
    %18 = add %13, %16                        N * p[0] + r, r in [0, max(N-1, 0)]

One rule per op in `index_form_rules`; an op without one gives UNKNOWN (any value), and a
gather or scatter along the example axis then mixes (conservative).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

from adc.ir.core import Op
from adc.ir.types import Dim, SymDim, num_elements


@dataclass(frozen=True)
class IndexForm:
    """Entry p is scale * p[axis] + r, lo <= r <= max(hi); axis None: no positional term; lo or hi
    None: unbounded that way. hi is a set of candidates, since max(N-1, 0) has no closed form."""

    axis: int | None
    scale: Dim
    lo: Dim | None
    hi: frozenset | None

    @staticmethod
    def exactly(value: Dim) -> "IndexForm":
        return IndexForm(None, 0, value, frozenset({value}))

    @property
    def exact(self) -> Dim | None:
        """The one value every entry has, if known."""
        if self.axis is None and self.hi is not None and len(self.hi) == 1 and self.lo in self.hi:
            return self.lo
        return None


def nonnegative(d: Dim, positive: frozenset[str] = frozenset()) -> bool:
    """Whether d >= 0 for every value of its symbols (dimensions: >= 0; those in `positive`: >= 1),
    proved by every coefficient being >= 0 once each symbol s of `positive` is written 1 + s'."""
    if not isinstance(d, SymDim):
        return d >= 0
    total: Dim = 0
    for monomial, coefficient in d.terms:
        term: Dim = coefficient
        for s in monomial:
            term = term * (SymDim.symbol(s + "'") + 1 if s in positive else SymDim.symbol(s))
        total = total + term
    return all(c >= 0 for _, c in _terms(total))


def quotient(a: Dim, b: Dim) -> Dim | None:
    """a / b when b (an int or one monomial) divides every term of a, else None."""
    b_terms = _terms(b)
    if len(b_terms) != 1 or b == 0:
        return None
    ((divisor, factor),) = b_terms
    kept: dict[tuple[str, ...], int] = {}
    for monomial, coefficient in _terms(a):
        rest = Counter(monomial) - Counter(divisor)
        if coefficient % factor or rest.total() != len(monomial) - len(divisor):
            return None
        kept[tuple(sorted(rest.elements()))] = coefficient // factor
    return SymDim.of(kept)


def _terms(d: Dim) -> tuple:
    return d.terms if isinstance(d, SymDim) else (((), d),)


def _smaller(a: Dim | None, b: Dim | None) -> Dim | None:
    """min(a, b) when one is provably the smaller (None: -inf)."""
    if a is None or b is None:
        return None
    return a if nonnegative(b - a) else b if nonnegative(a - b) else None


def _larger(a: Dim | None, b: Dim | None) -> Dim | None:
    """A lower bound of max(a, b): the provably larger, else either (None: -inf)."""
    if a is None or b is None:
        return b if a is None else a
    return b if nonnegative(b - a) else a


UNKNOWN = IndexForm(None, 0, None, None)       # any value: no positional term, unbounded

# index_form_rules[op_name](op, forms) -> the IndexForm of its result (UNKNOWN when it cannot
# say); forms: the operands' (UNKNOWN for floats and the unknown). Called for integer results;
# an op without a rule gives UNKNOWN.
IndexFormRule = Callable[[Op, list[IndexForm]], IndexForm]
index_form_rules: dict[str, IndexFormRule] = {}


def iota_form(op, forms):
    return IndexForm(op.attrs["axis"], 1, 0, frozenset({0}))


def constant_form(op, forms):
    value = op.attrs["value"]
    return IndexForm.exactly(value) if isinstance(value, (int, SymDim)) and not isinstance(value, bool) else UNKNOWN


def same_form(op, forms):
    # convert between integer types, or a value passed through unchanged
    return forms[0]


index_form_rules.update(iota=iota_form, constant=constant_form, dim=constant_form, convert=same_form)


def add_form(op, forms):
    x, y = forms
    if x.axis is not None and y.axis is not None and x.axis != y.axis:
        return UNKNOWN
    lo = None if x.lo is None or y.lo is None else x.lo + y.lo
    hi = None if x.hi is None or y.hi is None else frozenset(a + b for a in x.hi for b in y.hi)
    return IndexForm(x.axis if x.axis is not None else y.axis, x.scale + y.scale, lo, hi)


def sub_form(op, forms):
    x, y = forms
    return UNKNOWN if y.exact is None else add_form(op, [x, IndexForm.exactly(-y.exact)])


def mul_form(op, forms):
    # times a known non-negative value: every part scales
    for f, c in ((forms[0], forms[1]), (forms[1], forms[0])):
        factor = c.exact
        if factor is not None and nonnegative(factor):
            lo = None if f.lo is None else f.lo * factor
            hi = None if f.hi is None else frozenset(h * factor for h in f.hi)
            return IndexForm(f.axis, f.scale * factor, lo, hi)
    return UNKNOWN


def minimum_form(op, forms):
    # of position-free values: below the smaller upper bound, above the smaller lower bound
    x, y = forms
    if x.axis is not None or y.axis is not None:
        return UNKNOWN
    hi = y.hi if x.hi is None or (y.hi is not None and len(y.hi) < len(x.hi)) else x.hi
    return IndexForm(None, 0, _smaller(x.lo, y.lo), hi)


def maximum_form(op, forms):
    x, y = forms
    if x.axis is not None or y.axis is not None:
        return UNKNOWN
    return IndexForm(None, 0, _larger(x.lo, y.lo), None if x.hi is None or y.hi is None else x.hi | y.hi)


def select_form(op, forms):
    # either value: the same positional term, the union of the ranges
    _, x, y = forms
    if (x.axis, x.scale) != (y.axis, y.scale):
        return UNKNOWN
    return IndexForm(x.axis, x.scale, _smaller(x.lo, y.lo), None if x.hi is None or y.hi is None else x.hi | y.hi)


index_form_rules.update(add=add_form, sub=sub_form, mul=mul_form, minimum=minimum_form, maximum=maximum_form,
                        select=select_form)


def broadcast_form(op, forms):
    (f,), x = forms, op.operands[0]
    if f.axis is None:
        return f
    target = op.attrs["dims"][f.axis]
    if x.type.shape[f.axis] == op.attrs["shape"][target]:
        return IndexForm(target, f.scale, f.lo, f.hi)
    return IndexForm(None, 0, f.lo, f.hi)       # a size-1 axis stretched: its coordinate is always 0


def transpose_form(op, forms):
    (f,) = forms
    if f.axis is None:
        return f
    return IndexForm(list(op.attrs["perm"]).index(f.axis), f.scale, f.lo, f.hi)


def reshape_form(op, forms):
    # the positional axis survives when a result axis has its size and the elements before it
    (f,), shape = forms, op.operands[0].type.shape
    if f.axis is None:
        return f
    before, new = num_elements(shape[:f.axis]), op.attrs["shape"]
    for j, size in enumerate(new):
        if size == shape[f.axis] and num_elements(new[:j]) == before:
            return IndexForm(j, f.scale, f.lo, f.hi)
    return UNKNOWN


index_form_rules.update(broadcast=broadcast_form, transpose=transpose_form, reshape=reshape_form)


def index_rows(form: IndexForm, extent: Dim, index_shape) -> tuple[int, Dim] | None:
    """(a, m) when index entry p is m * p[a] + r with 0 <= r < m, and every index of a tensor of
    `index_shape` is inside [0, extent), so the index rule never moves one: entry p indexes row
    p[a] of m positions. When m divides the extent, the bounds are proved for m's symbols >= 1:
    were one 0, the axis would be empty, never read or written."""
    if form.axis is None or form.lo is None or form.hi is None or not nonnegative(form.lo):
        return None
    m = form.scale
    divides = quotient(extent, m) is not None
    positive = m.symbols if divides and isinstance(m, SymDim) and len(m.terms) == 1 else frozenset()
    if not nonnegative(m - 1, positive) or not all(nonnegative(m - 1 - h, positive) for h in form.hi):
        return None
    return (form.axis, m) if nonnegative(extent - m * index_shape[form.axis]) else None
