"""The parser's side of the loop iterables (`netc.ops.iterables`): each kind's rules, in the
module its `IterableDef.rules` names (its `RULES`), found here, not by the kind's name.

A call of the kind's DSL function is traced by `IterableRules.call` into an `IterableSpec` (a
value only a `for` iterates over; its `what` describes it in messages). `for x in spec:` opens
the loop through `spec.open`, which gives the loop's frames and axis and an `OpenLoop` that
the loop builder calls at each point of the loop it has a rule for. Every other loop and the
traced graph are checked by each kind's `check_loop` and `check_graph`.
"""

from __future__ import annotations

import ast
import importlib
from functools import cache
from typing import TYPE_CHECKING, Any

from netc.ir.model import Graph, Loop
from netc.ops import ITERABLES

if TYPE_CHECKING:
    from netc.parser import values as V
    from netc.parser.tracer import Tracer


class OpenLoop:
    """A loop over a loop iterable being traced: the kind's steps in its body and at its close."""

    def first(self, t: Tracer, body: V.Block, frames: list[V.TV], stmt: ast.For) -> None:
        """First in the body: bind the loop's target (`frames`: the frames `open` gave)."""
        raise NotImplementedError

    def end_body(self, t: Tracer, body: V.Block, appends: dict) -> None:
        """At the end of the body, before the stacks are made (`appends`: list id -> (list, value,
        node), which it may replace)."""

    def stacked(self, t: Tracer, stack: V.TV, node: ast.AST) -> V.TV:
        """A stack after the loop, as the name appended to holds it."""
        return stack

    def close(self, t: Tracer, loop: Loop, env: dict[str, Any], line: int) -> None:
        """The loop closed: its results made, the names after it bound (`env`)."""


class IterableSpec:
    """The traced value of a loop iterable's call, which only a `for` iterates over."""

    what = "a loop's iterable"

    def open(self, t: Tracer, node: ast.AST) -> tuple[OpenLoop, list[V.TV], str]:
        """Before the loop: its rules, its frames (sequences of the loop) and its axis."""
        raise NotImplementedError


class IterableRules:
    """A loop kind's parser rules (its rules module's `RULES`)."""

    def call(self, t: Tracer, node: ast.Call) -> IterableSpec:
        """A call of the kind's DSL function, its arguments checked (located errors)."""
        raise NotImplementedError

    def check_loop(self, t: Tracer, axis: str, node: ast.AST) -> None:
        """Any other loop, over `axis`."""

    def check_graph(self, g: Graph) -> None:
        """The traced graph."""


@cache
def rules(name: str) -> IterableRules:
    return importlib.import_module(ITERABLES[name].rules).RULES


def all_rules() -> list[IterableRules]:
    return [rules(name) for name in ITERABLES]
