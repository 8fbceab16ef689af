"""Located compile errors: values with a span, rendered once as `file:line:col: error: ...`."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Python source breaks lines at these only (`str.splitlines` also breaks at \f, \x1c, \u2028, ...)
LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """A source range: 1-based lines, 0-based columns (characters, as CPython's tokenizer counts
    them); in messages and JSON the columns are 1-based (`location`)."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def key(self) -> tuple[int, int]:
        return (self.line, self.col)

    def location(self) -> dict[str, str | int]:
        """As users see places (`file:line:col` messages, JSON for tools): 1-based columns."""
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col + 1,
            "end_line": self.end_line,
            "end_col": self.end_col + 1,
        }

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        """In JSON (`explain --json`, the preview, the cache) a span is its `location()`: the
        columns 1-based, as in every message netc prints. pydantic is imported only here."""
        from pydantic_core import core_schema as cs

        def from_location(d: dict) -> Span:
            return cls(
                file=d["file"], line=d["line"], col=d["col"] - 1, end_line=d["end_line"], end_col=d["end_col"] - 1
            )

        def number(what: str):
            return cs.typed_dict_field(cs.int_schema(ge=1), metadata={"pydantic_js_updates": {"description": what}})

        fields = {
            "file": cs.typed_dict_field(cs.str_schema()),
            "line": number("1-based"),
            "col": number("1-based, in characters"),
            "end_line": number("1-based"),
            "end_col": number("1-based, in characters, one past the span's last"),
        }
        about = {"pydantic_js_updates": {"description": "A source range, as netc's messages count: 1-based."}}
        typed = cs.typed_dict_schema(fields, ref="Span", metadata=about)
        from_json = cs.no_info_after_validator_function(from_location, typed)
        return cs.union_schema(
            [cs.is_instance_schema(cls), from_json],
            serialization=cs.plain_serializer_function_ser_schema(lambda s: s.location()),
        )


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
