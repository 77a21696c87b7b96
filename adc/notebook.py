"""`%%adc`: a notebook cell of adc source, compiled, its kernels bound in the notebook's namespace.

    %load_ext adc
    %%adc
    def sigmoid_shift(x: f32[N], delta: f32) -> f32[N]:
        return sigmoid(x + delta)

After the cell, `sigmoid_shift` is the compiled kernel; `%%adc layers` binds the module as
`layers` too. A program with an error is reported as the CLI reports it — `file:line:col: error:`,
the line, a caret; the cell's lines counted from 1 — with no traceback, and binds nothing.
Compiles go through adc.compile's on-disk cache: rerunning a notebook compiles nothing new.
Kernels written with @adc.kernel in ordinary cells work too (IPython keeps each cell's source).
"""
from __future__ import annotations

import sys

from adc.errors import CompileError
from adc.runtime.module import from_source, warn_on_open


def load(ipython) -> None:
    """Register the %%adc cell magic with an IPython shell (adc.load_ipython_extension)."""
    def adc(line: str, cell: str) -> None:
        compile_cell(ipython, line, cell)
    ipython.register_magic_function(adc, magic_kind="cell", magic_name="adc")


def compile_cell(ipython, line: str, cell: str) -> None:
    module_name = line.strip()
    if module_name and not module_name.isidentifier():
        print(f"error: %%adc takes the name to bind the module to, got {module_name!r}", file=sys.stderr)
        return
    label = f"<adc cell {ipython.execution_count}>"
    try:
        module = warn_on_open(from_source(cell, label), "%%adc")
    except CompileError as err:
        print(err.render(), file=sys.stderr)
        return
    bound = {name: module[name] for name in module.kernels}
    if module_name:
        bound[module_name] = module
    ipython.user_ns.update(bound)
