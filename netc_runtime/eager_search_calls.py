"""What eager mode's searches over a user's step function share (`ctc_prefix_search` with an
`lm`, `transducer_search` with a `predict`): the state as the function takes it (a tensor or a
tuple), and the function called one row at a time (a batch of one, as every eager op)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from netc_runtime import eager as E


def stacked(x: Any) -> Any:
    """A list a loop appended to, as one tensor; anything else as it is."""
    return E.stack_list(x) if isinstance(x, list) else x


@dataclass
class StepState:
    """The state a search threads through the user's function: a tensor or a tuple of them."""

    states: list[E.ETensor]
    is_tuple: bool

    @classmethod
    def of(cls, state: Any) -> StepState:
        is_tuple = isinstance(state, (tuple, list))
        return cls([stacked(s) for s in (state if is_tuple else [state])], is_tuple)

    def align(self, run: E._Run, x: E.ETensor) -> tuple[E.ETensor, int]:
        """After a beam search: `x` and the state with rows of its hypotheses (a state made
        anew has one row, the batch's); the version they are at."""
        (x, *self.states), version = run.align([x, *self.states])
        return x, version

    def rows(
        self, fn: Callable, fn_name: str, frames, label_dim: str, output: Callable[[Any], torch.Tensor]
    ) -> Callable[..., tuple[torch.Tensor, ...]]:
        """`fn(label, state) -> (out, state)` over a batch of rows as the search calls it:
        `(labels, *states) -> (output(out), *new states)`, each the rows' results concatenated."""

        def call(labels: torch.Tensor, *st: torch.Tensor) -> tuple[torch.Tensor, ...]:
            rows = []
            for r in range(labels.shape[0]):
                label = E.ETensor(labels[r : r + 1], ("batch",), frames, label_dim)
                row = [E.ETensor(s[r : r + 1], old.dims, frames, old.sparse_dim) for s, old in zip(st, self.states)]
                out, new = fn(label, tuple(row) if self.is_tuple else row[0])
                new = list(new) if self.is_tuple else [new]
                rows.append([output(out), *(_like(n, s, fn_name).data for n, s in zip(new, self.states))])
            return tuple(torch.cat(parts) for parts in zip(*rows))

        return call


def _like(new: Any, old: E.ETensor, fn_name: str) -> E.ETensor:
    if not isinstance(new, E.ETensor) or new.dims != old.dims:
        raise TypeError(f"`{fn_name}` must return a state with the dims of the one given, [{', '.join(old.dims)}]")
    return new
