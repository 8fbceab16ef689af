"""RETURNN layers to netc statements: one statement per layer, named after it.

`Importer.run` walks the layers RETURNN would construct (`output`, layers with a loss, output
layers, and what they read), depth first so that every statement comes after what it reads. A
`rec` layer with a subnetwork becomes a `for` loop over its input's time dim: `prev:x` reads
the state `x` (its value before the loop is the layer's `initial_output`), `base:x` the outer
value, `data:source` the frame, and the unit's `output` is stacked into a list named after the
rec layer. Layers of other classes are collected as refusals."""

from __future__ import annotations

import re

import libcst as cst

from netc.importer import (
    arith,
    attention,
    axes,
    convnorm,
    last_state,
    legacy,
    logic,
    masked,
    passthrough,
    recunits,
    sharing,
    transformer,
    windows,
)
from netc.importer.defaults import at_default, rejected_by_returnn, unsupported_class
from netc.importer.dims import BATCH, DimTable
from netc.importer.load import LoadedConfig
from netc.importer.losses import SEARCH_LOSSES, LossLayers, reads_search
from netc.importer.states import States
from netc.importer.syntax import Expr, binop, call, identifier, literal, name, num
from netc.importer.values import (
    CLASS_ALIASES,
    DIM,
    Refused,
    Scope,
    Val,
    feature,
    python_object,
    registered_layer,
    sources,
    step_read_refused,
    tf_scope,
    value_sources,
)
from netc.importer.writer import Assign, ModuleRef

_NOT_OPTIONS = "its entry is {}, not a dict of options (RETURNN rejects it too)"


class Importer(
    arith.ArithLayers,
    LossLayers,
    recunits.RecUnits,
    States,
    convnorm.ConvNormLayers,
    logic.LogicLayers,
    transformer.TransformerLayers,
    masked.MaskedLayers,
    last_state.LastStateLayers,
    sharing.SharingLayers,
    windows.WindowLayers,
    axes.AxesLayers,
    passthrough.PassthroughLayers,
):
    def __init__(self, loaded: LoadedConfig):
        self.cfg = loaded
        self.dims = DimTable(loaded.dims)
        self.imports: set[str] = {"Dim", "Tensor", "batch", "network"}
        import netc

        # every variable name; netc's functions and the builtins a model calls are never shadowed
        # (`tanh = tanh(x)` would make `tanh` local to the whole function)
        self.used: set[str] = set(netc.__all__) | {"zip", "abs", "range", "reversed", "len", "print"}
        self.inputs: dict[str, Val] = {}
        self.input_order: list[str] = []
        self.outputs: dict[str, str] = {}  # original layer -> output name
        self.loss_outputs = False  # the layers with a loss are the outputs (no other: `_walk`)
        self.loss_names: dict[str, str] = {}  # original layer -> loss name
        self.out_vals: dict[str, Val] = {}
        self.refused: list[Refused] = []
        self.warnings: list[Refused] = []  # imported, but RETURNN may compute other numbers
        self.notes: list[str] = []  # options and layers left out that change nothing in the forward numbers
        self.dropped: dict[str, list[str]] = {}  # a training-only option -> the layers it was dropped from
        self.option_notes: dict[str, list[str]] = {}  # recunits.OPTION_NOTES key -> the layers it is about
        self.old_notes: dict[str, list[str]] = {}  # a note on an older RETURNN's option -> its layers
        self.whole_floats: set[str] = set()  # variables of floats of labels (`tf.to_float` of an argmax)
        # RETURNN's tags a conv/pool makes, by their names (`<layer>:conv:s1`, for `stag:`) -> the netc dim
        self.layer_tags: dict[str, str] = {}
        for key, spec in loaded.inputs.items():
            for tag in (*spec.dims, spec.sparse_dim):
                if tag is not None:
                    self.dims.prefer(tag, key)
        self.loops: dict[str, Scope] = {}  # rec layer -> its unit's scope
        self.searched: str | None = None  # the rec layer of the decoder with `choice` (a network searches one)
        self.step_counters: dict[str, str] = {}  # rec layer -> the variable of its step `:i`
        self.sub_stacks: dict[str, Val] = {}  # "<rec>/<sub>" -> the list the loop stacks `sub` into
        self.sub_layers: dict[str, Val] = {}  # "<layer>/<i>" -> a part of a `split` layer
        self.last_states: dict[str, tuple[str, str, str]] = {}  # LSTM layer -> its h, c after its loop, dim
        self.top = Scope(loaded.network, {}, [], "")
        self.top.names = self._allocate(list(loaded.network), reserved=set(loaded.inputs))
        self.used |= set(self.top.names.values()) | {identifier(k) for k in loaded.inputs}

    # -- names

    def _allocate(self, layers: list[str], reserved: set[str], prefix: str = "") -> dict[str, str]:
        out = {}
        taken = self.used | {identifier(r) for r in reserved} | {"batch", "network"}
        for layer in layers:
            base = identifier(layer)
            if base in taken and prefix:
                base = identifier(f"{prefix}_{layer}")
            var, i = base, 2
            while var in taken:
                var, i = f"{base}_{i}", i + 1
            taken.add(var)
            out[layer] = var
        return out

    def fresh(self, base: str) -> str:
        var, i = base, 2
        while var in self.used:
            var, i = f"{base}_{i}", i + 1
        self.used.add(var)
        return var

    def dim(self, key: str) -> Expr:
        return name(DIM + key) if key != BATCH else name("batch")

    # -- the walk

    def run(self) -> None:
        self._walk()
        self._not_options()
        for opt, layers in sorted(self.dropped.items()):
            self.notes.append(
                f"`{opt}` dropped on {_shown(layers)}: {TRAINING_ONLY[opt]} (the forward numbers are the same)"
            )
        for note, layers in sorted(self.old_notes.items()):
            self.notes.append(note.format(_shown(layers)))
        for opt, layers in sorted(self.option_notes.items()):
            self.notes.append(
                f"`{opt}` {recunits.OPTION_NOTES[opt][0]} {_shown(layers)}: {recunits.OPTION_NOTES[opt][1]}"
            )

    def _not_options(self) -> None:
        """RETURNN reads every entry's options (`is_output_layer`, a loss), not those of "#" keys
        (its meta options, `#copy_param_mode`): an entry that is not a dict is refused."""
        for n, d in self.cfg.network.items():
            if not isinstance(d, dict) and not n.startswith("#") and all(r.layer != n for r in self.refused):
                self.refused.append(Refused(n, "?", _NOT_OPTIONS.format(type(d).__name__)))

    def _walk(self) -> None:
        net = self.cfg.network
        net = {n: d for n, d in net.items() if isinstance(d, dict)}  # the others: `_not_options`
        roots = [n for n, d in net.items() if n == "output" or _is_root(d)]
        for n in list(roots):  # built by RETURNN only when it evaluates or searches: not in training
            d = net[n]
            if isinstance(d, dict) and (when := [k for k in ("only_on_eval", "only_on_search") if d.get(k)]):
                roots.remove(n)
                self.notes.append(
                    f"layer `{n}` ({d.get('class')}, `{when[0]}`) left out: RETURNN builds it only when it "
                    f"{'evaluates' if when[0] == 'only_on_eval' else 'searches'} (an error measure, a decoding)"
                )
        for n in list(roots):  # built for a loss of a search in training only: left out with it
            d = net[n]
            if d.get("loss") in SEARCH_LOSSES and n != "output" and not d.get("is_output_layer"):
                roots.remove(n)
                self.notes.append(
                    f"layer `{n}` ({d.get('class')}) and its loss {d['loss']!r} left out: "
                    f"{SEARCH_LOSSES[d['loss']]}, which netc cannot train; the layer is built only for it"
                )
        for n in list(roots):  # a loss of the hypotheses of a search RETURNN runs in training (MMI's denominator)
            d = net[n]
            if d.get("loss") and n != "output" and not d.get("is_output_layer") and (via := reads_search(net, n)):
                roots.remove(n)
                self.notes.append(
                    f"layer `{n}` ({d.get('class')}) and its loss {d['loss']!r} left out: it reads `{via}`, the "
                    "hypotheses of a search RETURNN runs in training (a sequence-discriminative loss), which netc "
                    "cannot train; the layer is built only for it"
                )
        # RETURNN's output layers (`LayerBase.is_output_layer`): `output`, `is_output_layer`, and the
        # layers with a loss; netc returns the first two, and the third where there is neither
        self.loss_outputs = not any(n == "output" or net[n].get("is_output_layer") for n in roots)
        if self.loss_outputs and roots:
            self.notes.append(
                f"the network has no `output` layer and no `is_output_layer`: its outputs are its layers with a "
                f"loss ({_shown(sorted(roots))}), RETURNN's output layers then"
            )
        for layer in roots:
            try:
                val = self.get(layer, self.top)
            except Refused as r:
                if all(r is not known for known in self.refused):
                    self.refused.append(r)
                continue
            if self.is_output(layer, net[layer]):
                out = self.top.names[layer]
                self.outputs[layer] = out
                self.out_vals[out] = val

    def is_output(self, layer: str, d: dict, top: bool = True) -> bool:
        """Whether the layer is one of the model's outputs (`_walk`; in a rec unit: its `output`)."""
        if not isinstance(d, dict):  # refused where it is read (`_walk`, `_layer`)
            return False
        loss_output = top and self.loss_outputs and bool(d.get("loss"))
        return layer == "output" or bool(d.get("is_output_layer")) or loss_output

    def _step_counter(self, scope: Scope) -> Val:
        """RETURNN's `:i`, the loop's step (0 first): a state counted from `zeros(batch)` before the
        loop, one more after each step (`count_steps` adds that statement last)."""
        from netc.importer.masked import loop_scope

        unit = loop_scope(scope)
        if unit.rec not in self.step_counters:
            var = self.fresh(f"{identifier(unit.rec)}_i")
            self.step_counters[unit.rec] = var
            self.imports.add("zeros")
            unit.outer.stmts.append(Assign([var], call("zeros", name("batch")), comment="`:i`: the step, counted"))
        return Val(name(self.step_counters[unit.rec]), (BATCH,))

    def _step_frame(self, key: str, scope: Scope) -> Val:
        """`data:<key>` in a decoder's unit, `key` a choice's target: its frame at this step,
        `labels[i]` by the loop's step (training's only: an `eval` reading it computes without
        it in a search, `_l_eval`). Positions are numbers there, as an `eval` takes a choice's."""
        labels = self._input(key)
        if scope.step_var is None:
            scope.step_var = self.fresh("i")
        dyn = [x for x in labels.dims if self.dims.is_dynamic(x)]
        frame = cst.Subscript(labels.tensor(), [cst.SubscriptElement(cst.Index(name(scope.step_var)))])
        dims = tuple(x for x in labels.dims if x not in dyn[:1])
        keep = labels.sparse if labels.sparse is not None and not self.dims.is_dynamic(labels.sparse) else None
        return Val(frame, dims, keep, training=True)

    def count_steps(self, layer: str, body: list) -> list:
        """The loop's body with its step counter (`:i`, where read) one more at its end."""
        if layer not in self.step_counters:
            return body
        var = self.step_counters[layer]
        return [*body, Assign([var], binop("+", name(var), num(1.0)))]

    def get(self, ref: str, scope: Scope) -> Val:
        """The value `ref` (a `from` entry) names in `scope`."""
        if not isinstance(ref, str):
            raise Refused(str(scope.rec or "network"), "?", f"a source {ref!r} that is not a layer name")
        if scope.lattice and (ref.startswith("prev:") or ref == ":i"):
            raise Refused(
                scope.path or "?",
                "rec",
                f"`{ref}` read on the (frame, label) lattice RETURNN trains the unit on (a value of the loop's "
                "steps, which its loop optimisation leaves in the loop: netc computes the lattice outside any loop)",
            )
        if scope.sub and (ref == "data" or ref.startswith(("base:", "prev:", "data:"))):
            if ref == "data" and scope.frame is not None:
                return scope.frame
            if ref.startswith("base:"):
                return self.get(ref[5:], scope.outer)
            raise Refused(scope.path or "?", "subnetwork", f"`{ref}` inside it not supported")
        if scope.rec is not None:
            if ref in ("data", "data:source"):
                if scope.frame is None:  # RETURNN has no `data:source` there either
                    raise Refused(scope.rec, "rec", f"`{ref}` read in the unit of a rec layer without `from`")
                return scope.frame
            if ref.startswith("base:"):
                return self.get(ref[5:], scope.outer)
            if ref.startswith("prev:"):
                return self._prev(ref[5:], scope)
            if ref == ":i":
                return self._step_counter(scope)
            if ref.startswith("data:") and ref[5:] in scope.step_targets:
                return self._step_frame(ref[5:], scope)
        elif ref == "data" or ref.startswith("data:"):
            return self._input(ref[5:] if ref.startswith("data:") else "data")
        if "/" in ref and ref not in scope.layers:  # `rec/sub`: a unit layer stacked by the loop
            rec, sub = ref.split("/", 1)
            if isinstance(scope.layers.get(rec), dict) and isinstance(scope.layers[rec].get("unit"), dict):
                val = self.get(rec, scope)
                if sub == "output":
                    return val
                if ref in self.sub_stacks:
                    return self.sub_stacks[ref]
            elif rec in scope.layers:  # a sub-layer of another layer (`split/0`): that layer first
                self.get(rec, scope)
                if self._full(ref, scope) in self.sub_layers:
                    return self.sub_layers[self._full(ref, scope)]
                cls = scope.layers[rec].get("class", "?") if isinstance(scope.layers[rec], dict) else "?"
                raise Refused(ref, str(cls), f"sub-layer `{sub}` of `{rec}` not supported")
        if ref not in scope.layers and scope.outer is None and (plain := self._extra_as_main(ref)) is not None:
            return self.get(plain, scope)
        if ref not in scope.layers:
            where = f"in the unit of `{scope.rec}`" if scope.rec else "in the network"
            raise Refused(ref, "?", f"no layer `{ref}` {where}")
        if ref in scope.vals:
            return scope.vals[ref]
        if ref in scope.failed:  # refused once, reported once
            raise scope.failed[ref]
        if ref in scope.busy:
            raise Refused(self._full(ref, scope), scope.layers[ref].get("class", "?"), "it reads itself (a cycle)")
        d = scope.layers[ref]
        if isinstance(d, dict) and d.get("class") != "eval":  # (an `eval`'s: `_l_eval`)
            frames = [
                s for s in sources(d) if isinstance(s, str) and s.startswith("data:") and s[5:] in scope.step_targets
            ]
            if frames:
                raise Refused(self._full(ref, scope), str(d.get("class", "?")), step_read_refused(f"`{frames[0]}`"))
        scope.busy.add(ref)
        try:
            val = self._layer(ref, scope.layers[ref], scope)
        except Refused as r:
            scope.failed[ref] = r
            raise
        finally:
            scope.busy.discard(ref)
        scope.vals[ref] = val
        return val

    def _extra_as_main(self, ref: str) -> str | None:
        """`extra.<net>:x` with no entry of that name: RETURNN builds the main network's `x` in that
        extra network (`extra.search:`: with the search flag). Its value is the main one's where
        nothing it reads searches (no `rec` with a `choice`, no other extra network's layer: the
        latent attention configs' `extra.search:t_search_or_fallback`, a copy of an input); None
        otherwise (then refused as a layer not in the network)."""
        m = re.fullmatch(r"extra\.[\w-]+:(.+)", ref)
        net = self.cfg.network
        if m is None or m.group(1) not in net:
            return None
        todo, seen = [m.group(1)], set()
        while todo:
            name_ = todo.pop()
            if name_ in seen:
                continue
            seen.add(name_)
            ld = net.get(name_)
            if name_.startswith("extra.") or not isinstance(ld, dict):
                return None
            unit = ld.get("unit")
            if isinstance(unit, dict) and any(
                isinstance(u, dict) and u.get("class") == "choice" for u in unit.values()
            ):
                return None
            for src in value_sources(ld):
                if not isinstance(src, str):
                    continue
                src = src.removeprefix("base:")
                if src.startswith("data:"):  # a layer registered as an input: that layer
                    src = registered_layer(net, src[5:]) or ""
                if src and src != "data":
                    todo.append(src)
        return m.group(1)

    def _full(self, layer: str, scope: Scope) -> str:
        if scope.sub:
            return f"{scope.path}/{layer}" if scope.path else layer
        return f"{scope.rec}/{layer}" if scope.rec else layer

    def _input(self, key: str) -> Val:
        if key in self.inputs:
            return self.inputs[key]
        # a layer's output RETURNN adds to the inputs (`register_as_extern_data`): that layer's value,
        # also where `extern_data` declares the key (RETURNN builds those layers first, replacing it);
        # the layer itself (reading the key on its way) reads the declared input
        for layer, ld in self.cfg.network.items():
            if isinstance(ld, dict) and ld.get("register_as_extern_data") == key and layer not in self.top.busy:
                return self.get(layer, self.top)
        spec = self.cfg.inputs.get(key)
        if spec is None:
            raise Refused(f"data:{key}", "extern_data", f"the config has no input `{key}` in `extern_data`")
        for t in (*spec.dims, spec.sparse_dim):
            tag = self.dims.tags.get(t) if t is not None else None
            static = tag is not None and (tag.kind == "static" or t == spec.sparse_dim)  # classes: a static dim
            if static and (tag.size or 0) < 1:
                raise Refused(
                    f"data:{key}",
                    "extern_data",
                    f"its dim `{tag.name}` has size {tag.size} (a size the config reads from its command line, "
                    "`config.value(...)`, not given? give it with --set)",
                )
        dims = tuple(self.dims.tag(t, key) for t in spec.dims)
        sparse = self.dims.tag(spec.sparse_dim, key) if spec.sparse_dim is not None else None
        val = Val(name(identifier(key)), dims, sparse)
        self.inputs[key] = val
        self.input_order.append(key)
        return val

    # -- layers

    def _layer(self, layer: str, d: dict, scope: Scope) -> Val:
        if not isinstance(d, dict):
            raise Refused(self._full(layer, scope), "?", _NOT_OPTIONS.format(type(d).__name__))
        cls = d.get("class")
        if cls in CLASS_ALIASES:  # RETURNN's other names of a layer class
            d["class"] = cls = CLASS_ALIASES[cls]
        full = self._full(layer, scope)
        var = scope.names[layer]
        handler = getattr(self, f"_l_{cls}", None)
        if cls in _NOT_NETC:
            raise Refused(full, cls, _NOT_NETC[cls])
        if handler is None:
            raise Refused(full, str(cls), unsupported_class(cls))
        bad = [s for s in sources(d) if not isinstance(s, str)]
        if bad and cls != "concat":
            raise Refused(full, str(cls), f"a source {bad[0]!r} that is not a layer name")
        if (why := legacy.take_old(cls, d, full, self.old_notes)) is not None:  # an older RETURNN's options
            raise Refused(full, cls, why)
        for k, v in d.items():  # a handler reads data only
            if k not in _ANY_VALUE and k not in TRAINING_ONLY and (obj := python_object(v)) is not None:
                raise Refused(full, str(cls), f"option {k} is a Python object, not data: {obj}")
        norm = d.get("batch_norm") if cls != "batch_norm" else None  # any layer's: its output batch-normed
        if norm is not None and norm is not False:
            if not (norm is True or isinstance(norm, dict)) or d.get("loss") or cls in ("softmax", "rec"):
                raise Refused(full, str(cls), f"batch_norm {norm!r} (True or options, on a layer without a loss)")
            d = {k: v for k, v in d.items() if k != "batch_norm"}
        extra = {k for k in set(d) - _KNOWN.get(cls, set()) - _COMMON if not at_default(cls, k, d[k])}
        for opt in sorted(extra & set(TRAINING_ONLY)):  # never in the forward numbers
            self.dropped.setdefault(opt, []).append(full)
        extra -= set(TRAINING_ONLY)
        if rejected := sorted(k for k in extra if rejected_by_returnn(cls, k)):
            raise Refused(
                full,
                cls,
                f"option {rejected[0]} is not an option of RETURNN's `{cls}` layer (RETURNN rejects the layer too;"
                " an option of its old Theano backend?)",
            )
        if extra:
            raise Refused(full, cls, f"option{'s' if len(extra) > 1 else ''} {', '.join(sorted(extra))} not supported")
        if d.get("loss") in ("ce", "ctc", "mse") and "target" not in d:  # RETURNN's default target
            d["target"] = self.cfg.default_target
        self._pre_activation: list = []  # (variable, value): what an activation reads twice, bound first
        if norm is not None and norm is not False:  # RETURNN's `batch_norm` after the layer's activation
            val = handler(layer, d, scope, self.fresh(f"{var}_before_norm"), full)
            opts = {**(norm if isinstance(norm, dict) else {}), "class": "batch_norm"}
            if "name_scope" in d:  # its variables under the layer's, `<layer>/batch_norm/...`
                opts["name_scope"] = d["name_scope"]
            return self._l_batch_norm(layer, opts, scope, var, full, src=val)
        val = handler(layer, d, scope, var, full)
        if "loss" in d and d["loss"] is not None:
            self._loss(layer, d, scope, val, full)
        return val

    def _emit(self, scope: Scope, var: str, value: Expr, layer: str, module: ModuleRef | None = None) -> None:
        comment = f"layer {layer!r}" if layer != var else None
        if scope.sub and scope.path:  # inlined from a subnetwork: its full name
            comment = f"layer {scope.path + '/' + layer!r}"
        for pre, before in getattr(self, "_pre_activation", []):  # what an activation reads twice, bound first
            note = f"layer {layer!r} before its activation"
            scope.stmts.append(Assign([pre], before, comment=note, module=module))
            module = None
        self._pre_activation = []
        scope.stmts.append(Assign([var], value, comment=comment, module=module))

    def _source(self, d: dict, scope: Scope, full: str) -> Val:
        """The layer's input: its `from` concatenated on the feature dim, `dropout` applied."""
        vals = [self.get(s, scope) for s in sources(d)]
        if not vals:
            raise Refused(full, d.get("class", "?"), "it has no input (`from: []`)")
        val = vals[0] if len(vals) == 1 else self._concat(vals, full, d, broadcast=scope.lattice)
        if d.get("dropout"):
            self.imports.add("dropout")
            val = Val(call("dropout", val.expr, num(float(d["dropout"]))), val.dims, val.sparse)
        return val

    def _concat(self, vals: list[Val], full: str, d: dict, broadcast: bool = False) -> Val:
        if any(v.sparse for v in vals):  # RETURNN's concat_sources: "sparse concat not supported"
            raise Refused(full, d.get("class", "?"), "labels (sparse) among several inputs (RETURNN rejects it too)")
        feats = [feature(v, self.dims) for v in vals]
        rest = [tuple(x for x in v.dims if x != f) for v, f in zip(vals, feats)]
        if broadcast and any(r != rest[0] for r in rest):
            # on a transducer's lattice (lattice.py): each source over the others' frames too, as
            # RETURNN broadcasts them to the layer's `out_type` (the encoder's frames by the labels')
            union: list[str] = []
            for r in rest:
                union += [x for x in r if x not in union]
            self.imports.add("expand")
            for i, (v, r) in enumerate(zip(vals, rest)):
                expr = v.tensor()
                for x in union:
                    if x not in r:
                        expr = call("expand", expr, self.dim(x))
                vals[i] = Val(expr, (*r, *(x for x in union if x not in r), feats[i]))
            rest = [tuple(union)] * len(vals)
        if any(r != rest[0] for r in rest):
            raise Refused(full, d.get("class", "?"), "its inputs differ in dims other than the feature dim")
        self.imports.add("concat")
        out = self.dims.derived(feats)
        return Val(call("concat", *[v.expr for v in vals]), (*rest[0], out))

    def _tf_prefix(self, layer: str, d: dict, scope: Scope, own: str = "") -> str:
        """Where RETURNN keeps the layer's variables: its `name_scope` ("/a/b" absolute), else its
        name in the scope of the rec units it is in, then `own` (a rec layer's cell: "/rec")."""
        ns = d.get("name_scope")
        if isinstance(ns, str) and ns:
            return ns[1:] if ns.startswith("/") else f"{scope.prefix}{ns}"
        return f"{scope.prefix}{tf_scope(layer)}{own}"

    def _out_dim(self, layer: str, d: dict, full: str) -> str:
        if isinstance(d.get("out_dim"), dict):
            return self.dims.tag(d["out_dim"]["__dim__"])
        if isinstance(d.get("n_out"), int) and not isinstance(d["n_out"], bool):
            if d["n_out"] < 1:
                raise Refused(full, d.get("class", "?"), f"n_out {d['n_out']} (a size the config reads at run time?)")
            return self.dims.static(d["n_out"], identifier(layer))
        raise Refused(full, d.get("class", "?"), "give `n_out` or `out_dim`")

    def _linear_expr(
        self, layer: str, d: dict, scope: Scope, full: str, out: str, src: Val
    ) -> tuple[Expr, tuple, ModuleRef]:
        transposed = frozenset({"W"}) if d.get("use_transposed_weights") else frozenset()  # W [out, in] in TF
        owner = self._tied_to(d, full)  # `reuse_params: {"map": {"W": ...}}`: another layer's W
        if owner is not None:
            return self._tied_linear(layer, d, scope, full, out, src, owner)
        if self._tie_owner(layer, scope):  # a layer whose W others read: its module constructed first
            return self._owner_linear(layer, d, scope, full, out, src, transposed)
        if d.get("reuse_params") is not None or self._reused(layer, scope):
            if transposed:
                raise Refused(full, d.get("class", "?"), "use_transposed_weights with reuse_params not supported")
            return self._shared_linear(layer, d, scope, full, out, src)
        with_bias = d.get("with_bias", True)
        ref = ModuleRef("linear", self._tf_prefix(layer, d, scope), transposed=transposed)
        if src.sparse is not None:  # a lookup: the rows of W for the labels
            if with_bias:
                self.imports |= {"Linear", "one_hot"}
                expr = call(call("Linear", self.dim(out)), call("one_hot", src.expr))
            else:
                self.imports.add("Embedding")
                expr = call(call("Embedding", self.dim(out)), src.expr)
                ref = ModuleRef("embedding", ref.tf_prefix, transposed=transposed)
            return expr, (*src.dims, out), ref
        self.imports.add("Linear")
        args = {} if with_bias else {"with_bias": literal(False)}
        feat = feature(src, self.dims)
        return (
            call(call("Linear", self.dim(out), **args), src.tensor()),
            (*(x for x in src.dims if x != feat), out),
            ref,
        )

    def _l_linear(self, layer, d, scope, var, full) -> Val:
        src = self._source(d, scope, full)  # first: dims are named in the order they are met
        if "n_out" not in d and "out_dim" not in d and d.get("target") and d.get("loss") != "ctc":
            out = self._target(d, full).sparse  # RETURNN: the target's classes (a loss's default target)
            if out is None:
                raise Refused(full, "linear", "give `n_out` or `out_dim` (its target is not labels)")
        else:
            out = self._out_dim(layer, d, full)
        src, at = self._kept_squeezed(src)  # [B, 1, F] of a `reduce` with `keep_dims`: over F
        expr, dims, ref = self._linear_expr(layer, d, scope, full, out, src)
        expr, dims = self._kept_back(expr, dims, at)
        val = self._activation(Val(expr, dims), d.get("activation"), full, "linear")
        self._emit(scope, var, val.expr, layer, ref)
        return Val(name(var), dims)

    def _l_copy(self, layer, d, scope, var, full) -> Val:
        val = self._source(d, scope, full)
        self._emit(scope, var, val.expr, layer)
        is_list = val.is_list and isinstance(val.expr, cst.Name)
        return Val(name(var), val.dims, val.sparse, is_list, log_probs=val.log_probs and len(sources(d)) == 1)

    def _l_dropout(self, layer, d, scope, var, full) -> Val:
        d = {**d, "dropout": d.get("dropout", 0.0)}
        return self._l_copy(layer, d, scope, var, full)

    def _l_concat(self, layer, d, scope, var, full) -> Val:
        vals = []
        for item in d.get("from", []):
            ok = isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
            val = self.get(item[0], scope) if ok else None
            if not ok or self._axis(val, item[1]) is None or self._axis(val, item[1]) != feature(val, self.dims):
                raise Refused(full, "concat", "only `(layer, 'F')` sources (each one's feature dim) are supported")
            vals.append(val)
        val = self._concat(vals, full, d)
        self._emit(scope, var, val.expr, layer)
        return Val(name(var), val.dims)

    def _axis(self, val: Val, ax) -> str | None:
        """An axis description (a dim tag, `T`, `F`, `s:i`/`spatial:i`, `stag:<name>`) as a dim of `val`."""
        if isinstance(ax, dict):
            return self.dims.tag(ax["__dim__"])
        text = str(ax)
        if text.upper() in ("T", "TIME"):
            return next((x for x in val.dims if self.dims.is_dynamic(x)), None)
        if text.upper() in ("F", "FEATURE"):  # RETURNN's feature axis: the last (static) one
            static = [x for x in val.dims if self.dims.is_static(x)]
            return static[-1] if len(static) > 1 and val.sparse is None else feature(val, self.dims)
        if m := re.fullmatch(r"static:(-?\d+)", text, re.IGNORECASE):
            static = [x for x in val.dims if self.dims.is_static(x)]
            i = int(m.group(1))
            return static[i] if -len(static) <= i < len(static) else None
        if m := re.fullmatch(r"(?:s|spatial):(-?\d+)", text, re.IGNORECASE):
            # RETURNN's spatial axes: all but batch and the feature axis (the last static dim)
            static = [x for x in val.dims if self.dims.is_static(x)]
            last = static[-1] if static and val.sparse is None else None
            spatial = [x for x in val.dims if x != BATCH and x != last]
            i = int(m.group(1))
            return spatial[i] if -len(spatial) <= i < len(spatial) else None
        if m := re.fullmatch(r"dim:(\d+)", text, re.IGNORECASE):  # RETURNN's: the one axis of that size
            of_size = [x for x in val.dims if self.dims.is_static(x) and self.dims.size(x) == int(m.group(1))]
            return of_size[0] if len(of_size) == 1 else None
        if text.startswith("stag:"):
            found = {self.dims.find(x) for x in val.dims}
            if text[5:] in self.layer_tags and self.dims.find(self.layer_tags[text[5:]]) in found:
                return next(x for x in val.dims if self.dims.find(x) == self.dims.find(self.layer_tags[text[5:]]))
            for tid, t in self.dims.tags.items():
                if t.name == text[5:] and t.kind != "batch" and self.dims.find(self.dims.tag(tid)) in found:
                    return next(x for x in val.dims if self.dims.find(x) == self.dims.find(self.dims.tag(tid)))
            # RETURNN matches a part of the tag's description (`stag:lstm`: the time dim the encoder's
            # `lstm0_pool` made), which must be unique among the value's dims
            part = text[5:].lower()
            named = {self.dims.find(d) for n, d in self.layer_tags.items() if part in n.lower()}
            named |= {self.dims.find(self.dims.tag(tid)) for tid, t in self.dims.tags.items() if part in t.name.lower()}
            hits = [x for x in val.dims if self.dims.find(x) in named and x != BATCH]
            if len(hits) == 1:
                return hits[0]
        return None

    def _l_choice(self, layer, d, scope, var, full) -> Val:
        from netc.importer.decoders import choice

        return choice(self, layer, d, scope, var, full)

    def _l_split_dims(self, layer, d, scope, var, full) -> Val:
        return attention.split_dims(self, layer, d, scope, var, full)

    def _l_merge_dims(self, layer, d, scope, var, full) -> Val:
        return attention.merge_dims(self, layer, d, scope, var, full)

    def _l_softmax_over_spatial(self, layer, d, scope, var, full) -> Val:
        return attention.softmax_over_spatial(self, layer, d, scope, var, full)

    def _l_generic_attention(self, layer, d, scope, var, full) -> Val:
        return attention.generic_attention(self, layer, d, scope, var, full)

    def _l_reduce_out(self, layer, d, scope, var, full) -> Val:
        return attention.reduce_out(self, layer, d, scope, var, full)

    def _l_pool(self, layer, d, scope, var, full) -> Val:
        return attention.pool(self, layer, d, scope, var, full)

    def _l_decide(self, layer, d, scope, var, full) -> Val:
        """The best hypothesis of a beam: the labels themselves in training, and what netc's
        search returns (its best hypothesis) when searching."""
        val = self._source(d, scope, full)
        if val.sparse is None or not val.is_list:
            raise Refused(full, "decide", "`decide` of a decoder's labels (a rec layer with `choice`) is supported")
        comment = f"layer {layer!r} (decide)"
        if d.get("loss") == "edit_distance":
            comment += ": its `edit_distance` loss measures errors only, nothing is trained on it"
        scope.stmts.append(Assign([var], val.expr, comment=comment))
        return Val(name(var), val.dims, val.sparse, True)

    def _l_rec_last_output(self, layer, d, scope, var, full) -> Val:
        """A unit layer's value at each sequence's last step: its variable after the loop."""
        rec, sub = d.get("rec_layer"), d.get("sub_layer_name", "output")
        self.get(rec, scope)
        inner = self.loops.get(rec)
        if inner is None or sub not in inner.vals:
            raise Refused(full, "rec_last_output", f"`{rec}` is not a rec unit that computes `{sub}`")
        self._emit(scope, var, name(inner.names[sub]), layer)
        return Val(name(var), inner.vals[sub].dims)


_COMMON = {
    "class",
    "from",
    "is_output_layer",
    "trainable",
    "name_scope",
    "initial_output",
    "need_last",
    "out_type",
    # where RETURNN puts or imports the parameters, what it prints: nothing the layer computes
    "param_device",
    "collocate_with",
    "custom_param_importer",
    "debug_print_layer_output",
    "register_as_extern_data",  # its output also an input (`_input`)
}
# options RETURNN applies in training only (regularisers, noise, the optimizer's options): dropped
# from the model with a note naming each and what it changes in training
TRAINING_ONLY = {
    "L2": "an L2 penalty on the layer's parameters, added to the training loss",
    "darc1": "the DARC1 penalty on the layer's output, added to the training loss",
    "spatial_smoothing": "a smoothness penalty on the layer's parameters, added to the training loss",
    "param_variational_noise": "Gaussian noise on the layer's parameters in training",
    "param_dropout": "dropout on the layer's parameters in training",
    "updater_opts": "the optimizer's options for the layer's parameters",
    "grad_filter": "a filter on the layer's gradient",
    "dropout_noise_shape": "the dropout mask shared over some axes (netc's dropout draws each value's own)",
    "gradient_clip": "a clip of the layer's gradient",
    "back_prop": "whether the gradient flows back through the rec layer",
    "loss_scale": "the weight of the layer's loss in the training objective, not the loss's value",
    # (not training's only, and no number either: TensorFlow assertions, the latent attention configs'
    # checks of the chosen positions)
    "control_dependencies_on_output": "checks (TensorFlow assertions) run on the layer's output",
    **{f"unit_opts.{k}": v for k, v in recunits.UNIT_TRAINING_ONLY.items()},
}
# options whose value the importer never reads (RETURNN's placement and printing, the output's type),
# or whose handler says what it takes (`eval`: a string), or layers checked as layers themselves
_ANY_VALUE = {"out_type", "param_device", "collocate_with", "custom_param_importer", "debug_print_layer_output"}
_ANY_VALUE |= {"eval", "unit", "subnetwork"}
_LOSS = {"loss", "target", "loss_opts", "loss_scale", "loss_only_on_non_search"}  # the last: not when searching
_COMMON |= _LOSS  # which losses on which layers: `_loss`
# how RETURNN initialises a layer's parameters: nothing the layer computes (the imported model's
# parameters come from `--checkpoint`, `--params` or its own initialisation)
_INIT = {"forward_weights_init", "bias_init"}
_KNOWN = {
    "linear": {"n_out", "out_dim", "activation", "with_bias", "dropout", "use_transposed_weights"}
    | _LOSS
    | sharing.SHARED_OPTS
    | _INIT,
    "softmax": {"n_out", "out_dim", "with_bias", "dropout", "use_transposed_weights"}
    | _LOSS
    | sharing.SHARED_OPTS
    | _INIT,
    "activation": {"activation", "dropout", "opts"},
    "copy": {"dropout", "n_out", "out_dim"},
    "dropout": {"dropout"},
    "combine": {"kind", "activation", "n_out", "out_dim", "eval", "eval_locals", "eval_for_output_loss"},
    "concat": {"out_dim"},
    "eval": {"eval", "eval_locals", "activation", "size_target"},
    "reduce": {"mode", "axes", "axis", "keep_dims", "n_out"},
    "dot": {"reduce", "var1", "var2", "red1", "red2", "add_var2_if_empty"},
    "rec_last_output": {"rec_layer", "sub_layer_name"},
    "split_dims": {"axis", "dims"},
    "merge_dims": {"axes", "n_out", "keep_order"},  # n_out: RETURNN checks it is the merged size
    "softmax_over_spatial": {
        "axis",
        "energy_factor",
        "start",
        "window_start",
        "window_size",
        "use_time_mask",
        "log_space",
    },
    "generic_attention": {"weights", "base", "auto_squeeze"},
    "reduce_out": {"mode", "num_pieces"},
    "decide": set(),
    # use_channel_first: where TensorFlow puts the channels in memory (NCHW or NHWC), not the numbers
    "pool": {
        "mode",
        "padding",
        "pool_size",
        "strides",
        "dilation_rate",
        "dropout",
        "use_time_mask",
        "use_channel_first",
        "in_spatial_dims",  # checked: the axes netc pools over
    },
    "sparse_softmax_cross_entropy_with_logits": {"logits", "targets", "axis"},
    **convnorm.KNOWN,
    **logic.KNOWN,
    **transformer.KNOWN,
    **masked.KNOWN,
    **last_state.KNOWN,
    **sharing.KNOWN,
    **windows.KNOWN,
    **recunits.KNOWN,
    **axes.KNOWN,
    **passthrough.KNOWN,
}
_NOT_NETC = {**logic.NOT_NETC, **sharing.NOT_NETC, **passthrough.NOT_NETC}


def _shown(layers: list[str]) -> str:
    return ", ".join(f"`{x}`" for x in layers[:3]) + (f" and {len(layers) - 3} more" if len(layers) > 3 else "")


def _is_root(d: dict) -> bool:
    return isinstance(d, dict) and bool(d.get("is_output_layer") or d.get("loss"))
