"""What a Python user writes in a kernel that adc spells otherwise, and the message that says so.

A kernel looks like Python, so people write NumPy's `np.exp(x)`, `math.sqrt(x)`, `print(x)`, a
`lambda`, `import numpy`, `x.sum()`; the parser alone can only say "unexpected '('". The parser
(parse.py: `syntax_hint`) and the elaborator (elaborate.py: `unknown_function`, `unknown_name`,
`library_attribute`) ask here for what adc offers instead:

    syntax_hint("    return np.exp(x)", 18, "(")   # ("'np.exp(x)' is from NumPy; a kernel calls adc's
                                                   #   builtins by name: write exp(x)", 12)
    unknown_function("print")                      # "a kernel does no I/O: return the values ..."
"""
from __future__ import annotations

import re

from adc.frontend.builtins import builtin_rules

# The names a Python program gives the libraries whose functions adc's builtins stand for.
LIBRARIES = {"np": "NumPy", "numpy": "NumPy", "math": "Python's math module", "cmath": "Python's cmath module",
             "jnp": "JAX", "jax": "JAX", "lax": "JAX", "torch": "PyTorch", "tf": "TensorFlow",
             "scipy": "SciPy", "special": "SciPy", "random": "Python's random module"}

# Their names for what adc names otherwise (NumPy's, math's, PyTorch's).
RENAMED = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2", "arcsinh": "asinh",
           "arccosh": "acosh", "arctanh": "atanh", "power": "pow", "absolute": "abs", "fabs": "abs",
           "amax": "max", "amin": "min", "concatenate": "concat", "cat": "concat", "clamp": "clip",
           "expit": "sigmoid", "fmax": "maximum", "fmin": "minimum", "sgn": "sign",
           "reduce_sum": "sum", "reduce_mean": "mean", "reduce_max": "max", "reduce_min": "min",
           "reduce_prod": "prod", "reduce_logsumexp": "logsumexp", "clip_by_value": "clip", "gather": "take"}

# A library's names adc spells otherwise: (what it is, adc's spelling).
LIBRARY_NAMES = {"float32": ("dtype", "f32"), "float64": ("dtype", "f64"), "int32": ("dtype", "i32"),
                 "int64": ("dtype", "i64"), "bool_": ("dtype", "bool")}

# What Python code reads off an array, and how a kernel knows it.
SIZES_BY_NAME = "a kernel knows its sizes by name: use the dimension (N, for x: f32[N])"
TENSOR_ATTRIBUTES = {"shape": SIZES_BY_NAME, "size": SIZES_BY_NAME, "ndim": "a kernel's ranks are declared in its signature",
                     "dtype": "a kernel's dtypes are declared in its signature"}

IO_FUNCTIONS = ("print", "input", "open", "breakpoint", "exit", "quit")
NO_IO = ("a kernel does no I/O: return the values you want to see (a kernel may return several) "
         "and print them, or read files, in Python")
NO_LAMBDA = "a kernel has no lambdas: write the function with def at the top level of the source and call it"
NO_COMPREHENSION = ("a kernel has no comprehensions: write the array operation (x * 2.0, where(x > 0, x, 0.0)) "
                    "or a for loop over range(...) that writes y[i]")

# Python's builtins that have no kernel counterpart, and what to write instead.
PYTHON_BUILTINS = {
    "len": SIZES_BY_NAME,
    "float": "convert with f64(x) or f32(x)", "int": "convert with i64(x) or i32(x)",
    "bool": "compare instead (x != 0.0)",
    "enumerate": "a for loop runs over range(...): index the arrays with its counter",
    "zip": "a for loop runs over range(...): index the arrays with its counter",
    "list": "lists are written [a, b, c]; arrays come from zeros, ones, full, stack and concat",
    "isinstance": "a kernel's types are declared in its signature", "type": "a kernel's types are declared in its signature",
}

NO_IMPORT = "a kernel imports nothing: exp, sum, where and adc's other builtins are always in scope, called by name"
NO_RAISE = "a kernel cannot raise: check the arguments in Python before the call"
STATEMENT_HINTS = {"import": NO_IMPORT, "from": NO_IMPORT, "lambda": NO_LAMBDA, "raise": NO_RAISE, "assert": NO_RAISE}
GENERIC_STATEMENT_HINT = "the statements of a kernel are assignments, for, while, if and return"

_METHOD_BEFORE = re.compile(r"\.\s*([A-Za-z_]\w*)\s*$")     # `.name` just before a '('
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_IO_CALL = re.compile(rf"\b({'|'.join(IO_FUNCTIONS)})\s*\(")
_LAMBDA = re.compile(r"\blambda\b")


def statement_hint(keyword: str) -> str:
    """Why a Python statement adc lacks is refused, and what to write instead."""
    return STATEMENT_HINTS.get(keyword, GENERIC_STATEMENT_HINT)


def syntax_hint(line: str, col: int, token: str) -> tuple[str, int] | None:
    """(message, column) for a syntax error at `col` (1-based) of `line`, at `token`, when a Python
    habit explains it: a lambda, an I/O call, a comprehension, a library function or a method
    called."""
    upto = line[:col - 1 + len(token)]
    lambdas = list(_LAMBDA.finditer(upto))
    if lambdas:
        return NO_LAMBDA, lambdas[-1].start() + 1
    io_calls = list(_IO_CALL.finditer(upto))
    if io_calls:
        return NO_IO, io_calls[-1].start(1) + 1
    if token == "for" and _open_bracket(line[:col - 1]):
        return NO_COMPREHENSION, col
    before = line[:col - 1]
    method = _METHOD_BEFORE.search(before) if token == "(" else None
    start = _postfix_start(before, method.start()) if method else 0
    if method is None or start == method.start():
        return None
    receiver = before[start:method.start()].strip()
    name, arguments = f"{receiver}.{method.group(1)}", _arguments(line, col - 1)
    if _DOTTED.fullmatch(receiver) and receiver.split(".")[0] in LIBRARIES:
        return library_call(name, arguments), start + 1
    return method_call(name, arguments), start + 1


def library_call(dotted: str, arguments: str | None) -> str:
    """`np.exp(x)` and the like: the builtin to call instead, if adc has one."""
    library, function = LIBRARIES[dotted.split(".")[0]], dotted.rsplit(".", 1)[1]
    shown = f"{dotted}({arguments if arguments is not None else '...'})"
    ours = _builtin_for(function)
    if ours is None:
        return f"'{shown}' is from {library}, and adc has no builtin '{function}' (docs/language.md lists adc's)"
    return f"'{shown}' is from {library}; a kernel calls adc's builtins by name: write {ours}({arguments or '...'})"


def method_call(dotted: str, arguments: str | None) -> str:
    """`x.sum()` and the like: tensors have no methods, the builtin takes the tensor first."""
    receiver, method = dotted.rsplit(".", 1)
    shown = f"{dotted}({arguments if arguments is not None else '...'})"
    if method == "astype" and arguments in ("f32", "f64", "i32", "i64", "bool"):
        return f"tensors have no methods in a kernel: write {arguments}({receiver}) for '{shown}'"
    ours = _builtin_for(method)
    if ours is None:
        return f"tensors have no methods in a kernel, and adc has no builtin '{method}' for '{shown}'"
    rest = f", {arguments}" if arguments else ("" if arguments is not None else ", ...")
    return f"tensors have no methods in a kernel: write {ours}({receiver}{rest}) for '{shown}'"


def unknown_function(name: str) -> str:
    """The message for a call of a function adc does not know."""
    if name in IO_FUNCTIONS:
        return f"unknown function '{name}': {NO_IO}"
    if name in PYTHON_BUILTINS:
        return f"unknown function '{name}': {PYTHON_BUILTINS[name]}"
    ours = RENAMED.get(name)
    return f"unknown function '{name}'" + (f"; adc calls it {ours}" if ours else "")


def unknown_name(name: str) -> str:
    """The message for a name nothing defines."""
    if name in LIBRARIES:
        return (f"unknown name '{name}': {LIBRARIES[name]} is not available inside a kernel; adc's builtins "
                "are called by name (exp(x), sum(x)) and its constants are pi, e, inf and nan")
    return f"unknown name '{name}'"


def library_attribute(module: str, attribute: str, constants) -> str | None:
    """The message for `np.pi`, `math.inf`, `np.float64` and the like; None when `module` is no library."""
    if module not in LIBRARIES:
        return None
    library = LIBRARIES[module]
    if attribute in constants:
        return f"'{module}.{attribute}' is from {library}; adc's constant is {attribute}: write {attribute}"
    ours = LIBRARY_NAMES.get(attribute)
    if ours is not None:
        kind, written = ours
        return f"'{module}.{attribute}' is from {library}; adc's {kind} is {written}: write {written}"
    return unknown_name(module)


def tensor_attribute(name: str) -> str:
    """The message for `x.<name>`, an attribute other than .T."""
    hint = TENSOR_ATTRIBUTES.get(name)
    return f"no attribute '{name}': the one attribute of tensors is .T (axes reversed)" + (f"; {hint}" if hint else "")


def _builtin_for(name: str) -> str | None:
    ours = RENAMED.get(name, name)
    return ours if ours in builtin_rules else None


_DEPTH = {"(": 1, "[": 1, ")": -1, "]": -1}


def _arguments(line: str, open_at: int) -> str | None:
    """The text between the '(' at index `open_at` of `line` and its ')' on the same line, if any."""
    depth = 0
    for k in range(open_at, len(line)):
        depth += _DEPTH.get(line[k], 0)
        if depth == 0:
            return line[open_at + 1:k].strip()
    return None


def _postfix_start(text: str, end: int) -> int:
    """Where the expression ending at index `end` of `text` begins, read back over names, dots and
    bracketed groups (`x`, `np.linalg`, `(x + y)`, `x[0]`)."""
    k = end
    while k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_.)]"):
        if text[k - 1] in ")]":
            depth = 0
            while k > 0:
                depth -= _DEPTH.get(text[k - 1], 0)
                k -= 1
                if depth == 0:
                    break
        else:
            k -= 1
    return k


def _open_bracket(text: str) -> bool:
    return sum(_DEPTH.get(ch, 0) for ch in text) > 0
