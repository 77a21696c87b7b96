"""Source text → AST: the lark LALR parser of grammar.lark and its syntax errors.

The first stage of the pipeline. The indenter post-lexer turns leading
whitespace into INDENT/DEDENT tokens; `ToAst` builds `adc.frontend.ast` nodes
carrying `Location`s; every lark error becomes a `CompileError` a person can
act on ("unexpected ')'", "expected an indented block"):

    def f(x: f32[N]) -> f32[N]:        Program(funcs=(FuncDef('f', ...,
        return x + 1.0                     body=(Return((BinOp('+', Name('x'), Number(1.0)),)),)),))
"""
from __future__ import annotations

import ast as pyast
import dataclasses
import keyword as pykeyword
import re
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.exceptions import VisitError
from lark import v_args
from lark.indenter import DedentError, Indenter
from lark.visitors import Transformer_NonRecursive

from adc.errors import CompileError, Location
from adc.frontend import ast, python_habits

UNSUPPORTED_STATEMENTS = ("with", "try", "except", "lambda", "break", "continue", "pass", "import", "from",
                          "class", "yield", "global", "nonlocal", "assert", "del", "raise", "async", "await")

# How tokens are named in messages, by terminal name.
TOKEN_TEXT = {"_NL": "end of line", "_INDENT": "indent", "_DEDENT": "end of block", "$END": "end of file",
              "NAME": "a name", "INT": "a number", "FLOAT": "a number", "STRING": "a string"}


class _Indenter(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB"]
    CLOSE_PAREN_types = ["RPAR", "RSQB"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def handle_NL(self, token):
        """As lark's, but a bad dedent raises with the line it happens on."""
        try:
            yield from super().handle_NL(token)
        except DedentError:
            raise _BadDedent(token.end_line, token.end_column) from None


class _BadDedent(Exception):
    def __init__(self, line: int, col: int):
        self.line, self.col = line, col


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """The LALR parser; lark keeps its grammar analysis in a temporary-folder cache (`cache=True`),
    which makes building it in a new process ~10x cheaper (45 -> 5 ms). One lexer for the whole
    grammar (no terminal of it needs the parser state to be told apart): lark's contextual lexer
    compiles a regular expression per parser state on the first parse of a process, 12-18 ms of
    a cold compile; the basic lexer's first parse of samples/kernels.adc takes 4-6 ms."""
    grammar = (Path(__file__).parent / "grammar.lark").read_text()
    return Lark(grammar, start="program", parser="lalr", postlex=_Indenter(), propagate_positions=True,
                maybe_placeholders=True, cache=True, lexer="basic")


MAX_LITERAL_DIGITS = 309   # more digits than the largest double has: the literal fits no adc dtype


def parse_program(source: str, filename: str = "<string>") -> ast.Program:
    """Parse adc source text; raises CompileError on malformed input."""
    _check_unicode(source, filename)
    text = source if source.endswith("\n") else source + "\n"
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, text, filename) from None
    except _BadDedent as err:
        raise CompileError("unindent does not match any outer indentation level",
                           Location(filename, err.line, err.col, source)) from None
    try:
        return ToAst(filename, source).transform(tree)
    except VisitError as err:     # lark wraps what a rule raises; a rule's CompileError is the user's
        if isinstance(err.orig_exc, CompileError):
            raise err.orig_exc from None
        raise


def _check_unicode(source: str, filename: str) -> None:
    """A lone surrogate (text that is not Unicode, e.g. from undecodable bytes) is a located error."""
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as err:
        before = source[:err.start]
        line, col = before.count("\n") + 1, err.start - (before.rfind("\n") + 1) + 1
        shown = source.encode("utf-8", "replace").decode("utf-8")
        raise CompileError(f"the source is not valid Unicode: lone surrogate U+{ord(source[err.start]):04X}",
                           Location(filename, line, col, shown)) from None


def _syntax_error(err: UnexpectedInput, text: str, filename: str) -> CompileError:
    line, col = max(err.line, 1), max(err.column, 1)
    token = getattr(err, "token", None)
    at_end = (isinstance(err, UnexpectedEOF) or token is not None and token.type == "$END"
              or token is not None and token.type == "_DEDENT" and _nothing_after(text, line, col))
    if at_end:
        line, col = _end_position(text)
    unclosed = _unclosed_bracket(text, line, col, at_end)
    if unclosed is not None:     # inside brackets lines join, so the parser fails far from the cause
        bracket, at_line, at_col = unclosed
        return CompileError(f"'{bracket}' was never closed", Location(filename, at_line, at_col, text))
    if not at_end and token is not None and token.type in ("_INDENT", "_DEDENT"):
        line, col = token.end_line, token.end_column
    untyped = _untyped_parameter(err, text, line, col)
    if untyped is not None:
        name, name_col = untyped
        return CompileError(f"parameter '{name}' needs a type, e.g. {name}: f32[N]",
                            Location(filename, line, name_col, text))
    if isinstance(err, UnexpectedToken) and "NAME" in err.expected and pykeyword.iskeyword(str(err.token)):
        return CompileError(f"'{err.token}' is a Python keyword; it cannot name a value",
                            Location(filename, line, col, text))
    habit = _python_habit(err, text, line, col)
    if habit is not None:
        message, habit_col = habit
        return CompileError(message, Location(filename, line, habit_col, text))
    keyword = _unsupported_statement(text, line)
    if keyword is not None:
        kw_line, kw_col = keyword
        word = _word_at(text, kw_line, kw_col)
        return CompileError(f"'{word}' is not supported: {python_habits.statement_hint(word)}",
                            Location(filename, kw_line, kw_col, text))
    if _opens_block(text, line) and col == _indent_col(text, line):
        return CompileError("expected an indented block", Location(filename, line, col, text))
    return CompileError(_syntax_message(err), Location(filename, line, col, text))


def _syntax_message(err: UnexpectedInput) -> str:
    if isinstance(err, UnexpectedCharacters):
        return f"unexpected character {err.char!r}"
    if isinstance(err, UnexpectedToken):
        expected = set(err.expected)
        if err.token.type == "_INDENT":
            return "unexpected indent"
        found = TOKEN_TEXT.get(err.token.type) if err.token.type in ("_NL", "_DEDENT", "$END") else f"'{err.token}'"
        return f"unexpected {found}{_expected_hint(expected)}"
    return "unexpected end of file"


def _expected_hint(expected: set[str]) -> str:
    names = sorted({_describe(t) for t in expected if not t.startswith("__")})
    return f"; expected {' or '.join(names)}" if 0 < len(names) <= 3 else ""


def _describe(terminal: str) -> str:
    if terminal in TOKEN_TEXT:
        return TOKEN_TEXT[terminal]
    pattern = _parser().get_terminal(terminal).pattern
    return f"'{pattern.value}'" if pattern.type == "str" else terminal.lower()


_CLOSING = {"(": ")", "[": "]", "{": "}"}
_PARAMETER_BEFORE = re.compile(r"\s*def\s+\w+\s*\((?:.*,)?\s*(\w+)\s*$")


def _untyped_parameter(err: UnexpectedInput, text: str, line: int, col: int) -> tuple[str, int] | None:
    """(name, column) of a `def` parameter written without its type, when that is what the error is."""
    if not isinstance(err, UnexpectedToken) or str(err.token) not in (",", ")"):
        return None
    lines = text.split("\n")
    match = _PARAMETER_BEFORE.match(lines[line - 1][:col - 1]) if line <= len(lines) else None
    return (match.group(1), match.start(1) + 1) if match else None


def _python_habit(err: UnexpectedInput, text: str, line: int, col: int) -> tuple[str, int] | None:
    """(message, column) when the error is a Python habit adc spells otherwise (python_habits.py)."""
    if not isinstance(err, UnexpectedToken) or err.token.type.startswith("_") or err.token.type == "$END":
        return None
    lines = text.split("\n")
    return python_habits.syntax_hint(lines[line - 1], col, str(err.token)) if line <= len(lines) else None


def _nothing_after(text: str, line: int, col: int) -> bool:
    """Whether only blanks and comments follow line:col (a dedent there is the end of the file)."""
    lines = text.split("\n")
    rest = [lines[line - 1][col - 1:]] + lines[line:] if line <= len(lines) else []
    return not any(re.sub(r"#.*", "", part).strip() for part in rest)


def _unclosed_bracket(text: str, line: int, col: int, at_end: bool) -> tuple[str, int, int] | None:
    """The innermost bracket still open where the error happened, when it was opened on an earlier
    line or the error is the end of the file (comments and strings skipped): what the error means."""
    stack: list[tuple[str, int, int]] = []
    for number, source_line in enumerate(text.split("\n")[:line], start=1):
        quote = None
        for k, ch in enumerate(source_line, start=1):
            if number == line and k >= col:
                break
            if quote:
                quote = None if ch == quote else quote
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                break
            elif ch in _CLOSING:
                stack.append((ch, number, k))
            elif stack and ch == _CLOSING[stack[-1][0]]:
                stack.pop()
    return stack[-1] if stack and (at_end or stack[-1][1] < line) else None


def _opens_block(text: str, line: int) -> bool:
    """Whether the code line before `line` ends with ':' (a `def` header wanting a body)."""
    lines = [re.sub(r"#.*", "", ln).rstrip() for ln in text.split("\n")[:line - 1]]
    code = [ln for ln in lines if ln]
    return bool(code) and code[-1].endswith(":")


def _indent_col(text: str, line: int) -> int:
    source_line = text.split("\n")[line - 1] if line <= text.count("\n") else ""
    return len(source_line) - len(source_line.lstrip()) + 1


def _end_position(text: str) -> tuple[int, int]:
    lines = text.rstrip("\n").split("\n")
    return len(lines), len(lines[-1]) + 1


def _unsupported_statement(text: str, line: int) -> tuple[int, int] | None:
    """The (line, col) of a Python keyword adc has no statement for (with, try, break...) opening
    `line` or the nearest code line above it."""
    lines = text.split("\n")
    for number in range(min(line, len(lines)), max(line - 2, 0), -1):
        match = re.match(r"\s*([A-Za-z_]+)\b", lines[number - 1])
        if match and match.group(1) in UNSUPPORTED_STATEMENTS:
            return number, match.start(1) + 1
    return None


def _word_at(text: str, line: int, col: int) -> str:
    return re.match(r"[A-Za-z_]+", text.split("\n")[line - 1][col - 1:]).group(0)


@v_args(meta=True)
class ToAst(Transformer_NonRecursive):
    """Lark tree → AST; one method per rule alias of grammar.lark. Lark's non-recursive
    transformer: a tree is as deep as an expression is long (`a + b + ...`)."""

    def __init__(self, filename: str, source: str):
        super().__init__()
        self.filename, self.source = filename, source

    def _loc(self, meta) -> Location:
        return Location(self.filename, meta.line, meta.column, self.source)

    def _tok_loc(self, token: Token) -> Location:
        return Location(self.filename, token.line, token.column, self.source)

    def _string(self, token: Token) -> str:
        """The value of a string literal; a located error where Python would refuse it (a NUL
        character, an unknown \\N{name})."""
        if "\0" in token:
            raise CompileError("a string literal cannot hold a NUL character", self._tok_loc(token))
        try:
            return pyast.literal_eval(str(token))
        except (SyntaxError, ValueError) as err:
            raise CompileError(f"invalid string literal: {err.msg if isinstance(err, SyntaxError) else err}",
                               self._tok_loc(token)) from None

    def program(self, meta, children):
        funcs = tuple(c for c in children if isinstance(c, ast.FuncDef))
        externs = tuple(c for c in children if isinstance(c, ast.ExternDef))
        return ast.Program(funcs, self.filename, self.source, externs)

    def funcdef(self, meta, children):
        name, params, (results, is_tuple), body = children
        return ast.FuncDef(str(name), tuple(params or ()), results, body, self._loc(meta), is_tuple)

    def decorated(self, meta, children):
        *decorators, fdef = children
        return dataclasses.replace(fdef, decorators=tuple(decorators))

    def decorator(self, meta, children):
        at, name, arg = children
        return ast.Decorator(str(name), None if arg is None else str(arg), self._tok_loc(at))

    def externdef(self, meta, children):
        library, name, params, (results, _) = children
        return ast.ExternDef(str(name), tuple(params or ()), results, self._loc(meta),
                             None if library is None else self._string(library))

    def params(self, meta, children):
        return [c for c in children if c is not None]

    def param(self, meta, children):
        name, type_ = children
        return ast.Param(str(name), type_, self._tok_loc(name))

    def single_result(self, meta, children):
        return (children[0],), False

    def tuple_result(self, meta, children):
        return tuple(c for c in children if c is not None), True

    def type(self, meta, children):
        name, *dims = children
        return ast.TypeExpr(str(name), tuple(d for d in dims if d is not None), self._tok_loc(name))

    def suite(self, meta, children):
        return tuple(children)

    def assign(self, meta, children):
        targets, value = children
        return ast.Assign(targets, value, self._loc(meta))

    def aug_assign(self, meta, children):
        target, op, value = children
        return ast.AugAssign(ast.Name(str(target), self._tok_loc(target)), str(op)[:-1], value, self._loc(meta))

    def index_assign(self, meta, children):
        target, *items, value = children
        name = ast.Name(str(target), self._tok_loc(target))
        return ast.IndexAssign(name, tuple(_located(i, self._loc(meta)) for i in items if i is not None), value,
                               self._loc(meta))

    def index_aug_assign(self, meta, children):
        """`y[items] op= e` is `y[items] = y[items] op e` (NumPy's: the part is read once, so of
        duplicate tensor indices the last write stays)."""
        target, *items, op, value = children
        assigned = self.index_assign(meta, [target, *items, value])
        part = ast.Index(assigned.target, assigned.items, assigned.loc)
        return dataclasses.replace(assigned, value=ast.BinOp(str(op)[:-1], part, value, value.loc))

    def for_stmt(self, meta, children):
        target, iterable, body = children
        return ast.For(ast.Name(str(target), self._tok_loc(target)), iterable, body, self._loc(meta))

    def while_stmt(self, meta, children):
        cond, body = children
        return ast.While(cond, body, self._loc(meta))

    def if_stmt(self, meta, children):
        cond, then, *elifs, otherwise = children
        for elif_cond, elif_body, loc in reversed(elifs):
            otherwise = (ast.If(elif_cond, elif_body, otherwise or (), loc),)
        return ast.If(cond, then, otherwise or (), self._loc(meta))

    def elif_clause(self, meta, children):
        cond, body = children
        return cond, body, self._loc(meta)

    def else_clause(self, meta, children):
        return children[0]

    def targets(self, meta, children):
        return tuple(ast.Name(str(t), self._tok_loc(t)) for t in children if t is not None)

    def return_stmt(self, meta, children):
        return ast.Return(tuple(c for c in children if c is not None), self._loc(meta))

    def docstring(self, meta, children):
        return ast.Docstring(self._string(children[0]), self._loc(meta))

    def binary(self, meta, children):
        left, op, right = children
        return ast.BinOp(str(op), left, right, self._loc(meta))

    def compare(self, meta, children):
        """`a < b < c` is `(a < b) and (b < c)`, as in Python (b is evaluated once: cse merges it)."""
        loc = self._loc(meta)
        operands, ops = children[::2], children[1::2]
        pairs = [ast.BinOp(str(op), left, right, loc) for op, left, right in zip(ops, operands, operands[1:])]
        chain = pairs[0]
        for pair in pairs[1:]:
            chain = ast.BinOp("and", chain, pair, loc)
        return chain

    def conditional(self, meta, children):
        then, cond, otherwise = children
        return ast.Conditional(cond, then, otherwise, self._loc(meta))

    def attribute(self, meta, children):
        value, name = children
        return ast.Attribute(value, str(name), self._tok_loc(name))

    def ellipsis(self, meta, children):
        return ast.EllipsisItem(self._loc(meta))

    def unary(self, meta, children):
        op, operand = children
        return ast.UnaryOp(str(op), operand, self._loc(meta))

    def call(self, meta, children):
        name, args = children
        args = args or ()
        positional = tuple(a for a in args if not isinstance(a, ast.Keyword))
        keywords = tuple(a for a in args if isinstance(a, ast.Keyword))
        return ast.Call(str(name), positional, keywords, self._loc(meta))

    def arguments(self, meta, children):
        return tuple(c for c in children if c is not None)

    def keyword(self, meta, children):
        name, value = children
        return ast.Keyword(str(name), value, self._tok_loc(name))

    def index(self, meta, children):
        value, *items = children
        loc = self._loc(meta)
        return ast.Index(value, tuple(_located(i, loc) for i in items if i is not None), loc)

    def slice(self, meta, children):
        """A bare `:` has no position of its own; `index` then gives it the bracket's."""
        start, stop, step = children
        return ast.Slice(start, stop, step, None if meta.empty else self._loc(meta))

    def name(self, meta, children):
        return ast.Name(str(children[0]), self._tok_loc(children[0]))

    def int_literal(self, meta, children):
        digits = str(children[0])
        if len(digits.lstrip("0")) > MAX_LITERAL_DIGITS:
            raise CompileError(f"integer literal of {len(digits)} digits: it fits no adc dtype (f64 holds "
                               f"at most {MAX_LITERAL_DIGITS} digits)", self._tok_loc(children[0]))
        return ast.Number(int(digits), self._tok_loc(children[0]))

    def float_literal(self, meta, children):
        return ast.Number(float(children[0]), self._tok_loc(children[0]))

    def bool_literal(self, meta, children):
        return ast.Number(children[0] == "True", self._tok_loc(children[0]))

    def tuple(self, meta, children):
        return ast.ListExpr(tuple(c for c in children if c is not None), self._loc(meta))

    list = tuple


def _located(item, loc: Location):
    if isinstance(item, ast.Slice) and item.loc is None:
        return ast.Slice(item.start, item.stop, item.step, loc)
    return item
