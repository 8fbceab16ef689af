"""The rules of states grown by `cum_concat` (netc/ops/grow.py), checked on the traced graph.

`hist = empty(batch, hist_time, feat)` before a loop and `hist = cum_concat(hist, frame,
axis=hist_time)` in it: at each step `hist` holds the frames so far. A value over `hist_time`
exists only in that loop, from the `cum_concat` on (its length is the step's); the state's
previous frames are read only by its `cum_concat` (RETURNN's layer keeps them itself).
"""

from __future__ import annotations

from netc.errors import CompileError
from netc.ir.loopkinds import grow_starts, grows, starts_growth
from netc.ir.model import Graph, Loop, Node, Value
from netc.ir.uses import values_by_id
from netc.ir.walk import ops


def check_growing(g: Graph) -> None:
    empties = grow_starts(g.body)  # value made by `empty` -> its dim
    if not empties:
        if (op := next((op for op in ops(g.body) if grows(op)), None)) is not None:
            raise CompileError(op.span, _NOT_A_STATE)
        return
    grown_in: dict[str, Loop] = {}  # dim -> the loop whose `cum_concat` grows it
    _loops(g.body, None, empties, grown_in)
    values = values_by_id(g)
    _reads(g.body, [], empties, set(empties.values()), grown_in, values)
    for o in g.outputs:
        dims = [d for d in values[o.value].dims if d in grown_in or d in empties.values()]
        if dims:
            raise CompileError(
                o.span,
                f"output `{o.name}` has dim `{dims[0]}`, which a state grows along in its loop only; "
                "reduce over it in the loop",
            )


_NOT_A_STATE = (
    "`cum_concat(state, frame, axis=d)` grows a loop state: `state` is its value from the previous "
    "step, started before the loop by `empty(batch, d, ...)`, and the result is assigned back to it "
    "(`hist = cum_concat(hist, frame, axis=d)`)"
)


def _loops(nodes: list[Node], outer: Loop | None, empties: dict[int, str], grown_in: dict[str, Loop]) -> None:
    """Each `cum_concat`: in a loop (not nested), on a state started by `empty` along its axis."""
    for n in nodes:
        if isinstance(n, Loop):
            _loops(n.body, n, empties, grown_in)
            _grown_states(n, empties)
        elif grows(n):
            carry = next((c for c in outer.carries if c.inner.id == n.args[0]), None) if outer else None
            if carry is None or empties.get(carry.init) != n.attrs["axis"]:
                raise CompileError(n.span, _NOT_A_STATE)
            if outer.reverse:
                raise CompileError(n.span, "`cum_concat` in a backward loop: a state grows over a forward loop only")
            axis = n.attrs["axis"]
            if grown_in.setdefault(axis, outer) is not outer:
                raise CompileError(
                    n.span,
                    f"`{axis}` is grown in another loop (line {grown_in[axis].span.line}); each loop needs a dim "
                    "of its own",
                )


def _grown_states(n: Loop, empties: dict[int, str]) -> None:
    """A state started by `empty` is read only by its `cum_concat`, whose result it takes next."""
    for c in n.carries:
        if c.init not in empties:
            continue
        readers = [op for op in ops(n.body) if c.inner.id in op.args]
        if not readers:
            continue
        growing = [op for op in readers if grows(op) and op.args[0] == c.inner.id]
        other = next((op for op in readers if op not in growing), None)
        if other is not None:
            raise CompileError(
                other.span,
                f"`{c.name}` grows by `cum_concat` in this loop: its frames before this step are read only "
                f"by its `cum_concat`; read `{c.name}` after it",
            )
        if not any(op.outs[0].id == c.next for op in growing):
            raise CompileError(growing[0].span, _NOT_A_STATE)


def _reads(
    nodes: list[Node],
    chain: list[Loop],
    empties: dict[int, str],
    growing: set[str],
    grown_in: dict[str, Loop],
    values: dict[int, Value],
) -> None:
    """Values over a grown dim are made and read only in the loop growing it, from its
    `cum_concat` on; not stacked there (each step's length differs)."""
    started: set[str] = set()  # in this block: the dims whose `cum_concat` ran
    for n in nodes:
        if isinstance(n, Loop):
            if grown_in and n in grown_in.values() and chain:
                raise CompileError(
                    n.span, "a state grown by `cum_concat` in a loop inside another loop is not supported"
                )
            for s in n.stacks:
                dims = [d for d in s.out.dims if d in growing and grown_in.get(d) is n]
                if dims:
                    raise CompileError(
                        n.span,
                        f"`{s.name}` stacks a value over `{dims[0]}`, which has another length at each step; "
                        "reduce over it before appending",
                    )
            _reads(n.body, [*chain, n], empties, growing, grown_in, values)
            continue
        if starts_growth(n):
            continue
        if grows(n):
            started.add(n.attrs["axis"])
            continue
        for a in n.args:
            if a in empties:
                raise CompileError(
                    n.span,
                    "`empty(...)` starts a state that `cum_concat` grows in a loop; it has no frames to read",
                )
        dims = {d for v in [*n.outs, *(values[a] for a in n.args)] for d in v.dims if d in growing}
        for d in sorted(dims):
            loop = grown_in.get(d)
            if loop is None or loop not in chain:
                where = f"in the loop at line {loop.span.line}" if loop is not None else "nowhere (no `cum_concat`)"
                raise CompileError(
                    n.span,
                    f"a value over `{d}` here: `{d}` is grown {where}, and values over it exist only in that loop",
                )
            if chain[-1] is loop and d not in started:
                raise CompileError(n.span, f"a value over `{d}` before the `cum_concat` that grows it in this step")
