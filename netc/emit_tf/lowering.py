"""RETURNN's lowering: the decisions only the RETURNN config reads, in RETURNN's own table.

Runs after the common pipeline (`netc.passes.pipeline.TARGET_LOWERINGS`) and records in each
graph's `ReturnnDecisions` (`netc.emit_tf.decisions`, kept in `Graph.lowerings`; torch reads
none of it). `bound_ops`, on the search graph only: a search-only network computes its step
limit in the loop, as layers of the rec unit; training's network would have RETURNN move them
out again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from netc.emit_tf import bound_ops
from netc.emit_tf.decisions import TARGET, ReturnnDecisions, check, decisions
from netc.ir.model import Graph

if TYPE_CHECKING:
    from netc.passes.pipeline import PassOptions


def lower(g: Graph, options: PassOptions | None = None) -> None:
    """`options` None: again, after a change (it has no options)."""
    g.lowerings[TARGET] = ReturnnDecisions()
    if g.search is not None:
        _lower(g.search)


def _lower(g: Graph) -> None:
    g.lowerings[TARGET] = ReturnnDecisions()
    bound_ops.transform(g)
    check(g)


def lowered(g: Graph) -> ReturnnDecisions:
    """`g`'s decisions, for its emitter; a graph the pipeline did not lower (one made by hand)
    has none (the step limit's ops stay before the loop)."""
    return decisions(g)
