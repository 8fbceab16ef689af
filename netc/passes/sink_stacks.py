"""Work that only feeds stacked outputs runs after the loop, over the whole stacked sequences.

An op of a loop body whose results are read only by `ys.append(...)` stacks (directly or
through other such ops) does not need to run step by step: after the loop, applied to the
stacked sequences of its operands, it gives the same frames (e.g. the output projection
`logits.append(Linear(vocab)(concat(s, context)))` of a decoder: one matrix product for all
frames). Its operands become sequences: a frame of one of the loop's sequences is that sequence,
an invariant stays itself, and any other body value is stacked (a new stack, unless the loop
already stacks it). An invariant a per-step operand broadcasts against in the step (the joint
network's `enc_proj(enc) + pred_proj(h)` of a transducer's prediction loop) is repeated along the
loop's axis (`expand`) where the op over whole sequences needs it to have the axis. The op's result
takes the place of the stack it fed. A stacked frame of one
of the loop's sequences is that sequence itself (in a loop inside a loop: left as it is).

Not moved: ops that are not pure (dropout may: each frame gets its own mask either way), ops
reading the previous value of a state (`prev:`), ops whose dim rule over whole sequences
differs (`sequence.over_sequence`), and the work of a loop with a `choice` (a search runs its
loop per hypothesis and returns the best one's stacked frames). In a loop inside another loop,
work moves only when the loop needs no new stacks (RETURNN gives a nested loop one result).
Inner loops go first. Like per-frame hoisting, this keeps whole sequences in memory:
`PassOptions.whole_sequence` turns both off.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from netc.ir.dims import DimTable
from netc.ir.loopkinds import dim_table
from netc.ir.model import Graph, Loop, LoopStack, Node, Op, Value
from netc.ir.uses import next_value_id, replace_uses
from netc.passes.sequence import fresh_like, over_sequence


def transform(g: Graph) -> tuple[Graph, bool]:
    s = _Sinker(dim_table(g), next_value_id(g))
    s.block(g.body, nested=False, outputs=[*g.outputs, *g.losses])
    return g, s.changed


class _Sinker:
    def __init__(self, dims: DimTable, next_id: int):
        self.dims = dims
        self.next_id = next_id
        self.changed = False

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def block(self, nodes: list[Node], nested: bool, outputs: list) -> None:
        out: list[Node] = []
        renames: dict[int, int] = {}  # loop results -> the values that take their place after it
        for n in nodes:
            out.append(n)
            if isinstance(n, Loop):
                self.block(n.body, nested=True, outputs=[])
                if n.target is None:
                    after = self.sink(n, nested)
                    renames.update(after.renamed)  # two stacks of one value: one result
                    out += after.ops
        # once for the block (a loop's results are read only after it), chains resolved
        replace_uses(out, renames)
        for o in outputs:
            while o.value in renames:
                o.value = renames[o.value]
        nodes[:] = out

    def sink(self, loop: Loop, nested: bool) -> _Moved:
        """Move what only feeds stacks out of `loop`; returns the ops for after it."""
        readers = _readers(loop)
        stacked = defaultdict(list)  # body value -> its stacks
        for s in loop.stacks:
            stacked[s.value].append(s)
        seq = {s.inner.id: s.outer for s in loop.seqs}
        inv = {a.inner.id: a.outer for a in loop.invariants}
        carried = {c.inner.id for c in loop.carries}
        renamed: dict[int, int] = {}  # a loop result -> the value that takes its place
        if not nested:  # a stacked frame of a sequence is that sequence
            renamed = {s.out.id: seq[s.value] for s in loop.stacks if s.value in seq}
            loop.stacks = [s for s in loop.stacks if s.out.id not in renamed]
            self.changed |= bool(renamed)
        values = _body_values(loop)
        # later ops first: an op feeding only stacks and ops that sink is itself sinkable
        # body index -> op, dims of its results, the invariants it reads expanded along the axis
        sinking: dict[int, tuple[Op, list[tuple[str, ...]], set[int]]] = {}
        sunk_values: set[int] = set()
        for idx in range(len(loop.body) - 1, -1, -1):
            n = loop.body[idx]
            if not isinstance(n, Op) or any(a in carried for a in n.args):
                continue
            outs = {o.id for o in n.outs}
            if not any(readers[o] for o in outs):
                continue  # nobody reads it: dead code, not ours to move
            if any(r != "stack" and r not in sunk_values for o in outs for r in readers[o]):
                continue
            args = [(values[a], a not in inv) for a in n.args]
            dims = over_sequence(self.dims, n, loop, args)
            lacking: set[int] = set()
            if dims is None:  # an outer broadcast over whole sequences: the invariants along the axis too
                lacking = {a for a in n.args if a in inv and loop.axis not in values[a].dims}
                if lacking and any(a not in inv for a in n.args):
                    axis = loop.axis
                    args = [
                        (replace(v, dims=self.dims.canonical((*v.dims, axis))), False) if a in lacking else (v, step)
                        for a, (v, step) in zip(n.args, args)
                    ]
                    dims = over_sequence(self.dims, n, loop, args)
            if dims is None:
                continue
            sinking[idx] = (n, dims, lacking)
            sunk_values |= outs
        if not sinking:
            return _Moved([], renamed)
        needed = [
            a for n, _, _ in sinking.values() for a in n.args if a not in sunk_values and a not in seq and a not in inv
        ]
        needed = [a for a in dict.fromkeys(needed) if not stacked[a]]
        if nested and needed:
            return _Moved([], renamed)  # RETURNN gives a loop inside a loop one result
        for a in needed:  # stacks of the body values the moved ops read
            v = values[a]
            out = fresh_like(v, self.new_id(), self.dims.canonical((*v.dims, loop.axis)))
            loop.stacks.append(LoopStack(name=v.name or "stack", value=a, out=out))
            stacked[a].append(loop.stacks[-1])
        whole = {**seq, **inv, **{a: ss[0].out.id for a, ss in stacked.items() if ss and a not in sunk_values}}
        moved: list[Op] = []
        expanded: dict[int, int] = {}  # an invariant -> it repeated along the loop's axis
        for idx in sorted(sinking):
            n, dims, lacking = sinking[idx]
            for a in sorted(lacking - expanded.keys()):
                v = values[a]
                out = fresh_like(v, self.new_id(), self.dims.canonical((*v.dims, loop.axis)))
                moved.append(Op(op="expand", args=[inv[a]], attrs={"dim": loop.axis}, outs=[out], span=n.span))
                expanded[a] = out.id
            n.args = [expanded[a] if a in lacking else whole[a] for a in n.args]
            outs = []
            for o, d in zip(n.outs, dims):
                mine = stacked.get(o.id) or []
                # the result is the sequence the stack gave: same id, so its readers stay as they are
                new = mine[0].out if mine else fresh_like(o, self.new_id(), d)
                for other in mine[1:]:
                    renamed[other.out.id] = new.id
                whole[o.id] = new.id
                outs.append(new)
            n.outs = outs
            moved.append(n)
        loop.stacks = [s for s in loop.stacks if s.value not in sunk_values]
        loop.body[:] = [n for i, n in enumerate(loop.body) if i not in sinking]
        self.changed = True
        return _Moved(moved, renamed)


class _Moved:
    def __init__(self, ops: list[Op], renamed: dict[int, int]):
        self.ops, self.renamed = ops, renamed


def _body_values(loop: Loop) -> dict[int, Value]:
    """The values a loop's body can read: its block arguments and its ops' results."""
    out = {v.id: v for v in loop.block_args()}
    for n in loop.body:
        for v in n.results() if isinstance(n, Loop) else n.outs:
            out[v.id] = v
    return out


def _readers(loop: Loop) -> defaultdict[int, list]:
    """Who reads each value of the body: `"stack"`, an op's result ids (one entry per reading op,
    as the set of its results), or `"loop"` (state, last frames, the end, nested loops)."""
    readers: defaultdict[int, list] = defaultdict(list)
    for n in loop.body:
        if isinstance(n, Loop):
            for a in [*(s.outer for s in n.seqs), *(i.outer for i in n.invariants), *(c.init for c in n.carries)]:
                readers[a].append("loop")
            if n.bound is not None:
                readers[n.bound].append("loop")
        else:
            for a in n.args:
                readers[a].extend(o.id for o in n.outs)
    for c in loop.carries:
        readers[c.next].append("loop")
    for ll in loop.lasts:
        readers[ll.value].append("loop")
        if ll.init is not None:
            readers[ll.init].append("loop")
    if loop.end is not None:
        readers[loop.end].append("loop")
    for s in loop.stacks:
        readers[s.value].append("stack")
    return readers
