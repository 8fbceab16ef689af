"""The pass pipeline as one readable function.

A pass owns the graph it is given: it may change it in place, and returns it (with whether
anything changed). The pipeline hands each pass the graph the previous one returned, which
nothing else holds, so no pass copies it; a caller that wants to keep a graph passes a copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from netc.ir.model import Graph
from netc.ir.verify import verify
from netc.passes import dce, hoist_frames, hoist_invariants, rec_state, returnn_names


@dataclass(frozen=True)
class PassOptions:
    hoist: bool = True  # move work out of loops (off: every op runs where the source wrote it)
    # the kinds that keep whole sequences of intermediate results in memory: per-frame work
    # over whole sequences before the loop
    whole_sequence: bool = True


DEFAULT_OPTIONS = PassOptions()


def run_passes(g: Graph, options: PassOptions = DEFAULT_OPTIONS) -> Graph:
    verify(g)
    # 1. decide what is state: the parser carries every reassigned name; keep the real ones
    # 2. remove what nobody reads (last frames of temporaries, dead carries' leftovers)
    # 3. name rec layers and TF variables by where the source puts modules (before hoisting:
    #    names must not depend on it, so one checkpoint fits every config of the model)
    passes = [rec_state, dce, returnn_names]
    for p in passes:
        g = _run(p, g)
    if options.hoist:
        # 4. hoisting needs the real state (an op reading state cannot move). Its kinds enable
        #    one another (per-frame work of an inner loop can be invariant in the outer one),
        #    so they run until none moves anything
        hoisting = [hoist_invariants] + ([hoist_frames] if options.whole_sequence else [])
        changed = True
        while changed:
            changed = False
            for p in hoisting:
                g, moved = p.transform(g)
                verify(g)
                changed |= moved
    # 5. remove the invariants and sequences hoisting left unread
    return _run(dce, g)


def _run(p, g: Graph) -> Graph:
    g, _ = p.transform(g)
    verify(g)
    return g
