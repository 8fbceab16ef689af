"""Located compile errors: values with a span, rendered once as `file:line:col: error: ...`."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

# Python source breaks lines at these only (`str.splitlines` also breaks at \f, \x1c, \u2028, ...)
LINE_BREAK = re.compile(r"\r\n|\r|\n")


class Span(BaseModel):
    """A source range: 1-based lines, 0-based columns (as libcst and CPython count them)."""

    model_config = ConfigDict(frozen=True)

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def key(self) -> tuple[int, int]:
        return (self.line, self.col)


class CompileError(Exception):
    """A user mistake in a model file. Never shown as a traceback.

    With a span it points at a place; with only `file` it is about the file as a whole.
    """

    def __init__(self, span: Span | None, message: str, file: str | None = None):
        super().__init__(message)
        self.span = span
        self.message = message
        self.file = span.file if span is not None else file

    def render(self, source: str | None = None) -> str:
        if self.span is None:
            return f"{self.file}: error: {self.message}" if self.file else f"error: {self.message}"
        s = self.span
        head = f"{s.file}:{s.line}:{s.col + 1}: error: {self.message}"
        if source is None:
            try:
                with open(s.file, "rb") as f:
                    # the error may be that the file is not UTF-8: show its line anyway
                    source = f.read().decode("utf-8-sig", errors="replace")
            except OSError:
                return head
        lines = LINE_BREAK.split(source)
        if not 1 <= s.line <= len(lines):
            return head
        text = lines[s.line - 1]
        width = max(1, (s.end_col if s.end_line == s.line else len(text)) - s.col)
        return f"{head}\n    {text}\n    {' ' * s.col}^{'~' * (width - 1)}"
