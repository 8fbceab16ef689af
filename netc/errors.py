"""Located compile errors: values with a span, rendered once as `file:line:col: error: ...`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


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
    """A user mistake in a model file. Never shown as a traceback."""

    def __init__(self, span: Span | None, message: str):
        super().__init__(message)
        self.span = span
        self.message = message

    def render(self, source: str | None = None) -> str:
        if self.span is None:
            return f"error: {self.message}"
        s = self.span
        head = f"{s.file}:{s.line}:{s.col + 1}: error: {self.message}"
        if source is None:
            try:
                with open(s.file, encoding="utf-8") as f:
                    source = f.read()
            except OSError:
                return head
        lines = source.splitlines()
        if not 1 <= s.line <= len(lines):
            return head
        text = lines[s.line - 1]
        width = max(1, (s.end_col if s.end_line == s.line else len(text)) - s.col)
        return f"{head}\n    {text}\n    {' ' * s.col}^{'~' * (width - 1)}"
