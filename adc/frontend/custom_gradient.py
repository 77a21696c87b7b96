"""Elaboration of a `@custom_gradient` kernel into a forward, a backward and a custom-gradient node.

Part of elaboration (elaborate.py calls `elaborate_custom_gradient`). The kernel's
statements become `@f_forward`, which also returns the values the nested backward
closes over (computed once, in the forward, and saved); the nested def becomes
`@f_backward(inputs..., saved..., cotangents...) -> one cotangent per input`; and
`@f` itself is one `custom_gradient` node, which the adjoint pass differentiates
with the backward:

    @custom_gradient                         func @f_forward(%x: f32) -> (f32, f32)   (y, saved e)
    def f(x: f32) -> f32:                    func @f_backward(%x: f32, %e: f32, %dy: f32) -> f32
        e = exp(x)                           func @f(%x: f32) -> f32 {
        def backward(dy: f32) -> f32:          %0, %1 = custom_gradient %x {backward = @f_backward,
            return dy * e                               forward = @f_forward, results = 1} : f32, f32
        return log(1 + e), backward            return %0
                                             }
"""
from __future__ import annotations

import keyword

from adc.errors import CompileError
from adc.frontend import ast
from adc.frontend.elaborate import KernelElaborator, check_param_name
from adc.frontend.scope import Deferred, Results
from adc.ir.builder import Builder
from adc.ir.core import Func, FuncRef, Value
from adc.ir.trampoline import trampoline
from adc.ir.types import TensorType


def custom_gradient_names(name: str) -> tuple[str, str]:
    return f"{name}_forward", f"{name}_backward"


def elaborate_custom_gradient(fdef: ast.FuncDef, defs, funcs, externs) -> tuple[Func, Func, Func]:
    """The forward, the backward and the kernel of a `@custom_gradient` kernel."""
    forward_name, backward_name = custom_gradient_names(fdef.name)
    for taken in (forward_name, backward_name):
        if taken in defs or taken in externs:
            raise CompileError(f"'{taken}' is taken: the custom gradient of '{fdef.name}' defines it; "
                               "rename that kernel", defs[taken].loc if taken in defs else fdef.loc)
    fwd = ForwardElaborator(fdef, defs, funcs, externs)
    forward = fwd.run_forward(forward_name)
    backward = fwd.backward_func(backward_name)
    b = Builder({**funcs, forward_name: forward, backward_name: backward}, fdef.loc)
    params = [b.param(p.name, p.type) for p in forward.params]
    k = len(fdef.results)
    results = b.emit("custom_gradient", *params, forward=FuncRef(forward_name), backward=FuncRef(backward_name),
                     results=k)
    return forward, backward, b.finish(fdef.name, results[:k], fdef.loc)


class ForwardElaborator(KernelElaborator):
    """The kernel's statements; its nested def becomes the backward when the kernel returns, so a
    name it uses has its final value, as a Python closure's does."""

    def __init__(self, fdef, defs, funcs, externs):
        super().__init__(fdef, defs, funcs, externs)
        self.backward_def: ast.FuncDef | None = None
        self.backward: BackwardElaborator | None = None
        self.saved: list[Value] = []

    def run_forward(self, name: str) -> Func:
        self.bind_params()
        outputs = self.body([self.result_type(t) for t in self.fdef.results])
        return self.b.finish(name, list(outputs) + self.saved, self.fdef.loc)

    def backward_func(self, name: str) -> Func:
        return self.backward.func(name)

    def nested_def(self, stmt: ast.FuncDef) -> None:
        if self.backward_def is not None:
            raise CompileError(f"'{self.fdef.name}' already defines its backward, "
                               f"'{self.backward_def.name}'", stmt.loc)
        self.backward_def = stmt

    def returns(self, stmt: ast.Return, declared: list[TensorType]) -> list[Value]:
        if self.backward_def is None:
            raise CompileError(f"@custom_gradient kernel '{self.fdef.name}' defines no backward: add "
                               "`def backward(dy...)` and `return outputs, backward`", self.fdef.loc)
        last, name = stmt.values[-1], self.backward_def.name
        if not (isinstance(last, ast.Name) and last.id == name):
            raise CompileError(f"a @custom_gradient kernel returns its outputs then its backward: "
                               f"`return ..., {name}`", last.loc)
        outputs = super().returns(ast.Return(stmt.values[:-1], stmt.loc), declared)
        self.backward = BackwardElaborator(self.backward_def, self)
        self.backward.run_backward()
        return outputs


class BackwardElaborator(KernelElaborator):
    """The nested def: cotangents in, one cotangent per kernel input out; forward values it names are saved."""

    def __init__(self, fdef: ast.FuncDef, forward: ForwardElaborator):
        super().__init__(fdef, forward.defs, forward.funcs, forward.externs)
        self.forward, self.outer = forward, dict(forward.env)
        self.dims = dict(forward.dims)
        self.inputs = [self.b.param(p.name, p.type) for p in forward.b.params]
        self.captured: dict[Value, Value] = dict(zip(forward.b.params, self.inputs))
        self.cotangents: list[Value] = []
        self.returns_: list[Value] = []

    def run_backward(self) -> None:
        kernel, results = self.forward.fdef, [self.forward.result_type(t) for t in self.forward.fdef.results]
        if len(self.fdef.params) != len(results):
            raise CompileError(f"the backward of '{kernel.name}' takes one cotangent per result of "
                               f"'{kernel.name}' ({len(results)}), got {len(self.fdef.params)}", self.fdef.loc)
        for p, want in zip(self.fdef.params, results):
            check_param_name(p)
            got = self.param_type(p.type)
            if got != want:
                raise CompileError(f"cotangent '{p.name}' must have the type of its result, {want}, got {got}", p.loc)
            self.env[p.name] = value = Value(got, self._param_name(p.name))
            self.cotangents.append(value)
        inputs = [v.type for v in self.inputs]
        self._check_declared(inputs)
        self.returns_ = self.body(inputs)

    def _check_declared(self, inputs: list[TensorType]) -> None:
        """Before the body: one declared and one returned cotangent per kernel input, of its type."""
        name, n = self.forward.fdef.name, len(inputs)
        last = self.fdef.body[-1] if self.fdef.body else None
        if isinstance(last, ast.Return) and len(last.values) != n:
            raise CompileError(f"the backward of '{name}' must return one cotangent per input of '{name}' ({n}), "
                               f"got {len(last.values)}", last.loc)
        if len(self.fdef.results) != n:
            raise CompileError(f"the backward of '{name}' must be declared with one result per input ({n})",
                               self.fdef.results[0].loc)
        for texpr, want in zip(self.fdef.results, inputs):
            if self.result_type(texpr) != want:
                raise CompileError(f"the cotangent of an input of type {want} must be declared {want}", texpr.loc)

    def func(self, name: str) -> Func:
        saved = [self.captured[v] for v in self.forward.saved]
        params = tuple(self.inputs + saved + self.cotangents)
        return Func(name, params, tuple(self.b.ops), tuple(self.returns_), self.fdef.loc)

    def expr_Name(self, e: ast.Name):
        if e.id not in self.env and e.id in self.outer:
            return self.capture(self.outer[e.id], e.id)
        return super().expr_Name(e)

    def capture(self, value: object, name: str) -> object:
        """A forward value named in the backward: a parameter of the backward, saved by the forward
        (each tensor of a list, which may nest as deep as it is written)."""
        return trampoline(self._capture(value, name))

    def _capture(self, value: object, name: str):
        if isinstance(value, Deferred):
            value = self.forward.tensor(value)
        if isinstance(value, (list, Results)):
            items = []
            for v in value:
                items.append((yield self._capture(v, name)))
            return type(value)(items)
        if not isinstance(value, Value):
            return value
        if value not in self.captured:
            self.captured[value] = Value(value.type, self._param_name(name))
            self.forward.saved.append(value)
        return self.captured[value]

    def _param_name(self, name: str) -> str:
        """`name`, or `name_1`, `name_2`, ... when a parameter of the backward has it already: a
        cotangent may shadow an input, and a saved value have the name of an input it replaced,
        as in a Python closure, but the parameters of a function need distinct names (and names
        Python accepts: a value saved from `yield = ...` is `yield_1`)."""
        taken = {v.name for v in self.captured.values()} | {v.name for v in self.cotangents}
        unique, k = name, 0
        while unique in taken or keyword.iskeyword(unique):
            k += 1
            unique = f"{name}_{k}"
        return unique
