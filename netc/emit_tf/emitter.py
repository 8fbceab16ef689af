"""IR → a RETURNN config (text): dims, `extern_data` and the `network` dict.

A loop becomes a `rec` layer with a subnetwork unit (`loops.RecLowering`): sequences are `rec_unstack` layers,
outer values `base:` references, carried state `prev:` references with `initial_output`,
stacked results `rec/<layer>` (marked `is_output_layer`), last frames `need_last` +
`rec_last_output`. Parameterised layers get an absolute `name_scope` so TF variables are
named by module path (`cell/ff/W`) wherever RETURNN places the layer.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import jinja2

from netc.emit_tf.block import Block, loop_names
from netc.emit_tf.decisions import ReturnnDecisions
from netc.emit_tf.fold import fold
from netc.emit_tf.loops import RecLowering
from netc.emit_tf.lowering import lowered
from netc.errors import CompileError, Span
from netc.ir.loopkinds import starts_growth
from netc.ir.model import Graph, Loop, Node, Op, ParamDef, Value
from netc.ir.search import SearchPlan, search_plan
from netc.naming import Code, Namespace, plain_text, py_literal, py_str
from netc.ops import REGISTRY
from netc.ops.base import Carry

_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)


# RETURNN layer names: `data`, `base` and `prev` start references, `output`/`end` are special
# in a unit; a name must also be a valid TensorFlow root scope (ASCII, starting with a letter)
RESERVED_LAYERS = {"data", "base", "prev", "output", "end"}
_LAYER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_CONFIG_NAMES = {"Dim", "batch_dim", "extern_data", "network", "reverse_in_length", "netc_step_type"}


def config_dims(g: Graph) -> list:
    """The dims of the config: the training graph's, then those only its search graph has (a
    `concat` of a loop's state and an invariant, which the search's own passes split)."""
    dims = list(g.dims)
    if g.search is not None:
        seen = {d.name for d in dims}
        dims += [d for d in g.search.dims if d.name not in seen]
    return dims


def dim_vars(g: Graph) -> dict[str, str]:
    """The config's variable for each dim (`dim_2xhidden`); `batch` is RETURNN's `batch_dim`."""
    ns = Namespace(_CONFIG_NAMES)
    out = {"batch": "batch_dim"}
    for d in config_dims(g):
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

    def __init__(self, em: ReturnnEmitter, blk: Block, op: Op):
        self.em, self.blk, self.op = em, blk, op
        self.in_unit = blk.in_unit
        # (`derived_dim`'s variable, the made dim's): pairs, as TF flattens a layer's options and a
        # dict keyed by dims (their comparisons) then changes while it is iterated
        self.derived: list[tuple[Code, Code]] = []

    def derived_dim(self, name: str) -> Code:
        """A variable of its own for dim `name` the op makes, which its layer derives from the
        input's (`pool`, `conv`, `pad`): the emitter retags the layer's result to `name`'s after it.
        RETURNN matches a derived dim with its base (`derived_matches`): a layer over both (a
        loop's step over `time` plus a value over `ceil(time/2)`, moved out of the loop) would
        take them as one axis."""
        own = self.em.derived_dims
        if name not in own:  # one per dim: the search network makes it again
            own[name] = self.em.dim_ns.fresh(f"{self.blk.dims[name]}_derived")
            self.em.whole_dims.append((own[name], f"{name}:derived"))
        self.derived.append((Code(own[name]), Code(self.blk.dims[name])))
        return Code(own[name])

    def static_dim(self, hint: str, size: int) -> Code:
        key = (hint, size)
        if key not in self.em.op_dims:  # one per dim: the search network makes it again
            self.em.op_dims[key] = self.em.dim_ns.fresh(hint)
        return Code(self.em.op_dims[key])

    def size(self, name: str) -> int:
        size = self.em.g.dim(name).size
        assert size is not None, name
        return size

    def src(self, i: int) -> str:
        return self.blk.refs[self.op.args[i]]

    def in_dims(self, i: int) -> tuple[str, ...]:
        return self.em.values[self.op.args[i]].dims

    def dim(self, name: str) -> Code:
        return Code(self.blk.dims[name])

    def is_dynamic(self, name: str) -> bool:
        return self.em.g.dim(name).kind == "dynamic"

    def may_be_empty(self, name: str) -> bool:
        return self.em.g.dim(name).may_be_empty

    def dim_source(self, name: str) -> str | None:
        # in a unit too (an `expand` over a pooled dim in a searched decoder): nothing else there
        # may read the layer that gives the dim its lengths, which RETURNN then never builds
        if name in self.blk.dim_source:  # a chunk dim, in its loop's unit
            return self.blk.dim_source[name]
        src = self.em.dim_source.get(name)
        return "base:" * len(self.blk.path) + src if src else src

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
        # the ops of loops' step limits emitted in their units (`ReturnnDecisions.bound_ops`), by
        # first result
        self.in_units: dict[int, Op] = {}
        self.low = ReturnnDecisions()  # RETURNN's decisions on the network being lowered
        self.dim_vars = dim_vars(g)
        self.dim_ns = Namespace({*_CONFIG_NAMES, *self.dim_vars.values()})
        self.whole_dims: list[tuple[str, str]] = []  # (variable, RETURNN name) of dims made for loops and ops
        self.op_dims: dict[tuple[str, int], str] = {}  # (hint, size) -> variable (`_OpCtx.static_dim`)
        self.derived_dims: dict[str, str] = {}  # a dim an op makes -> its layer's own (`_OpCtx.derived_dim`)
        # provenance for `netc preview`: each block by its path, each op's layer path by its first value id
        self.blocks: dict[tuple[str, ...], Block] = {}
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
        dims = [(self.dim_vars[d.name], py_str(d.name), d.size) for d in config_dims(g) if d.kind != "batch"]
        dims += [(var, py_str(name), None) for var, name in self.whole_dims]
        dims += [(var, py_str(var), size) for (_, size), var in self.op_dims.items()]
        chain = max(_chain(layers), _chain(search_layers or {}))
        return _TEMPLATES.get_template("config.py.j2").render(
            recursion_limit=1000 + FRAMES_PER_LAYER * chain if chain > DEEP_CHAIN else None,
            chain=chain,
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
            target=py_str(sorted(plan.targets)[0]) if plan is not None else None,
            default_input=py_str(fed[0]) if plan is not None and (fed := _fed(g, plan)) else None,
        )

    def network(self, g: Graph, plan: SearchPlan | None) -> dict[str, dict]:
        """The layers of one network; with `plan`, the network searches (outputs `decide`)."""
        self.dim_source, self.zeros, self.grown = {}, set(), set()  # value ids are the graph's own
        self.net = g  # the graph emitted now (a search graph has dims of its own)
        self.low = lowered(g)
        limits = {vid for n in g.body if isinstance(n, Loop) for vid in self.low.bound_ops_of(n)}
        self.in_units = {n.outs[0].id: n for n in g.body if isinstance(n, Op) and n.outs[0].id in limits}
        root = self.blocks[()] = Block(
            {*RESERVED_LAYERS, *(o.name for o in [*g.outputs, *g.losses]), *loop_names(g.body)}, self.dim_vars
        )
        for inp in g.inputs:
            root.refs[inp.value.id] = f"data:{inp.name}"
            if tuple(inp.annotated_dims) != inp.value.dims:
                # read in netc's own order, as every layer after it is: RETURNN takes a loop's last
                # frame of a layer it moves out batch-major but labels it with the layer's template
                # (wrong numbers when a dim stood before batch), and a state's template from the
                # order of its operands' dims, which must match its previous value's
                name = root.ns.fresh(f"{inp.name}_batch_major")
                perm = [Code(root.dims[d]) for d in inp.value.dims]
                root.layers[name] = {"class": "transpose", "from": f"data:{inp.name}", "perm": perm}
                root.refs[inp.value.id] = name
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
        for vid, path in self.op_layers.items():  # provenance follows a layer's work
            if len(path) == 1 and path[0] in moved:
                into = moved[path[0]]
                self.op_layers[vid] = (into,) if into is not None else ()
        return root.layers

    # --- blocks ------------------------------------------------------------------------

    def block(self, nodes: list[Node], blk: Block, reserved: dict[int, str] | None = None) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                RecLowering(self, n, blk, reserved or {}).lower()
            elif blk.in_unit or n.outs[0].id not in self.in_units:
                self.op(n, blk, reserved or {})

    def op(self, op: Op, blk: Block, reserved: dict[int, str]) -> None:
        """One layer; its name was reserved up front when a carry needs it, else from the variable."""
        opdef = REGISTRY[op.op]
        ctx = _OpCtx(self, blk, op)
        layer = opdef.returnn(ctx, op)
        if layer is not None and _dense_of_labels(op, self.values, layer):
            # arithmetic on labels gives plain ints in netc (`maximum(label, k)`, `label + 1`); RETURNN's
            # `combine`/`eval` keep their first source's class dim unless told (a state of them would
            # then differ from its dense initial value)
            layer["out_type"] = {"sparse": False}
        if starts_growth(op):  # no layer: the `cum_concat` layer growing the state starts it
            self.grown.add(op.outs[0].id)
            self.values[op.outs[0].id] = op.outs[0]
            self.op_layers[op.outs[0].id] = ()
            return
        if layer is None:  # a fused op without a native layer here: what it was fused from
            self.block(op.unfused, blk, reserved)
            loop = next(n for n in op.unfused if isinstance(n, Loop))
            self.op_layers[op.outs[0].id] = (*blk.path, loop.name)
            return
        if op.param in self.param_scope:  # (a module whose parameters are all another's has none)
            layer["name_scope"] = f"/{self.param_scope[op.param]}"
        self.helpers.update(opdef.returnn_helpers(op))
        if op.op == "zeros":
            self.zeros.add(op.outs[0].id)
        name = reserved.get(op.outs[0].id) or blk.ns.fresh(op.hint())
        refs = opdef.returnn_outs(name, op)
        by_extra = 0 in opdef.returnn_extra(ctx, name, dict(layer), op, lambda hint: hint)  # a probe
        if (refs[:1] != [name] or by_extra) and name == reserved.get(op.outs[0].id):
            # the reserved name is for the value, which an extra layer gives (a fused LSTM's last `c`, a
            # softmax over a dim that may be empty, masked after it)
            name = blk.ns.fresh(op.hint())
            refs = opdef.returnn_outs(name, op)
        if ctx.derived:  # the layer's own dims, then the model's made dims (`_OpCtx.derived_dim`)
            if layer["class"] == "subnetwork":  # its output's
                sub = layer["subnetwork"]
                sub["derived"] = sub.pop("output")
                sub["output"] = {"class": "reinterpret_data", "from": "derived", "set_dim_tags": ctx.derived}
            else:
                inner = blk.ns.fresh(f"{name}_derived")
                blk.layers[inner] = layer
                layer = {"class": "reinterpret_data", "from": inner, "set_dim_tags": ctx.derived}
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
            self.note_dims(blk, v, ref)

    def note_dims(self, blk: Block, v: Value, ref: str) -> None:
        """Remember a top-level layer for each dynamic dim first seen here (made by an op or loop)."""
        if not blk.in_unit:
            for d in v.dims:
                if self.net.dim(d).kind == "dynamic":
                    self.dim_source.setdefault(d, ref)
        else:  # a chunk dim gets the step's lengths in its unit (`chunk_frame`)
            for d in v.dims:
                if self.net.dim(d).max_frames is not None:
                    blk.dim_source.setdefault(d, ref)


def _fed(g: Graph, plan: SearchPlan) -> list[str]:
    """The inputs a search is given, with a batch dim, in the order they are declared."""
    return [i.name for i in g.inputs if i.name not in plan.targets and "batch" in i.value.dims]


def _dense_of_labels(op: Op, values: dict, layer: dict) -> bool:
    """Whether `op`'s layer computes plain ints from labels (which RETURNN would keep labels)."""
    out = op.outs[0]
    if len(op.outs) != 1 or out.dtype != "int32" or out.sparse_dim is not None or "out_type" in layer:
        return False
    return layer.get("class") in ("combine", "eval") and any(
        values[a].sparse_dim is not None for a in op.args if a in values
    )


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
        # network is training's, which reads it in the loop; or the search takes no input: the
        # target gives its batch size)
        given = plan is None or inp.name not in plan.targets or not plan.inputs
        entry["available_for_inference"] = given or target_read
        extern[inp.name] = entry
    return extern


def emit_returnn(g: Graph) -> str:
    return ReturnnEmitter(g).render()


# RETURNN constructs a layer's sources (and a rec unit's layers) first, recursively: about 3.5
# Python frames per layer of the longest chain (`_chain`; measured: a chain of 312, 12 residual
# BLSTMs of LayerNormVariantsLSTM steps, needs about 1100). A chain longer than DEEP_CHAIN (some 900
# frames of Python's default 1000) raises Python's recursion limit as the config is loaded.
DEEP_CHAIN, FRAMES_PER_LAYER = 250, 8


def _chain(net: dict) -> int:
    """The longest chain of layers of a net dict through the layers each one names (`from`, `base`,
    ...: any string option that is a layer's name or `<layer>/<sub>`, `prev:` stripped; in a rec unit or subnetwork its
    `base:` names), a rec unit or subnetwork counted with all its layers (at most its chain)."""
    refs: dict[str, set[str]] = {}
    inner: dict[str, int] = {}

    def names(v, outer: bool = False) -> set[str]:
        """The layers of `net` that `v` names (`outer`: in a unit, where they are `base:`'s)."""
        if isinstance(v, str):
            if outer and not v.startswith("base:"):
                return set()
            return {v.split(":", 1)[-1].split("/")[0]} & net.keys()  # `rec/sub`: the rec layer
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list | tuple):
            return set().union(*(names(x, outer) for x in v))
        return set()

    for name, d in net.items():
        if isinstance(d, dict) and "class" in d:
            units = ("unit", "subnetwork")
            own = [names(v) for k, v in d.items() if k not in units]
            refs[name] = set().union(*own, *(names(d[k], True) for k in units if isinstance(d.get(k), dict)))
            refs[name].discard(name)
            inner[name] = sum(_count_layers(d[k]) for k in ("unit", "subnetwork") if isinstance(d.get(k), dict))
    memo: dict[str, int] = {}

    def depth(name: str, seen: frozenset) -> int:
        if name not in memo:
            below = [depth(r, seen | {name}) for r in refs.get(name, ()) if r not in seen]
            memo[name] = 1 + inner.get(name, 0) + max(below, default=0)
        return memo[name]

    return max((depth(n, frozenset()) for n in refs), default=0)


def _count_layers(net: dict) -> int:
    """Layers of a net dict, those of rec units and subnetworks included."""
    n = 0
    for d in net.values():
        if isinstance(d, dict) and "class" in d:
            n += 1 + sum(_count_layers(d[k]) for k in ("unit", "subnetwork") if isinstance(d.get(k), dict))
    return n
