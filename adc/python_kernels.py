"""@adc.kernel: kernels written in Python files, in adc's language, compiled by adc's frontend.

Python never runs the decorated function: its source, read with `inspect`, is the kernel, and its
annotations (adc/annotations.py) are its types. At decoration the source is translated, keeping
positions: decorators blanked, the def dedented, each annotation replaced by the adc type it
evaluates to (padded with spaces to its width). A kernel compiles with the kernels it calls — the
names of its body that are @adc.kernel functions of the same file, found where Python would find
them (its closure, then its module's globals) and so on transitively — as one program whose text
holds each at its line of the file, blank lines between. So every location, in a CompileError as
in the IR and a bounds error, names the .py file's own line; a CompileError's column gets the
kernel's indentation back, and its excerpt is the file's line as written.

    from adc import f32

    @adc.kernel
    def sigmoid_shift(x: f32["N"], delta: f32) -> f32["N"]:
        return sigmoid(x + delta)

    sigmoid_shift(np.ones(3, np.float32), 0.5)      # compiled now, then an ordinary kernel call
    adc.grad(sigmoid_loss)                           # anything that takes a kernel takes it

Compiled on first use (a call, or a transformation asking for `__adc_kernel__`), not at
decoration: importing a file of kernels costs no compile, and a kernel may call one defined below
it. The compile goes through adc.compile's path and its on-disk cache. A kernel pickles as its
compiled kernel, which carries the program's source text: Dask workers need neither the .py file
nor its module.
"""
from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from dataclasses import dataclass

from adc import locks
from adc.annotations import adc_type
from adc.errors import CompileError, Location
from adc.runtime.kernel import Kernel
from adc.runtime.module import from_source

TYPES_HINT = 'an adc type such as f32["B, N"], f64, i64["N"] (from adc import f32, f64, i32, i64)'


@dataclass(frozen=True)
class KernelSource:
    """One decorated def as the program text will hold it: `lines` (translated, dedented) start at
    the file's line `first`; `original` are the file's lines as written; `margin` is the indentation
    dedenting removed; `calls` the names its body reads, with where (file line, column)."""

    name: str
    file: str
    first: int
    lines: tuple[str, ...]
    original: tuple[str, ...]
    margin: int
    calls: dict[str, tuple[int, int]]

    @property
    def last(self) -> int:
        return self.first + len(self.lines) - 1

    def location(self, line: int, col: int) -> Location:
        """The file's location of the kernel text's (line, col), both 1-based."""
        return Location(self.file, self.first + line - 1, col + self.margin, _program([self], "original"))


class PythonKernel:
    """A function decorated with @adc.kernel: called, it compiles once and calls its adc kernel."""

    def __init__(self, function, source: KernelSource, check_bounds: bool):
        functools.update_wrapper(self, function)
        self.source = source
        self.check_bounds = check_bounds
        self._kernel: Kernel | None = None
        self._lock = locks.lock()

    @property
    def adc_source(self) -> str:
        """The kernel's text as adc compiles it (dedented, decorators gone, annotations as adc types)."""
        return "\n".join(self.source.lines).strip("\n") + "\n"

    def __adc_kernel__(self) -> Kernel:
        """The compiled kernel, compiled on the first request with the kernels it calls."""
        if self._kernel is None:
            with self._lock:
                if self._kernel is None:
                    self._kernel = _compile(self)
        return self._kernel

    def __call__(self, *args, **kwargs):
        return (self._kernel or self.__adc_kernel__())(*args, **kwargs)

    def __reduce__(self):
        return self.__adc_kernel__().__reduce__()

    def __repr__(self) -> str:
        return f"<adc kernel {self.source.name} of {self.source.file}:{self.source.first}>"


def kernel(function=None, *, check_bounds: bool = False):
    """Decorate a def written in adc's language (`@adc.kernel`, or `@adc.kernel(check_bounds=True)`
    for a bounds-checked build). CompileError, located in the file, for what is no kernel: a
    parameter or result without an adc type, keyword or variadic parameters; and where Python
    kept no source to read."""
    if function is None:
        return functools.partial(kernel, check_bounds=check_bounds)
    return PythonKernel(function, read_source(function), check_bounds)


def read_source(function) -> KernelSource:
    """The translated source of a decorated def (see the module docstring)."""
    if not inspect.isfunction(function) or function.__name__ == "<lambda>":
        raise TypeError(f"@adc.kernel decorates a def written in adc's language, not {function!r}")
    name, file = function.__name__, function.__code__.co_filename
    try:
        original, first = inspect.getsourcelines(function)
    except (OSError, TypeError):
        raise CompileError(f"@adc.kernel: the source of '{name}' is not available: it was defined in {file}, "
                           f"whose text Python did not keep (its interactive prompt keeps none before Python "
                           f"3.13). Write the kernel in a .py file or a notebook cell, or compile its text "
                           f"with adc.compile(source)") from None
    original = tuple(line.rstrip("\r\n") for line in original)
    dedented = textwrap.dedent("\n".join(original)).split("\n")
    margin = _indent(original) - _indent(dedented)
    source = KernelSource(name, file, first, tuple(dedented), original, margin, {})
    node = ast.parse("\n".join(dedented)).body[0]
    if not isinstance(node, ast.FunctionDef):
        raise CompileError("@adc.kernel decorates a def (not an async def)", source.location(node.lineno, 1))
    if len(node.decorator_list) > 1:
        raise CompileError(f"kernel '{name}': @adc.kernel is a kernel's only decorator (a @custom_gradient kernel, "
                           f"an extern or a @gradient rule is written in adc source: adc.compile(source))",
                           source.location(node.decorator_list[0].lineno, 1))
    _check_parameters(node, source)
    lines = list(dedented)
    lines[:node.lineno - 1] = [""] * (node.lineno - 1)      # the decorators
    replaced = sorted(_annotations(function, node, source), key=lambda a: (a[0].lineno, a[0].col_offset))
    for where, annotation in reversed(replaced):       # right to left: a longer type moves nothing unread
        _replace(lines, where, annotation)
    calls = {}
    for statement in node.body:
        for n in ast.walk(statement):
            if isinstance(n, ast.Name) and n.id not in calls:
                calls[n.id] = (first + n.lineno - 1, margin + _chars(dedented[n.lineno - 1], n.col_offset) + 1)
    return KernelSource(name, file, first, tuple(lines), original, margin, calls)


def _check_parameters(node: ast.FunctionDef, source: KernelSource) -> None:
    args = node.args
    odd = args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg or args.defaults
    if odd:
        raise CompileError(f"kernel '{node.name}': a kernel's parameters are plain positional ones with types "
                           f"(no defaults, '/', '*', *args or **kwargs)", source.location(node.lineno, 1))


def _annotations(function, node: ast.FunctionDef, source: KernelSource):
    """(ast node, adc type text) of each annotation; CompileError at a missing or foreign one."""
    try:
        evaluated = inspect.get_annotations(function, eval_str=True)
    except Exception as err:        # an annotation's own expression failed, as Python would report it
        raise CompileError(f"kernel '{node.name}': its annotations do not evaluate: {err}",
                           source.location(node.lineno, 1)) from None
    wanted = [(a.annotation, a.arg, f"parameter '{a.arg}'") for a in node.args.args]
    wanted.append((node.returns, "return", "the result"))
    for where, key, what in wanted:
        if where is None:
            at = node.lineno, 1
            raise CompileError(f"kernel '{node.name}': {what} needs {TYPES_HINT}", source.location(*at))
        text = adc_type(evaluated[key])
        if text is None:
            raise CompileError(f"kernel '{node.name}': {what} is annotated {evaluated[key]!r}, which is not "
                               f"{TYPES_HINT}", source.location(where.lineno, _col(source, where)))
        yield where, text


def _col(source: KernelSource, node: ast.AST) -> int:
    return _chars(source.lines[node.lineno - 1], node.col_offset) + 1


def _replace(lines: list[str], node: ast.AST, text: str) -> None:
    """The annotation `node` spans replaced by `text`, padded with spaces to its width, so the
    columns after it do not move; a span over several lines keeps its line breaks."""
    first, last = node.lineno - 1, node.end_lineno - 1
    start, end = _chars(lines[first], node.col_offset), _chars(lines[last], node.end_col_offset)
    if first == last:
        lines[first] = lines[first][:start] + text.ljust(end - start) + lines[first][end:]
        return
    lines[first] = lines[first][:start] + text
    lines[first + 1:last] = [""] * (last - first - 1)
    lines[last] = " " * end + lines[last][end:]


def _chars(line: str, byte_offset: int) -> int:
    """ast's column (UTF-8 bytes) as a column in characters."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", "replace"))


def _indent(lines) -> int:
    line = next((line for line in lines if line.strip()), "")
    return len(line) - len(line.lstrip())


def _program(sources: list[KernelSource], texts: str) -> str:
    """One text holding each source's `lines` or `original` at its lines of the file."""
    lines = [""] * max(s.last for s in sources)
    for s in sources:
        lines[s.first - 1:s.last] = getattr(s, texts)
    return "\n".join(lines) + "\n"


def _callees(root: PythonKernel) -> list[PythonKernel]:
    """`root` and the kernels it calls, transitively, by the names their bodies read."""
    found, todo = {root.source.name: root}, [root]
    while todo:
        caller = todo.pop()
        scope = _scope(caller.__wrapped__)
        for name, (line, col) in caller.source.calls.items():
            callee = scope(name)
            if not isinstance(callee, PythonKernel) or name in found or callee.source.name != name:
                continue
            if callee.source.file != root.source.file:
                raise CompileError(f"'{name}' is an @adc.kernel of {callee.source.file}: a kernel calls the kernels "
                                   f"of its own file", Location(caller.source.file, line, col,
                                                                _program([caller.source], "original")))
            found[name] = callee
            todo.append(callee)
    return sorted(found.values(), key=lambda k: k.source.first)


def _scope(function):
    """What a name of `function`'s body means to Python: its closure, then its globals."""
    cells = dict(zip(function.__code__.co_freevars, function.__closure__ or ()))

    def lookup(name: str):
        if name in cells:
            try:
                return cells[name].cell_contents
            except ValueError:      # a cell not yet assigned
                return None
        return function.__globals__.get(name)
    return lookup


def _compile(root: PythonKernel) -> Kernel:
    kernels = _callees(root)
    sources = [k.source for k in kernels]
    try:
        module = from_source(_program(sources, "lines"), root.source.file, root.check_bounds)
    except CompileError as err:
        raise _in_file(err, sources) from None
    return module[root.source.name]


def _in_file(err: CompileError, sources: list[KernelSource]) -> CompileError:
    """`err` with its column in the file (the kernel's indentation back) and the file's line as excerpt."""
    loc = err.loc
    owner = next((s for s in sources if loc and loc.file == s.file and s.first <= loc.line <= s.last), None)
    if owner is None:
        return err
    return CompileError(err.message, Location(loc.file, loc.line, loc.col + owner.margin, _program(sources, "original")))
