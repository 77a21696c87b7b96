"""AST → IR: names, weakly typed literals, explicit broadcasting, builtins, located errors.

The second stage of the pipeline, after `parse.py`. Kernels are elaborated
callees first (a cycle of calls is a CompileError), each into one `Func`
through `adc.ir.builder.Builder`, whose `at(loc)` stamps every op with the
source expression it comes from. Elaboration keeps three invariants the IR
needs: operands of elementwise ops have identical types (NumPy broadcasting
becomes `broadcast` ops), literals take the dtype of the tensors they meet, and
every error in the user's program is a `CompileError` at its line and column:

    def f(x: f32[B, N], b: f32[N]) -> f32[B, N]:    func @f(%x: f32[B,N], %b: f32[N]) -> f32[B,N] {
        return x * b + 1.0                            %0 = broadcast %b {dims = [1], shape = [B,N]} : f32[B,N]
                                                      %1 = mul %x, %0 : f32[B,N]
                                                      %2 = constant {dtype = f32, value = 1.0} : f32
                                                      %3 = broadcast %2 {dims = [], shape = [B,N]} : f32[B,N]
                                                      %4 = add %1, %3 : f32[B,N]

Expression values during elaboration: an IR `Value` (a tensor), a Python
int/float/bool (a weak literal), a `SymDim` (a dimension symbol used as a
number), a `DType` (`f64` in `dtype=f64`), a list (list and tuple literals) or
`Results` (the results of a kernel returning a tuple, only for unpacking).
"""
from __future__ import annotations

import dataclasses
import keyword
import math
import operator
from types import GeneratorType

from adc.errors import CompileError, Location
from adc.frontend import ast, indexing, python_habits
from adc.frontend.arguments import Args
from adc.frontend.builtins import builtin_rules
from adc.frontend.builtins.linalg import matmul
from adc.frontend.call_order import callees_first
from adc.frontend.externs import Extern, check_gradient, decorator_of, externs_of, gradient_declaration
from adc.frontend.scope import Deferred, Results, Scope, describe, is_static, typed
from adc.ir.builder import Builder
from adc.ir.core import REGION_ATTRS, Func, FuncRef, Module, Value, children_first
from adc.ir.ops import bind_dims
from adc.ir.shapes import needs_at
from adc.ir.trampoline import trampoline
from adc.ir.types import BOOL, MAX_BYTES, RESERVED_NAMES, DType, Dim, SymDim, TensorType, fits

BINARY_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow", "//": "floor_div", "%": "mod",
              "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne",
              "&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor", "and": "bitwise_and", "or": "bitwise_or"}
FOLD = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "**": operator.pow,
        "//": operator.floordiv, "%": operator.mod,
        "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
        "!=": operator.ne, "&": operator.and_, "|": operator.or_, "^": operator.xor,
        "and": operator.and_, "or": operator.or_}
DIM_FOLD = ("+", "-", "*")
# for, while and if blocks inside one another, those of the kernels called inside them included (once
# inlined they nest there). The compiler walks a nest on Python's stack, a few frames per level, and
# a gradient through nested while loops takes time and temporaries growing faster than the depth:
# 16 deep, about a minute to compile; 24 deep, more temporaries than fit. Python allows 20.
MAX_NESTING = 16
ARITHMETIC = ("+", "-", "*", "/", "**", "//", "%")
LOGICAL = ("and", "or", "not")           # bools only
BITWISE = ("&", "|", "^", "~")           # bools and integers
# named constants, weakly typed like float literals; a parameter, a local or a dimension of that name shadows them
CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan}


def elaborate(program: ast.Program) -> Module:
    """The IR module of a parsed program, functions in source order (a custom gradient's
    forward and backward just before its kernel)."""
    from adc.frontend.custom_gradient import elaborate_custom_gradient  # builds on this file

    defs = _definitions(program)
    externs = externs_of(program, defs)
    gradient_of = {e.gradient: e for e in externs.values() if e.gradient}
    funcs: dict[str, Func] = {name: gradient_declaration(name, e) for name, e in gradient_of.items()}
    order: dict[str, tuple[str, ...]] = {}
    contracts: dict[str, tuple[SymDim, ...]] = {}    # what a call of each kernel needs (ir/shapes.py)
    for name in callees_first(defs):
        fdef, decorator = defs[name], decorator_of(defs[name])
        before = set(funcs)
        if decorator is not None and decorator.name == "custom_gradient":
            made = elaborate_custom_gradient(fdef, defs, funcs, externs)
        else:
            made = [KernelElaborator(fdef, defs, funcs, externs, contracts).run()]
        regions = [n for n in funcs if n not in before]           # in the order made
        funcs.update((f.name, f) for f in made)
        order[name] = (*regions, *(f.name for f in made))
        if name in gradient_of:
            check_gradient(fdef, funcs[name], gradient_of[name])
    return Module({n: funcs[n] for f in program.funcs for n in order[f.name]}, program.filename)


def _definitions(program: ast.Program) -> dict[str, ast.FuncDef]:
    defs: dict[str, ast.FuncDef] = {}
    for f in program.funcs:
        if f.name in defs:
            raise CompileError(f"kernel '{f.name}' is defined twice (first at line {defs[f.name].loc.line})", f.loc)
        if f.name in builtin_rules:
            raise CompileError(f"kernel '{f.name}' has the name of a builtin; rename it", f.loc)
        defs[f.name] = f
    return defs


class KernelElaborator(Scope):
    """Elaborates one kernel: its signature, then its statements in order."""

    def __init__(self, fdef: ast.FuncDef, defs: dict[str, ast.FuncDef], funcs: dict[str, Func],
                 externs: dict[str, Extern] | None = None, contracts: dict[str, tuple[SymDim, ...]] | None = None):
        super().__init__(Builder(funcs, fdef.loc))
        self.fdef, self.defs, self.funcs, self.externs = fdef, defs, funcs, externs or {}
        self.contracts = {} if contracts is None else contracts
        self.env: dict[str, object] = {}
        self.assigned_at: dict[str, Location] = {}     # where each name was last assigned
        self.dims: dict[str, SymDim] = {}
        self.region_names = RegionNames(fdef.name, defs)
        self.nesting = 0        # the blocks it is inside (a region's: its parent's and its own)

    def run(self) -> Func:
        self.bind_params()
        declared = [self.result_type(t) for t in self.fdef.results]
        returns = self.body(declared)
        return self.b.finish(self.fdef.name, returns, self.fdef.loc)

    def bind_params(self) -> None:
        for p in self.fdef.params:
            if p.name in self.env:
                raise CompileError(f"parameter '{p.name}' is defined twice", p.loc)
            check_param_name(p)
            self.env[p.name] = self.b.param(p.name, self.param_type(p.type))

    # ------------------------------------------------------------ types

    def dtype(self, texpr: ast.TypeExpr) -> DType:
        try:
            return DType(texpr.dtype)
        except ValueError:
            raise CompileError(f"unknown type '{texpr.dtype}'; expected f32, f64, i32, i64 or bool", texpr.loc) from None

    def param_type(self, texpr: ast.TypeExpr) -> TensorType:
        """Parameter dims are integers or symbols; a symbol seen here becomes bound."""
        shape = []
        for d in texpr.dims:
            if isinstance(d, ast.Number) and type(d.value) is int:
                shape.append(d.value)
            elif isinstance(d, ast.Name):
                if d.id in RESERVED_NAMES:
                    raise CompileError(f"'{d.id}' names a dtype or a truth value; name the dimension otherwise", d.loc)
                shape.append(self.dims.setdefault(d.id, SymDim.symbol(d.id)))
            else:
                raise CompileError("a parameter dimension must be an integer or a symbol; "
                                   "write dimension expressions in the result type", d.loc)
        t = TensorType(self.dtype(texpr), tuple(shape))
        if not fits(t):
            raise CompileError(f"{t} has more than {MAX_BYTES} bytes", texpr.loc)
        return t

    def result_type(self, texpr: ast.TypeExpr) -> TensorType:
        return TensorType(self.dtype(texpr), tuple(self.dim_expr(d) for d in texpr.dims))

    def dim_expr(self, e: ast.Expr) -> Dim:
        """A result dimension: integers and bound symbols under + - *."""
        return trampoline(self._dim(e), self._dim)

    def _dim(self, e: ast.Expr):
        if isinstance(e, ast.Number) and type(e.value) is int:
            return e.value
        if isinstance(e, ast.Name):
            if e.id not in self.dims:
                raise CompileError(f"unbound dimension '{e.id}' in the result type of '{self.fdef.name}': "
                                   "result dimensions must use symbols of the parameters' types", e.loc)
            return self.dims[e.id]
        if isinstance(e, ast.BinOp) and e.op in DIM_FOLD:
            left = yield e.left
            return FOLD[e.op](left, (yield e.right))
        if isinstance(e, ast.UnaryOp):
            value = yield e.operand
            return -value if e.op == "-" else value
        raise CompileError("a result dimension must be an integer, a symbol, or + - * of them", e.loc)

    # ------------------------------------------------------------ statements

    def body(self, declared: list[TensorType]) -> list[Value]:
        stmts = self.fdef.body
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ast.Docstring):
                if i != 0:
                    raise CompileError("a string can only be the kernel's docstring, its first statement", stmt.loc)
            elif isinstance(stmt, ast.Return):
                if i != len(stmts) - 1:
                    raise CompileError("unreachable statement after return", stmts[i + 1].loc)
                return self.returns(stmt, declared)
            else:
                self.statement(stmt)
        raise CompileError(f"kernel '{self.fdef.name}' has no return statement", self.fdef.loc)

    def statements(self, stmts: tuple[ast.Stmt, ...]) -> None:
        """The statements of a loop body or a branch: no return, no docstring, no def."""
        for stmt in stmts:
            if isinstance(stmt, (ast.Return, ast.Docstring)):
                what = "return" if isinstance(stmt, ast.Return) else "a docstring"
                raise CompileError(f"{what} cannot be inside for, while or if; assign the value and "
                                   "return it after the statement", stmt.loc)
            self.statement(stmt)

    def statement(self, stmt: ast.Stmt) -> None:
        from adc.frontend import control_flow        # builds on this file

        if isinstance(stmt, ast.Assign):
            self.assign(stmt)
        elif isinstance(stmt, ast.AugAssign):
            self.aug_assign(stmt)
        elif isinstance(stmt, ast.IndexAssign):
            self.assigned_at[stmt.target.id] = stmt.loc
            self.env[stmt.target.id] = indexing.assign(self, stmt)
        elif isinstance(stmt, ast.FuncDef):
            self.nested_def(stmt)
        else:
            control_flow.STATEMENTS[type(stmt)](self, stmt)

    def lookup(self, name: str) -> object:
        """The value `name` is bound to, or MISSING; a region looks in its parent too (capturing)."""
        return self.env.get(name, MISSING)

    def peek(self, name: str) -> object:
        """As lookup, but without capturing anything: what a trial elaboration reads."""
        return self.env.get(name, MISSING)

    def nested_def(self, stmt: ast.FuncDef) -> None:
        raise CompileError(f"a nested def is only allowed in a @custom_gradient kernel, as its backward; "
                           f"define '{stmt.name}' at the top level", stmt.loc)

    def assign(self, stmt: ast.Assign) -> None:
        value = self.expr(stmt.value)
        for target in stmt.targets:
            self.assigned_at[target.id] = stmt.loc
        if len(stmt.targets) == 1:
            if isinstance(value, Results):
                raise CompileError(f"'{stmt.value.func}' returns {len(value)} values; unpack them into "
                                   f"{len(value)} names", stmt.loc)
            self.env[stmt.targets[0].id] = value
            return
        if not isinstance(value, Results):
            raise CompileError(f"cannot unpack {describe(value)}: only a call of a kernel returning a tuple "
                               "can be unpacked", stmt.value.loc)
        if len(value) != len(stmt.targets):
            raise CompileError(f"cannot unpack {len(value)} values into {len(stmt.targets)} names", stmt.loc)
        for target, v in zip(stmt.targets, value):
            self.env[target.id] = v

    def aug_assign(self, stmt: ast.AugAssign) -> None:
        """`x op= e` rebinds x to `x op e`, which must keep the type of x: a tensor keeps its dtype and
        shape (as NumPy's in-place operators), a weakly typed number may take a dtype but no axes."""
        name = stmt.target.id
        old = self.lookup(name)
        if old is MISSING or isinstance(old, Unbound):
            raise CompileError(f"'{name}' must be assigned before '{stmt.op}='", stmt.target.loc)
        self.assigned_at[name] = stmt.loc
        new = self.expr(ast.BinOp(stmt.op, stmt.target, stmt.value, stmt.loc))
        tensor_changed = isinstance(old, Value) and not (isinstance(new, Value) and new.type == old.type)
        number_grew = isinstance(old, (int, float, SymDim)) and isinstance(new, Value) and new.type.rank > 0
        if tensor_changed or number_grew:
            was = old.type if isinstance(old, Value) else "a number"
            raise CompileError(f"'{name} {stmt.op}= ...' would change '{name}' from {was} to {describe(new)}; "
                               f"write '{name} = {name} {stmt.op} ...' to rebind it", stmt.loc)
        self.env[name] = new

    def returns(self, stmt: ast.Return, declared: list[TensorType]) -> list[Value]:
        name = self.fdef.name
        if len(stmt.values) != len(declared):
            raise CompileError(f"'{name}' returns {len(stmt.values)} value(s) but is declared with "
                               f"{len(declared)}", stmt.loc)
        out = []
        for e, want in zip(stmt.values, declared):
            value = self.expr(e)
            with self.b.at(e.loc):
                if isinstance(value, (bool, int, float, SymDim)):
                    value = self.broadcast(self.tensor(value, want.dtype), want.shape)
                value = self.tensor(value, want.dtype)
            if value.type != want:
                raise CompileError(f"'{name}' returns {value.type} but is declared {want}", e.loc)
            out.append(value)
        return out

    # ------------------------------------------------------------ expressions

    def expr(self, e: ast.Expr):
        """The value of expression `e`. A handler `expr_<Node>` gets the value of a sub-expression
        by yielding it (`left = yield e.left`): expressions nest as deep as they are long, so
        they are evaluated on the trampoline's stack, not Python's."""
        return trampoline(self._evaluate(e), self._evaluate)

    def drive(self, evaluation: GeneratorType):
        """The result of `evaluation`, a generator that yields the sub-expressions it needs, as an
        `expr_<Node>` handler does, run on the trampoline."""
        return trampoline(evaluation, self._evaluate)

    def _evaluate(self, e: ast.Expr):
        with self.b.at(e.loc):
            value = getattr(self, f"expr_{type(e).__name__}")(e)
            if isinstance(value, GeneratorType):
                value = yield from value
        return value

    def expr_Number(self, e: ast.Number):
        return e.value

    def expr_ListExpr(self, e: ast.ListExpr):
        items = []
        for item in e.items:
            items.append((yield item))
        return items

    def expr_Name(self, e: ast.Name):
        value = self.lookup(e.id)
        if isinstance(value, Unbound):
            raise CompileError(value.message, e.loc)
        if value is not MISSING:
            return value
        if e.id == "None":          # axis=None, perm=None: the default, spelled out
            return None
        if e.id in self.dims:
            return self.dims[e.id]
        if e.id in DType.__members__:
            return DType(e.id)
        if e.id in CONSTANTS:
            return CONSTANTS[e.id]
        if e.id in builtin_rules or e.id in self.defs or e.id in self.externs:
            raise CompileError(f"'{e.id}' is a function; call it as {e.id}(...)", e.loc)
        raise CompileError(python_habits.unknown_name(e.id), e.loc)

    def expr_UnaryOp(self, e: ast.UnaryOp):
        value = yield e.operand
        if e.op in ("~", "not"):
            self.check_logical(e.op, [value])
            return (not value) if isinstance(value, bool) else ~value if type(value) is int else \
                self.b.op("bitwise_not", value)
        if isinstance(value, Deferred):     # -zeros([N]) stays weak
            return value if e.op == "+" else typed(self, None, lambda dt: self.b.op("neg", self.tensor(value, dt)))
        if isinstance(value, Value):
            return value if e.op == "+" else self.b.op("neg", value)
        if not is_static(value) and not isinstance(value, float):
            raise CompileError(f"unary {e.op} needs a tensor or a number, got {describe(value)}", e.loc)
        return value if e.op == "+" else -value

    def expr_BinOp(self, e: ast.BinOp):
        left = yield e.left
        right = yield e.right
        for side in (left, right):
            if not (isinstance(side, (Value, Deferred, SymDim, int, float))):
                raise CompileError(f"operator {e.op} needs tensors or numbers, got {describe(side)}", e.loc)
        if e.op == "@":
            return matmul(self, self.tensor(left), self.tensor(right))
        if e.op in LOGICAL + BITWISE:
            self.check_logical(e.op, [left, right])
        if not isinstance(left, (Value, Deferred)) and not isinstance(right, (Value, Deferred)):
            folded = self.fold(e.op, left, right)
            if folded is not None:
                return folded
        if not isinstance(left, Value) and not isinstance(right, Value) and e.op in ARITHMETIC:
            # no tensor decides the dtype yet: N * 0.5 and zeros([N]) + 1 are weak, like a literal
            op = BINARY_OPS[e.op]
            return typed(self, None, lambda dt: self.elementwise(op, self.tensor(left, dt), self.tensor(right, dt)))
        if e.op == "**" and isinstance(left, Value) and type(right) in (int, float) and right == 2:
            return self.b.op("mul", left, left)
        return self.elementwise(BINARY_OPS[e.op], left, right)

    def check_logical(self, op: str, operands: list) -> None:
        """`& | ^ ~` take bools or integers, `and or not` bools (elementwise), all of one kind."""
        kinds = [_logical_kind(v) for v in operands]
        allowed = ("bool",) if op in LOGICAL else ("bool", "int")
        for v, kind in zip(operands, kinds):
            if kind not in allowed:
                spelled = "bool operands (comparisons)" if op in LOGICAL else "bool or integer operands"
                raise self.error(f"'{op}' needs {spelled}, got {describe(v)}")
        if len(set(kinds)) > 1:
            raise self.error(f"'{op}' mixes bool and integer operands: {' and '.join(map(describe, operands))}")

    def fold(self, op: str, left, right):
        """Static arithmetic on numbers and dimensions; None when a tensor op is needed."""
        symbolic = isinstance(left, SymDim) or isinstance(right, SymDim)
        if symbolic:
            ok = op in DIM_FOLD and all(isinstance(v, (int, SymDim)) for v in (left, right))
            return FOLD[op](left, right) if ok else None
        if op == "**" and (abs(right) > 64 or abs(left) > 2 ** 64):
            return None
        try:
            return FOLD[op](left, right)
        except ZeroDivisionError:
            raise CompileError("division by zero in a constant expression", self.b.loc) from None

    def expr_Index(self, e: ast.Index):
        return (yield from indexing.read(self, e))

    def expr_Attribute(self, e: ast.Attribute):
        if isinstance(e.value, ast.Name) and self.lookup(e.value.id) is MISSING and e.value.id not in self.dims:
            library = python_habits.library_attribute(e.value.id, e.name, CONSTANTS)
            if library is not None:
                raise CompileError(library, e.value.loc)
        value = yield e.value
        if e.name != "T":
            raise CompileError(python_habits.tensor_attribute(e.name), e.loc)
        value = self.tensor(value) if isinstance(value, Deferred) else value
        if not isinstance(value, Value):
            raise CompileError(f".T needs a tensor, got {describe(value)}", e.loc)
        return self.transpose(value)

    def expr_Conditional(self, e: ast.Conditional):
        cond = yield e.cond
        then = yield e.then
        otherwise = yield e.otherwise
        return self.select(cond, then, otherwise)

    def expr_Call(self, e: ast.Call):
        if e.func in self.defs:
            return (yield from self.call_kernel(e))
        if e.func in self.externs:
            return (yield from self.call_extern(e, self.externs[e.func]))
        if e.func in builtin_rules:
            rule = builtin_rules[e.func]
            values = yield from self.bind(e, rule.params, rule.defaults)
            return rule.expand(self, Args(self, e.func, values))
        if e.func in self.env:
            raise CompileError(f"'{e.func}' is a {describe(self.env[e.func])}, not a function", e.loc)
        raise CompileError(python_habits.unknown_function(e.func), e.loc)

    def bind(self, e: ast.Call, params: tuple[str, ...], defaults: dict) -> dict[str, tuple[object, Location]]:
        """Arguments by parameter name, elaborated, each with its location."""
        if len(e.args) > len(params):
            raise CompileError(f"{e.func}() takes {_count(len(params), 'argument')}, got {len(e.args)}", e.loc)
        bound = {}
        for p, a in zip(params, e.args):
            bound[p] = ((yield a), a.loc)
        for kw in e.keywords:
            if kw.name not in params:
                raise CompileError(f"{e.func}() has no argument named '{kw.name}'; it takes "
                                   f"{', '.join(params)}", kw.loc)
            if kw.name in bound:
                raise CompileError(f"{e.func}() got two values for argument '{kw.name}'", kw.loc)
            bound[kw.name] = ((yield kw.value), kw.value.loc)
        for p in params:
            if p not in bound:
                if p not in defaults:
                    raise CompileError(f"{e.func}() is missing argument '{p}'", e.loc)
                bound[p] = (defaults[p], e.loc)
        return bound

    def call_kernel(self, e: ast.Call):
        callee = self.funcs[e.func]
        bound = yield from self.bind(e, tuple(p.name for p in callee.params), {})
        operands = []
        for p in callee.params:
            value, loc = bound[p.name]
            with self.b.at(loc):
                operands.append(self.tensor(value, p.type.dtype))
        self.check_nesting(nesting_depth(self.funcs, e.func), f"the call of {e.func}()", e.loc)
        results = self.b.emit("call", *operands, callee=FuncRef(e.func))
        self.check_contract(e, callee, operands)
        return results[0] if len(results) == 1 else Results(results)

    def check_nesting(self, depth: int, what: str, loc: Location) -> None:
        """A located error when `what`, whose blocks nest `depth` deep, would nest them past MAX_NESTING here."""
        if self.nesting + depth > MAX_NESTING:
            raise CompileError(f"{what} nests for, while and if blocks {self.nesting + depth} deep here (the "
                               f"blocks of called kernels count where they are called); at most {MAX_NESTING} "
                               "are allowed", loc)

    def check_contract(self, e: ast.Call, callee: Func, operands: list[Value]) -> None:
        """A call whose static sizes break what the callee needs (its `x[1]` of an f32[1]) is an
        error here, where the caller can fix it; symbolic ones are checked when the call runs."""
        arg_types = [v.type for v in operands]
        for need, value in needs_at(callee, arg_types, self.funcs, self.contracts):
            if isinstance(value, int) and value < 0:
                env = bind_dims(callee.param_types, arg_types)
                given = ", ".join(f"{s} = {env[s]}" for s in sorted(need.symbols))
                raise CompileError(f"{e.func}() needs {need} >= 0, but this call gives {given}", e.loc)


    def call_extern(self, e: ast.Call, extern: Extern) -> Value:
        """`extern_call`, elementwise: arguments of the declared dtype (literals adapt), broadcast together."""
        bound = yield from self.bind(e, extern.params, {})
        operands = []
        for p in extern.params:
            value, loc = bound[p]
            with self.b.at(loc):
                operand = self.tensor(value, extern.dtype)
            if operand.type.dtype != extern.dtype:
                raise CompileError(f"{e.func}() takes {extern.dtype} values, got {operand.type}", loc)
            operands.append(operand)
        shape = self.broadcast_shape([v.type for v in operands])
        gradient = [FuncRef(extern.gradient)] if extern.gradient else []
        return self.b.op("extern_call", *(self.broadcast(v, shape) for v in operands), gradient=gradient,
                         library=extern.library, symbol=e.func)


MISSING = object()      # what lookup returns for a name bound to nothing


@dataclasses.dataclass(frozen=True)
class Unbound:
    """A name with no value where it is used: a loop counter after its loop, a name assigned only
    inside a loop or in one branch; `message` says which."""

    message: str


class RegionNames:
    """Fresh names for the region functions of one kernel (`f_for0`, `f_if1`...), distinct from
    every kernel of the program."""

    def __init__(self, kernel: str, defs: dict[str, ast.FuncDef]):
        self.kernel, self.defs, self.count = kernel, defs, 0

    def fresh(self, kind: str, funcs: dict[str, Func]) -> str:
        while True:
            name, self.count = f"{self.kernel}_{kind}{self.count}", self.count + 1
            if name not in self.defs and name not in funcs:
                return name


def _logical_kind(v: object) -> str | None:
    """"bool" or "int" for what `& | ^ ~ and or not` may take, else None."""
    if isinstance(v, Value):
        return "bool" if v.type.dtype is BOOL else "int" if v.type.dtype.is_int else None
    return "bool" if isinstance(v, bool) else "int" if type(v) is int else None


def check_param_name(p: ast.Param) -> None:
    """Kernels are called from Python, by keyword too: a parameter cannot be named `lambda` or `None`."""
    if keyword.iskeyword(p.name):
        raise CompileError(f"'{p.name}' is a Python keyword; name the parameter otherwise", p.loc)


def nesting_depth(funcs: dict[str, Func], name: str) -> int:
    """How deep the blocks of function `name` nest, counting those of the functions it calls where
    they are called; on a list, not Python's stack."""
    runs: dict[str, list[tuple[str, int]]] = {}       # function -> (function it runs, levels it adds)

    def inner(current: str) -> list[tuple[str, int]]:
        if current not in runs:
            ops = funcs[current].ops
            runs[current] = ([(str(op.attrs[key]), 1) for op in ops for key in REGION_ATTRS.get(op.name, ())]
                             + [(str(op.attrs["callee"]), 0) for op in ops if op.name == "call"])
        return runs[current]

    depth: dict[str, int] = {}
    for current in children_first([name], lambda current: [f for f, _ in inner(current)]):
        depth[current] = max((depth[f] + step for f, step in inner(current)), default=0)
    return depth[name]


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
