"""Errors a person can act on: a source location, the offending line and a caret.

`CompileError` is raised for every malformed program; `VerifyError` for an IR
invariant broken by a pass (a bug in adc, not in the user's program).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Location:
    """A 1-based line:column in a source file; `source` keeps the text for excerpts."""

    file: str
    line: int
    col: int
    source: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def source_line(self) -> str | None:
        text = self.source
        if text is None:
            try:
                text = Path(self.file).read_text()
            except OSError:
                return None
        lines = text.split("\n")      # the lexer's lines: \f, \x1c, \u2028 ... do not end one
        if 1 <= self.line <= len(lines):
            return lines[self.line - 1].removesuffix("\r")
        return None

    def excerpt(self) -> str:
        """The source line and a caret under the column, or '' when the text is unknown."""
        line = self.source_line()
        if line is None:
            return ""
        caret = " " * (self.col - 1) + "^"
        return f"{line}\n{caret}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Location):
            return NotImplemented
        return (self.file, self.line, self.col) == (other.file, other.line, other.col)

    def __hash__(self) -> int:
        return hash((self.file, self.line, self.col))


class CompileError(Exception):
    """A malformed program: `file:line:col: error: message`, the source line, a caret."""

    def __init__(self, message: str, loc: Location | None = None):
        self.message = message
        self.loc = loc
        super().__init__(self.render())

    @property
    def line(self) -> int | None:
        return self.loc.line if self.loc else None

    @property
    def col(self) -> int | None:
        return self.loc.col if self.loc else None

    @property
    def file(self) -> str | None:
        return self.loc.file if self.loc else None

    def render(self) -> str:
        if self.loc is None:
            return f"error: {self.message}"
        head = f"{self.loc}: error: {self.message}"
        excerpt = self.loc.excerpt()
        return f"{head}\n{excerpt}" if excerpt else head


class VerifyError(Exception):
    """An IR invariant does not hold; names the pass that broke it when known."""


class ToolchainError(Exception):
    """A tool adc needs outside Python (the system linker `cc`) is missing or failed."""


class BoundsError(RuntimeError):
    """A bounds-checked build's kernel (`check_bounds=True`, `adc compile --check-bounds`,
    ADC_CHECK_BOUNDS=1) stopped before an access outside a buffer, or found a block's redzone
    damaged when it gave the block back: the message names the kernel, the op and its source
    location, the buffer, the index and the extent."""

