"""Random edits of adc source text: what a typing person, a bad merge or a damaged file does.

`mutated(text, kinds)` is a hypothesis strategy of `text` after one to three edits, each
of a kind in `MUTATIONS`: tokens dropped, duplicated, swapped or replaced by other names,
numbers, dtypes or operators; lines dropped, duplicated, swapped or re-indented; the text
cut short; characters inserted (control characters, non-ASCII, snippets of adc).
`ILL_TYPED` keeps to replacements of one token, which leave the syntax mostly intact
and make type, shape and name errors.

    mutated("def f(x: f32) -> f32:\\n    return x\\n", ILL_TYPED)
    -> "def f(x: i32) -> f32:\\n    return x\\n"
"""
from __future__ import annotations

import re

from hypothesis import strategies as st

from adc.frontend.builtins import builtin_rules

TOKEN = re.compile(r'"""(?:.|\n)*?"""|"[^"\n]*"|#[^\n]*|[A-Za-z_]\w*|\d+\.?\d*(?:[eE][-+]?\d+)?|\*\*|<=|>=|==|!=|->'
                   r'|\n[ \t]*|[ \t]+|.', re.S)
NAME = re.compile(r"[A-Za-z_]\w*$")
NUMBER = re.compile(r"\d")
DTYPES = ("f32", "f64", "i32", "i64", "bool", "f16", "int")
NUMBERS = ("0", "1", "-1", "2", "7", "99", "0.5", "-0.0", "1e400", "1e-320", "3.5e38", "2147483648",
           "9223372036854775808", "10**10**10")
OPERATORS = ("+", "-", "*", "/", "**", "@", "<", "==", "=", ":", ",", "(", ")", "[", "]", "->", ".")
WORDS = ("zz", "N", "M", "K", "None", "True", "axis", "keepdims", "dtype", "backward", "dy", "def", "return",
         "extern", "custom_gradient", "gradient", "lambda", "if")
CHARACTERS = ("\x00", "\r", "\t", "\x0c", "\x0b", "\x1c", "\u2028", "\x85", "é", "λ", "\ufeff", "\ud800", "$", "?",
              "!", "\\", "\\\n", "'", '"', '"""', "#", ";", "`")
SNIPPETS = ("(", ")", "[", "]", ":", ",", "**", "@", "=", "\n", "    ", "axis=", "keepdims=True", "return ", "def ",
            "x[5]", "[:, ::2]", "[::-1]", "*B", "(f32, f32)", "@custom_gradient\n", "def backward(dy: f32) -> f32:",
            "extern def sin(x: f64) -> f64\n", "stop_gradient(", "x @ x", ", x", "sum(", "f64[N, N]", "-> f32",
            "1e400", "10**10**10")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _visible(toks: list[str]) -> list[int]:
    """Positions of tokens that are not whitespace."""
    return [i for i, t in enumerate(toks) if t.strip()]


def _at(draw, items: list):
    return items[draw(st.integers(0, len(items) - 1))]


def drop(draw, text: str) -> str:
    toks = tokens(text)
    if _visible(toks):
        del toks[_at(draw, _visible(toks))]
    return "".join(toks)


def duplicate(draw, text: str) -> str:
    toks = tokens(text)
    if _visible(toks):
        i = _at(draw, _visible(toks))
        toks.insert(i, toks[i] + draw(st.sampled_from(["", " "])))
    return "".join(toks)


def swap(draw, text: str) -> str:
    toks = tokens(text)
    visible = _visible(toks)
    if len(visible) > 1:
        k = draw(st.integers(0, len(visible) - 2))
        i, j = visible[k], visible[k + 1]
        toks[i], toks[j] = toks[j], toks[i]
    return "".join(toks)


def replace(draw, text: str) -> str:
    """A name by another name, dtype or word; a number by another number; an operator by another."""
    toks = tokens(text)
    if not _visible(toks):
        return text
    i = _at(draw, _visible(toks))
    names = sorted({t for t in toks if NAME.match(t)})
    if NAME.match(toks[i]):
        toks[i] = draw(st.sampled_from(names + list(DTYPES) + list(WORDS) + sorted(builtin_rules)))
    elif NUMBER.match(toks[i]):
        toks[i] = draw(st.sampled_from(NUMBERS))
    else:
        toks[i] = draw(st.sampled_from(OPERATORS))
    return "".join(toks)


def retype(draw, text: str) -> str:
    """One dtype by another: a parameter, a result or a cast of another type."""
    toks = tokens(text)
    found = [i for i, t in enumerate(toks) if t in DTYPES]
    if found:
        toks[_at(draw, found)] = draw(st.sampled_from(DTYPES))
    return "".join(toks)


def renumber(draw, text: str) -> str:
    """One number by another: a dimension, an axis, an index, a constant."""
    toks = tokens(text)
    found = [i for i, t in enumerate(toks) if NUMBER.match(t)]
    if found:
        toks[_at(draw, found)] = draw(st.sampled_from(NUMBERS))
    return "".join(toks)


def rename(draw, text: str) -> str:
    """Every use of one name by another of the text, or by an unknown one."""
    names = sorted({t for t in tokens(text) if NAME.match(t)})
    if not names:
        return text
    old, new = draw(st.sampled_from(names)), draw(st.sampled_from(names + ["zz"]))
    return "".join(new if t == old else t for t in tokens(text))


def _lines(text: str) -> list[str]:
    return text.split("\n")


def drop_line(draw, text: str) -> str:
    lines = _lines(text)
    del lines[draw(st.integers(0, len(lines) - 1))]
    return "\n".join(lines)


def duplicate_line(draw, text: str) -> str:
    lines = _lines(text)
    i = draw(st.integers(0, len(lines) - 1))
    lines.insert(i, lines[i])
    return "\n".join(lines)


def swap_lines(draw, text: str) -> str:
    lines = _lines(text)
    i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def indent(draw, text: str) -> str:
    lines = _lines(text)
    i = draw(st.integers(0, len(lines) - 1))
    lines[i] = draw(st.sampled_from(["", " ", "  ", "    ", "\t", "        ", " \t"])) + lines[i].lstrip(" \t")
    return "\n".join(lines)


def truncate(draw, text: str) -> str:
    return text[:draw(st.integers(0, len(text)))]


def insert(draw, text: str) -> str:
    at = draw(st.integers(0, len(text)))
    return text[:at] + draw(st.sampled_from(CHARACTERS + SNIPPETS)) + text[at:]


MUTATIONS = {"drop": drop, "duplicate": duplicate, "swap": swap, "replace": replace, "retype": retype,
             "renumber": renumber, "rename": rename, "drop_line": drop_line, "duplicate_line": duplicate_line,
             "swap_lines": swap_lines, "indent": indent, "truncate": truncate, "insert": insert}
ILL_TYPED = ("replace", "retype", "renumber", "rename")


@st.composite
def mutated(draw, text: str, kinds=tuple(MUTATIONS)) -> str:
    for _ in range(draw(st.integers(1, 3))):
        text = MUTATIONS[draw(st.sampled_from(kinds))](draw, text)
    return text
