"""Reading an adc source file: its bytes decoded here, so a file that is not UTF-8 is a located
CompileError like any other error in the program, not a UnicodeDecodeError."""
from __future__ import annotations

import os

from adc.errors import CompileError, Location


def read_source(path: str | os.PathLike) -> str:
    """A source file's text; a file that is not UTF-8 is a CompileError at its first bad byte."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = len(data[data.rfind(b"\n", 0, err.start) + 1:err.start].decode("utf-8")) + 1   # in characters
        raise CompileError(f"the file is not UTF-8 text: byte 0x{data[err.start]:02x} cannot be decoded",
                           Location(str(path), line, col, data.decode("utf-8", "replace"))) from None
