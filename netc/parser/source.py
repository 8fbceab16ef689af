"""A model file's text before Python's parser sees it: decoded, checked against netc's limits,
with identifiers NFKC-normalised; then its syntax tree (`ast`), with positions as spans.

The tracer recurses on nesting, and so do Python's parser (which has its own, larger, limits)
and anything that walks a deep tree. Python's `tokenize` is pure Python and does not recurse,
so the limits are checked on its tokens first and the parser only ever gets text whose tree
netc can walk. Identifiers are normalised here too (Python reads `ｈ` as `h`), keeping a
column map so that spans point into the file as written.
"""

from __future__ import annotations

import ast
import io
import keyword
import re
import tokenize
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property

from netc import limits
from netc.errors import LINE_BREAK, CompileError, Span

_OPEN, _CLOSE = "([{", ")]}"
# tokens that separate siblings or statements rather than nest an expression
_FLAT_OPS = {",", ";", ":", "=", "->", "...", "@"} | {
    op + "=" for op in ("+", "-", "*", "/", "//", "%", "**", "@", "&", "|", "^", "<<", ">>")
}
_NESTING_KEYWORDS = {"not", "and", "or", "if", "else", "lambda", "in", "is", "await", "yield", "for", "async"}


@dataclass(frozen=True)
class _Edit:
    """An identifier whose normalised spelling has another length than the file's."""

    col: int  # in the normalised text
    length: int  # in the normalised text
    file_length: int


@dataclass(frozen=True)
class Source:
    path: str
    text: str  # what the parser reads: decoded, identifiers normalised
    edits: dict[int, tuple[_Edit, ...]] = field(default_factory=dict)  # by line

    def span(self, line: int, col: int, end_line: int, end_col: int) -> Span:
        """A span in the parser's text as a span in the file (columns move after an identifier
        whose normalised form is shorter or longer)."""
        return Span(
            file=self.path,
            line=line,
            col=self._column(line, col),
            end_line=end_line,
            end_col=self._column(end_line, end_col),
        )

    def parse(self) -> ast.Module:
        """The syntax tree; a syntax error is a located CompileError."""
        try:
            return ast.parse(self.text, self.path)
        except SyntaxError as e:
            line = e.lineno or 1
            col = max((e.offset or 1) - 1, 0)  # 1-based characters
            end = e.end_offset - 1 if e.end_lineno == line and (e.end_offset or 0) > col + 1 else col + 1
            text = self.lines[line - 1].rstrip() if 0 < line <= len(self.lines) else ""
            if text and col >= len(text):  # past the line's end (`x = a +`): its last character
                col, end = len(text) - 1, len(text)
            raise CompileError(self.span(line, col, line, end), f"syntax error: {e.msg}") from None

    def node_span(self, node: ast.AST, width: int | None = None) -> Span:
        """Where a node of the tree stands in the file (the tree counts columns in UTF-8 bytes);
        with `width`, only its first `width` bytes."""
        line, col = node.lineno, node.col_offset
        end_line, end_col = (line, col + width) if width is not None else (node.end_lineno, node.end_col_offset)
        return self.span(line, self._chars(line, col), end_line, self._chars(end_line, end_col))

    def name_span(self, node: ast.FunctionDef | ast.ClassDef) -> Span:
        """Where a `def`'s or `class`'s name stands (the node's own span is its whole statement)."""
        col = self._chars(node.lineno, node.col_offset)
        head = re.compile(r"(?:async\s+)?(?:def|class)\s+").match(self.lines[node.lineno - 1], col)
        col = head.end() if head else col
        return self.span(node.lineno, col, node.lineno, col + len(node.name))

    @cached_property
    def lines(self) -> list[str]:
        return LINE_BREAK.split(self.text)

    def _chars(self, line: int, byte_col: int) -> int:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return byte_col if text.isascii() else len(text.encode()[:byte_col].decode(errors="ignore"))

    def _column(self, line: int, col: int) -> int:
        out = col
        for e in self.edits.get(line, ()):
            if col >= e.col + e.length:
                out += e.file_length - e.length
            elif col > e.col:
                out += min(col - e.col, e.file_length) - (col - e.col)
        return out


def read_source(path: str, text: str | None = None) -> Source:
    """The file at `path` (or `text` given for it), ready for the parser; raises CompileError."""
    if text is None:
        text = read_text(path)
    elif len(text) > limits.MAX_SOURCE_BYTES:
        raise _too_big(path)
    nul = text.find("\0")
    if nul >= 0:
        raise _error(path, text, nul, "the file contains a NUL character (source code cannot contain null bytes)")
    return _Scanner(path, text).scan()


def read_text(path: str) -> str:
    """A Python file's text, decoded as Python decodes source; raises CompileError."""
    return _decode(path, _read(path))


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(limits.MAX_SOURCE_BYTES + 1)
    except OSError as e:
        raise CompileError(None, f"cannot read the file: {e.strerror}", file=path) from None
    if len(data) > limits.MAX_SOURCE_BYTES:
        raise _too_big(path)
    return data


def _too_big(path: str) -> CompileError:
    return CompileError(None, f"the file is larger than {limits.MAX_SOURCE_BYTES} bytes (a netc limit)", file=path)


def _decode(path: str, data: bytes) -> str:
    """As Python decodes source: UTF-8 unless a BOM or a coding declaration says otherwise."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        cookie = next((i for i, raw in enumerate(data.split(b"\n", 2)[:2], 1) if b"coding" in raw), None)
        if cookie is not None:
            raise CompileError(_at(path, cookie, 0), f"syntax error: {e.msg}") from None
        encoding = "utf-8-sig"  # a first line that is not UTF-8: decoding says where
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        prefix = data[: e.start].decode(encoding, errors="replace")
        what = f"byte 0x{data[e.start]:02x}"
        raise _error(path, prefix, len(prefix), f"the file is not valid {_encoding_name(encoding)}: {what}") from None


def _encoding_name(encoding: str) -> str:
    return "UTF-8" if encoding in ("utf-8", "utf-8-sig") else encoding


def _at(path: str, line: int, col: int) -> Span:
    return Span(file=path, line=line, col=col, end_line=line, end_col=col + 1)


def _error(path: str, text: str, offset: int, message: str) -> CompileError:
    """An error at character `offset` of `text`."""
    lines = LINE_BREAK.split(text[:offset])
    return CompileError(_at(path, len(lines), len(lines[-1])), message)


class _Scanner:
    """One pass over the tokens: the limits, and the identifiers to normalise."""

    def __init__(self, path: str, text: str):
        self.path = path
        # line endings of the file, to put it back together after normalising identifiers
        self.lines = LINE_BREAK.split(text)
        self.ends = LINE_BREAK.findall(text)
        self.renames: dict[int, list[tuple[int, str, str]]] = {}  # by line: (col, as written, NFKC)
        self.brackets: list[tokenize.TokenInfo] = []  # open brackets, innermost last
        self.chains = [0]  # nesting tokens chained at each bracket level (0: the logical line)
        self.elifs = [0]  # `elif`s chained at each indentation level
        self.line_start = True
        self.prev: tokenize.TokenInfo | None = None

    def scan(self) -> Source:
        # `tokenize` breaks lines at \n only; Python also at \r
        readline = io.StringIO("\n".join(self.lines)).readline
        count = 0
        try:
            for tok in tokenize.generate_tokens(readline):
                count += 1
                if count > limits.MAX_TOKENS:
                    raise self.error(tok, f"the file has more than {limits.MAX_TOKENS} tokens (a netc limit)")
                self.token(tok)
        except tokenize.TokenError as e:
            msg, (line, col) = e.args
            if self.brackets and "statement" in msg:
                b = self.brackets[-1]
                raise self.error(b, f"syntax error: `{b.string}` is never closed") from None
            raise CompileError(_at(self.path, line, col), f"syntax error: {msg}") from None
        except SyntaxError as e:  # an IndentationError from tokenize, whose offset is 0-based
            raise CompileError(_at(self.path, e.lineno or 1, e.offset or 0), f"syntax error: {e.msg}") from None
        return Source(self.path, *self.normalised())

    def error(self, tok: tokenize.TokenInfo, message: str) -> CompileError:
        (line, col), (end_line, end_col) = tok.start, tok.end
        if end_line != line:
            end_line, end_col = line, col + 1
        return CompileError(Span(file=self.path, line=line, col=col, end_line=end_line, end_col=end_col), message)

    def token(self, tok: tokenize.TokenInfo) -> None:
        kind, s = tok.type, tok.string
        if kind in (tokenize.COMMENT, tokenize.NL):
            return
        if kind == tokenize.INDENT:
            self.elifs.append(0)
            if sum(self.elifs) + len(self.elifs) - 1 > limits.MAX_BLOCK_DEPTH:
                line, col = tok.end  # the block's first statement
                raise CompileError(
                    _at(self.path, line, col),
                    f"blocks nest more than {limits.MAX_BLOCK_DEPTH} deep (each `elif` counts as one more; a netc limit)",
                )
            return
        if kind == tokenize.DEDENT:
            self.elifs.pop()
            return
        if kind == tokenize.NEWLINE:
            self.chains = [0]
            self.line_start = True
            return
        if self.line_start:
            self.statement(tok)
        if kind == tokenize.OP and s in _OPEN:
            self.brackets.append(tok)
            self.chains.append(0)
            if len(self.brackets) > limits.MAX_BRACKET_DEPTH:
                raise self.error(tok, f"brackets nest more than {limits.MAX_BRACKET_DEPTH} deep (a netc limit)")
        elif kind == tokenize.OP and s in _CLOSE:
            if not self.brackets:
                raise self.error(tok, f"syntax error: unmatched `{s}`")
            self.brackets.pop()
            self.chains.pop()
            self.chains[-1] += 1  # `f(a)(b)`, `x[0][1]`: each bracket nests the one before
        elif kind == tokenize.OP and s == ",":
            self.chains[-1] = 0
        elif kind == tokenize.OP and s == ";" and len(self.chains) == 1:
            self.chains[0] = 0
        elif (kind == tokenize.OP and s not in _FLAT_OPS) or (kind == tokenize.NAME and s in _NESTING_KEYWORDS):
            self.chains[-1] += 1
        elif kind == tokenize.STRING and self.prev is not None and self.prev.type == tokenize.STRING:
            self.chains[-1] += 1  # implicitly concatenated strings: a chain, as in the tree of other parsers
        elif kind == tokenize.NAME and not s.isascii():
            self.identifier(tok)
        elif kind == tokenize.NUMBER and len(s.replace("_", "")) > limits.MAX_NUMBER_CHARS:
            raise self.error(tok, f"a number literal longer than {limits.MAX_NUMBER_CHARS} digits (a netc limit)")
        inner = _fstring_depth(s) if kind == tokenize.STRING else 0
        if sum(self.chains) + len(self.chains) - 1 + inner > limits.MAX_EXPRESSION_DEPTH:
            raise self.error(
                tok,
                f"the expression nests more than {limits.MAX_EXPRESSION_DEPTH} levels deep (brackets, and "
                "operators, calls and attributes chained within each bracket, count; a netc limit); "
                "split it into several statements",
            )
        if len(self.brackets) + inner > limits.MAX_BRACKET_DEPTH:
            raise self.error(tok, f"brackets nest more than {limits.MAX_BRACKET_DEPTH} deep (a netc limit)")
        self.prev = tok

    def statement(self, tok: tokenize.TokenInfo) -> None:
        """The first token of a logical line: `elif` nests the `if` it continues one level deeper."""
        self.line_start = False
        if tok.string == "elif":
            self.elifs[-1] += 1
            if sum(self.elifs) + len(self.elifs) - 1 > limits.MAX_BLOCK_DEPTH:
                raise self.error(
                    tok,
                    f"blocks nest more than {limits.MAX_BLOCK_DEPTH} deep (each `elif` counts as one more; a netc limit)",
                )
        elif tok.string != "else":
            self.elifs[-1] = 0

    def identifier(self, tok: tokenize.TokenInfo) -> None:
        """As Python: every character valid in an identifier, then NFKC normalisation."""
        s, (line, col) = tok.string, tok.start
        for i, ch in enumerate(s):
            if not (ch if i == 0 else f"_{ch}").isidentifier():
                span = Span(file=self.path, line=line, col=col + i, end_line=line, end_col=col + i + 1)
                raise CompileError(span, f"invalid character '{ch}' (U+{ord(ch):04X}) in identifier `{s}`")
        norm = unicodedata.normalize("NFKC", s)
        if norm == s:
            return
        if keyword.iskeyword(norm):
            raise self.error(tok, f"identifier `{s}` normalises to the keyword `{norm}`")
        self.renames.setdefault(line, []).append((col, s, norm))

    def normalised(self) -> tuple[str, dict[int, tuple[_Edit, ...]]]:
        """The text with identifiers replaced by their normal forms, and where lengths changed."""
        edits: dict[int, tuple[_Edit, ...]] = {}
        for line, renames in self.renames.items():
            text, out, at, line_edits = self.lines[line - 1], [], 0, []
            for col, s, norm in renames:  # in token order, left to right
                out.append(text[at:col])
                if len(norm) != len(s):
                    line_edits.append(_Edit(col=sum(map(len, out)), length=len(norm), file_length=len(s)))
                out.append(norm)
                at = col + len(s)
            self.lines[line - 1] = "".join(out) + text[at:]
            if line_edits:
                edits[line] = tuple(line_edits)
        text = "".join(t + end for t, end in zip(self.lines, [*self.ends, ""]))
        return text, edits


def _fstring_depth(s: str) -> int:
    """How deep `{` nest inside an f-string token (its expressions are parsed too)."""
    quote = next((i for i, ch in enumerate(s) if ch in "'\""), 0)
    if "f" not in s[:quote].lower():
        return 0
    depth = best = 0
    body = s[quote:].replace("{{", "").replace("}}", "")
    for ch in body:
        if ch == "{":
            depth += 1
            best = max(best, depth)
        elif ch == "}":
            depth = max(depth - 1, 0)
    return best


def network_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The module-level functions decorated `@network` (or `@<module>.network`), in source order,
    by their syntax alone (the tracer decides by what the decorator's name is bound to)."""

    def is_network(dec: ast.expr) -> bool:
        return (isinstance(dec, ast.Name) and dec.id == "network") or (
            isinstance(dec, ast.Attribute) and dec.attr == "network"
        )

    return [s for s in tree.body if isinstance(s, ast.FunctionDef) and any(map(is_network, s.decorator_list))]
