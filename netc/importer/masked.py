"""Layers that hold other layers, and state updated on some steps only: `subnetwork` (its layers
inlined with prefixed names), `masked_computation`/`unmask` in a rec unit (the unit's states
kept where the mask is False: `where`), `masked_computation` of a `copy` unit outside one (the
frames where the mask holds: `compact_frames`), and a `rec` LSTM unit inside a rec unit (one LSTM step,
written out with the gate blocks of NativeLSTM2 so that its states are the loop's own and can
be kept by a mask; RETURNN's `W`, `W_re`, `b`)."""

from __future__ import annotations

import libcst as cst

from netc.importer.dims import BATCH
from netc.importer.syntax import Expr, binop, call, identifier, name
from netc.importer.values import Refused, Scope, Val, feature, sources
from netc.importer.writer import Assign, ModuleRef

KNOWN = {
    "subnetwork": {"subnetwork", "concat_sources", "dropout", "load_on_init", "n_out"},
    "masked_computation": {"mask", "unit", "masked_from", "in_spatial_dim", "out_spatial_dim"},
    "unmask": {"mask"},
}


def loop_scope(scope: Scope) -> Scope:
    """The rec unit's scope that `scope` (a unit's or a subnetwork's in it) is part of."""
    while scope.sub:
        scope = scope.outer
    return scope


class MaskedLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _child(self, scope: Scope, layers: dict, path: str, prefix: str, frame: Val | None) -> Scope:
        """A scope of a subnetwork's layers: its statements go where the parent's go, `data` is
        `frame`, `base:x` the parent's `x`, names prefixed by the layer's."""
        # a `masked_computation`'s unit is a layer of the rec unit: its `base:` is the rec unit's
        outer = scope.outer if scope.masked and scope.outer is not None else scope
        child = Scope(layers, {}, scope.stmts, prefix, outer=outer, rec=scope.rec, frame=frame, time=scope.time)
        child.sub, child.path = True, path
        child.names = self._allocate(list(layers), set(), prefix=identifier(path.rsplit("/", 1)[-1]))
        self.used |= set(child.names.values())
        return child

    def _l_subnetwork(self, layer, d, scope, var, full) -> Val:
        """The subnetwork's layers inline (`<layer>_<sub>` where the name is taken), its `output`
        the layer's value; its parameters are `<layer>/<sub>/...`, as RETURNN's."""
        sub = d.get("subnetwork")
        if not isinstance(sub, dict) or "output" not in sub:
            raise Refused(full, "subnetwork", "a `subnetwork` dict with an `output` layer is needed")
        if d.get("concat_sources", True) is not True:
            raise Refused(full, "subnetwork", "concat_sources False not supported")
        frame = self._source(d, scope, full) if sources(d) else None
        child = self._child(scope, sub, full, f"{self._tf_prefix(layer, d, scope)}/", frame)
        out = self.get("output", child)
        for name_, ld in sub.items():  # losses and output layers inside: not yet
            if isinstance(ld, dict) and (ld.get("loss") or ld.get("is_output_layer")) and name_ != "output":
                raise Refused(f"{full}/{name_}", str(ld.get("class")), "a loss or output layer inside a `subnetwork`")
        if sub["output"].get("loss") if isinstance(sub["output"], dict) else False:
            raise Refused(f"{full}/output", "?", "a loss inside a `subnetwork`")
        if isinstance(d.get("n_out"), int):  # RETURNN checks it is the output's
            size = self.dims.size(out.sparse) if out.sparse is not None else None
            feats = [x for x in out.dims if self.dims.is_static(x)]
            size = size if size is not None else self.dims.size(feats[-1]) if feats else None
            if size != d["n_out"]:
                raise Refused(full, "subnetwork", f"n_out {d['n_out']}, but its `output` has {size}")
        if d.get("load_on_init") is not None:  # how RETURNN initialises the parameters, as `forward_weights_init`
            self.notes.append(
                f"layer `{full}` (subnetwork): RETURNN initialises its parameters from `load_on_init` "
                f"({d['load_on_init']!r}); the imported model's come from --checkpoint or --params "
                "(a checkpoint of the trained network has them), else its own initialisation"
            )
        self._emit(scope, var, out.expr, layer)
        return Val(name(var), out.dims, out.sparse, out.is_list)

    def _l_masked_computation(self, layer, d, scope, var, full) -> Val:
        """In a rec unit: the unit computed each step, its states and its output (a state of the
        layer's own, from the unit's initial output, zeros) kept where the mask is False:
        `where(mask, new, old)`, as RETURNN's `masked_computation` does inside a loop."""
        if scope.rec is None:
            return self._masked_frames(layer, d, scope, var, full)
        for opt in ("masked_from", "in_spatial_dim", "out_spatial_dim"):
            if d.get(opt) is not None:
                raise Refused(full, "masked_computation", f"option {opt} not supported")
        unit = d.get("unit")
        if not isinstance(unit, dict) or not isinstance(unit.get("class"), str):
            raise Refused(full, "masked_computation", "`unit` must be a layer dict")
        if any(unit.get(k) not in (None, 0, 0.0, "zeros") for k in ("initial_output",)):
            raise Refused(full, "masked_computation", "a unit with an initial_output other than zeros")
        if not isinstance(d.get("mask"), str):
            raise Refused(full, "masked_computation", "`mask` must be a layer")
        mask = self.get(d["mask"], scope)
        if tuple(mask.dims) != (BATCH,) or mask.sparse is not None:
            raise Refused(full, "masked_computation", f"mask `{d['mask']}` is not one bool per sequence")
        frame = self._source(d, scope, full) if sources(d) else None
        if frame is not None and frame.sparse is not None and not frame.is_list:
            # RETURNN computes the unit on the steps the mask keeps only; netc on every step, so a
            # label there that the unit cannot look up (a transducer's blank beyond the classes
            # `set_sparse_dim` left) is label 0 instead: nothing kept reads those steps
            self.imports |= {"where", "full"}
            zero = call("full", name("batch"), value=cst.Integer("0"), class_dim=self.dim(frame.sparse))
            kept = self.fresh(f"{var}_in")
            comment = "the masked-away steps' labels as 0 (never read)"
            scope.stmts.append(Assign([kept], call("where", mask.tensor(), frame.tensor(), zero), comment=comment))
            frame = Val(name(kept), frame.dims, frame.sparse)
        # the unit is named as the layer (RETURNN: `<layer>/...` for its variables)
        child = Scope({layer: unit}, {}, scope.stmts, scope.prefix, outer=scope, rec=scope.rec, frame=frame)
        child.sub, child.time, child.masked = True, scope.time, True
        child.path = full[: -len(layer) - 1] if full.endswith("/" + layer) else None  # the unit is `full`
        child.names = {layer: self.fresh(f"{var}_unit")}
        masks = getattr(self, "_masks", None)
        if masks is None:
            masks = self._masks = []
        masks.append(mask.tensor())
        try:
            out = self.get(layer, child)
        finally:
            masks.pop()
        if out.sparse is not None or out.is_list:
            raise Refused(full, "masked_computation", "a unit whose value is labels or a sequence")
        loop = loop_scope(scope)
        feat = feature(out, self.dims)
        if tuple(out.dims) != (BATCH, feat):
            raise Refused(full, "masked_computation", "a unit whose value is not [batch, feature]")
        self.imports |= {"zeros", "where"}
        loop.outer.stmts.append(Assign([var], call("zeros", name("batch"), self.dim(feat)), comment="initial state"))
        comment = f"layer {layer!r} (masked_computation): kept where the mask is False"
        scope.stmts.append(Assign([var], call("where", mask.tensor(), out.expr, name(var)), comment=comment))
        return Val(name(var), out.dims)

    def _masked_frames(self, layer, d, scope, var, full) -> Val:
        """Outside a rec unit, with a `copy` unit: the source's frames where the mask [batch, time]
        holds, as a new time dim whose lengths are the mask's counts (`compact_frames`), as RETURNN
        gathers them (a transducer's emitted labels without the blanks, a CTC target)."""
        for opt in ("masked_from", "in_spatial_dim", "out_spatial_dim"):
            if d.get(opt) is not None:
                raise Refused(full, "masked_computation", f"option {opt} outside a rec unit not supported")
        unit = d.get("unit")
        copy = isinstance(unit, dict) and unit.get("class") == "copy" and set(unit) <= {"class", "from"}
        if not copy or unit.get("from", "data") not in ("data", ["data"]):
            raise Refused(
                full,
                "masked_computation",
                "outside a rec unit, a unit other than `copy` of its input (the masked frames as they are) "
                "not supported",
            )
        if not isinstance(d.get("mask"), str):
            raise Refused(full, "masked_computation", "`mask` must be a layer")
        mask = self.get(d["mask"], scope)
        src = self._source(d, scope, full)
        mask_time = [x for x in mask.dims if x != BATCH]
        if len(mask.dims) != 2 or BATCH not in mask.dims or mask.sparse is not None:
            raise Refused(full, "masked_computation", f"mask `{d['mask']}` is not one bool per frame [batch, time]")
        if not self.dims.is_dynamic(mask_time[0]):
            raise Refused(full, "masked_computation", f"mask `{d['mask']}` is not one bool per frame [batch, time]")
        time = next((x for x in src.dims if self.dims.find(x) == self.dims.find(mask_time[0])), None)
        if time is None:
            raise Refused(full, "masked_computation", f"its input has not the time dim of mask `{d['mask']}`")
        out = self.dims.fresh(f"{identifier(layer)}_time", None)
        self.imports.add("compact_frames")
        value = call("compact_frames", src.tensor(), mask.tensor(), axis=self.dim(time), out_axis=self.dim(out))
        self._emit(scope, var, value, layer)
        return Val(name(var), tuple(out if x == time else x for x in src.dims), src.sparse)

    def _l_unmask(self, layer, d, scope, var, full) -> Val:
        """In a rec unit the `masked_computation` it reads holds its value already: a copy."""
        srcs = sources(d)
        if scope.rec is None:
            raise Refused(full, "unmask", "outside a rec unit not supported (in a rec unit it is)")
        src_d = scope.layers.get(srcs[0]) if len(srcs) == 1 else None
        while isinstance(src_d, dict) and src_d.get("class") == "copy" and len(sources(src_d)) == 1:
            src_d = scope.layers.get(sources(src_d)[0])
        if not isinstance(src_d, dict) or src_d.get("class") != "masked_computation":
            raise Refused(full, "unmask", "of a `masked_computation` of the same unit (or a copy of one)")
        if src_d.get("mask") != d.get("mask"):
            raise Refused(full, "unmask", f"mask {d.get('mask')!r} is not its masked_computation's")
        val = self.get(srcs[0], scope)
        self._emit(scope, var, val.expr, layer)
        return Val(name(var), val.dims)

    def _lstm_step(self, layer, d, scope, var, full) -> Val:
        """A `rec` LSTM unit in a rec unit: one step of NativeLSTM2 written out, its states `h`
        (the layer's value) and `c` carried by the loop (zeros before it, or its `initial_state`);
        under a `masked_computation` each new state is kept only where the mask holds."""
        src = self._source(d, scope, full)
        out = self._out_dim(layer, d, full)
        if d.get("direction", 1) != 1 or src.sparse is not None or src.is_list:
            raise Refused(full, "rec", "an LSTM step in a rec unit of direction 1 over a dense frame is supported")
        if d.get("initial_output") not in (None, 0, 0.0, "zeros"):
            raise Refused(full, "rec", "an LSTM step with initial_output (RETURNN: use initial_state)")
        if d.get("initial_state") not in (None, 0, 0.0, "zeros") and str(d.get("unit")).lower() == "nativelstm":
            raise Refused(
                full, "rec", "initial_state of a `nativelstm` (v1) unit (RETURNN refuses it: use nativelstm2)"
            )
        init = self._lstm_initial_state(d, scope, full, out)
        prefix = self._tf_prefix(layer, d, scope, "/rec")
        c = self.fresh(f"{var}_c")
        self._lstm_cell_step(layer, scope, var, c, src, out, prefix, init)
        return Val(name(var), (BATCH, out))

    def _lstm_cell_step(
        self, layer: str, scope: Scope, var: str, c: str, src: Val, out: str, prefix: str, init: dict, stem: str = ""
    ) -> None:
        """NativeLSTM2's step on the frame `src`: `h` (`var`) and `c` states of the loop `scope`
        is in, set before it to `init` (`h`, `c`: values, zeros where absent); its other
        variables are named after `stem` (default `var`)."""
        stem = stem or var
        size = self.dims.size(out)
        base = identifier(layer)
        gates = self.dims.static(4 * size, f"{base}_gates")
        loop = loop_scope(scope)
        for state, key in ((var, "h"), (c, "c")):
            value = init.get(key)
            if value is None:
                value = call("zeros", name("batch"), self.dim(out))
            loop.outer.stmts.append(Assign([state], value, comment="initial state"))
        self.imports |= {"Linear", "split", "sigmoid", "tanh", "zeros"}

        def emit(targets: list[str], value: Expr, comment=None, module=None):
            scope.stmts.append(Assign(targets, value, comment=comment, module=module))

        ff, rec = self.fresh(f"{stem}_ff"), self.fresh(f"{stem}_rec")
        comment = f"layer {layer!r}: one LSTM step (NativeLSTM2's gates: cell input, input, forget, output)"
        emit([ff], call(call("Linear", self.dim(gates)), src.tensor()), comment, ModuleRef("linear", prefix))
        lin = call("Linear", self.dim(gates), with_bias=cst.Name("False"))
        emit([rec], call(lin, name(var)), None, ModuleRef("linear", prefix, {"W": "W_re"}))
        parts = [self.fresh(f"{stem}_{g}") for g in ("in", "gi", "gf", "go")]
        emit(parts, call("split", binop("+", name(ff), name(rec)), cst.List([cst.Element(self.dim(out))] * 4)))
        x_in, g_in, g_forget, g_out = (name(p) for p in parts)
        new_c = binop(
            "+", binop("*", name(c), call("sigmoid", g_forget)), binop("*", call("tanh", x_in), call("sigmoid", g_in))
        )
        masks = getattr(self, "_masks", None)
        if masks:
            self.imports.add("where")
            c_new, h_new = self.fresh(f"{c}_new"), self.fresh(f"{var}_new")
            emit([c_new], new_c)
            emit([h_new], binop("*", call("tanh", name(c_new)), call("sigmoid", g_out)))
            emit([c], call("where", masks[-1], name(c_new), name(c)), "kept where the mask is False")
            emit([var], call("where", masks[-1], name(h_new), name(var)))
        else:
            emit([c], new_c)
            emit([var], binop("*", call("tanh", name(c)), call("sigmoid", g_out)))

    def _lstm_initial_state(self, d: dict, scope: Scope, full: str, out: str) -> dict[str, Expr]:
        """The `initial_state` of an LSTM step as the values of its states `h` and `c`: RETURNN's
        (c, h) state tuple takes a dict with both keys or a list (c, h), each zeros or a layer
        of [batch, out] (`base:x` in a rec unit); one value for both only as zeros."""
        spec = d.get("initial_state")
        if spec in (None, 0, 0.0, "zeros"):
            return {}
        if isinstance(spec, dict) and set(spec) == {"c", "h"}:
            parts = spec
        elif isinstance(spec, list | tuple) and len(spec) == 2:
            parts = {"c": spec[0], "h": spec[1]}
        else:
            why = "a dict with the keys `c` and `h` (or a list (c, h)) of layers, or zeros"
            raise Refused(full, "rec", f"initial_state {spec!r}: the LSTM's state (c, h) takes {why}")
        init = {}
        for key, v in parts.items():
            if v in (None, 0, 0.0, "zeros"):
                continue
            special = v in ("ones", "var", "keep_over_epoch", "keep_over_epoch_no_init", "placeholder")
            if not isinstance(v, str) or special or (scope.rec is not None and not v.startswith("base:")):
                raise Refused(
                    full, "rec", f"initial_state {key!r}: {v!r} (zeros or a layer outside the rec unit, `base:x`)"
                )
            val = self.get(v, scope)
            dims = tuple(self.dims.find(x) for x in val.dims)
            if val.sparse is not None or val.is_list or dims != (BATCH, self.dims.find(out)):
                raise Refused(full, "rec", f"initial_state {key!r}: `{v}` is not [batch, {self.dims.size(out)}]")
            init[key] = val.expr
        return init
