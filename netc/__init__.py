"""netc: a source-to-source compiler for neural-network loops.

`from netc import ...` gives the model language (dims, ops, `@network`); see docs/language.md.
"""

from netc.dsl import ITERABLE_FUNCTIONS as _ITERABLES
from netc.dsl import OPS as _OPS
from netc.dsl import (
    Dim,
    Labels,
    Module,
    Tensor,
    batch,
    choice,
    end,
    mark_as_loss,
    network,
    stack,
    transducer_search,
    unstack,
)

globals().update(_OPS)
globals().update(_ITERABLES)  # the loop kinds' iterables (`netc.ops.iterables`)

__all__ = [
    "Dim",
    "Labels",
    "Module",
    "Tensor",
    "batch",
    "choice",
    "end",
    "mark_as_loss",
    "network",
    "stack",
    "transducer_search",
    "unstack",
    *sorted(_ITERABLES),
    *sorted(_OPS),
]
