"""Loop iterables eagerly (`netc.ops.iterables`): a kind's DSL function runs its own `eager`
code on this runtime, through `EagerLoops`; values made in its loop are tagged with the loop's
run, and a list appended in it stacks as the kind says (`LoopTag.stacker`, `eager.stack_list`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from netc.ir.model import Loop
from netc.ops.iterables import IterableDef, Stacker
from netc_runtime.eager import ETensor, _run, stack_list
from netc_runtime.eager_loops import _loops, run_loop


def iterate(d: IterableDef, args: tuple, kwargs: dict) -> Any:
    return d.eager(_Runtime(), *args, **kwargs)


class _Runtime:
    """`netc.ops.iterables.EagerLoops` on the current run."""

    def tensor(self, x: Any) -> Any:
        return stack_list(x) if isinstance(x, list) else x

    def dynamic_dim(self, x: ETensor) -> str:
        return x._dyn()

    def graph_loops(self) -> list[Loop]:
        return _loops(_run().graph())

    def canonical(self, dims: tuple[str, ...]) -> tuple[str, ...]:
        return _run().net.dims.canonical(dims)

    def set_length(self, dim: str, n: int) -> None:
        _run().lengths[dim] = n

    def frame(self, data: Any, dims: tuple[str, ...], like: ETensor) -> ETensor:
        return ETensor(data, dims, _run().frames(), like.sparse_dim)

    def run_loop(self, axis: str, items: Iterator[Any], stacker: Stacker | None) -> Iterator[Any]:
        run = _run()
        tag = run.tag(axis, False)
        tag.stacker = stacker
        return run_loop(run, tag, items)
