"""IR → a RETURNN config (text): dims, `extern_data` and the `network` dict.

A loop becomes a `rec` layer with a subnetwork unit: sequences are `rec_unstack` layers,
outer values `base:` references, carried state `prev:` references with `initial_output`,
stacked results `rec/<layer>` (marked `is_output_layer`), last frames `need_last` +
`rec_last_output`. Parameterised layers get an absolute `name_scope` so TF variables are
named by module path (`cell/ff/W`) wherever RETURNN places the layer.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import jinja2

from netc.emit_tf.fold import fold
from netc.emit_tf.grow_rules import check_grown_reads, kept_cum_concats
from netc.emit_tf.loop_rules import (
    STEP_TYPE_HELPER,
    STEP_TYPE_HELPER_SOURCE,
    axes_of_prev,
    dims_without_prev,
    feeding_state,
    per_step,
    readers,
    shaped_by_others,
    stepped_values,
)
from netc.errors import CompileError, Span
from netc.ir.model import Graph, Loop, LoopCarry, LoopLast, Node, Op, ParamDef, Value
from netc.ir.search import SearchPlan, search_plan
from netc.ir.uses import count_uses_in_loop, node_uses
from netc.naming import Code, Namespace, plain_text, py_literal, py_str
from netc.ops import REGISTRY
from netc.ops.base import Carry
from netc.passes.returnn_names import UNIT_RESERVED as _UNIT_RESERVED

_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
# `while True` loops have no limit in eager mode and torch; RETURNN's loop needs one
UNBOUNDED_MAX_STEPS = 1000
# RETURNN's batch limit of a loop whose `end` layer holds each sequence's step limit: never reached
NO_BATCH_LIMIT = 2**31 - 1


# RETURNN layer names: `data`, `base` and `prev` start references, `output`/`end` are special
# in a unit; a name must also be a valid TensorFlow root scope (ASCII, starting with a letter)
RESERVED_LAYERS = {"data", "base", "prev", "output", "end"}
_LAYER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_CONFIG_NAMES = {"Dim", "batch_dim", "extern_data", "network", "reverse_in_length", "netc_step_type"}


def dim_vars(g: Graph) -> dict[str, str]:
    """The config's variable for each dim (`dim_2xhidden`); `batch` is RETURNN's `batch_dim`."""
    ns = Namespace(_CONFIG_NAMES)
    out = {"batch": "batch_dim"}
    for d in g.dims:
        if d.kind != "batch":
            out[d.name] = ns.fresh("dim_" + d.name.replace("*", "x").replace("/", "_div_").replace("+", "_plus_"))
    return out


def check_layer_name(name: str, what: str, span: Span | None) -> None:
    """Outputs, losses and inputs keep the user's name in RETURNN: it must be a usable layer (or
    `data:` key) name. Inputs live in their own `data:` name space, so only the form counts."""
    if what != "input" and name in RESERVED_LAYERS - {"output"}:
        raise CompileError(span, f"RETURNN target: {what} `{name}` is a name RETURNN reserves; rename it")
    if not _LAYER_NAME.fullmatch(name):
        raise CompileError(
            span,
            f"RETURNN target: {what} {py_str(name)} is not a valid RETURNN name "
            "(ASCII letters, digits and `_`, starting with a letter); rename it",
        )


class _OpCtx:
    """What an op's RETURNN lowering may ask for (netc.ops.base.ReturnnCtx)."""

    def __init__(self, em: ReturnnEmitter, blk: _Block, op: Op):
        self.em, self.blk, self.op = em, blk, op
        self.in_unit = blk.in_unit

    def src(self, i: int) -> str:
        return self.blk.refs[self.op.args[i]]

    def in_dims(self, i: int) -> tuple[str, ...]:
        return self.em.values[self.op.args[i]].dims

    def dim(self, name: str) -> Code:
        return Code(self.blk.dims[name])

    def is_dynamic(self, name: str) -> bool:
        return self.em.g.dim(name).kind == "dynamic"

    def dim_source(self, name: str) -> str | None:
        return self.em.dim_source.get(name) if not self.blk.in_unit else None

    def carry(self, i: int) -> Carry | None:
        return self.blk.carries.get(self.op.args[i])

    def is_zeros(self, i: int) -> bool:
        return self.op.args[i] in self.em.zeros

    def _param(self, role: str) -> ParamDef:
        return self.em.params[self.op.param_key(role)]

    def variable(self, role: str) -> str:
        return self._param(role).name

    def param_shape(self, role: str) -> tuple[int, ...]:
        return tuple(self.em.g.dim(d).size or 0 for d in self._param(role).dims)


class _Block:
    def __init__(self, reserved: set[str], dims: dict[str, str], in_unit: bool = False, path: tuple[str, ...] = ()):
        self.in_unit = in_unit
        self.path = path  # rec layer names down to this block: () for the network, ("rec",) for its unit
        # IR dim -> the config's dim variable here: inside a loop over `time`, a value that has
        # `time` holds the whole sequence, which RETURNN must see as a dim other than the loop's
        self.dims = dims
        self.ns = Namespace(reserved, python=False, letter_first=True)
        self.layers: dict[str, dict] = {}
        self.refs: dict[int, str] = {}
        self.layer_of: dict[int, str] = {}  # value id -> its own layer in this block (not a `base:`/`prev:` ref)
        self.retagged: dict[tuple, str] = {}  # (value id, tag changes) -> its `reinterpret_data` layer
        self.carries: dict[int, Carry] = {}  # carried value id -> its initial and next value
        self.read: Counter = Counter()  # in a unit: reads of the body's values (count_uses_in_loop)


class ReturnnEmitter:
    def __init__(self, g: Graph):
        self.g = g
        self.values: dict[int, Value] = {}
        # module path -> TF variable scope (the variable name without its role, which may hold a `/`)
        self.param_scope = {p.path: p.name[: -len(p.role) - 1] for p in g.params}
        self.params = {(p.path, p.role): p for p in g.params}
        self.dim_source: dict[str, str] = {}  # dynamic dim made by an op or loop -> a top-level layer with it
        self.zeros: set[int] = set()  # values made by `zeros(...)`
        # values made by `empty(...)`: states a `cum_concat` layer grows, which starts them itself
        self.grown: set[int] = set()
        self.helpers: dict[str, str] = {}  # functions the layers call (ops' `returnn_helpers`)
        self.output_layers: dict[str, str] = {}  # an output folded into a loss layer -> that layer
        # the ops of loops' step limits emitted in their units (`Loop.bound_ops`), by first result
        self.in_units: dict[int, Op] = {}
        self.dim_vars = dim_vars(g)
        self.dim_ns = Namespace({*_CONFIG_NAMES, *self.dim_vars.values()})
        self.whole_dims: list[tuple[str, str]] = []  # (variable, RETURNN name) of dims made for loops
        # provenance for `netc preview`: each block by its path, each op's layer path by its first value id
        self.blocks: dict[tuple[str, ...], _Block] = {}
        # each op's layer path; () when no layer does its work (folded away as RETURNN's default)
        self.op_layers: dict[int, tuple[str, ...]] = {}

    def dim_code(self, name: str) -> Code:
        """The config's Python expression for a dim at the top level (`batch_dim` for batch)."""
        return Code(self.dim_vars[name])

    def render(self) -> str:
        g = self.g
        for inp in g.inputs:
            check_layer_name(inp.name, "input", inp.span)
        for o in [*g.outputs, *g.losses]:
            check_layer_name(o.name, "output" if o in g.outputs else "loss", o.span)
        plan = search_plan(g)
        search_layers = None
        if g.search is not None:  # a search runs its own network (the choice loop as written)
            provenance = self.blocks, self.op_layers  # the preview shows training's network
            self.blocks, self.op_layers = {}, {}
            search_layers = self.network(g.search, plan)
            self.blocks, self.op_layers = provenance
        layers = self.network(g, plan if g.search is None else None)
        # training's network reads a `choice` target in its loop (teacher forcing) when the model
        # has a search network: RETURNN would build dummies of the layers that depend on it
        extern = extern_data(g, self.dim_vars, target_read=g.search is not None)
        dims = [(self.dim_vars[d.name], py_str(d.name), d.size) for d in g.dims if d.kind != "batch"]
        dims += [(var, py_str(name), None) for var, name in self.whole_dims]
        return _TEMPLATES.get_template("config.py.j2").render(
            source=plain_text(os.path.basename(g.source_file)),
            network=plain_text(g.network),
            dims=dims,
            extern_data=py_literal(extern, 0),
            net=py_literal(layers, 0),
            output_layers=py_literal(self.output_layers) if self.output_layers else None,
            search_net=py_literal(search_layers, 0) if search_layers is not None else None,
            # each function after two blank lines, and two before `extern_data`
            helpers="".join(f"\n\n{h.strip()}\n" for h in self.helpers.values()) + ("\n" if self.helpers else ""),
            search_output=py_str(plan.outputs[0]) if plan is not None else None,
            target_layers=py_literal(_needing(search_layers or layers, plan.targets)) if plan is not None else None,
            target=py_str(sorted(plan.targets)[0]) if plan is not None else None,
            default_input=py_str(fed[0]) if plan is not None and (fed := _fed(g, plan)) else None,
        )

    def network(self, g: Graph, plan: SearchPlan | None) -> dict[str, dict]:
        """The layers of one network; with `plan`, the network searches (outputs `decide`)."""
        self.dim_source, self.zeros, self.grown = {}, set(), set()  # value ids are the graph's own
        limits = {vid for n in g.body if isinstance(n, Loop) for vid in n.bound_ops}
        self.in_units = {n.outs[0].id: n for n in g.body if isinstance(n, Op) and n.outs[0].id in limits}
        root = self.blocks[()] = _Block(
            {*RESERVED_LAYERS, *(o.name for o in [*g.outputs, *g.losses]), *_loop_names(g.body)}, self.dim_vars
        )
        for inp in g.inputs:
            root.refs[inp.value.id] = f"data:{inp.name}"
            self.values[inp.value.id] = inp.value
            self.dim_source.update({d: "" for d in inp.value.dims})  # lengths known from the start
        # an output or loss made by a top-level layer is that layer itself, named after it
        made_here = {v.id for n in g.body if isinstance(n, Op) and len(n.outs) == 1 for v in n.outs}
        made_here |= {r.id for n in g.body if isinstance(n, Loop) and n.target is None for r in n.results()}
        made_here |= {v.id for n in g.body if isinstance(n, Op) and n.unfused for v in n.outs}
        # a loss with several dynamic dims is first summed over all but the first: RETURNN's `as_is`
        # flattens one dynamic axis by its lengths and would sum the others' padded frames
        top = {v.id: v for n in g.body for v in (n.outs if isinstance(n, Op) else n.results())}
        top |= {inp.value.id: inp.value for inp in g.inputs}
        over = {o.name: [d for d in top[o.value].dims if g.dim(d).kind == "dynamic"][1:] for o in g.losses}
        named: dict[int, str] = {}
        for o in [*g.outputs, *g.losses]:
            if over.get(o.name) or o.value in named or (plan and o.name in plan.outputs):
                continue
            if o.value in made_here:
                named[o.value] = o.name
        self.block(g.body, root, named)
        for o in [*g.outputs, *g.losses]:
            if root.layer_of.get(o.value) == o.name:
                layer = root.layers[o.name]
            elif plan is not None and o.name in plan.outputs:  # searching: the best hypothesis' frames
                layer = root.layers[o.name] = {"class": "decide", "from": root.refs[o.value]}
            elif over.get(o.name):
                axes = [Code(root.dims[d]) for d in over[o.name]]
                layer = root.layers[o.name] = {
                    "class": "reduce",
                    "mode": "sum",
                    "from": root.refs[o.value],
                    "axis": axes,
                }
            else:
                layer = root.layers[o.name] = {"class": "copy", "from": root.refs[o.value]}
            if o in g.outputs:
                layer["is_output_layer"] = True
            else:  # `as_is` sums over valid frames, as the torch module does
                layer["loss"] = "as_is"
        moved = fold(root.layers, self.helpers)
        # an output folded into a loss layer is that layer (the runtime fetches it by this map)
        self.output_layers = {o.name: moved[o.name] for o in g.outputs if moved.get(o.name)}
        if plan is not None:  # a search has no targets (and computes no loss): RETURNN drops these losses
            for name in self.output_layers.values():
                root.layers[name]["loss_only_on_non_search"] = True
        for vid, path in self.op_layers.items():  # provenance follows a layer's work
            if len(path) == 1 and path[0] in moved:
                into = moved[path[0]]
                self.op_layers[vid] = (into,) if into is not None else ()
        return root.layers

    # --- blocks ------------------------------------------------------------------------

    def block(self, nodes: list[Node], blk: _Block, reserved: dict[int, str] | None = None) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                self.loop(n, blk, reserved or {})
            elif blk.in_unit or n.outs[0].id not in self.in_units:
                self.op(n, blk, reserved or {})

    def op(self, op: Op, blk: _Block, reserved: dict[int, str]) -> None:
        """One layer; its name was reserved up front when a carry needs it, else from the variable."""
        opdef = REGISTRY[op.op]
        ctx = _OpCtx(self, blk, op)
        layer = opdef.returnn(ctx, op)
        if op.op == "empty":  # no layer: the `cum_concat` layer growing the state starts it
            self.grown.add(op.outs[0].id)
            self.values[op.outs[0].id] = op.outs[0]
            self.op_layers[op.outs[0].id] = ()
            return
        if layer is None:  # a fused op without a native layer here: what it was fused from
            self.block(op.unfused, blk, reserved)
            loop = next(n for n in op.unfused if isinstance(n, Loop))
            self.op_layers[op.outs[0].id] = (*blk.path, loop.name)
            return
        if op.param:
            layer["name_scope"] = f"/{self.param_scope[op.param]}"
        self.helpers.update(opdef.returnn_helpers(op))
        if op.op == "zeros":
            self.zeros.add(op.outs[0].id)
        name = reserved.get(op.outs[0].id) or blk.ns.fresh(op.hint())
        refs = opdef.returnn_outs(name, op)
        if refs[:1] != [name] and name == reserved.get(op.outs[0].id):
            # the reserved name is for the value, which an extra layer gives (a fused LSTM's last `c`)
            name = blk.ns.fresh(op.hint())
            refs = opdef.returnn_outs(name, op)
        blk.layers[name] = layer
        self.op_layers[op.outs[0].id] = (*blk.path, name)
        refs += [""] * (len(op.outs) - len(refs))  # results given by extra layers
        for i, (extra_name, extra) in opdef.returnn_extra(ctx, name, layer, op, blk.ns.fresh).items():
            extra_name = reserved.get(op.outs[i].id) or extra_name
            refs[i] = extra_name
            blk.layers[extra_name] = extra
        if blk.in_unit:
            # a unit's layer reading a sub-layer (`split/2`) of a layer RETURNN moves out of the loop
            # fails there (it looks the moved-out name up as a layer): a read part is a layer of its own
            for i, v in enumerate(op.outs):
                if refs[i] not in blk.layers and refs[i].startswith(f"{name}/") and blk.read[v.id]:
                    part = blk.ns.fresh(v.name or f"{name}_{i}")
                    blk.layers[part] = {"class": "copy", "from": refs[i]}
                    refs[i] = part
        for v, ref in zip(op.outs, refs):
            self.values[v.id] = v
            blk.refs[v.id] = ref
            if ref in blk.layers:
                blk.layer_of[v.id] = ref
            self._note_dims(blk, v, ref)

    def _note_dims(self, blk: _Block, v: Value, ref: str) -> None:
        """Remember a top-level layer for each dynamic dim first seen here (made by an op or loop)."""
        if not blk.in_unit:
            for d in v.dims:
                if self.g.dim(d).kind == "dynamic":
                    self.dim_source.setdefault(d, ref)

    def _own_layer(self, blk: _Block, vid: int, hint: str) -> str:
        """A layer of this block holding value `vid` (a copy when it is a reference)."""
        if vid in blk.layer_of:
            return blk.layer_of[vid]
        name = blk.ns.fresh(hint)
        blk.layers[name] = {"class": "copy", "from": blk.refs[vid]}
        blk.layer_of[vid] = name
        return name

    def _dynamic(self, vid: int) -> bool:
        """Value `vid` has a dynamic dim (besides batch)."""
        return any(self.g.dim(d).kind == "dynamic" for d in self.values[vid].dims)

    def _per_step(self, name: str, src: str, stepped: bool, beam: str | None = None) -> dict:
        """`loop_rules.per_step`, with the config's helper it may call."""
        if not stepped:
            self.helpers[STEP_TYPE_HELPER] = STEP_TYPE_HELPER_SOURCE
        return per_step(name, src, stepped, beam)

    def _static_zeros(self, vid: int) -> bool:
        """Value `vid` is made by `zeros(...)` over the batch and static dims only."""
        return vid in self.zeros and all(self.g.dim(d).kind != "dynamic" for d in self.values[vid].dims)

    def loop(self, n: Loop, outer: _Block, named: dict[int, str]) -> None:
        """A rec layer; `named`: results that are outputs, whose layers take the output's name."""
        rec = n.name  # chosen by the returnn_names pass (parameter names depend on it); reserved
        path = (*outer.path, rec)
        unit = self.blocks[path] = _Block(
            _UNIT_RESERVED | set(_loop_names(n.body)), dict(outer.dims), in_unit=True, path=path
        )
        axis = Code(outer.dims[n.axis])
        check_grown_reads(n, self.grown, self.values | {v.id: v for v in _body_values(n)})
        crossing = [*(i.outer for i in n.invariants), *(c.init for c in n.carries if c.init not in self.grown)]
        if any(n.axis in self.values[v].dims for v in crossing):  # the whole axis is read in the body
            var = self.dim_ns.fresh(f"{outer.dims[n.axis]}_whole")
            self.whole_dims.append((var, f"{n.axis}:whole"))
            unit.dims[n.axis] = var
        base = {v: _base(self._retag(outer, v, outer.dims, unit.dims, self._crossing(outer, v))) for v in crossing}
        outer.layers[rec] = {}  # keeps the layer order readable: the loop before what reads it
        # `prev:` refs must be known before the body: each carry's layer is named after its
        # variable (first: state is what a reader of the config follows), and is the layer
        # computing its next value when that is an op of this body that RETURNN keeps in the loop
        single = {nd.outs[0].id for nd in n.body if isinstance(nd, Op) and len(nd.outs) == 1}
        stepped = stepped_values(n)
        for nd in n.body:  # known before the body's layers are: how its states are emitted depends on them
            self.values.update((v.id, v) for v in (nd.outs if isinstance(nd, Op) else nd.results()))
        self.values.update((v.id, v) for v in n.block_args())
        # a loop with `end` has no lengths before it runs: RETURNN takes them from its output's
        # first dynamic dim if that has another one (an assertion); such an output is not a state
        has_other = (lambda v: self._dynamic(v.id)) if n.end is not None and n.target is None else (lambda v: False)
        grown = [c for c in n.carries if c.init in self.grown]  # its layer is `cum_concat`, its own state
        output_carry = _output_carry(n, single, outer, lambda v: has_other(v) or v.id in {c.inner.id for c in grown})
        carry_layers: dict[int, str] = {}
        reserved: dict[int, str] = {}
        for c in n.carries:
            self.values[c.inner.id] = c.inner
            unit.carries[c.inner.id] = Carry(base.get(c.init, ""), c.init in self.zeros, c.next)
            carry_layers[c.inner.id] = "output" if c is output_carry else unit.ns.fresh(c.name)
            if c.next in single and c.next not in reserved and c.next in stepped:
                reserved[c.next] = carry_layers[c.inner.id]
            unit.refs[c.inner.id] = f"prev:{carry_layers[c.inner.id]}"
        in_loop = feeding_state(n)
        read_whole = {s.value for s in n.stacks} | {ll.value for ll in n.lasts}
        for c in n.carries:
            if c.inner.id in read_whole or not readers(n, c.inner.id) <= in_loop:
                # RETURNN moves a layer that no state needs after the loop and gives it the frames
                # of the states it reads shifted by one, along the axis it takes for time: of a
                # value with another dynamic dim, possibly that one, and none when the state's
                # template came from its `prev:` or initial value (no time axis: an assertion).
                # Such a state's previous value is read through a layer kept in the loop
                prev = unit.ns.fresh(f"{c.name}_prev")
                unit.layers[prev] = self._per_step(prev, unit.refs[c.inner.id], False)
                unit.refs[c.inner.id] = unit.layer_of[c.inner.id] = prev
        read = unit.read = count_uses_in_loop(n)
        batched = {base[v] for v in crossing if "batch" in self.values[v].dims}  # refs with a batch dim
        steps_from: list[str] = []  # a sequence no layer reads: RETURNN must still build it first
        for s in n.seqs:
            self.values[s.inner.id] = s.inner
            if s.outer == n.target:  # the choice layer takes its target by data key
                continue
            src = self._crossing(outer, s.outer)
            if n.reverse:
                src = self._reverse(outer, src, n.axis, f"{self.values[s.outer].name or 'x'}_reversed")
            if not read[s.inner.id]:
                steps_from.append(src)
                continue
            name = unit.ns.fresh(s.inner.name or f"{self.values[s.outer].name or 'x'}_t")
            unit.layers[name] = {"class": "rec_unstack", "from": _base(src), "axis": axis}
            unit.refs[s.inner.id] = unit.layer_of[s.inner.id] = name
            if "batch" in s.inner.dims:
                batched.add(name)
        for i in n.invariants:
            self.values[i.inner.id] = i.inner
            unit.refs[i.inner.id] = base[i.outer]
        self.block(n.body, unit, reserved)
        # a layer kept in a searched loop reads the choice too: its frames are per hypothesis
        beam = next((unit.refs[nd.outs[0].id] for nd in n.body if isinstance(nd, Op) and nd.op == "choice"), None)
        for nd in kept_cum_concats(n):  # its frame through a layer RETURNN keeps in the loop
            layer = unit.layers[self.op_layers[nd.outs[0].id][-1]]
            frame = unit.ns.fresh(f"{self.op_layers[nd.outs[0].id][-1]}_frame")
            # not reading the choice (a search's beam): the frame is needed before it
            unit.layers[frame] = self._per_step(frame, layer["from"], False)
            layer["from"] = frame
        for c in n.carries:
            name = carry_layers[c.inner.id]
            if name not in unit.layers:
                unit.layers[name] = self._per_step(name, unit.refs[c.next], c.next in stepped, beam)
                if c.next in stepped:
                    unit.layer_of.setdefault(c.next, name)
            if c not in grown:
                self._initial_output(unit, outer, name, c.init, base[c.init], batched)
        results = [(c.next, c.out, carry_layers[c.inner.id], "state") for c in n.carries if c.out is not None]
        results += [(s.value, s.out, s.name, "stack") for s in n.stacks]
        results += [(ll.value, ll.out, ll.name, "last") for ll in n.lasts if not ll.after_end]
        results += [
            (self._held(n, unit, outer, ll, batched), ll.out, ll.name, "held") for ll in n.lasts if ll.after_end
        ]
        if n.end is not None and not n.include_eos:
            # RETURNN's last frame is then the step before the ending one: a value the ending step
            # computes before the `break` is not in any frame it keeps
            before = [c.name for c in n.carries if c.out is not None] + [ll.name for ll in n.lasts if not ll.after_end]
            if before:
                raise CompileError(
                    n.span,
                    f"RETURNN target: `{before[0]}` is assigned before `if end(...): break` but the stacks "
                    f"are appended after it, so its value after the loop would be one step off; "
                    f"assign it after the `break` (bound before the loop) or append before it",
                )
        if outer.in_unit and len(results) != 1:
            raise CompileError(
                n.span,
                "RETURNN target: a loop inside another loop can give one result (a stacked list "
                "or one variable read after it); split it into several loops",
            )
        result_layers: list[str] = []
        held: dict[int, str] = {}  # a value no step changes -> its layer that each step computes
        for value, out, hint, kind in results:
            if kind == "held":
                name, kind = value, "last"  # its own state layer
            elif kind == "state" and value not in stepped:
                name = hint  # the state's own layer, kept in the loop above
            elif value in stepped and not (kind == "last" and self._dynamic(value)):
                name = self._own_layer(unit, value, hint)
            else:  # also a last value with a dynamic dim: RETURNN may take the last frame along it
                if value not in held:
                    held[value] = unit.ns.fresh(hint)
                    unit.layers[held[value]] = self._per_step(held[value], unit.refs[value], False, beam)
                name = held[value]
            result_layers.append(name)
            self.values[out.id] = out
            if outer.in_unit:
                # sub-layers of a rec layer inside a unit cannot be reached; its own output can
                if name != "output":
                    unit.layers["output"] = {"class": "copy", "from": name}
                if kind == "stack":
                    # RETURNN's template of a rec layer in a unit is batch-major and its output
                    # time-major: a state's or last frame's layer of it would mix the two layouts
                    # (its previous value laid out as the template says); batch-major throughout
                    ref = outer.ns.fresh(out.name or f"{rec}_stacked")
                    outer.layers[ref] = {"class": "reinterpret_data", "from": rec, "enforce_batch_major": True}
                else:
                    ref = self._gather_last(outer, rec, out, n.axis)
            elif kind == "stack":
                unit.layers[name]["is_output_layer"] = True
                ref = f"{rec}/{name}"
            else:
                unit.layers[name]["need_last"] = True
                # RETURNN reads it as a previous value too (a held value, its layer's name here,
                # has its own initial value)
                if isinstance(value, int) and self.values[value].sparse_dim:
                    unit.layers[name].setdefault("initial_output", "zeros")
                # the output's own name unless a whole axis is retagged after it (a layer more)
                retagged = any(unit.dims[d] != outer.dims[d] for d in out.dims)
                ref = (None if retagged else named.get(out.id)) or outer.ns.fresh(out.name or f"{name}_last")
                outer.layers[ref] = {"class": "rec_last_output", "rec_layer": rec, "sub_layer_name": name}
                outer.layer_of[out.id] = ref
            if kind == "stack" and n.reverse:  # the loop ran over reversed sequences: back to frame order
                ref = self._reverse(outer, ref, n.axis, hint)
            outer.refs[out.id] = ref
            # a stack's `n.axis` is the loop's own; in a last value `n.axis` is the whole axis
            inside = {**unit.dims, n.axis: outer.dims[n.axis]} if kind == "stack" else unit.dims
            outer.refs[out.id] = self._retag(outer, out.id, inside, outer.dims)
            self._note_dims(outer, out, outer.refs[out.id])
        if "output" not in unit.layers:
            # searching, RETURNN takes the rec layer's hypotheses from its output: the choice
            chosen = [nd.outs[0].id for nd in n.body if isinstance(nd, Op) and nd.op == "choice"]
            first = self._own_layer(unit, chosen[0], "out") if chosen else result_layers[0]
            unit.layers["output"] = {"class": "copy", "from": first}
            if not chosen and has_other(self.values[results[0][0]]):
                plain = [name for (v, *_), name in zip(results, result_layers) if not has_other(self.values[v])]
                if plain:
                    unit.layers["output"]["from"] = plain[0]
                else:  # the first result over its other dynamic dims (nothing reads it)
                    dims = [unit.dims[d] for d in self.values[results[0][0]].dims if self.g.dim(d).kind == "dynamic"]
                    unit.layers["output"] = {
                        "class": "reduce",
                        "mode": "max",
                        "from": first,
                        "axis": [Code(d) for d in dims],
                    }
        rec_layer = {"class": "rec", "from": steps_from, "axis": axis, "unit": unit.layers}
        if n.target is not None:  # training: the target's frames; searching: a new axis per search
            del rec_layer["axis"]
            rec_layer["target"] = next(i.name for i in self.g.inputs if i.value.id == n.target)
        if n.end is not None:
            unit.layers["end"] = self._end(n, unit, outer)
            rec_layer["include_eos"] = n.include_eos
            # RETURNN needs a loop limit for the whole batch; `end` stops each sequence at its own
            rec_layer["max_seq_len"] = NO_BATCH_LIMIT if n.bound is not None else n.max_steps or UNBOUNDED_MAX_STEPS
        outer.layers[rec].update(rec_layer)

    def _initial_output(self, unit: _Block, outer: _Block, name: str, init: int, ref: str, batched: set[str]) -> None:
        """The initial value `init` (an outer value, read as `ref`) of the unit's state layer `name`."""
        if init in self.zeros and shaped_by_others(unit.layers, name, batched) and not axes_of_prev(unit.layers, name):
            # zeros are RETURNN's default, if its first template of the state has all its dims
            known = {r: frozenset(self.values[v].dims) for v, r in unit.refs.items() if v in self.values}
            known.update({r: frozenset(self.values[v].dims) for v, r in unit.layer_of.items() if v in self.values})
            shaped = dims_without_prev(unit.layers, name, known)
            if shaped is None or set(self.values[init].dims) <= shaped:
                return
        # RETURNN looks for an inner unit's initial values before the outer unit has built its
        # own layers: zeros made there are RETURNN's `"zeros"`
        in_outer_unit = outer.in_unit and not ref.startswith("base:base:")
        zeros = in_outer_unit and self._static_zeros(init)
        unit.layers[name]["initial_output"] = "zeros" if zeros else ref

    def _held(self, n: Loop, unit: _Block, outer: _Block, ll: LoopLast, batched: set[str]) -> str:
        """A value assigned after `if end(...): break`, held at the step where `end` held: a state
        layer that keeps its previous value there (its value before the loop at the first step).
        RETURNN's last frame of it is what Python holds after the loop: with `include_eos` the
        ending frame, which holds; without, the frame before it (RETURNN reads the previous value
        at the ending frame, the initial value when that is the first); a sequence stopped by its
        bound (not by the user's condition) has its last step's value."""
        name = unit.ns.fresh(ll.name)
        unit.layers[name] = {
            "class": "switch",
            "condition": unit.refs[n.end],
            "true_from": f"prev:{name}",
            "false_from": unit.refs[ll.value],
        }
        init = next(i.outer for i in n.invariants if i.inner.id == ll.init)
        self._initial_output(unit, outer, name, init, unit.refs[ll.init], batched)
        return name

    def _end(self, n: Loop, unit: _Block, outer: _Block) -> dict:
        """The unit's `end` layer: the user's condition, or the sequence's step limit reached."""
        cond = unit.refs[n.end]
        chosen = [nd.outs[0].id for nd in n.body if isinstance(nd, Op) and nd.op == "choice"]
        if chosen and not _depends_on(n, n.end, chosen[0]):
            # a search takes the beam its hypotheses end in from the `end` layer's dependencies (it
            # asserts they reach the choice): an end of the frames alone (a transducer's last frame)
            # reads the choice through a comparison that never holds
            never = unit.ns.fresh("never")
            unit.layers[never] = {"class": "compare", "kind": "less", "from": [unit.refs[chosen[0]]], "value": 0}
            ended = unit.ns.fresh("ended")
            unit.layers[ended] = {"class": "combine", "kind": "logical_or", "from": [cond, never]}
            cond = ended
        bound = self._bound(n, unit, outer) if n.bound is not None else None
        if n.bound is None and n.max_steps is None:
            return {"class": "copy", "from": cond}
        # steps 0 .. limit-1 run; with include_eos the last of them is the ending step itself
        step = unit.ns.fresh("step")
        unit.layers[step] = {"class": "eval", "from": ":i", "eval": "source(0) + 1" if n.include_eos else "source(0)"}
        at_limit = unit.ns.fresh("at_limit")
        if bound is not None:
            unit.layers[at_limit] = {"class": "compare", "kind": "greater_equal", "from": [step, bound]}
        else:
            unit.layers[at_limit] = {"class": "compare", "kind": "greater_equal", "from": [step], "value": n.max_steps}
        return {"class": "combine", "kind": "logical_or", "from": [cond, at_limit]}

    def _bound(self, n: Loop, unit: _Block, outer: _Block) -> str:
        """The loop's per-sequence step limit in its unit: the ops computing it only for the limit
        are layers of the unit (no top-level layers for it), reading the rest with `base:`."""
        ops = [self.in_units[vid] for vid in n.bound_ops]
        made = {v.id for op in ops for v in op.outs}
        for op in ops:
            for a in op.args:
                if a not in made:
                    unit.refs[a] = _base(outer.refs[a])
            self.op(op, unit, {})
        return unit.refs[n.bound] if ops else _base(outer.refs[n.bound])

    def _crossing(self, outer: _Block, vid: int) -> str:
        """The reference to value `vid` of `outer` that a loop in it reads. An outer unit's state
        is read through a layer of that unit: RETURNN builds an inner unit while it builds the
        outer unit's layers, and an inner `base:prev:h` (a read of the outer state, which the
        inner loop computes) is a dependency loop to it."""
        ref = outer.refs[vid]
        if not ref.startswith("prev:"):
            return ref
        return self._own_layer(outer, vid, f"{self.values[vid].name or 'state'}_prev")

    def _retag(self, blk: _Block, vid: int, old: dict[str, str], new: dict[str, str], src: str | None = None) -> str:
        """A reference to value `vid` of `blk` (read as `src`, by default its reference) with its
        dims under the tags of `new` (a `reinterpret_data` layer when a tag differs: the whole
        axis entering or leaving a loop)."""
        src = src or blk.refs[vid]
        changes = {Code(old[d]): Code(new[d]) for d in self.values[vid].dims if old[d] != new[d]}
        if not changes:
            return src
        key = (vid, tuple(changes.items()))
        if key not in blk.retagged:
            name = blk.ns.fresh(f"{self.values[vid].name or 'x'}_{'_'.join(changes.values())}")
            blk.layers[name] = {"class": "reinterpret_data", "from": src, "set_dim_tags": changes}
            blk.retagged[key] = name
        return blk.retagged[key]

    def _reverse(self, blk: _Block, src: str, axis: str, hint: str) -> str:
        """RETURNN ignores `direction: -1` on subnetwork units: reverse within each length instead."""
        self.helpers[REVERSE_HELPER] = REVERSE_HELPER_SOURCE
        name = blk.ns.fresh(hint)
        blk.layers[name] = {
            "class": "eval",
            "from": src,
            "eval": Code(REVERSE_HELPER),
            "eval_locals": {"axis_dim": Code(blk.dims[axis])},
        }
        return name

    def _gather_last(self, outer: _Block, rec: str, out: Value, axis: str) -> str:
        """Each sequence's last frame of a rec layer's output (`rec_last_output` cannot live in a unit)."""
        name = outer.ns.fresh(out.name or f"{rec}_last")
        length, pos = outer.ns.fresh(f"{name}_len"), outer.ns.fresh(f"{name}_pos")
        outer.layers[length] = {"class": "length", "from": rec, "axis": Code(outer.dims[axis])}
        outer.layers[pos] = {"class": "eval", "from": length, "eval": "source(0) - 1"}
        outer.layers[name] = {"class": "gather", "from": rec, "position": pos, "axis": Code(outer.dims[axis])}
        return name


def _depends_on(n: Loop, vid: int, source: int) -> bool:
    """Whether body value `vid` of loop `n` is computed from body value `source`, within a step or
    through the loop's states (a state whose next value depends on it, read at the next step)."""
    deps, changed = {source}, True
    while changed:
        changed = False
        for nd in n.body:
            outs = nd.outs if isinstance(nd, Op) else nd.results()
            if any(a in deps for a in node_uses(nd)) and any(o.id not in deps for o in outs):
                deps.update(o.id for o in outs)
                changed = True
        for c in n.carries:
            if c.next in deps and c.inner.id not in deps:
                deps.add(c.inner.id)
                changed = True
    return vid in deps


def _fed(g: Graph, plan: SearchPlan) -> list[str]:
    """The inputs a search is given, with a batch dim, in the order they are declared."""
    return [i.name for i in g.inputs if i.name not in plan.targets and "batch" in i.value.dims]


def extern_data(g: Graph, dim_vars: dict[str, str], batch_major: bool = False, target_read: bool = False) -> dict:
    """`extern_data`: an entry per input, keyed by its name, with its dims (as `dim_vars` names them)
    in annotation order, or with `batch_major` in the input's canonical order (batch, dynamic,
    static), which is how RETURNN's PyTorch data pipeline delivers data."""
    plan = search_plan(g)
    extern = {}
    for inp in g.inputs:
        dims = inp.value.dims if batch_major else inp.annotated_dims  # Labels: no class dim
        entry: dict = {"dim_tags": [Code(dim_vars[d]) for d in dims]}
        if inp.value.sparse_dim:
            entry["sparse_dim"] = Code(dim_vars[inp.value.sparse_dim])
            entry["dtype"] = "int32"
        # inputs feed the network (RETURNN would hold back a key named `classes` as a target);
        # a `choice` target is the exception: a search does without it (unless `target_read`: the
        # network is training's, which reads it in the loop)
        entry["available_for_inference"] = plan is None or inp.name not in plan.targets or target_read
        extern[inp.name] = entry
    return extern


REVERSE_HELPER = "reverse_in_length"
REVERSE_HELPER_SOURCE = f'''def {REVERSE_HELPER}(source, axis_dim, **_kwargs):
    """Each sequence reversed within its own length along `axis_dim`, for backward loops
    (RETURNN ignores `direction: -1` on subnetwork units)."""
    import tensorflow as tf

    x = source(0, as_data=True)
    axis = x.get_axis_from_description(axis_dim)
    return tf.compat.v1.reverse_sequence(
        x.placeholder, seq_lengths=x.get_dynamic_size(axis), seq_axis=axis, batch_axis=x.batch_dim_axis
    )
'''


def _needing(layers: dict[str, dict], targets: frozenset[str]) -> list[str]:
    """Top-level layers that read a target (`data:y`), directly or through other layers: a
    search, which has no targets, builds the network without them. A choice names its target
    by data key (`'target': 'y'`), which is not a read. In a rec unit, a plain name is one of
    the unit's layers; `base:` reaches one level out."""
    needing: set[str] = set()

    def reads(v, level: int) -> bool:
        if isinstance(v, dict):
            return any(reads(x, level + (k in ("unit", "subnetwork"))) for k, x in v.items() if k != "target")
        if isinstance(v, (list, tuple)):
            return any(reads(x, level) for x in v)
        if not isinstance(v, str) or isinstance(v, Code):
            return False
        ref, up = v, 0
        while ref.startswith("base:"):
            ref, up = ref[len("base:") :], up + 1
        if ref.startswith("data:"):
            return ref[len("data:") :] in targets
        return up == level and ref.split("/")[0] in needing

    changed = True
    while changed:
        new = {name for name, layer in layers.items() if name not in needing and reads(layer, 0)}
        needing |= new
        changed = bool(new)
    return [name for name in layers if name in needing]


def _output_carry(n: Loop, single: set[int], outer: _Block, unfit: Callable[[Value], bool]) -> LoopCarry | None:
    """The state whose layer is the unit's `output` (`prev:output`). RETURNN computes a unit's
    `output` after the loop when no layer of the unit reads it: a state's layer stays in the loop.
    With a `choice`, only the state the choice gives, if any (RETURNN's search follows the unit's
    output: else the output is a copy of the choice); without, the first state computed by a layer
    of its own; in a loop inside a loop, the state that is the loop's result (its output is all
    the outer unit can read), unless it starts from a layer of the outer unit (RETURNN looks for an
    inner unit's `output`'s initial value before the outer unit has built its layers)."""
    own = [c for c in n.carries if c.next in single and (outer.in_unit or not unfit(c.inner))]
    if outer.in_unit:
        results = [c for c in n.carries if c.out is not None]
        if len(results) != 1 or results[0] not in own or n.stacks or n.lasts:
            return None
        return results[0] if outer.refs[results[0].init].startswith("base:") else None
    chosen = {nd.outs[0].id for nd in n.body if isinstance(nd, Op) and nd.op == "choice"}
    if chosen:  # a search follows the output: the choice's layer, or a copy of it
        return next((c for c in own if c.next in chosen), None)
    return own[0] if own else None


def _loop_names(nodes: list[Node]) -> list[str]:
    """The rec layers' names, chosen by a pass (a fused op's loop too: this target may emit it)."""
    return [n.name for n in nodes if isinstance(n, Loop)] + [
        name for n in nodes if isinstance(n, Op) for name in _loop_names(n.unfused)
    ]


def _body_values(n: Loop) -> list[Value]:
    return [*n.block_args(), *(v for nd in n.body for v in (nd.outs if isinstance(nd, Op) else nd.results()))]


def _base(ref: str) -> str:
    return f"base:{ref}"


def emit_returnn(g: Graph) -> str:
    return ReturnnEmitter(g).render()
