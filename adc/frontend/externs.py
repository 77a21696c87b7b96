"""External functions: `extern def` declarations and the `@gradient(f)` kernels attached to them.

Part of elaboration. An external function is a C function of scalars of one float
dtype, applied elementwise to tensors (`extern_call`); `@gradient(f)` attaches its
VJP, a kernel of the same scalars plus the cotangent, scoped to the module (the
analogue of tf.RegisterGradient). Every call of `f` then carries `gradient = [@g]`:

    extern def erf(x: f64) -> f64            %0 = extern_call %x {gradient = [@erf_grad], library = "",
    @gradient(erf)                                                   symbol = "erf"} : f64[N]
    def erf_grad(x: f64, dy: f64) -> f64: ...

`extern "lib/libmy.so" def f(...)` names the shared library that defines `f`: a path
(with a '/') is taken relative to the source file's folder and stored absolute; a bare
name ("libfoo.so.1") is left to the dynamic loader's search. No library: libm or the process.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from adc.errors import CompileError
from adc.frontend import ast
from adc.ir.core import Func, Value
from adc.ir.types import DType, TensorType

DECORATORS = ("custom_gradient", "gradient")


@dataclass(frozen=True)
class Extern:
    name: str
    params: tuple[str, ...]
    dtype: DType
    gradient: str | None
    library: str = ""       # "" for libm and the process


def decorator_of(fdef: ast.FuncDef) -> ast.Decorator | None:
    """The one decorator of a kernel, checked: `@custom_gradient` or `@gradient(f)`."""
    if len(fdef.decorators) > 1:
        raise CompileError(f"kernel '{fdef.name}' has {len(fdef.decorators)} decorators; it can have one",
                           fdef.decorators[1].loc)
    for d in fdef.decorators:
        if d.name not in DECORATORS:
            raise CompileError(f"unknown decorator '@{d.name}'; expected @custom_gradient or @gradient(f)", d.loc)
        if (d.name == "gradient") != (d.arg is not None):
            usage = "@gradient(f), naming an external function" if d.name == "gradient" else "@custom_gradient"
            raise CompileError(f"write {usage}", d.loc)
        return d
    return None


def externs_of(program: ast.Program, kernels: dict[str, ast.FuncDef]) -> dict[str, Extern]:
    """The module's external functions, each with the kernel `@gradient` attaches to it. One may
    take a builtin's name (`extern def erf`): in its file the name calls the C function, so a
    program declaring a libm function keeps its meaning when adc gains a builtin of that name."""
    decls: dict[str, ast.ExternDef] = {}
    for e in program.externs:
        if e.name in decls or e.name in kernels:
            raise CompileError(f"external function '{e.name}' has the name of another function", e.loc)
        decls[e.name] = e
    gradients: dict[str, ast.FuncDef] = {}
    for fdef in kernels.values():
        d = decorator_of(fdef)
        if d is None or d.name != "gradient":
            continue
        if d.arg not in decls:
            raise CompileError(f"@gradient({d.arg}): '{d.arg}' is not an external function of this module "
                               "(declare it with `extern def`)", d.loc)
        if d.arg in gradients:
            raise CompileError(f"'{d.arg}' already has a gradient, '{gradients[d.arg].name}'", d.loc)
        gradients[d.arg] = fdef
    return {name: _extern(e, gradients.get(name), program.filename) for name, e in decls.items()}


def library_path(library: str | None, filename: str) -> str:
    """The library as the IR stores it: a path made absolute against the source file's folder, or a bare name."""
    if not library or "/" not in library:
        return library or ""
    folder = os.path.dirname(os.path.abspath(filename)) if os.path.exists(filename) else os.getcwd()
    return os.path.normpath(os.path.join(folder, os.path.expanduser(library)))


def _extern(e: ast.ExternDef, gradient: ast.FuncDef | None, filename: str) -> Extern:
    types = [p.type for p in e.params] + list(e.results)
    dtype = types[0].dtype if types else None
    for t in types:
        if t.dims or t.dtype not in ("f32", "f64") or t.dtype != dtype:
            raise CompileError(f"external function '{e.name}' must take and return scalars of one float dtype "
                               f"(f32 or f64), applied elementwise to tensors; got {_show(t)}", t.loc)
    names = [p.name for p in e.params]
    for i, p in enumerate(e.params):
        if p.name in names[:i]:
            raise CompileError(f"parameter '{p.name}' is defined twice", p.loc)
    if not e.params or len(e.results) != 1:
        raise CompileError(f"external function '{e.name}' must take at least one argument and return one value",
                           e.loc)
    return Extern(e.name, tuple(p.name for p in e.params), DType(dtype), gradient.name if gradient else None,
                  library_path(e.library, filename))


def _show(t: ast.TypeExpr) -> str:
    return f"{t.dtype}[...]" if t.dims else t.dtype


def gradient_declaration(name: str, extern: Extern) -> Func:
    """The signature of `extern`'s gradient kernel, (x_1..x_n, dy) -> (dx_1..dx_n), with no body: what
    a call of the extern refers to until the kernel itself is elaborated (checked by check_gradient)."""
    scalar = TensorType(extern.dtype)
    params = tuple(Value(scalar, p) for p in (*extern.params, "dy"))
    return Func(name, params, (), tuple(Value(scalar) for _ in extern.params), None)


def check_gradient(fdef: ast.FuncDef, func: Func, extern: Extern) -> None:
    """`@gradient(f)`: the kernel takes f's arguments then the cotangent, and returns one cotangent per argument."""
    scalar = TensorType(extern.dtype)
    n = len(extern.params)
    if len(func.params) != n + 1:
        raise CompileError(f"the gradient of '{extern.name}' takes its {n} argument(s) then the cotangent of its "
                           f"result: {n + 1} {extern.dtype} scalars, got {len(func.params)}", fdef.loc)
    for p, value in zip(fdef.params, func.params):
        if value.type != scalar:
            raise CompileError(f"'{p.name}' must be {scalar}, as '{extern.name}' takes and returns {scalar}", p.loc)
    if len(func.returns) != n or any(t != scalar for t in func.result_types):
        raise CompileError(f"the gradient of '{extern.name}' must return one {scalar} cotangent per argument "
                           f"({n}), got {', '.join(map(str, func.result_types))}", fdef.results[0].loc)
