"""The states of a rec unit: `prev:x` reads the state `x`, which starts before the loop at the
layer's `initial_output` and has the dims of the layer's value, found without building the layer
(a state is read before its layer's statement)."""

from __future__ import annotations

import ast

import libcst as cst

from netc.importer.defaults import unsupported_class
from netc.importer.dims import BATCH
from netc.importer.syntax import call, identifier, literal, name, num
from netc.importer.values import CLASS_ALIASES, PREV, Refused, Scope, Val, feature, sources, tf_scope, value_sources
from netc.importer.writer import Assign, ModuleRef

# layers without `n_out` whose value is their sources concatenated on the feature dim
_CONCATENATES = {"copy", "activation", "dropout"}
# layers whose value has no outer time dim, whatever they read
_DROPS_TIME = {"generic_attention", "reduce", "merge_dims", "rnn_cell", "choice", "rec", "rec_unstack", "gather_nd"}


class States:
    """Mixed into `Importer` (netc.importer.layers)."""

    def _prev(self, layer: str, scope: Scope) -> Val:
        """`prev:layer` in a unit: the state, started before the loop by the layer's initial output."""
        if layer not in scope.layers:
            raise Refused(f"prev:{layer}", "?", f"no layer `{layer}` in the unit of `{scope.rec}`")
        if layer not in scope.states:
            d = scope.layers[layer]
            if isinstance(d, dict) and d.get("class") == "choice":  # a label state
                return self._label_state(layer, d, scope)
            if (choice := self._labels_of_choice(layer, scope, 0)) is not None:  # the same labels
                return self._label_state(layer, d, scope, scope.layers[choice])
            init = d.get("initial_output", 0)
            if isinstance(init, bool):  # a bool state (a mask): one per sequence
                return self._bool_state(layer, d, scope, init)
            if isinstance(init, int) and self._from_choice(layer, scope, 0):
                return self._int_state(layer, scope, init)
            feat = self._static_out(layer, d, scope, set())
            var = scope.names[layer]
            lstm_step = d.get("class") == "rec" and isinstance(d.get("unit"), str)
            if d.get("class") == "rnn_cell" or lstm_step:  # its statement starts its states (`initial_state`)
                scope.states[layer] = Val(name(var), (BATCH, feat))
                return Val(name(PREV + var), (BATCH, feat))
            # [batch, feat], or over an outer time dim (`accum_att_weights`); a state of no feature dim:
            # its values per frame (`_static_out` gives "")
            time = self._state_time(layer, scope, set())
            dims = (BATCH, *time, *([feat] if feat else []))
            shape = [name("batch"), *(self.dim(x) for x in dims[1:])]
            if not feat and not time:
                raise Refused(self._full(layer, scope), d.get("class", "?"), "cannot tell the dim of its state")
            if init in (0, "zeros", None, 0.0):
                value = call("zeros", *shape)
                self.imports.add("zeros")
            elif init in (1, "ones", 1.0):
                value = call("ones", *shape)
                self.imports.add("ones")
            elif isinstance(init, int | float):
                value = call("full", *shape, value=num(float(init)))
                self.imports.add("full")
            elif init == "var" and feat and not time:
                # a learned initial value, the same for each sequence: RETURNN's variable
                # `init_<layer>_var` in the layer's scope, zeros at first
                self.imports |= {"Bias", "zeros"}
                value = call(call("Bias", self.dim(feat)), call("zeros", name("batch"), self.dim(feat)))
                ref = ModuleRef("bias", self._tf_prefix(layer, d, scope), {"b": f"init_{tf_scope(layer)}_var"})
                scope.states[layer] = Val(name(var), (BATCH, feat))
                scope.outer.stmts.append(Assign([var], value, comment="initial state: learned", module=ref))
                return Val(name(PREV + var), (BATCH, feat))
            else:
                raise Refused(self._full(layer, scope), d.get("class", "?"), f"initial_output {init!r}")
            scope.states[layer] = Val(name(var), dims)
            scope.outer.stmts.append(Assign([var], value, comment="initial state"))
        state = scope.states[layer]  # (a label state: labels again at every read)
        return Val(name(PREV + scope.names[layer]), state.dims, state.sparse)

    def _from_choice(self, layer: str, scope: Scope, depth: int) -> bool:
        """Whether unit layer `layer` computes on a `choice`'s labels through `copy` and `eval`
        layers (their first source): an int per sequence (the latent attention configs' position
        `t`, a `choice` clipped to the sequence's frames)."""
        d = scope.layers.get(layer)
        if not isinstance(d, dict) or depth > 10:
            return False
        if d.get("class") == "choice":
            return True
        srcs = sources(d)
        if d.get("class") not in ("copy", "eval") or not srcs or not isinstance(srcs[0], str):
            return False
        return srcs[0] in scope.layers and self._from_choice(srcs[0], scope, depth + 1)

    def _int_state(self, layer: str, scope: Scope, init: int) -> Val:
        """`prev:` of an int per sequence computed from a `choice` (a position), started at the
        layer's `initial_output` (-1 in the latent attention configs: before the first frame)."""
        var = scope.names[layer]
        self.imports.add("full")
        value = call("full", name("batch"), value=num(init), dtype=literal("int32"))
        scope.states[layer] = Val(name(var), (BATCH,))
        scope.outer.stmts.append(Assign([var], value, comment="initial state"))
        return Val(name(PREV + var), (BATCH,))

    def _labels_of_choice(self, layer: str, scope: Scope, depth: int) -> str | None:
        """The unit's `choice` whose labels layer `layer` is (a `copy` of it, or an `eval` that is
        the identity, also one calling the config's functions that is the identity outside
        training: the transducer setups' SwitchOut `output_`), else None."""
        from netc.importer.config_eval import config_eval, reads_config

        d = scope.layers.get(layer)
        if not isinstance(d, dict) or depth > 10:
            return None
        srcs = sources(d)
        if len(srcs) != 1 or not isinstance(srcs[0], str) or srcs[0] not in scope.layers:
            return None
        if d.get("class") == "eval" and not d.get("activation") and not d.get("eval_locals"):
            code = d.get("eval")
            if reads_config(code):
                code = config_eval(code, self.cfg.path, self.cfg.values).code
            if not isinstance(code, str) or code.strip() != "source(0)":
                return None
        elif d.get("class") != "copy":
            return None
        src = scope.layers[srcs[0]]
        if isinstance(src, dict) and src.get("class") == "choice":
            return srcs[0]
        return self._labels_of_choice(srcs[0], scope, depth + 1)

    def _label_state(self, layer: str, d: dict, scope: Scope, choice: dict | None = None) -> Val:
        """`prev:` of the unit's `choice` (or of a layer that is its labels, `choice`): the
        previous step's label, before the first step the layer's `initial_output` (a label;
        RETURNN's default 0): `full(batch, value=k, class_dim=vocab)`."""
        full = self._full(layer, scope)
        init = d.get("initial_output", 0)
        init = 0 if init in ("zeros", None) else init
        target = self._target(choice or d, full)
        size = self.dims.size(target.sparse)
        if isinstance(init, bool) or not isinstance(init, int) or not 0 <= init < (size or 0):
            raise Refused(full, "choice", f"initial_output {init!r} (a label of the target's classes)")
        var = scope.names[layer]
        self.imports.add("full")
        value = call("full", name("batch"), value=num(init), class_dim=self.dim(target.sparse))
        scope.states[layer] = Val(name(var), (BATCH,), target.sparse)
        scope.outer.stmts.append(Assign([var], value, comment="initial state: the label before the first step"))
        return Val(name(PREV + var), (BATCH,), target.sparse)

    def _state_time(self, layer: str, scope: Scope, seen: set) -> tuple[str, ...]:
        """The outer time dim a unit layer's value has (read through `base:`), for its state:
        `accum_att_weights` [batch, enc_time, heads]."""
        d = scope.layers[layer]
        if not isinstance(d, dict) or d.get("class") in _DROPS_TIME:
            return ()
        srcs = value_sources(d)
        if d.get("class") == "scatter_nd" and isinstance(d.get("output_dim_via_time_from"), str):
            srcs = [d["output_dim_via_time_from"]]  # the positions' axis becomes its time dim
        for src in srcs:
            if src.startswith("base:"):
                own = self.dims.find(scope.time) if scope.time else None  # the loop's own: a frame
                outer = self.get(src[5:], scope.outer).dims
                dyn = tuple(x for x in outer if self.dims.is_dynamic(x) and self.dims.find(x) != own)
                if dyn:
                    return dyn[:1]
            elif src in scope.layers and src not in seen and not src.startswith(("prev:", "data")):
                found = self._state_time(src, scope, seen | {layer})
                if found:
                    return found
        return ()

    def _static_out(self, layer: str, d: dict, scope: Scope, seen: set) -> str:
        """The feature dim a unit layer gives, without building it (a state is read before its
        layer's statement)."""
        if "out_dim" in d and isinstance(d["out_dim"], dict):
            return self.dims.tag(d["out_dim"]["__dim__"])
        from netc.importer.attention import static_out

        if (found := static_out(self, layer, d, scope)) is not None:
            return found
        if isinstance(d.get("n_out"), int):
            return self.dims.static(d["n_out"], identifier(layer))
        cls = CLASS_ALIASES.get(d.get("class"), d.get("class"))
        if not hasattr(self, f"_l_{cls}"):  # not read through a layer netc does not import
            raise Refused(self._full(layer, scope), str(cls), unsupported_class(cls))
        seen = seen | {layer}
        if cls == "subnetwork" and isinstance(d.get("subnetwork"), dict):  # its `output`'s, within it
            return self._sub_static_out(layer, d["subnetwork"], "output", scope, set())
        srcs = value_sources(d)
        if cls in _CONCATENATES and len(srcs) > 1:  # its sources concatenated: the sum of their dims
            parts = [self._static_out(layer, {**d, "from": [x]}, scope, seen - {layer}) for x in srcs]
            if not all(parts):
                raise Refused(self._full(layer, scope), d.get("class", "?"), "cannot tell the dim of its state")
            return self.dims.derived(parts)
        # a `prev:x` has x's dim: read last (the other sources may tell it without a cycle)
        for src in sorted(srcs, key=lambda x: x.startswith("prev:")):
            if src.startswith("prev:") and src[5:] in scope.layers and src[5:] not in seen:
                src_d = scope.layers[src[5:]]
                if isinstance(src_d, dict) and src_d.get("class") != "choice":
                    return self._static_out(src[5:], src_d, scope, seen)
            if src.startswith("prev:") or src in seen:
                continue
            if src in scope.layers and src not in scope.vals and not src.startswith(("base:", "data")):
                return self._static_out(src, scope.layers[src], scope, seen)
            val = self.get(src, scope)
            if val.sparse is None and not any(self.dims.is_static(x) for x in val.dims):
                return ""  # values per frame of an outer time dim only (the state's `_state_time`)
            return feature(val, self.dims)
        raise Refused(self._full(layer, scope), d.get("class", "?"), "cannot tell the dim of its state")

    def _sub_static_out(self, layer: str, layers: dict, sub: str, scope: Scope, seen: set) -> str:
        """The feature dim of layer `sub` of a subnetwork (`layers`): its `n_out`/`out_dim`, else
        of the sub-layers it reads (concatenated)."""
        d = layers.get(sub)
        if not isinstance(d, dict) or sub in seen:
            raise Refused(self._full(layer, scope), "subnetwork", "cannot tell the dim of its state")
        if isinstance(d.get("out_dim"), dict):
            return self.dims.tag(d["out_dim"]["__dim__"])
        if isinstance(d.get("n_out"), int):
            return self.dims.static(d["n_out"], identifier(f"{layer}_{sub}"))
        srcs = [x for x in value_sources(d) if isinstance(x, str)]
        cls = CLASS_ALIASES.get(d.get("class"), d.get("class"))
        if not srcs or any(x not in layers for x in srcs) or (len(srcs) > 1 and cls not in _CONCATENATES):
            raise Refused(self._full(layer, scope), "subnetwork", "cannot tell the dim of its state")
        dims = [self._sub_static_out(layer, layers, x, scope, seen | {sub}) for x in srcs]
        return dims[0] if len(dims) == 1 else self.dims.derived(dims)

    def _per_sequence(self, src: str, scope: Scope, seen: set) -> bool:
        """Whether a unit layer's value is one per sequence, told without building the layers
        that read the unit's `choice` (they may read the state being made): the `choice` is one
        label per sequence, and so is an elementwise layer of such values."""
        key = src.removeprefix("prev:")
        d = scope.layers.get(key)
        if key in seen and isinstance(d, dict):
            return True  # a state's previous value: as the layer itself
        if not isinstance(d, dict) or key in scope.vals:
            return self.get(src, scope).dims == (BATCH,)
        if d.get("class") == "choice":
            return True
        if d.get("class") not in ("compare", "eval", "combine", "copy", "activation"):
            return self.get(src, scope).dims == (BATCH,)
        return all(self._per_sequence(x, scope, seen | {key}) for x in sources(d) if isinstance(x, str))

    def _bool_state(self, layer: str, d: dict, scope: Scope, init: bool) -> Val:
        """`prev:` of a `compare` (or an `eval` of `tf.logical_and/or/not`, or a `copy` of one) with
        a bool `initial_output` (RNA setups' `emit`): one bool per sequence, `full(batch, value=init, dtype="bool")` before the loop."""
        srcs = [s for s in sources(d) if isinstance(s, str)]
        if not _is_bool(d, scope.layers) or any(s.startswith("prev:") for s in srcs):
            raise Refused(
                self._full(layer, scope),
                str(d.get("class")),
                "a bool initial_output (of a `compare`, a logical `eval` or a `copy` of one)",
            )
        if not all(self._per_sequence(s, scope, {layer}) for s in srcs):
            raise Refused(self._full(layer, scope), "compare", "a bool state other than one per sequence")
        var = scope.names[layer]
        self.imports.add("full")
        value = call("full", name("batch"), value=name(str(init)), dtype=cst.SimpleString('"bool"'))
        scope.outer.stmts.append(Assign([var], value, comment="initial state"))
        scope.states[layer] = Val(name(var), (BATCH,))
        return Val(name(PREV + var), (BATCH,))


def _is_bool(d: dict, layers: dict, depth: int = 0) -> bool:
    """Whether a unit layer's value is a bool by its class: a `compare`, an `eval` of TF's logical
    functions, or a `copy` of one such layer of the unit."""
    if d.get("class") == "compare" or (d.get("class") == "eval" and _is_logical(d.get("eval"))):
        return True
    srcs = sources(d)
    if d.get("class") != "copy" or len(srcs) != 1 or depth > 10 or not isinstance(layers.get(srcs[0]), dict):
        return False
    return _is_bool(layers[srcs[0]], layers, depth + 1)


def _is_logical(code: object) -> bool:
    """An `eval` string whose value is TF's `logical_and/or/not` of its sources (a bool)."""
    from netc.importer.evals import LOGICAL

    if not isinstance(code, str):
        return False
    try:
        tree = ast.parse(code.strip(), mode="eval").body
    except SyntaxError:
        return False
    fn = ast.unparse(tree.func) if isinstance(tree, ast.Call) else ""
    return fn.startswith("tf.") and fn[3:].removeprefix("compat.v1.") in LOGICAL
