"""Control flow in kernels: `for`, `while` and `if` statements become the `for`, `while` and `if`
ops, whose regions are functions of the module (closure conversion).

    def f(x: f32[N], n: i64) -> f32[N]:      func @f_for0(%i: i64, %y: f32[N], %x: f32[N]) -> f32[N] {
        y = x                                   %0 = add %y, %x : f32[N]
        for i in range(n):                      return %0
            y = y + x                         }
        return y                              func @f(%x: f32[N], %n: i64) -> f32[N] {
                                                %0 = for %n, %x, %x {body = @f_for0, carried = 1} : f32[N]
                                                return %0
                                              }

- The names a loop assigns that are bound before it are its carried state. Each keeps the type of
  its value before the loop; a number (`acc = 0.0`) takes the type it has after one iteration
  (found by elaborating the body once on trial, its ops discarded).
- Every other outer tensor a region reads is captured: an operand of the op after the carried
  values, a parameter of each region (siblings, the cond and body of a while or the branches of
  an if, share one list of captures).
- An `if` defines the names either branch assigns that were bound before it, and those both
  branches assign. A static condition (a literal, a comparison of numbers) elaborates only the
  branch it picks.
- After a region, its loop counter and the names it alone defines are `Unbound`: a use is a
  located error saying why.
"""
from __future__ import annotations

from typing import Callable

from adc.errors import CompileError, Location
from adc.frontend import ast
from adc.frontend.elaborate import MISSING, KernelElaborator, Unbound
from adc.frontend.scope import Deferred, Results, describe, is_static
from adc.ir.core import Func, FuncRef, Value
from adc.ir.types import BOOL, F32, I64, SymDim, TensorType

MAX_TRIP_COUNT = 2**63 - 1     # a loop's counter is an i64


class Captures:
    """The outer tensors sibling regions read, in order of first use: the op's operands after its
    carried values."""

    def __init__(self):
        self.outer: list[Value] = []
        self.names: dict[Value, str | None] = {}    # the name each was first read by


class RegionElaborator(KernelElaborator):
    """Elaborates the statements of one region into its own function. Names it does not bind
    resolve in its parent: tensors become parameters (captured), numbers and dimensions are
    used as they are. A trial elaborator (`trial`) builds into copies and captures nothing in
    its ancestors."""

    def __init__(self, parent: KernelElaborator, captures: Captures, trial: bool = False):
        funcs = dict(parent.funcs) if trial else parent.funcs
        super().__init__(parent.fdef, parent.defs, funcs, parent.externs)
        self.b.loc = parent.b.loc
        self.parent, self.captures, self.trial = parent, captures, trial
        self.dims, self.region_names = parent.dims, parent.region_names
        self.params_of: dict[Value, Value] = {}     # outer tensor -> the parameter it is here
        self.nesting = parent.nesting + 1

    def lookup(self, name: str) -> object:
        if name in self.env:
            return self.env[name]
        outer = self.parent.peek(name) if self.trial else self.parent.lookup(name)
        value = self.capture(outer, name)
        if isinstance(value, Value):
            self.env[name] = value
        return value

    def peek(self, name: str) -> object:
        return self.env[name] if name in self.env else self.parent.peek(name)

    def capture(self, outer: object, name: str) -> object:
        if isinstance(outer, Value):
            return self.param_for(outer, name)
        if isinstance(outer, Deferred):
            return Deferred(lambda dtype: self.param_for(self.parent.tensor(outer, dtype), name))
        if isinstance(outer, (list, Results)) and any(isinstance(v, (Value, Deferred)) for v in outer):
            return type(outer)(self.capture(v, name) for v in outer)
        return outer

    def param_for(self, outer: Value, name: str | None = None) -> Value:
        if outer not in self.params_of:
            if outer not in self.captures.outer:
                self.captures.outer.append(outer)
                self.captures.names[outer] = name or outer.name
            self.params_of[outer] = Value(outer.type, self.captures.names[outer])
        return self.params_of[outer]

    def function(self, kind: str, leading: list[Value], results: list[Value], loc: Location) -> Func:
        """The region function: `leading` parameters, then one per capture of the sibling group
        (in the group's order, so siblings take the same operands), returning `results`."""
        captured = [self.param_for(v) for v in self.captures.outer]
        name = self.region_names.fresh(kind, self.parent.funcs)
        func = Func(name, tuple(leading + captured), tuple(self.b.ops), tuple(results), loc)
        self.parent.funcs[name] = func
        return func


# ---------------------------------------------------------------- loops

def for_statement(cx: KernelElaborator, stmt: ast.For) -> None:
    cx.check_nesting(1, "this for loop", stmt.loc)
    start, count, step = _range(cx, stmt.iterable)
    checkpoint = _checkpoint(cx, stmt.iterable)
    carried = _carried(cx, stmt.body, exclude=stmt.target.id, loc=stmt.loc)
    types = _carried_types(cx, carried, lambda trial: _run_for_body(trial, stmt, start, step, trial.b.param(
        "i", TensorType(I64))))
    inits = [_init(cx, carried[n], t, stmt.loc) for n, t in types.items()]
    body = RegionElaborator(cx, Captures())
    iteration = body.b.param("i", TensorType(I64))
    params = _carried_params(body, types)
    _run_for_body(body, stmt, start, step, iteration)
    results = _carried_results(body, types, stmt.loc)
    func = body.function("for", [iteration, *params], results, stmt.loc)
    with cx.b.at(stmt.loc):
        outs = cx.b.emit("for", count, *inits, *body.captures.outer, body=FuncRef(func.name), carried=len(types),
                         checkpoint=checkpoint)
    _bind_after(cx, types, outs, body, stmt.body, "loop", stmt.loc)
    cx.env[stmt.target.id] = Unbound(f"the loop counter '{stmt.target.id}' is only defined inside its loop "
                                     f"(line {stmt.loc.line})")


def _run_for_body(body: RegionElaborator, stmt: ast.For, start: object, step: int, iteration: Value) -> None:
    with body.b.at(stmt.target.loc):
        index = iteration if step == 1 else body.op("mul", iteration, body.constant(step, I64))
        if start != 0:
            index = body.op("add", index, body.tensor(start if isinstance(start, (int, SymDim))
                                                      else body.capture(start, "start"), I64))
    body.env[stmt.target.id] = index
    body.statements(stmt.body)


def _range(cx: KernelElaborator, e: ast.Expr) -> tuple[object, Value, int]:
    """(start, trip count, step) of `range(stop)`, `range(start, stop)`, `range(start, stop, step)`:
    start and stop integers, dimensions or integer scalars, step a nonzero static integer."""
    if not isinstance(e, ast.Call) or e.func != "range" or not 1 <= len(e.args) <= 3:
        raise CompileError("a for loop runs over range(stop), range(start, stop) or range(start, stop, step)",
                           e.loc)
    args = []
    for a in e.args:
        v = cx.expr(a)
        if not (is_static(v) or isinstance(v, Value) and v.type.rank == 0 and v.type.dtype.is_int):
            raise CompileError(f"range() takes integers, dimensions or integer scalars, got {describe(v)}", a.loc)
        with cx.b.at(a.loc):
            args.append(cx.op("convert", v, dtype=I64) if isinstance(v, Value) and v.type.dtype is not I64 else v)
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    if not isinstance(step, int) or step == 0:
        raise CompileError(f"the step of range() must be a nonzero integer literal, got {describe(step)}",
                           e.args[2].loc)
    with cx.b.at(e.loc):
        if type(start) is int and type(stop) is int:
            count = cx.tensor(_static_trip_count(start, stop, step, e.loc), I64)
        elif is_static(start) and is_static(stop) and step == 1:
            count = cx.op("maximum", cx.tensor(stop - start, I64), cx.constant(0, I64))
        else:
            count = _trip_count(cx, cx.tensor(start, I64), cx.tensor(stop, I64), step)
    return start, count, step


def _static_trip_count(start: int, stop: int, step: int, loc: Location) -> int:
    count = max(0, (stop - start + step - (1 if step > 0 else -1)) // step)
    if count > MAX_TRIP_COUNT:
        raise CompileError(f"range({start}, {stop}, {step}) runs {count} iterations, more than the "
                           f"{MAX_TRIP_COUNT} a loop counts", loc)
    return count


def _trip_count(cx: KernelElaborator, start: Value, stop: Value, step: int) -> Value:
    """len(range(start, stop, step)) in i64 arithmetic that cannot overflow where the count fits:
    `stop - start` (or, with a step, `+ step - 1`) wrapped for far-apart bounds, and
    range(N, 0, -2**63) ran no iteration. The count is qb - qa + [rb >= ra] with q, r the floor
    quotients and remainders by the step of the last index a step may reach (stop - 1, or stop + 1
    going down) and of start, none larger than the bounds; 0 unless start is before stop."""
    def const(k: int) -> Value:
        return cx.constant(k, I64)
    ahead = cx.op("lt", start, stop) if step > 0 else cx.op("gt", start, stop)
    if step == 1:
        return cx.op("select", ahead, cx.op("sub", stop, start), const(0))
    last = cx.op("sub" if step > 0 else "add", stop, const(1))
    divisor = const(step)
    qb, rb = cx.op("floor_div", last, divisor), cx.op("mod", last, divisor)
    qa, ra = cx.op("floor_div", start, divisor), cx.op("mod", start, divisor)
    partial = cx.op("select", cx.op("ge" if step > 0 else "le", rb, ra), const(1), const(0))
    return cx.op("select", ahead, cx.op("add", cx.op("sub", qb, qa), partial), const(0))


def _checkpoint(cx: KernelElaborator, e: ast.Call) -> int:
    """`range(..., checkpoint=k)`: reverse mode stores every k-th state (0, the default: k = ceil(sqrt(n)))."""
    k = 0
    for kw in e.keywords:
        if kw.name != "checkpoint":
            raise CompileError(f"range() has no argument named '{kw.name}'; it takes start, stop, step and "
                               "checkpoint=", kw.loc)
        k = cx.expr(kw.value)
        if type(k) is not int or k < 0:
            raise CompileError(f"checkpoint= must be an integer literal k >= 1 (store every k-th state) or 0 "
                               f"(the default policy), got {describe(k)}", kw.value.loc)
    return k


def while_statement(cx: KernelElaborator, stmt: ast.While) -> None:
    cx.check_nesting(1, "this while loop", stmt.loc)
    carried = _carried(cx, stmt.body, exclude=None, loc=stmt.loc)
    types = _carried_types(cx, carried, lambda trial: trial.statements(stmt.body))
    inits = [_init(cx, carried[n], t, stmt.loc) for n, t in types.items()]
    captures = Captures()
    cond, body = RegionElaborator(cx, captures), RegionElaborator(cx, captures)
    cond_params, body_params = _carried_params(cond, types), _carried_params(body, types)
    test = _condition(cond, stmt.cond, cond.expr(stmt.cond), "while loop")
    body.statements(stmt.body)
    results = _carried_results(body, types, stmt.loc)
    body_func = body.function("while", body_params, results, stmt.loc)
    cond_func = cond.function("cond", cond_params, [test], stmt.cond.loc)
    with cx.b.at(stmt.loc):
        outs = cx.b.emit("while", *inits, *captures.outer, body=FuncRef(body_func.name), carried=len(types),
                         cond=FuncRef(cond_func.name))
    _bind_after(cx, types, outs, body, stmt.body, "loop", stmt.loc)


def _carried(cx: KernelElaborator, body: tuple[ast.Stmt, ...], exclude: str | None,
             loc: Location) -> dict[str, object]:
    """The names `body` assigns that are bound before it, with their values there."""
    carried = {}
    for name in assigned_names(body):
        value = cx.lookup(name) if name != exclude else MISSING
        if not _bound(value):
            continue
        if isinstance(value, Deferred):
            value = cx.tensor(value)
        if not isinstance(value, (Value, bool, int, float, SymDim)):
            raise CompileError(f"'{name}' is a {describe(value)}: a loop can only carry tensors and numbers",
                               loc)
        carried[name] = value
    return carried


def _carried_types(cx: KernelElaborator, carried: dict[str, object],
                   run_trial: Callable[[RegionElaborator], None]) -> dict[str, TensorType]:
    """The type of each carried name: its tensor's, or for a number the type it has after one
    iteration, which a trial elaboration of the body finds."""
    numbers = [n for n, v in carried.items() if not isinstance(v, Value)]
    after: dict[str, object] = {}
    if numbers:
        trial, count = RegionElaborator(cx, Captures(), trial=True), cx.region_names.count
        for name, value in carried.items():
            trial.env[name] = value if name in numbers else trial.b.param(name, value.type)
        run_trial(trial)
        cx.region_names.count = count
        after = {n: trial.env[n] for n in numbers}
    return {n: v.type if isinstance(v, Value) else _number_type(after[n]) for n, v in carried.items()}


def _number_type(value: object) -> TensorType:
    if isinstance(value, Value):
        return value.type
    if isinstance(value, bool):
        return TensorType(BOOL)
    return TensorType(I64 if isinstance(value, (int, SymDim)) else F32)


def _init(cx: KernelElaborator, value: object, t: TensorType, loc: Location) -> Value:
    with cx.b.at(loc):
        return value if isinstance(value, Value) else cx.broadcast(cx.tensor(value, t.dtype), t.shape)


def _carried_params(region: RegionElaborator, types: dict[str, TensorType]) -> list[Value]:
    params = [Value(t, name) for name, t in types.items()]
    region.env.update(zip(types, params))
    return params


def _carried_results(body: RegionElaborator, types: dict[str, TensorType], loc: Location) -> list[Value]:
    """The value of each carried name after the body, of the type it had before."""
    return [_as_type(body, name, body.env[name], t, "the loop", body.assigned_at.get(name, loc))
            for name, t in types.items()]


def _as_type(cx: KernelElaborator, name: str, value: object, t: TensorType, where: str, loc: Location) -> Value:
    with cx.b.at(loc):
        if isinstance(value, (bool, int, float, SymDim)) and not (isinstance(value, bool) and t.dtype is not BOOL):
            value = cx.broadcast(cx.tensor(value, t.dtype), t.shape)
        if isinstance(value, Deferred):
            value = cx.tensor(value, t.dtype)
    if not isinstance(value, Value) or value.type != t:
        got = value.type if isinstance(value, Value) else describe(value)
        raise CompileError(f"'{name}' is {t} before {where} but {got} after it; a name {where} assigns "
                           f"keeps one type", loc)
    return value


def _bind_after(cx: KernelElaborator, types: dict[str, TensorType], outs: tuple[Value, ...],
                region: RegionElaborator, body: tuple[ast.Stmt, ...], kind: str, loc: Location) -> None:
    """After a loop: the carried names are its results; the names only its body defines are unbound."""
    cx.env.update(zip(types, outs))
    cx.assigned_at.update({**region.assigned_at, **dict.fromkeys(types, loc)})
    for name in assigned_names(body):
        if name not in types and name in region.assigned_at:
            cx.env[name] = Unbound(f"'{name}' is assigned inside the {kind} (line {region.assigned_at[name].line}) "
                                   f"but not before it, so it has no value after it when the loop runs no "
                                   f"iteration; assign it before the {kind}")


def _condition(cx: KernelElaborator, e: ast.Expr, value: object, what: str) -> Value:
    """`value`, the value of `e`, as the scalar bool condition of a `what`."""
    with cx.b.at(e.loc):
        if isinstance(value, bool):
            value = cx.constant(value, BOOL)
    if not isinstance(value, Value) or value.type != TensorType(BOOL):
        hint = "; reduce it with any() or all()" if isinstance(value, Value) and value.type.dtype is BOOL else ""
        raise CompileError(f"the condition of a {what} must be a scalar bool, got {describe(value)}{hint}", e.loc)
    return value


# ---------------------------------------------------------------- branches

def if_statement(cx: KernelElaborator, stmt: ast.If) -> None:
    cond = cx.expr(stmt.cond)
    if isinstance(cond, bool):          # static: only the branch taken exists
        cx.statements(stmt.then if cond else stmt.otherwise)
        return
    cond = _condition(cx, stmt.cond, cond, "if statement")
    cx.check_nesting(1, "this if statement", stmt.loc)
    captures = Captures()
    branches = [RegionElaborator(cx, captures), RegionElaborator(cx, captures)]
    assigned = [assigned_names(stmt.then), assigned_names(stmt.otherwise)]
    for branch, stmts in zip(branches, (stmt.then, stmt.otherwise)):
        branch.statements(stmts)
    names = [n for n in dict.fromkeys(assigned[0] + assigned[1])
             if (n in assigned[0] and n in assigned[1]) or _bound(cx.peek(n))]
    types = _branch_types(branches, names, stmt.loc)
    results = [[_as_type(b, n, b.lookup(n), types[n], "the if statement", b.assigned_at.get(n, stmt.loc))
                for n in names] for b in branches]
    then, otherwise = (b.function("if", [], r, stmt.loc) for b, r in zip(branches, results))
    with cx.b.at(stmt.loc):
        outs = cx.b.emit("if", cond, *captures.outer, then_branch=FuncRef(then.name),
                         else_branch=FuncRef(otherwise.name))
    cx.env.update(zip(names, outs))
    cx.assigned_at.update({**branches[1].assigned_at, **branches[0].assigned_at, **dict.fromkeys(names, stmt.loc)})
    for label, branch, mine in zip(("then", "else"), branches, assigned):
        for name in mine:
            if name not in names:
                cx.env[name] = Unbound(f"'{name}' is assigned only in the {label} branch (line "
                                       f"{branch.assigned_at[name].line}) of the if statement at line "
                                       f"{stmt.loc.line}; assign it in both branches or before the if")


def _bound(value: object) -> bool:
    return value is not MISSING and not isinstance(value, Unbound)


def _branch_types(branches: list[RegionElaborator], names: list[str], loc: Location) -> dict[str, TensorType]:
    """The type each branch gives each name: a tensor's, agreed by both; a number takes the other
    branch's tensor type, and a number in both the default type of its kind."""
    types = {}
    for name in names:
        values = [b.lookup(name) for b in branches]
        tensors = [v.type for v in values if isinstance(v, Value)]
        if len(set(tensors)) > 1:
            lines = [b.assigned_at.get(name, loc).line for b in branches]
            raise CompileError(f"the branches give '{name}' different types: {tensors[0]} (then, line {lines[0]}) "
                               f"and {tensors[1]} (else, line {lines[1]}); each name keeps one type", loc)
        types[name] = tensors[0] if tensors else _number_type(values[0])
    return types


def assigned_names(stmts: tuple[ast.Stmt, ...]) -> list[str]:
    """The names `stmts` assign (nested statements included), in order of first assignment."""
    names: dict[str, None] = {}
    stack = list(reversed(stmts))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.Assign):
            names.update(dict.fromkeys(t.id for t in stmt.targets))
        elif isinstance(stmt, (ast.AugAssign, ast.IndexAssign)):
            names.setdefault(stmt.target.id)
        elif isinstance(stmt, ast.For):
            stack += reversed(stmt.body)
        elif isinstance(stmt, ast.While):
            stack += reversed(stmt.body)
        elif isinstance(stmt, ast.If):
            stack += reversed(stmt.then + stmt.otherwise)
    return list(names)


STATEMENTS: dict[type, Callable[[KernelElaborator, ast.Stmt], None]] = {
    ast.For: for_statement, ast.While: while_statement, ast.If: if_statement}
