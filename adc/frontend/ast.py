"""The AST of an adc program: plain dataclasses with source positions.

`parse.py` builds it from the lark tree; `elaborate.py` turns it into IR. Every
node carries the `Location` of its first character, so the elaborator can point
each diagnostic and each IR op at the expression it comes from:

    def sq(x: f32[N]) -> f32[N]:           FuncDef('sq', [Param('x', TypeExpr('f32', [Name('N')]))],
        return x * x                               [TypeExpr('f32', [Name('N')])],
                                                   [Return([BinOp('*', Name('x'), Name('x'))])])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from adc.errors import Location


@dataclass(frozen=True)
class Name:
    id: str
    loc: Location


@dataclass(frozen=True)
class Number:
    """An int or float literal; its dtype comes from the context (weak typing)."""

    value: int | float | bool
    loc: Location


@dataclass(frozen=True)
class BinOp:
    """`left op right` for op in + - * / ** @ < <= > >= == !=."""

    op: str
    left: "Expr"
    right: "Expr"
    loc: Location


@dataclass(frozen=True)
class UnaryOp:
    op: str
    operand: "Expr"
    loc: Location


@dataclass(frozen=True)
class Keyword:
    name: str
    value: "Expr"
    loc: Location


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple["Expr", ...]
    keywords: tuple[Keyword, ...]
    loc: Location


@dataclass(frozen=True)
class Slice:
    """`start:stop:step` inside brackets; absent parts are None."""

    start: "Expr | None"
    stop: "Expr | None"
    step: "Expr | None"
    loc: Location


@dataclass(frozen=True)
class Index:
    value: "Expr"
    items: tuple["Expr | Slice", ...]
    loc: Location


@dataclass(frozen=True)
class EllipsisItem:
    """`...` inside brackets: as many whole axes as the other items leave."""

    loc: Location


@dataclass(frozen=True)
class Attribute:
    """`x.T`, the one attribute of tensors."""

    value: "Expr"
    name: str
    loc: Location


@dataclass(frozen=True)
class Conditional:
    """`then if cond else otherwise`: an elementwise select, broadcasting as `where`."""

    cond: "Expr"
    then: "Expr"
    otherwise: "Expr"
    loc: Location


@dataclass(frozen=True)
class ListExpr:
    """`[a, b]` or `(a, b)`: shapes, axes, pad widths, lists of tensors."""

    items: tuple["Expr", ...]
    loc: Location


Expr = Union[Name, Number, BinOp, UnaryOp, Call, Index, Attribute, Conditional, ListExpr]


@dataclass(frozen=True)
class TypeExpr:
    """`f32[B, N-1]`: a dtype name and dimension expressions (none for a scalar)."""

    dtype: str
    dims: tuple[Expr, ...]
    loc: Location


@dataclass(frozen=True)
class Param:
    name: str
    type: TypeExpr
    loc: Location


@dataclass(frozen=True)
class Assign:
    targets: tuple[Name, ...]
    value: Expr
    loc: Location


@dataclass(frozen=True)
class AugAssign:
    """`x += e` and the other augmented assignments: `x = x + e`, keeping the type of x."""

    target: Name
    op: str
    value: Expr
    loc: Location


@dataclass(frozen=True)
class IndexAssign:
    """`y[i] = v`: rebinds y to a copy of y with the indexed part replaced (a functional update)."""

    target: Name
    items: tuple["Expr | Slice | EllipsisItem", ...]
    value: Expr
    loc: Location


@dataclass(frozen=True)
class For:
    """`for i in range(...)`: the names the body assigns that exist before the loop are its carried state."""

    target: Name
    iterable: Expr
    body: tuple["Stmt", ...]
    loc: Location


@dataclass(frozen=True)
class While:
    cond: Expr
    body: tuple["Stmt", ...]
    loc: Location


@dataclass(frozen=True)
class If:
    """`if c: ... else: ...` on a scalar bool; `elif` is an If in the else branch."""

    cond: Expr
    then: tuple["Stmt", ...]
    otherwise: tuple["Stmt", ...]
    loc: Location


@dataclass(frozen=True)
class Return:
    values: tuple[Expr, ...]
    loc: Location


@dataclass(frozen=True)
class Docstring:
    text: str
    loc: Location


@dataclass(frozen=True)
class Decorator:
    """`@custom_gradient` or `@gradient(erf)` (`arg` names the external function)."""

    name: str
    arg: str | None
    loc: Location


@dataclass(frozen=True)
class FuncDef:
    """A kernel, or (as a statement of a `@custom_gradient` kernel) its backward."""

    name: str
    params: tuple[Param, ...]
    results: tuple[TypeExpr, ...]
    body: tuple["Stmt", ...]
    loc: Location
    returns_tuple: bool = False
    decorators: tuple[Decorator, ...] = ()


Stmt = Union[Assign, AugAssign, IndexAssign, For, While, If, Return, Docstring, FuncDef]


@dataclass(frozen=True)
class ExternDef:
    """`extern def erf(x: f64) -> f64`: a C function of scalars, applied elementwise to tensors;
    `extern "libmy.so" def ...` names the shared library that defines it (`library`, as written)."""

    name: str
    params: tuple[Param, ...]
    results: tuple[TypeExpr, ...]
    loc: Location
    library: str | None = None


@dataclass(frozen=True)
class Program:
    funcs: tuple[FuncDef, ...]
    filename: str
    source: str = field(repr=False, default="")
    externs: tuple[ExternDef, ...] = ()
