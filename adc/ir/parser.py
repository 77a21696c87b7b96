"""The textual IR reader: `format_module(parse_module(text)) == text` for printed text.

Parsing sits beside the printer at the edges of the pipeline: golden pass tests,
`.so` metadata and the CLI read IR back through it. The grammar is ir.lark;
this module turns its tree into `Module` objects in two steps — first every
function's signature (so a call may name a function defined later), then each
body, where every op runs its type rule and must match its declared result
types. Malformed text raises `CompileError` at the IR line:col.

    func @f(%x: f32[N]) -> f32[N] {
      %0 = mul %x, %x : f32[N] loc("k.adc":2:12)
      return %0
    }
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import lark

from adc.errors import CompileError, Location
from adc.ir.core import Attrs, Func, FuncRef, Module, Op, Value
from adc.ir.ops import TypeRuleError, infer_types
from adc.ir.types import TRUTH_VALUES, DType, TensorType, parse_dim

_FLOAT = re.compile(r"-?(inf|nan|\d+\.\d*(e[+-]?\d+)?|\d+e[+-]?\d+)")
_INT = re.compile(r"-?\d+")
_KEYWORDS: dict[str, Any] = {**TRUTH_VALUES, **{d.value: d for d in DType}}     # types.RESERVED_NAMES
MAX_LIST_DEPTH = 8      # an op's attributes are lists of numbers at most; deeper text is not adc's IR


@lru_cache(maxsize=1)
def _lark() -> lark.Lark:
    """The LALR parser, its grammar analysis cached by lark across processes (`cache=True`)."""
    grammar = (Path(__file__).parent / "ir.lark").read_text()
    return lark.Lark(grammar, parser="lalr", propagate_positions=True, cache=True)


def parse_module(text: str, name: str = "module") -> Module:
    """Parse printed IR; `name` is the module name and the file of error locations."""
    try:
        tree = _lark().parse(text)
    except lark.exceptions.UnexpectedInput as err:
        raise CompileError(_syntax_message(err), _syntax_location(err, text, name)) from None
    return _Reader(text, name).module(tree)


def _syntax_location(err: lark.exceptions.UnexpectedInput, text: str, name: str) -> Location:
    """Where the text goes wrong; a premature end is reported at the end of the text."""
    if isinstance(err, lark.exceptions.UnexpectedToken) and err.token.type == "$END":
        lines = text.split("\n")
        return Location(name, len(lines), len(lines[-1]) + 1, text)
    return Location(name, err.line, err.column, text)


def _syntax_message(err: lark.exceptions.UnexpectedInput) -> str:
    if isinstance(err, lark.exceptions.UnexpectedToken):
        if err.token.type == "$END":
            return "unexpected end of IR"
        return f"unexpected {err.token.value!r} in IR"
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        return f"unexpected character {err.char!r} in IR"
    return "malformed IR"


def _trees(items: list, *kinds: str) -> list[lark.Tree]:
    return [c for c in items if isinstance(c, lark.Tree) and c.data in kinds]


class _Reader:
    """Tree → Module, with locations pointing into the IR text."""

    def __init__(self, text: str, name: str):
        self.text = text
        self.name = name
        self.signatures: dict[str, Func] = {}

    def at(self, item: lark.Token | lark.Tree) -> Location:
        line, col = (item.line, item.column) if isinstance(item, lark.Token) else (item.meta.line, item.meta.column)
        return Location(self.name, line, col, self.text)

    def error(self, message: str, item: lark.Token | lark.Tree) -> CompileError:
        return CompileError(message, self.at(item))

    def module(self, tree: lark.Tree) -> Module:
        for node in tree.children:
            sig = self.signature(node)
            if sig.name in self.signatures:
                raise self.error(f"function @{sig.name} is defined twice", node)
            self.signatures[sig.name] = sig
        funcs = [self.func(node) for node in tree.children]
        return Module({f.name: f for f in funcs}, self.name)

    def signature(self, node: lark.Tree) -> Func:
        """A body-less Func whose params and returns carry the declared types."""
        name = node.children[0][1:]
        params = tuple(self.param(p) for p in _trees(node.children, "param"))
        (results,) = _trees(node.children, "single_result", "tuple_results")
        returns = tuple(Value(self.type(t)) for t in results.children if t is not None)
        locs = _trees(node.children, "loc")
        return Func(name, params, (), returns, self.loc(locs[0]) if locs else None)

    def param(self, node: lark.Tree) -> Value:
        token, type_token = node.children
        return Value(self.type(type_token), token[1:])

    def func(self, node: lark.Tree) -> Func:
        sig = self.signatures[node.children[0][1:]]
        scope: dict[str, Value] = {}
        for p, tree in zip(sig.params, _trees(node.children, "param")):
            self.define(scope, tree.children[0], p)
        ops = tuple(self.op(op, scope) for op in _trees(node.children, "op"))
        (ret,) = _trees(node.children, "return_")
        returns = tuple(self.use(scope, t) for t in ret.children if t is not None)
        if len(returns) != len(sig.returns):
            raise self.error(f"@{sig.name} returns {len(returns)} values, its signature {len(sig.returns)}", ret)
        for value, declared in zip(returns, sig.returns):
            if value.type != declared.type:
                raise self.error(f"@{sig.name} returns {value.type} where its signature says {declared.type}", ret)
        return Func(sig.name, sig.params, ops, returns, sig.loc)

    def define(self, scope: dict[str, Value], token: lark.Token, value: Value) -> None:
        if token in scope:
            raise self.error(f"{token} is defined twice", token)
        scope[str(token)] = value

    def use(self, scope: dict[str, Value], token: lark.Token) -> Value:
        if token not in scope:
            raise self.error(f"{token} is used before it is defined", token)
        return scope[str(token)]

    def op(self, node: lark.Tree, scope: dict[str, Value]) -> Op:
        children = [c for c in node.children if c is not None]
        name_at = next(i for i, c in enumerate(children) if isinstance(c, lark.Token) and c.type == "OP_NAME")
        name = str(children[name_at])
        result_tokens = children[:name_at]
        rest = children[name_at + 1:]
        operands = tuple(self.use(scope, t) for t in rest if isinstance(t, lark.Token) and t.type == "VALUE")
        attrs = self.attrs(_trees(rest, "attrs"))
        declared = tuple(self.type(t) for t in rest if isinstance(t, lark.Token) and t.type == "TYPE")
        locs = _trees(rest, "loc")
        self.check_types(node, name, operands, attrs, declared)
        if len(result_tokens) != len(declared):
            raise self.error(f"{name}: {len(result_tokens)} result names for {len(declared)} types", node)
        results = tuple(Value(t) for t in declared)
        for token, value in zip(result_tokens, results):
            self.define(scope, token, value)
        return Op(name, operands, attrs, results, self.loc(locs[0]) if locs else None)

    def check_types(self, node: lark.Tree, name: str, operands: tuple[Value, ...], attrs: Attrs,
                    declared: tuple[TensorType, ...]) -> None:
        """The op's type rule must hold and give exactly the declared result types."""
        try:
            inferred = infer_types(name, [v.type for v in operands], attrs, self.signatures)
        except TypeRuleError as err:
            raise self.error(f"{name}: {err}", node) from None
        except (TypeError, ValueError, AttributeError):
            raise self.error(f"{name}: malformed attributes {{{', '.join(attrs)}}}", node) from None
        if inferred != declared:
            raise self.error(f"{name}: the type rule gives {', '.join(map(str, inferred))}, "
                             f"the IR declares {', '.join(map(str, declared))}", node)

    def attrs(self, trees: list[lark.Tree]) -> Attrs:
        items: dict[str, Any] = {}
        for node in (a for tree in trees for a in tree.children if a is not None):
            key, value = node.children
            if key in items:
                raise self.error(f"attribute {key} is given twice", key)
            items[str(key)] = self.attr_value(value)
        return Attrs(items)

    def attr_value(self, item: lark.Token | lark.Tree, depth: int = 0) -> Any:
        if isinstance(item, lark.Tree):
            if depth == MAX_LIST_DEPTH:
                raise self.error(f"attribute lists nest at most {MAX_LIST_DEPTH} deep", item)
            return tuple(self.attr_value(v, depth + 1) for v in item.children if v is not None)
        if item.type == "STRING":
            return json.loads(item)
        if item.type == "FUNC_REF":
            return FuncRef(item[1:])
        return self.atom(item)

    def atom(self, token: lark.Token) -> Any:
        """Numbers, booleans, dtypes, then dimension expressions such as `2*N+1`."""
        text = str(token)
        if text in _KEYWORDS:
            return _KEYWORDS[text]
        if _INT.fullmatch(text):
            return int(text)
        if _FLOAT.fullmatch(text):
            return float(text)
        return self.dim(text, token)

    def dim(self, text: str, token: lark.Token):
        try:
            return parse_dim(text)
        except ValueError as err:
            raise self.error(str(err), token) from None

    def type(self, token: lark.Token) -> TensorType:
        dtype, bracket, dims = str(token).partition("[")
        if not bracket:
            return TensorType(DType(dtype))
        if not dims.rstrip("]"):
            raise self.error(f"malformed type {token}", token)
        return TensorType(DType(dtype), tuple(self.dim(d, token) for d in dims.rstrip("]").split(",")))

    def loc(self, node: lark.Tree) -> Location:
        file, line, col = node.children
        return Location(json.loads(file), int(line), int(col))
