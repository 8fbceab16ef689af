"""The pass pipeline as one readable function."""

from __future__ import annotations

from netc.ir.model import Graph
from netc.ir.verify import verify
from netc.passes import dce, rec_state


def run_passes(g: Graph) -> Graph:
    verify(g)
    # 1. decide what is state: the parser carries every reassigned name; keep the real ones
    # 2. then remove what nobody reads (last frames of temporaries, dead carries' leftovers)
    for p in (rec_state, dce):
        g, _ = p.transform(g)
        verify(g)
    return g
