"""Golden IR files: a case `<case>.adc` whose first line is a `#` comment saying what it proves, and
`<case>.ir` holding that comment (as `//`) and the functions a pass derives from the case.
ADC_UPDATE_GOLDEN=1 rewrites the `.ir` files; review the diff."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

from adc.frontend import compile_source
from adc.ir.core import Func, Module
from adc.ir.printer import format_func


def assert_golden_functions(path: Path, derive: Callable[[Module], Iterable[Func]]) -> str:
    """Compile the case at `path`, print what `derive` makes of it, compare with (or, updating,
    write) its `.ir` file; returns the text."""
    source = path.read_text()
    comment = source.splitlines()[0]
    assert comment.startswith("# "), f"{path} must start with a # line saying what it proves"
    got = "\n".join([f"//{comment[1:]}", *map(format_func, derive(compile_source(source, path.name)))])
    expected = path.with_suffix(".ir")
    if os.environ.get("ADC_UPDATE_GOLDEN") == "1":
        expected.write_text(got)
    assert got == expected.read_text()
    return got
