"""The pass pipeline as one readable function: the common passes, then each target's lowering.

A pass owns the graph it is given: it may change it in place, and returns it (with whether
anything changed). The pipeline hands each pass the graph the previous one returned, which
nothing else holds, so no pass copies it; a caller that wants to keep a graph passes a copy.

The common passes decide what every target computes. A decision only one target reads is that
target's lowering (`TARGET_LOWERINGS`, each owned by its emitter package), run last on the final
graph: such passes only record, in the target's own table beside the graph (`Graph.lowerings`),
so the shared IR carries no target's decisions and the lowerings do not depend on each other.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from netc.emit_tf import lowering as returnn_lowering
from netc.emit_torch import lowering as torch_lowering
from netc.ir.model import Graph, Loop
from netc.ir.search import check_no_training_frames
from netc.ir.verify import verify
from netc.passes import (
    dce,
    fuse_cells,
    hoist_frames,
    hoist_invariants,
    rec_state,
    returnn_names,
    search_mode,
    search_results,
    shift_states,
    sink_stacks,
    split_linear,
    teacher_forcing,
)


@dataclass(frozen=True)
class PassOptions:
    hoist: bool = True  # move work out of loops (off: every op runs where the source wrote it)
    # the kinds that keep whole sequences of intermediate results in memory: per-frame work
    # over whole sequences before the loop, states that are the previous frame of a sequence,
    # work feeding only stacks over them after it, the part of a Linear over a concat that reads
    # those frames
    whole_sequence: bool = True
    fuse: bool = True  # a loop that is an LSTM or GRU becomes the native sequence op (after hoisting)
    # each target's own options, which only its lowering reads (`netc.emit_torch.lowering.TorchOptions`:
    # `--loops`), one of a type at most; a target given none lowers with its defaults
    targets: tuple[object, ...] = ()


DEFAULT_OPTIONS = PassOptions()

# each target's decisions, recorded in its own table beside the final graph (training's and its
# search graph): `Graph.lowerings`
TARGET_LOWERINGS: tuple[Callable[[Graph, PassOptions | None], None], ...] = (
    returnn_lowering.lower,
    torch_lowering.lower,
)


def run_passes(g: Graph, options: PassOptions = DEFAULT_OPTIONS) -> Graph:
    g = _common(g, options)
    lower_targets(g, options)
    return g


def lower_targets(g: Graph, options: PassOptions | None = None) -> None:
    """Each target's lowering on `g`; `options` None: again after a pass changed the lowered
    graph (`inference_graph`), with the options it was lowered with (each target keeps its own)."""
    for lower in TARGET_LOWERINGS:
        lower(g, options)


def _common(g: Graph, options: PassOptions) -> Graph:
    verify(g)
    # 1. decide what is state: the parser carries every reassigned name; keep the real ones
    # 2. remove what nobody reads (last frames of temporaries, dead carries' leftovers)
    # 3. name rec layers and TF variables by where the source puts modules (before hoisting:
    #    names must not depend on it, so one checkpoint fits every config of the model)
    for p in (rec_state, dce, returnn_names):
        g = _run(p, g)
    if not any(isinstance(n, Loop) and n.target is not None for n in g.body):
        return _optimise(_decided(g, False), options)
    # 4. a model with `choice` trains with the reference labels and searches with a beam: the
    #    search keeps the loop as written, training sees an ordinary loop over the labels (so
    #    more can move out of it); both keep every parameter either uses
    params = g.params
    # a search computes what it returns: the outputs stacked in the loop (no values after it, no loss)
    search = _run(dce, _run(search_results, _decided(copy.deepcopy(g), True)))
    check_no_training_frames(search)  # (before hoisting moves what reads them)
    search = _optimise(search, options)
    g = _optimise(_run(dce, _run(teacher_forcing, _decided(g, False))), options)
    used = {p.name for p in [*g.params, *search.params]}
    g.params = search.params = [p for p in params if p.name in used]
    g.search = search
    verify(g)
    return g


def _optimise(g: Graph, options: PassOptions) -> Graph:
    if options.hoist:
        # 5. hoisting needs the real state (an op reading state cannot move). Its kinds enable
        #    one another (per-frame work of an inner loop can be invariant in the outer one, a
        #    shifted state's frames feed per-frame work), so they run until none moves anything
        hoisting = [hoist_invariants]
        if options.whole_sequence:
            hoisting += [hoist_frames, shift_states, sink_stacks, split_linear]
        changed = True
        while changed:
            changed = False
            for p in hoisting:
                g, moved = p.transform(g)
                verify(g)
                changed |= moved
    # 6. remove the invariants and sequences hoisting left unread (and what teacher forcing left)
    g = _run(dce, g)
    # 7. a loop left as exactly an LSTM or GRU cell over its input runs as one native op: only
    #    after hoisting has moved the input projection out of it
    if options.hoist and options.whole_sequence and options.fuse:
        g = _run(fuse_cells, g)
    # 8. (then each target's lowering: `TARGET_LOWERINGS`)
    return g


def _decided(g: Graph, searching: bool) -> Graph:
    """`searching()` made a constant for this network (`search_mode`); a state only the other
    network changed is then none (`rec_state` again), and what only that network read goes."""
    g, changed = search_mode.transform(g, searching)
    verify(g)
    return _run(dce, _run(rec_state, g)) if changed else g


def _run(p, g: Graph) -> Graph:
    g, _ = p.transform(g)
    verify(g)
    return g
