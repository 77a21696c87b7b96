"""Random well-typed adc programs with a NumPy twin: what the fuzz tests compile and check.

A program is a few kernels: helpers (plain kernels, `@custom_gradient` kernels of
functions whose derivative is known, `extern` functions of libm with an `@gradient`)
and a main kernel `f` calling them. Kernels are drawn statement by statement by
tests/support/expressions.py and written twice, in adc (`Program.source`) and in
Python (`Program.twin`, run by tests/support/twin.py). The sizes of the dimension
symbols and the seed of the arguments are drawn with the program, so a failing
example is whole and hypothesis shrinks it as one.

    @given(programs(Options(floats=("f64",), smooth=True)))
    def test_gradients(program):
        m = adc.compile(program.source)
        m.f(*program.arguments())            # == Twin(program.twin, "f")(*program.arguments())
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from tests.support.expressions import Expressions
from tests.support.vocabulary import EXTERNS, INPUT_BOUND, SYMBOLS, Expr, Extern, Options, Signature, Type

PARAM_NAMES = ("x", "y", "z", "w")
MAIN = "f"


@dataclass(frozen=True)
class CustomGradient:
    """A function of same-shaped inputs whose `@custom_gradient` backward is its true derivative: one
    value computed before the backward and saved for it, the result, one cotangent per input."""

    params: tuple[str, ...]
    saved: tuple[str, str]          # adc, NumPy
    result: tuple[str, str]
    backward: tuple[str, ...]
    bound: float


CUSTOM_GRADIENTS = (
    # d[x tanh x] = tanh x + x (1 - tanh² x)
    CustomGradient(("x",), ("t = tanh(x)", "t = np.tanh(x)"), ("x * t", "x * t"),
                   ("dy * (t + x * (1.0 - t * t))",), 2.0),
    # d[x sigmoid y] = (sigmoid y, x sigmoid y (1 - sigmoid y))
    CustomGradient(("x", "y"), ("s = sigmoid(y)", "s = _sigmoid(y)"), ("x * s", "x * s"),
                   ("dy * s", "dy * x * s * (1.0 - s)"), 2.0),
    # the guide's log1pexp: d log(1 + e^x) = 1 - 1 / (1 + e^x)
    CustomGradient(("x",), ("e = exp(x)", "e = np.exp(x)"), ("log(1.0 + e)", "np.log(1.0 + e)"),
                   ("dy * (1.0 - 1.0 / (1.0 + e))",), 2.2),
)


@dataclass(frozen=True)
class Program:
    """The adc source, its twin, the signature of its main kernel `f`, the sizes of the symbols."""

    source: str
    twin: str
    main: Signature
    sizes: dict
    seed: int

    def shape(self, t: Type) -> tuple[int, ...]:
        return tuple(self.sizes.get(d, d) for d in t.shape)

    def arguments(self) -> list[np.ndarray]:
        """The main kernel's arguments: floats in [-2, 2), ints in [-3, 3], bools (INPUT_BOUND)."""
        rng = np.random.default_rng(self.seed)
        args = []
        for _, t in self.main.params:
            dtype, shape = t.numpy, self.shape(t)
            if t.is_float:
                args.append(rng.uniform(-INPUT_BOUND[t.dtype], INPUT_BOUND[t.dtype], shape).astype(dtype))
            elif t.dtype == "bool":
                args.append(rng.random(shape) < 0.5)
            else:
                args.append(rng.integers(-3, 4, shape).astype(dtype))
        return args


@st.composite
def programs(draw, options: Options = Options()) -> Program:
    """Up to `max_helpers` helpers, then `f`, placed among them; one float dtype (others only by casts)."""
    floats = draw(st.sampled_from(options.floats))
    dtypes = (floats,) + options.others + tuple(f for f in options.floats if f != floats and not options.smooth)
    callables: list[Signature] = []
    kernels: list[str] = []
    twins: list[str] = []
    externs: set[str] = set()
    for i in range(draw(st.integers(0, options.max_helpers))):
        if options.custom_gradients and draw(st.booleans()):
            made = _custom_gradient(draw, options, f"g{i}", floats)
        else:
            made = _kernel(draw, options, f"h{i}", dtypes, callables, externs, results=draw(st.integers(1, 2)))
        callables.append(made[0])
        kernels.append(made[1])
        twins.append(made[2])
    main, source, twin = _kernel(draw, options, MAIN, dtypes, callables, externs, results=draw(st.integers(1, 2)))
    kernels.insert(draw(st.integers(0, len(kernels))), source)     # kernels may call others defined later
    declarations = [_extern(EXTERNS[name]) for name in sorted(_with_callees(externs))]
    sizes = {s: draw(st.sampled_from(options.sizes)) for s in SYMBOLS}
    return Program("\n\n".join(declarations + kernels), "\n\n".join(twins + [twin]), main, sizes,
                   draw(st.integers(0, 2**32 - 1)))


def _with_callees(externs: set[str]) -> set[str]:
    """The extern functions used (the set also notes the builtins used that share a name with one)."""
    used = {name for name in externs if name in EXTERNS}
    return used | {c for name in used for c in EXTERNS[name].calls}


def _kernel(draw, options: Options, name: str, dtypes, callables, externs, results: int):
    params = []
    for i, p in enumerate(PARAM_NAMES[:draw(st.integers(1, len(PARAM_NAMES)))]):
        t = Type(draw(st.sampled_from((dtypes[0],) * 3 + dtypes)) if i else dtypes[0],
                 tuple(draw(st.lists(st.sampled_from(options.static + SYMBOLS), max_size=3))))
        params.append(Expr(p, p, t, INPUT_BOUND[t.dtype], atom=True))
    g = Expressions(draw, options, dtypes, params, callables, externs)
    for _ in range(draw(st.integers(0, options.max_statements))):
        if not (draw(st.integers(0, 3)) == 0 and g.unpack(options.max_depth)):
            g.assign(g.draw(g.random_type(), draw(st.integers(1, options.max_depth))))
    types = [g.random_type((dtypes[0],) if i == 0 else None) for i in range(results)]
    returns = [g.draw(t, draw(st.integers(max(1, options.max_depth - 1), options.max_depth))) for t in types]
    sig = Signature(name, tuple((p.adc, p.type) for p in params), tuple(types), tuple(e.bound for e in returns))
    header = f"def {name}({', '.join(f'{p.adc}: {p.type}' for p in params)}) -> {_results(types)}:"
    docstring = ['    """A kernel drawn at random."""'] if draw(st.integers(0, 4)) == 0 else []
    body = [adc for adc, _ in g.statements] + [f"return {', '.join(e.adc for e in returns)}"]
    source = "\n".join([header] + docstring + [f"    {line}" for line in body]) + "\n"
    twin = [f"def {name}({', '.join(p.adc for p in params)}):"] + [f"    {line}" for line in _bind_symbols(params)]
    twin += [f"    {py}" for _, py in g.statements] + [f"    return {', '.join(e.py for e in returns)}"]
    return sig, source, "\n".join(twin) + "\n"


def _results(types) -> str:
    return str(types[0]) if len(types) == 1 else f"({', '.join(map(str, types))})"


def _bind_symbols(params: list[Expr]) -> list[str]:
    """`N = x.shape[0]` for each symbol, where it first appears."""
    seen: dict[str, str] = {}
    for p in params:
        for axis, d in enumerate(p.type.shape):
            if isinstance(d, str) and d not in seen:
                seen[d] = f"{d} = {p.adc}.shape[{axis}]"
    return list(seen.values())


def _custom_gradient(draw, options: Options, name: str, dtype: str):
    cg = draw(st.sampled_from(CUSTOM_GRADIENTS))
    t = Type(dtype, tuple(draw(st.lists(st.sampled_from(options.static + SYMBOLS), max_size=2))))
    params = ", ".join(f"{p}: {t}" for p in cg.params)
    source = "\n".join([
        "@custom_gradient",
        f"def {name}({params}) -> {t}:",
        f"    {cg.saved[0]}",
        f"    def backward(dy: {t}) -> {_results([t] * len(cg.params))}:",
        f"        return {', '.join(cg.backward)}",
        f"    return {cg.result[0]}, backward",
    ]) + "\n"
    twin = f"def {name}({', '.join(cg.params)}):\n    {cg.saved[1]}\n    return {cg.result[1]}\n"
    return Signature(name, tuple((p, t) for p in cg.params), (t,), (cg.bound,)), source, twin


def _extern(ext: Extern) -> str:
    params = ", ".join(f"{p}: {ext.dtype}" for p in ext.params)
    return "\n".join([
        f"extern def {ext.name}({params}) -> {ext.dtype}",
        "",
        f"@gradient({ext.name})",
        f"def {ext.name}_grad({params}, dy: {ext.dtype}) -> {_results([ext.dtype] * len(ext.params))}:",
        f"    return {', '.join(ext.gradient)}",
    ]) + "\n"
