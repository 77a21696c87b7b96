"""Malformed programs: each raises a CompileError at the expected line:col with a message a person can act on."""
import pytest

from adc.errors import CompileError
from adc.frontend import compile_source
from adc.frontend.elaborate import nesting_depth

HEAD = "def f(x: f32[N], y: f32[M], b: f32[N, 3]) -> f32[N]:\n"

# source, (line, col), a substring of the message
CASES = [
    ("def f(x: f32[N]) -> f32[N]:\n    return x +\n", (2, 15), "unexpected end of line"),
    ("def f(x: f32[N]) -> f32[N]:\n    return (x))\n", (2, 15), "unexpected ')'"),
    ("def f(x: f32[N]) -> f32[N]:\nreturn x\n", (2, 1), "expected an indented block"),
    ("def f(x: f32[N]) -> f32[N]:\n    y = x\n      return y\n", (3, 7), "unexpected indent"),
    ("def f(x: f32[N]) -> f32[N]:\n        y = x\n    return y\n", (3, 5), "unindent does not match"),
    ("def f(x: f32[N]) -> f32[N]:\n    return x $ 2\n", (2, 14), "unexpected character '$'"),
    # a parameter without a type says so (it was "unexpected ')'")
    ("def f(x) -> f32:\n    return x\n", (1, 7), "parameter 'x' needs a type, e.g. x: f32[N]"),
    ("def f(x: f32, y, z: f32) -> f32:\n    return x\n", (1, 15), "parameter 'y' needs a type"),
    # an unclosed bracket is reported where it opens, as Python does (it was reported where the parser gave up)
    ("def f(x: f32) -> f32:\n    y = (x + 1.0\n    return y\n", (2, 9), "'(' was never closed"),
    ("def f(x: f32[N]) -> f32:\n    return sum(x[0:2]\n", (2, 15), "'(' was never closed"),
    ("def f(x: f32[N]) -> f32:\n    return sum(x[0:2  # a comment (\n", (2, 17), "'[' was never closed"),
    ("def f(x: f32[N]) -> f32[N]:\n    if x > 0:\n        return x\n", (2, 8), "must be a scalar bool"),
    ("def f(x: f32[N]) -> f32[N]:\n    for i in x:\n        return x\n", (2, 14), "a for loop runs over range"),
    ("def f(x: f32[N]) -> f32[N]:\n    try:\n        return x\n", (2, 5), "'try' is not supported"),
    ("def f(x: f32[N]) -> f32[N]:\n    return 1 < x < x\n", (2, 12), "returns bool[N] but is declared f32[N]"),
    (HEAD + "    return z\n", (2, 12), "unknown name 'z'"),
    (HEAD + "    return foo(x)\n", (2, 12), "unknown function 'foo'"),
    (HEAD + "    return sin(x, x)\n", (2, 12), "sin() takes 1 argument, got 2"),
    (HEAD + "    return sum(x, axes=0)\n", (2, 19), "no argument named 'axes'"),
    (HEAD + "    return clip(x, 0.0)\n", (2, 12), "missing argument 'hi'"),
    (HEAD + "    return x + y\n", (2, 12), "cannot broadcast f32[N] against f32[M]: dimension N against M"),
    (HEAD + "    return x + f64(x)\n", (2, 12), "dtype mismatch: f32[N] and f64[N]"),
    (HEAD + "    return x @ b\n", (2, 12), "returns f32[3] but is declared f32[N]"),
    (HEAD + "    return b @ x\n", (2, 12), "contracted dimensions differ"),
    (HEAD + "    return sum(b, axis=2)\n", (2, 24), "axis 2 is out of range for rank 2"),
    (HEAD + "    return x[:, 0]\n", (2, 12), "too many indices (2) for f32[N]"),
    (HEAD + "    return b[0, 3]\n", (2, 17), "index 3 is out of bounds for a dimension of size 3"),
    (HEAD + "    return x[y]\n", (2, 14), "indices must be an i32 or i64 tensor, got f32[M]"),
    (HEAD + "    return x[::-1]\n", (2, 16), "a slice step must be a positive integer"),
    # the softmax family and arg-reductions: an empty static axis, axes, dtypes, a tensor depth
    (HEAD + "    return f32(argmax(b[:, 0:0], axis=1))\n", (2, 23), "axis 1 of f32[N,0] is empty, so it has no first maximum"),
    (HEAD + "    return f32(argmin(b[0:0]))\n", (2, 23), "argmin(): f32[0,3] is empty"),
    (HEAD + "    return f32(argmax(b, axis=[0, 1]))\n", (2, 31), "'axis' must be a static integer, got list"),
    (HEAD + "    return sum(one_hot(x, 3), axis=1)\n", (2, 24), "one_hot(): expected an integer tensor, got f32[N]"),
    (HEAD + "    return sum(one_hot(i32(x), y), axis=1)\n", (2, 32), "'depth' needs sizes that are integers or dimension"),
    (HEAD + "    return logsumexp(i32(b), axis=1)\n", (2, 22), "logsumexp(): expected a float tensor, got i32[N,3]"),
    (HEAD + "    return softmax(b, axis=2)[:, 0]\n", (2, 28), "softmax(): axis 2 is out of range for rank 2"),
    (HEAD + "    return log_softmax(x > 0.0)\n", (2, 24), "expected a float tensor, got bool[N]"),
    (HEAD + "    return reshape(x, [y, 2])\n", (2, 23), "got tensor f32[M]"),
    (HEAD + "    return x\n    return x\n", (3, 5), "unreachable statement after return"),
    (HEAD + "    z = x\n", (1, 1), "has no return statement"),
    (HEAD + "    a, c = x\n", (2, 12), "only a call of a kernel returning a tuple can be unpacked"),
    (HEAD + "    return x\n\ndef f(x: f32) -> f32:\n    return x\n", (4, 1), "kernel 'f' is defined twice"),
    ("def f(x: f32[N], x: f32[N]) -> f32[N]:\n    return x\n", (1, 18), "parameter 'x' is defined twice"),
    # string literals Python refuses (a NUL character in a docstring raised SyntaxError)
    ('def f(x: f32) -> f32:\n    """a\x00b"""\n    return x\n', (2, 5), "a string literal cannot hold a NUL character"),
    ('def f(x: f32) -> f32:\n    """\\N{NO SUCH NAME}"""\n    return x\n', (2, 5), "unknown Unicode character name"),
    ('extern "li\x00bm" def g(x: f64) -> f64\n', (1, 8), "a string literal cannot hold a NUL character"),
    # kernels are called from Python (loading one with a parameter `lambda` raised ValueError)
    ("def f(x: f32, lambda: f32) -> f32:\n    return x\n", (1, 15), "'lambda' is a Python keyword"),
    ("def f(x: f32[N]) -> f32[K]:\n    return x\n", (1, 25), "unbound dimension 'K'"),
    ("def f(x: f32[N+1]) -> f32[N]:\n    return x\n", (1, 14), "a parameter dimension must be an integer or a symbol"),
    # the IR reads these words as a dtype or a truth value: a symbol named so would not read back
    ("def f(x: f32[bool]) -> f32[bool]:\n    return x * 2.0\n", (1, 14), "'bool' names a dtype or a truth value"),
    ("def f(x: f32[3, true]) -> f32:\n    return sum(x)\n", (1, 17), "'true' names a dtype or a truth value"),
    ("def f(x: float[N]) -> f32[N]:\n    return x\n", (1, 10), "unknown type 'float'"),
    ("def f(x: f32[N]) -> f32[N]:\n    return g(x)\n\ndef g(x: f32[N]) -> f32[N]:\n    return f(x)\n",
     (5, 12), "recursive call to 'f' (f -> g -> f)"),
    ("def f(x: f32[N]) -> f32[N]:\n    return f(x)\n", (2, 12), "recursive call to 'f'"),
    ("def two(x: f32) -> (f32, f32):\n    return x, x\n\ndef f(x: f32) -> f32:\n    y = two(x)\n    return y\n",
     (5, 5), "'two' returns 2 values; unpack them"),
    ("def two(x: f32) -> (f32, f32):\n    return x, x\n\ndef f(x: f32) -> f32:\n    a, b, c = two(x)\n"
     "    return a\n", (5, 5), "cannot unpack 2 values into 3 names"),
    ("def f(x: f32) -> (f32, f32):\n    return x\n", (2, 5), "returns 1 value(s) but is declared with 2"),
    ("def g(x: f32[N]) -> f32[N]:\n    return x\n\ndef f(x: f64[N]) -> f64[N]:\n    return g(x)\n",
     (5, 12), "argument 1: expected f32[N], got f64[N]"),
    (HEAD + "    return relu\n", (2, 12), "'relu' is a function"),
    ("def relu(x: f32) -> f32:\n    return x\n", (1, 1), "has the name of a builtin"),
    (HEAD + "    return mean(i32(x))\n", (2, 17), "expected a float tensor, got i32[N]"),
    (HEAD + "    return transpose(b, perm=[0, 0])\n", (2, 30), "is not a permutation"),
    (HEAD + "    return x / 0 * (1 / 0)\n", (2, 21), "division by zero"),
    # an integer literal must fit its dtype (it was wrapped by native code and crashed the interpreter)
    ("def f(x: i32[N]) -> i32[N]:\n    return x + 2147483648\n", (2, 12), "2147483648 is out of the range of i32"),
    ("def f(x: i64) -> i64:\n    return x * -1e19\n", (2, 12), "-1e+19 is out of the range of i64"),
    ("def f(x: i32) -> i32[2]:\n    return full([2], 1e400, dtype=i32)\n", (2, 22), "cannot use inf as an i32 value"),
    # sizes are int64 at run time (a tensor of 2**63 elements was compiled, and native code wrapped its size)
    ("def f(x: bool[9223372036854775808]) -> f32:\n    return 1.0\n", (1, 10), "has more than 9223372036854775807"),
    ("def f(x: f32[N]) -> i64:\n    return sum(full([N, 2**62, 2], 1, dtype=i64))\n", (2, 16),
     "i64[N,4611686018427387904,2] has more than 9223372036854775807 bytes"),
    (HEAD + "    '''doc'''\n    z = x\n    'late'\n    return z\n", (4, 5), "a string can only be the kernel's docstring"),
    (HEAD + "    return where(x, x, x)\n", (2, 12), "the condition must be a bool tensor"),
    (HEAD + "    return broadcast_to(b, [N])\n", (2, 28), "cannot broadcast f32[N,3] to [N]"),
    # operators of everyday array code
    (HEAD + "    return x & x\n", (2, 12), "'&' needs bool or integer operands, got tensor f32[N]"),
    (HEAD + "    return ~x\n", (2, 12), "'~' needs bool or integer operands"),
    (HEAD + "    return where(x > 0 and 1, x, x)\n", (2, 18), "'and' needs bool operands (comparisons), got number 1"),
    (HEAD + "    return where(not i32(x), x, x)\n", (2, 18), "'not' needs bool operands"),
    (HEAD + "    return x * (True & 1)\n", (2, 17), "'&' mixes bool and integer operands"),
    (HEAD + "    return x if x else x\n", (2, 12), "the condition must be a bool tensor"),
    (HEAD + "    return x % 0 * (1 // 0)\n", (2, 21), "division by zero"),
    (HEAD + "    return x.foo\n", (2, 14), "no attribute 'foo': the one attribute of tensors is .T"),
    (HEAD + "    return (1.0).T\n", (2, 18), ".T needs a tensor, got number 1.0"),
    (HEAD + "    return x[..., ...]\n", (2, 19), "an index can have only one ellipsis"),
    (HEAD + "    return x[None, 0, 0]\n", (2, 12), "too many indices (2) for f32[N]"),
    (HEAD + "    z = x[0]\n    z += x\n", (3, 5), "would change 'z' from f32 to tensor f32[N]"),
    (HEAD + "    z = x\n    z += f64(x)\n", (3, 5), "dtype mismatch"),
    (HEAD + "    z = 1.0\n    z *= x\n    return z\n", (3, 5), "would change 'z' from a number to tensor f32[N]"),
    (HEAD + "    z = i32(x)\n    z /= 2\n    return x\n", (3, 5), "div: expected float operands, got i32[N]"),
    (HEAD + "    q += x\n    return q\n", (2, 5), "'q' must be assigned before '+='"),
    (HEAD + "    return where(isnan(i32(x)), x, x)\n", (2, 24), "isnan(): expected a float tensor, got i32[N]"),
    # Python habits: what adc offers instead (tests/frontend/test_python_habits.py covers the class)
    (HEAD + "    return np.exp(x)\n", (2, 12), "'np.exp(x)' is from NumPy; a kernel calls adc's builtins by name: write exp(x)"),
    (HEAD + "    return math.exp(x)\n", (2, 12), "write exp(x)"),
    (HEAD + "    print(x)\n    return x\n", (2, 5), "a kernel does no I/O"),
    (HEAD + "    g = lambda v: v * 2.0\n    return g(x)\n", (2, 9), "a kernel has no lambdas: write the function with def"),
    ("import numpy as np\n" + HEAD + "    return x\n", (1, 1), "'import' is not supported: a kernel imports nothing"),
    # a call whose static sizes break what the callee needs, its dead code included (h0's x[1]),
    # or what the callee's own calls need (h1 calls h0 with its M)
    ("def h0(x: f32[N]) -> f32[N]:\n    t = x[1]\n    return x\n"
     "def f(y: f32) -> f32:\n    return sum(h0(broadcast_to(y, [1])))\n", (5, 16), "h0() needs N-2 >= 0, but this call gives N = 1"),
    ("def h0(x: f32[N]) -> f32[N]:\n    return x * x[2]\n"
     "def h1(x: f32[M]) -> f32[M]:\n    return h0(x)\n"
     "def f(y: f32) -> f32:\n    t = h1(broadcast_to(y, [2]))\n    return y\n", (6, 9), "h1() needs M-3 >= 0, but this call gives M = 2"),
]


@pytest.mark.parametrize("source, where, message", CASES, ids=[c[2][:40] for c in CASES])
def test_malformed_program_is_located(source, where, message):
    with pytest.raises(CompileError) as info:
        compile_source(source, "bad.adc")
    err = info.value
    assert message in err.message
    assert (err.line, err.col) == where, err.render()
    rendered = err.render().splitlines()
    assert rendered[0].startswith(f"bad.adc:{where[0]}:{where[1]}: error: ")
    assert rendered[1] == source.splitlines()[where[0] - 1]
    assert rendered[2] == " " * (where[1] - 1) + "^"


def test_table_is_large_enough():
    assert len(CASES) >= 25


@pytest.mark.parametrize("brk", ["\x0c", "\x1c", "\x85", "\u2028"])
def test_excerpt_is_the_line_the_lexer_counted(brk):
    # str.splitlines ends a line at these characters, adc's lexer does not: the excerpt was a wrong line
    source = f"def f(x: f32) -> f32:  # a{brk}comment\n    return y\n"
    with pytest.raises(CompileError) as info:
        compile_source(source, "bad.adc")
    assert info.value.render().split("\n") == ["bad.adc:2:12: error: unknown name 'y'", "    return y", " " * 11 + "^"]


def _nest(kinds: str, inner: str = "x = x + 1.0") -> list[str]:
    """Lines of blocks nested in the order of `kinds` (f: for, w: while, i: if) around `inner`."""
    heads = {"f": "for k{} in range(2):", "w": "while x[0] < {}.0:", "i": "if x[0] > -{}.0:"}
    return ["    " * level + heads[kind].format(level) for level, kind in enumerate(kinds)] + ["    " * len(kinds) + inner]


def _kernel(name: str, body: list[str]) -> str:
    return f"def {name}(x: f32[N]) -> f32[N]:\n" + "".join(f"    {line}\n" for line in body) + "    return x\n"


def test_blocks_nest_16_deep_and_no_deeper():
    """Past MAX_NESTING the compiler would walk the nest on Python's stack ever deeper (a 250-deep
    if reached its recursion limit in codegen, a 150-deep for in the adjoint) and a gradient through
    nested while loops would need more temporaries than fit (24 deep): a located error."""
    kinds = "fwi" * 5 + "f"
    assert nesting_depth(compile_source(_kernel("f", _nest(kinds))).funcs, "f") == 16
    with pytest.raises(CompileError) as err:
        compile_source(_kernel("f", _nest(kinds + "w")))
    assert (err.value.loc.line, err.value.loc.col) == (18, 69)
    assert "this while loop nests for, while and if blocks 17 deep here" in str(err.value)


def test_a_call_counts_the_blocks_of_its_callee_where_it_is_called():
    """Inlined, the callee's blocks nest inside the caller's."""
    callee = _kernel("g", _nest("f" * 10))
    caller = _kernel("f", _nest("i" * 6, "x = g(x)"))
    assert nesting_depth(compile_source(callee + caller).funcs, "f") == 16
    with pytest.raises(CompileError) as err:
        compile_source(callee + _kernel("f", _nest("i" * 7, "x = g(x)")))
    assert (err.value.loc.line, err.value.loc.col) == (22, 37)
    assert "the call of g() nests for, while and if blocks 17 deep here" in str(err.value)
