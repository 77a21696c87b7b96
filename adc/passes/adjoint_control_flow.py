"""Reverse mode through control flow: the adjoint rules of `if`, `for` and `while`.

An `if` becomes an `if` of its branches' VJPs, which return the cotangents of every float value
the branches read (zeros where a branch does not read one), so both take and give the same.

A loop runs its body's VJP over the iterations backwards, each step reading the carried values
the iteration started from. Two reversals, both built for the default policy, which picks one at
run time by giving the other no iterations:

- Stored residuals (`_StoredSteps`; `checkpoint=1` uses only this): the body's VJP is split
  (split_vjp.py); the forward, a `scan` replacing the primal loop, runs the first half and stacks
  per iteration the residuals and the carried values the second half reads; the backward runs
  the second half over them, last first. Nothing is recomputed. Taken while the n records fit
  STORE_ALL_BYTES.
- Segments (`_Segments`; `checkpoint=k`, k >= 2, uses only this): the iterations are cut into
  segments of K; the forward scan stores the state at the start of each segment; the backward
  takes the segments from the last, recomputes a segment's states from its snapshot (a `scan` of
  its first K-1 steps) and runs the VJP steps over them backwards. That stores ceil(n/K) + K - 1
  states and recomputes at most one forward. K is the loop's `checkpoint`; under the default
  policy, 1 while n states fit STORE_ALL_BYTES, else ceil(sqrt(n)): at most 2 sqrt(n) states.

Every choice gives the same gradient.

A `while` first counts its iterations (the loop, carrying a counter too, replaces the primal one),
then is reversed as a `for` of that count whose body ignores its iteration number.

    %0 = for %n, %x, %w {body = @step, carried = 1, checkpoint = 0}       ==>
    %m = select %fits, %n, 0                (the iterations whose residuals are stored)
    %x1, %rows.. = scan %m, %x, %w {body = @step_fwd_stored, length = "T", ...}
    %K = ...segment length...           %s = (n - m + K - 1) / K
    %0, %snaps = scan %s, %x1, %w, %n - %m, %K {body = @step_segment, length = "T1", ...}
    %c1, %dw1 = for %s, %ct, %zeros, %snaps, %w, ... {body = @step_segment_vjp, ...}
    %dx, %dw = for %m, %c1, %dw1, %rows.., %x, %w, %m {body = @step_bwd_stored, ...}
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Iterator, Sequence

from adc.ir.builder import Builder, full
from adc.ir.core import Func, FuncRef, Op, Value
from adc.ir.types import BOOL, F64, I64, TensorType, num_elements
from adc.passes.regions import build_region, derived_once, extend, like

STORE_ALL_BYTES = 256 * 2 ** 20
COUNTER = TensorType(I64)


def if_adjoint(b: Builder, op: Op, cts):
    captured = op.operands[1:]
    floats = [j for j, v in enumerate(captured) if v.type.dtype.is_float]
    seeds = [_zeros(b, r.type) if ct is None else ct for ct, r in zip(cts, op.results)]
    branches = {key: _padded_vjp(b.funcs, op.attrs[key], [v.type for v in captured], floats)
                for key in ("then_branch", "else_branch")}
    outs = iter(b.emit("if", op.operands[0], *captured, *seeds, **branches))
    return (None,) + tuple(next(outs) if j in floats else None for j in range(len(captured)))


def for_adjoint(b: Builder, op: Op, cts):
    k = op.attrs["carried"]
    count, inits, captured = op.operands[0], op.operands[1:1 + k], op.operands[1 + k:]
    with _in_place_of(b, op):
        n = b.op("maximum", count, b.op("constant", dtype=I64, value=0))
    return (None,) + _reverse(b, op, n, inits, captured, op.attrs["body"], op.attrs["checkpoint"], cts)


def while_adjoint(b: Builder, op: Op, cts):
    k = op.attrs["carried"]
    inits, captured = op.operands[:k], op.operands[k:]
    cond, body = FuncRef(op.attrs["cond"]), FuncRef(op.attrs["body"])
    params = like(inits) + [Value(COUNTER, "count")] + like(captured)

    def counting_cond(inner: Builder) -> list[Value]:
        p = inner.params
        return list(inner.emit("call", *p[:k], *p[k + 1:], callee=cond))

    def counting_body(inner: Builder) -> list[Value]:
        p = inner.params
        step = inner.emit("call", *p[:k], *p[k + 1:], callee=body)
        return [*step, inner.op("add", p[k], inner.op("constant", dtype=I64, value=1))]

    with _in_place_of(b, op, replace=True):
        zero = b.op("constant", dtype=I64, value=0)
        (n,) = extend(b, op, [*inits, zero, *captured],
                      {"body": build_region(b.funcs, f"{body}_counting", params, counting_body, op.loc),
                       "carried": k + 1,
                       "cond": build_region(b.funcs, f"{cond}_counting", like(params), counting_cond, op.loc)})
    step_params = [Value(COUNTER, "i")] + like(inits) + like(captured)
    as_for = derived_once(   # one per body, so that its reversals are too (regions.derived_once)
        b.funcs, b.funcs[body], "as a for body", lambda step: (step,),
        lambda: b.funcs[build_region(b.funcs, f"{body}_step", step_params,
                                     lambda inner: list(inner.emit("call", *step_params[1:], callee=body)), op.loc)])
    return _reverse(b, None, n, inits, captured, as_for.name, 0, cts)


def scan_adjoint(b: Builder, op: Op, cts):
    """A scan is a loop whose rows are read after it: reversed as the loop carrying, besides its
    state, a scalar that adds up each row times its cotangent (fixed: a stop_gradient), with
    cotangent 1. What reverse over reverse meets: the recording scans of a reversed loop."""
    k = op.attrs["carried"]
    count, inits, captured = op.operands[0], op.operands[1:1 + k], op.operands[1 + k:]
    rows = [j for j, ct in enumerate(cts[k:]) if ct is not None]
    row_cts = [cts[k + j] for j in rows]
    acc = TensorType(F64)
    params = [Value(COUNTER, "i")] + like(inits) + [Value(acc, "acc")] + like(captured) + like(row_cts, [
        f"ct{j}" for j in rows])
    body = FuncRef(op.attrs["body"])

    def step(inner: Builder) -> list[Value]:
        p = inner.params
        i, state, total, cap, seen = p[0], p[1:1 + k], p[1 + k], p[2 + k:2 + k + len(captured)], p[2 + k + len(captured):]
        results = inner.emit("call", i, *state, *cap, callee=body)
        for j, ct in zip(rows, seen):
            row = results[k + j]
            fixed = inner.op("stop_gradient", inner.op("gather", ct, i, axis=0))
            term = inner.op("reduce_sum", inner.op("mul", row, fixed), axes=list(range(row.type.rank)))
            total = inner.op("add", total, term if row.type.dtype == F64 else inner.op("convert", term, dtype=F64))
        return [*results[:k], total]

    as_for = build_region(b.funcs, f"{op.attrs['body']}_summed", params, step, op.loc)
    n = b.op("maximum", count, b.op("constant", dtype=I64, value=0))
    got = _reverse(b, None, n, [*inits, full(b, 0.0, acc)], [*captured, *row_cts], str(as_for), 0,
                   [*cts[:k], full(b, 1.0, acc)])
    return (None, *got[:k], *got[k + 1:k + 1 + len(captured)])


# ---------------------------------------------------------------- loop reversal

@contextmanager
def _in_place_of(b: Builder, op: Op, replace: bool = False) -> Iterator[None]:
    """Ops emitted inside the block go before `op`; with `replace`, in its place (they must define
    its results)."""
    index = next(k for k, o in enumerate(b.ops) if o is op)
    after = b.ops[index + 1 if replace else index:]
    del b.ops[index:]
    try:
        yield
    finally:
        b.ops.extend(after)


def _reverse(b: Builder, primal: Op | None, n: Value, inits: Sequence[Value], captured: Sequence[Value],
             body: str, checkpoint: int, cts) -> tuple[Value | None, ...]:
    """The cotangents of `inits` and `captured` of the loop running `body` n times (module
    docstring). A `primal` for loop is replaced by the recording scans; without one (a while),
    they run after the counting loop."""
    k, m = len(inits), len(captured)
    floats = [j for j in range(k) if inits[j].type.dtype.is_float]
    cap_floats = [j for j in range(m) if captured[j].type.dtype.is_float]
    if not floats and not cap_floats:
        return (None,) * (k + m)
    loc = b.loc
    stored = _StoredSteps(b, body, inits, captured, floats, cap_floats, loc) if checkpoint in (0, 1) else None
    # the scans' lengths, before `b` is cut at `primal`; apart from every function's, so that inlining
    # the function this reversal ends up in never renames them, copying the regions that use them
    bound = frozenset(s for func in b.funcs.values() for s in func.bound_symbols)
    first = fresh_symbol(b.params, b.ops, "T", also=bound)
    lengths = (first, fresh_symbol(b.params, b.ops, "T", also=bound | {first}))
    with _in_place_of(b, primal, replace=True) if primal is not None else nullcontext():
        start, rest = inits, n
        if stored is not None:
            steps = n if checkpoint == 1 else b.op("select", stored.fit(b, n), n, b.op("constant", dtype=I64, value=0))
            start = stored.record(b, steps, primal if checkpoint == 1 else None, lengths[0])
            rest = b.op("sub", n, steps)
        if checkpoint != 1:
            segments = _Segments(b, body, start, captured, rest, checkpoint, primal, lengths[1], loc)
    seeds = [_zeros(b, inits[j].type) if cts[j] is None else cts[j] for j in floats]
    sums = [_zeros(b, captured[j].type) for j in cap_floats]
    if checkpoint != 1:
        seeds, sums = segments.reverse(b, floats, cap_floats, seeds, sums)
    if stored is not None:
        seeds, sums = stored.reverse(b, steps, seeds, sums)
    found = {**dict(zip(floats, seeds)), **{k + j: v for j, v in zip(cap_floats, sums)}}
    return tuple(found.get(j) for j in range(k + m))


class _StoredSteps:
    """Reversal by stored residuals: the forward runs the first half of the body's split VJP
    (split_vjp.py) as a scan stacking, per iteration, what the backward half reads — the residuals
    and the carried values it takes — so the backward runs the second half over them backwards
    and recomputes nothing. What K = 1 would store and more; used for the iterations whose
    stacks fit STORE_ALL_BYTES (`fit`): all of them, or none."""

    def __init__(self, b: Builder, body: str, inits, captured, floats, cap_floats, loc):
        from adc.passes.split_vjp import split_in       # the pass differentiates the body

        k = len(inits)
        self.k, self.inits, self.captured, self.loc = k, inits, captured, loc
        self.floats, self.cap_floats = floats, cap_floats
        self.split = split_in(b.funcs, body, [1 + j for j in floats] + [1 + k + j for j in cap_floats])
        read = {v for op in self.split.backward.ops for v in op.operands} | set(self.split.backward.returns)
        self.read = [j for j in range(k) if self.split.backward.params[1 + j] in read]     # carried it takes
        self.residuals = [r.type for r in self.split.forward.returns[k:]]

    def fit(self, b: Builder, n: Value) -> Value:
        """Whether n iterations' stacks fit STORE_ALL_BYTES."""
        return _fit(b, n, [self.inits[j].type for j in self.read] + self.residuals)

    def record(self, b: Builder, steps: Value, primal: Op | None, length: str) -> list[Value]:
        """The scan of the first `steps` iterations, stacking what the backward reads (in place
        of `primal` when given); returns the carried values after them."""
        k, forward = self.k, FuncRef(self.split.forward.name)
        params = [Value(COUNTER, "i"), *like(self.inits), *like(self.captured)]

        def build(inner: Builder) -> list[Value]:
            out = inner.emit("call", *params, callee=forward)
            return [*out[:k], *(params[1 + j] for j in self.read), *out[k:]]

        record = build_region(b.funcs, f"{self.split.forward.name}_stored", params, build, self.loc)
        operands = [steps, *self.inits, *self.captured]
        attrs = {"axis": 0, "body": record, "carried": k, "length": length}
        if primal is not None:
            self.stacks = extend(b, primal, operands, attrs, name="scan")
            return list(primal.results)
        out = b.emit("scan", *operands, **attrs)
        self.stacks = out[k:]
        return list(out[:k])

    def reverse(self, b: Builder, steps: Value, seeds, sums) -> tuple[list[Value], list[Value]]:
        """The backward half over the `steps` stacked iterations, last first: the carried values'
        cotangents and the captured values' sums, from `seeds` and `sums`."""
        k, f, g = self.k, len(self.floats), len(self.cap_floats)
        read, stacks = self.read, self.stacks
        params = [Value(COUNTER, "u"), *_cotangent_params(self.inits, self.captured, self.floats, self.cap_floats),
                  *like(stacks, [f"stack{j}" for j in range(len(stacks))]), *like(self.inits, [f"init{j}" for j in range(k)]),
                  *like(self.captured), Value(COUNTER, "steps")]
        backward = FuncRef(self.split.backward.name)

        def build(inner: Builder) -> list[Value]:
            u, cts, totals = params[0], params[1:1 + f], params[1 + f:1 + f + g]
            rows, firsts = params[1 + f + g:1 + f + g + len(stacks)], params[1 + f + g + len(stacks):1 + f + g + len(stacks) + k]
            cap = params[1 + f + g + len(stacks) + k:-1]
            one = inner.op("constant", dtype=I64, value=1)
            i = inner.op("sub", inner.op("sub", params[-1], one), u)
            taken = [inner.op("gather", row, i, axis=0) for row in rows]
            carried = list(firsts)          # the carried values the backward half does not read
            for j, value in zip(read, taken):
                carried[j] = value
            seeds = dict(zip(self.floats, cts))
            ct_in = [seeds[c] if c in seeds else _zeros(inner, self.inits[c].type) for c in range(k)]
            grads = dict(zip(self.split.wrt, inner.emit("call", i, *carried, *cap, *taken[len(read):], *ct_in,
                                                        callee=backward)))
            return _stepped(inner, grads, self.inits, self.floats, self.cap_floats, totals)

        step = build_region(b.funcs, f"{self.split.backward.name}_stored", params, build, self.loc)
        outs = b.emit("for", steps, *seeds, *sums, *stacks, *self.inits, *self.captured, steps, body=step,
                      carried=f + g, checkpoint=0)
        return list(outs[:f]), list(outs[f:])


class _Segments:
    """Reversal by segments of K iterations (module docstring): the forward stacks the state at the
    start of each segment; the backward recomputes a segment's states from it and runs the body's
    VJP over them backwards."""

    def __init__(self, b: Builder, body: str, inits, captured, n: Value, checkpoint: int, primal: Op | None,
                 length: str, loc):
        k = len(inits)
        self.body, self.inits, self.captured, self.n, self.loc = body, inits, captured, n, loc
        self.segment = _segment_length(b, n, inits, checkpoint)
        one = b.op("constant", dtype=I64, value=1)
        self.segments = b.op("floor_div", b.op("add", n, b.op("sub", self.segment, one)), self.segment)
        record = _recording_region(b, body, inits, captured, loc)
        operands = [self.segments, *inits, *captured, n, self.segment]
        attrs = {"axis": 0, "body": record, "carried": k, "length": length}
        if primal is not None:
            self.snapshots = extend(b, primal, operands, attrs, name="scan")
        else:
            self.snapshots = b.emit("scan", *operands, **attrs)[k:]

    def reverse(self, b: Builder, floats, cap_floats, seeds, sums) -> tuple[list[Value], list[Value]]:
        f = len(floats)
        back = _segment_vjp(b, self.body, self.inits, self.captured, floats, cap_floats, self.snapshots, self.loc)
        outs = b.emit("for", self.segments, *seeds, *sums, *self.snapshots, *self.captured, self.n, self.segment,
                      self.segments, body=back, carried=f + len(cap_floats), checkpoint=0)
        return list(outs[:f]), list(outs[f:])


def _fit(b: Builder, n: Value, types: Sequence[TensorType]) -> Value:
    """Whether n records of a value of each of `types` fit STORE_ALL_BYTES."""
    size = sum(num_elements(t.shape) * t.dtype.numpy.itemsize for t in types)
    per_step = (b.op("constant", dtype=I64, value=size) if isinstance(size, int)
                else b.op("dim", dtype=I64, value=size))
    return b.op("le", b.op("mul", n, per_step), b.op("constant", dtype=I64, value=STORE_ALL_BYTES))


def _segment_length(b: Builder, n: Value, inits: Sequence[Value], checkpoint: int) -> Value:
    """K: `checkpoint` when >= 1; else 1 while n states fit STORE_ALL_BYTES, else ceil(sqrt(n))."""
    if checkpoint >= 1:
        return b.op("constant", dtype=I64, value=checkpoint)
    fits = _fit(b, n, [v.type for v in inits])
    root = b.op("neg", b.op("floor", b.op("neg", b.op("sqrt", b.op("convert", n, dtype=F64)))))
    root = b.op("maximum", b.op("convert", root, dtype=I64), b.op("constant", dtype=I64, value=1))
    return b.op("select", fits, b.op("constant", dtype=I64, value=1), root)


def _shifted_region(b: Builder, body: str, inits, captured, loc, stacked: bool) -> FuncRef:
    """(j, carried..., captured..., start) -> body(start + j, carried..., captured...), then (`stacked`)
    the new carried values again, as the rows a scan stacks."""
    params = [Value(COUNTER, "j"), *like(inits), *like(captured), Value(COUNTER, "start")]

    def build(inner: Builder) -> list[Value]:
        i = inner.op("add", params[-1], params[0])
        new = list(inner.emit("call", i, *params[1:-1], callee=FuncRef(body)))
        return new + new if stacked else new

    return build_region(b.funcs, f"{body}_{'recompute' if stacked else 'from'}", params, build, loc)


def _recording_region(b: Builder, body: str, inits, captured, loc) -> FuncRef:
    """The recording scan's body: (s, carried..., captured..., n, K) runs segment s, returning the
    carried values after it, then those it started from (the snapshot)."""
    k = len(inits)
    params = [Value(COUNTER, "segment"), *like(inits), *like(captured), Value(COUNTER, "n"), Value(COUNTER, "K")]
    shifted = _shifted_region(b, body, inits, captured, loc, stacked=False)

    def build(inner: Builder) -> list[Value]:
        start, length = _segment_bounds(inner, params[0], params[-2], params[-1])
        after = inner.emit("for", length, *params[1:-2], start, body=shifted, carried=k, checkpoint=0)
        return [*after, *params[1:1 + k]]

    return build_region(b.funcs, f"{body}_segment", params, build, loc)


def _segment_bounds(b: Builder, s: Value, n: Value, segment: Value) -> tuple[Value, Value]:
    """(start, length) of segment s: K iterations from s*K, fewer for the last."""
    start = b.op("mul", s, segment)
    return start, b.op("minimum", segment, b.op("sub", n, start))


def _segment_vjp(b: Builder, body: str, inits, captured, floats, cap_floats, snapshots, loc) -> FuncRef:
    """The backward's body: (t, cts..., sums..., snapshots..., captured..., n, K, segments) takes
    segment segments-1-t: recomputes its states from its snapshot, then runs the VJP steps over
    them backwards, returning the carried values' cotangents and the captured values' sums."""
    k, f, g = len(inits), len(floats), len(cap_floats)
    params = [Value(COUNTER, "t"), *_cotangent_params(inits, captured, floats, cap_floats),
              *like(snapshots, [f"snapshot{j}" for j in range(k)]), *like(captured),
              Value(COUNTER, "n"), Value(COUNTER, "K"), Value(COUNTER, "segments")]
    recompute = _shifted_region(b, body, inits, captured, loc, stacked=True)

    def build(inner: Builder) -> list[Value]:
        t, n, segment, segments = params[0], *params[-3:]
        one = inner.op("constant", dtype=I64, value=1)
        s = inner.op("sub", inner.op("sub", segments, one), t)
        start, length = _segment_bounds(inner, s, n, segment)
        first = [inner.op("gather", snap, s, axis=0) for snap in params[1 + f + g:1 + f + g + k]]
        cap = params[1 + f + g + k:-3]
        steps = inner.op("maximum", inner.op("sub", length, one), inner.op("constant", dtype=I64, value=0))
        states = inner.emit("scan", steps, *first, *cap, start, axis=0, body=recompute, carried=k,
                            length=fresh_symbol(params, inner.ops, "S"))[k:]
        step = _step_vjp(b, body, inits, captured, floats, cap_floats, states, loc)
        return list(inner.emit("for", length, *params[1:1 + f + g], *first, *states, *cap, start, length,
                               body=step, carried=f + g, checkpoint=0))

    return build_region(b.funcs, f"{body}_segment_vjp", params, build, loc)


def _cotangent_params(inits, captured, floats, cap_floats) -> list[Value]:
    """The carried cotangents of the float carried values and the sums of the float captured ones."""
    return [*like([inits[j] for j in floats], [f"ct{j}" for j in floats]),
            *like([captured[j] for j in cap_floats], [f"sum{j}" for j in cap_floats])]


def _step_vjp(b: Builder, body: str, inits, captured, floats, cap_floats, states, loc) -> FuncRef:
    """One backward step: (u, cts..., sums..., first..., states..., captured..., start, length) takes
    iteration j = length-1-u of the segment, from the state it started from (the snapshot `first`
    when j is 0, else the recomputed state j-1), and applies the body's VJP there."""
    from adc.passes.adjoint import region_vjp       # the pass differentiates the body

    k, f, g = len(inits), len(floats), len(cap_floats)
    grad = region_vjp(b.funcs, body, [1 + j for j in floats] + [1 + k + j for j in cap_floats])
    params = [Value(COUNTER, "u"), *_cotangent_params(inits, captured, floats, cap_floats),
              *like(inits, [f"first{j}" for j in range(k)]), *like(states, [f"states{j}" for j in range(k)]),
              *like(captured), Value(COUNTER, "start"), Value(COUNTER, "length")]

    def build(inner: Builder) -> list[Value]:
        u, cts, sums = params[0], params[1:1 + f], params[1 + f:1 + f + g]
        first, rows = params[1 + f + g:1 + f + g + k], params[1 + f + g + k:1 + f + g + 2 * k]
        cap, start, length = params[1 + f + g + 2 * k:-2], params[-2], params[-1]
        one, zero = inner.op("constant", dtype=I64, value=1), inner.op("constant", dtype=I64, value=0)
        j = inner.op("sub", inner.op("sub", length, one), u)
        previous = inner.op("maximum", inner.op("sub", j, one), zero)
        at_start = inner.op("eq", j, zero)
        carried = [inner.op("select", _everywhere(inner, at_start, x.type), x,
                            inner.op("gather", stack, previous, axis=0)) for x, stack in zip(first, rows)]
        seeds = dict(zip(floats, cts))
        ct_in = [seeds[c] if c in seeds else _zeros(inner, inits[c].type) for c in range(k)]
        grads = dict(zip(grad.wrt, inner.emit("call", inner.op("add", start, j), *carried, *cap, *ct_in,
                                              callee=FuncRef(grad.func.name))))
        return _stepped(inner, grads, inits, floats, cap_floats, sums)

    return build_region(b.funcs, f"{body}_step_vjp", params, build, loc)


def _stepped(b: Builder, grads: dict[int, Value], inits, floats, cap_floats, sums) -> list[Value]:
    """After one backward step giving `grads` (body param -> cotangent): the float carried
    values' cotangents, then the float captured values' sums with the step's added."""
    k = len(inits)
    new_cts = [grads[1 + c] if 1 + c in grads else _zeros(b, inits[c].type) for c in floats]
    new_sums = [b.op("add", total, grads[1 + k + c]) if 1 + k + c in grads else total
                for total, c in zip(sums, cap_floats)]
    return new_cts + new_sums


# ---------------------------------------------------------------- helpers

def _padded_vjp(funcs: dict[str, Func], name: str, types: Sequence[TensorType], floats: list[int]) -> FuncRef:
    """The VJP of branch `name` w.r.t. every float param (`floats`), zeros for those it does not
    read, so both branches of an if return the same cotangents."""
    from adc.passes.adjoint import region_vjp       # the pass differentiates the branch

    grad = region_vjp(funcs, name, floats)
    if list(grad.wrt) == floats:
        return FuncRef(grad.func.name)
    params = like(grad.func.params)

    def build(inner: Builder) -> list[Value]:
        found = dict(zip(grad.wrt, inner.emit("call", *params, callee=FuncRef(grad.func.name))))
        return [found[j] if j in found else _zeros(inner, types[j]) for j in floats]

    return build_region(funcs, f"{grad.func.name}_all", params, build, grad.func.loc)


def _zeros(b: Builder, t: TensorType) -> Value:
    return full(b, False if t.dtype is BOOL else 0.0 if t.dtype.is_float else 0, t)


def _everywhere(b: Builder, flag: Value, t: TensorType) -> Value:
    """The bool scalar `flag` at every position of a `t` tensor."""
    return b.op("broadcast", flag, dims=[], shape=t.shape) if t.rank else flag


def fresh_symbol(values: Sequence[Value], ops: Sequence[Op], base: str, also: frozenset[str] = frozenset()) -> str:
    """A dimension symbol none of `values` or `ops` uses or binds, nor in `also`: `base`, `base1`, ..."""
    taken = {s for v in values for s in v.type.symbols} | set(also)
    taken |= {s for op in ops for r in op.results for s in r.type.symbols}
    taken |= {op.attrs["length"] for op in ops if op.name == "scan"}    # bound, though no result may show it
    candidate, n = base, 1
    while candidate in taken:
        candidate, n = f"{base}{n}", n + 1
    return candidate
