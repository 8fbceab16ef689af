"""The pass pipeline as one readable function."""

from __future__ import annotations

from netc.ir.model import Graph
from netc.ir.verify import verify
from netc.passes import dce, hoist, rec_state, returnn_names


def run_passes(g: Graph) -> Graph:
    verify(g)
    # 1. decide what is state: the parser carries every reassigned name; keep the real ones
    # 2. remove what nobody reads (last frames of temporaries, dead carries' leftovers)
    # 3. name rec layers and TF variables by where the source puts modules (before hoisting:
    #    names must not depend on it, so one checkpoint fits every config of the model)
    # 4. hoist: step-independent work runs once before the loop, per-frame work over whole
    #    sequences (RETURNN also needs constants of nested loops outside any rec unit)
    # 5. remove the invariants and sequences hoisting left unread
    for p in (rec_state, dce, returnn_names, hoist, dce):
        g, _ = p.transform(g)
        verify(g)
    return g
