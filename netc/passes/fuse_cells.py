"""A loop that is an LSTM or a GRU over its input becomes one native sequence op.

After hoisting, the plain-ops LSTM of `examples/lstm.py` is a loop over the frames of a
projected input (`x_ = Linear(4 * n)(x)`, moved before the loop) whose body is the LSTM step:

    z = x_t + Linear(4 * n, with_bias=False)(h)        (or Linear(4 * n)(concat(x_t, h)))
    a, b, c, d = split(z, 4)                           (the gate blocks, in any order)
    c = c * sigmoid(f) + tanh(g) * sigmoid(i)          (products and sums in either order)
    h = tanh(c) * sigmoid(o)

That loop is replaced by the op `lstm_loop` (netc.ops.fused) reading the unprojected input and
the initial states, whose results are the loop's (h per frame, h and c after each sequence's
last frame), and whose parameters are the Linears' own: names and layouts stay the model's as
written, the lowering reorders gate blocks. Likewise a GRU in the form torch computes it
(`gru_loop`): r and z from the sum of both projections, n = tanh(x_n + r * h_n),
h = (1 - z) * n + z * h (or z and 1 - z swapped).

The fused op keeps the nodes it replaces (`Op.unfused`): a target without a native unit of the
same numbers emits those. Only top-level loops without `end`, `choice` or a step bound are
fused, and only when nothing else of the body is read after the loop (the body is exactly the
cell, its only stack is h).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from netc.ir.model import Graph, Loop, Node, Op, Value
from netc.ir.uses import count_uses
from netc.ops.cells import FORGET_BIAS as LSTM_CELL_FORGET_BIAS
from netc.ops.cells import TORCH_FROM_TF


def transform(g: Graph) -> tuple[Graph, bool]:
    uses = count_uses(g)
    sizes = {d.name: d.size for d in g.dims if d.size is not None}
    changed = False
    out: list[Node] = []
    defs = {o.id: n for n in g.body if isinstance(n, Op) for o in n.outs}
    absorbed: set[int] = set()  # first result ids of the input projections the native ops do themselves
    for n in g.body:
        fused = _fuse(n, defs, uses, sizes) if isinstance(n, Loop) else None
        if fused is None:
            out.append(n)
            continue
        op, projections = fused
        absorbed.update(a.outs[0].id for a in projections)
        out.append(op)
        changed = True
    # removed in one sweep: `list.remove` per fused loop would scan the whole block each time
    g.body[:] = [n for n in out if not (isinstance(n, Op) and n.outs and n.outs[0].id in absorbed)]
    return g, changed


@dataclass
class _Body:
    """A loop body's ops by the values they give, and the ops a match has used up."""

    loop: Loop
    defs: dict[int, Op]
    sizes: dict[str, int]  # static dims' sizes
    outer: dict[int, Op]  # ops before the loop by the values they give
    uses: Counter  # reads of every value of the graph
    used: set[int] = field(default_factory=set)  # ids of matched ops (their first result)

    def op(self, vid: int, kind: str, nargs: int | None = None) -> Op | None:
        """The body op of kind `kind` giving `vid` (not a scalar form: `1.0 - z` is `sub` with one arg)."""
        op = self.defs.get(vid)
        if op is None or op.op != kind or (nargs is not None and (len(op.args) != nargs or "scalar" in op.attrs)):
            return None
        if "tied" in op.attrs:  # a projection with another module's weight: no cell's own kernel
            return None
        self.used.add(op.outs[0].id)
        return op

    def unary(self, vid: int, kind: str) -> int | None:
        op = self.op(vid, kind, 1)
        return op.args[0] if op is not None else None

    def pair(self, vid: int, kind: str) -> list[tuple[int, int]]:
        """Both orders of the operands of a binary `kind` op giving `vid`."""
        op = self.op(vid, kind, 2)
        if op is None:
            return []
        a, b = op.args
        return [(a, b), (b, a)]

    def complete(self) -> bool:
        """The match used every op of the body."""
        return self.used == {n.outs[0].id for n in self.loop.body}


def _fuse(n: Loop, outer_defs: dict[int, Op], uses: Counter, sizes: dict[str, int]) -> tuple[Op, list[Op]] | None:
    plain = n.end is None and n.target is None and n.bound is None and not n.max_steps
    if not plain or n.invariants or not n.seqs or any(isinstance(b, Loop) for b in n.body):
        return None
    if not all(isinstance(b, Op) and len(b.outs) >= 1 for b in n.body):
        return None
    defs = {o.id: b for b in n.body for o in b.outs}
    for match in (_match_lstm, _match_gru, _match_cell_op):
        for order in (n.carries, n.carries[::-1]):
            body = _Body(n, defs, sizes, outer_defs, uses)
            found = match(body, order)
            if found is not None and body.complete():
                return _build(n, found)
    return None


@dataclass
class _Proj:
    """A projection `Linear(...)(v)` of the input or the state: the Linear's module path and bias;
    for a kernel over `concat(x, h)`, the rows that belong to v. For the input: `source`, the
    outer value it projects (x itself), and `absorbed`, the ops made before the loop that
    computed it (the native op projects x itself)."""

    param: str
    bias: bool
    rows: tuple[int, int] | None = None
    source: int | None = None
    absorbed: list[Op] = field(default_factory=list)
    weight: str = "W"  # the module's roles of the kernel and the bias
    bias_role: str = "b"


@dataclass
class _Cell:
    kind: str  # "lstm" | "gru"
    gates: list[int]  # torch's gate blocks (LSTM: i, f, g, o; GRU: r, z, n) as the source's split indices
    hidden: Value  # h's previous value (its dims give the hidden dim)
    h_next: int
    c_next: int | None  # LSTM only
    x: _Proj
    h: _Proj
    x_gates: list[int] | None = None  # GRU: the input projection's blocks (r, z, n), split apart from h's
    negate_z: bool = False  # GRU written with z and 1 - z swapped: torch's z is 1 - the source's
    forget_bias: float = 0.0  # LSTM: a constant added to the forget gate (`LstmCell`'s 1.0)


def _match_lstm(b: _Body, carries) -> _Cell | None:
    if len(carries) != 2 or len(b.loop.seqs) != 1:
        return None
    hc, cc = carries
    for tanh_c, sig_o in b.pair(hc.next, "mul"):
        if b.unary(tanh_c, "tanh") != cc.next:
            continue
        o = b.unary(sig_o, "sigmoid")
        for keep, write in b.pair(cc.next, "add"):
            for c_prev, sig_f in b.pair(keep, "mul"):
                if c_prev != cc.inner.id:
                    continue
                f = b.unary(sig_f, "sigmoid")
                for tanh_g, sig_i in b.pair(write, "mul"):
                    g, i = b.unary(tanh_g, "tanh"), b.unary(sig_i, "sigmoid")
                    blocks = _blocks(b, [i, f, g, o], 4, hc.inner)
                    if blocks is None:
                        continue
                    split, gates = blocks
                    proj = _projections(b, split.args[0], hc.inner)
                    if proj is not None:
                        return _Cell("lstm", gates, hc.inner, hc.next, cc.next, *proj)
    return None


def _match_gru(b: _Body, carries) -> _Cell | None:
    if len(carries) != 1:
        return None
    (hc,) = carries
    h = hc.inner.id
    for n_side, keep_side in b.pair(hc.next, "add"):
        # (1 - z) * n + z * h, or with z and 1 - z swapped
        for a, n_val in b.pair(n_side, "mul"):
            for z_side, h_val in b.pair(keep_side, "mul"):
                if h_val != h:
                    continue
                if _one_minus(b, a) == z_side:
                    z_gate, negate = z_side, False
                elif _one_minus(b, z_side) == a:
                    z_gate, negate = a, True  # h = (1 - z) * h + z * n: torch's z is the source's 1 - z
                else:
                    continue
                cell = _gru_gates(b, hc, z_gate, n_val)
                if cell is not None:
                    cell.negate_z = negate
                    return cell
    return None


def _gru_gates(b: _Body, hc, z_gate: int, n_val: int) -> _Cell | None:
    z_sum, pre_n = b.unary(z_gate, "sigmoid"), b.unary(n_val, "tanh")
    if z_sum is None or pre_n is None:
        return None
    for x_n, r_hn in b.pair(pre_n, "add"):
        for r_val, h_n in b.pair(r_hn, "mul"):
            r_sum = b.unary(r_val, "sigmoid")
            if r_sum is None:
                continue
            for x_r, h_r in b.pair(r_sum, "add"):
                for x_z, h_z in b.pair(z_sum, "add"):
                    hs = _blocks(b, [h_r, h_z, h_n], 3, hc.inner)
                    xs = _input_blocks(b, [x_r, x_z, x_n], hc.inner)
                    if hs is None or xs is None:
                        continue
                    hp = _projection(b, hs[0].args[0], hc.inner.id)
                    if hp is not None:
                        xp, x_gates = xs
                        return _Cell("gru", hs[1], hc.inner, hc.next, None, xp, hp, x_gates=x_gates)
    return None


def _match_cell_op(b: _Body, carries) -> _Cell | None:
    """The body is one `LstmCell`/`GruCell` step on the loop's frame and the state it returned
    at the previous step: `h, c = cell(x_t, (h, c))`, `h = cell(x_t, h)`."""
    if len(b.loop.seqs) != 1 or len(b.loop.body) != 1:
        return None
    op, x_t = b.loop.body[0], b.loop.seqs[0]
    if op.op == "gru_cell" and len(carries) == 1:
        (hc,) = carries
        if op.args != [x_t.inner.id, hc.inner.id] or hc.next != op.outs[0].id:
            return None
        b.used.add(op.outs[0].id)
        xp = _Proj(op.param, True, source=x_t.outer, weight="ih/W", bias_role="ih/b")
        hp = _Proj(op.param, True, weight="hh/W", bias_role="hh/b")
        return _Cell("gru", [0, 1, 2], hc.inner, hc.next, None, xp, hp, x_gates=[0, 1, 2])
    if op.op == "lstm_cell" and len(carries) == 2:
        hc, cc = carries
        if op.args != [x_t.inner.id, hc.inner.id, cc.inner.id] or [hc.next, cc.next] != [o.id for o in op.outs]:
            return None
        b.used.add(op.outs[0].id)
        n_x, n_h = b.sizes[x_t.inner.dims[-1]], b.sizes[hc.inner.dims[-1]]
        kernel, bias = "lstm_cell/kernel", "lstm_cell/bias"  # one kernel over concat(x, h)
        xp = _Proj(op.param, True, (0, n_x), x_t.outer, weight=kernel, bias_role=bias)
        hp = _Proj(op.param, False, (n_x, n_x + n_h), weight=kernel)
        return _Cell("lstm", list(TORCH_FROM_TF), hc.inner, hc.next, cc.next, xp, hp, forget_bias=LSTM_CELL_FORGET_BIAS)
    return None


def _one_minus(b: _Body, v: int) -> int | None:
    """w when v = 1.0 - w."""
    op = b.defs.get(v)
    if op is None or op.op != "sub" or len(op.args) != 1:
        return None
    if op.attrs.get("scalar") != 1.0 or not op.attrs.get("scalar_left"):
        return None
    b.used.add(op.outs[0].id)
    return op.args[0]


def _blocks(b: _Body, parts: list[int | None], n: int, like: Value) -> tuple[Op, list[int]] | None:
    """`parts` are the n distinct results of one body `split(z, n)` into blocks shaped as `like`:
    that split and each part's block index."""
    if any(p is None for p in parts):
        return None
    split = b.defs.get(parts[0])
    found = _split_indices(split, parts, n, like)
    if found is None:
        return None
    b.used.add(split.outs[0].id)
    return split, found


def _split_indices(split: Op | None, parts: list, n: int, like: Value) -> list[int] | None:
    if split is None or split.op != "split" or len(split.outs) != n:
        return None
    if any(o.dims[-1] != like.dims[-1] for o in split.outs):
        return None
    ids = [o.id for o in split.outs]
    if len(set(parts)) != n or not all(p in ids for p in parts):
        return None
    return [ids.index(p) for p in parts]


def _input_blocks(b: _Body, parts: list[int], like: Value) -> tuple[_Proj, list[int]] | None:
    """The GRU's input blocks: split in the body from the input's projection, or (per-frame work
    hoisted) frames of the results of a split made before the loop of a Linear over x."""
    inside = _blocks(b, parts, 3, like)
    if inside is not None:
        xp = _projection(b, inside[0].args[0], b.loop.seqs[0].inner.id) if len(b.loop.seqs) == 1 else None
        return (xp, inside[1]) if xp is not None else None
    seqs = {s.inner.id: s.outer for s in b.loop.seqs}
    if len(seqs) != 3 or set(parts) != set(seqs):
        return None
    outer = [seqs[p] for p in parts]
    split = b.outer.get(outer[0])
    gates = _split_indices(split, outer, 3, like)
    if gates is None or any(b.uses[v] != 1 for v in outer):
        return None
    lin = b.outer.get(split.args[0])
    if lin is None or lin.op != "linear" or "tied" in lin.attrs or b.uses[split.args[0]] != 1:
        return None
    return _Proj(lin.param, _has_bias(lin), _rows(lin), source=lin.args[0], absorbed=[lin, split]), gates


def _projections(b: _Body, z: int, h: Value) -> tuple[_Proj, _Proj] | None:
    """z = x-projection + h-projection, or one Linear over concat(x_t, h) / concat(h, x_t)."""
    x_t = b.loop.seqs[0].inner
    for p, q in b.pair(z, "add"):
        xp, hp = _projection(b, p, x_t.id), _projection(b, q, h.id)
        if xp is not None and hp is not None:
            return xp, hp
    lin = b.op(z, "linear", 1)
    cat = b.op(lin.args[0], "concat", 2) if lin is not None else None
    if lin is None or cat is None or set(cat.args) != {x_t.id, h.id}:
        return None
    n_x, n_h = b.sizes[x_t.dims[-1]], b.sizes[h.dims[-1]]
    x_first = cat.args[0] == x_t.id
    x_rows = (0, n_x) if x_first else (n_h, n_h + n_x)
    h_rows = (n_x, n_x + n_h) if x_first else (0, n_h)
    source = b.loop.seqs[0].outer
    return _Proj(lin.param, _has_bias(lin), x_rows, source), _Proj(lin.param, False, h_rows)


def _projection(b: _Body, v: int, src: int) -> _Proj | None:
    """v = Linear(...)(src) in the body; or, src being the loop's input frame, v that frame when
    the loop's input is a Linear made before the loop (hoisted per-frame work)."""
    seq = b.loop.seqs[0]
    lin = b.op(v, "linear", 1)
    if lin is not None:
        if lin.args[0] != src:
            return None
        source = seq.outer if src == seq.inner.id else None
        return _Proj(lin.param, _has_bias(lin), _rows(lin), source=source)
    if v != seq.inner.id or src != seq.inner.id:
        return None
    outer = b.outer.get(seq.outer)
    if outer is None or outer.op != "linear" or "tied" in outer.attrs:
        return None
    absorbed = [outer] if b.uses[seq.outer] == 1 else []  # read by this loop only
    return _Proj(outer.param, _has_bias(outer), _rows(outer), source=outer.args[0], absorbed=absorbed)


def _has_bias(lin: Op) -> bool:
    return bool(lin.attrs.get("with_bias", True))


def _rows(lin: Op) -> tuple[int, int] | None:
    """The rows of its module's kernel a Linear reads (`split_linear` split it from one over a concat)."""
    rows = lin.attrs.get("rows")
    return None if rows is None else (rows[0], rows[1])


def _build(n: Loop, cell: _Cell) -> tuple[Op, list[Op]] | None:
    """The fused op for loop `n`, and the ops before the loop it absorbs."""
    results: list[str] = []
    outs: list[Value] = []
    for c in n.carries:
        if c.out is not None:
            results.append("h" if c.next == cell.h_next else "c")
            outs.append(c.out)
    for s in n.stacks:
        if s.value != cell.h_next:
            return None  # only h per frame comes out of a native call
        results.append("seq")
        outs.append(s.out)
    for ll in n.lasts:
        if ll.value not in (cell.h_next, cell.c_next):
            return None
        results.append("h" if ll.value == cell.h_next else "c")
        outs.append(ll.out)
    if len(set(results)) != len(results) or cell.x.source is None:
        return None
    order = [r for r in ("seq", "h", "c") if r in results]  # the op's results in this order
    outs = [outs[results.index(r)] for r in order]
    x = cell.x
    h = cell.h
    params = {  # lists, not tuples: attrs go through JSON unchanged
        "w_ih": [x.param, x.weight],
        "b_ih": [x.param, x.bias_role] if x.bias else None,
        "w_hh": [h.param, h.weight],
        "b_hh": [h.param, h.bias_role] if h.bias else None,
    }
    attrs = {
        "axis": n.axis,
        "reverse": n.reverse,
        "hidden": cell.hidden.dims[-1],
        "gates": cell.gates,
        "params": params,
        "rows": {"w_ih": _list(x.rows), "w_hh": _list(cell.h.rows)},
        "results": order,
        "loop": n.name,
    }
    if cell.forget_bias:
        attrs["forget_bias"] = cell.forget_bias
    if cell.kind == "gru":
        attrs["x_gates"] = cell.x_gates or cell.gates
        attrs["negate_z"] = cell.negate_z
    inits = [c.init for c in n.carries]
    if n.carries[0].next != cell.h_next:
        inits.reverse()  # (h, c)
    unfused: list[Node] = [*x.absorbed, n]
    op = Op(op=f"{cell.kind}_loop", args=[x.source, *inits], attrs=attrs, outs=outs, span=n.span, unfused=unfused)
    return op, x.absorbed


def _list(rows: tuple[int, int] | None) -> list[int] | None:
    return None if rows is None else list(rows)
