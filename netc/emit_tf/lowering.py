"""RETURNN's lowering: the decisions only the RETURNN config reads, recorded on the final graph.

Runs after the common pipeline (`netc.passes.pipeline.TARGET_LOWERINGS`). `bound_ops`, on the
search graph only: a search-only network computes its step limit in the loop, as layers of the
rec unit (`Loop.bound_ops`); training's network would have RETURNN move them out again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from netc.emit_tf import bound_ops
from netc.ir.model import Graph
from netc.ir.verify import verify

if TYPE_CHECKING:
    from netc.passes.pipeline import PassOptions


def lower(g: Graph, options: PassOptions) -> None:
    if g.search is not None:
        bound_ops.transform(g.search)
        verify(g.search)
