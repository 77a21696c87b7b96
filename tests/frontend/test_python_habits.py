"""What a Python user writes in a kernel, refused with a located CompileError that says what adc
offers instead: library functions (NumPy's, math's, JAX's, PyTorch's, ...), their constants and
dtypes, methods, I/O, lambdas, imports, comprehensions, Python's own builtins."""
import pytest

from adc.errors import CompileError
from adc.frontend import compile_source

HEAD = "def f(x: f64[N], y: f64[N]) -> f64[N]:\n"
LIBRARIES = ["np", "numpy", "math", "cmath", "jnp", "jax.numpy", "torch", "tf", "tf.math", "scipy.special"]
# (their call, the builtin adc offers): the same name, or adc's for it
FUNCTIONS = [("exp(x)", "exp(x)"), ("tanh(x + 1.0)", "tanh(x + 1.0)"), ("arctan2(y, x)", "atan2(y, x)"),
             ("power(x, 2.0)", "pow(x, 2.0)"), ("maximum(x, y)", "maximum(x, y)")]
PLACES = ["    return {call}\n", "    z = 2.0 * {call}\n    return z\n", "    return where(x > 0.0, {call}, x)\n"]


def located_error(source: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_source(source, "bad.adc")
    err = info.value
    rendered = err.render().splitlines()    # file:line:col, the source line, a caret under the column
    assert rendered[0].startswith(f"bad.adc:{err.line}:{err.col}: error: ")
    assert rendered[1] == source.splitlines()[err.line - 1] and rendered[2] == " " * (err.col - 1) + "^"
    return err


def where_of(source: str, text: str) -> tuple[int, int]:
    """(line, col) of the first `text` in `source`, 1-based."""
    for number, line in enumerate(source.splitlines(), start=1):
        if text in line:
            return number, line.index(text) + 1
    raise AssertionError(f"{text!r} not in the source")


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("call, ours", FUNCTIONS)
@pytest.mark.parametrize("library", LIBRARIES)
def test_a_library_function_names_adcs_builtin(library, call, ours, place):
    source = HEAD + place.format(call=f"{library}.{call}")
    err = located_error(source)
    assert f"'{library}.{call}' is from " in err.message and f"write {ours}" in err.message, err.message
    assert (err.line, err.col) == where_of(source, f"{library}.")


def test_a_library_function_adc_lacks_is_named():
    err = located_error(HEAD + "    return np.fft.fft(x)\n")
    assert "'np.fft.fft(x)' is from NumPy, and adc has no builtin 'fft'" in err.message


CONSTANT = HEAD + "    return x * f64(full([N], {}))\n"
DTYPE = HEAD + "    return zeros([N], dtype={})\n"


@pytest.mark.parametrize("source, text, ours", [(CONSTANT, "np.pi", "write pi"), (CONSTANT, "math.e", "write e"),
                                                (CONSTANT, "np.inf", "write inf"), (CONSTANT, "math.nan", "write nan"),
                                                (DTYPE, "np.float32", "write f32"), (DTYPE, "torch.float64", "write f64")])
def test_a_library_constant_or_dtype_names_adcs(source, text, ours):
    source = source.format(text)
    err = located_error(source)
    assert ours in err.message and (err.line, err.col) == where_of(source, text)


@pytest.mark.parametrize("attribute, hint", [("shape", "use the dimension (N"), ("size", "use the dimension (N"),
                                             ("ndim", "ranks are declared"), ("dtype", "dtypes are declared")])
def test_an_array_attribute_says_how_a_kernel_knows_it(attribute, hint):
    source = HEAD + f"    return x * f64(x.{attribute})\n"
    err = located_error(source)
    assert f"no attribute '{attribute}'" in err.message and hint in err.message


@pytest.mark.parametrize("body", ["    print(x)\n    return x\n", "    print('x is', x, sep=' ')\n    return x\n",
                                  "    z = print(x)\n    return x\n", "    z = input()\n    return x\n",
                                  "    h = open('data.txt')\n    return x\n", "    breakpoint()\n    return x\n",
                                  "    for i in range(3):\n        print(x[i])\n    return x\n"])
def test_io_is_refused_as_io(body):
    source = HEAD + body
    err = located_error(source)
    name = next(word for word in ("print", "input", "open", "breakpoint") if word + "(" in body)
    assert "a kernel does no I/O" in err.message and (err.line, err.col) == where_of(source, name + "(")


@pytest.mark.parametrize("body", ["    g = lambda v: v * 2.0\n    return g(x)\n", "    return (lambda v: v)(x)\n",
                                  "    return where(x > 0.0, x, (lambda: 0.0)())\n",
                                  "    g = lambda v, w: v + w\n    return g(x, y)\n", "    lambda: x\n    return x\n"])
def test_a_lambda_is_refused_as_a_lambda(body):
    source = HEAD + body
    err = located_error(source)
    assert "a kernel has no lambdas: write the function with def" in err.message
    assert (err.line, err.col) == where_of(source, "lambda")


@pytest.mark.parametrize("source", ["import numpy as np\n" + HEAD + "    return x\n",
                                    "from math import exp\n" + HEAD + "    return exp(x)\n",
                                    HEAD + "    import math\n    return x\n", HEAD + "    from numpy import exp\n    return x\n"])
def test_an_import_says_the_builtins_are_in_scope(source):
    err = located_error(source)
    assert "a kernel imports nothing" in err.message
    word = "import" if "from" not in source else "from"
    assert (err.line, err.col) == where_of(source, word)


@pytest.mark.parametrize("statement, hint", [("raise ValueError('no')", "a kernel cannot raise"),
                                             ("assert x[0] > 0.0", "a kernel cannot raise"),
                                             ("with open('a') as h:\n        pass", "the statements of a kernel are")])
def test_other_python_statements_are_named(statement, hint):
    source = HEAD + f"    {statement}\n    return x\n"
    err = located_error(source)
    assert hint in err.message and (err.line, err.col) == (2, 5)


@pytest.mark.parametrize("expression", ["[v * 2.0 for v in x]", "sum([v for v in x])"])
def test_a_comprehension_names_the_array_operation(expression):
    source = HEAD + f"    return {expression}\n"
    err = located_error(source)
    assert "a kernel has no comprehensions" in err.message and (err.line, err.col) == where_of(source, "for")


@pytest.mark.parametrize("call, hint", [("len(x)", "use the dimension (N"), ("float(x[0])", "f64(x)"),
                                        ("int(x[0])", "i64(x)"), ("arctan(x)", "adc calls it atan")])
def test_pythons_builtins_name_what_adc_offers(call, hint):
    source = HEAD + f"    return x * {call}\n"
    err = located_error(source)
    assert f"unknown function '{call.split('(')[0]}'" in err.message and hint in err.message
    assert (err.line, err.col) == where_of(source, call)


def test_a_parameter_named_like_a_library_is_a_tensor():
    """`np` bound in the kernel is the user's: its attribute is a tensor's."""
    err = located_error("def f(np: f64[N]) -> f64[N]:\n    return np.pi\n")
    assert "no attribute 'pi'" in err.message
