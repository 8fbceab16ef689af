"""`gather` (one position of an axis, a number or a layer's per sequence: a one-hot `dot`; also
RETURNN's deprecated `gather_nd`, the same along the time dim) and
`reuse_params` (a `linear` layer with another's parameters: one module constructed once and
called by both, as netc shares a module's parameters; a `linear`/`softmax` layer whose W is
another `linear` layer's, `{"map": {"W": {"reuse_layer": L}, "b": None}}`, with
`use_transposed_weights` where it is read [out, in]: `Linear(dim, weight=<L's module>.weight)`);
layers netc has no op for, refused."""

from __future__ import annotations

import libcst as cst

from netc.importer.dims import BATCH
from netc.importer.syntax import Expr, call, compare, literal, name
from netc.importer.values import Refused, Scope, Val, feature
from netc.importer.writer import Assign, ModuleRef

KNOWN = {"gather": {"position", "axis", "clip_to_valid"}, "gather_nd": {"position"}}
SHARED_OPTS = {"reuse_params"}  # accepted on `linear` and `softmax`
NOT_NETC = {
    "relative_positional_encoding": (
        "RETURNN's learned table of clipped relative positions (Shaw et al.) is imported only where a "
        "`self_attention` outside rec units reads it as `key_shift`"
    ),
}


class SharingLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _l_gather(self, layer, d, scope, var, full) -> Val:
        """`dot(cast(range_over(axis) == position, "float32"), x, reduce=axis)`: exactly the
        frame at the position (a one-hot sum); a position past a sequence's end gives zeros where
        RETURNN reads the padded frame there."""
        src = self._source(d, scope, full)
        if src.sparse is not None or d.get("clip_to_valid"):
            raise Refused(full, "gather", "of labels, or with clip_to_valid, not supported")
        axis = self._axis(src, d.get("axis"))
        if isinstance(d.get("axis"), dict) and axis is not None and axis not in src.dims:
            axis = next((x for x in src.dims if self.dims.find(x) == self.dims.find(axis)), None)
        if axis is None or axis == BATCH or axis not in src.dims:
            raise Refused(full, "gather", f"axis {d.get('axis')!r} (T, F or a dim tag of the input is supported)")
        pos = d.get("position")
        if isinstance(pos, int) and not isinstance(pos, bool):
            if pos < 0:
                raise Refused(full, "gather", f"position {pos} (a position from 0 is supported)")
            position: Expr = literal(pos)
        elif isinstance(pos, str):
            val = self.get(pos, scope)
            if tuple(val.dims) != (BATCH,) or not self.dims.is_dynamic(axis):
                raise Refused(full, "gather", "a position layer of one int per sequence, along the time dim")
            position = val.tensor()
        else:
            raise Refused(full, "gather", f"position {pos!r} (a number or a layer is supported)")
        self.imports |= {"dot", "cast", "range_over"}
        # `:i`, a loop's step, is counted in float32 (`_step_counter`): the positions compared as such
        counted = isinstance(position, cst.Name) and position.value in self.step_counters.values()
        hit = call("range_over", self.dim(axis), **({"dtype": literal("float32")} if counted else {}))
        onehot = call("cast", compare("==", hit, position), literal("float32"))
        self._emit(scope, var, call("dot", onehot, src.tensor(), reduce=self.dim(axis)), layer)
        return Val(name(var), tuple(x for x in src.dims if x != axis))

    def _l_gather_nd(self, layer, d, scope, var, full) -> Val:
        """RETURNN's deprecated `gather_nd`: `x[position]` along the first axis after batch, for a
        position layer of one int per sequence the time dim: the `gather` along T."""
        if not isinstance(d.get("position"), str):
            raise Refused(full, "gather_nd", f"position {d.get('position')!r} (a layer is supported)")
        try:
            return self._l_gather(layer, {**d, "axis": "T"}, scope, var, full)
        except Refused as r:
            if r.layer != full:  # a layer it reads
                raise
            raise Refused(full, "gather_nd", r.why) from None

    def _reused(self, layer: str, scope: Scope) -> bool:
        """Whether a layer of the network reads `layer`'s parameters (`reuse_params`)."""
        return (
            scope.rec is None
            and not scope.sub
            and any(isinstance(ld, dict) and ld.get("reuse_params") == layer for ld in scope.layers.values())
        )

    def _shared_module(self, layer: str, d: dict, scope: Scope, full: str, ctor, kind: str, in_dim: str) -> Expr:
        """The module a layer whose parameters another reads, or that reads another's, calls: `ctor`
        (the module's construction, e.g. `ConvTranspose1d(dim, 3, stride=3)`) constructed once as
        `<owner>_<kind> = ...` where RETURNN keeps the owner's variables. The owner must be of the
        layer's class and constructed alike (the same sizes, strides, padding, bias, input dim)."""
        cls = str(d.get("class"))
        owner = d.get("reuse_params", layer)
        if scope.rec is not None or scope.sub:
            raise Refused(full, cls, "reuse_params in a rec unit or subnetwork not supported")
        od = scope.layers.get(owner) if isinstance(owner, str) else None
        if not isinstance(od, dict) or od.get("class") != cls or od.get("reuse_params"):
            raise Refused(full, cls, f"reuse_params {owner!r} (the name of a `{cls}` layer is supported)")
        modules = getattr(self, "_shared_modules", None)
        if modules is None:
            modules = self._shared_modules = {}
        code = f"{cst.Module([]).code_for_node(ctor)} of {self.dims.dims[self.dims.find(in_dim)].name}"
        if owner in modules:
            if modules[owner][1] != code:
                raise Refused(
                    full, cls, f"reuse_params of `{owner}`, constructed otherwise ({modules[owner][1]} and {code})"
                )
            return name(modules[owner][0])
        mod = self.fresh(f"{scope.names[owner]}_{kind}")
        modules[owner] = (mod, code)
        ref = ModuleRef(kind, self._tf_prefix(owner, od, scope))
        comment = f"the parameters of layer {owner!r}, also those of the layers with reuse_params"
        scope.stmts.append(Assign([mod], ctor, comment=comment, module=ref))
        return name(mod)

    def _shared_linear(self, layer: str, d: dict, scope: Scope, full: str, out: str, src: Val):
        """The `Linear` of a layer whose parameters another reads, or that reads another's:
        constructed once (`<owner>_linear = Linear(dim)`), called by each."""
        owner = d.get("reuse_params", layer)
        if scope.rec is not None or scope.sub:
            raise Refused(full, str(d.get("class")), "reuse_params in a rec unit or subnetwork not supported")
        od = scope.layers.get(owner) if isinstance(owner, str) else None
        if not isinstance(od, dict) or od.get("class") not in ("linear", "softmax") or od.get("reuse_params"):
            raise Refused(full, str(d.get("class")), f"reuse_params {owner!r} (a `linear` layer's name is supported)")
        if src.sparse is not None:
            raise Refused(full, str(d.get("class")), "reuse_params of a lookup (labels as input) not supported")
        bias = od.get("with_bias", True)
        if owner != layer:
            if d.get("with_bias", True) != bias or self._out_dim(owner, od, full) != out:
                raise Refused(full, str(d.get("class")), f"reuse_params of `{owner}`, whose dims or bias differ")
        modules = getattr(self, "_shared_modules", None)
        if modules is None:
            modules = self._shared_modules = {}
        if owner not in modules:
            modules[owner] = mod = self.fresh(f"{scope.names[owner]}_linear")
            args = {} if bias else {"with_bias": literal(False)}
            ref = ModuleRef("linear", self._tf_prefix(owner, od, scope))
            comment = f"the parameters of layer {owner!r}, also those of the layers with reuse_params"
            scope.stmts.append(Assign([mod], call("Linear", self.dim(out), **args), comment=comment, module=ref))
        self.imports.add("Linear")
        feat = feature(src, self.dims)
        dims = (*(x for x in src.dims if x != feat), out)
        return call(name(modules[owner]), src.tensor()), dims, None

    # --- a W read from another layer: netc's tied parameter ---------------------------------

    def _tied_to(self, d: dict, full: str) -> str | None:
        """The layer whose W this one's is (`reuse_params: {"map": {"W": {"reuse_layer": L}, "b":
        None}}`, `"W": L` alike; `b` left out without a bias), else None."""
        rp = d.get("reuse_params")
        if not isinstance(rp, dict) or "map" not in rp:
            return None
        cls = str(d.get("class"))
        form = "{'map': {'W': {'reuse_layer': layer}, 'b': None}} (a W of another layer, its own bias)"
        m = rp["map"]
        if set(rp) != {"map"} or not isinstance(m, dict) or not set(m) <= {"W", "b"} or "W" not in m:
            raise Refused(full, cls, f"reuse_params {rp!r} (supported: {form})")
        w = m["W"]
        owner = w.get("reuse_layer") if isinstance(w, dict) and set(w) == {"reuse_layer"} else w
        if not isinstance(owner, str) or m.get("b") is not None:
            raise Refused(full, cls, f"reuse_params {rp!r} (supported: {form})")
        if d.get("with_bias", True) and "b" not in m:  # RETURNN: every parameter of the layer in the map
            raise Refused(full, cls, "reuse_params map without `b` for a layer with a bias (RETURNN rejects it too)")
        return owner

    def _tie_owner(self, layer: str, scope: Scope) -> bool:
        """Whether a layer of the scope reads `layer`'s W (`reuse_params` map)."""
        for ld in scope.layers.values():
            rp = ld.get("reuse_params") if isinstance(ld, dict) else None
            w = rp.get("map", {}).get("W") if isinstance(rp, dict) and isinstance(rp.get("map"), dict) else None
            if (w.get("reuse_layer") if isinstance(w, dict) else w) == layer:
                return True
        return False

    def _owner_linear(self, layer: str, d: dict, scope: Scope, full: str, out: str, src: Val, transposed):
        """A `linear` layer whose W others read: `<layer>_mod = Linear(dim)` (an `Embedding` on
        labels) where RETURNN keeps its variables, then called."""
        if src.sparse is not None and d.get("with_bias", True):
            raise Refused(full, str(d.get("class")), "a lookup with a bias whose W another layer reads not supported")
        kind = "embedding" if src.sparse is not None else "linear"
        args = {} if d.get("with_bias", True) or kind == "embedding" else {"with_bias": literal(False)}
        ctor = call("Embedding" if kind == "embedding" else "Linear", self.dim(out), **args)
        self.imports.add("Embedding" if kind == "embedding" else "Linear")
        mod = self.fresh(f"{scope.names[layer]}_{kind}")
        ref = ModuleRef(kind, self._tf_prefix(layer, d, scope), transposed=transposed)
        comment = f"the parameters of layer {layer!r}; other layers read its W (reuse_params)"
        scope.stmts.append(Assign([mod], ctor, comment=comment, module=ref))
        if not hasattr(self, "_tie_modules"):
            self._tie_modules = {}
        self._tie_modules[(id(scope), layer)] = (mod, src, out)
        feat = src.sparse if src.sparse is not None else feature(src, self.dims)
        dims = (*src.dims, out) if src.sparse is not None else (*(x for x in src.dims if x != feat), out)
        return call(name(mod), src.tensor() if src.sparse is None else src.expr), dims, None

    def _tied_linear(self, layer: str, d: dict, scope: Scope, full: str, out: str, src: Val, owner: str):
        """`Linear(out, weight=<owner's module>.weight)(x)`: the owner (a `linear` layer of the same
        network or unit) is imported first, its W has this layer's dims (netc reads it transposed
        where the dims say so, as RETURNN's `use_transposed_weights` does)."""
        cls = str(d.get("class"))
        od = scope.layers.get(owner)
        if not isinstance(od, dict) or od.get("class") != "linear" or od.get("reuse_params") is not None:
            raise Refused(full, cls, f"reuse_params of {owner!r} (a `linear` layer of the same network is supported)")
        if src.sparse is not None:
            raise Refused(full, cls, "reuse_params map of a lookup (labels as input) not supported")
        self.get(owner, scope)  # called before this layer reads its W
        mod, osrc, oout = self._tie_modules[(id(scope), owner)]
        find = self.dims.find
        have = {find(osrc.sparse if osrc.sparse is not None else feature(osrc, self.dims)), find(oout)}
        feat = feature(src, self.dims)
        if have != {find(feat), find(out)} or len(have) != 2:
            raise Refused(
                full, cls, f"reuse_params of {owner!r}'s W, whose dims differ from this layer's (or are one dim)"
            )
        args = {"weight": cst.Attribute(value=name(mod), attr=name("weight"))}
        if not d.get("with_bias", True):
            args["with_bias"] = literal(False)
        self.imports.add("Linear")
        ref = ModuleRef("linear", self._tf_prefix(layer, d, scope))  # its own bias
        return (
            call(call("Linear", self.dim(out), **args), src.tensor()),
            (*(x for x in src.dims if x != feat), out),
            ref,
        )
