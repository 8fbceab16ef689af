"""netc's limits (netc/limits.py): at a limit a model compiles, one step past it is a located
error that names the limit, never a RecursionError, a hang or a huge number.

Compiles run 250 frames deep, more than pytest or the CLI add, so the limits keep libcst and
the tracer clear of Python's recursion limit with room to spare.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from netc import limits
from netc.compiler import TARGETS, compile_graph
from netc.errors import CompileError

HEAD = """\
from netc import Dim, Linear, Tensor, batch, network, tanh, reduce_sum

time = Dim("time")
feat = Dim("feat", 4)
"""
CALLER_FRAMES = 250


def _compile(path: Path, depth: int = CALLER_FRAMES) -> None:
    if depth:
        return _compile(path, depth - 1)
    g = compile_graph(str(path))
    for emit in TARGETS.values():
        compile(emit(g), str(path), "exec")


def _model(tmp_path: Path, body: str, helpers: str = "", module: str = "") -> Path:
    path = tmp_path / "m.py"
    path.write_text(f"{HEAD}{module}\n{helpers}\n\n@network\ndef net(x: Tensor[batch, time, feat]):\n{body}")
    return path


def _error(path: Path) -> CompileError:
    with pytest.raises(CompileError) as info:
        _compile(path)
    assert info.value.span is not None and info.value.span.line >= 1
    return info.value


# each: an expression of nesting n around `x`, and the limit it meets
EXPRESSIONS = {
    "unary minus": (lambda n: "-" * n + "x", limits.MAX_EXPRESSION_DEPTH, "expression nests more than"),
    "binary chain": (lambda n: " + ".join(["x"] * (n + 1)), limits.MAX_EXPRESSION_DEPTH, "expression nests more than"),
    "attribute chain": (lambda n: "x" + ".b" * n, limits.MAX_EXPRESSION_DEPTH, "expression nests more than"),
    "subscripts": (lambda n: "x" + "[0]" * n, limits.MAX_EXPRESSION_DEPTH, "expression nests more than"),
    "not": (lambda n: "not " * n + "x", limits.MAX_EXPRESSION_DEPTH, "expression nests more than"),
    "parentheses": (lambda n: "(" * n + "x" + ")" * n, limits.MAX_BRACKET_DEPTH, "brackets nest more than"),
    "calls": (lambda n: "tanh(" * n + "x" + ")" * n, limits.MAX_BRACKET_DEPTH, "brackets nest more than"),
    "lists": (lambda n: "[" * n + "x" + "]" * n, limits.MAX_BRACKET_DEPTH, "brackets nest more than"),
}


@pytest.mark.parametrize("kind", sorted(EXPRESSIONS))
def test_expression_nesting(tmp_path, kind):
    make, limit, message = EXPRESSIONS[kind]
    at_limit = _model(tmp_path, f"    y = {make(limit)}\n    return x\n")
    try:
        _compile(at_limit)
    except CompileError as e:  # the tracer may reject the construct, but not for its depth
        assert "nest" not in e.message, e.render()
    e = _error(_model(tmp_path, f"    y = {make(limit + 1)}\n    return x\n"))
    assert message in e.message and e.span.line == 10, e.render()  # the `y = ...` line


def test_thousands_of_brackets_stop_at_the_first_too_many(tmp_path):
    """1,500 parentheses segfaulted libcst's parser; 1,000 calls took 2 GB and 14 s."""
    for body in ("(" * 1500 + "x" + ")" * 1500, "tanh(" * 1000 + "x" + ")" * 1000):
        start = time.monotonic()
        e = _error(_model(tmp_path, f"    return {body}\n"))
        first_too_deep = [i for i, ch in enumerate(body) if ch == "("][limits.MAX_BRACKET_DEPTH]
        assert "brackets nest more than" in e.message and e.span.col == len("    return ") + first_too_deep
        assert time.monotonic() - start < 2


def _nested_ifs(n: int) -> str:
    return "".join("    " * (i + 1) + "if True:\n" for i in range(n)) + "    " * (n + 1) + "x = tanh(x)\n"


def test_block_nesting(tmp_path):
    # the function body is one level, so n ifs make n + 1 levels
    _compile(_model(tmp_path, _nested_ifs(limits.MAX_BLOCK_DEPTH - 1) + "    return x\n"))
    e = _error(_model(tmp_path, _nested_ifs(limits.MAX_BLOCK_DEPTH) + "    return x\n"))
    assert "blocks nest more than" in e.message


def test_an_elif_chain_counts_as_nesting(tmp_path):
    chain = "    if False:\n        pass\n" + "    elif False:\n        pass\n" * 400 + "    return x\n"
    e = _error(_model(tmp_path, chain))
    assert "blocks nest more than" in e.message and "elif" in e.message


def test_file_size_and_token_count(tmp_path):
    many = "".join(f"    y{i} = x + x + x\n" for i in range(limits.MAX_TOKENS // 8))
    e = _error(_model(tmp_path, many + "    return x\n"))
    assert f"more than {limits.MAX_TOKENS} tokens" in e.message
    big = tmp_path / "big.py"
    big.write_text(HEAD + "#" * limits.MAX_SOURCE_BYTES)
    with pytest.raises(CompileError) as info:
        compile_graph(str(big))
    assert info.value.span is None and info.value.render().startswith(f"{big}: error: the file is larger than")


# --- numbers computed at compile time ---------------------------------------------------


@pytest.mark.parametrize(
    "module,message",
    [
        ("N = " + "9" * 4300, "a number literal longer than"),
        ("N = 0x" + "f" * 200, "a number literal longer than"),
        ("N = 9223372036854775808", "a compile-time integer beyond"),
        ("A = 3\n" + "A = A * A\n" * 40, "a compile-time integer beyond"),
        ("N = 1e400", "not finite"),
        ("N = 1e300 * 1e300", "not finite"),
        ("N = -(1e308 * 10)", "not finite"),
        ("N = int(1e300)", "a compile-time integer beyond"),
        ("N = 1 / 0", "division by zero"),
        ("N = 2.0 / 0.0", "division by zero"),
        ('big = Dim("big", 2**62)\nN = 4 * big', "more than int64 holds"),
        ("N = 0 * feat", "dims scale by a positive integer"),
        ("N = -2 * feat", "dims scale by a positive integer"),
    ],
)
def test_compile_time_numbers(tmp_path, module, message):
    e = _error(_model(tmp_path, "    return x\n", module=module.replace("2**62", str(2**62))))
    assert message in e.message, e.render()


def test_the_largest_numbers_still_compile(tmp_path):
    _compile(_model(tmp_path, "    return x * N + M\n", module=f"N = {limits.MAX_INT}\nM = -1.5e308\n"))


def test_max_seq_len_arithmetic_is_bounded(tmp_path):
    body = "    for t in range(x.max_seq_len * 2**40 * 2**40):\n        pass\n    return x\n"
    e = _error(_model(tmp_path, body.replace("2**40", str(2**40))))
    assert "a compile-time integer beyond" in e.message


# --- inlining ---------------------------------------------------------------------------


def _chain(n: int) -> str:
    """Helpers g0..gn, each calling the one before once."""
    return "def g0(x):\n    return tanh(x)\n" + "".join(
        f"\n\ndef g{i}(x):\n    return g{i - 1}(x)\n" for i in range(1, n + 1)
    )


def test_call_depth(tmp_path):
    _compile(
        _model(tmp_path, f"    return g{limits.MAX_CALL_DEPTH - 1}(x)\n", helpers=_chain(limits.MAX_CALL_DEPTH - 1))
    )
    e = _error(_model(tmp_path, f"    return g{limits.MAX_CALL_DEPTH}(x)\n", helpers=_chain(limits.MAX_CALL_DEPTH)))
    assert f"inlined more than {limits.MAX_CALL_DEPTH} calls deep" in e.message


def test_recursion_is_an_error(tmp_path):
    e = _error(_model(tmp_path, "    return f(x)\n", helpers="def f(x):\n    return f(tanh(x))\n"))
    assert "recursion is not supported" in e.message


@pytest.mark.parametrize("python_values", [False, True])
def test_exponential_inlining_stops_early(tmp_path, python_values):
    """Helpers calling the next one twice, 30 deep: 2**30 inlined calls, unbounded before."""
    if python_values:
        helpers = "def g0(n):\n    return n\n" + "".join(
            f"\n\ndef g{i}(n):\n    return g{i - 1}(n) + g{i - 1}(n) - n\n" for i in range(1, 31)
        )
        body = "    return x * g30(1)\n"
    else:
        helpers = "def g0(x):\n    return tanh(x)\n" + "".join(
            f"\n\ndef g{i}(x):\n    return g{i - 1}(g{i - 1}(x))\n" for i in range(1, 31)
        )
        body = "    return g30(x)\n"
    start = time.monotonic()
    e = _error(_model(tmp_path, body, helpers=helpers))
    assert "tracing the network evaluates more than" in e.message or "ops after inlining" in e.message
    assert time.monotonic() - start < 20


def test_op_count(tmp_path):
    """25 ops per g0, doubled by each g_i: 25 * 2**9 ops, more than the limit."""
    helpers = "def g0(x):\n    return " + "tanh(" * 25 + "x" + ")" * 25 + "\n"
    helpers += "".join(f"\n\ndef g{i}(x):\n    return g{i - 1}(g{i - 1}(x))\n" for i in range(1, 10))
    e = _error(_model(tmp_path, "    return g9(x)\n", helpers=helpers))
    assert f"more than {limits.MAX_OPS} ops after inlining" in e.message


def test_nesting_across_calls(tmp_path):
    """Blocks and expressions nested within helpers nested within helpers: a located error
    long before Python's recursion limit, even this far down the stack."""
    helpers = "def g0(x):\n    return tanh(x)\n"
    for i in range(1, 31):
        ifs = "".join("    " * (k + 1) + "if reduce_sum(x, axis=[time, feat]) > 0.0:\n" for k in range(15))
        expr = "tanh(" * 25 + f"g{i - 1}(x)" + ")" * 25
        helpers += f"\n\ndef g{i}(x):\n{ifs}{'    ' * 16}x = {expr}\n    return x\n"
    e = _error(_model(tmp_path, "    return g30(x)\n", helpers=helpers))
    assert f"nests more than {limits.MAX_NESTING} levels deep" in e.message


def test_output_names_are_strings(tmp_path):
    e = _error(_model(tmp_path, '    return {1: x, "y": x}\n'))
    assert "output names are strings, got `1`" in e.message
    e = _error(_model(tmp_path, "    return {[1]: x}\n"))
    assert "dict keys are strings or numbers" in e.message
