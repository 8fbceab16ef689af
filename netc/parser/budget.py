"""Tracing within netc's limits: nesting, work, IR size and compile-time numbers.

The tracer evaluates a network symbolically, inlining every helper call, so a small file can
ask for unbounded work (helpers that call each other twice per level), stack depth or
integers (`A = A * A` forty times). Each limit in `netc.limits` ends tracing with a located
error instead of a RecursionError, a hang or a memory blow-up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import libcst as cst

from netc import limits
from netc.errors import CompileError

ErrorAt = Callable[[cst.CSTNode, str], CompileError]


class Budget:
    def __init__(self, error: ErrorAt):
        self.error = error
        self.nesting = 0  # expressions and statements being evaluated within one another
        self.steps = 0  # expressions and statements evaluated so far
        self.ops = 0

    def enter(self, node: cst.CSTNode) -> None:
        """Start evaluating `node`; the caller calls `leave()` when done (also on errors)."""
        self.nesting += 1
        self.steps += 1
        if self.nesting > limits.MAX_NESTING:
            raise self.error(
                node,
                f"the network nests more than {limits.MAX_NESTING} levels deep (blocks, expressions and "
                "inlined calls together; a netc limit)",
            )
        if self.steps > limits.MAX_TRACE_STEPS:
            raise self.error(
                node,
                f"tracing the network evaluates more than {limits.MAX_TRACE_STEPS} expressions and statements "
                "(every helper call is inlined; do helpers call each other many times?); a netc limit",
            )

    def leave(self) -> None:
        self.nesting -= 1

    def op(self, node: cst.CSTNode) -> None:
        self.ops += 1
        if self.ops > limits.MAX_OPS:
            raise self.error(
                node,
                f"the network has more than {limits.MAX_OPS} ops after inlining helpers and modules (a netc limit)",
            )

    def call(self, node: cst.CSTNode, depth: int) -> None:
        """A helper or method inlined `depth` calls below the network function."""
        if depth > limits.MAX_CALL_DEPTH:
            raise self.error(
                node,
                f"helper functions and methods are inlined more than {limits.MAX_CALL_DEPTH} calls deep "
                "(recursion is not supported; a netc limit)",
            )

    def number_literal(self, node: cst.Integer | cst.Float) -> int | float:
        text = node.value.replace("_", "")
        if len(text) > limits.MAX_NUMBER_CHARS:
            raise self.error(node, f"a number literal longer than {limits.MAX_NUMBER_CHARS} digits (a netc limit)")
        try:
            value = int(text, 0) if isinstance(node, cst.Integer) else float(text)
        except ValueError:
            raise self.error(node, f"invalid number literal `{node.value}`") from None
        return self.number(value, node)

    def number(self, value: Any, node: cst.CSTNode) -> Any:
        """A compile-time number as computed: ints within int64, floats finite."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return value
        if isinstance(value, int) and abs(value) > limits.MAX_INT:
            raise self.error(
                node, "a compile-time integer beyond ±(2**63 - 1): netc's Python numbers stay within int64"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(node, "a compile-time number that is not finite (a float overflowed?)")
        return value
