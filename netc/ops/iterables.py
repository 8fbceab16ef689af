"""The registry of loop iterables: DSL functions whose result only a `for` iterates over, each a
loop kind of its own (`chunks(x, chunk)`: the chunked loop, `netc.ops.chunk`).

A kind registers one `IterableDef` in its op file, as an op registers its `OpDef`. The generic
code finds it here: `netc.dsl` and `netc` export a function per entry (eager mode runs the
entry's `eager`); the parser's symbol tables know its name, a call of it is traced by its rules
(`rules` names their module; `netc.parser.iterables` imports it when first asked: the parser
imports the ops, not the other way round), its rules open and close a `for` over it and check
the traced graph; the eager runtime stacks a list appended in its loop with its `eager_stacker`;
streaming (`netc.stream`) asks it how its loop's steps take the input frames (`stream_steps`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from netc.ir.model import Graph, Loop

# how a loop kind stacks a list appended in its loop eagerly: (the items' torch data, their dims,
# the canonical order of dims) -> (data, dims) of the stack, or None: stacked over the loop's axis
Stacker = Callable[[list[Any], tuple[str, ...], Callable[[tuple[str, ...]], tuple[str, ...]]], Any]


class EagerLoops(Protocol):
    """What of the eager runtime a loop iterable's `eager` uses (`netc_runtime.eager_iterables`)."""

    def tensor(self, x: Any) -> Any: ...  # x, or a list appended in a loop as its stacked tensor
    def dynamic_dim(self, x: Any) -> str: ...  # x's one dynamic dim (a TypeError otherwise)
    def graph_loops(self) -> list[Loop]: ...  # the compiled graph's loops (nested ones included)
    def canonical(self, dims: tuple[str, ...]) -> tuple[str, ...]: ...
    def set_length(self, dim: str, n: int) -> None: ...  # this sequence's length of `dim` from now on
    def frame(self, data: Any, dims: tuple[str, ...], like: Any) -> Any: ...  # a tensor of this step
    def run_loop(self, axis: str, items: Iterator[Any], stacker: Stacker | None) -> Iterator[Any]: ...


@dataclass(frozen=True)
class BlockStep:
    """How a loop streams whose step takes a block of frames (a chunked loop's): each step takes
    `size` frames of the inputs' `axis` (fewer at a sequence's end) as a tensor over the dynamic
    `frames`, whose lengths the host gives; the step's per-frame values are over `chunk` (`frames`
    itself, or what a pool makes of it). The exported sidecar's `chunk` (`netc_runtime.stream_export`)."""

    axis: str  # the input dim cut into blocks (`time`)
    steps: str  # the loop's dim: one step per block
    frames: str  # a step's input frames
    chunk: str  # a step's frames in the loop
    size: int  # input frames per step
    chunk_size: int  # the loop's frames per step


class IterableDef:
    """A loop iterable. Subclasses set `fn_name`, `rules` and the docstring (the DSL function's),
    define `api` (the user signature) and `eager`."""

    fn_name: str = ""
    rules: str = ""  # the module of its parser rules (its `RULES`, a `netc.parser.iterables.IterableRules`)

    @staticmethod
    def api(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def eager(self, rt: EagerLoops, *args: Any, **kwargs: Any) -> Iterable[Any]:
        """The DSL function run eagerly: what the `for` iterates over."""
        raise NotImplementedError

    def eager_stacker(self, loop: Loop) -> Stacker | None:
        """How a list appended in `loop` (of the compiled graph) stacks, if `loop` is of this kind
        and stacks otherwise than over its axis (a list eager mode found no loop run for)."""
        return None

    def stream_axis(self, g: Graph, axis: str) -> str | None:
        """The dim of this kind's loop in `g` that steps over blocks of `axis`, if any (`--axis`
        names the input's dim; a step is the loop's)."""
        return None

    def stream_steps(self, g: Graph, steps: str) -> tuple[Graph, BlockStep] | None:
        """`g` (not changed) with this kind's loop over `steps` as an ordinary loop whose frames
        are blocks of the inputs' frames, and how a step takes them; None: no such loop."""
        return None

    def signature(self) -> inspect.Signature:
        return inspect.signature(self.api)


ITERABLES: dict[str, IterableDef] = {}


def register_iterable(cls: type[IterableDef]) -> type[IterableDef]:
    d = cls()
    assert d.fn_name and d.rules and d.fn_name not in ITERABLES, d.fn_name
    ITERABLES[d.fn_name] = d
    return cls
