"""The source pre-pass: how a model file's bytes become the text libcst parses.

Decoding as Python does (UTF-8, a BOM or a coding declaration), NUL characters, the token
scanner's syntax errors, NFKC-normalised identifiers with error columns in the file as written,
and line breaks as Python counts them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from netc.compiler import TARGETS, compile_graph
from netc.errors import CompileError
from netc.parser.source import read_source

ROOT = Path(__file__).resolve().parent.parent
ELMAN = (ROOT / "examples" / "elman.py").read_text(encoding="utf-8")


def _error(tmp_path: Path, text: str) -> CompileError:
    """The error of compiling `text` as tmp_path/m.py."""
    path = tmp_path / "m.py"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CompileError) as info:
        compile_graph(str(path))
    return info.value


def _emitted(path: Path) -> dict[str, str]:
    g = compile_graph(str(path))
    return {target: emit(g) for target, emit in TARGETS.items()}


@pytest.mark.parametrize("command", [["compile"], ["check"], ["explain"], ["preview", "--format", "json"]])
def test_a_byte_that_is_not_utf8_is_located(tmp_path, netc, command):
    path = tmp_path / "m.py"
    path.write_bytes(ELMAN.replace("h_prev = h\n", "h_prév = h\n").encode("latin-1"))
    proc = netc(command[0], "m.py", *command[1:], cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    # JSON output (for tools) carries the rendered error
    rendered = json.loads(proc.stdout)["errors"][0]["rendered"] if "json" in command else proc.stderr
    head, line, caret = rendered.splitlines()[:3]
    assert head == "m.py:16:13: error: the file is not valid UTF-8: byte 0xe9"
    assert line == "    " + "        h_pr\ufffdv = h"  # the line as far as it decodes
    assert caret.index("^") == line.index("\ufffd")


def test_a_coding_declaration_is_honoured_like_python(tmp_path):
    src = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + ELMAN
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "m.py").write_bytes(src.encode("latin-1"))
    (tmp_path / "b" / "m.py").write_text("\ufeff" + ELMAN, encoding="utf-8")  # a BOM
    plain = tmp_path / "m.py"
    plain.write_text(ELMAN, encoding="utf-8")
    assert _emitted(tmp_path / "b" / "m.py")["torch"].replace("b/m.py", "m.py") == _emitted(plain)["torch"]
    latin1, utf8 = compile_graph(str(tmp_path / "a" / "m.py")), compile_graph(str(plain))
    assert [p.name for p in latin1.params] == [p.name for p in utf8.params]
    assert [o.name for o in latin1.outputs] == [o.name for o in utf8.outputs]


def test_an_unknown_encoding_is_located(tmp_path):
    e = _error(tmp_path, "# a model\n# -*- coding: nope -*-\n" + ELMAN)
    assert (e.span.line, e.span.col) == (2, 0)
    assert "unknown encoding: nope" in e.message


def test_a_nul_character_is_located(tmp_path):
    e = _error(tmp_path, ELMAN.replace('Dim("hidden", 32)', 'Dim("hid\0den", 32)'))
    assert (e.span.line, e.span.col) == (7, 17)
    assert "NUL" in e.message


@pytest.mark.parametrize(
    "old,new,line,col,message",
    [
        ("h_prev = h\n", "h_prev = (h\n", 16, 17, "`(` is never closed"),
        ("h_prev = h\n", "h_prev = h)\n", 16, 18, "unmatched `)`"),
        ("h_prev = h\n", 'h_prev = """h\n', 16, 17, "EOF in multi-line string"),
        ("        out.append(h)\n", "      out.append(h)\n", 18, 6, "unindent does not match"),
    ],
)
def test_token_errors_are_located_syntax_errors(tmp_path, old, new, line, col, message):
    e = _error(tmp_path, ELMAN.replace(old, new))
    assert (e.span.line, e.span.col) == (line, col), e.render()
    assert e.message.startswith("syntax error: ") and message in e.message


def test_identifiers_are_nfkc_normalised_as_python_does(tmp_path):
    """`ｈ` is `h` and `ﬁ` is `fi` to Python, so they are to netc (libcst keeps them raw)."""
    (tmp_path / "a").mkdir()
    plain = tmp_path / "m.py"
    plain.write_text(ELMAN)
    lookalike = tmp_path / "a" / "m.py"
    lookalike.write_text(
        ELMAN.replace("h_prev = h\n", "ｈ_prev = ｈ\n").replace("x_lin = ", "ﬁx_lin = ").replace("(x_lin", "(fix_lin")
    )
    want = {k: v.replace("x_lin", "fix_lin") for k, v in _emitted(plain).items()}
    got = {k: v.replace("a/m.py", "m.py") for k, v in _emitted(lookalike).items()}
    assert got == want


def test_error_columns_are_in_the_file_as_written(tmp_path, netc):
    """`ﬁﬁ` is two characters in the file and four (`fifi`) in the text libcst parses; errors
    point at the file's columns, after it and on it."""
    path = tmp_path / "m.py"
    path.write_text(ELMAN.replace("h_prev = h\n", "fifi = h\n        h_prev = ﬁﬁ + missing\n"))
    proc = netc("compile", "m.py", cwd=tmp_path)
    head, line, caret = proc.stderr.splitlines()[:3]
    assert head.startswith("m.py:17:23: error: unknown name `missing`")
    assert caret.index("^") == line.index("missing")
    e = _error(tmp_path, ELMAN.replace("h_prev = h\n", "h_prev = ﬁﬁ + h\n"))
    assert "unknown name `fifi`" in e.message and (e.span.col, e.span.end_col) == (17, 19)


@pytest.mark.parametrize("name", ["h_prev²", "h⁰", "h½"])
def test_characters_python_rejects_in_identifiers(tmp_path, name):
    e = _error(tmp_path, ELMAN.replace("h_prev", name))
    assert (e.span.line, e.span.col) == (16, 8 + len(name) - 1)
    assert e.message.startswith("invalid character") and name in e.message


def test_an_identifier_that_normalises_to_a_keyword(tmp_path):
    e = _error(tmp_path, ELMAN.replace("h_prev = h\n", "ｉｆ = h\n"))
    assert (e.span.line, e.span.col) == (16, 8)
    assert "normalises to the keyword `if`" in e.message


@pytest.mark.parametrize("odd", ["\x0c", "\u2028", "\x1c", "\x85"])
def test_only_python_line_breaks_count(tmp_path, netc, odd):
    """str.splitlines breaks at \\f, U+2028, ...; Python source does not, nor do error lines."""
    path = tmp_path / "m.py"
    path.write_text(ELMAN.replace("# initial state", "").replace("h_prev = h\n", f"h_prev = missing  # {odd}\n"))
    proc = netc("compile", "m.py", cwd=tmp_path)
    head, line = proc.stderr.splitlines()[:2]
    assert head.startswith("m.py:16:18: error: unknown name `missing`"), proc.stderr
    assert line.strip().startswith("h_prev = missing")


def test_carriage_returns_break_lines(tmp_path):
    e = _error(tmp_path, ELMAN.replace("h_prev = h\n", "h_prev = missing\n").replace("\n", "\r"))
    assert (e.span.line, e.span.col) == (16, 17)
    assert "h_prev = missing" in e.render().splitlines()[1]


def test_source_given_as_text_is_checked_too():
    with pytest.raises(CompileError, match="NUL"):
        read_source("m.py", "x = 1\0\n")
    assert read_source("m.py", "ｈ = 1\n").text == "h = 1\n"


def test_the_live_preview_shows_a_decoding_error(tmp_path):
    from netc.preview import live_page

    path = tmp_path / "m.py"
    path.write_bytes(b"x = 1\n\xff\n")
    page, error = live_page(str(path), None, "v1")
    assert "m.py:2:1: error: the file is not valid UTF-8: byte 0xff" in page
    assert error.endswith("m.py:2:1: error: the file is not valid UTF-8: byte 0xff")
