"""A Linear over a concat of work from before the loop and work of the step splits by rows.

`Linear(d)(concat(e_t, c))` in a loop body, `e_t` a frame of a sequence or an invariant and `c`
computed in the step, is `e_t @ W[:n] + b + c @ W[n:]`. The first term no longer reads the
step: `hoist_frames` (or `hoist_invariants`) then moves it before the loop, over the whole
sequence, and the step multiplies `c` alone (torch adds it to the hoisted frame in one `addmm`,
RETURNN reads no concat of a frame in its rec unit). Both Linears keep the module's parameters
and read the kernel's rows that belong to their operand (`attrs["rows"]`), so parameter names
and checkpoints stay as they were. The sum is rounded in another order than one matrix
multiply's.

Applies when the concat is read by nothing else and the step's own values in it stand
together: its operands then form runs of one kind each (frames, invariants, the step's values),
one Linear per run (a run of several operands concatenated on its own), the first part from
before the loop with the bias, the step's part added last. Parts of frames only move when
per-frame work may, so the pipeline runs this pass with the kinds that keep whole sequences
(`PassOptions.whole_sequence`).
"""

from __future__ import annotations

from collections import Counter

from netc.ir.dims import DimTable
from netc.ir.model import Graph, Loop, Node, Op, Value
from netc.ir.uses import count_uses_in_loop, next_value_id
from netc.ops import REGISTRY


def transform(g: Graph) -> tuple[Graph, bool]:
    s = _Splitter(g, DimTable(g.dims))
    s.walk(g.body)
    if s.changed:
        g.dims = s.dims.as_list()  # a run of several operands concatenated on its own has a new dim
    return g, s.changed


class _Splitter:
    """Runs in every round of hoisting: it looks at whole-graph tables only when it splits."""

    def __init__(self, g: Graph, dims: DimTable):
        self.g = g
        self.dims = dims
        self.next_id: int | None = None  # new ids from the graph's next one, once something splits
        self.values: dict[int, Value] = {}  # the loop's block arguments and body values so far
        self.changed = False

    def walk(self, nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                self.walk(n.body)
                self.split_in(n)

    def split_in(self, loop: Loop) -> None:
        kinds = {s.inner.id: "frame" for s in loop.seqs} | {i.inner.id: "invariant" for i in loop.invariants}
        self.values = {v.id: v for v in loop.block_args()}
        uses: Counter | None = None  # reads of the body's values (all lie in the loop)
        made: dict[int, Op] = {}
        body: list[Node] = []
        for n in loop.body:
            if isinstance(n, Op):
                made.update((o.id, n) for o in n.outs)
                self.values.update((o.id, o) for o in n.outs)
                # (not a Linear with another module's weight: its parts would be the other's rows)
                cat = made.get(n.args[0]) if n.op == "linear" and "tied" not in n.attrs else None
                runs = self._runs(cat, kinds) if cat is not None else None
                if runs is not None and uses is None:
                    uses = count_uses_in_loop(loop)
                if runs is not None and uses[cat.outs[0].id] == 1:
                    body.remove(cat)
                    body += self._split(n, cat, runs)
                    self.changed = True
                    continue
            else:  # an inner loop's results may be the concat's operands
                self.values.update((v.id, v) for v in n.results())
            body.append(n)
        loop.body[:] = body

    def _runs(self, cat: Op, kinds: dict[int, str]) -> list[tuple[list[int], str]] | None:
        """The concat's operands as runs of one kind each (frames, invariants, the step's own
        values), or None unless the step's form one run and something else is there too."""
        if cat.op != "concat":
            return None
        runs: list[tuple[list[int], str]] = []
        for a in cat.args:
            kind = kinds.get(a, "step")
            if runs and runs[-1][1] == kind:
                runs[-1][0].append(a)
            else:
                runs.append(([a], kind))
        steps = sum(kind == "step" for _, kind in runs)
        return runs if steps == 1 and len(runs) > 1 else None

    def _split(self, lin: Op, cat: Op, runs: list[tuple[list[int], str]]) -> list[Op]:
        """`lin` over `cat` as one Linear per run and their sum, which keeps `lin`'s result: the
        parts from before the loop first (the first has the bias), the step's last (`frames + c @ W`:
        torch's `addmm`)."""
        start = lin.attrs.get("rows", [0])[0]  # a part split again (a run became outer later)
        with_bias = bool(lin.attrs.get("with_bias", True))
        ops: list[Op] = []
        outer: list[int] = []
        step = -1
        for run, kind in runs:
            size = sum(self.dims[self.dims.feature(self.values[a].dims)].size or 0 for a in run)
            arg = run[0] if len(run) == 1 else self._concat(cat, run, ops)
            bias = with_bias and kind != "step" and not outer
            part = Op(
                op="linear",
                args=[arg],
                attrs={**lin.attrs, "with_bias": bias, "rows": [start, start + size]},
                outs=[self._value(lin.outs[0], self._name(lin, run))],
                span=lin.span,
                param=lin.param,
            )
            ops.append(part)
            if kind == "step":
                step = part.outs[0].id
            else:
                outer.append(part.outs[0].id)
            start += size
        total = outer[0]
        for part_id in outer[1:]:
            total = self._add(lin, [total, part_id], ops)
        ops.append(Op(op="add", args=[total, step], outs=lin.outs, span=lin.span))
        return ops

    def _add(self, lin: Op, args: list[int], ops: list[Op]) -> int:
        out = self._value(lin.outs[0], None)
        ops.append(Op(op="add", args=args, outs=[out], span=lin.span))
        return out.id

    def _concat(self, cat: Op, run: list[int], ops: list[Op]) -> int:
        (t,) = REGISTRY["concat"].infer(self.dims, [self.values[a] for a in run], {})
        out = Value(id=self._id(), dims=t.dims, dtype=t.dtype)
        self.values[out.id] = out
        ops.append(Op(op="concat", args=run, outs=[out], span=cat.span))
        return out.id

    def _name(self, lin: Op, run: list[int]) -> str | None:
        """A part's name in emitted code: the module's path and the operand's (`s_prev_emb`)."""
        operand = self.values[run[0]].name if len(run) == 1 else None
        return f"{lin.param.replace('/', '_')}_{operand}" if lin.param and operand else None

    def _value(self, like: Value, name: str | None) -> Value:
        v = Value(id=self._id(), dims=like.dims, dtype=like.dtype, name=name)
        self.values[v.id] = v
        return v

    def _id(self) -> int:
        if self.next_id is None:
            self.next_id = next_value_id(self.g)
        self.next_id += 1
        return self.next_id - 1
